/**
 * The training service's health endpoints.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { JsonValue, OtherKeys, optionalKey } from "./Json.js"

/** The body of `GET /v1/health`: free-form JSON (an empty body reads as null). */
export const Health = JsonValue
/** @see {@link Health} */
export type Health = typeof Health.Type

/** The result of one queue check of the system check. */
export const QueueCheck = Schema.Struct(
  {
    success: optionalKey(Schema.Boolean),
    duration: optionalKey(Schema.NullOr(Schema.Finite)),
    errors: optionalKey(Schema.NullOr(Schema.Array(Schema.String)))
  },
  OtherKeys
).annotations({ identifier: "QueueCheck" })
/** @see {@link QueueCheck} */
export type QueueCheck = typeof QueueCheck.Type

/** The body of `GET /v1/system-check` (503 when a check fails). Keys not named here are kept. */
export const SystemCheck = Schema.Struct(
  {
    api: optionalKey(Schema.Boolean),
    database: optionalKey(Schema.Boolean),
    cpu_queue: optionalKey(Schema.NullOr(QueueCheck)),
    gpu_queue: optionalKey(Schema.NullOr(QueueCheck))
  },
  OtherKeys
).annotations({ identifier: "SystemCheck" })
/** @see {@link SystemCheck} */
export type SystemCheck = typeof SystemCheck.Type
