import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import type { ChatCompletionChunk } from "../../src/api/ChatCompletion.js"
import * as LocalBackend from "../../src/LocalBackend.js"
import { badRequest } from "../../src/local/engine/EngineError.js"
import { BASE_MODEL, eventStream } from "../../src/local/server/internal/inference.js"
import { inference } from "../support/clients.js"
import { auth, Backend, call, send } from "./support.js"

const ask = { model: BASE_MODEL, messages: [{ role: "user", content: "hi" }], seed: 7, max_completion_tokens: 8 }

const events = (text: string) =>
  text
    .split("\n\n")
    .filter((e) => e !== "")
    .map((e) => e.replace(/^data: /, ""))

describe("chat completions", () => {
  it.layer(Backend)("on the real server", (it) => {
    it.effect("every assistant message carries refusal: null, as the hosted engine sends it", () =>
      Effect.gen(function* () {
        const reply = yield* send("POST", "/v1/chat/completions", { ...ask, n: 2 })
        expect(reply.status).toBe(200)
        const choices = (reply.json as { choices: ReadonlyArray<{ message: Record<string, unknown> }> }).choices
        expect(choices).toHaveLength(2)
        for (const choice of choices) expect(choice.message).toMatchObject({ role: "assistant", refusal: null })
      })
    )

    it.effect("GET /v1/models lists the base models with their context lengths", () =>
      Effect.gen(function* () {
        const reply = yield* send("GET", "/v1/models")
        expect(reply.status).toBe(200)
        const long = "effect-rl/tiny-2k"
        expect(reply.json).toMatchObject({
          object: "list",
          data: [
            { id: BASE_MODEL, object: "model", owned_by: "effect-rl", root: BASE_MODEL, max_model_len: 512 },
            { id: long, object: "model", owned_by: "effect-rl", root: long, max_model_len: 2048 },
            { id: "effect-rl/base-2k", object: "model", owned_by: "effect-rl", max_model_len: 2048 },
            { id: "effect-rl/base-wide-2k", object: "model", owned_by: "effect-rl", max_model_len: 2048 }
          ]
        })
      })
    )

    it.effect("effect-rl/tiny-2k takes a prompt of 1,000 tokens that effect-rl/tiny refuses", () =>
      Effect.gen(function* () {
        const messages = [{ role: "user", content: "x".repeat(1_000) }]
        const long = yield* send("POST", "/v1/chat/completions", {
          model: "effect-rl/tiny-2k",
          messages,
          max_tokens: 4
        })
        expect(long.status).toBe(200)
        expect((long.json as { usage: { prompt_tokens: number } }).usage.prompt_tokens).toBeGreaterThan(1_000)
        const short = yield* send("POST", "/v1/chat/completions", { model: BASE_MODEL, messages, max_tokens: 4 })
        expect(short.status).toBe(400)
        expect(JSON.stringify(short.json)).toContain("maximum context length is 512 tokens")
        expect(short.json).toMatchObject({ error: { param: "messages" } })
        // A limit no prompt leaves room for is named, not the messages.
        for (const [field, limit] of [
          ["max_tokens", 512],
          ["max_completion_tokens", 2 ** 31]
        ] as const) {
          const over = yield* send("POST", "/v1/chat/completions", {
            model: BASE_MODEL,
            messages: [{ role: "user", content: "hi" }],
            [field]: limit
          })
          expect(over.status).toBe(400)
          expect(over.json).toMatchObject({ error: { param: field } })
        }
      })
    )

    it.effect("a completion is deterministic for a seed, on both paths", () =>
      Effect.gen(function* () {
        const a = yield* send("POST", "/v1/chat/completions", ask)
        const b = yield* send("POST", "/v1/chat/completions/", ask)
        expect(a.status).toBe(200)
        expect(a.json).toMatchObject({ object: "chat.completion", model: BASE_MODEL })
        const content = (r: typeof a) =>
          (r.json as { choices: Array<{ message: { content: string } }> }).choices[0]?.message.content
        expect(typeof content(a)).toBe("string")
        expect(content(b)).toBe(content(a))
      })
    )

    it.effect("an unknown model is 404 in the OpenAI shape", () =>
      Effect.gen(function* () {
        const reply = yield* send("POST", "/v1/chat/completions", { ...ask, model: "no/such-model" })
        expect(reply.status).toBe(404)
        expect(reply.json).toEqual({
          error: { message: "The model `no/such-model` does not exist.", type: "NotFoundError", param: null, code: 404 }
        })
      })
    )

    it.effect("engine refusals are 400 in the OpenAI shape", () =>
      Effect.gen(function* () {
        const reply = yield* send("POST", "/v1/chat/completions", { ...ask, priority: 1 })
        expect(reply.status).toBe(400)
        expect(reply.json).toEqual({
          error: {
            message: "Got priority 1 but Priority scheduling is not enabled.",
            type: "BadRequestError",
            param: "priority",
            code: 400
          }
        })
      })
    )

    it.effect("a check across fields (stream_options without stream) is a 400, not a 422", () =>
      Effect.gen(function* () {
        const reply = yield* send("POST", "/v1/chat/completions", { ...ask, stream_options: { include_usage: true } })
        expect(reply.status).toBe(400)
        expect(reply.json).toEqual({
          error: {
            message: "stream_options is only allowed when stream is true",
            type: "BadRequestError",
            param: "stream_options",
            code: 400
          }
        })
      })
    )

    it.effect("a field of the wrong type is a 422 with loc", () =>
      Effect.gen(function* () {
        const reply = yield* send("POST", "/v1/chat/completions", { ...ask, messages: 3 })
        expect(reply.status).toBe(422)
        expect(reply.json).toEqual({
          detail: [{ loc: ["body", "messages"], msg: "Input should be a valid list", type: "list_type" }]
        })
      })
    )

    it.effect("a streamed completion: role chunk first, usage chunk last, then [DONE]; same text as unstreamed", () =>
      Effect.gen(function* () {
        const whole = yield* send("POST", "/v1/chat/completions", ask)
        const reply = yield* call("/v1/chat/completions", {
          method: "POST",
          headers: { ...auth, "content-type": "application/json" },
          body: JSON.stringify({ ...ask, stream: true, stream_options: { include_usage: true } })
        })
        expect(reply.status).toBe(200)
        expect(reply.contentType).toContain("text/event-stream")
        const data = events(reply.text)
        expect(data.at(-1)).toBe("[DONE]")
        const chunks = data.slice(0, -1).map((d) => JSON.parse(d) as ChatCompletionChunk)
        expect(chunks[0]?.choices[0]?.delta).toMatchObject({ role: "assistant", content: "" })
        expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { completion_tokens: expect.any(Number) } })
        const text = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")
        const expected = (whole.json as { choices: Array<{ message: { content: string } }> }).choices[0]?.message
        expect(text).toBe(expected?.content)
      })
    )

    it.scoped("the repo's inference client works against it unchanged", () =>
      Effect.gen(function* () {
        const { url } = yield* LocalBackend.LocalBackend
        const client = yield* inference(url)
        const list = yield* client.listModels()
        expect(list.data.map((m) => m.id)).toContain(BASE_MODEL)
        const completion = yield* client.createChatCompletion(ask)
        const streamed = yield* Stream.runCollect(
          client.streamChatCompletion({ ...ask, stream: true, stream_options: { include_usage: true } })
        )
        const text = Chunk.toReadonlyArray(streamed)
          .map((c) => c.choices[0]?.delta.content ?? "")
          .join("")
        expect(text).toBe(completion.choices[0]?.message.content)
      })
    )
  })

  describe("the event stream", () => {
    it.effect("an error after the stream began is an `error` event, then [DONE]", () =>
      Effect.gen(function* () {
        function* chunks(): Generator<ChatCompletionChunk> {
          yield { id: "chatcmpl-1", object: "chat.completion.chunk", created: 1, model: "m", choices: [] }
          throw badRequest("messages", "went wrong")
        }
        const text = (yield* Stream.runCollect(Stream.decodeText(eventStream(chunks())))).pipe(Chunk.toReadonlyArray)
        const data = events(text.join(""))
        expect(data).toHaveLength(3)
        expect(JSON.parse(data[1]!)).toEqual({
          error: { message: "went wrong", type: "BadRequestError", param: "messages", code: 400 }
        })
        expect(data[2]).toBe("[DONE]")
      })
    )
  })
})
