/**
 * The HTTP pipeline every client shares: one `HttpClient` built once (base URL, bearer token, user agent,
 * the caller's `transformClient`), and per call the encoding of the request, the per-attempt timeout, the
 * retry policy, the mapping of every failure to `ApiError`, and the decoding of the body.
 *
 * @internal
 */
import type * as HttpBody from "@effect/platform/HttpBody"
import * as HttpClient from "@effect/platform/HttpClient"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import type { HttpMethod } from "@effect/platform/HttpMethod"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Random from "effect/Random"
import type * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import type { ValidationError } from "../../api/HttpValidationError.js"
import { version } from "../../internal/version.js"
import { ApiError, isRetryableStatus, reasonOfStatus } from "../ApiError.js"
import { timeoutFail } from "./timeout.js"

/** Options every client layer takes. */
export interface ClientOptions {
  /** The API key, sent as `Authorization: Bearer <key>`. */
  readonly apiKey?: Redacted.Redacted | undefined
  /** The service's base URL (a trailing `/v1` is accepted and dropped: paths carry it). */
  readonly baseUrl?: string | URL | undefined
  /** How many times a retryable call is retried (default 3). */
  readonly maxRetries?: number | undefined
  /** The time limit of one attempt (default 10 minutes). */
  readonly timeout?: Duration.DurationInput | undefined
  /** A hook to own the HTTP client's policy: applied after the base URL, auth and user agent are set. */
  readonly transformClient?: ((client: HttpClient.HttpClient) => HttpClient.HttpClient) | undefined
}

/** The default number of retries of a retryable call. */
export const DEFAULT_MAX_RETRIES = 3
/** The default time limit of one attempt. */
export const DEFAULT_TIMEOUT = Duration.minutes(10)
/** The longest `retry-after` honoured; a longer one falls back to the exponential backoff. */
export const MAX_RETRY_AFTER = Duration.seconds(60)
/** The longest excerpt of a body kept in an error. */
const EXCERPT_LENGTH = 512

/** The built pipeline of one client. */
export interface Transport {
  readonly client: HttpClient.HttpClient
  readonly maxRetries: number
  readonly timeout: Duration.Duration
}

/** Normalise a base URL: no trailing slash, no trailing `/v1` (the endpoint paths carry it). */
export const normalizeBaseUrl = (url: string | URL): string => {
  let s = url.toString().trim()
  while (s.endsWith("/")) s = s.slice(0, -1)
  if (s.endsWith("/v1")) s = s.slice(0, -3)
  return s
}

/** Build the shared pipeline from the platform client and the options. */
export const makeTransport = (
  httpClient: HttpClient.HttpClient,
  options: ClientOptions & { readonly baseUrl: string | URL }
): Transport => {
  const baseUrl = normalizeBaseUrl(options.baseUrl)
  const apiKey = options.apiKey
  const client = httpClient.pipe(
    HttpClient.mapRequest((request) => {
      let r = HttpClientRequest.prependUrl(request, baseUrl).pipe(
        HttpClientRequest.setHeader("User-Agent", `effect-rl/${version}`),
        // A call that asks for something else (an event stream) keeps its own Accept.
        (r) => (r.headers.accept === undefined ? HttpClientRequest.acceptJson(r) : r)
      )
      if (apiKey !== undefined) r = HttpClientRequest.bearerToken(r, apiKey)
      return r
    }),
    options.transformClient ?? ((client) => client)
  )
  return {
    client,
    maxRetries: Math.max(0, options.maxRetries ?? DEFAULT_MAX_RETRIES),
    timeout: Duration.decode(options.timeout ?? DEFAULT_TIMEOUT)
  }
}

