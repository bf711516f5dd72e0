/**
 * The rollout gateway: one HTTP listener through which agents in other processes (any language, any
 * framework, any machine) talk to running rollouts, as if to OpenAI.
 *
 * Each rollout that asks for an {@link endpoint} gets its own base URL
 * (`http://127.0.0.1:<port>/rollouts/<id>/v1`) and its own key (random, 256 bits; held as `Redacted`). A
 * request with that key is answered by the rollout's OpenAI-compatible surface (the one `RolloutFetch` and
 * `RolloutOpenAI` use): `POST /chat/completions` and the Responses API (`/responses`), streamed or not, and
 * `GET /models`; every completion is a recorded turn of the rollout, with logprobs and token ids as sampled,
 * whatever `model` the agent names. Another rollout's key, or none, is a 401; once the rollout ends (its
 * endpoint's scope closes), its URL answers 410 `rollout_ended`, and a request still in flight is aborted
 * with the same answer. Errors are in the OpenAI shape `{error: {message, type, param, code}}`; keys never
 * appear in them.
 *
 * **Fixed policies.** In a program of several agents where one is trained, the others' model names can be
 * mapped to a fixed {@link Policy} ({@link EndpointOptions.models}): a request naming a mapped model is
 * answered by that policy and is *not* recorded (the trajectory holds only what the trained policy sampled,
 * whose logprobs and token ids it trains on). What the other agents said still reaches the trajectory as the
 * context of the trained agent's next request.
 *
 * ```ts
 * const agent = (question: string) =>
 *   RolloutGateway.withEndpoint(({ baseUrl, apiKey }) =>
 *     runMyPythonAgent({ OPENAI_BASE_URL: baseUrl, OPENAI_API_KEY: Redacted.value(apiKey), question })
 *   )
 * yield* Rollout.run(policy, agent("2 + 2 =")).pipe(Effect.provide(RolloutGateway.layer()))
 * ```
 *
 * `ExternalAgent` runs such agents (a function, an HTTP service, a command) as rollouts. Loopback only by
 * default; `host: "0.0.0.0"` (with `advertisedHost`, the name other machines reach this one by) serves
 * agents elsewhere.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import type * as internal from "./internal/gateway.js"
import type { Options as SurfaceOptions } from "./internal/rolloutHttp.js"
import type { Policy } from "./Policy.js"
import type * as Rollout from "./Rollout.js"

/** A rollout's endpoint: where its agent sends OpenAI requests, and the key it sends them with. */
export interface Endpoint {
  /** The rollout's id in the gateway (a part of its base URL; not a secret). */
  readonly id: string
  /** The OpenAI base URL of the rollout (ends with `/v1`): `OPENAI_BASE_URL` for an agent. */
  readonly baseUrl: string
  /** The rollout's key (`OPENAI_API_KEY` for an agent); good for this rollout only, until it ends. */
  readonly apiKey: Redacted.Redacted<string>
}

/** Options of one rollout's endpoint. */
export interface EndpointOptions extends SurfaceOptions {
  /**
   * Model names answered by a fixed policy instead of the rollout's, and not recorded (see the module): e.g.
   * `{ "opponent": yield* Policy.base("some/model") }` for the agents of a multi-agent program that are not
   * trained. Every other name goes to the rollout's policy.
   */
  readonly models?: Readonly<Record<string, Policy>> | undefined
}

/** The gateway, listening. */
export interface Service {
  /** The origin agents reach it at: `http://<advertised host>:<port>`. */
  readonly url: string
  /** The port it listens on. */
  readonly port: number
  /**
   * Registers the running rollout for the life of the scope and returns its endpoint; when the scope
   * closes, the endpoint answers 410 and requests in flight are aborted.
   */
  readonly register: (options?: EndpointOptions) => Effect.Effect<Endpoint, never, Rollout.Current | Scope.Scope>
  /** How many rollouts are registered now. */
  readonly open: Effect.Effect<number>
}

/** The rollout gateway service (see the module). */
export class RolloutGateway extends Context.Tag("effect-rl/RolloutGateway")<RolloutGateway, Service>() {}

/** Options of {@link layer}. */
export interface Options {
  /** The address to listen on (default `127.0.0.1`: loopback only). */
  readonly host?: string | undefined
  /** The port (default 0: a free one; see {@link Service.port}). */
  readonly port?: number | undefined
  /**
   * The host name in the endpoints' URLs (default: `host`, or this machine's name when `host` is `0.0.0.0`
   * or `::`): the name agents on other machines reach this one by.
   */
  readonly advertisedHost?: string | undefined
  /**
   * The largest request body accepted, in bytes; beyond, a 413, before the body is read when it declares its
   * length, else as soon as it passes the limit. Default: per rollout, what its policy's context can hold at the
   * worst tokenisation, with a margin (`RolloutFetch.bodyLimit`: 128 KiB for a 2,048-token context; 4 MiB when the
   * policy does not say its context, room for any request a 131,072-token context can take).
   */
  readonly maxBodySize?: number | undefined
}

/** The gateway could not start: its address could not be listened on (tag `RolloutGatewayError`). */
export class RolloutGatewayError extends Data.TaggedError("RolloutGatewayError")<{
  /** What failed: `Listen`, the host and port could not be bound. */
  readonly reason: "Listen"
  /** What failed and what to do, in a sentence. */
  readonly description: string
  /** The underlying error. */
  readonly cause?: unknown
}> {
  override get message(): string {
    return this.description
  }
}

/** Starts a gateway for the life of the scope (the listener and every connection close with it). */
export const make = (options: Options = {}): Effect.Effect<Service, RolloutGatewayError, Scope.Scope> =>
  Effect.map(
    Effect.mapError(
      // Loaded at first use: importing this module loads none of the HTTP platform.
      Effect.flatMap(
        Effect.promise(() => import("./internal/gateway.js")),
        (gateway): ReturnType<typeof internal.make> => gateway.make(options)
      ),
      (error) =>
        new RolloutGatewayError({
          reason: "Listen",
          description: `the rollout gateway cannot listen on ${options.host ?? "127.0.0.1"}:${options.port ?? 0}: ${
            error.cause instanceof Error ? error.cause.message : String(error.cause)
          }; choose another host or port`,
          cause: error.cause
        })
    ),
    (listener): Service => ({
      url: listener.url,
      port: listener.port,
      register: (endpointOptions) =>
        Effect.withSpan(listener.register(endpointOptions), "RolloutGateway.register", {
          attributes: { models: Object.keys(endpointOptions?.models ?? {}) }
        }),
      open: Effect.sync(listener.open)
    })
  )

/** The gateway as a layer (see {@link Options}); it stops listening when the layer is released. */
export const layer = (options: Options = {}): Layer.Layer<RolloutGateway, RolloutGatewayError> =>
  Layer.scoped(RolloutGateway, make(options))

/** Inside a rollout: its endpoint on the gateway, for the life of the scope (see {@link Service.register}). */
export const endpoint = (
  options?: EndpointOptions
): Effect.Effect<Endpoint, never, RolloutGateway | Rollout.Current | Scope.Scope> =>
  Effect.flatMap(RolloutGateway, (gateway) => gateway.register(options))

/** Inside a rollout: runs `f` with the rollout's endpoint, which ends (answers 410) when `f` is done. */
export const withEndpoint = <A, E, R>(
  f: (endpoint: Endpoint) => Effect.Effect<A, E, R>,
  options?: EndpointOptions
): Effect.Effect<A, E, RolloutGateway | Rollout.Current | Exclude<R, Scope.Scope>> =>
  Effect.scoped(Effect.flatMap(endpoint(options), f))
