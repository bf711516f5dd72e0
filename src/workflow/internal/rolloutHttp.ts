/**
 * The OpenAI-compatible HTTP surface of a running rollout, as a Web `Request -> Response` function: what
 * `RolloutOpenAI`'s client, `RolloutFetch.fetch` and the rollout gateway all answer with. Every completion is a
 * recorded turn of the rollout (`Rollout.chat`); nothing leaves the process but the policy's own calls.
 *
 * Routes (matched on the path's end, so any base URL works):
 * - `POST .../chat/completions`: a chat completion of the rollout's policy, whole or (with `stream: true`) as
 *   server-sent events once it is complete (a rollout records whole choices);
 * - `POST .../responses`, `GET`/`DELETE .../responses/{id}`, `GET .../responses/{id}/input_items`: the
 *   Responses API, translated onto chat completions (`rolloutResponses.ts`);
 * - `GET .../models`: the rollout's policy as the one model.
 *
 * Errors take the OpenAI shape `{error: {message, type, param, code}}`: a body that is not JSON or fails the
 * request schema is a 400 naming the field; what the policy's service refuses keeps its status and message;
 * an unknown route is a 404. An interrupted or failed (defect) completion rejects the Promise, which SDKs
 * report as a connection error.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Runtime from "effect/Runtime"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { type ChatCompletionChunk, ChatCompletionRequest } from "../../api/ChatCompletion.js"
import { deepField, jsonDepth, MAX_JSON_DEPTH, nestsDeeper, TOO_DEEP } from "../../api/internal/jsonDepth.js"
import { firstField } from "../../api/ResponsesChat.js"
import { ApiError } from "../../client/ApiError.js"
import type { Request as PolicyRequest } from "../Policy.js"
import * as Rollout from "../Rollout.js"
import { InvalidTurn } from "./recorder.js"
import { responsesRoute } from "./rolloutResponses.js"

/**
 * The largest request body a rollout takes by default, in bytes (4 MiB). A request's text all becomes prompt
 * tokens, so a body fits a context: 131,072 tokens at the worst JSON of a few bytes each (escapes, keys) is about
 * 1 MiB; the rest is room. A body beyond is refused (413) before it is parsed, so no agent's request can hold the
 * event loop or the memory that a parse of tens of megabytes takes.
 */
export const DEFAULT_MAX_BODY_SIZE = 4 * 1024 * 1024

/** Options of a rollout's HTTP surface. */
export interface Options {
  /** Request fields used for every completion, under what the agent's request sets (e.g. a `seed`). */
  readonly request?: Partial<Omit<PolicyRequest, "messages">> | undefined
  /** The largest request body taken, in bytes (default {@link DEFAULT_MAX_BODY_SIZE}); beyond, a 413. */
  readonly maxBodySize?: number | undefined
}

/** The 413 for a body over `limit` bytes. */
export const tooLarge = (limit: number): Response =>
  errorResponse(413, `the request body is larger than ${limit} bytes`, "invalid_request_error")

/** A Web-standard HTTP handler. */
export type Handler = (request: Request) => Promise<Response>

/** What a route of the surface is given: how to run effects in the rollout, and the options. */
export interface RouteContext {
  /** Runs an effect in the rollout (with its `Rollout.Current`); aborted by the signal. */
  readonly run: <A, E>(
    effect: Effect.Effect<A, E, Rollout.Current>,
    signal?: AbortSignal | undefined
  ) => Promise<Exit.Exit<A, E>>
  /** The options the surface was made with. */
  readonly options: Options
  /** The name the policy answers as (`model` of every completion and of `/models`). */
  readonly policyName: string
}

/** A JSON response. */
export const json = (status: number, body: unknown): Response =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } })

/** An error response in the OpenAI shape. */
export const errorResponse = (
  status: number,
  message: string,
  type: string,
  param: string | null = null,
  code: string | number | null = null
): Response => json(status, { error: { message, type, param, code } })

/** A server-sent events response of the given JSON events, then `data: [DONE]`. */
export const sseResponse = (events: ReadonlyArray<unknown>, done = true): Response =>
  new Response(
    `${events.map((event) => `data: ${JSON.stringify(event)}\n\n`).join("")}${done ? "data: [DONE]\n\n" : ""}`,
    {
      status: 200,
      headers: { "content-type": "text/event-stream", "cache-control": "no-cache" }
    }
  )

/** How the Responses API names the chat request's fields and words its messages (identity for chat). */
export interface Words {
  readonly message: (m: string) => string
  readonly param: (p: string | null) => string | null
}

const CHAT_WORDS: Words = { message: (m) => m, param: (p) => p }

/**
 * A failed completion as an OpenAI error: an `InvalidTurn` is a 400, the service's `ApiError` keeps its status
 * and message (in `words`); `undefined` for anything else (an interruption, a defect).
 */