/** One call on the wire. */
export interface Call {
  readonly method: HttpMethod
  /** The concrete path, parameters substituted. */
  readonly path: string
  /** The query; an array value is repeated (`digests=a&digests=b`). */
  readonly urlParams?: Readonly<Record<string, string | ReadonlyArray<string>>> | undefined
  /** The JSON body, already encoded. */
  readonly body?: string | undefined
  /** A body that is not JSON (multipart form, protobuf bytes), sent instead of `body`. */
  readonly rawBody?: HttpBody.HttpBody | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** Which failures may be retried for this call (see {@link RetryMode}). */
  readonly retry: RetryMode
}

/**
 * How a call may be retried: `true` on every failure the convention retries; `false` never; `"unsent"` only
 * when the request provably was not acted on: the connection could not be made (refused, DNS, unreachable:
 * nothing was sent), a 429, or a 503 that says to retry (`retry-after` / `retry-after-ms`, or
 * `x-should-retry: true`). Under `"unsent"` a definite refusal (another 4xx) is kept as it is, and anything
 * else (a time-out, a reset after sending, a 408, a 5xx, a success whose body broke or does not decode)
 * becomes `Ambiguous`. `{ keyHonoured }`: a call under an `Idempotency-Key`, `true` when the backend honours
 * the key, else `"unsent"`; asked only once a failure comes, so a call that succeeds costs nothing more.
 */
export type RetryMode = boolean | "unsent" | { readonly keyHonoured: Effect.Effect<boolean> }

/** The mode a call's failure is judged by: {@link RetryMode} with `keyHonoured` asked. */
export const resolveMode = (call: Pick<Call, "retry">): Effect.Effect<boolean | "unsent"> =>
  typeof call.retry === "object"
    ? Effect.map(call.retry.keyHonoured, (honoured) => (honoured ? true : "unsent"))
    : Effect.succeed(call.retry)

/** How an attempt failed, before the call's mode judges it. */
interface Failed {
  readonly error: ApiError
  /** `connect`: no response came; `status`: a non-2xx came; `body`: a 2xx came and then broke; `timeout`. */
  readonly stage: "connect" | "status" | "body" | "timeout"
  /** The connection was never made (nothing sent). */
  readonly notSent?: boolean
  readonly headers?: Readonly<Record<string, string | undefined>>
}

/** The error of a failed attempt under a resolved mode. */
const judge = (call: Call, mode: boolean | "unsent", failed: Failed): ApiError => {
  if (mode !== "unsent") return failed.error
  switch (failed.stage) {
    case "connect":
      return unsentOnly(call, failed.error, { notSent: failed.notSent ?? false })
    case "status":
      return unsentOnly(call, failed.error, { headers: failed.headers ?? {} })
    case "body":
    case "timeout":
      // A success came and then broke, or the request may still be running: acted on, or may be.
      return ambiguous(call, failed.error)
  }
}

/** The error codes of a connection that was never made: the request was not sent. */
const NOT_SENT_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EADDRNOTAVAIL"
])

/** The first string `code` along a cause chain (undici nests the socket's error). */
const errorCode = (cause: unknown): string | undefined => {
  let current = cause
  for (let depth = 0; depth < 4 && current !== null && typeof current === "object"; depth++) {
    const code = (current as { readonly code?: unknown }).code
    if (typeof code === "string") return code
    current = (current as { readonly cause?: unknown }).cause
  }
  return undefined
}

/** The `Idempotency-Key` a call carries, whatever the case of the header name. */
const keyOf = (call: Pick<Call, "headers">): string | undefined => {
  if (call.headers === undefined) return undefined
  for (const [name, value] of Object.entries(call.headers)) if (name.toLowerCase() === "idempotency-key") return value
  return undefined
}

/**
 * The `Ambiguous` error of a call whose outcome is unknown, keeping what the failure said (status, request id,
 * the original reason and description).
 */
export const ambiguous = (call: Pick<Call, "method" | "path" | "headers">, error: ApiError): ApiError => {
  const key = keyOf(call)
  const status = error.status === undefined ? "" : ` ${error.status}`
  return new ApiError({
    reason: "Ambiguous",
    method: call.method,
    path: call.path,
    status: error.status,
    description:
      `the outcome is unknown (${error.reason}${status}: ${error.description}): the service may have acted on ` +
      `the request and does not say it honours Idempotency-Key, so it was not repeated` +
      (key === undefined ? "" : ` (Idempotency-Key ${key})`),
    requestId: error.requestId,
    excerpt: error.excerpt,
    idempotencyKey: key,
    retryable: false
  })
}

