/**
 * The training service's health endpoints.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { JsonValue, OtherKeys } from "./Json.js"

/** The body of `GET /v1/health`: free-form JSON (an empty body reads as null). */
export const Health = JsonValue
/** @see {@link Health} */
export type Health = typeof Health.Type

/** The result of one queue check of the system check. */
export const QueueCheck = Schema.Struct(
  {
    success: Schema.optional(Schema.Boolean),
    duration: Schema.optional(Schema.NullOr(Schema.Finite)),
    errors: Schema.optional(Schema.NullOr(Schema.Array(Schema.String)))
  },
  OtherKeys
).annotations({ identifier: "QueueCheck" })
/** @see {@link QueueCheck} */
export type QueueCheck = typeof QueueCheck.Type

/** The body of `GET /v1/system-check` (503 when a check fails). Keys not named here are kept. */
export const SystemCheck = Schema.Struct(
  {
    api: Schema.optional(Schema.Boolean),
    database: Schema.optional(Schema.Boolean),
    cpu_queue: Schema.optional(Schema.NullOr(QueueCheck)),
    gpu_queue: Schema.optional(Schema.NullOr(QueueCheck))
  },
  OtherKeys
).annotations({ identifier: "SystemCheck" })
/** @see {@link SystemCheck} */
export type SystemCheck = typeof SystemCheck.Type
