/**
 * The validation error body shared by the training and trace services: the FastAPI
 * `HTTPValidationError`, returned with status 422 when a request fails its schema.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { JsonObject, JsonValue } from "./Json.js"

/**
 * One failed check: where (`loc`, e.g. `["body", "trajectory_groups", 0, "reward"]`), what, and its kind; and, as
 * the trace service's newest published document adds (pydantic v2 sends them), the `input` that failed and the
 * check's context (`ctx`, e.g. `{"le": 32}`), kept when a service sends them.
 */
export const ValidationError = Schema.Struct({
  loc: Schema.Array(Schema.Union(Schema.String, Schema.Int)),
  msg: Schema.String,
  type: Schema.String,
  input: Schema.optional(JsonValue),
  ctx: Schema.optional(JsonObject)
}).annotations({ identifier: "ValidationError" })

/** @see {@link ValidationError} */
export type ValidationError = typeof ValidationError.Type

/** The 422 body: `{detail?: ValidationError[]}`. */
export const HTTPValidationError = Schema.Struct({
  detail: Schema.optional(Schema.Array(ValidationError))
}).annotations({ identifier: "HTTPValidationError" })

/** @see {@link HTTPValidationError} */
export type HTTPValidationError = typeof HTTPValidationError.Type
