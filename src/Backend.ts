/**
 * Where a training loop runs: the one layer that changes between the embedded local backend and the hosted
 * service. Each layer provides the three clients (`TrainingClient`, `InferenceClient`, `TraceClient`) over
 * Node's HTTP client, so a loop can add `Tracing.layer(...)` with nothing more to set up.
 *
 * - {@link local}: starts the embedded backend in-process (SQLite under a data directory, the small CPU
 *   policy) on a free loopback port and points the clients at it (the trace surface is on the same origin,
 *   with the same key), with `SftData` uploading SFT data to it. No account, GPU or network needed. The
 *   clients reach it without a socket (`LocalBackend`'s `httpClient`); other programs reach it at its URL.
 * - {@link hosted}: the hosted services, configured from the environment (`WANDB_API_KEY`,
 *   `EFFECT_RL_TRAINING_URL`, `EFFECT_RL_INFERENCE_URL`, `EFFECT_RL_TRACE_URL`), options winning over it.
 * - {@link fromEnv}: `hosted` when `WANDB_API_KEY` is set, else `local`.
 *
 * ```ts
 * program.pipe(Effect.provide(Backend.local()), NodeRuntime.runMain)   // on this machine
 * program.pipe(Effect.provide(Backend.hosted()), NodeRuntime.runMain)  // against the hosted service
 * ```
 *
 * Like the CLI, this module sits at the edge: it joins `local/` and `client/`, which never import each other.
 *
 * @since 0.1.0
 */
import type { PlatformError } from "@effect/platform/Error"
import * as HttpClient from "@effect/platform/HttpClient"
import type { ServeError } from "@effect/platform/HttpServerError"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import type { ConfigError } from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as InferenceClient from "./client/InferenceClient.js"
import { API_KEY_ENV, secretSetting } from "./client/internal/config.js"
import * as TraceClient from "./client/TraceClient.js"
import * as TrainingClient from "./client/TrainingClient.js"
import * as LocalBackend from "./LocalBackend.js"
import * as SftData from "./workflow/SftData.js"

/** What a backend layer provides: the three clients. */
export type Clients = TrainingClient.TrainingClient | InferenceClient.InferenceClient | TraceClient.TraceClient

/** Options of {@link local}. */
export interface LocalOptions extends LocalBackend.Options {
  /** Options for the clients (retries, time-outs); the base URL and key come from the backend. */
  readonly client?: Omit<TrainingClient.Options, "apiKey" | "baseUrl"> | undefined
}

/**
 * The embedded backend started in-process, with the clients pointed at it; the backend itself
 * ({@link LocalBackend.LocalBackend}: its URL, key and data directory) is provided too, and `SftData`
 * uploading to it (`SftData.localFiles`).
 */
export const local = (
  options: LocalOptions = {}
): Layer.Layer<
  Clients | LocalBackend.LocalBackend | SftData.SftData,
  PlatformError | ServeError | ConfigError | LocalBackend.DataDirError
> => {
  const clients = Layer.unwrapEffect(
    Effect.map(LocalBackend.LocalBackend, ({ apiKey, url, httpClient }) => {
      const common = { ...options.client, apiKey, baseUrl: url }
      // In-process: a loopback round trip (sockets, HTTP parsing, streams) cost more CPU than most requests.
      const http = Layer.succeed(HttpClient.HttpClient, httpClient)
      return Layer.mergeAll(
        TrainingClient.layer(common),
        InferenceClient.layer(common),
        TraceClient.layer(common),
        SftData.localFiles({ baseUrl: url, apiKey })
      ).pipe(Layer.provide(http))
    })
  )
  return Layer.provideMerge(clients, LocalBackend.layer(options))
}

/** Options of {@link hosted}: those of each client (env fills what is left out). */
export interface HostedOptions {
  /** Options of the training client. */
  readonly training?: TrainingClient.Options | undefined
  /** Options of the inference client. */
  readonly inference?: InferenceClient.Options | undefined
  /** Options of the trace client. */
  readonly trace?: TraceClient.Options | undefined
}

/** The hosted services, configured from the environment (see the module comment). */
export const hosted = (options: HostedOptions = {}): Layer.Layer<Clients, ConfigError> =>
  Layer.mergeAll(
    TrainingClient.layerConfig(options.training),
    InferenceClient.layerConfig(options.inference),
    TraceClient.layerConfig(options.trace)
  ).pipe(Layer.provide(NodeHttpClient.layerUndici))

/** `hosted()` when `WANDB_API_KEY` is set in the environment (and not empty), else `local(options)`. */
export const fromEnv = (
  options: LocalOptions = {}
): Layer.Layer<Clients, PlatformError | ServeError | ConfigError | LocalBackend.DataDirError> =>
  Layer.unwrapEffect(
    Effect.map(secretSetting(API_KEY_ENV), (key) =>
      Option.isSome(key)
        ? hosted()
        : (local(options) as Layer.Layer<Clients, PlatformError | ServeError | ConfigError | LocalBackend.DataDirError>)
    )
  )
