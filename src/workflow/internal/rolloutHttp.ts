/**
 * The OpenAI-compatible HTTP surface of a running rollout, on `@effect/platform`: {@link RolloutApi}, the
 * contract's own chat-completions, Responses and model-list endpoints (`src/api/`), with one set of handlers,
 * served in-process as a Web handler (`RolloutFetch`, `RolloutOpenAI`: {@link handler}) and by the platform's
 * Node server for the gateway (`gateway.ts`: {@link app}). Every completion is a recorded turn of the rollout
 * (`Rollout.chat`, `Rollout.chatStream`); nothing leaves the process but the policy's own calls.
 *
 * The app is built once; the rollout a request is answered in is its {@link Surface}, given per request
 * ({@link CurrentSurface}). Each completion runs in the rollout's own runtime (its context and fiber refs, so a
 * traced completion is a call under the rollout's), in the request's fiber: no promise between them, and a
 * request whose client goes away interrupts its completion.
 *
 * Routes (the path from its last `/v1`, so any base URL works):
 * - `POST /v1/chat/completions`: a completion of the rollout's policy, whole or (with `stream: true`) its chunks
 *   as server-sent events while they are sampled; what is recorded is the joined completion;
 * - `POST /v1/responses`, `GET`/`DELETE /v1/responses/{id}`, `GET /v1/responses/{id}/input_items`: the
 *   Responses API (`api/internal/responsesRoutes.ts`, the routes the embedded backend serves too), over the
 *   responses the rollout keeps;
 * - `GET /v1/models`: the rollout's policy (and its fixed policies) as the models.
 *
 * A body is read once, bounded ({@link DEFAULT_MAX_BODY_SIZE}: a 413 as soon as it is larger, before it is
 * buffered whole), parsed once and its nesting depth checked before any schema decodes it (`jsonDepth.ts`, the
 * check the embedded backend makes). Errors take the OpenAI shape `{error: {message, type, param, code}}`: a body
 * that is not JSON or fails the request schema is a 400 naming the field; what the policy's service refuses keeps
 * its status and message; an unknown route is a 404, a known one under another method a 405; a completion that
 * failed otherwise a 500 "the rollout's completion did not finish".
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpBody from "@effect/platform/HttpBody"
import * as HttpServerError from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Predicate from "effect/Predicate"
import type * as Runtime from "effect/Runtime"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { type ChatCompletionChunk, ChatCompletionRequest } from "../../api/ChatCompletion.js"
import { listModels } from "../../api/InferenceApi.js"
import { deepField, jsonDepth, MAX_JSON_DEPTH, nestsDeeper, TOO_DEEP } from "../../api/internal/jsonDepth.js"
import * as ResponsesRoutes from "../../api/internal/responsesRoutes.js"
import * as Started from "../../api/internal/started.js"
import { ResponseCreateRequest } from "../../api/Responses.js"
import { ResponsesGroup } from "../../api/ResponsesApi.js"
import { firstField, type StoredResponse } from "../../api/ResponsesChat.js"
import { createChatCompletion } from "../../api/TrainingApi.js"
import { ApiError } from "../../client/ApiError.js"
import { isNodeBody, readNodeBody } from "../../internal/nodeBody.js"
import type { Request as PolicyRequest } from "../Policy.js"
import * as Rollout from "../Rollout.js"
import { bodyLimit, DEFAULT_MAX_BODY_SIZE } from "./bodyLimit.js"
import { InvalidTurn } from "./recorder.js"

/** Options of a rollout's HTTP surface. */
export interface Options {
  /** Request fields used for every completion, under what the agent's request sets (e.g. a `seed`). */
  readonly request?: Partial<Omit<PolicyRequest, "messages">> | undefined
  /**
   * The largest request body taken, in bytes; beyond, a 413. Default: what the policy's context can hold
   * ({@link bodyLimit}).
   */
  readonly maxBodySize?: number | undefined
}

/** A Web-standard HTTP handler. */
export type Handler = (request: Request) => Promise<Response>

