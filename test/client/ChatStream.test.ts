/**
 * `ChatStream` against the real embedded backend and the real inference client: a streamed completion joined by
 * `collect` is the unstreamed completion of the same request (the engine samples both from the same seed), for
 * text with logprobs and token ids, several choices, and tool calls; `fold` and `forEach` mean what
 * `Stream.runFold` and `Stream.runForEach` mean; failures and interruption pass through.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import type { ChatCompletionChunk, ChatCompletionRequest } from "../../src/api/ChatCompletion.js"
import * as ChatStream from "../../src/client/ChatStream.js"
import { BASE, inferenceClient } from "../contract/support.js"
import { Backend } from "../server/support.js"

const text: ChatCompletionRequest = {
  model: BASE,
  messages: [{ role: "user", content: "Say something" }],
  seed: 5,
  temperature: 1,
  max_completion_tokens: 12,
  logprobs: true,
  top_logprobs: 2,
  return_token_ids: true
}

const choices: ChatCompletionRequest = {
  model: BASE,
  messages: [{ role: "user", content: "Pick a colour" }],
  n: 3,
  seed: 11,
  temperature: 1,
  max_completion_tokens: 16,
  structured_outputs: { choice: ["red", "blue", "green", "gold"] }
}

const tools: ChatCompletionRequest = {
  model: BASE,
  messages: [{ role: "user", content: "How much is the lamp?" }],
  seed: 2,
  temperature: 1,
  max_completion_tokens: 100,
  tool_choice: "required",
  parallel_tool_calls: true,
  tools: [
    {
      type: "function",
      function: {
        name: "price",
        parameters: {
          type: "object",
          required: ["item"],
          properties: { item: { type: "string", enum: ["lamp", "desk"] } }
        }
      }
    }
  ]
}

/** The fields of the unstreamed completion a stream also carries (a stream has no `system_fingerprint`). */
const comparable = (completion: { readonly [k: string]: unknown }) => {
  const { id: _id, created: _created, system_fingerprint: _fp, service_tier: _tier, ...rest } = completion
  return rest
}