const failureOf = (
  cause: Cause.Cause<unknown>,
  words: Words
): { readonly status: number; readonly body: { readonly error: object } } | undefined => {
  const failure = Option.getOrUndefined(Cause.failureOption(cause))
  const error = (status: number, message: string, type: string, param: string | null = null, code: unknown = null) => ({
    status,
    body: { error: { message, type, param, code } }
  })
  if (failure instanceof InvalidTurn) return error(400, failure.message, "invalid_request_error")
  if (failure instanceof ApiError) {
    return error(
      failure.status ?? 502,
      words.message(failure.description),
      failure.errorType ?? "api_error",
      words.param(failure.param ?? null),
      failure.code ?? null
    )
  }
  return undefined
}

/**
 * The response for a failed completion (see `failureOf`); anything but a typed failure (an interruption, a defect)
 * rejects: SDKs turn a rejected fetch into their connection error.
 */
export const failureResponse = (cause: Cause.Cause<unknown>, words: Words = CHAT_WORDS): Response => {
  const failure = failureOf(cause, words)
  if (failure === undefined) throw new Error(`the rollout's completion did not finish: ${cause._tag}`)
  return json(failure.status, failure.body)
}

/** A failed completion as the body of a server-sent error event, after the stream's status was sent. */
export const errorEvent = (cause: Cause.Cause<unknown>, words: Words = CHAT_WORDS): { readonly error: object } =>
  failureOf(cause, words)?.body ?? {
    error: { message: "the rollout's completion did not finish", type: "server_error", param: null, code: null }
  }

/** A schema's decoding failure as a 400 naming the first field at fault. */
export const invalidRequest = (error: ParseResult.ParseError): Response =>
  errorResponse(400, ParseResult.TreeFormatter.formatErrorSync(error), "invalid_request_error", firstField(error))

/** How a stream's values are relayed as server-sent events (see {@link relay}). */
export interface Relay<A> {
  /** The events before the first value's. */
  readonly start: ReadonlyArray<unknown>
  /** The events of a value. */
  readonly events: (value: A) => ReadonlyArray<unknown>
  /** The events once the stream has ended whole. */
  readonly end: () => ReadonlyArray<unknown>
  /** The event of a failure after the first value (the status was sent with it). */
  readonly error: (cause: Cause.Cause<unknown>) => unknown
}

const SSE_HEADERS = { "content-type": "text/event-stream", "cache-control": "no-cache" } as const

const encoder = new TextEncoder()
const sseBytes = (events: ReadonlyArray<unknown>, done = false) =>
  encoder.encode(
    `${events.map((event) => `data: ${JSON.stringify(event)}\n\n`).join("")}${done ? "data: [DONE]\n\n" : ""}`
  )

/**
 * A stream run in the rollout, relayed as server-sent events while it runs: the response (200, or `failed`'s
 * answer for a failure before the first value, so that a refused request keeps its status) once the first value
 * has come, each value's events as it comes, then `data: [DONE]` (when `done`); a failure after the first value
 * is its error event. One fiber runs the stream and writes into the body (no promise per chunk). The reader going
 * away (the body cancelled, or `signal` aborted) interrupts it.
 */
export const relay = async <A, E>(
  context: RouteContext,
  stream: Stream.Stream<A, E, Rollout.Current>,
  options: {
    readonly open: (first: A) => Relay<A>
    readonly failed: (cause: Cause.Cause<E>) => Response
    readonly done: boolean
  },
  signal: AbortSignal | undefined
): Promise<Response> => {
  const stop = new AbortController()
  const abort = () => stop.abort()
  signal?.addEventListener("abort", abort, { once: true })
  let controller!: ReadableStreamDefaultController<Uint8Array>
  const body = new ReadableStream<Uint8Array>({
    start: (c) => {
      controller = c
    },
    cancel: abort
  })
  let relayed: Relay<A> | undefined
  let opened!: () => void
  const first = new Promise<void>((resolve) => {
    opened = resolve
  })
  const write = (events: ReadonlyArray<unknown>, done = false) => {
    if (events.length > 0 || done) controller.enqueue(sseBytes(events, done))
  }
  const running = context.run(
    Stream.runForEachChunk(stream, (values) =>
      Effect.sync(() => {
        let events: Array<unknown> = []
        for (const value of values) {
          if (relayed === undefined) {
            relayed = options.open(value)
            events = [...relayed.start]
            opened()
          }
          events.push(...relayed.events(value))
        }
        write(events)
      })
    ),
    stop.signal
  )
  // The body is written to its end (or its error) by the fiber; the response goes once the first value came.
  void running.then((exit) => {
    signal?.removeEventListener("abort", abort)
    if (relayed === undefined) return
    try {
      if (Exit.isSuccess(exit)) write(relayed.end(), options.done)
      else if (!stop.signal.aborted) write([relayed.error(exit.cause)])
      controller.close()
    } catch {
      // The reader went away: nothing to write to.
    }
  })
  await Promise.race([first, running])
  if (relayed !== undefined) return new Response(body, { status: 200, headers: SSE_HEADERS })
  const exit = await running
  if (Exit.isFailure(exit)) return options.failed(exit.cause)
  // An empty stream: nothing but the end.
  return sseResponse([], options.done)
}

