import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { PassThrough } from "node:stream"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { describe, expect, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import * as TestServices from "effect/TestServices"
import type { ChatCompletionChunk, ChatCompletionRequest } from "../../src/api/ChatCompletion.js"
import * as InferenceClient from "../../src/client/InferenceClient.js"
import { type Decoded, decodeEvents, End, type SseEvent } from "../../src/client/internal/sse.js"
import { decodeBody, nodeBodyOf } from "../../src/client/internal/sseBody.js"
import * as FakeService from "../support/FakeService.js"
import { cutAt } from "../support/utf8.js"

/** Each event's data parsed as JSON (with its type), `[DONE]` ending the stream, data that is not JSON failing it. */
const decode = (event: SseEvent): Decoded<unknown, string> => {
  if (event.data === "[DONE]") return End
  try {
    return Either.right([event.event ?? null, JSON.parse(event.data)])
  } catch {
    return Either.left(`not JSON: ${event.data}`)
  }
}

const data = FastCheck.oneof(
  FastCheck.constantFrom("[DONE]", "not json", '{"a":"é✓"}', "", "{\n}"),
  FastCheck.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v))
)
const eol = FastCheck.constantFrom("\n", "\r\n", "\r")
const line = FastCheck.oneof(
  { weight: 6, arbitrary: data.map((d) => `data: ${d}`) },
  { weight: 1, arbitrary: FastCheck.constantFrom(": ping", "event: error", "id: 7", "retry: 10", "data") }
)
/** An event stream: lines with any line end, blank lines ending events, the last event maybe unterminated. */
const body = FastCheck.array(FastCheck.tuple(line, FastCheck.boolean(), eol), { maxLength: 10 }).chain((lines) =>
  FastCheck.boolean().map((last) =>
    lines
      .map(([text, blank, end], i) =>
        i === lines.length - 1 && last ? text : blank ? `${text}${end}${end}` : `${text}${end}`
      )
      .join("")
  )
)

/** What a consumer sees of a stream: its values in order, then its failure or its end. */
const observe = (stream: Stream.Stream<unknown, string>) =>
  Effect.gen(function* () {
    const seen: Array<unknown> = []
    const exit = yield* Effect.exit(Stream.runForEach(stream, (a) => Effect.sync(() => seen.push(a))))
    return { seen, failure: Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none() }
  })

/** The pieces written to a Node body one by one, a turn of the event loop apart, then its end. */
const nodeBody = (pieces: ReadonlyArray<Uint8Array>) => {
  const body = new PassThrough()
  let aborted = false
  void (async () => {
    for (const piece of pieces) {
      await new Promise((resolve) => setImmediate(resolve))
      if (body.destroyed) return
      body.write(piece)
    }
    body.end()
  })()
  return {
    source: {
      body,
      abort: () => {
        aborted = true
        body.destroy()
      }
    },
    aborted: () => aborted
  }
}

describe("SseBody.decodeBody", () => {
  it.live("gives what Sse.decodeEvents gives from the same bytes, however they are cut", () =>
    Effect.promise(() =>
      FastCheck.assert(
        FastCheck.asyncProperty(body, FastCheck.array(FastCheck.nat(), { maxLength: 6 }), async (text, cuts) => {
          const pieces = cutAt(new TextEncoder().encode(text), cuts)
          const options = { drainAfterEnd: "100 millis" as const, onBodyError: (e: unknown) => `broke: ${String(e)}` }
          const { source } = nodeBody(pieces)
          const ours = await Effect.runPromise(observe(decodeBody(source, decode, options)))
          const theirs = await Effect.runPromise(
            observe(decodeEvents(Stream.fromIterable(pieces), decode, { ...options, onBodyError: () => "never" }))
          )
          expect(ours).toEqual(theirs)
        }),
        { numRuns: 300 }
      )
    )
  )

  it.live("a body that fails is the stream's failure, after the values before it", () =>
    Effect.gen(function* () {
      const body = new PassThrough()
      body.write('data: {"a":1}\n\n')
      setImmediate(() => body.destroy(new Error("socket hang up")))
      const out = yield* observe(
        decodeBody({ body, abort: () => body.destroy() }, decode, {
          drainAfterEnd: "100 millis",
          onBodyError: (e) => `broke: ${(e as Error).message}`
        })
      )
      expect(out).toEqual({ seen: [[null, { a: 1 }]], failure: Option.some("broke: socket hang up") })
    })
  )

  it.live("stopping early aborts; a body read to its end is not aborted", () =>
    Effect.gen(function* () {
      const text = new TextEncoder().encode('data: {"a":1}\n\ndata: {"a":2}\n\n')
      const early = nodeBody([text])
      const options = { drainAfterEnd: "100 millis" as const, onBodyError: String }
      const first = yield* Stream.runCollect(decodeBody(early.source, decode, options).pipe(Stream.take(1)))
      expect(Chunk.toReadonlyArray(first)).toEqual([[null, { a: 1 }]])
      expect(early.aborted()).toBe(true)
      const whole = nodeBody([text])
      expect(Chunk.size(yield* Stream.runCollect(decodeBody(whole.source, decode, options)))).toBe(2)
      expect(whole.aborted()).toBe(false)
    })
  )
})

