/**
 * A seeded property test of constrained decoding against the real server (issue 18, part 3): over random
 * schemas of the supported subset, seeds, token limits (below, at and above the shortest valid output) and
 * sampling options (temperature, `n`, `ignore_eos`, `allowed_token_ids`, streaming), every request is either
 * refused up front with a 400 naming `max_tokens` and the minimum, or served with status 200 and no error
 * event, where every `stop` output parses as JSON and validates against its schema, and every `length`
 * output is a prefix the automaton accepted (and, without `allowed_token_ids` or `ignore_eos`, there is no
 * `length` output at all). One generator seeds everything, so a failure names the case that reproduces it.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { ChatCompletionChunk } from "../../src/api/ChatCompletion.js"
import type { JsonValue } from "../../src/api/Json.js"
import { ByteAutomaton } from "../../src/local/engine/constraint/Automaton.js"
import { compileJsonSchema } from "../../src/local/engine/constraint/JsonSchema.js"
import { Rng } from "../../src/local/engine/Random.js"
import { IM_END, isSpecial } from "../../src/local/engine/Tokenizer.js"
import { acceptedPrefix, accepts, randomSchema, validates } from "../support/schemas.js"
import { auth, Backend, call, send } from "./support.js"

/** How many random requests to send (about 2 s in all). */
const CASES = 120

interface Outcome {
  readonly content: string
  readonly finishReason: string | null
  readonly tokenIds: ReadonlyArray<number>
}

/** The choices of a whole response. */
const wholeOutcomes = (json: unknown): Array<Outcome> =>
  (
    json as {
      choices: ReadonlyArray<{ message: { content: string }; finish_reason: string; token_ids: Array<number> }>
    }
  ).choices.map((c) => ({ content: c.message.content, finishReason: c.finish_reason, tokenIds: c.token_ids }))

/** The choices of a stream, from its events; fails the test on an error event. */
const streamedOutcomes = (text: string, n: number, label: string): Array<Outcome> => {
  const events = text
    .split("\n\n")
    .filter((e) => e !== "")
    .map((e) => e.replace(/^data: /, ""))
  expect(events.at(-1), label).toBe("[DONE]")
  const outcomes = Array.from({ length: n }, () => ({
    content: "",
    finishReason: null as string | null,
    tokenIds: [] as Array<number>
  }))
  for (const event of events.slice(0, -1)) {
    const chunk = JSON.parse(event) as ChatCompletionChunk & { error?: unknown }
    expect(chunk.error, `${label}: ${event}`).toBeUndefined()
    for (const choice of chunk.choices) {
      const outcome = outcomes[choice.index]!
      outcome.content += choice.delta.content ?? ""
      outcome.tokenIds.push(...(choice.token_ids ?? []))
      if (choice.finish_reason != null) outcome.finishReason = choice.finish_reason
    }
  }
  return outcomes
}

describe("constrained decoding: a seeded property over schemas, seeds and limits", () => {
  it.layer(Backend)("on the real server", (it) => {
    it.effect("every request is a 400 naming the limit, or 200 with valid stop outputs and prefix length outputs", () =>
      Effect.gen(function* () {
        const rng = new Rng(20_240_518)
        const seen = { refused: 0, stop: 0, length: 0, streamed: 0 }
        for (let k = 0; k < CASES; k++) {
          const schema: JsonValue = randomSchema(rng)
          const automaton = new ByteAutomaton(compileJsonSchema(schema))
          const min = automaton.minLength
          const limits = [1 + rng.int(Math.max(1, min - 1)), min, min + rng.int(40)]
          const maxTokens = limits[rng.int(3)]!
          const n = 1 + rng.int(3)
          const ignoreEos = rng.int(5) === 0
          // A random half of the printable bytes (and sometimes the end of turn): a way may not exist.
          const restricted = rng.int(5) === 0
          const allowed = restricted
            ? [...Array.from({ length: 95 }, (_, i) => 32 + i).filter(() => rng.int(2) === 0), IM_END]
            : undefined
          const stream = rng.int(4) === 0
          const body = {
            messages: [{ role: "user", content: `case ${k}` }],
            seed: rng.int(1_000_000),
            temperature: rng.float() * 2.5,
            n,
            max_tokens: maxTokens,
            return_token_ids: true,
            response_format: { type: "json_schema", json_schema: { name: "case", schema } },
            ...(ignoreEos ? { ignore_eos: true } : {}),
            ...(allowed === undefined ? {} : { allowed_token_ids: allowed })
          }
          const label = `case ${k}: ${JSON.stringify({ ...body, allowed_token_ids: allowed?.length, stream })}`
          const reply = stream
            ? yield* call("/v1/chat/completions", {
                method: "POST",
                headers: { ...auth, "content-type": "application/json" },
                body: JSON.stringify({ ...body, stream: true })
              })
            : yield* send("POST", "/v1/chat/completions", body)
          if (maxTokens < min) {
            expect(reply.status, label).toBe(400)
            expect(reply.json, label).toMatchObject({
              error: { param: "max_tokens", message: expect.stringContaining(`max_tokens must be at least ${min}`) }
            })
            seen.refused++
            continue
          }
          expect(reply.status, `${label}: ${reply.text}`).toBe(200)
          const outcomes = stream ? streamedOutcomes(reply.text, n, label) : wholeOutcomes(reply.json)
          if (stream) seen.streamed++
          for (const outcome of outcomes) {
            const bytes = outcome.tokenIds.filter((id) => !isSpecial(id))
            const where = `${label} -> ${JSON.stringify(outcome)}`
            expect(bytes.length, where).toBeLessThanOrEqual(maxTokens)
            if (outcome.finishReason === "stop") {
              expect(accepts(automaton, bytes), where).toBe(true)
              expect(validates(schema, JSON.parse(outcome.content)), where).toBe(true)
              seen.stop++
            } else {
              expect(outcome.finishReason, where).toBe("length")
              expect(restricted || ignoreEos, where).toBe(true)
              expect(acceptedPrefix(automaton, bytes), where).toBe(true)
              seen.length++
            }
          }
        }
        // The generator reaches every kind of outcome.
        expect(seen.refused).toBeGreaterThan(10)
        expect(seen.stop).toBeGreaterThan(50)
        expect(seen.length).toBeGreaterThan(0)
        expect(seen.streamed).toBeGreaterThan(10)
        const health = yield* call("/v1/health", { headers: auth })
        expect(health.status).toBe(200)
      })
    )
  })
})