/** An error of an `"unsent"` call as {@link RetryMode} says: retryable when provably unsent, else kept or `Ambiguous`. */
const unsentOnly = (
  call: Call,
  error: ApiError,
  evidence: { readonly notSent?: boolean; readonly headers?: Readonly<Record<string, string | undefined>> }
): ApiError => {
  if (error.reason === "InvalidRequest") return error
  if (evidence.notSent === true) return error.retryable ? error : new ApiError({ ...fieldsOf(error), retryable: true })
  const status = error.status
  if (status === 429) return error
  // Retryable unless the service said `x-should-retry: false`, which wins over its retry-after.
  if (status === 503 && (error.retryAfter !== undefined || evidence.headers?.["x-should-retry"] === "true")) {
    return error
  }
  if (status !== undefined && status >= 400 && status < 500 && status !== 408 && evidence.headers !== undefined) {
    return error.retryable ? new ApiError({ ...fieldsOf(error), retryable: false }) : error
  }
  return ambiguous(call, error)
}

/** The fields of an error, to copy it with a change. */
const fieldsOf = (error: ApiError): ConstructorParameters<typeof ApiError>[0] => ({
  reason: error.reason,
  method: error.method,
  path: error.path,
  status: error.status,
  description: error.description,
  requestId: error.requestId,
  retryAfter: error.retryAfter,
  detail: error.detail,
  excerpt: error.excerpt,
  errorType: error.errorType,
  code: error.code,
  param: error.param,
  idempotencyKey: error.idempotencyKey,
  retryable: error.retryable
})

const excerptOf = (text: string): string =>
  text.length <= EXCERPT_LENGTH ? text : `${text.slice(0, EXCERPT_LENGTH)}... (${text.length} characters)`

const formatLoc = (loc: ReadonlyArray<string | number>): string => loc.join(".")

/** The service's message and error fields, read from any of the body forms services use. */
const readErrorBody = (
  text: string
): {
  readonly description?: string
  readonly detail?: ReadonlyArray<ValidationError>
  readonly errorType?: string
  readonly code?: string | number
  readonly param?: string
} => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    return text.trim() === "" ? {} : { description: excerptOf(text.trim()) }
  }
  if (json === null || typeof json !== "object") return { description: excerptOf(text.trim()) }
  const body = json as Record<string, unknown>
  if (typeof body.detail === "string") return { description: body.detail }
  if (Array.isArray(body.detail)) {
    const detail: Array<ValidationError> = []
    for (const item of body.detail) {
      if (item !== null && typeof item === "object") {
        const { loc, msg, type } = item as Record<string, unknown>
        detail.push({
          loc: Array.isArray(loc) ? loc.filter((x) => typeof x === "string" || typeof x === "number") : [],
          msg: typeof msg === "string" ? msg : JSON.stringify(msg),
          type: typeof type === "string" ? type : "unknown"
        })
      }
    }
    return { description: detail.map((d) => `${formatLoc(d.loc)}: ${d.msg}`).join("; "), detail }
  }
  if (body.error !== null && typeof body.error === "object") {
    const error = body.error as Record<string, unknown>
    return {
      ...(typeof error.message === "string" ? { description: error.message } : {}),
      ...(typeof error.type === "string" ? { errorType: error.type } : {}),
      ...(typeof error.code === "string" || typeof error.code === "number" ? { code: error.code } : {}),
      ...(typeof error.param === "string" ? { param: error.param } : {})
    }
  }
  if (typeof body.error === "string") return { description: body.error }
  // The trace service's error bodies: `{"reason": "..."}`.
  if (typeof body.reason === "string") return { description: body.reason }
  if (typeof body.message === "string") return { description: body.message }
  return { description: excerptOf(text.trim()) }
}

