import { readFileSync } from "node:fs"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { describe, expect, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as InferenceClient from "../../src/client/InferenceClient.js"
import { resolveOptions } from "../../src/client/internal/config.js"
import { normalizeBaseUrl } from "../../src/client/internal/http.js"
import * as TrainingClient from "../../src/client/TrainingClient.js"
import { version } from "../../src/internal/version.js"
import * as FakeService from "../support/FakeService.js"

const env = (entries: Record<string, string>) =>
  Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(entries))))

describe("client configuration", () => {
  it("sends the package version in User-Agent", () => {
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }
    expect(version).toBe(pkg.version)
  })

  it("normalises base URLs: trailing slashes and a trailing /v1 are dropped", () => {
    expect(normalizeBaseUrl("https://api.training.wandb.ai/v1/")).toBe("https://api.training.wandb.ai")
    expect(normalizeBaseUrl("https://forge.coreweave.com/api/training")).toBe(
      "https://forge.coreweave.com/api/training"
    )
    expect(normalizeBaseUrl(new URL("http://127.0.0.1:8000/"))).toBe("http://127.0.0.1:8000")
  })

  it.scoped("layerConfig reads WANDB_API_KEY and EFFECT_RL_TRAINING_URL from the environment", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const layer = TrainingClient.layerConfig().pipe(Layer.provide(NodeHttpClient.layerUndici))
      yield* Effect.flatMap(TrainingClient.TrainingClient, (client) => client.health).pipe(
        Effect.provide(layer),
        env({ WANDB_API_KEY: "from-env", EFFECT_RL_TRAINING_URL: `${server.url}/v1` })
      )
      expect(server.received[0]?.path).toBe("/v1/health")
      expect(server.received[0]?.headers.authorization).toBe("Bearer from-env")
    })
  )

  it.scoped("an empty WANDB_API_KEY or service URL counts as unset: no key sent, the default URL", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const layer = TrainingClient.layerConfig().pipe(Layer.provide(NodeHttpClient.layerUndici))
      yield* Effect.flatMap(TrainingClient.TrainingClient, (client) => client.health).pipe(
        Effect.provide(layer),
        env({ WANDB_API_KEY: "", EFFECT_RL_TRAINING_URL: server.url })
      )
      expect(server.received[0]?.headers.authorization).toBeUndefined()
      const resolved = yield* resolveOptions({}, TrainingClient.URL_ENV, TrainingClient.DEFAULT_URL).pipe(
        env({ WANDB_API_KEY: " ", EFFECT_RL_TRAINING_URL: "" })
      )
      expect(resolved).toEqual({ apiKey: undefined, baseUrl: TrainingClient.DEFAULT_URL })
    })
  )

  it.scoped("explicit layer options take precedence over the environment", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const layer = InferenceClient.layerConfig({ apiKey: Redacted.make("explicit"), baseUrl: server.url }).pipe(
        Layer.provide(NodeHttpClient.layerUndici)
      )
      yield* Effect.flatMap(InferenceClient.InferenceClient, (client) => client.listModels()).pipe(
        Effect.provide(layer),
        env({ WANDB_API_KEY: "from-env", EFFECT_RL_INFERENCE_URL: "http://127.0.0.1:1" })
      )
      expect(server.received[0]?.headers.authorization).toBe("Bearer explicit")
    })
  )

  it.scoped("transformClient lets the caller own the HTTP client's policy", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const layer = TrainingClient.layer({
        baseUrl: server.url,
        transformClient: (client) => client.pipe(HttpClient.mapRequest(HttpClientRequest.setHeader("x-team", "rl")))
      }).pipe(Layer.provide(NodeHttpClient.layerUndici))
      yield* Effect.flatMap(TrainingClient.TrainingClient, (client) => client.health).pipe(Effect.provide(layer))
      expect(server.received[0]?.headers["x-team"]).toBe("rl")
      expect(server.received[0]?.headers.authorization).toBeUndefined()
    })
  )

  it("defaults to the hosted services: training at the newest document's published server", () => {
    expect(TrainingClient.DEFAULT_URL).toBe("https://forge.coreweave.com/api/training")
    expect(TrainingClient.PREVIOUS_URL).toBe("https://api.training.wandb.ai")
    expect(InferenceClient.DEFAULT_URL).toBe("https://api.inference.wandb.ai")
  })

  it.effect(
    "a default client calls the published server under its path; the old host through the env or the option",
    () =>
      Effect.gen(function* () {
        // No request leaves the process: the transport's last client answers each one with a 503 and records its URL.
        const urls: Array<string> = []
        const offline = HttpClient.make((request) =>
          Effect.sync(() => {
            urls.push(request.url)
            return HttpClientResponse.fromWeb(request, new Response("{}", { status: 503 }))
          })
        )
        const health = (layer: Layer.Layer<TrainingClient.TrainingClient, unknown, HttpClient.HttpClient>) =>
          Effect.flatMap(TrainingClient.TrainingClient, (client) => Effect.flip(client.health)).pipe(
            Effect.provide(layer.pipe(Layer.provide(Layer.succeed(HttpClient.HttpClient, offline)))),
            Effect.orDie
          )
        yield* health(TrainingClient.layerConfig({ maxRetries: 0 })).pipe(env({}))
        yield* health(TrainingClient.layerConfig({ maxRetries: 0 })).pipe(
          env({ EFFECT_RL_TRAINING_URL: TrainingClient.PREVIOUS_URL })
        )
        yield* health(TrainingClient.layer({ baseUrl: TrainingClient.PREVIOUS_URL, maxRetries: 0 }))
        expect(urls).toEqual([
          "https://forge.coreweave.com/api/training/v1/health",
          "https://api.training.wandb.ai/v1/health",
          "https://api.training.wandb.ai/v1/health"
        ])
        expect(yield* TrainingClient.configuredUrl().pipe(env({}))).toBe(TrainingClient.DEFAULT_URL)
        expect(yield* TrainingClient.configuredUrl().pipe(env({ EFFECT_RL_TRAINING_URL: "http://127.0.0.1:9" }))).toBe(
          "http://127.0.0.1:9"
        )
        expect(
          yield* TrainingClient.configuredUrl({ baseUrl: "http://explicit" }).pipe(
            env({ EFFECT_RL_TRAINING_URL: "http://127.0.0.1:9" })
          )
        ).toBe("http://explicit")
      })
  )
})
