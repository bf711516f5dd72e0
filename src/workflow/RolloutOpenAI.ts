/**
 * Agents written with the `openai` SDK, trained unchanged: an `OpenAI` client whose chat completions go to
 * the running rollout's policy and are recorded into its trajectory (as the reference Python client's
 * `model.openai_client()`), for agent code that is Promise-based.
 *
 * Each `client.chat.completions.create(...)` (and what the SDK builds on it: `stream`, `runTools`, `parse`)
 * is a {@link Rollout.chat}: logprobs and token ids asked for, the choice recorded, the messages not yet
 * recorded added as context. The request's `model` is ignored (the rollout's policy decides; its current
 * checkpoint answers). A streamed request gets the completion as server-sent events once it is complete (a
 * rollout records whole choices). What the policy's service refuses comes back as the SDK's own `APIError`
 * with its status and message; anything but chat completions is a 404.
 *
 * ```ts
 * const finished = yield* Rollout.run(
 *   policy,
 *   Effect.flatMap(RolloutOpenAI.client(), (openai) =>
 *     Effect.promise(() => myAgent(openai)) // async (openai: OpenAI) => { ... openai.chat.completions.create(...) }
 *   )
 * )
 * ```
 *
 * Needs `openai` (an optional peer dependency, 6 or 7); this module is a subpath export only
 * (`effect-rl/RolloutOpenAI`), so the package's root never loads it.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Runtime from "effect/Runtime"
import * as Schema from "effect/Schema"
import OpenAI from "openai"
import { type ChatCompletion, type ChatCompletionChunk, ChatCompletionRequest } from "../api/ChatCompletion.js"
import type { Request } from "./Policy.js"
import * as Rollout from "./Rollout.js"

/** Options of {@link client}. */
export interface Options {
  /** Request fields used for every completion, under what the agent's request sets (e.g. a `seed`). */
  readonly request?: Partial<Omit<Request, "messages">> | undefined
  /** Options passed to the `OpenAI` constructor (`timeout`, `defaultHeaders`, ...; not its URL or fetch). */
  readonly clientOptions?: Omit<NonNullable<ConstructorParameters<typeof OpenAI>[0]>, "baseURL" | "fetch" | "apiKey">
}

/** The base URL the client is given: requests never leave the process. */
export const BASE_URL = "http://rollout.effect-rl.invalid/v1"

const decodeRequest = Schema.decodeUnknownEither(ChatCompletionRequest)

const json = (status: number, body: unknown): Response =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } })

const errorResponse = (
  status: number,
  message: string,
  type: string,
  param: string | null = null,
  code: string | number | null = null
): Response => json(status, { error: { message, type, param, code } })

/** The chunks of a whole completion, as an engine would stream it (role, content, each call, the finish). */
const chunksOf = (completion: ChatCompletion, includeUsage: boolean): ReadonlyArray<ChatCompletionChunk> => {
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

const sse = (chunks: ReadonlyArray<ChatCompletionChunk>): Response =>
  new Response(`${chunks.map((chunk) => `data: ${JSON.stringify(chunk)}\n\n`).join("")}data: [DONE]\n\n`, {
    status: 200,
    headers: { "content-type": "text/event-stream" }
  })

const requestUrl = (input: unknown): string =>
  typeof input === "string" ? input : input instanceof URL ? input.toString() : (input as { url: string }).url

/**
 * An `OpenAI` client of the running rollout: its chat completions are recorded completions of the rollout's
 * policy (see the module's description). Made per rollout; use it only while the rollout runs.
 */
export const client = (options: Options = {}): Effect.Effect<OpenAI, never, Rollout.Current> =>
  Effect.map(Effect.runtime<Rollout.Current>(), (runtime) => {
    const run = Runtime.runPromiseExit(runtime)
    const fetch = async (input: unknown, init?: RequestInit): Promise<Response> => {
      const url = new URL(requestUrl(input))
      const method = (init?.method ?? "GET").toUpperCase()
      if (method !== "POST" || !url.pathname.endsWith("/chat/completions")) {
        return errorResponse(
          404,
          `a rollout's client serves chat completions only, not ${method} ${url.pathname}`,
          "not_found_error"
        )
      }
      let body: unknown
      try {
        body = JSON.parse(
          typeof init?.body === "string" ? init.body : new TextDecoder().decode(init?.body as Uint8Array)
        )
      } catch {
        return errorResponse(400, "the request body is not JSON", "invalid_request_error")
      }
      const decoded = decodeRequest({ ...options.request, ...(body as object) })
      if (decoded._tag === "Left") {
        const issue = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)[0]
        return errorResponse(
          400,
          ParseResult.TreeFormatter.formatErrorSync(decoded.left),
          "invalid_request_error",
          issue?.path.join(".") ?? null
        )
      }
      const { model: _model, stream, stream_options, ...request } = decoded.right
      const exit = await run(Rollout.chat(request), init?.signal == null ? {} : { signal: init.signal })
      if (Exit.isSuccess(exit)) {
        return stream === true
          ? sse(chunksOf(exit.value, stream_options?.include_usage === true))
          : json(200, exit.value)
      }
      const failure = Option.getOrUndefined(Cause.failureOption(exit.cause))
      if (failure?._tag === "InvalidTurn") return errorResponse(400, failure.message, "invalid_request_error")
      if (failure?._tag === "ApiError") {
        return errorResponse(
          failure.status ?? 502,
          failure.message,
          failure.errorType ?? "api_error",
          failure.param ?? null,
          failure.code ?? null
        )
      }
      // Interrupted (the caller aborted) or a defect: the SDK turns a rejected fetch into its connection error.
      throw new Error(`the rollout's completion did not finish: ${exit.cause._tag}`)
    }
    return new OpenAI({
      maxRetries: 0,
      ...options.clientOptions,
      apiKey: "rollout",
      baseURL: BASE_URL,
      fetch: fetch as unknown as NonNullable<ConstructorParameters<typeof OpenAI>[0]>["fetch"]
    })
  })
