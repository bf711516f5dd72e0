import { describe, expect, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import * as TestServices from "effect/TestServices"
import type { ChatCompletionChunk, ChatCompletionRequest } from "../../src/api/ChatCompletion.js"
import type { ApiError } from "../../src/client/ApiError.js"
import { events, makeParser, type SseEvent } from "../../src/client/internal/sse.js"
import { inference, training } from "../support/clients.js"
import * as FakeService from "../support/FakeService.js"

const ev = (data: string, event?: string, id?: string): SseEvent => ({ event, data, id })

/** Feed pieces one by one, then end; every event in order. */
const parse = (...pieces: ReadonlyArray<string>): Array<SseEvent> => {
  const parser = makeParser()
  return [...pieces.flatMap((piece) => parser.feed(piece)), ...parser.end()]
}

describe("SSE parser", () => {
  it("LF line endings", () => {
    expect(makeParser().feed("data: a\n\ndata: b\n\n")).toEqual([ev("a"), ev("b")])
  })

  it("CRLF line endings", () => {
    expect(makeParser().feed("data: a\r\n\r\ndata: b\r\n\r\n")).toEqual([ev("a"), ev("b")])
  })

  it("CR line endings", () => {
    expect(makeParser().feed("data: a\r\rdata: b\r\r")).toEqual([ev("a"), ev("b")])
  })

  it("a CR ending one feed and the LF starting the next are one line end", () => {
    const parser = makeParser()
    expect(parser.feed("data: a\r")).toEqual([])
    // Read as two line ends, the LF would be a blank line and split this into two events.
    expect(parser.feed("\ndata: b\r\n\r\n")).toEqual([ev("a\nb")])
    expect(parser.end()).toEqual([])
  })

  it("a CR, an empty feed, then an LF are still one line end", () => {
    expect(parse("data: a\r", "", "\ndata: b\n\n")).toEqual([ev("a\nb")])
  })

  it("comment lines are ignored, also inside an event", () => {
    expect(parse(": ping\n\n:\ndata: a\n: keep-alive\ndata: b\n\n: bye\n")).toEqual([ev("a\nb")])
  })

  it("multi-line data joins with LF; `data:` without a space and an empty data line", () => {
    expect(parse("data: one\ndata:two\ndata\ndata: \n\n")).toEqual([ev("one\ntwo\n\n")])
  })

  it("the event and id fields; they do not carry over to the next event", () => {
    expect(parse("event: error\nid: 7\ndata: {}\n\ndata: next\n\n")).toEqual([ev("{}", "error", "7"), ev("next")])
  })

  it("an event with no data is not delivered; unknown fields and retry are ignored", () => {
    expect(parse("event: ping\n\nretry: 10\nfoo: bar\ndata: x\n\n")).toEqual([ev("x")])
  })

  it("an event split character by character across feeds, for each line ending", () => {
    for (const eol of ["\n", "\r\n", "\r"]) {
      const text = `: c${eol}event: e${eol}data: {"a":${eol}data: 1}${eol}${eol}data: [DONE]${eol}${eol}`
      expect(parse(...text.split(""))).toEqual([ev('{"a":\n1}', "e"), ev("[DONE]")])
    }
  })

  it("end() flushes an unterminated event, and only once", () => {
    const parser = makeParser()
    expect(parser.feed("data: a\ndata: b")).toEqual([])
    expect(parser.end()).toEqual([ev("a\nb")])
    expect(parser.end()).toEqual([])
  })

  it("fed in any pieces, gives what the event-stream rules give for the whole text", () => {
    /** The rules read plainly: the whole text split into lines, each line's field and value, events at blank lines. */
    const reference = (text: string): Array<SseEvent> => {
      const out: Array<SseEvent> = []
      let data: string | undefined
      let event: string | undefined
      let id: string | undefined
      const lines = text.split(/\r\n|\r|\n/)
      for (const line of lines) {
        if (line === "") {
          if (data !== undefined) out.push({ event, data, id })
          data = event = id = undefined
          continue
        }
        if (line.startsWith(":")) continue
        const colon = line.indexOf(":")
        const field = colon === -1 ? line : line.slice(0, colon)
        const raw = colon === -1 ? "" : line.slice(colon + 1)
        const value = raw.startsWith(" ") ? raw.slice(1) : raw
        if (field === "data") data = data === undefined ? value : `${data}\n${value}`
        else if (field === "event") event = value
        else if (field === "id" && !value.includes("\0")) id = value
      }
      if (data !== undefined) out.push({ event, data, id })
      return out
    }
    const value = FastCheck.stringOf(FastCheck.constantFrom("a", " ", ":", "d", "{", "é", "\0"), { maxLength: 6 })
    const line = FastCheck.oneof(
      FastCheck.tuple(
        FastCheck.constantFrom("data", "data:", "data: ", "event:", "id:", ":", "dat", "da", "x:", ""),
        value
      ).map(([field, v]) => `${field}${v}`),
      FastCheck.constant("")
    )
    const text = FastCheck.array(FastCheck.tuple(line, FastCheck.constantFrom("\n", "\r\n", "\r")), {
      maxLength: 12
    }).map((lines) => lines.map(([l, end]) => `${l}${end}`).join(""))
    FastCheck.assert(
      FastCheck.property(text, FastCheck.array(FastCheck.nat(), { maxLength: 5 }), (whole, cuts) => {
        const at = [...new Set(cuts.map((c) => c % (whole.length + 1)))].sort((a, b) => a - b)
        const pieces = [0, ...at].map((from, i) => whole.slice(from, [...at, whole.length][i]))
        expect(parse(...pieces)).toEqual(reference(whole))
      }),
      { numRuns: 500 }
    )
  })

  it.effect("events(): a text stream to events, the unterminated last one included", () =>
    Effect.gen(function* () {
      const out = yield* Stream.runCollect(events(Stream.make("data: a\r", "\n\r\nda", "ta: b")))
      expect(Chunk.toReadonlyArray(out)).toEqual([ev("a"), ev("b")])
    })
  )
})

const chunk = (content: string, finish: string | null = null): ChatCompletionChunk => ({
  id: "chatcmpl-1",
  object: "chat.completion.chunk",
  created: 1,
  model: "base",
  choices: [{ index: 0, delta: { content }, finish_reason: finish }]
})
const data = (json: unknown, eol = "\n") => `data: ${JSON.stringify(json)}${eol}${eol}`
const done = "data: [DONE]\n\n"
const request: ChatCompletionRequest = { model: "base", messages: [{ role: "user", content: "hi" }] }
const contents = (chunks: Chunk.Chunk<ChatCompletionChunk>) =>
  Chunk.toReadonlyArray(chunks).map((c) => c.choices[0]?.delta.content)

/** A short pause in real time, while the test clock stands still. */
const tick = TestServices.provideLive(Effect.sleep("2 millis"))

/** Poll (in real time) until `condition` holds. */
const until = (condition: () => boolean | Effect.Effect<boolean>, what: string) =>
  Effect.gen(function* () {
    for (let i = 0; i < 1000; i++) {
      const holds = condition()
      if (typeof holds === "boolean" ? holds : yield* holds) return
      yield* tick
    }
    return yield* Effect.dieMessage(`timed out waiting for ${what}`)
  })

/** Whether a retry waits on the test clock (a wait of at most `max` ms; an attempt's time-out is 10 min). */
const retryWaiting = (max: number) =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    return Chunk.some(yield* TestClock.sleeps(), (wake) => wake > now && wake <= now + max)
  })

