/**
 * Streaming through a rollout for real: a policy that samples slowly streams through the gateway to the `openai`
 * SDK (chat completions and the Responses API), the AI SDK (`streamText`) and the OpenAI Agents SDK (a streamed
 * run), and each agent sees its first chunk while the policy is still sampling, the chunks spread over the
 * completion; the turn recorded is the chunks joined. An agent that goes away mid-stream aborts the policy's completion and records nothing. (That a
 * streamed turn records what the unstreamed request records, on the embedded backend: `Gateway.test.ts`.)
 */
import { createOpenAI } from "@ai-sdk/openai"
import { describe, expect, it } from "@effect/vitest"
import { Agent, OpenAIProvider, Runner } from "@openai/agents"
import { streamText } from "ai"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import * as TestServices from "effect/TestServices"
import OpenAI from "openai"
import type { ChatCompletionChunk } from "../../src/api/ChatCompletion.js"
import { isChoice } from "../../src/api/Trajectory.js"
import * as Policy from "../../src/workflow/Policy.js"
import * as Rollout from "../../src/workflow/Rollout.js"
import * as RolloutGateway from "../../src/workflow/RolloutGateway.js"

const WORDS = ["one ", "two ", "three ", "four ", "five ", "six"]
/** How long the slow policy takes per chunk. */
const SPACING = 80

/** A policy that streams `WORDS` one chunk every {@link SPACING} ms (with token ids and logprobs, as a trainer needs). */
const slow = (events: { started: number; ended: number; interrupted: number }) =>
  Policy.make({
    name: "slow",
    complete: () => Effect.die("the slow policy only streams"),
    stream: (request) => {
      const chunk = (choice: ChatCompletionChunk["choices"][number]): ChatCompletionChunk => ({
        id: "chatcmpl-slow",
        object: "chat.completion.chunk",
        created: 0,
        model: request.model ?? "slow",
        choices: [choice]
      })
      const chunks: Array<ChatCompletionChunk> = [
        chunk({ index: 0, delta: { role: "assistant", content: "" } }),
        ...WORDS.map((word, i) =>
          chunk({
            index: 0,
            delta: { content: word },
            logprobs: { content: [{ token: word, logprob: -0.5, bytes: null, top_logprobs: [] }] },
            token_ids: [100 + i]
          })
        ),
        chunk({ index: 0, delta: {}, finish_reason: "stop" }),
        {
          ...chunk({ index: 0, delta: {} }),
          choices: [],
          usage: { prompt_tokens: 3, completion_tokens: WORDS.length, total_tokens: 3 + WORDS.length }
        }
      ]
      return Stream.fromIterable(chunks).pipe(
        Stream.schedule(Schedule.spaced(`${SPACING} millis`)),
        Stream.onStart(Effect.sync(() => events.started++)),
        Stream.onEnd(Effect.sync(() => events.ended++)),
        Stream.onError(() => Effect.void),
        (stream) =>
          Stream.ensuringWith(stream, (exit) => Effect.sync(() => exit._tag === "Failure" && events.interrupted++))
      )
    }
  })

/** The recorded choices of a trajectory, as text. */
const recordedTexts = (trajectory: Rollout.Draft) =>
  trajectory.messages_and_choices.filter(isChoice).map((choice) => choice.message.content)

/** Arrival times (ms since `start`) of each piece an agent read. */
const spread = (arrivals: ReadonlyArray<number>) => ({
  first: arrivals[0]!,
  last: arrivals.at(-1)!,
  distinct: new Set(arrivals.map((t) => Math.floor(t / (SPACING / 2)))).size
})

/**
 * What every agent must have seen and the rollout recorded: the whole text, its first word while the policy was
 * still sampling the rest, the words one by one (at distinct times), and the joined turn.
 */
const streamedWhole = (
  name: string,
  finished: {
    readonly value: { readonly text: string; readonly arrivals: ReadonlyArray<number>; readonly total: number }
    readonly trajectory: Rollout.Draft
  }
) => {
  const whole = WORDS.join("")
  const times = spread(finished.value.arrivals)
  expect(finished.value.text, name).toBe(whole)
  expect(times.first, name).toBeLessThan(finished.value.total - (SPACING * WORDS.length) / 2)
  expect(times.distinct, name).toBeGreaterThanOrEqual(WORDS.length - 2)
  expect(recordedTexts(finished.trajectory), name).toEqual([whole])
}

