/**
 * The model list of the inference service (surface C); the embedded backend also serves it.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/** A model that can be named in chat completions. `root` is the model it derives from. */
export const InferenceModel = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("model"),
  created: Schema.Int,
  owned_by: Schema.String,
  root: Schema.optional(Schema.NullOr(Schema.String)),
  parent: Schema.optional(Schema.NullOr(Schema.String)),
  max_model_len: Schema.optional(Schema.NullOr(Schema.Int))
}).annotations({ identifier: "InferenceModel" })
/** @see {@link InferenceModel} */
export type InferenceModel = typeof InferenceModel.Type

/** The list envelope: `{object: "list", data}`. */
export const ModelList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(InferenceModel)
}).annotations({ identifier: "ModelList" })
/** @see {@link ModelList} */
export type ModelList = typeof ModelList.Type
