/**
 * Constrained decoding that always ends well (issue 18, part 3), against the real server, one test per
 * finding of the hostile-client test, with the request that did it and what it must get now:
 * - a token limit below the shortest output the schema allows threw a `TypeError` in the automaton (a 500,
 *   or in a stream an error event after unconstrained text); now a 400 naming the limit and the minimum;
 * - `json_object` with `max_tokens: 1` returned `","` with status 200; now a 400, and the smallest limit
 *   that fits returns `{}`;
 * - valid JSON closing exactly at the limit came back with `finish_reason: "length"`, so the `openai` SDK's
 *   `.parse()` threw; now `stop`, and `.parse()` returns the value;
 * - `number` allowed any exponent (`7e5085` parsed to `Infinity`); now every number written is finite.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import OpenAI from "openai"
import { makeParseableResponseFormat } from "openai/lib/parser"
import type { ChatCompletionChunk } from "../../src/api/ChatCompletion.js"
import * as LocalBackend from "../../src/LocalBackend.js"
import { BASE_MODEL } from "../../src/local/server/internal/inference.js"
import { API_KEY } from "../support/clients.js"
import { finiteNumbers, validates } from "../support/schemas.js"
import { auth, Backend, call, clean, type Reply, send } from "./support.js"

const hi = [{ role: "user", content: "hi" }]

/** A schema like the one the AI SDK's structured output sent (its shortest output takes 43 tokens). */
const person = {
  type: "object",
  properties: {
    name: { type: "string" },
    age: { type: "integer" },
    email: { type: "string" },
    admin: { type: "boolean" }
  },
  required: ["name", "age", "email", "admin"],
  additionalProperties: false
}
/** `{"name":"","age":0,"email":"","admin":true}` */
const PERSON_MIN = 43
const personFormat = { type: "json_schema", json_schema: { name: "person", schema: person, strict: true } }

interface Completion {
  readonly choices: ReadonlyArray<{
    readonly message: { readonly content: string }
    readonly finish_reason: string
    readonly token_ids?: ReadonlyArray<number>
  }>
}
const completion = (reply: Reply) => reply.json as Completion

const refused = (reply: Reply, param: string, message: string) => {
  expect(reply.status).toBe(400)
  expect(reply.json).toEqual({ error: { message, type: "BadRequestError", param, code: 400 } })
  expect(clean(reply.text)).toBe(true)
}

/** A streamed request, read in full: its status and its events (the `[DONE]` marker last). */
const streamed = (body: unknown) =>
  Effect.map(
    call("/v1/chat/completions", {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ ...(body as object), stream: true })
    }),
    (reply) => ({
      reply,
      events: reply.text
        .split("\n\n")
        .filter((e) => e !== "")
        .map((e) => e.replace(/^data: /, ""))
    })
  )

