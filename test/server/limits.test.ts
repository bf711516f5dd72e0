/**
 * Bounds on the work one request may ask for (issue 18, first part): `n` at most 128 and `n` times the token
 * limit at most 16,384 tokens, refused up front with the 400 a client of the convention expects, naming the
 * field; the server keeps answering. Before, `n: 1000000000` grew the process by a gigabyte every few seconds
 * and it never answered again.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { MAX_N, MAX_REQUEST_TOKENS } from "../../src/local/engine/Sampler.js"
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
