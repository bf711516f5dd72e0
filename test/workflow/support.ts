/**
 * The real embedded backend for the workflow tests, with both real clients pointed at it: one layer
 * providing `LocalBackend`, `TrainingClient` and `InferenceClient`.
 *
 * The clients run over the undici-based Node HTTP client (`NodeHttpClient.layerUndici`), built inside this
 * layer: its dispatcher lives exactly as long as the layer (an `it.layer` block, or `Effect.provide` of one
 * test) and is destroyed when the layer is released, before the backend stops.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as InferenceClient from "../../src/client/InferenceClient.js"
import * as TrainingClient from "../../src/client/TrainingClient.js"
import * as LocalBackend from "../../src/local/LocalBackend.js"
import { API_KEY } from "../support/clients.js"

/** The embedded backend alone, on a temporary data directory, with the test key. */
export const Backend = LocalBackend.layer({ apiKey: Redacted.make(API_KEY) })

/** Both real clients against the running backend (its URL and key). */
export const Clients: Layer.Layer<
  TrainingClient.TrainingClient | InferenceClient.InferenceClient,
  never,
  LocalBackend.LocalBackend
> = Layer.unwrapEffect(
  Effect.map(LocalBackend.LocalBackend, ({ url, apiKey }) =>
    Layer.merge(TrainingClient.layer({ apiKey, baseUrl: url }), InferenceClient.layer({ apiKey, baseUrl: url }))
  )
).pipe(Layer.provide(NodeHttpClient.layerUndici))

/** The real embedded backend and both real clients against it. */
export const WorkflowBackend = Clients.pipe(Layer.provideMerge(Backend))

/** The base model the embedded backend serves. */
export const TINY = "effect-rl/tiny"
