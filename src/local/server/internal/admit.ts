/**
 * What the server reads of a request body before any route sees it, so that every body it cannot read is
 * a 4xx at once (never a 500, never a hang):
 *
 * - JSON routes (all but the raw ones and `file/create`): a body must be JSON (no `Content-Type`, or
 *   `application/json`), else 415. The body is read and parsed once (the route's `request.json` gives that
 *   value) and its nesting depth counted: deeper than {@link MAX_JSON_DEPTH}, 400. Text that is not JSON has
 *   its depth counted by a scan that does not recurse (deeper than the limit, 400 too); its 422 stays the
 *   route's.
 * - `file/create` (and `files/create`): `multipart/form-data` with a boundary (else 415 / 400). The body is parsed here (by the
 *   runtime's `FormData` parser); a body that does not parse is 400, a missing or mistyped `project_id` or
 *   `file` part is FastAPI's 422 naming the part, a file name or text field over {@link MAX_FORM_NAME} /
 *   {@link MAX_FORM_FIELD} characters 400. The route then gets a fresh body with only the parts it takes.
 * - Raw routes (`/otel/v1/trace(s)`, `POST /v1/local/files`) read their bodies themselves, by content type.
 * - `call/upsert_batch` reads its JSON text itself (a batch of thousands of calls stored without a parse, see
 *   `trace/batchText.ts`): the media type is checked here, and a body the route does not read itself goes through
 *   {@link admitJson}, the same parse and depth check as any JSON route's.
 *
 * Errors come in the surface's own shape (see `responses.ts`): `{detail}` on the training surface,
 * `{error: {...}}` on the OpenAI-compatible one, `{reason}` on the trace surface.
 */
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import { jsonDepth, MAX_JSON_DEPTH, nestsDeeper, TOO_DEEP } from "../../../api/internal/jsonDepth.js"
import * as Responses from "./responses.js"
import { isTracePath } from "./trace/paths.js"
import type { Route } from "./validate.js"

/**
 * The largest body the OpenAI-compatible routes (chat completions, the Responses API) take, in bytes (4 MiB),
 * under the server's `maxBodySize` for the rest (training bodies of many trajectories can be large). A request's
 * text all becomes prompt tokens, so any request a model's context can take fits with room (a 131,072-token
 * context's worst is about 1 MiB; the embedded models take 2,048); a larger one is refused (413) before it is
 * parsed, and before it is read when it declares its length, so it cannot hold the event loop or the memory a
 * parse of tens of megabytes takes.
 */
export const MAX_OPENAI_BODY = 4 * 1024 * 1024

/** The 413 of a body over `limit` bytes, in the shape of the surface the path belongs to. */
export const tooLarge = (pathname: string, limit: number): HttpServerResponse.HttpServerResponse =>
  surfaceError(pathname, 413, "RequestEntityTooLargeError", `Request body exceeds the limit of ${limit} bytes`)

/** The longest file name or form field name `file/create` takes, in characters. */
export const MAX_FORM_NAME = 1024

/** The longest text field (`project_id`, `expected_digest`) `file/create` takes, in characters. */
export const MAX_FORM_FIELD = 4096

/** Paths whose routes read the body raw themselves. */
const RAW_PATHS = new Set(["/otel/v1/trace", "/otel/v1/traces", "/v1/local/files"])

/**
 * Paths of JSON routes that read the body's text themselves (`call/upsert_batch`: see `trace/batchText.ts`): the
 * media type is checked here, the rest left to the route, which calls {@link admitJson} for a body it does not read.
 */
const TEXT_PATHS = new Set(["/call/upsert_batch"])

/** Tells the paths of the routes whose payload is `multipart/form-data` (`file/create` and its alias). */
export const multipartPaths = (table: ReadonlyArray<Route>): ((pathname: string) => boolean) => {
  const patterns = table
    .filter(
      (route) => Option.isSome(route.payload) && HttpApiSchema.getMultipart(route.payload.value.ast) !== undefined
    )
    .map((route) => route.pattern)
  return (pathname) => patterns.some((pattern) => pattern.test(pathname))
}

/** An error response in the shape of the surface the path belongs to. */
export const surfaceError = (
  pathname: string,
  status: number,
  openAiType: string,
  message: string
): HttpServerResponse.HttpServerResponse => {
  if (isTracePath(pathname)) return HttpServerResponse.unsafeJson({ reason: message }, { status })
  return Responses.isOpenAiPath(pathname)
    ? Responses.openAi(status, openAiType, message)
    : Responses.detail(status, message)
}