describe("constrained decoding that always ends well", () => {
  it.layer(Backend)("on the real server", (it) => {
    it.effect("a json_schema with max_tokens 2 to 10 is a 400 naming max_tokens and the minimum, not a 500", () =>
      Effect.gen(function* () {
        for (let max = 2; max <= 10; max++) {
          const reply = yield* send("POST", "/v1/chat/completions", {
            messages: hi,
            seed: max,
            temperature: 1,
            max_tokens: max,
            response_format: personFormat
          })
          refused(
            reply,
            "max_tokens",
            `max_tokens is ${max}, but the shortest output response_format.json_schema.schema allows takes ${PERSON_MIN} tokens: max_tokens must be at least ${PERSON_MIN}`
          )
        }
        // The field the client used is the one named.
        const newer = yield* send("POST", "/v1/chat/completions", {
          messages: hi,
          max_completion_tokens: 5,
          response_format: personFormat
        })
        expect((newer.json as { error: { param: string } }).error.param).toBe("max_completion_tokens")
        const health = yield* call("/v1/health", { headers: auth })
        expect(health.status).toBe(200)
      })
    )

    it.effect("streamed, the same request is a 400 before any event (was an error event after free text)", () =>
      Effect.gen(function* () {
        const { reply } = yield* streamed({ messages: hi, seed: 1, max_tokens: 4, response_format: personFormat })
        refused(
          reply,
          "max_tokens",
          `max_tokens is 4, but the shortest output response_format.json_schema.schema allows takes ${PERSON_MIN} tokens: max_tokens must be at least ${PERSON_MIN}`
        )
      })
    )

    it.effect("the AI SDK's structured output with 16 tokens: a 400 for a schema too long, stop when it fits", () =>
      Effect.gen(function* () {
        // The AI SDK sends maxOutputTokens as max_tokens, with a strict json_schema response format.
        for (let seed = 0; seed < 5; seed++) {
          const reply = yield* send("POST", "/v1/chat/completions", {
            model: BASE_MODEL,
            messages: hi,
            seed,
            max_tokens: 16,
            response_format: personFormat
          })
          expect(reply.status).toBe(400)
          expect((reply.json as { error: { param: string } }).error.param).toBe("max_tokens")
        }
        const small = { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] }
        for (let seed = 0; seed < 5; seed++) {
          const reply = yield* send("POST", "/v1/chat/completions", {
            model: BASE_MODEL,
            messages: hi,
            seed,
            temperature: 1.5,
            max_tokens: 16,
            response_format: { type: "json_schema", json_schema: { name: "flag", schema: small, strict: true } }
          })
          expect(reply.status).toBe(200)
          const choice = completion(reply).choices[0]!
          expect(choice.finish_reason).toBe("stop")
          expect(validates(small, JSON.parse(choice.message.content))).toBe(true)
        }
      })
    )

    it.effect("a long prompt leaving too little of the context for the schema is a 400 naming messages", () =>
      Effect.gen(function* () {
        // The model's context is 512 tokens; this prompt leaves fewer than PERSON_MIN of them.
        const long = [{ role: "user", content: "x".repeat(480) }]
        const reply = yield* send("POST", "/v1/chat/completions", { messages: long, response_format: personFormat })
        expect(reply.status).toBe(400)
        const error = (reply.json as { error: { param: string; message: string } }).error
        expect(error.param).toBe("messages")
        expect(error.message).toMatch(
          /^This model's maximum context length is 512 tokens\. However, your request has \d+ input tokens, which leaves \d+ for the completion/
        )
        expect(error.message).toContain(`takes ${PERSON_MIN} tokens`)
        // With room for it, the same kind of request is served, and ends with a valid value.
        const room = [{ role: "user", content: "x".repeat(300) }]
        const served = yield* send("POST", "/v1/chat/completions", {
          messages: room,
          seed: 2,
          response_format: personFormat
        })
        expect(served.status).toBe(200)
        const choice = completion(served).choices[0]!
        expect(choice.finish_reason).toBe("stop")
        expect(validates(person, JSON.parse(choice.message.content))).toBe(true)
      })
    )

    it.effect('json_object with max_tokens 1 is a 400 (was "," with 200); with 2 it is {} and stop', () =>
      Effect.gen(function* () {
        const one = yield* send("POST", "/v1/chat/completions", {
          messages: hi,
          seed: 1,
          max_tokens: 1,
          response_format: { type: "json_object" }
        })
        refused(
          one,
          "max_tokens",
          "max_tokens is 1, but the shortest output response_format allows takes 2 tokens: max_tokens must be at least 2"
        )
        for (let seed = 0; seed < 5; seed++) {
          const two = yield* send("POST", "/v1/chat/completions", {
            messages: hi,
            seed,
            temperature: 2,
            max_tokens: 2,
            response_format: { type: "json_object" }
          })
          expect(two.status).toBe(200)
          expect(completion(two).choices[0]).toMatchObject({ message: { content: "{}" }, finish_reason: "stop" })
        }
      })
    )

    it.effect("JSON closing on the last token of the limit ends with stop, streamed or not", () =>
      Effect.gen(function* () {
        // At exactly the shortest limit the output takes every token: it closes on the last one.
        for (let seed = 0; seed < 6; seed++) {
          const body = {
            messages: hi,
            seed,
            temperature: 1.5,
            max_tokens: PERSON_MIN,
            response_format: personFormat,
            return_token_ids: true
          }
          const reply = yield* send("POST", "/v1/chat/completions", body)
          expect(reply.status).toBe(200)
          const choice = completion(reply).choices[0]!
          expect(choice.token_ids).toHaveLength(PERSON_MIN)
          expect(choice.finish_reason).toBe("stop")
          expect(validates(person, JSON.parse(choice.message.content))).toBe(true)
          const { reply: sse, events } = yield* streamed(body)
          expect(sse.status).toBe(200)
          expect(events.at(-1)).toBe("[DONE]")
          const chunks = events.slice(0, -1).map((e) => JSON.parse(e) as ChatCompletionChunk)
          expect(chunks.every((c) => !("error" in c))).toBe(true)
          expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe(choice.message.content)
          expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe("stop")
        }
      })
    )

    it.effect("numbers are finite and integers safe, in json_schema and json_object (7e5085 was Infinity)", () =>
      Effect.gen(function* () {
        const schema = {
          type: "object",
          properties: {
            x: { type: "number" },
            y: { type: "number" },
            n: { type: "integer" },
            list: { type: "array", items: { type: "number" }, minItems: 3, maxItems: 6 }
          },
          required: ["x", "y", "n", "list"]
        }
        const format = { type: "json_schema", json_schema: { name: "numbers", schema } }
        const reply = yield* send("POST", "/v1/chat/completions", {
          messages: hi,
          seed: 5,
          n: 24,
          temperature: 2,
          max_tokens: 200,
          response_format: format
        })
        expect(reply.status).toBe(200)
        for (const choice of completion(reply).choices) {
          expect(choice.finish_reason).toBe("stop")
          const value: unknown = JSON.parse(choice.message.content)
          expect(validates(schema, value), choice.message.content).toBe(true)
        }
        const objects = yield* send("POST", "/v1/chat/completions", {
          messages: hi,
          seed: 6,
          n: 24,
          temperature: 2,
          max_tokens: 200,
          response_format: { type: "json_object" }
        })
        expect(objects.status).toBe(200)
        for (const choice of completion(objects).choices) {
          expect(choice.finish_reason).toBe("stop")
          expect(finiteNumbers(JSON.parse(choice.message.content)), choice.message.content).toBe(true)
        }
      })
    )
  })
})