/** The rollout a request is answered in. */
export interface Surface {
  /** The rollout's runtime: its policy, its recorder, its fiber refs. */
  readonly runtime: Runtime.Runtime<Rollout.Current>
  /** The name the rollout's policy answers as. */
  readonly policyName: string
  /** Model names answered by a fixed policy, each in a runtime of its own (not the rollout's record). */
  readonly fixed: ReadonlyMap<string, Runtime.Runtime<Rollout.Current>>
  /** The surface's options. */
  readonly options: Options
  /** How its requests learn that the rollout ended (the gateway's rollouts); absent, they never do. */
  readonly ending?: Ending | undefined
}

/** How a surface's requests learn that its rollout has ended, and what they are answered then. */
export interface Ending {
  /** Whether the rollout has ended. */
  readonly ended: () => boolean
  /** Calls `stop` once the rollout ends; returns how to take it back. */
  readonly onEnd: (stop: () => void) => () => void
  /** The answer to a request in flight when the rollout ended. */
  readonly answer: () => HttpServerResponse.HttpServerResponse
}

/** The surface of the request being answered (given per request; see the module). */
export class CurrentSurface extends Context.Reference<CurrentSurface>()("effect-rl/workflow/RolloutSurface", {
  defaultValue: (): Surface | undefined => undefined
}) {}

/** The rollout's endpoints: the contract's chat completion, Responses and model-list endpoints. */
export class RolloutApi extends HttpApi.make("RolloutApi")
  .add(HttpApiGroup.make("chat", { topLevel: true }).add(createChatCompletion))
  .add(ResponsesGroup)
  .add(HttpApiGroup.make("models", { topLevel: true }).add(listModels)) {}

/** An error response in the OpenAI shape. */
export const errorResponse = (
  status: number,
  message: string,
  type: string,
  param: string | null = null,
  code: string | number | null = null
): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.unsafeJson({ error: { message, type, param, code } }, { status })

/** The 413 for a body over `limit` bytes. */
export const tooLarge = (limit: number): HttpServerResponse.HttpServerResponse =>
  errorResponse(413, `the request body is larger than ${limit} bytes`, "invalid_request_error")

const didNotFinish = () => errorResponse(500, "the rollout's completion did not finish", "server_error")

/**
 * A failed completion as the caller's error: an `InvalidTurn` is a 400, the service's `ApiError` keeps its status
 * and message; `undefined` for anything else (an interruption, a defect).
 */
const failureOf = (cause: Cause.Cause<unknown>): ResponsesRoutes.OpenAiError | undefined => {
  const failure = Option.getOrUndefined(Cause.failureOption(cause))
  if (failure instanceof InvalidTurn) {
    return { status: 400, type: "invalid_request_error", message: failure.message, param: null, code: null }
  }
  if (failure instanceof ApiError) {
    return {
      status: failure.status ?? 502,
      type: failure.errorType ?? "api_error",
      message: failure.description,
      param: failure.param ?? null,
      code: failure.code ?? null
    }
  }
  return undefined
}

const errorOf = (error: ResponsesRoutes.OpenAiError) =>
  errorResponse(error.status, error.message, error.type, error.param, error.code)

/** A failed completion's response: the caller's error, or a 500 (the cause logged); an interruption goes on. */
const failedResponse = (cause: Cause.Cause<unknown>): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
  // Interrupted (its agent went away, or its rollout ended): no answer of its own; the gateway answers an ended one.
  if (Cause.isInterruptedOnly(cause)) return Effect.interrupt
  const error = failureOf(cause)
  return error === undefined
    ? Effect.as(Effect.logWarning("a rollout's completion did not finish", cause), didNotFinish())
    : Effect.succeed(errorOf(error))
}

/** The current surface; a defect outside one (the app is served only with one). */
const currentSurface = Effect.flatMap(CurrentSurface, (surface) =>
  surface === undefined ? Effect.dieMessage("a rollout's route was served outside a rollout") : Effect.succeed(surface)
)

/**
 * The request's body as JSON, read once and bounded: the 413 as soon as it is larger than `limit` (before it is
 * read when it declares its length), the 400 for text that is not JSON or nests deeper than the embedded backend
 * takes (checked before any schema decodes it: decoding and formatting an error recurse once per level), naming
 * the top-level field that nests too deep.
 */