/** The media type of a `Content-Type` header, lower case, without parameters. */
export const mediaTypeOf = (header: string | undefined): string =>
  (header ?? "").split(";")[0]?.trim().toLowerCase() ?? ""

/** JSON as the platform reads it: no media type, or `application/json` (a `…+json` type it would not parse). */
const isJsonMediaType = (mediaType: string) => mediaType === "" || mediaType === "application/json"

/** A method whose requests carry a body. */
const takesBody = (request: HttpServerRequest.HttpServerRequest) =>
  request.method !== "GET" && request.method !== "HEAD" && request.method !== "OPTIONS"

/** A request body worth reading: a length that is not zero. */
const hasBody = (request: HttpServerRequest.HttpServerRequest) =>
  request.headers["transfer-encoding"] !== undefined ||
  (request.headers["content-length"] !== undefined && request.headers["content-length"] !== "0")

const missing = (part: string, type = "missing", msg = "Field required") =>
  Responses.invalid([{ loc: ["body", part], msg, type }])

/**
 * The multipart body of `file/create`, parsed: a fresh request carrying only `project_id`,
 * `expected_digest` (when sent) and `file`, or the 4xx for a body that cannot be that.
 */
const admitForm = (
  request: HttpServerRequest.HttpServerRequest,
  pathname: string,
  body: ArrayBuffer
): Effect.Effect<Either.Either<HttpServerRequest.HttpServerRequest, HttpServerResponse.HttpServerResponse>> =>
  Effect.gen(function* () {
    const refuse = (status: number, message: string) => Either.left(surfaceError(pathname, status, "", message))
    const contentType = request.headers["content-type"] ?? ""
    const form = yield* Effect.tryPromise(() =>
      new Response(body, { headers: { "content-type": contentType } }).formData()
    ).pipe(Effect.either)
    if (Either.isLeft(form)) {
      return refuse(
        400,
        "The multipart/form-data body could not be parsed (a boundary that does not match, or a truncated part)"
      )
    }
    for (const name of form.right.keys()) {
      if (name.length > MAX_FORM_NAME)
        return refuse(400, `A form field name is longer than ${MAX_FORM_NAME} characters`)
    }
    const fields: Record<string, string> = {}
    for (const name of ["project_id", "expected_digest"]) {
      const value = form.right.get(name)
      if (value === null) continue
      if (typeof value !== "string") return Either.left(missing(name, "string_type", "Input should be a valid string"))
      if (value.length > MAX_FORM_FIELD) {
        return refuse(400, `The form field ${name} is longer than ${MAX_FORM_FIELD} characters`)
      }
      fields[name] = value
    }
    if (fields.project_id === undefined) return Either.left(missing("project_id"))
    const file = form.right.get("file")
    if (file === null) return Either.left(missing("file"))
    if (typeof file === "string") {
      return Either.left(missing("file", "value_error", `Expected UploadFile, received: <class 'str'>`))
    }
    if (file.name.length > MAX_FORM_NAME) return refuse(400, `The file name is longer than ${MAX_FORM_NAME} characters`)
    const clean = new FormData()
    for (const [name, value] of Object.entries(fields)) clean.append(name, value)
    clean.append("file", file, file.name)
    const headers = new Headers()
    for (const [name, value] of Object.entries(request.headers)) {
      if (name !== "content-type" && name !== "content-length" && name !== "transfer-encoding") headers.set(name, value)
    }
    return Either.right(
      HttpServerRequest.fromWeb(
        new Request(`http://localhost${request.url}`, { method: request.method, headers, body: clean })
      )
    )
  })

/**
 * The request as the routes may read it, or the 4xx for a body the server cannot read (see the module's
 * comment). `request` must have a body within the size limit already (`body.ts`), and the platform's body
 * limit must be in place, since the JSON body is read here through the platform.
 */
