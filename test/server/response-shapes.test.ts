/**
 * The response shapes clients decode (issue 18, part 4): real responses of the embedded backend, whole and
 * streamed, with and without logprobs, `n > 1` and structured output, decoded by `@effect/ai-openai`'s
 * generated schema of a chat completion (which requires `message.refusal` and, with logprobs,
 * `logprobs.refusal`) and checked against the members the `openai` SDK's types declare required. The key
 * lists below are tied to the SDK's types at compile time: a member the SDK makes required and the list
 * leaves out fails the type check, so the runtime check cannot fall behind the SDK.
 */
import * as Generated from "@effect/ai-openai/Generated"
import { describe, expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import OpenAI from "openai"
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionMessage,
  ChatCompletionTokenLogprob
} from "openai/resources/chat/completions"
import * as LocalBackend from "../../src/LocalBackend.js"
import { BASE_MODEL } from "../../src/local/server/internal/inference.js"
import { API_KEY } from "../support/clients.js"
import { Backend } from "./support.js"

/** The keys of `T` that are not optional. */
type RequiredKeys<T> = { [K in keyof T]-?: object extends Pick<T, K> ? never : K }[keyof T]

/** A list of every required key of `T`: the type check fails when one is missing. */
const requiredKeys =
  <T>() =>
  <const Keys extends ReadonlyArray<RequiredKeys<T>>>(
    keys: Keys & ([Exclude<RequiredKeys<T>, Keys[number]>] extends [never] ? unknown : never)
  ): ReadonlyArray<string> =>
    keys as ReadonlyArray<string>

const COMPLETION = requiredKeys<ChatCompletion>()(["id", "choices", "created", "model", "object"])
const CHOICE = requiredKeys<ChatCompletion.Choice>()(["finish_reason", "index", "logprobs", "message"])
const MESSAGE = requiredKeys<ChatCompletionMessage>()(["content", "refusal", "role"])
const LOGPROBS = requiredKeys<ChatCompletion.Choice.Logprobs>()(["content", "refusal"])
const TOKEN_LOGPROB = requiredKeys<ChatCompletionTokenLogprob>()(["token", "bytes", "logprob", "top_logprobs"])
const TOP_LOGPROB = requiredKeys<ChatCompletionTokenLogprob.TopLogprob>()(["token", "bytes", "logprob"])
const CHUNK = requiredKeys<ChatCompletionChunk>()(["id", "choices", "created", "model", "object"])
const CHUNK_CHOICE = requiredKeys<ChatCompletionChunk.Choice>()(["delta", "finish_reason", "index"])
const CHUNK_LOGPROBS = requiredKeys<ChatCompletionChunk.Choice.Logprobs>()(["content", "refusal"])

/** Every key of `keys` present on `value` (the check a typed client relies on without checking). */
const expectKeys = (value: unknown, keys: ReadonlyArray<string>, where: string) => {
  const missing = keys.filter((key) => typeof value !== "object" || value === null || !(key in value))
  expect({ where, missing }).toEqual({ where, missing: [] })
}

const checkLogprobs = (logprobs: unknown, keys: ReadonlyArray<string>, where: string) => {
  if (logprobs === null || logprobs === undefined) return
  expectKeys(logprobs, keys, where)
  for (const entry of (logprobs as { content: ReadonlyArray<{ top_logprobs: ReadonlyArray<unknown> }> }).content) {
    expectKeys(entry, TOKEN_LOGPROB, `${where}.content[]`)
    for (const top of entry.top_logprobs) expectKeys(top, TOP_LOGPROB, `${where}.content[].top_logprobs[]`)
  }
}

const decodeGenerated = Schema.decodeUnknownEither(Generated.CreateChatCompletionResponse)

/** The requests whose answers are checked: plain, logprobs with alternatives, several choices, JSON output. */
const variants = {
  plain: {},
  logprobs: { logprobs: true, top_logprobs: 3 },
  logprobsOnly: { logprobs: true },
  several: { n: 3, logprobs: true, top_logprobs: 1 },
  json: { response_format: { type: "json_object" as const }, max_completion_tokens: 40 },
  stop: { stop: ["e"] }
}

const sdk = Effect.map(
  LocalBackend.LocalBackend,
  ({ url }) => new OpenAI({ apiKey: API_KEY, baseURL: `${url}/v1`, maxRetries: 0 })
)

const ask = { model: BASE_MODEL, messages: [{ role: "user" as const, content: "hello" }], seed: 5 }

describe("the response shapes clients decode", () => {
  layer(Backend, { excludeTestServices: true })((it) => {
    it.effect("whole completions decode with @effect/ai-openai's schema and have every member the SDK requires", () =>
      Effect.gen(function* () {
        const client = yield* sdk
        for (const [name, variant] of Object.entries(variants)) {
          const completion = yield* Effect.promise(() =>
            client.chat.completions.create({ ...ask, max_completion_tokens: 8, ...variant })
          )
          const decoded = decodeGenerated(completion)
          if (Either.isLeft(decoded)) {
            expect.fail(`${name}: ${ParseResult.TreeFormatter.formatErrorSync(decoded.left)}`)
          }
          expectKeys(completion, COMPLETION, `${name}`)
          for (const choice of completion.choices) {
            expectKeys(choice, CHOICE, `${name}.choices[]`)
            expectKeys(choice.message, MESSAGE, `${name}.choices[].message`)
            expect(choice.message.refusal).toBeNull()
            checkLogprobs(choice.logprobs, LOGPROBS, `${name}.choices[].logprobs`)
          }
        }
      })
    )

    it.effect("streamed chunks have every member the SDK requires, logprobs included", () =>
      Effect.gen(function* () {
        const client = yield* sdk
        for (const [name, variant] of Object.entries(variants)) {
          const stream = yield* Effect.promise(() =>
            client.chat.completions.create({
              ...ask,
              max_completion_tokens: 8,
              ...variant,
              stream: true,
              stream_options: { include_usage: true }
            })
          )
          let chunks = 0
          yield* Effect.promise(async () => {
            for await (const chunk of stream) {
              chunks++
              expectKeys(chunk, CHUNK, `${name} chunk`)
              for (const choice of chunk.choices) {
                expectKeys(choice, CHUNK_CHOICE, `${name} chunk.choices[]`)
                checkLogprobs(choice.logprobs, CHUNK_LOGPROBS, `${name} chunk.choices[].logprobs`)
              }
            }
          })
          expect(chunks).toBeGreaterThan(1)
        }
      })
    )

    it.effect("the SDK's stream helper assembles the same message a whole completion has", () =>
      Effect.gen(function* () {
        const client = yield* sdk
        const whole = yield* Effect.promise(() =>
          client.chat.completions.create({ ...ask, max_completion_tokens: 8, logprobs: true })
        )
        const final = yield* Effect.promise(() =>
          client.chat.completions.stream({ ...ask, max_completion_tokens: 8, logprobs: true }).finalChatCompletion()
        )
        expect(final.choices[0]?.message.content).toBe(whole.choices[0]?.message.content)
        expect(final.choices[0]?.finish_reason).toBe(whole.choices[0]?.finish_reason)
        expect(decodeGenerated(final)._tag).toBe("Right")
      })
    )
  })
})