describe("streaming through a rollout", () => {
  it.layer(RolloutGateway.layer(), { timeout: 60_000 })((it) => {
    it.effect(
      "the openai SDK, the AI SDK and the Agents SDK read each chunk as the policy samples it; the joined turn is recorded",
      () =>
        Effect.gen(function* () {
          const events = { started: 0, ended: 0, interrupted: 0 }
          const policy = slow(events)

          // Chat completions, streamed with the openai SDK.
          const chat = yield* Rollout.run(
            policy,
            RolloutGateway.withEndpoint((endpoint) =>
              Effect.promise(async () => {
                const openai = new OpenAI({ baseURL: endpoint.baseUrl, apiKey: Redacted.value(endpoint.apiKey) })
                const start = Date.now()
                const arrivals: Array<number> = []
                let text = ""
                const stream = await openai.chat.completions.create({
                  model: "slow",
                  messages: [{ role: "user", content: "count" }],
                  stream: true
                })
                for await (const chunk of stream) {
                  const piece = chunk.choices[0]?.delta.content
                  if (piece) {
                    arrivals.push(Date.now() - start)
                    text += piece
                  }
                }
                return { text, arrivals, total: Date.now() - start }
              })
            )
          )
          streamedWhole("chat completions", chat)
          const times = spread(chat.value.arrivals)
          expect(times.last - times.first).toBeGreaterThanOrEqual(SPACING * (WORDS.length - 2))
          const [recorded] = chat.trajectory.messages_and_choices.filter(isChoice)
          expect(recorded!.logprobs?.content?.map((l) => l.token)).toEqual(WORDS)
          expect(recorded!.token_ids).toEqual(WORDS.map((_, i) => 100 + i))

          // The Responses API, streamed with the openai SDK.
          const responses = yield* Rollout.run(
            policy,
            RolloutGateway.withEndpoint((endpoint) =>
              Effect.promise(async () => {
                const openai = new OpenAI({ baseURL: endpoint.baseUrl, apiKey: Redacted.value(endpoint.apiKey) })
                const start = Date.now()
                const arrivals: Array<number> = []
                const stream = openai.responses.stream({ model: "slow", input: "count" })
                for await (const event of stream) {
                  if (event.type === "response.output_text.delta") arrivals.push(Date.now() - start)
                }
                const final = await stream.finalResponse()
                return { text: final.output_text, arrivals, total: Date.now() - start }
              })
            )
          )
          streamedWhole("the Responses API", responses)

          // The AI SDK's streamText over the default (Responses) provider.
          const ai = yield* Rollout.run(
            policy,
            RolloutGateway.withEndpoint((endpoint) =>
              Effect.promise(async () => {
                const openai = createOpenAI({ baseURL: endpoint.baseUrl, apiKey: Redacted.value(endpoint.apiKey) })
                const start = Date.now()
                const arrivals: Array<number> = []
                const result = streamText({ model: openai("slow"), prompt: "count" })
                let text = ""
                for await (const piece of result.textStream) {
                  arrivals.push(Date.now() - start)
                  text += piece
                }
                return { text, arrivals, total: Date.now() - start }
              })
            )
          )
          streamedWhole("the AI SDK", ai)

          // The OpenAI Agents SDK's default (Responses) model, run streamed.
          const agents = yield* Rollout.run(
            policy,
            RolloutGateway.withEndpoint((endpoint) =>
              Effect.promise(async () => {
                const client = new OpenAI({ baseURL: endpoint.baseUrl, apiKey: Redacted.value(endpoint.apiKey) })
                const runner = new Runner({
                  modelProvider: new OpenAIProvider({ openAIClient: client }),
                  tracingDisabled: true
                })
                const agent = new Agent({ name: "counter", instructions: "Count.", model: "slow" })
                const start = Date.now()
                const arrivals: Array<number> = []
                const result = await runner.run(agent, "count", { stream: true })
                for await (const event of result) {
                  if (event.type === "raw_model_stream_event" && event.data.type === "output_text_delta") {
                    arrivals.push(Date.now() - start)
                  }
                }
                await result.completed
                return { text: String(result.finalOutput), arrivals, total: Date.now() - start }
              })
            )
          )
          streamedWhole("the Agents SDK", agents)
          expect(events).toEqual({ started: 4, ended: 4, interrupted: 0 })
        }).pipe(TestServices.provideLive)
    )

    it.effect("an agent that goes away mid-stream aborts the policy's completion; nothing is recorded", () =>
      Effect.gen(function* () {
        const events = { started: 0, ended: 0, interrupted: 0 }
        const finished = yield* Rollout.run(
          slow(events),
          RolloutGateway.withEndpoint((endpoint) =>
            Effect.promise(async () => {
              const aborted = new AbortController()
              const openai = new OpenAI({ baseURL: endpoint.baseUrl, apiKey: Redacted.value(endpoint.apiKey) })
              const stream = await openai.chat.completions.create(
                { model: "slow", messages: [{ role: "user", content: "count" }], stream: true },
                { signal: aborted.signal }
              )
              let pieces = 0
              try {
                for await (const chunk of stream) {
                  if (chunk.choices[0]?.delta.content) pieces++
                  if (pieces === 2) aborted.abort()
                }
              } catch {
                // The SDK's abort error.
              }
              // The policy would have taken this long to finish: by then it must have been stopped instead.
              await new Promise((resolve) => setTimeout(resolve, SPACING * WORDS.length))
              return pieces
            })
          )
        )
        expect(finished.value).toBe(2)
        expect(events).toMatchObject({ started: 1, ended: 0, interrupted: 1 })
        expect(finished.trajectory.messages_and_choices.filter(isChoice)).toEqual([])
      }).pipe(TestServices.provideLive)
    )
  })
})