describe("SseBody.decodeBody, a read interrupted while it waits", () => {
  it.scoped("loses nothing: what the body gives next goes to the next read", () =>
    Effect.gen(function* () {
      const body = new PassThrough()
      const source = { body, abort: () => body.destroy() }
      const pull = yield* Stream.toPull(
        decodeBody(source, decode, { drainAfterEnd: "100 millis", onBodyError: String })
      )
      body.write('data: {"a":1}\n\n')
      expect(Chunk.toReadonlyArray(yield* pull)).toEqual([[null, { a: 1 }]])
      // A read that waits, interrupted before the body gives anything: the body's next event comes after it.
      const waiting = yield* Effect.fork(pull)
      yield* TestServices.provideLive(Effect.sleep("5 millis"))
      yield* Fiber.interrupt(waiting)
      body.write('data: {"a":2}\n\n')
      yield* TestServices.provideLive(Effect.sleep("5 millis"))
      expect(Chunk.toReadonlyArray(yield* pull)).toEqual([[null, { a: 2 }]])
      body.end('data: {"a":3}\n\n')
      expect(Chunk.toReadonlyArray(yield* pull)).toEqual([[null, { a: 3 }]])
      expect(Option.isNone(yield* Effect.flip(pull))).toBe(true)
    })
  )
})

describe("SseBody.decodeBody after [DONE], a body held open", () => {
  const held = () => {
    const body = new PassThrough()
    body.write('data: {"a":1}\n\ndata: [DONE]\n\n')
    let aborted = false
    const source = {
      body,
      abort: () => {
        aborted = true
        body.destroy()
      }
    }
    return { source, aborted: () => aborted }
  }
  const options = { drainAfterEnd: "100 millis" as const, onBodyError: String }

  it.scoped(
    "under the test clock: read until the clock has moved 100 ms (real time does not end it), then aborted",
    () =>
      Effect.gen(function* () {
        const { source, aborted } = held()
        const fiber = yield* Effect.fork(Stream.runCollect(decodeBody(source, decode, options)))
        yield* TestServices.provideLive(Effect.sleep("150 millis"))
        expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
        yield* TestClock.adjust("100 millis")
        expect(Chunk.toReadonlyArray(yield* Fiber.join(fiber))).toEqual([[null, { a: 1 }]])
        expect(aborted()).toBe(true)
      })
  )

  it.scoped("under the live clock: a read interrupted in the drain; the next read ends once the body ends", () =>
    Effect.gen(function* () {
      const { source, aborted } = held()
      const pull = yield* Stream.toPull(decodeBody(source, decode, options))
      expect(Chunk.toReadonlyArray(yield* pull)).toEqual([[null, { a: 1 }]])
      const draining = yield* Effect.fork(pull)
      yield* TestServices.provideLive(Effect.sleep("5 millis"))
      yield* Fiber.interrupt(draining)
      setTimeout(() => source.body.end('data: {"a":2}\n\n'), 20)
      const start = Date.now()
      expect(Option.isNone(yield* Effect.flip(pull).pipe(TestServices.provideLive))).toBe(true)
      expect(Date.now() - start).toBeLessThan(90)
      expect(aborted()).toBe(false)
    }).pipe(TestServices.provideLive)
  )

  it.live("under the live clock: ended after 100 ms, aborted; a body that ends in time is not", () =>
    Effect.gen(function* () {
      const { source, aborted } = held()
      const start = Date.now()
      const out = yield* Stream.runCollect(decodeBody(source, decode, options))
      expect(Chunk.toReadonlyArray(out)).toEqual([[null, { a: 1 }]])
      expect(Date.now() - start).toBeGreaterThanOrEqual(90)
      expect(aborted()).toBe(true)
      const ending = held()
      setTimeout(() => ending.source.body.end('data: {"a":2}\n\n'), 20)
      expect(Chunk.size(yield* Stream.runCollect(decodeBody(ending.source, decode, options)))).toBe(1)
      expect(ending.aborted()).toBe(false)
    })
  )
})

