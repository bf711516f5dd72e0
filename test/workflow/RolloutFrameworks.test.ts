/**
 * The same four Responses-API agents as `test/server/responses-frameworks.test.ts` (the AI SDK's default
 * provider, the Agents SDK's default model, `@effect/ai-openai`'s `OpenAiLanguageModel`, LangChain with
 * `useResponsesApi`), unchanged, trained where the hosted service is: inside a rollout, through its `fetch`
 * (`RolloutFetch`), over a backend that serves chat completions only. Every turn is recorded as sampled (token
 * ids and logprobs), and the trajectory is what `Rollout.chat` records for the same conversation: the chat
 * requests the rollout made, replayed by hand with `Rollout.chat` at the same seed, record the same entries.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { ChatCompletion } from "../../src/api/ChatCompletion.js"
import { isChoice } from "../../src/api/Trajectory.js"
import type { ApiError } from "../../src/client/ApiError.js"
import * as Policy from "../../src/workflow/Policy.js"
import * as Rollout from "../../src/workflow/Rollout.js"
import * as RolloutFetch from "../../src/workflow/RolloutFetch.js"
import { aiSdk, type Connection, effectAi, langChain, openAiAgents } from "../support/frameworkAgents.js"
import { ChatOnlyBackend, refusedPaths } from "./chatOnly.js"
import { normalized } from "./support.js"

const MODEL = "effect-rl/tiny-2k"

/** A policy that keeps every chat request it is asked for (what the rollout sent), over another policy. */
const capturing = (inner: Policy.Policy) => {
  const requests: Array<Policy.Request> = []
  const policy = Policy.make({
    name: inner.name,
    complete: (request): Effect.Effect<ChatCompletion, ApiError> => {
      const { model: _model, ...rest } = request
      requests.push(rest)
      return inner.complete(rest)
    }
  })
  return { policy, requests }
}

/**
 * Runs an agent given a connection inside a rollout (through the rollout's `fetch`, seeded), then replays the
 * chat requests it made with `Rollout.chat` in a second rollout: both trajectories, and the agent's value.
 */
const recordAndReplay = <A>(name: string, agent: (connection: Connection) => Effect.Effect<A, unknown>) =>
  Effect.gen(function* () {
    const trainable = yield* Policy.trainable({ project: "frameworks", name, base_model: MODEL })
    const { policy, requests } = capturing(trainable)
    const recorded = yield* Rollout.run(
      policy,
      Effect.flatMap(RolloutFetch.fetch({ request: { seed: 9 } }), (fetch) =>
        agent({ baseURL: RolloutFetch.BASE_URL, apiKey: "rollout", model: "any", fetch })
      )
    )
    const replayed = yield* Rollout.run(
      trainable,
      Effect.forEach([...requests], (request) => Rollout.chat(request))
    )
    return { recorded, replayed, requests }
  })

/**
 * The recorded trajectory is the replay's, every choice carries its token ids and logprobs, and the agent's
 * turns continue one conversation (`histories` of them: a translated request that lost its place in the
 * conversation would start another).
 */
const checkRecorded = (result: Effect.Effect.Success<ReturnType<typeof recordAndReplay>>, histories = 1) => {
  const { recorded, replayed, requests } = result
  expect(1 + (recorded.trajectory.additional_histories?.length ?? 0)).toBe(histories)
  expect(requests.length).toBeGreaterThan(0)
  const entries = recorded.trajectory.messages_and_choices
  expect(entries.map(normalized)).toEqual(replayed.trajectory.messages_and_choices.map(normalized))
  expect((recorded.trajectory.additional_histories ?? []).map((h) => h.messages_and_choices.map(normalized))).toEqual(
    (replayed.trajectory.additional_histories ?? []).map((h) => h.messages_and_choices.map(normalized))
  )
  const choices = [
    ...entries,
    ...(recorded.trajectory.additional_histories ?? []).flatMap((h) => h.messages_and_choices)
  ].filter(isChoice)
  expect(choices.length).toBe(requests.length)
  for (const choice of choices) {
    expect(choice.token_ids?.length).toBeGreaterThan(0)
    expect(choice.logprobs?.content?.length).toBe(choice.token_ids?.length)
  }
  expect(refusedPaths).toEqual([])
}

describe("Responses-API libraries recorded by a rollout over a chat-completions-only backend", () => {
  it.layer(ChatOnlyBackend, { timeout: 120_000 })((it) => {
    it.effect("the AI SDK's default provider: two steps of calls, recorded as Rollout.chat records them", () =>
      Effect.gen(function* () {
        const result = yield* recordAndReplay("ai-sdk", (c) => Effect.promise(() => aiSdk(c)))
        checkRecorded(result)
        const entries = result.recorded.trajectory.messages_and_choices
        expect(entries.map((e) => (isChoice(e) ? "choice" : (e as { role: string }).role))).toEqual([
          "system",
          "user",
          "choice",
          "tool",
          "choice"
        ])
        expect(result.recorded.value.sent.map(([path]) => path)).toEqual(["/v1/responses", "/v1/responses"])
        expect(result.recorded.value.executed.length).toBeGreaterThan(0)
      })
    )

    it.effect("the Agents SDK's default model: its turns recorded as Rollout.chat records them", () =>
      Effect.gen(function* () {
        const result = yield* recordAndReplay("agents", (c) => Effect.promise(() => openAiAgents(c)))
        checkRecorded(result)
        expect(result.recorded.value.items.slice(0, 2)).toEqual(["tool_call_item", "tool_call_output_item"])
      })
    )

    it.effect("@effect/ai-openai's OpenAiLanguageModel: a Toolkit call and an object, recorded", () =>
      Effect.gen(function* () {
        const result = yield* recordAndReplay("effect-ai", effectAi)
        checkRecorded(result, 2)
        expect(result.recorded.value.calls.length).toBeGreaterThan(0)
        expect(["apple", "pear"]).toContain(result.recorded.value.fruit)
        // Two conversations: the tool call's, and the object's as an additional history.
        expect(result.recorded.trajectory.additional_histories?.length).toBe(1)
      })
    )

    it.effect("LangChain with useResponsesApi: a named call, its ToolMessage and a next turn, recorded", () =>
      Effect.gen(function* () {
        const result = yield* recordAndReplay("langchain", (c) => Effect.promise(() => langChain(c)))
        checkRecorded(result)
        expect(result.recorded.value.call).toBe("add")
      })
    )
  })
})