const readJson = (
  request: HttpServerRequest.HttpServerRequest,
  limit: number
): Effect.Effect<Either.Either<unknown, HttpServerResponse.HttpServerResponse>> =>
  Effect.gen(function* () {
    if (Number(request.headers["content-length"] ?? Number.NaN) > limit) return Either.left(tooLarge(limit))
    const read = yield* Effect.either(bounded(request, limit))
    if (Either.isLeft(read)) {
      return Either.left(errorResponse(400, "the request body could not be read", "invalid_request_error"))
    }
    if (read.right === undefined) return Either.left(tooLarge(limit))
    const text = Buffer.concat(read.right).toString("utf8")
    let body: unknown
    try {
      body = JSON.parse(text) as unknown
    } catch {
      return Either.left(
        jsonDepth(text, MAX_JSON_DEPTH) > MAX_JSON_DEPTH
          ? errorResponse(400, TOO_DEEP, "invalid_request_error")
          : errorResponse(400, "the request body is not JSON", "invalid_request_error")
      )
    }
    return nestsDeeper(body, MAX_JSON_DEPTH)
      ? Either.left(errorResponse(400, TOO_DEEP, "invalid_request_error", deepField(body, MAX_JSON_DEPTH)))
      : Either.right(body)
  })

/**
 * A request's body, read to its end, or `undefined` as soon as it is larger than `limit` (what came is dropped).
 * A Node request past the limit is left to drain, its bytes discarded as they come, so the 413 goes out at once
 * and the connection stays usable (destroying it would reset the agent's side before it reads the answer); any
 * other body is read through the platform's stream and cancelled.
 */
const bounded = (
  request: HttpServerRequest.HttpServerRequest,
  limit: number
): Effect.Effect<ReadonlyArray<Uint8Array> | undefined, unknown> => {
  const source: unknown = request.source
  if (!isNodeBody(source)) {
    return Effect.map(
      Stream.runFoldWhile(
        request.stream,
        { size: 0, chunks: [] as Array<Uint8Array> },
        (state) => state.size <= limit,
        (state, chunk) => {
          state.chunks.push(chunk)
          return { size: state.size + chunk.length, chunks: state.chunks }
        }
      ),
      (state) => (state.size > limit ? undefined : state.chunks)
    )
  }
  return Effect.async<ReadonlyArray<Uint8Array> | undefined, unknown>((resume) =>
    Effect.sync(
      readNodeBody(source, limit, (result) =>
        resume("error" in result ? Effect.fail(result.error) : Effect.succeed(result.chunks))
      )
    )
  )
}

/** The runtime a body's `model` is answered in: a fixed policy's, or the rollout's. */
const runtimeFor = (surface: Surface, body: unknown): Runtime.Runtime<Rollout.Current> => {
  if (surface.fixed.size === 0 || !Predicate.hasProperty(body, "model") || typeof body.model !== "string") {
    return surface.runtime
  }
  return surface.fixed.get(body.model) ?? surface.runtime
}

/**
 * The rollout's streamed completion of `request` started in `runtime` (its context and fiber refs): its fiber
 * forked there, in the reader's scope, filling the one queue the reader takes from (`Rollout.chatQueue`, see
 * `started.ts`).
 */
const startedIn = (runtime: Runtime.Runtime<Rollout.Current>, request: PolicyRequest) =>
  Started.startedFrom(
    Effect.flatMap(Effect.scope, (scope) =>
      Effect.provide(Effect.provideService(Rollout.chatQueue(request), Scope.Scope, scope), runtime)
    )
  )

const SSE = { contentType: "text/event-stream", headers: { "cache-control": "no-cache" } } as const

const encoder = new TextEncoder()
const sse = (data: string) => encoder.encode(`data: ${data}\n\n`)

const decodeChat = Schema.decodeUnknownEither(ChatCompletionRequest)

