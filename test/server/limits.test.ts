/**
 * Bounds on the work one request may ask for (issue 18, first part): `n` at most 128 and `n` times the token
 * limit at most 16,384 tokens, refused up front with the 400 a client of the convention expects, naming the
 * field; the server keeps answering. Before, `n: 1000000000` grew the process by a gigabyte every few seconds
 * and it never answered again, and `n: 100` with 490 tokens held `/v1/health` for 8.7 s.
 *
 * And the bound on the work queued: completions admitted reserve `n` x their token limit until their response
 * is written; over the server's bound, a 429 with `retry-after`. A large completion decodes while other
 * requests (`/v1/health`) are answered.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as LocalBackend from "../../src/LocalBackend.js"
import { MAX_N, MAX_REQUEST_TOKENS } from "../../src/local/engine/Sampler.js"
import { API_KEY } from "../support/clients.js"
import { auth, Backend, call, send } from "./support.js"

const hi = [{ role: "user", content: "hi" }]
const badRequest = (param: string, message: string) => ({
  status: 400,
  json: { error: { message, type: "BadRequestError", param, code: 400 } }
})

describe("bounds on a request's work", () => {
  it.layer(Backend)("on the real server", (it) => {
    it.effect("n beyond 128 is a 400 naming n, at once, streamed or not; the server stays healthy", () =>
      Effect.gen(function* () {
        const started = Date.now()
        for (const stream of [false, true]) {
          const reply = yield* send("POST", "/v1/chat/completions", { messages: hi, n: 1_000_000_000, stream })
          expect({ status: reply.status, json: reply.json }).toEqual(
            badRequest("n", `n must be at most ${MAX_N}, got 1000000000`)
          )
        }
        expect(Date.now() - started).toBeLessThan(5_000)
        const health = yield* call("/v1/health", { headers: auth })
        expect(health.status).toBe(200)
      })
    )

    it.effect("n times the token limit beyond the request budget is a 400 naming both", () =>
      Effect.gen(function* () {
        const reply = yield* send("POST", "/v1/chat/completions", { messages: hi, n: 100, max_tokens: 490 })
        expect({ status: reply.status, json: reply.json }).toEqual(
          badRequest(
            "n",
            `n x max_tokens may be at most ${MAX_REQUEST_TOKENS} tokens per request, got 100 x 490 = 49000: lower n or max_tokens`
          )
        )
        // Without a token limit the rest of the context counts: 128 x (512 - prompt) is over the budget too.
        const unbounded = yield* send("POST", "/v1/chat/completions", { messages: hi, n: 128 })
        expect(unbounded.status).toBe(400)
        expect((unbounded.json as { error: { param: string } }).error.param).toBe("n")
      })
    )

    it.effect("within the bounds, n = 128 is answered with 128 choices", () =>
      Effect.gen(function* () {
        const reply = yield* send("POST", "/v1/chat/completions", { messages: hi, n: MAX_N, max_tokens: 4 })
        expect(reply.status).toBe(200)
        expect((reply.json as { choices: ReadonlyArray<unknown> }).choices).toHaveLength(MAX_N)
      })
    )

    it.effect("the trace surface's completions take the same bounds (a 400 with the reason)", () =>
      Effect.gen(function* () {
        const reply = yield* send("POST", "/completions/create", {
          project_id: "me/limits",
          inputs: { model: "effect-rl/tiny", messages: hi, n: 1_000_000_000 }
        })
        expect(reply.status).toBe(400)
        expect(JSON.stringify(reply.json)).toContain(`n must be at most ${MAX_N}`)
      })
    )
  })
})

/** A completion that fills the whole queue of the backend below: 40 x 200 tokens. */
const large = { messages: hi, n: 40, max_tokens: 200, ignore_eos: true }
const probe = { messages: hi, max_tokens: 1 }

/**
 * Sends the large completion, again while it is refused with a 429 (as the clients do): a probe of the test
 * may hold a reservation when it arrives.
 */
const sendLarge = (path: string) =>
  Effect.gen(function* () {
    for (;;) {
      const reply = yield* send("POST", path, large)
      if (reply.status !== 429) return reply
    }
  })

