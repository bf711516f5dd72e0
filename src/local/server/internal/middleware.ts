/**
 * The two middlewares of the server.
 *
 * - `edge` wraps the whole app: the request id, the dashboard's static files at `/ui/` (no key: they hold no
 *   data, see `assets.ts`), authentication (Bearer; on the trace surface's paths also
 *   Basic, see `Auth.ts`; none on `/v1/local/sign-in`, which takes a one-time token, see `SignIn.ts`), the body size limit, the body checks of `admit.ts` (media type, JSON depth,
 *   the multipart form), and a last net that turns any failure left into a JSON 500 (the cause is logged, never sent). Every response it lets out
 *   carries `x-request-id`: the client's own when it sent a sane one (1 to 200 printable ASCII characters),
 *   else a generated UUID; the server's logs of the request are annotated with it (`request_id`). It also
 *   carries `x-idempotency-keys: honoured` (`TrainingApi.IDEMPOTENCY_KEYS_HEADER`): this backend answers a
 *   repeated `Idempotency-Key` with the first response, so clients may retry its creates.
 * - `errors` runs inside `HttpApiBuilder`'s app, before it encodes failures with the api's error schemas:
 *   it turns `HttpApiDecodeError` into FastAPI's 422 body, an unknown route into a JSON 404 (or 405 with
 *   `Allow` when the path is known under other methods), an unreadable or oversized body into 422 / 413, the
 *   trace service's errors into their `{reason}` bodies (see `trace/errors.ts`), a write refused for want of
 *   space into a 507 naming the data directory and the space left (see `DiskSpace`), and a defect into a JSON
 *   500.
 */
import * as HttpApp from "@effect/platform/HttpApp"
import * as IncomingMessage from "@effect/platform/HttpIncomingMessage"
import * as HttpServerError from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import type { ValidationError } from "../../../api/HttpValidationError.js"
import { IDEMPOTENCY_KEYS_HEADER, IDEMPOTENCY_KEYS_HONOURED } from "../../../api/TrainingApi.js"
import { fairScheduler, URGENT_PRIORITY } from "../../../internal/fairScheduler.js"
import { fullMessage, isDiskFull } from "../../store/DiskSpace.js"
import { SIGN_IN_PATH } from "../DashboardApi.js"
import { admit, MAX_OPENAI_BODY, surfaceError, tooLarge } from "./admit.js"
import { isUiPath, serveAsset } from "./assets.js"
import { buffered } from "./body.js"
import { crossFieldDetails } from "./issues.js"
import * as Responses from "./responses.js"
import { traceErrorResponse } from "./trace/errors.js"
import { isTracePath } from "./trace/paths.js"
import { jsonInvalid, type routes, validate } from "./validate.js"

const pathname = (request: HttpServerRequest.HttpServerRequest) => new URL(request.url, "http://localhost").pathname

const isMaxBytes = (error: unknown): boolean =>
  HttpServerError.isServerError(error) &&
  error._tag === "RequestError" &&
  error.cause instanceof Error &&
  error.cause.message === "maxBytes exceeded"

const isBodyError = (error: unknown): boolean => HttpServerError.isServerError(error) && error._tag === "RequestError"

const decodeIssues = (error: unknown): Array<ValidationError> => {
  const issues = Predicate.hasProperty(error, "issues") && Array.isArray(error.issues) ? error.issues : []
  return issues.map((issue: { path?: ReadonlyArray<string | number>; message?: string }) => ({
    loc: ["body", ...(issue.path ?? [])],
    msg: issue.message ?? "Invalid value",
    type: "value_error"
  }))
}

/**
 * The request with a body `edge` buffered (see `body.ts`). It is handed to the api's app by `errors`, not
 * put in place of the request by `edge`: `edge` runs around the platform's response writing, which needs the
 * original Node request.
 */
class BufferedRequest extends Context.Tag("effect-rl/local/server/BufferedRequest")<
  BufferedRequest,
  HttpServerRequest.HttpServerRequest
>() {}

/** Runs an effect with the buffered request, when there is one, as the request. */
const withBuffered = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(
    Effect.serviceOption(BufferedRequest),
    Option.match({
      onNone: () => effect,
      onSome: (request) => Effect.provideService(effect, HttpServerRequest.HttpServerRequest, request)
    })
  )