/** `POST /v1/chat/completions` (see the module). */
const chatCompletion = (surface: Surface, body: unknown) =>
  Effect.gen(function* () {
    const decoded = decodeChat({ ...surface.options.request, ...(body as object) })
    if (Either.isLeft(decoded)) {
      return errorResponse(
        400,
        ParseResult.TreeFormatter.formatErrorSync(decoded.left),
        "invalid_request_error",
        firstField(decoded.left)
      )
    }
    const { model: _model, stream, stream_options, ...request } = decoded.right
    const runtime = runtimeFor(surface, body)
    if (stream !== true) {
      const exit = yield* Effect.exit(Effect.provide(Rollout.chat(request), runtime))
      return Exit.isSuccess(exit) ? HttpServerResponse.unsafeJson(exit.value) : yield* failedResponse(exit.cause)
    }
    // The policy is always asked for usage (the trace records it); the agent gets it when it asked.
    const usage = stream_options?.include_usage === true
    // The first chunk before the answer: a completion refused before it samples keeps its status.
    const all = yield* startedIn(runtime, request)
    if (Exit.isFailure(all)) return yield* failedResponse(all.cause)
    const events = all.value.stream.pipe(
      Stream.filter((chunk: ChatCompletionChunk) => usage || chunk.choices.length > 0),
      Stream.map((chunk) => sse(JSON.stringify(chunk))),
      Stream.catchAllCause((cause) => {
        const error = failureOf(cause)
        return Stream.make(
          sse(
            JSON.stringify({
              error:
                error === undefined
                  ? {
                      message: "the rollout's completion did not finish",
                      type: "server_error",
                      param: null,
                      code: null
                    }
                  : { message: error.message, type: error.type, param: error.param, code: error.code }
            })
          )
        )
      }),
      Stream.concat(Stream.make(sse("[DONE]")))
    )
    return HttpServerResponse.stream(events, SSE)
  })

/** The responses a rollout keeps, as the Responses routes' store. */
const storeOf = (responses: Map<string, StoredResponse>): ResponsesRoutes.ResponseStore => ({
  get: (id) => Effect.sync(() => Option.fromNullable(responses.get(id))),
  put: (stored) => Effect.sync(() => void responses.set(stored.response.id, stored)),
  remove: (id) => Effect.sync(() => responses.delete(id))
})

/** The rollout's (or a fixed policy's) responses, as the Responses routes' backend. */
const backendOf = (surface: Surface, runtime: Runtime.Runtime<Rollout.Current>): ResponsesRoutes.Backend<unknown> => ({
  store: storeOf(Context.get(runtime.context, Rollout.Current).recorder.responses),
  defaults: surface.options.request,
  admit: (chat) => {
    const { model: _model, stream: _stream, stream_options: _options, ...request } = chat
    return Effect.succeed(
      Either.right({
        whole: Effect.provide(Rollout.chat(request), runtime),
        start: startedIn(runtime, request)
      })
    )
  },
  failure: failureOf,
  error: errorOf,
  exchanged: (request, response) =>
    Effect.sync(() => {
      // Into the recorder of the runtime answering: a fixed policy's is never read, so its exchanges stay out.
      Context.get(runtime.context, Rollout.Current).recorder.exchanges.push({
        request: Schema.encodeSync(ResponseCreateRequest)(request),
        response
      })
    })
})

const bodyOf = (surface: Surface, request: HttpServerRequest.HttpServerRequest) =>
  readJson(request, surface.options.maxBodySize ?? DEFAULT_MAX_BODY_SIZE)

/** The handlers of the chat group. */
const ChatLive = HttpApiBuilder.group(RolloutApi, "chat", (handlers) =>
  handlers.handleRaw("createChatCompletion", ({ request }) =>
    Effect.gen(function* () {
      const surface = yield* currentSurface
      const body = yield* bodyOf(surface, request)
      return Either.isLeft(body) ? body.left : yield* chatCompletion(surface, body.right)
    })
  )
)

/** The handlers of the Responses group: the shared routes over the rollout's responses. */
const ResponsesLive = HttpApiBuilder.group(RolloutApi, "responses", (handlers) =>
  handlers
    .handleRaw("createResponse", ({ request }) =>
      Effect.gen(function* () {
        const surface = yield* currentSurface
        const body = yield* bodyOf(surface, request)
        if (Either.isLeft(body)) return body.left
        const backend = backendOf(surface, runtimeFor(surface, body.right))
        return yield* Effect.catchAllCause(ResponsesRoutes.createResponse(backend, body.right), failedResponse)
      })
    )
    .handle("getResponse", ({ path }) =>
      Effect.flatMap(currentSurface, (surface) =>
        ResponsesRoutes.getResponse(backendOf(surface, surface.runtime), path.response_id)
      )
    )
    .handle("deleteResponse", ({ path }) =>
      Effect.flatMap(currentSurface, (surface) =>
        ResponsesRoutes.deleteResponse(backendOf(surface, surface.runtime), path.response_id)
      )
    )
    .handle("listInputItems", ({ path, urlParams }) =>
      Effect.flatMap(currentSurface, (surface) =>
        ResponsesRoutes.listInputItems(backendOf(surface, surface.runtime), path.response_id, urlParams)
      )
    )
)

