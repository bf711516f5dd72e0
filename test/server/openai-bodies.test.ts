/**
 * The OpenAI-compatible routes' body bound on the embedded backend: a chat completion or Responses request over
 * `MAX_OPENAI_BODY` (4 MiB) is a 413 in the OpenAI shape, declared or streamed without a length, under a server
 * whose `maxBodySize` for the rest is larger; a training route still takes a body past it; the server answers
 * as before after it. A body sent without a length is admitted as one with a length is (its depth checked too).
 */
import { describe, expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { TOO_DEEP } from "../../src/api/internal/jsonDepth.js"
import { MAX_OPENAI_BODY } from "../../src/local/server/internal/admit.js"
import { auth, backendWith, call, send } from "./support.js"

const MESSAGE = `Request body exceeds the limit of ${MAX_OPENAI_BODY} bytes`

/** A JSON body of about `bytes` bytes with the text in `field`. */
const chatOf = (bytes: number) =>
  JSON.stringify({ model: "effect-rl/tiny", messages: [{ role: "user", content: "x".repeat(bytes) }], max_tokens: 1 })
const responseOf = (bytes: number) =>
  JSON.stringify({ model: "effect-rl/tiny", input: "x".repeat(bytes), max_output_tokens: 1 })

/** A body sent without a length, in chunks of 1 MiB. */
const streamed = (text: string) => {
  const bytes = new TextEncoder().encode(text)
  return new ReadableStream<Uint8Array>({
    start(controller) {
      for (let at = 0; at < bytes.length; at += 1024 * 1024) controller.enqueue(bytes.subarray(at, at + 1024 * 1024))
      controller.close()
    }
  })
}

describe("the OpenAI routes' body bound", () => {
  layer(backendWith({ maxBodySize: 64 * 1024 * 1024 }), { excludeTestServices: true })((it) => {
    it.effect(
      "over 4 MiB: a 413 on chat completions and responses, declared or streamed; a training body past it is read",
      () =>
        Effect.gen(function* () {
          const over = MAX_OPENAI_BODY + 1024
          for (const [path, body] of [
            ["/v1/chat/completions", chatOf(over)],
            ["/v1/responses", responseOf(over)],
            ["/v1/chat/completions", chatOf(40 * 1024 * 1024)]
          ] as const) {
            for (const how of ["declared", "streamed"] as const) {
              const reply = yield* call(path, {
                method: "POST",
                headers: { ...auth, "content-type": "application/json" },
                body: how === "declared" ? body : streamed(body),
                ...(how === "streamed" ? { duplex: "half" } : {})
              } as RequestInit)
              expect({ path, how, status: reply.status }).toEqual({ path, how, status: 413 })
              expect(reply.json).toMatchObject({ error: { message: MESSAGE, type: "RequestEntityTooLargeError" } })
            }
          }
          // Under the bound: not refused for its size (the model's context refuses it, by its tokens).
          const under = yield* send("POST", "/v1/chat/completions", chatOf(MAX_OPENAI_BODY - 1024))
          expect(under.status).toBe(400)
          expect(under.text).toContain("maximum context length")
          // A training route takes bodies past the OpenAI bound: refused for what they hold, not their size.
          const log = yield* send("POST", "/v1/log", {
            entity: "e",
            project: "p",
            note: "x".repeat(MAX_OPENAI_BODY + 1024)
          })
          expect(log.status).not.toBe(413)
          // A body without a length is admitted as any other: one nested too deep is the depth check's 400.
          const deep = yield* call("/v1/chat/completions", {
            method: "POST",
            headers: { ...auth, "content-type": "application/json" },
            body: streamed(`{"model":"effect-rl/tiny","messages":${"[".repeat(3_000)}${"]".repeat(3_000)}}`),
            duplex: "half"
          } as RequestInit)
          expect(deep.status).toBe(400)
          expect(deep.text).toContain(TOO_DEEP)
          const ok = yield* send("POST", "/v1/chat/completions", {
            model: "effect-rl/tiny",
            messages: [{ role: "user", content: "hi" }],
            max_tokens: 1
          })
          expect(ok.status).toBe(200)
        })
    )

    it.effect("a body without a length is refused once past 4 MiB, not read on toward the server's limit", () =>
      Effect.gen(function* () {
        // 5 MiB, then nothing, never ending: a server reading on (to its 64 MiB) would never answer.
        const chunk = new Uint8Array(1024 * 1024).fill(0x78)
        let sent = 0
        const endless = new ReadableStream<Uint8Array>({
          pull: (controller) => {
            if (sent++ < 5) controller.enqueue(chunk)
            else return new Promise<void>(() => undefined)
          }
        })
        const reply = yield* call("/v1/responses", {
          method: "POST",
          headers: { ...auth, "content-type": "application/json" },
          body: endless,
          duplex: "half",
          signal: AbortSignal.timeout(10_000)
        } as RequestInit)
        expect(reply.status).toBe(413)
        expect(reply.json).toMatchObject({ error: { message: MESSAGE } })
      })
    )
  })
})