/** Run a stream that must fail: the elements before the failure, and the `ApiError`. */
const collectUntilFailure = <A>(stream: Stream.Stream<A, ApiError>) =>
  Effect.gen(function* () {
    const seen: Array<A> = []
    const exit = yield* Effect.exit(Stream.runForEach(stream, (a) => Effect.sync(() => seen.push(a))))
    if (Exit.isSuccess(exit)) return yield* Effect.dieMessage(`expected a failure after ${seen.length} elements`)
    const error = Cause.failureOption(exit.cause)
    if (Option.isNone(error)) return yield* Effect.dieMessage(Cause.pretty(exit.cause))
    return { seen, error: error.value }
  })

const clients = [
  ["TrainingClient", (url: string) => training(url)],
  ["InferenceClient", (url: string) => inference(url)]
] as const

for (const [name, makeClient] of clients) {
  describe(`${name}.streamChatCompletion against a real server`, () => {
    it.scoped("decodes the chunks in order and sends stream: true", () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        const client = yield* makeClient(server.url)
        server.route("POST", "/v1/chat/completions", () => ({
          chunks: [
            data({ ...chunk(""), choices: [{ index: 0, delta: { role: "assistant", content: "" } }] }),
            data(chunk("Hel")),
            data(chunk("lo")),
            data({ ...chunk("", "stop"), usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } }),
            done
          ]
        }))
        const out = yield* Stream.runCollect(client.streamChatCompletion(request))
        expect(contents(out)).toEqual(["", "Hel", "lo", ""])
        const last = Chunk.unsafeLast(out)
        expect(last.choices[0]?.finish_reason).toBe("stop")
        expect(last.usage?.total_tokens).toBe(3)
        expect(Chunk.unsafeHead(out).choices[0]?.delta.role).toBe("assistant")
        const [received] = server.received
        expect(received?.json).toEqual({ ...request, stream: true })
        expect(received?.headers["content-type"]).toBe("application/json")
      })
    )

    it.scoped("asks for an event stream: Accept: text/event-stream", () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        const client = yield* makeClient(server.url)
        server.route("POST", "/v1/chat/completions", () => ({ chunks: [data(chunk("a")), done] }))
        yield* Stream.runDrain(client.streamChatCompletion(request))
        expect(server.received[0]?.headers.accept).toBe("text/event-stream")
      })
    )

    it.scoped("CRLF framing, comment lines and multi-line data", () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        const client = yield* makeClient(server.url)
        // One JSON text over two data lines, cut between two members (the joining LF is whitespace there).
        const json = JSON.stringify(chunk("b"))
        const cut = json.indexOf(',"object"') + 1
        const [head, tail] = [json.slice(0, cut), json.slice(cut)]
        server.route("POST", "/v1/chat/completions", () => ({
          chunks: [": ping\r\n\r\n", data(chunk("a"), "\r\n"), `: ping\ndata: ${head}\ndata: ${tail}\n\n`, done]
        }))
        const out = yield* Stream.runCollect(client.streamChatCompletion(request))
        expect(contents(out)).toEqual(["a", "b"])
      })
    )

    it.scoped("an event split across network writes, mid-JSON and between CR and LF", () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        const client = yield* makeClient(server.url)
        const first = data(chunk("split"), "\r\n")
        const second = data(chunk("crlf"), "\r\n")
        server.route("POST", "/v1/chat/completions", () => ({
          chunks: [first.slice(0, 30), first.slice(30), second.slice(0, -1), second.slice(-1), done],
          delayMs: 10
        }))
        const out = yield* Stream.runCollect(client.streamChatCompletion(request))
        expect(contents(out)).toEqual(["split", "crlf"])
      })
    )

    it.scopedLive("ends at data: [DONE] while the server holds the connection open, and lets it go", () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        const client = yield* makeClient(server.url)
        server.route("POST", "/v1/chat/completions", () => ({
          chunks: [data(chunk("a")), done, data(chunk("after done"))],
          hold: true
        }))
        const out = yield* Stream.runCollect(client.streamChatCompletion(request)).pipe(
          Effect.timeoutFail({ duration: "3 seconds", onTimeout: () => new Error("the stream did not end at [DONE]") })
        )
        expect(contents(out)).toEqual(["a"])
        yield* until(() => server.aborted() === 1, "the held connection to be closed")
      })
    )

    it.scoped("a mid-stream error event fails the stream with its message, after the chunks before it", () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        const client = yield* makeClient(server.url)
        server.route("POST", "/v1/chat/completions", () => ({
          headers: { "x-request-id": "req-stream" },
          chunks: [data(chunk("a")), data({ error: { message: "boom", type: "InternalServerError", code: 500 } }), done]
        }))
        const { seen, error } = yield* collectUntilFailure(client.streamChatCompletion(request))
        expect(seen.map((c) => c.choices[0]?.delta.content)).toEqual(["a"])
        expect(error).toMatchObject({
          _tag: "ApiError",
          reason: "ServerError",
          method: "POST",
          path: "/v1/chat/completions",
          status: 200,
          description: "boom",
          errorType: "InternalServerError",
          code: 500,
          requestId: "req-stream",
          retryable: false
        })
        expect(error.message).toContain("boom")
        expect(server.count("POST", "/v1/chat/completions")).toBe(1)
      })
    )

    it.scoped("a chunk that does not match its schema fails the stream with Decode and an excerpt", () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        const client = yield* makeClient(server.url)
        const bad = { id: "chatcmpl-1", object: "chat.completion.chunk", created: "yesterday", choices: [] }
        server.route("POST", "/v1/chat/completions", () => ({ chunks: [data(chunk("a")), data(bad), done] }))
        const { seen, error } = yield* collectUntilFailure(client.streamChatCompletion(request))
        expect(seen).toHaveLength(1)
        expect(error).toMatchObject({ reason: "Decode", status: 200, excerpt: JSON.stringify(bad), retryable: false })
        expect(error.description).toContain("created")
      })
    )

    it.scoped("an event that is not JSON fails the stream with Decode", () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        const client = yield* makeClient(server.url)
        server.route("POST", "/v1/chat/completions", () => ({ chunks: ["data: {not json\n\n", done] }))
        const { error } = yield* collectUntilFailure(client.streamChatCompletion(request))
        expect(error).toMatchObject({ reason: "Decode", excerpt: "{not json" })
      })
    )

    it.scoped("a JSON answer instead of an event stream is Decode, not an empty stream", () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        const client = yield* makeClient(server.url)
        const { seen, error } = yield* collectUntilFailure(client.streamChatCompletion(request))
        expect(seen).toEqual([])
        expect(error.reason).toBe("Decode")
        expect(error.description).toContain("text/event-stream")
      })
    )

    it.scoped("a 400 before the stream begins is an ApiError, not retried", () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        const client = yield* makeClient(server.url)
        server.route("POST", "/v1/chat/completions", () => ({
          status: 400,
          json: { error: { message: "maximum context length is 8", type: "BadRequestError", code: 400 } }
        }))
        const { error } = yield* collectUntilFailure(client.streamChatCompletion(request))
        expect(error).toMatchObject({ reason: "BadRequest", status: 400, description: "maximum context length is 8" })
        expect(server.count("POST", "/v1/chat/completions")).toBe(1)
      })
    )

    it.scoped("a 500 before the stream begins is retried, then the stream is read", () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        const client = yield* makeClient(server.url)
        server.route("POST", "/v1/chat/completions", (_, attempt) =>
          attempt === 0 ? { status: 500, json: { detail: "warming up" } } : { chunks: [data(chunk("a")), done] }
        )
        const fiber = yield* Effect.fork(Stream.runCollect(client.streamChatCompletion(request)))
        // Wait for the retry to wait on the clock (the first backoff is at most 0.5 s), then move past it.
        yield* until(() => server.count("POST", "/v1/chat/completions") === 1, "the first request")
        yield* until(() => retryWaiting(500), "the retry to wait on the clock")
        expect(server.count("POST", "/v1/chat/completions")).toBe(1)
        yield* TestClock.adjust("500 millis")
        const out = yield* Fiber.join(fiber)
        expect(contents(out)).toEqual(["a"])
        expect(server.count("POST", "/v1/chat/completions")).toBe(2)
      })
    )

    it.scoped("a request that breaks its schema fails with InvalidRequest and is not sent", () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        const client = yield* makeClient(server.url)
        const { error } = yield* collectUntilFailure(
          client.streamChatCompletion({ ...request, stream_options: { include_usage: true }, prompt_logprobs: 1 })
        )
        expect(error.reason).toBe("InvalidRequest")
        expect(error.detail?.map((d) => d.loc)).toEqual([["body", "prompt_logprobs"]])
        expect(server.received).toEqual([])
      })
    )

    it.scoped("taking one element aborts the HTTP request the server holds open", () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        const client = yield* makeClient(server.url)
        server.route("POST", "/v1/chat/completions", () => ({ chunks: [data(chunk("a"))], hold: true }))
        const out = yield* Stream.runCollect(client.streamChatCompletion(request).pipe(Stream.take(1)))
        expect(contents(out)).toEqual(["a"])
        yield* until(() => server.aborted() === 1, "the connection to be closed")
      })
    )

    it.scoped("interrupting the fiber reading the stream aborts the HTTP request", () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        const client = yield* makeClient(server.url)
        server.route("POST", "/v1/chat/completions", () => ({ chunks: [data(chunk("a"))], hold: true }))
        const first = yield* Deferred.make<ChatCompletionChunk>()
        const fiber = yield* Effect.fork(
          Stream.runForEach(client.streamChatCompletion(request), (c) => Deferred.succeed(first, c))
        )
        expect((yield* Deferred.await(first)).choices[0]?.delta.content).toBe("a")
        expect(server.aborted()).toBe(0)
        yield* Fiber.interrupt(fiber)
        yield* until(() => server.aborted() === 1, "the connection to be closed")
      })
    )
  })
}