const listedSince = Math.floor(Date.now() / 1000)

/** The handlers of the models group: the rollout's policy, and its fixed policies, as the models. */
const ModelsLive = HttpApiBuilder.group(RolloutApi, "models", (handlers) =>
  handlers.handle("listModels", () =>
    Effect.map(currentSurface, (surface) =>
      HttpServerResponse.unsafeJson({
        object: "list",
        data: [surface.policyName, ...surface.fixed.keys()].map((id) => ({
          id,
          object: "model",
          created: listedSince,
          owned_by: "effect-rl"
        }))
      })
    )
  )
)

/** The routes' paths, each with its methods: what a 405 tells apart from a 404. */
const ROUTES: ReadonlyArray<readonly [RegExp, ReadonlyArray<string>]> = [
  [/^\/v1\/chat\/completions$/, ["POST"]],
  [/^\/v1\/responses$/, ["POST"]],
  [/^\/v1\/responses\/[^/]+$/, ["GET", "DELETE"]],
  [/^\/v1\/responses\/[^/]+\/input_items$/, ["GET"]],
  [/^\/v1\/models$/, ["GET"]]
]

/** The answer to a request no route took: a 404 naming what is served, a 405 for a served path, or no such id. */
const unrouted = (request: HttpServerRequest.HttpServerRequest) => {
  const path = new URL(request.url, "http://rollout").pathname
  const methods = ROUTES.find(([pattern]) => pattern.test(path))?.[1]
  const method = request.method.toUpperCase()
  if (methods?.includes(method)) {
    // The path's own method, refused by the router for its id (not valid percent-encoding): no such response.
    const id = /^\/v1\/responses\/([^/]+)/.exec(path)?.[1] ?? ""
    return errorResponse(404, `Response with id '${id}' not found.`, "invalid_request_error")
  }
  if (methods !== undefined) {
    return HttpServerResponse.setHeader(
      errorResponse(405, `${method} ${path} is not served (${methods.join(", ")} is)`, "invalid_request_error"),
      "allow",
      methods.join(", ")
    )
  }
  return errorResponse(
    404,
    `a rollout serves chat completions, responses and models, not ${method} ${path}`,
    "not_found_error"
  )
}

/** The net around the app: unrouted requests, a path that does not decode, a failure left. */
const net = (app: HttpApp.Default): HttpApp.Default =>
  Effect.catchAllCause(app, (cause) =>
    Effect.gen(function* () {
      const request = yield* HttpServerRequest.HttpServerRequest
      const failure: unknown = Option.getOrUndefined(Cause.failureOption(cause))
      if (HttpServerError.isServerError(failure) && failure._tag === "RouteNotFound") return unrouted(request)
      if (Predicate.isTagged(failure, "HttpApiDecodeError")) return unrouted(request)
      if (Cause.isInterruptedOnly(cause)) {
        // Its rollout ended (the gateway interrupted it): the ended rollout's answer; else the client went away.
        const ending = (yield* CurrentSurface)?.ending
        return ending?.ended() === true ? ending.answer() : yield* Effect.failCause(cause)
      }
      return yield* failedResponse(cause)
    })
  )

/** The path a request is routed by: from its last `/v1` (any base URL works), `/v1` added when it has none. */
export const routedUrl = (url: string): string => {
  const parsed = new URL(url, "http://rollout")
  const at = parsed.pathname.lastIndexOf("/v1/")
  const path = at === -1 ? `/v1${parsed.pathname}` : parsed.pathname.slice(at)
  const trimmed = path.length > 4 && path.endsWith("/") ? path.slice(0, -1) : path
  return `${trimmed}${parsed.search}`
}

/**
 * Answers a request in its surface, and the ended rollout's answer when the rollout ends first (its completion
 * interrupted); the streamed body of an ended rollout stops.
 */