/** Options of the edge middleware. */
export interface EdgeOptions {
  /** Checks an `Authorization` header; `allowBasic` on the trace surface's paths (Basic as its SDKs send it). */
  readonly verify: (authorization: string | undefined, allowBasic: boolean) => boolean
  readonly maxBodySize: number
  /** Tells the paths whose routes take `multipart/form-data` (see `admit.ts`). */
  readonly isMultipart: (pathname: string) => boolean
}

/** A client's request id we echo: 1 to 200 printable ASCII characters (spaces allowed inside). */
const SANE_REQUEST_ID = /^[\x21-\x7E](?:[\x20-\x7E]{0,198}[\x21-\x7E])?$/

/** The request id of a request: the client's `x-request-id` when it is sane, else a new UUID. */
export const requestIdOf = (header: string | undefined): string =>
  header !== undefined && SANE_REQUEST_ID.test(header) ? header : crypto.randomUUID()

/** Auth, the body limit and the last net, around the app. */
const guard = <E, R>(options: EdgeOptions, app: HttpApp.HttpApp<HttpServerResponse.HttpServerResponse, E, R>) =>
  Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    // Parsed once: every check below asks for the path.
    const path = pathname(request)
    // The dashboard's static files hold no data: served without the key (the page asks for it).
    if (isUiPath(path)) return yield* serveAsset(path, request.method)
    // The sign-in endpoint takes a one-time token in its body instead of the key (see `SignIn`).
    const open = path === SIGN_IN_PATH
    const openAi = Responses.isOpenAiPath(path)
    if (!open && !options.verify(request.headers.authorization, isTracePath(path))) {
      return openAi
        ? Responses.openAi(401, "AuthenticationError", "Invalid or missing API key")
        : Responses.detail(401, "Invalid or missing API key")
    }
    // The OpenAI routes' bound is under the server's: a chunked body on them is refused once past it, not read
    // up to the server's limit first.
    const limit = openAi ? Math.min(options.maxBodySize, MAX_OPENAI_BODY) : options.maxBodySize
    const length = Number(request.headers["content-length"] ?? "0")
    if (!Number.isFinite(length) || length > limit) return tooLarge(path, limit)
    const next = yield* buffered(request, limit)
    if (next === undefined) return tooLarge(path, limit)
    const maxBodySize = Option.some(options.maxBodySize)
    const admitted = yield* IncomingMessage.withMaxBodySize(admit(next, path, options.isMultipart), maxBodySize)
    if (Either.isLeft(admitted)) return admitted.left
    const limited = IncomingMessage.withMaxBodySize(app, maxBodySize)
    return yield* admitted.right === request ? limited : Effect.provideService(limited, BufferedRequest, admitted.right)
  }).pipe(
    Effect.catchAllCause((cause) =>
      Cause.isInterruptedOnly(cause)
        ? Effect.interrupt
        : Effect.as(Effect.logError("Unhandled request failure", cause), Responses.internalError())
    )
  )

/**
 * Runs a request's effect on the fair scheduler (`internal/fairScheduler.ts`), which gives the event loop back
 * every few milliseconds, a `GET` or `HEAD` at its urgent priority: a read (health, a job's status, a list) is
 * short, and goes ahead of the work of requests that sample or write, so a probe waits one slice, not for a burst
 * of admissions. Set here, on the request's fiber, rather than as a layer: a layer's scheduler is the whole
 * program's that provides it (the caller's own fibers included).
 */
const fair =
  (method: string) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.withScheduler(
      method === "GET" || method === "HEAD" ? Effect.withSchedulingPriority(effect, URGENT_PRIORITY) : effect,
      fairScheduler
    )

/** The middleware around the whole app: request id, auth, body limit, and the last net for failures. */
export const edge =
  (options: EdgeOptions) =>
  <E, R>(app: HttpApp.HttpApp<HttpServerResponse.HttpServerResponse, E, R>) =>
    Effect.gen(function* () {
      const request = yield* HttpServerRequest.HttpServerRequest
      const requestId = requestIdOf(request.headers["x-request-id"])
      const tag = (response: HttpServerResponse.HttpServerResponse) =>
        HttpServerResponse.setHeaders(response, {
          "x-request-id": requestId,
          // This backend runs every create and log under `Idempotency-Key` (see `idempotency.ts`): said on
          // every response, so a client learns it from whatever it asked first.
          [IDEMPOTENCY_KEYS_HEADER]: IDEMPOTENCY_KEYS_HONOURED
        })
      // The app writes its response itself (the platform's response writing runs inside this middleware),
      // so the header goes on in a pre-response handler; the answers `guard` gives without the app get it here.
      const response = yield* guard(options, app).pipe(
        HttpApp.withPreResponseHandler((_, response) => Effect.succeed(tag(response))),
        Effect.annotateLogs("request_id", requestId),
        fair(request.method)
      )
      return tag(response)
    })

