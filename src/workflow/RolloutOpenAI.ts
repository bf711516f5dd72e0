/**
 * Agents written with the `openai` SDK, trained unchanged: an `OpenAI` client whose chat completions go to
 * the running rollout's policy and are recorded into its trajectory (as the reference Python client's
 * `model.openai_client()`), for agent code that is Promise-based.
 *
 * Each `client.chat.completions.create(...)` (and what the SDK builds on it: `stream`, `runTools`, `parse`)
 * is a {@link Rollout.chat}: logprobs and token ids asked for, the choice recorded, the messages not yet
 * recorded added as context. The request's `model` is ignored (the rollout's policy decides; its current
 * checkpoint answers). A streamed request gets the completion as server-sent events once it is complete (a
 * rollout records whole choices). The Responses API (`client.responses.create`, `stream`, `parse`) is served
 * too, translated onto the same recorded chat completions. What the policy's service refuses comes back as the
 * SDK's own `APIError` with its status and message; any other route is a 404. For SDKs that take a `fetch`
 * rather than a client, see `RolloutFetch`.
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
import * as Effect from "effect/Effect"
import OpenAI from "openai"
import type { Request } from "./Policy.js"
import type * as Rollout from "./Rollout.js"

/** Options of {@link client}. */
export interface Options {
  /** Request fields used for every completion, under what the agent's request sets (e.g. a `seed`). */
  readonly request?: Partial<Omit<Request, "messages">> | undefined
  /** Options passed to the `OpenAI` constructor (`timeout`, `defaultHeaders`, ...; not its URL or fetch). */
  readonly clientOptions?: Omit<NonNullable<ConstructorParameters<typeof OpenAI>[0]>, "baseURL" | "fetch" | "apiKey">
}

/** The base URL the client is given: requests never leave the process. */
export const BASE_URL = "http://rollout.effect-rl.invalid/v1"

/**
 * An `OpenAI` client of the running rollout: its chat completions (and Responses) are recorded completions of
 * the rollout's policy (see the module's description). Made per rollout; use it only while the rollout runs.
 */
export const client = (options: Options = {}): Effect.Effect<OpenAI, never, Rollout.Current> =>
  Effect.flatMap(
    // Loaded at first use: importing this module loads none of the HTTP platform.
    Effect.promise(() => import("./internal/rolloutHttp.js")),
    ({ fetchOf, handler }) =>
      Effect.map(
        handler(options.request === undefined ? {} : { request: options.request }),
        (handle) =>
          new OpenAI({
            maxRetries: 0,
            ...options.clientOptions,
            apiKey: "rollout",
            baseURL: BASE_URL,
            fetch: fetchOf(handle) as unknown as NonNullable<ConstructorParameters<typeof OpenAI>[0]>["fetch"]
          })
      )
  )