const inSurface = (app: HttpApp.Default, surface: Surface): HttpApp.Default => {
  const answered = Effect.provideService(app, CurrentSurface, surface)
  const ending = surface.ending
  if (ending === undefined) return answered
  // The request's own fiber is interrupted when the rollout ends, not raced against the end in forked fibers
  // (forking both sides cost 5-6 ms of time to first token here). Its route runs interruptibly; this part runs in
  // the server's uninterruptible region, so it still answers: the ended rollout's answer, or a stream cut short.
  return Effect.withFiberRuntime((fiber) => {
    const off = ending.onEnd(() => fiber.unsafeInterruptAsFork(fiber.id()))
    return Effect.flatMap(Effect.exit(answered), (exit) => {
      if (Exit.isFailure(exit)) {
        off()
        return ending.ended() && Cause.isInterrupted(exit.cause) ? Effect.succeed(ending.answer()) : exit
      }
      const response = exit.value
      if (response.body._tag !== "Stream") {
        off()
        return Effect.succeed(response)
      }
      // A stream keeps listening until it is written: the rollout's end cuts it.
      const body = response.body
      return Effect.succeed(
        HttpServerResponse.setBody(
          response,
          HttpBody.stream(Stream.ensuring(body.stream, Effect.sync(off)), body.contentType, body.contentLength)
        )
      )
    })
  })
}

/** The app of {@link RolloutApi}, built once, with its net; serve it with {@link serve}. */
export const app: Effect.Effect<HttpApp.Default, never, Scope.Scope> = Layer.build(
  Layer.mergeAll(
    HttpApiBuilder.api(RolloutApi).pipe(Layer.provide([ChatLive, ResponsesLive, ModelsLive])),
    // Inside the app, before the api encodes what failed with its error schemas.
    HttpApiBuilder.middleware(RolloutApi, net),
    HttpApiBuilder.Router.Live,
    HttpApiBuilder.Middleware.layer
  )
).pipe(
  Effect.flatMap((context) => Effect.provide(HttpApiBuilder.httpApp, context)),
  Effect.map((built) => built as HttpApp.Default)
)

/** Answers a request in a surface, routed by its path from its last `/v1` (see {@link routedUrl}). */
export const serve = (built: HttpApp.Default, surface: Surface): HttpApp.Default => {
  const answered = inSurface(built, surface)
  return Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
    Effect.provideService(
      answered,
      HttpServerRequest.HttpServerRequest,
      request.modify({ url: routedUrl(request.url) })
    )
  )
}

/** The app, built once for the process, as a Web handler taking the surface per request. */
let webApp: ((request: Request, context?: Context.Context<never>) => Promise<Response>) | undefined

const web = () => {
  if (webApp === undefined) {
    // Built for the life of the process: one router for every rollout's in-process surface.
    const built = Effect.runSync(Effect.flatMap(Scope.make(), (scope) => Scope.extend(app, scope)))
    webApp = HttpApp.toWebHandler(
      Effect.flatMap(CurrentSurface, (surface) =>
        surface === undefined ? Effect.dieMessage("no rollout") : serve(built, surface)
      )
    )
  }
  return webApp
}

/** The running rollout's surface (see {@link Surface}), with fixed policies' runtimes when given. */
export const surfaceOf = (
  options: Options,
  fixed: ReadonlyMap<string, Runtime.Runtime<Rollout.Current>> = new Map()
): Effect.Effect<Surface, never, Rollout.Current> =>
  Effect.zipWith(Effect.runtime<Rollout.Current>(), Rollout.policy, (runtime, policy) => ({
    runtime,
    policyName: policy.name,
    fixed,
    options: { ...options, maxBodySize: options.maxBodySize ?? bodyLimit(policy) }
  }))

/**
 * The rollout's HTTP surface (see the module) as a Web handler, bound to the running rollout: use it only while
 * the rollout runs.
 */
export const handler = (options: Options = {}): Effect.Effect<Handler, never, Rollout.Current> =>
  Effect.map(surfaceOf(options), (surface): Handler => {
    const context = Context.make(CurrentSurface, surface) as Context.Context<never>
    return (request) => web()(request, context)
  })

const requestOf = (input: unknown, init?: RequestInit): Request =>
  input instanceof Request && init === undefined
    ? input
    : new Request(input instanceof URL || typeof input === "string" ? input : (input as Request), init)

/** A `fetch` over a handler: what SDKs that take a `fetch` option are given. */
export const fetchOf =
  (handle: Handler): typeof globalThis.fetch =>
  (input, init) =>
    handle(requestOf(input, init))
