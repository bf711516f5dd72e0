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
import { type ChatCompletion, type ChatCompletionChunk, ChatCompletionRequest } from "../../api/ChatCompletion.js"
import { deepField, jsonDepth, MAX_JSON_DEPTH, nestsDeeper, TOO_DEEP } from "../../api/internal/jsonDepth.js"
import { firstField } from "../../api/ResponsesChat.js"
import { ApiError } from "../../client/ApiError.js"
import type { Request as PolicyRequest } from "../Policy.js"
import * as Rollout from "../Rollout.js"
import { InvalidTurn } from "./recorder.js"
import { responsesRoute } from "./rolloutResponses.js"

/** Options of a rollout's HTTP surface. */
export interface Options {
  /** Request fields used for every completion, under what the agent's request sets (e.g. a `seed`). */
  readonly request?: Partial<Omit<PolicyRequest, "messages">> | undefined
}

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

/**
 * The response for a failed completion: an `InvalidTurn` is a 400, the service's `ApiError` keeps its status
 * and message (in `words`: the Responses API names the chat request's fields its own way); anything else (an
 * interruption, a defect) rejects.
 */
export const failureResponse = (
  cause: Cause.Cause<unknown>,
  words: { readonly message: (m: string) => string; readonly param: (p: string | null) => string | null } = {
    message: (m) => m,
    param: (p) => p
  }
): Response => {
  const failure = Option.getOrUndefined(Cause.failureOption(cause))
  if (failure instanceof InvalidTurn) return errorResponse(400, failure.message, "invalid_request_error")
  if (failure instanceof ApiError) {
    return errorResponse(
      failure.status ?? 502,
      words.message(failure.message),
      failure.errorType ?? "api_error",
      words.param(failure.param ?? null),
      failure.code ?? null
    )
  }
  // Interrupted (the caller aborted) or a defect: SDKs turn a rejected fetch into their connection error.
  throw new Error(`the rollout's completion did not finish: ${cause._tag}`)
}

/** A schema's decoding failure as a 400 naming the first field at fault. */
export const invalidRequest = (error: ParseResult.ParseError): Response =>
  errorResponse(400, ParseResult.TreeFormatter.formatErrorSync(error), "invalid_request_error", firstField(error))

/** The chunks of a whole completion, as an engine would stream it (role, content, each call, the finish). */
export const chunksOf = (completion: ChatCompletion, includeUsage: boolean): ReadonlyArray<ChatCompletionChunk> => {
  const base = {
    id: completion.id ?? "chatcmpl-rollout",
    object: "chat.completion.chunk" as const,
    created: completion.created ?? 0,
    model: completion.model
  }
  const chunks: Array<ChatCompletionChunk> = []
  for (const choice of completion.choices) {
    const index = choice.index
    chunks.push({ ...base, choices: [{ index, delta: { role: "assistant", content: "" } }] })
    if (choice.message.content != null && choice.message.content !== "") {
      chunks.push({
        ...base,
        choices: [{ index, delta: { content: choice.message.content }, logprobs: choice.logprobs ?? null }]
      })
    }
    for (const [i, call] of (choice.message.tool_calls ?? []).entries()) {
      chunks.push({
        ...base,
        choices: [
          {
            index,
            delta: {
              tool_calls: [
                {
                  index: i,
                  ...(call.id === undefined ? {} : { id: call.id }),
                  type: "function",
                  function: { name: call.function.name, arguments: call.function.arguments }
                }
              ]
            }
          }
        ]
      })
    }
    chunks.push({
      ...base,
      choices: [{ index, delta: {}, finish_reason: choice.finish_reason, token_ids: choice.token_ids ?? null }]
    })
  }
  if (includeUsage) chunks.push({ ...base, choices: [], usage: completion.usage ?? null })
  return chunks
}

const decodeChatRequest = Schema.decodeUnknownEither(ChatCompletionRequest)

const chatRoute = async (context: RouteContext, body: unknown, signal: AbortSignal | undefined): Promise<Response> => {
  const decoded = decodeChatRequest({ ...context.options.request, ...(body as object) })
  if (decoded._tag === "Left") return invalidRequest(decoded.left)
  const { model: _model, stream, stream_options, ...request } = decoded.right
  const exit = await context.run(Rollout.chat(request), signal)
  if (Exit.isFailure(exit)) return failureResponse(exit.cause)
  return stream === true
    ? sseResponse(chunksOf(exit.value, stream_options?.include_usage === true))
    : json(200, exit.value)
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
const readJson = async (request: Request): Promise<{ readonly body: unknown } | Response> => {
  const text = await request.text()
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
    return async (request) => {
      const route = routeOf(new URL(request.url).pathname)
      const method = request.method.toUpperCase()
      if (method === "GET" && route === "/models") return modelsRoute(context)
      if (route === "/chat/completions" && method === "POST") {
        const read = await readJson(request)
        return read instanceof Response ? read : chatRoute(context, read.body, request.signal)
      }
      if (route === "/responses" || route.startsWith("/responses/")) {
        const read = method === "POST" ? await readJson(request) : { body: undefined }
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