const chunk = (content: string): ChatCompletionChunk => ({
  id: "chatcmpl-1",
  object: "chat.completion.chunk",
  created: 1,
  model: "base",
  choices: [{ index: 0, delta: { content }, finish_reason: null }]
})
const event = (json: unknown) => `data: ${JSON.stringify(json)}\n\n`
const request: ChatCompletionRequest = { model: "base", messages: [{ role: "user", content: "hi" }] }

describe("SseBody.nodeBodyOf", () => {
  const clients = [
    ["undici", NodeHttpClient.layerUndici, true],
    ["node:http", NodeHttpClient.layer, true],
    ["fetch", FetchHttpClient.layer, false]
  ] as const
  for (const [name, layer, found] of clients) {
    it.scoped(`the ${name} client's response ${found ? "gives" : "does not give"} its Node body`, () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        server.route("POST", "/v1/chat/completions", () => ({ chunks: [event(chunk("a")), "data: [DONE]\n\n"] }))
        const client = Context.get(yield* Layer.build(layer), HttpClient.HttpClient)
        const response = yield* client.post(`${server.url}/v1/chat/completions`)
        expect(nodeBodyOf(response) !== undefined).toBe(found)
      })
    )

    it.scoped(`a stream over the ${name} client decodes its chunks`, () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        server.route("POST", "/v1/chat/completions", () => ({
          chunks: [event(chunk("Hel")), event(chunk("lo")), "data: [DONE]\n\n"]
        }))
        const inference = yield* InferenceClient.make({ baseUrl: server.url, apiKey: Redacted.make("k") }).pipe(
          Effect.provide(yield* Layer.build(layer))
        )
        const out = yield* Stream.runCollect(inference.streamChatCompletion(request))
        expect(Chunk.toReadonlyArray(out).map((c) => c.choices[0]?.delta.content)).toEqual(["Hel", "lo"])
      })
    )
  }

  for (const [name, layer] of clients) {
    it.scoped(`a stream over the ${name} client that stops early aborts the request the server holds open`, () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        server.route("POST", "/v1/chat/completions", () => ({ chunks: [event(chunk("a"))], hold: true }))
        const inference = yield* InferenceClient.make({ baseUrl: server.url, apiKey: Redacted.make("k") }).pipe(
          Effect.provide(yield* Layer.build(layer))
        )
        const out = yield* Stream.runCollect(inference.streamChatCompletion(request).pipe(Stream.take(1)))
        expect(Chunk.toReadonlyArray(out).map((c) => c.choices[0]?.delta.content)).toEqual(["a"])
        for (let i = 0; i < 500 && server.aborted() === 0; i++)
          yield* TestServices.provideLive(Effect.sleep("5 millis"))
        expect(server.aborted()).toBe(1)
      })
    )
  }

  it.scoped("a body that breaks mid-stream fails the stream with Transport, after the chunks before it", () =>
    Effect.gen(function* () {
      const server = createServer((_, res) => {
        res.writeHead(200, { "content-type": "text/event-stream" })
        res.write(event(chunk("a")))
        setTimeout(() => res.socket?.destroy(), 20)
      })
      yield* Effect.acquireRelease(
        Effect.async<void>((resume) => void server.listen(0, "127.0.0.1", () => resume(Effect.void))),
        () => Effect.sync(() => server.close())
      )
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
      const inference = yield* InferenceClient.make({ baseUrl: url, maxRetries: 0 }).pipe(
        Effect.provide(yield* Layer.build(NodeHttpClient.layerUndici))
      )
      const seen: Array<string | null | undefined> = []
      const exit = yield* Effect.exit(
        Stream.runForEach(inference.streamChatCompletion(request), (c) =>
          Effect.sync(() => seen.push(c.choices[0]?.delta.content))
        )
      )
      expect(seen).toEqual(["a"])
      const error = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
      expect(Option.getOrThrow(error)).toMatchObject({ reason: "Transport", status: 200, retryable: false })
      expect(Option.getOrThrow(error).description).toMatch(/^the stream broke: /)
    })
  )
})