describe("ChatStream", () => {
  layer(Backend, { excludeTestServices: true })("on the embedded server", (it) => {
    it.scoped("collect: a stream joined is the unstreamed completion (text, logprobs, token ids, usage)", () =>
      Effect.gen(function* () {
        const client = yield* inferenceClient()
        const whole = yield* client.createChatCompletion(text)
        const seen: Array<ChatCompletionChunk> = []
        const joined = yield* ChatStream.collect(
          client.streamChatCompletion({ ...text, stream_options: { include_usage: true } }),
          { onChunk: (chunk) => seen.push(chunk) }
        )
        expect(comparable(joined)).toEqual(comparable(whole))
        expect(joined.choices[0]?.message.content?.length).toBeGreaterThan(0)
        expect(joined.choices[0]?.logprobs?.content?.length).toBe(whole.usage.completion_tokens)
        expect(joined.object).toBe("chat.completion")
        expect(seen.length).toBeGreaterThan(2)
        expect(joined.id).toBe(seen[0]?.id)
      })
    )

    it.scoped("collect: several choices, each joined by its index, in the pipeable form", () =>
      Effect.gen(function* () {
        const client = yield* inferenceClient()
        const whole = yield* client.createChatCompletion(choices)
        const joined = yield* client
          .streamChatCompletion({ ...choices, stream_options: { include_usage: true } })
          .pipe(ChatStream.collect())
        expect(joined.choices.map((c) => c.index)).toEqual([0, 1, 2])
        expect(comparable(joined)).toEqual(comparable(whole))
      })
    )

    it.scoped("collect: tool calls joined from their fragments, as the unstreamed message has them", () =>
      Effect.gen(function* () {
        const client = yield* inferenceClient()
        const whole = yield* client.createChatCompletion(tools)
        const ids: Array<string> = []
        let fragments = 0
        const joined = yield* ChatStream.collect(
          client.streamChatCompletion({ ...tools, stream_options: { include_usage: true } }),
          {
            onChunk: (chunk) => {
              for (const call of chunk.choices[0]?.delta.tool_calls ?? []) {
                if (call.id != null) ids.push(call.id)
                if (call.function?.arguments) fragments++
              }
            }
          }
        )
        expect(whole.choices[0]?.message.tool_calls?.length).toBeGreaterThan(0)
        // The arguments came in several pieces.
        expect(fragments).toBeGreaterThan(1)
        expect(joined.choices[0]?.message.tool_calls?.map((call) => call.id)).toEqual(ids)
        // Each request draws its own call ids.
        const withoutIds = (completion: typeof whole) =>
          comparable({
            ...completion,
            choices: completion.choices.map((choice) => ({
              ...choice,
              message: {
                ...choice.message,
                tool_calls: choice.message.tool_calls?.map(({ id: _id, ...call }) => call)
              }
            }))
          })
        expect(withoutIds(joined)).toEqual(withoutIds(whole))
      })
    )

    it.scoped("fold and forEach see what Stream.runFold and Stream.runForEach see", () =>
      Effect.gen(function* () {
        const client = yield* inferenceClient()
        const request = { ...text, stream_options: { include_usage: true } }
        const count = (n: number, chunk: ChatCompletionChunk) => n + chunk.choices.length
        const expected = yield* Stream.runFold(client.streamChatCompletion(request), 0, count)
        expect(yield* ChatStream.fold(client.streamChatCompletion(request), 0, count)).toBe(expected)
        expect(yield* client.streamChatCompletion(request).pipe(ChatStream.fold(0, count))).toBe(expected)
        // The same seed: the same chunks but for their id.
        const seen: Array<unknown> = []
        yield* ChatStream.forEach(client.streamChatCompletion(request), (chunk) =>
          Effect.sync(() => seen.push(chunk.choices))
        )
        const all = yield* Stream.runCollect(client.streamChatCompletion(request))
        expect(seen).toEqual(Chunk.toReadonlyArray(all).map((chunk) => chunk.choices))
        expect(seen.length).toBeGreaterThan(2)
      })
    )

    it.scoped("a failure of the stream is the result's, and a failure of forEach's function stops the stream", () =>
      Effect.gen(function* () {
        const client = yield* inferenceClient({ maxRetries: 0 })
        const missing = client.streamChatCompletion({ ...text, model: "no/such-model" })
        expect(yield* Effect.flip(ChatStream.collect(missing))).toMatchObject({ reason: "NotFound", status: 404 })
        expect(yield* Effect.flip(ChatStream.fold(missing, 0, (n) => n + 1))).toMatchObject({ reason: "NotFound" })
        let calls = 0
        const stopped = yield* Effect.flip(
          ChatStream.forEach(client.streamChatCompletion(text), () => {
            calls++
            return Effect.fail("enough" as const)
          })
        )
        expect(stopped).toBe("enough")
        expect(calls).toBe(1)
      })
    )
  })

  it.effect("collect: a stream without chunks fails with NoSuchElementException", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(ChatStream.collect(Stream.empty))
      expect(Cause.isNoSuchElementException(error)).toBe(true)
    })
  )

  it.effect("interrupting a fold stops the stream: its finalizer runs", () =>
    Effect.gen(function* () {
      let released = false
      const endless = Stream.concat(Stream.make(1, 2, 3), Stream.never).pipe(
        Stream.ensuring(Effect.sync(() => (released = true)))
      )
      const fiber = yield* Effect.fork(ChatStream.fold(endless, 0, (n, x: number) => n + x))
      yield* Effect.yieldNow()
      const exit = yield* Fiber.interrupt(fiber)
      expect(Exit.isInterrupted(exit)).toBe(true)
      expect(released).toBe(true)
    })
  )
})
