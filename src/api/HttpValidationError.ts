/**
 * The validation error body shared by the training and trace services: the FastAPI
 * `HTTPValidationError`, returned with status 422 when a request fails its schema.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/** One failed check: where (`loc`, e.g. `["body", "trajectory_groups", 0, "reward"]`), what, and its kind. */
export const ValidationError = Schema.Struct({
  loc: Schema.Array(Schema.Union(Schema.String, Schema.Int)),
  msg: Schema.String,
  type: Schema.String
}).annotations({ identifier: "ValidationError" })

/** @see {@link ValidationError} */
export type ValidationError = typeof ValidationError.Type

/** The 422 body: `{detail?: ValidationError[]}`. */
export const HTTPValidationError = Schema.Struct({
  detail: Schema.optional(Schema.Array(ValidationError))
}).annotations({ identifier: "HTTPValidationError" })

/** @see {@link HTTPValidationError} */
export type HTTPValidationError = typeof HTTPValidationError.Type
