/**
 * Well-formed UTF-8 through the real server (issue 12): over seeds, temperatures (up to 2), `n` and token
 * limits, the raw bytes of every chat-completions body (whole and streamed) decode with a fatal decoder, no
 * content or delta carries U+FFFD, the logprob tokens spell the content, and the deltas make the whole
 * response's content for the same seed.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { ChatCompletion, ChatCompletionChunk } from "../../src/api/ChatCompletion.js"
import * as LocalBackend from "../../src/LocalBackend.js"
import { SPECIAL_TOKENS } from "../../src/local/engine/Tokenizer.js"
import { BASE_MODEL } from "../../src/local/server/internal/inference.js"
import { auth, Backend } from "./support.js"

const fatal = new TextDecoder("utf-8", { fatal: true })

/** POST a chat completion and decode the raw body fatally (a throw fails the test). */
const post = (body: unknown) =>
  Effect.gen(function* () {
    const { url } = yield* LocalBackend.LocalBackend
    return yield* Effect.promise(async () => {
      const response = await fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify(body)
      })
      return { status: response.status, text: fatal.decode(await response.arrayBuffer()) }
    })
  })

/** The JSON events of an SSE body, without `[DONE]`. */
const events = (text: string): Array<ChatCompletionChunk> =>
  text
    .split("\n\n")
    .map((e) => e.replace(/^data: /, "").trim())
    .filter((e) => e !== "" && e !== "[DONE]")
    .map((e) => JSON.parse(e) as ChatCompletionChunk)

describe("well-formed UTF-8 from the server (issue 12)", () => {
  it.layer(Backend)("on the real server", (it) => {
    it.effect("whole and streamed completions are well-formed UTF-8 over seeds, temperatures, n and limits", () =>
      Effect.gen(function* () {
        for (let seed = 0; seed < 12; seed++) {
          const ask = {
            model: BASE_MODEL,
            messages: [{ role: "user", content: "Écris quelque chose: é, €, 😀" }],
            seed,
            temperature: [0.7, 1, 1.5, 2][seed % 4],
            n: 1 + (seed % 3),
            max_tokens: 3 + ((seed * 7) % 30),
            ignore_eos: seed % 2 === 0,
            logprobs: true
          }
          const whole = yield* post(ask)
          expect(whole.status).toBe(200)
          const completion = JSON.parse(whole.text) as ChatCompletion
          const streamed = yield* post({ ...ask, stream: true })
          expect(streamed.status).toBe(200)
          const chunks = events(streamed.text)
          for (const choice of completion.choices) {
            const content = choice.message.content ?? ""
            expect(content).not.toContain("\uFFFD")
            // The logprob tokens but the special ones (skipped in the text) spell the content, whole characters.
            const special: ReadonlyArray<string> = SPECIAL_TOKENS
            const entries = (choice.logprobs?.content ?? []).filter((e) => !special.includes(e.token))
            const bytes = Uint8Array.from(entries.flatMap((e) => e.bytes ?? []))
            expect(fatal.decode(bytes)).toBe(content)
            const deltas = chunks.flatMap((c) => c.choices.filter((ch) => ch.index === choice.index))
            for (const d of deltas) expect(d.delta.content ?? "").not.toContain("\uFFFD")
            expect(deltas.map((d) => d.delta.content ?? "").join("")).toBe(content)
          }
        }
      })
    )
  })
})
