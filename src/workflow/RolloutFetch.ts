/**
 * A `fetch` of the running rollout, for any SDK or framework that takes one: its OpenAI-compatible requests
 * (chat completions and the Responses API, streamed or not, and the model list) are recorded completions of
 * the rollout's policy, whatever base URL and `model` the SDK sends. Nothing leaves the process but the
 * policy's own calls.
 *
 * ```ts
 * import { createOpenAI } from "@ai-sdk/openai"
 *
 * const agent = Effect.gen(function* () {
 *   const fetch = yield* RolloutFetch.fetch()
 *   const openai = createOpenAI({ apiKey: "rollout", fetch })
 *   return yield* Effect.promise(() => generateText({ model: openai("policy"), prompt: "2 + 2 =" }))
 * })
 * ```
 *
 * LangChain's `ChatOpenAI` takes it as `configuration: { fetch }`, the `openai` SDK as `new OpenAI({ fetch })`
 * (or use `RolloutOpenAI.client`). Made per rollout; use it only while the rollout runs.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import { BODY_MARGIN, BYTES_PER_TOKEN, bodyLimit, DEFAULT_MAX_BODY_SIZE } from "./internal/bodyLimit.js"
import type { Handler, Options } from "./internal/rolloutHttp.js"
import type * as Rollout from "./Rollout.js"

/** The handler's type and the options of {@link fetch} and {@link handler} (request fields for every completion). */
export type { Handler, Options }
export {
  /** What a request body may hold beyond its context's tokens (tool schemas, settings, room). */
  BODY_MARGIN,
  /** The most bytes a token of a request takes, in the worst case (its text JSON-escaped, its share of keys). */
  BYTES_PER_TOKEN,
  /**
   * The largest body a rollout of a policy takes by default: its context's tokens at {@link BYTES_PER_TOKEN}
   * bytes, with {@link BODY_MARGIN}; {@link DEFAULT_MAX_BODY_SIZE} when the policy does not say its context.
   */
  bodyLimit,
  /** The largest body a rollout takes when its policy does not say its context (4 MiB). */
  DEFAULT_MAX_BODY_SIZE
}

/** The surface's module, loaded at first use: importing this module loads none of the HTTP platform. */
const surface = Effect.promise(() => import("./internal/rolloutHttp.js"))

/** The base URL to give SDKs that want one beside the `fetch` (it is never resolved). */
export const BASE_URL = "http://rollout.effect-rl.invalid/v1"

/** The running rollout's `fetch` (see the module). */
export const fetch = (options: Options = {}): Effect.Effect<typeof globalThis.fetch, never, Rollout.Current> =>
  Effect.flatMap(surface, (http) => Effect.map(http.handler(options), http.fetchOf))

/** The running rollout's HTTP surface as a `Request -> Promise<Response>` handler (what the gateway serves). */
export const handler = (options: Options = {}): Effect.Effect<Handler, never, Rollout.Current> =>
  Effect.flatMap(surface, (http) => http.handler(options))
