/**
 * The error bodies of the trace service: `{"reason": "..."}` with status 400
 * (invalid request), 403 (invalid field), 404 (not found; a deleted object adds `deleted_at`) and 413 (too
 * large). Each status has its own class, so a server handler says which one it means and the body carries no
 * tag; the 422 body is `HttpValidationError.HTTPValidationError`.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/** 400: the request is invalid (a bad ref, a malformed query, an unknown op). */
export class InvalidRequest extends Schema.Class<InvalidRequest>("effect-rl/trace/InvalidRequest")({
  reason: Schema.String
}) {}

/** 403: a field the request may not set or query. */
export class InvalidField extends Schema.Class<InvalidField>("effect-rl/trace/InvalidField")({
  reason: Schema.String
}) {}

/** 404: nothing matches; `deleted_at` when what was asked for was deleted. */
export class NotFound extends Schema.Class<NotFound>("effect-rl/trace/NotFound")({
  reason: Schema.String,
  deleted_at: Schema.optional(Schema.NullOr(Schema.String))
}) {}

/** 413: the request or its result is too large. */
export class TooLarge extends Schema.Class<TooLarge>("effect-rl/trace/TooLarge")({
  reason: Schema.String
}) {}