/** Parse `retry-after-ms`, or `retry-after` in seconds or as an HTTP date (relative to `now`). */
export const parseRetryAfter = (
  headers: Readonly<Record<string, string | undefined>>,
  now: number
): Duration.Duration | undefined => {
  const ms = headers["retry-after-ms"]
  if (ms !== undefined && ms.trim() !== "") {
    const n = Number(ms)
    if (Number.isFinite(n) && n >= 0) return Duration.millis(Math.ceil(n))
  }
  const value = headers["retry-after"]
  if (value === undefined || value.trim() === "") return undefined
  const seconds = Number(value)
  if (Number.isFinite(seconds)) return seconds >= 0 ? Duration.millis(Math.ceil(seconds * 1000)) : undefined
  const date = Date.parse(value)
  if (Number.isNaN(date)) return undefined
  return Duration.millis(Math.max(0, date - now))
}

/** The request id a service gave in a response's headers (`x-request-id`, or `request-id`). */
export const requestIdOf = (headers: Readonly<Record<string, string | undefined>>): string | undefined =>
  headers["x-request-id"] ?? headers["request-id"]

/** Map a non-2xx response to its `ApiError`, reading its body. */
export const errorFromResponse = (
  call: Pick<Call, "method" | "path">,
  response: HttpClientResponse.HttpClientResponse
): Effect.Effect<ApiError> =>
  Effect.gen(function* () {
    const text = yield* response.text.pipe(Effect.orElseSucceed(() => ""))
    const now = yield* Clock.currentTimeMillis
    const status = response.status
    const body = readErrorBody(text)
    const shouldRetry = response.headers["x-should-retry"]
    return new ApiError({
      reason: reasonOfStatus(status),
      method: call.method,
      path: call.path,
      status,
      description: body.description ?? `HTTP ${status}`,
      requestId: requestIdOf(response.headers),
      retryAfter: parseRetryAfter(response.headers, now),
      detail: body.detail,
      errorType: body.errorType,
      code: body.code,
      param: body.param,
      retryable: shouldRetry === "true" ? true : shouldRetry === "false" ? false : isRetryableStatus(status)
    })
  })

/** Map a transport failure (no response, or the body could not be read) to `ApiError`. */
const errorFromTransport = (call: Pick<Call, "method" | "path">, error: HttpClientError.HttpClientError): ApiError => {
  const cause = error.cause
  const causeMessage =
    cause instanceof Error ? `${cause.message}${causeCode(cause)}` : cause === undefined ? "" : String(cause)
  const invalidUrl = error._tag === "RequestError" && error.reason === "InvalidUrl"
  return new ApiError({
    reason: invalidUrl ? "InvalidRequest" : "Transport",
    method: call.method,
    path: call.path,
    status: error._tag === "ResponseError" ? error.response.status : undefined,
    description: causeMessage === "" ? `${error.reason} error` : causeMessage,
    retryable: !invalidUrl
  })
}

const causeCode = (error: Error): string => {
  const inner = (error as { readonly cause?: unknown }).cause
  if (inner instanceof Error) {
    const code = (inner as { readonly code?: unknown }).code
    return typeof code === "string" ? ` (${code}: ${inner.message})` : ` (${inner.message})`
  }
  return ""
}

/** An `ApiError` for a request that broke its schema and was not sent. */
export const invalidRequest = (
  call: Pick<Call, "method" | "path">,
  location: "body" | "path" | "query",
  error: ParseResult.ParseError
): ApiError => {
  const detail: Array<ValidationError> = ParseResult.ArrayFormatter.formatErrorSync(error).map((issue) => ({
    loc: [location, ...issue.path.map((p) => (typeof p === "symbol" ? String(p) : p))],
    msg: issue.message,
    type: issue._tag
  }))
  return new ApiError({
    reason: "InvalidRequest",
    method: call.method,
    path: call.path,
    description: detail.map((d) => `${formatLoc(d.loc)}: ${d.msg}`).join("; "),
    detail,
    retryable: false
  })
}

