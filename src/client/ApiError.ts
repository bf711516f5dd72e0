/**
 * The one error of every effect-rl client call: a failure of the service or of the way to it, told apart
 * by `reason`. HTTP statuses, transport failures, time-outs and bodies that do not match their schema are
 * all mapped to it once, at the client boundary.
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import type * as Duration from "effect/Duration"
import type { ValidationError } from "../api/HttpValidationError.js"

/**
 * Why a call failed:
 * - `Validation` 422 (the `detail` list says which fields), `BadRequest` 400 and other 4xx not named here,
 *   `Unauthorized` 401, `PaymentRequired` 402, `Forbidden` 403, `NotFound` 404, `Conflict` 409,
 *   `RateLimited` 429 (with `retryAfter`), `InsufficientStorage` 507 (the service's disk is full: the
 *   description says what to free), `ServerError` other statuses >= 500 (524 gateway time-outs included);
 * - `Transport`: the connection was refused or reset; `Timeout`: an attempt ran out of time (or 408);
 * - `Decode`: the body did not match its schema (`excerpt` keeps the start of it);
 * - `InvalidRequest`: the request broke a constraint and was not sent (`detail` names the field);
 * - `Ambiguous`: a call that creates (a training job, a log) failed in a way that leaves its outcome unknown
 *   (a time-out or a reset after the request was sent, a 5xx such as a gateway's 502, 504 or 524, a success
 *   whose body could not be read) on a backend that does not say it honours `Idempotency-Key`: the call may
 *   have been applied, so it was not repeated. `status` is the status when one came, `idempotencyKey` the key
 *   it was sent with; the description says what happened.
 */
export type ApiErrorReason =
  | "Validation"
  | "BadRequest"
  | "Unauthorized"
  | "PaymentRequired"
  | "Forbidden"
  | "NotFound"
  | "Conflict"
  | "RateLimited"
  | "InsufficientStorage"
  | "ServerError"
  | "Transport"
  | "Timeout"
  | "Decode"
  | "InvalidRequest"
  | "Ambiguous"

/** A failed call of the training, inference or trace service. */
export class ApiError extends Data.TaggedError("ApiError")<{
  /** Why it failed. */
  readonly reason: ApiErrorReason
  /** The HTTP method of the call. */
  readonly method: string
  /** The URL path of the call (no host, no query). */
  readonly path: string
  /** The HTTP status, when a response came. */
  readonly status?: number | undefined
  /** What the service said (`detail`, `error.message`), or what went wrong on the way. */
  readonly description: string
  /** The request id the service gave (`x-request-id`). */
  readonly requestId?: string | undefined
  /** How long the service asked to wait before retrying (`retry-after-ms` or `retry-after`). */
  readonly retryAfter?: Duration.Duration | undefined
  /** The validation failures (422 from the service, or `InvalidRequest` before sending). */
  readonly detail?: ReadonlyArray<ValidationError> | undefined
  /** The start of a body that could not be decoded. */
  readonly excerpt?: string | undefined
  /** The `type` of an OpenAI-style error body (e.g. `BadRequestError`). */
  readonly errorType?: string | undefined
  /** The `code` of an OpenAI-style error body. */
  readonly code?: string | number | undefined
  /** The `param` of an OpenAI-style error body. */
  readonly param?: string | undefined
  /** The `Idempotency-Key` the call was sent with, if any. */
  readonly idempotencyKey?: string | undefined
  /** Whether retrying the same call may succeed (the service's `x-should-retry` wins when it gave one). */
  readonly retryable: boolean
}> {
  override get message(): string {
    const status = this.status === undefined ? "" : ` ${this.status}`
    const id = this.requestId === undefined ? "" : ` (request id ${this.requestId})`
    return `${this.method} ${this.path}:${status} ${this.reason}: ${this.description}${id}`
  }
}

/** The reason a response status maps to. */
export const reasonOfStatus = (status: number): ApiErrorReason => {
  switch (status) {
    case 400:
      return "BadRequest"
    case 401:
      return "Unauthorized"
    case 402:
      return "PaymentRequired"
    case 403:
      return "Forbidden"
    case 404:
      return "NotFound"
    case 408:
      return "Timeout"
    case 409:
      return "Conflict"
    case 422:
      return "Validation"
    case 429:
      return "RateLimited"
    case 507:
      return "InsufficientStorage"
    default:
      return status >= 500 ? "ServerError" : "BadRequest"
  }
}

/** Whether a status is worth retrying by the convention: 408, 409, 429 and >= 500. */
export const isRetryableStatus = (status: number): boolean =>
  status === 408 || status === 409 || status === 429 || status >= 500

/** Whether a failure is worth retrying. */
export const isRetryable = (error: ApiError): boolean => error.retryable