export const admit = (
  request: HttpServerRequest.HttpServerRequest,
  pathname: string,
  isMultipart: (pathname: string) => boolean
): Effect.Effect<Either.Either<HttpServerRequest.HttpServerRequest, HttpServerResponse.HttpServerResponse>> =>
  Effect.gen(function* () {
    if (!takesBody(request) || RAW_PATHS.has(pathname)) return Either.right(request)
    const mediaType = mediaTypeOf(request.headers["content-type"])
    // Even an empty body is parsed on the multipart route: the platform's parser waits for good on one.
    if (isMultipart(pathname)) {
      if (mediaType !== "multipart/form-data") {
        return Either.left(
          surfaceError(pathname, 415, "", `Unsupported media type ${mediaType || "(none)"}: send multipart/form-data`)
        )
      }
      if (!/;\s*boundary=/i.test(request.headers["content-type"] ?? "")) {
        return Either.left(surfaceError(pathname, 400, "", "The multipart/form-data Content-Type has no boundary"))
      }
      const body = yield* Effect.either(request.arrayBuffer)
      // A body that fails to arrive whole is left to the route's own reading, which answers it (422 / 413).
      if (Either.isLeft(body)) return Either.right(request)
      return yield* admitForm(request, pathname, body.right)
    }
    if (!hasBody(request)) return Either.right(request)
    if (!isJsonMediaType(mediaType)) {
      return Either.left(
        surfaceError(
          pathname,
          415,
          "UnsupportedMediaTypeError",
          `Unsupported media type ${mediaType}: send the body as application/json`
        )
      )
    }
    // The route reads the text itself, and goes through `admitJson` when it needs the parsed body.
    if (TEXT_PATHS.has(pathname)) return Either.right(request)
    if (Responses.isOpenAiPath(pathname) && Number(request.headers["content-length"] ?? Number.NaN) > MAX_OPENAI_BODY) {
      return Either.left(tooLarge(pathname, MAX_OPENAI_BODY))
    }
    return yield* admitJson(request, pathname)
  })

/**
 * A JSON body as routes get it: read, parsed once and its depth counted (see the module's comment); the request
 * then gives the parsed value as its `json`, or the 400 for a body nested too deep. A body that fails to arrive
 * whole, or is not JSON, is left to the route's own reading, which answers it. For the routes of
 * {@link TEXT_PATHS}, which read their text first and come here only for a body they do not read themselves.
 */
export const admitJson = (
  request: HttpServerRequest.HttpServerRequest,
  pathname: string
): Effect.Effect<Either.Either<HttpServerRequest.HttpServerRequest, HttpServerResponse.HttpServerResponse>> =>
  Effect.gen(function* () {
    if (!hasBody(request)) return Either.right(request)
    const text = yield* Effect.either(request.text)
    // A body that fails to arrive whole is left to the route's own reading, which answers it.
    if (Either.isLeft(text)) return Either.right(request)
    if (Responses.isOpenAiPath(pathname) && Buffer.byteLength(text.right) > MAX_OPENAI_BODY) {
      return Either.left(tooLarge(pathname, MAX_OPENAI_BODY))
    }
    // Parsed once here: the depth is counted on the value (a text scan costs about as much as the parse), and
    // the route reads this value. Text that is not JSON is scanned, and its parse error left to the route.
    const parsed = parseJson(text.right)
    const tooDeep =
      parsed === NOT_JSON
        ? jsonDepth(text.right, MAX_JSON_DEPTH) > MAX_JSON_DEPTH
        : nestsDeeper(parsed.value, MAX_JSON_DEPTH)
    if (tooDeep) {
      return Either.left(surfaceError(pathname, 400, "BadRequestError", TOO_DEEP))
    }
    return Either.right(parsed === NOT_JSON ? request : withJson(request, parsed.value))
  })

/** Text that `JSON.parse` refuses (or that nests too deep for it). */
const NOT_JSON: unique symbol = Symbol("effect-rl/local/server/admit/NotJson")

/** The body's JSON as the platform reads it (an empty body is `null`), or {@link NOT_JSON}. */
const parseJson = (text: string): { readonly value: unknown } | typeof NOT_JSON => {
  try {
    return { value: text === "" ? null : JSON.parse(text) }
  } catch {
    return NOT_JSON
  }
}

/**
 * The request with its body's JSON already parsed: `json` gives that value (the platform's parses the text again
 * at each read); everything else is the request's own.
 */
const withJson = (request: HttpServerRequest.HttpServerRequest, value: unknown): HttpServerRequest.HttpServerRequest =>
  Object.create(request, { json: { value: Effect.succeed(value) } })