/** An `ApiError` for a body that is not what its schema says. */
export const decodeError = (
  call: Pick<Call, "method" | "path">,
  status: number | undefined,
  requestId: string | undefined,
  text: string,
  what: string
): ApiError =>
  new ApiError({
    reason: "Decode",
    method: call.method,
    path: call.path,
    status,
    description: what,
    requestId,
    excerpt: excerptOf(text),
    retryable: false
  })

const backoff = (attempt: number, random: number): Duration.Duration =>
  Duration.millis(Math.round(Math.min(500 * 2 ** attempt, 8000) * (1 - 0.25 * random)))

/**
 * The retry schedule of a call: retryable failures only, at most `maxRetries` times, waiting the service's
 * `retry-after` when it is within 60 s, else `min(0.5 * 2^n, 8)` s with up to 25% jitter. Each retry is
 * logged at debug level and recorded as a span event with its attempt number.
 */
const retrySchedule = (call: Call, maxRetries: number) =>
  Schedule.recurs(maxRetries).pipe(
    Schedule.intersect(Schedule.identity<ApiError>()),
    Schedule.whileInput((error: ApiError) => error.retryable),
    Schedule.modifyDelayEffect(([n, error]) =>
      Effect.gen(function* () {
        const retryAfter = error.retryAfter
        const delay =
          retryAfter !== undefined &&
          Duration.greaterThan(retryAfter, Duration.zero) &&
          Duration.lessThanOrEqualTo(retryAfter, MAX_RETRY_AFTER)
            ? retryAfter
            : backoff(n, yield* Random.next)
        const attempt = n + 2
        yield* Effect.logDebug(
          `effect-rl: retrying ${call.method} ${call.path} (attempt ${attempt} of ${maxRetries + 1}) in ${Duration.format(delay)} after ${error.reason}${error.status === undefined ? "" : ` ${error.status}`}`
        )
        const span = yield* Effect.option(Effect.currentSpan)
        if (Option.isSome(span)) {
          span.value.event("effect-rl.retry", yield* Clock.currentTimeNanos, {
            attempt,
            reason: error.reason,
            ...(error.status === undefined ? {} : { status: error.status }),
            delay_ms: Duration.toMillis(delay)
          })
        }
        return delay
      })
    )
  )

/**
 * Send a call and hand the 2xx response to `onSuccess`, within the per-attempt timeout and the retry
 * policy. A non-2xx response becomes its `ApiError` (body read for the service's message).
 */
export const send = <A>(
  transport: Transport,
  call: Call,
  onSuccess: (response: HttpClientResponse.HttpClientResponse) => Effect.Effect<A, ApiError>
): Effect.Effect<A, ApiError> => {
  let request = HttpClientRequest.make(call.method)(call.path)
  if (call.urlParams !== undefined) request = HttpClientRequest.setUrlParams(request, call.urlParams)
  if (call.headers !== undefined) request = HttpClientRequest.setHeaders(request, call.headers)
  if (call.body !== undefined) request = HttpClientRequest.bodyText(request, call.body, "application/json")
  if (call.rawBody !== undefined) request = HttpClientRequest.setBody(request, call.rawBody)
  const attempt = transport.client.execute(request).pipe(
    Effect.mapError(
      (error): Failed => ({
        error: errorFromTransport(call, error),
        stage: "connect",
        notSent: NOT_SENT_CODES.has(errorCode(error.cause) ?? "")
      })
    ),
    Effect.flatMap((response) =>
      response.status >= 200 && response.status < 300
        ? Effect.mapError(onSuccess(response), (error): Failed => ({ error, stage: "body" }))
        : Effect.flatMap(errorFromResponse(call, response), (error) =>
            Effect.fail<Failed>({ error, stage: "status", headers: response.headers })
          )
    ),
    // `Effect.timeoutFail`, with one fiber rather than two under the live clock (see `timeout.ts`).
    (attempt) =>
      timeoutFail(attempt, {
        duration: transport.timeout,
        onTimeout: (): Failed => ({
          error: new ApiError({
            reason: "Timeout",
            method: call.method,
            path: call.path,
            description: `no complete response within ${Duration.format(transport.timeout)}`,
            retryable: true
          }),
          stage: "timeout"
        })
      }),
    Effect.catchAll((failed) =>
      typeof call.retry === "boolean"
        ? Effect.fail(failed.error)
        : Effect.flatMap(resolveMode(call), (mode) => Effect.fail(judge(call, mode, failed)))
    )
  )
  return call.retry !== false && transport.maxRetries > 0 ? retrying(attempt, call, transport.maxRetries) : attempt
}