describe("the openai SDK's .parse() on constrained output", () => {
  layer(Backend, { excludeTestServices: true })((it) => {
    it.effect("returns the parsed value for JSON that closes at the limit (threw LengthFinishReasonError)", () =>
      Effect.gen(function* () {
        const { url } = yield* LocalBackend.LocalBackend
        const client = new OpenAI({ apiKey: API_KEY, baseURL: `${url}/v1`, maxRetries: 0 })
        // What zodResponseFormat builds, with a validator of our own in place of zod's.
        const format = makeParseableResponseFormat(
          { type: "json_schema", json_schema: { name: "person", schema: person, strict: true } },
          (content) => {
            const value: unknown = JSON.parse(content)
            if (!validates(person, value)) throw new Error(`not a person: ${content}`)
            return value as { name: string; age: number; email: string; admin: boolean }
          }
        )
        for (let seed = 0; seed < 4; seed++) {
          const parsed = yield* Effect.tryPromise({
            try: () =>
              client.chat.completions.parse({
                model: BASE_MODEL,
                messages: [{ role: "user", content: "hi" }],
                seed,
                temperature: 1.5,
                max_completion_tokens: PERSON_MIN + seed,
                response_format: format
              }),
            // The SDK's own error (LengthFinishReasonError before the fix), as the failure.
            catch: (error) => error
          })
          const choice = parsed.choices[0]!
          expect(choice.finish_reason).toBe("stop")
          expect(Number.isSafeInteger(choice.message.parsed?.age)).toBe(true)
        }
        // Too small a limit: the SDK's BadRequestError, naming the field.
        const error = yield* Effect.flip(
          Effect.tryPromise({
            try: () =>
              client.chat.completions.parse({
                model: BASE_MODEL,
                messages: [{ role: "user", content: "hi" }],
                max_completion_tokens: 16,
                response_format: format
              }),
            catch: (e) => e
          })
        )
        expect(error).toBeInstanceOf(OpenAI.BadRequestError)
        expect((error as InstanceType<typeof OpenAI.BadRequestError>).param).toBe("max_completion_tokens")
      })
    )
  })
})