/** Sends the probe until it is refused with a 429 (the large completion admitted), answering that reply. */
const untilBusy = (path: string, body: unknown) =>
  Effect.gen(function* () {
    for (let attempt = 0; attempt < 200; attempt++) {
      const reply = yield* send("POST", path, body)
      if (reply.status === 429) return reply
    }
    return yield* Effect.dieMessage("the large completion was never admitted")
  })

describe("bounds on the work queued", () => {
  it.layer(LocalBackend.layer({ apiKey: Redacted.make(API_KEY), maxQueuedTokens: 8_000, maxN: 40 }))(
    "on a server that queues at most 8,000 tokens",
    (it) => {
      it.effect("while a large completion decodes, /v1/health answers and a completion over the bound is a 429", () =>
        Effect.gen(function* () {
          const running = yield* Effect.fork(sendLarge("/v1/chat/completions"))
          const busy = yield* untilBusy("/v1/chat/completions", probe)
          expect(busy.json).toEqual({
            error: {
              message:
                "The server is busy: 8000 tokens of sampling are queued and this request may sample 1 more, over the bound of 8000; retry later",
              type: "RateLimitError",
              param: null,
              code: 429
            }
          })
          const health = yield* call("/v1/health", { headers: auth })
          expect(health.status).toBe(200)
          // Answered while the large completion is still decoding: the event loop was not held.
          expect(Option.isNone(yield* Fiber.poll(running))).toBe(true)
          const done = yield* Fiber.join(running)
          expect(done.status).toBe(200)
          expect((done.json as { choices: ReadonlyArray<unknown> }).choices).toHaveLength(40)
          // Its reservation is given back: the probe is admitted now.
          expect((yield* send("POST", "/v1/chat/completions", probe)).status).toBe(200)
        })
      )

      it.effect("the 429 carries retry-after; the trace surface's completions share the bound", () =>
        Effect.gen(function* () {
          const running = yield* Effect.fork(sendLarge("/v1/chat/completions"))
          const busy = yield* untilBusy("/completions/create", {
            project_id: "me/limits",
            inputs: { ...probe, model: "effect-rl/tiny" }
          })
          expect(busy.json).toEqual({ reason: expect.stringContaining("The server is busy") })
          const { url } = yield* LocalBackend.LocalBackend
          const headers = yield* Effect.promise(() =>
            fetch(`${url}/v1/chat/completions`, {
              method: "POST",
              headers: { ...auth, "content-type": "application/json" },
              body: JSON.stringify(probe)
            }).then((response) => ({ status: response.status, retryAfter: response.headers.get("retry-after") }))
          )
          expect(headers).toEqual({ status: 429, retryAfter: "1" })
          expect((yield* Fiber.join(running)).status).toBe(200)
        })
      )

      it.effect("a stream's reservation is held until it ends; a client that leaves gives it back", () =>
        Effect.gen(function* () {
          const { url } = yield* LocalBackend.LocalBackend
          const abort = new AbortController()
          // Read the first chunk of a large stream, then leave.
          yield* Effect.promise(async () => {
            const response = await fetch(`${url}/v1/chat/completions`, {
              method: "POST",
              headers: { ...auth, "content-type": "application/json" },
              body: JSON.stringify({ ...large, stream: true }),
              signal: abort.signal
            })
            const reader = response.body?.getReader()
            await reader?.read()
          })
          expect((yield* send("POST", "/v1/chat/completions", probe)).status).toBe(429)
          abort.abort()
          let status = 429
          for (let attempt = 0; attempt < 200 && status === 429; attempt++) {
            status = (yield* send("POST", "/v1/chat/completions", probe)).status
          }
          expect(status).toBe(200)
        })
      )

      it.effect("the per-request bounds are the server's settings: n beyond 40 is a 400 naming 40", () =>
        Effect.gen(function* () {
          const reply = yield* send("POST", "/v1/chat/completions", { messages: hi, n: 41, max_tokens: 1 })
          expect({ status: reply.status, json: reply.json }).toEqual(badRequest("n", "n must be at most 40, got 41"))
        })
      )
    }
  )
})