/**
 * `Effect.retry(attempt, retrySchedule(call, maxRetries))`, with the schedule's driver made once an attempt fails:
 * the driver decides on each failure as `Effect.retry`'s does (its delay slept on the clock), but a call that
 * succeeds at once (most do) makes none (`Effect.retry` makes it, with its state and the iteration's metadata
 * provided to every attempt, ~30 steps of the fiber a call).
 */
const retrying = <A>(attempt: Effect.Effect<A, ApiError>, call: Call, maxRetries: number): Effect.Effect<A, ApiError> =>
  Effect.catchAll(attempt, (first) =>
    Effect.flatMap(Schedule.driver(retrySchedule(call, maxRetries)), (driver) => {
      const after = (error: ApiError): Effect.Effect<A, ApiError> =>
        Effect.matchEffect(driver.next(error), {
          onFailure: () => Effect.fail(error),
          onSuccess: () => Effect.catchAll(attempt, after)
        })
      return after(first)
    })
  )

/** Read a 2xx body as text, mapping a broken connection to `Transport`. */
/**
 * The `Transport` error of a 2xx response whose body broke while it was read (`what`: "stream" or "body"): not
 * retried, since part of it may already have been consumed.
 */
export const bodyBroke =
  (call: Pick<Call, "method" | "path">, response: HttpClientResponse.HttpClientResponse, what: "stream" | "body") =>
  (error: { readonly message: string }): ApiError =>
    new ApiError({
      reason: "Transport",
      method: call.method,
      path: call.path,
      status: response.status,
      description: `the ${what} broke: ${error.message}`,
      requestId: requestIdOf(response.headers),
      retryable: false
    })

export const readText = (
  call: Pick<Call, "method" | "path">,
  response: HttpClientResponse.HttpClientResponse
): Effect.Effect<string, ApiError> => Effect.mapError(response.text, (error) => errorFromTransport(call, error))

/** Decode a JSON body with a schema; an empty body reads as `null`. */
export const decodeJson = <A, I>(
  call: Pick<Call, "method" | "path">,
  schema: Schema.Schema<A, I>,
  text: string,
  status?: number,
  requestId?: string
): Effect.Effect<A, ApiError> => {
  let json: unknown = null
  if (text.trim() !== "") {
    try {
      json = JSON.parse(text)
    } catch (e) {
      return Effect.fail(
        decodeError(call, status, requestId, text, `the body is not JSON: ${e instanceof Error ? e.message : e}`)
      )
    }
  }
  return Schema.decodeUnknown(schema)(json, { errors: "all" }).pipe(
    Effect.mapError((error) =>
      decodeError(
        call,
        status,
        requestId,
        text,
        `the body does not match ${schemaName(schema)}: ${truncate(error.message, 2000)}`
      )
    )
  )
}

const truncate = (text: string, length: number): string =>
  text.length <= length ? text : `${text.slice(0, length)}...`

const schemaName = (schema: Schema.Schema.Any): string => {
  const id = schema.ast.annotations[Symbol.for("effect/annotation/Identifier")]
  return typeof id === "string" ? id : "its schema"
}
