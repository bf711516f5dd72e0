import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import type { ChatCompletionRequest } from "../../src/api/ChatCompletion.js"
import * as InferenceClient from "../../src/client/InferenceClient.js"
import { version } from "../../src/internal/version.js"
import { API_KEY, inference } from "../support/clients.js"
import * as FakeService from "../support/FakeService.js"

const request: ChatCompletionRequest = { model: "base", messages: [{ role: "user", content: "hi" }] }

const models = {
  object: "list",
  data: [
    { id: "base", object: "model", created: 1, owned_by: "me", root: "base", max_model_len: 8192 },
    { id: "me/p/m:step-3", object: "model", created: 2, owned_by: "me", root: "base", parent: "base" }
  ]
}

describe("InferenceClient against a real server", () => {
  it.scoped("listModels: GET /v1/models decoded, with bearer and user agent, no project header by default", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* inference(server.url)
      server.route("GET", "/v1/models", () => ({ json: models }))
      const list = yield* client.listModels()
      expect(list.object).toBe("list")
      expect(list.data.map((m) => m.id)).toEqual(["base", "me/p/m:step-3"])
      expect(list.data[0]?.max_model_len).toBe(8192)
      expect(list.data[1]).toMatchObject({ object: "model", created: 2, owned_by: "me", parent: "base" })
      const [received] = server.received
      expect(received).toMatchObject({ method: "GET", path: "/v1/models", body: "" })
      expect(received?.headers.authorization).toBe(`Bearer ${API_KEY}`)
      expect(received?.headers["user-agent"]).toBe(`effect-rl/${version}`)
      expect(received?.headers["openai-project"]).toBeUndefined()
    })
  )

  it.scoped("a base URL ending in /v1/ is accepted: paths carry /v1 once", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* inference(`${server.url}/v1/`)
      const list = yield* client.listModels()
      expect(list.data.map((m) => m.id)).toEqual(["base"])
      expect(server.received[0]?.path).toBe("/v1/models")
    })
  )

  it.scoped("a model list that does not match its schema is Decode", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* inference(server.url, { maxRetries: 0 })
      server.route("GET", "/v1/models", () => ({ json: { object: "list", data: [{ id: "base", object: "engine" }] } }))
      const error = yield* Effect.flip(client.listModels())
      expect(error).toMatchObject({ reason: "Decode", method: "GET", path: "/v1/models", status: 200 })
      expect(error.excerpt).toContain('"object":"engine"')
    })
  )

  it.scoped("the layer's project is sent as OpenAI-Project on every call, and a call's project overrides it", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      // The layer is built in the test's scope, so its HTTP client lives as long as the test.
      const context = yield* Layer.build(
        InferenceClient.layer({ baseUrl: server.url, apiKey: Redacted.make(API_KEY), project: "team/default" }).pipe(
          Layer.provide(NodeHttpClient.layerUndici)
        )
      )
      const client = Context.get(context, InferenceClient.InferenceClient)
      server.route("POST", "/v1/chat/completions", (r) =>
        (r.json as { stream?: boolean }).stream === true
          ? {
              chunks: [
                `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "base", choices: [] })}\n\n`,
                "data: [DONE]\n\n"
              ]
            }
          : { json: { model: "base", choices: [], usage: {} } }
      )
      yield* client.listModels()
      yield* client.listModels({ project: "team/other" })
      yield* client.createChatCompletion(request)
      yield* client.createChatCompletion(request, { project: "team/chat" })
      yield* Stream.runDrain(client.streamChatCompletion(request))
      yield* Stream.runDrain(client.streamChatCompletion(request, { project: "team/stream" }))
      expect(server.received.map((r) => [r.method, r.path, r.headers["openai-project"]])).toEqual([
        ["GET", "/v1/models", "team/default"],
        ["GET", "/v1/models", "team/other"],
        ["POST", "/v1/chat/completions", "team/default"],
        ["POST", "/v1/chat/completions", "team/chat"],
        ["POST", "/v1/chat/completions", "team/default"],
        ["POST", "/v1/chat/completions", "team/stream"]
      ])
      expect(server.received.every((r) => r.headers.authorization === `Bearer ${API_KEY}`)).toBe(true)
    })
  )

  it.scoped("without a project configured, no OpenAI-Project header, unless a call names one", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* inference(server.url)
      yield* client.createChatCompletion(request)
      yield* client.listModels({ project: "team/once" })
      yield* client.listModels()
      expect(server.received.map((r) => r.headers["openai-project"])).toEqual([undefined, "team/once", undefined])
    })
  )

  it.scoped("a chat completion on the inference host: POST /v1/chat/completions with the project header", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* inference(server.url, { project: "team/p" })
      const completion = yield* client.createChatCompletion({ ...request, logprobs: true, top_logprobs: 1 })
      expect(completion.choices[0]?.message.content).toBe("hello")
      expect(completion.choices[0]?.logprobs?.content?.[0]).toMatchObject({ token: "hello", logprob: -0.5 })
      expect(completion.usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 })
      const [received] = server.received
      expect(received).toMatchObject({ method: "POST", path: "/v1/chat/completions" })
      expect(received?.json).toEqual({ ...request, logprobs: true, top_logprobs: 1, stream: false })
      expect(received?.headers["openai-project"]).toBe("team/p")
      expect(received?.headers["content-type"]).toBe("application/json")
    })
  )

  it.scoped("a streamed chat completion on the inference host carries the project header", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* inference(server.url, { project: "team/p" })
      const chunk = { id: "c", object: "chat.completion.chunk", created: 1, model: "base" }
      server.route("POST", "/v1/chat/completions", () => ({
        chunks: [
          `data: ${JSON.stringify({ ...chunk, choices: [{ index: 0, delta: { content: "x" } }] })}\n\n`,
          "data: [DONE]\n\n"
        ]
      }))
      const out = yield* Stream.runCollect(client.streamChatCompletion(request))
      expect(Chunk.toReadonlyArray(out).map((c) => c.choices[0]?.delta.content)).toEqual(["x"])
      expect(server.received[0]?.headers["openai-project"]).toBe("team/p")
      expect(server.received[0]?.json).toEqual({ ...request, stream: true })
    })
  )
})