const decodeChatRequest = Schema.decodeUnknownEither(ChatCompletionRequest)

const chatRoute = async (context: RouteContext, body: unknown, signal: AbortSignal | undefined): Promise<Response> => {
  const decoded = decodeChatRequest({ ...context.options.request, ...(body as object) })
  if (decoded._tag === "Left") return invalidRequest(decoded.left)
  const { model: _model, stream, stream_options, ...request } = decoded.right
  if (stream === true) {
    const usage = stream_options?.include_usage === true
    return relay(
      context,
      Rollout.chatStream(request),
      {
        open: () => ({
          start: [],
          // The policy is always asked for usage (the trace records it); the agent gets it when it asked.
          events: (chunk: ChatCompletionChunk) => (usage || chunk.choices.length > 0 ? [chunk] : []),
          end: () => [],
          error: (cause) => errorEvent(cause)
        }),
        failed: (cause) => failureResponse(cause),
        done: true
      },
      signal
    )
  }
  const exit = await context.run(Rollout.chat(request), signal)
  if (Exit.isFailure(exit)) return failureResponse(exit.cause)
  return json(200, exit.value)
}

const started = Math.floor(Date.now() / 1000)

const modelsRoute = (context: RouteContext): Response =>
  json(200, {
    object: "list",
    data: [{ id: context.policyName, object: "model", created: started, owned_by: "effect-rl" }]
  })

/**
 * The body's JSON, or the 400 for text that is not JSON or nests deeper than the embedded backend takes (checked
 * before any schema decodes it: decoding and formatting the error recurse once per level), naming the top-level
 * field that nests too deep.
 */
const readJson = async (request: Request, limit: number): Promise<{ readonly body: unknown } | Response> => {
  const declared = Number(request.headers.get("content-length") ?? Number.NaN)
  if (declared > limit) return tooLarge(limit)
  const text = await request.text()
  if (Buffer.byteLength(text) > limit) return tooLarge(limit)
  let body: unknown
  try {
    body = JSON.parse(text) as unknown
  } catch {
    return jsonDepth(text, MAX_JSON_DEPTH) > MAX_JSON_DEPTH
      ? errorResponse(400, TOO_DEEP, "invalid_request_error")
      : errorResponse(400, "the request body is not JSON", "invalid_request_error")
  }
  return nestsDeeper(body, MAX_JSON_DEPTH)
    ? errorResponse(400, TOO_DEEP, "invalid_request_error", deepField(body, MAX_JSON_DEPTH))
    : { body }
}

/** The path after the last `/v1` (or the whole path when it has none), without a trailing slash. */
const routeOf = (pathname: string): string => {
  const at = pathname.lastIndexOf("/v1/")
  const route = at === -1 ? pathname : pathname.slice(at + 3)
  return route.length > 1 && route.endsWith("/") ? route.slice(0, -1) : route
}

/**
 * The rollout's HTTP surface (see the module) as a handler, bound to the running rollout: use it only while
 * the rollout runs.
 */
export const handler = (options: Options = {}): Effect.Effect<Handler, never, Rollout.Current> =>
  Effect.zipWith(Effect.runtime<Rollout.Current>(), Rollout.policy, (runtime, policy): Handler => {
    const runExit = Runtime.runPromiseExit(runtime)
    const context: RouteContext = {
      run: (effect, signal) => runExit(effect, signal === undefined ? {} : { signal }),
      options,
      policyName: policy.name
    }
    const limit = options.maxBodySize ?? DEFAULT_MAX_BODY_SIZE
    return async (request) => {
      const route = routeOf(new URL(request.url).pathname)
      const method = request.method.toUpperCase()
      if (method === "GET" && route === "/models") return modelsRoute(context)
      if (route === "/chat/completions" && method === "POST") {
        const read = await readJson(request, limit)
        return read instanceof Response ? read : chatRoute(context, read.body, request.signal)
      }
      if (route === "/responses" || route.startsWith("/responses/")) {
        const read = method === "POST" ? await readJson(request, limit) : { body: undefined }
        return read instanceof Response
          ? read
          : responsesRoute(context, method, route, read.body, request.signal, new URL(request.url).searchParams)
      }
      return errorResponse(
        404,
        `a rollout serves chat completions, responses and models, not ${method} ${new URL(request.url).pathname}`,
        "not_found_error"
      )
    }
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
