/**
 * The embedded backend against an independent client: the `openai` npm package, used unchanged (only its
 * `baseURL` points at the local server's `/v1`), for the model list, chat completions (whole and streamed,
 * with logprobs), its error classes (401, 404, 400), and a trained model addressed by its artifact name. The
 * backend runs on the live clock (`excludeTestServices`), since the SDK's own timers and the server's
 * timestamps are real.
 */
import { describe, expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import OpenAI from "openai"
import * as LocalBackend from "../../src/LocalBackend.js"
import { BASE_MODEL } from "../../src/local/server/internal/inference.js"
import { API_KEY } from "../support/clients.js"
import { Backend, send } from "./support.js"

/** An SDK client against the running backend (no retries, so an error surfaces at once). */
const sdk = (apiKey: string = API_KEY) =>
  Effect.map(LocalBackend.LocalBackend, ({ url }) => new OpenAI({ apiKey, baseURL: `${url}/v1`, maxRetries: 0 }))

/** A promise of the SDK as an effect that fails with whatever it rejects with. */
const run = <A>(f: () => Promise<A>) => Effect.tryPromise({ try: f, catch: (error) => error })

const ask = {
  model: BASE_MODEL,
  messages: [{ role: "user" as const, content: "hello there" }],
  seed: 3,
  max_completion_tokens: 10
}

describe("the openai SDK against the embedded backend", () => {
  layer(Backend, { excludeTestServices: true })((it) => {
    it.effect("models.list: the base model, as OpenAI model objects", () =>
      Effect.gen(function* () {
        const client = yield* sdk()
        const page = yield* run(() => client.models.list())
        const ids = page.data.map((m) => m.id)
        expect(ids).toContain(BASE_MODEL)
        const base = page.data.find((m) => m.id === BASE_MODEL)
        expect(base).toMatchObject({ id: BASE_MODEL, object: "model", owned_by: "effect-rl" })
        expect(Number.isInteger(base?.created)).toBe(true)
        expect(base?.created).toBeGreaterThan(1_600_000_000)
        const one = yield* run(() => client.models.list())
        expect(one.data.map((m) => m.id)).toEqual(ids)
      })
    )

    it.effect("chat.completions.create: choices, usage, finish_reason and logprobs when asked", () =>
      Effect.gen(function* () {
        const client = yield* sdk()
        const completion = yield* run(() =>
          client.chat.completions.create({ ...ask, n: 2, logprobs: true, top_logprobs: 2 })
        )
        expect(completion.object).toBe("chat.completion")
        expect(completion.id).toMatch(/^chatcmpl-/)
        expect(completion.model).toBe(BASE_MODEL)
        expect(Number.isInteger(completion.created)).toBe(true)
        expect(completion.choices.map((c) => c.index)).toEqual([0, 1])
        const usage = completion.usage
        expect(usage).toBeDefined()
        if (usage === undefined) return
        expect(usage.total_tokens).toBe(usage.prompt_tokens + usage.completion_tokens)
        expect(usage.prompt_tokens).toBeGreaterThan(0)
        let sampled = 0
        for (const choice of completion.choices) {
          expect(choice.message.role).toBe("assistant")
          expect(typeof choice.message.content).toBe("string")
          const entries = choice.logprobs?.content ?? []
          sampled += entries.length
          expect(entries.length).toBeGreaterThan(0)
          expect(entries.length).toBeLessThanOrEqual(ask.max_completion_tokens)
          // `length` exactly when the token budget ran out, `stop` otherwise.
          expect(choice.finish_reason).toBe(entries.length === ask.max_completion_tokens ? "length" : "stop")
          for (const entry of entries) {
            expect(entry.logprob).toBeLessThanOrEqual(0)
            expect(entry.top_logprobs).toHaveLength(2)
            const [first, second] = entry.top_logprobs
            expect(first?.logprob ?? 0).toBeGreaterThanOrEqual(second?.logprob ?? 0)
            expect(entry.logprob).toBeLessThanOrEqual(first?.logprob ?? 0)
          }
          // The tokens' bytes spell the content; on `stop` the last entry is the end-of-sequence token.
          const spelled = choice.finish_reason === "stop" ? entries.slice(0, -1) : entries
          const bytes = spelled.flatMap((e) => e.bytes ?? [])
          expect(new TextDecoder().decode(new Uint8Array(bytes))).toBe(choice.message.content)
        }
        // Usage counts the tokens of every choice.
        expect(usage.completion_tokens).toBe(sampled)

        const plain = yield* run(() => client.chat.completions.create(ask))
        expect(plain.choices[0]?.logprobs ?? null).toBeNull()
        // Choice 0 samples with the request's seed either way.
        expect(plain.choices[0]?.message.content).toBe(completion.choices[0]?.message.content)
      })
    )

    it.effect("a stream with include_usage: role first, deltas make the text, usage last with no choices", () =>
      Effect.gen(function* () {
        const client = yield* sdk()
        const whole = yield* run(() => client.chat.completions.create(ask))
        const chunks = yield* run(async () => {
          const stream = await client.chat.completions.create({
            ...ask,
            stream: true,
            stream_options: { include_usage: true }
          })
          const out: Array<OpenAI.Chat.Completions.ChatCompletionChunk> = []
          for await (const chunk of stream) out.push(chunk)
          return out
        })
        expect(chunks.length).toBeGreaterThan(2)
        expect(chunks[0]?.choices[0]?.delta.role).toBe("assistant")
        expect(new Set(chunks.map((c) => c.id)).size).toBe(1)
        for (const chunk of chunks) expect(chunk.object).toBe("chat.completion.chunk")
        const last = chunks.at(-1)
        expect(last?.choices).toEqual([])
        const usage = last?.usage
        expect(usage).toBeDefined()
        if (usage == null) return
        expect(usage).toMatchObject({
          prompt_tokens: whole.usage?.prompt_tokens,
          completion_tokens: whole.usage?.completion_tokens,
          total_tokens: whole.usage?.total_tokens
        })
        expect(usage.total_tokens).toBe(usage.prompt_tokens + usage.completion_tokens)
        // Only the final chunk carries usage (no `continuous_usage_stats`).
        expect(chunks.slice(0, -1).every((c) => c.usage == null)).toBe(true)
        const body = chunks.slice(0, -1)
        const text = body.map((c) => c.choices[0]?.delta.content ?? "").join("")
        expect(text).toBe(whole.choices[0]?.message.content)
        const finishes = body.flatMap((c) => c.choices.map((choice) => choice.finish_reason)).filter((f) => f != null)
        expect(finishes).toEqual([whole.choices[0]?.finish_reason])
        expect(body.at(-1)?.choices[0]?.finish_reason).toBe(whole.choices[0]?.finish_reason)
      })
    )

    it.effect("a wrong key is the SDK's AuthenticationError (401), without the key in it", () =>
      Effect.gen(function* () {
        const wrong = "sk-wrong-key-987654321"
        const client = yield* sdk(wrong)
        const error = yield* Effect.flip(run(() => client.chat.completions.create(ask)))
        expect(error).toBeInstanceOf(OpenAI.AuthenticationError)
        if (!(error instanceof OpenAI.AuthenticationError)) return
        expect(error.status).toBe(401)
        expect(error.error).toEqual({
          message: "Invalid or missing API key",
          type: "AuthenticationError",
          param: null,
          code: 401
        })
        expect(error.message).not.toContain(wrong)
        expect(error.message).not.toContain(API_KEY)
        const list = yield* Effect.flip(run(() => client.models.list()))
        expect(list).toBeInstanceOf(OpenAI.AuthenticationError)
      })
    )

    it.effect("an unknown model is the SDK's NotFoundError (404)", () =>
      Effect.gen(function* () {
        const client = yield* sdk()
        const error = yield* Effect.flip(run(() => client.chat.completions.create({ ...ask, model: "no/such" })))
        expect(error).toBeInstanceOf(OpenAI.NotFoundError)
        if (!(error instanceof OpenAI.NotFoundError)) return
        expect(error.status).toBe(404)
        expect(error.type).toBe("NotFoundError")
        expect(error.message).toBe("404 The model `no/such` does not exist.")
      })
    )

    it.effect("an engine refusal is the SDK's BadRequestError (400) naming the parameter", () =>
      Effect.gen(function* () {
        const client = yield* sdk()
        const error = yield* Effect.flip(run(() => client.chat.completions.create({ ...ask, top_logprobs: 3 })))
        expect(error).toBeInstanceOf(OpenAI.BadRequestError)
        if (!(error instanceof OpenAI.BadRequestError)) return
        expect(error.status).toBe(400)
        expect(error.param).toBe("top_logprobs")
        expect(error.message).toBe("400 top_logprobs needs logprobs set to true")
      })
    )

    it.effect("a trained model by name works through the SDK (listed, and answering, latest and by step)", () =>
      Effect.gen(function* () {
        const created = yield* send("POST", "/v1/preview/models", {
          project: "sdk-proj",
          name: "sdk-agent",
          base_model: BASE_MODEL
        })
        expect(created.status).toBe(200)
        expect(created.json).toMatchObject({ entity: "local", project: "sdk-proj", name: "sdk-agent" })
        const latest = "wandb-artifact:///local/sdk-proj/sdk-agent"
        const client = yield* sdk()
        const page = yield* run(() => client.models.list())
        const entry = page.data.find((m) => m.id === `${latest}:step0`)
        expect(entry).toMatchObject({ object: "model", owned_by: "local" })

        const byName = yield* run(() => client.chat.completions.create({ ...ask, model: latest }))
        const byStep = yield* run(() => client.chat.completions.create({ ...ask, model: `${latest}:step0` }))
        const base = yield* run(() => client.chat.completions.create(ask))
        expect(byName.model).toBe(latest)
        expect(byStep.model).toBe(`${latest}:step0`)
        // Step 0 holds the base model's weights: the same seed gives the same text.
        expect(byName.choices[0]?.message.content).toBe(base.choices[0]?.message.content)
        expect(byStep.choices[0]?.message.content).toBe(base.choices[0]?.message.content)

        const streamed = yield* run(async () => {
          const stream = await client.chat.completions.create({ ...ask, model: latest, stream: true })
          let text = ""
          for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ""
          return text
        })
        expect(streamed).toBe(base.choices[0]?.message.content)

        const missing = yield* Effect.flip(
          run(() => client.chat.completions.create({ ...ask, model: `${latest}:step7` }))
        )
        expect(missing).toBeInstanceOf(OpenAI.NotFoundError)
      })
    )
  })
})