/**
 * The methods a path is served under (sorted), or none when no route has that path. `HEAD` is among them
 * with `GET`: the router answers it for every `GET` route.
 */
const allowedMethods = (table: ReturnType<typeof routes>, path: string): ReadonlyArray<string> => {
  const methods = new Set(table.filter((route) => route.pattern.test(path)).map((route) => route.method))
  if (methods.has("GET")) methods.add("HEAD")
  return [...methods].sort()
}

/** A write refused for want of space: 507 in the surface's error shape, naming the data directory. */
const diskFull = (request: HttpServerRequest.HttpServerRequest, dataDir: string | undefined) => {
  const message = fullMessage(dataDir)
  const path = pathname(request)
  const response = isTracePath(path)
    ? HttpServerResponse.unsafeJson({ reason: message }, { status: 507 })
    : Responses.isOpenAiPath(path)
      ? Responses.openAi(507, "InsufficientStorageError", message)
      : Responses.detail(507, message)
  // Trying again at once cannot help (clients of the convention retry 5xx unless told not to).
  return HttpServerResponse.setHeader(response, "x-should-retry", "false")
}

/** The middleware inside the api's app, before its error encoding. */
export const errors =
  (table: ReturnType<typeof routes>, maxBodySize: number, dataDir?: string | undefined) =>
  (app: HttpApp.Default): HttpApp.Default =>
    withBuffered(
      Effect.catchAllCause(app, (cause) =>
        Effect.gen(function* () {
          const request = yield* HttpServerRequest.HttpServerRequest
          const failure = Cause.failureOption(cause)
          if (Option.isSome(failure)) {
            const error: unknown = failure.value
            if (Predicate.isTagged(error, "HttpApiDecodeError")) {
              const details = yield* validate(table, request)
              const first = details[0]
              if (
                first !== undefined &&
                Responses.isOpenAiPath(pathname(request)) &&
                details.every((d) => crossFieldDetails.has(d))
              ) {
                // The engine's semantic checks across fields are 400s in the OpenAI shape, as the convention has it.
                const param = first.loc.slice(1).join(".")
                return Responses.openAi(400, "BadRequestError", first.msg.replace(/^Value error, /, ""), param)
              }
              return Responses.invalid(details.length > 0 ? details : decodeIssues(error))
            }
            if (HttpServerError.isServerError(error) && error._tag === "RouteNotFound") {
              const allowed = allowedMethods(table, pathname(request))
              if (allowed.length === 0) return Responses.detail(404, "Not Found")
              // The path's own method, refused by the router for its parameter (longer than it takes, or not valid
              // percent-encoding): no such object, not another method.
              if (allowed.includes(request.method.toUpperCase())) return noSuchObject(pathname(request))
              return HttpServerResponse.setHeader(
                Responses.detail(405, "Method Not Allowed"),
                "allow",
                allowed.join(", ")
              )
            }
            if (isMaxBytes(error)) return tooLarge(pathname(request), maxBodySize)
            const trace = traceErrorResponse(error)
            if (trace !== undefined) return trace
            // A typed error of an endpoint: HttpApiBuilder encodes it with the endpoint's error schema.
            return yield* Effect.failCause(cause)
          }
          const defect = Cause.dieOption(cause)
          if (Option.isSome(defect) && isMaxBytes(defect.value)) return tooLarge(pathname(request), maxBodySize)
          if (Option.isSome(defect) && isDiskFull(defect.value)) {
            yield* Effect.logWarning(`a write was refused: ${fullMessage(dataDir)}`)
            return diskFull(request, dataDir)
          }
          if (Option.isSome(defect) && isBodyError(defect.value)) return Responses.invalid([jsonInvalid])
          if (Cause.isInterruptedOnly(cause)) return yield* Effect.failCause(cause)
          yield* Effect.logError("Request failed with a defect", cause)
          return Responses.internalError()
        })
      )
    )

/** A 404 for an object whose id the router could not take, in the path's surface's shape. */
const noSuchObject = (path: string): HttpServerResponse.HttpServerResponse => {
  const response = /^\/v1\/responses\/([^/]+)/.exec(path)
  return response === null
    ? surfaceError(path, 404, "NotFoundError", "Not Found")
    : Responses.openAi(404, "invalid_request_error", `Response with id '${response[1]}' not found.`)
}
