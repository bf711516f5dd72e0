/**
 * The same four Responses-API agents as `test/server/responses-frameworks.test.ts` (the AI SDK's default
 * provider, the Agents SDK's default model, `@effect/ai-openai`'s `OpenAiLanguageModel`, LangChain with
 * `useResponsesApi`), unchanged, trained where the hosted service is: inside a rollout, through its `fetch`
 * (`RolloutFetch`), over a backend that serves chat completions only. Every turn is recorded as sampled (token
 * ids and logprobs), and each agent's conversation is compared with one written by hand for it: the chat
 * requests the agent's Responses requests should become (its system prompt or `instructions`, its tools as
 * the library sends them, its `tool_choice`, the sampled call and its result), made with `Rollout.chat` at the
 * same seed, must reach the policy as the same requests and record the same trajectory. (Checked: dropping
 * `instructions`, the system input message, the tools or `tool_choice` in `ResponsesChat.chatRequestOf` fails
 * each test whose agent sends them.)
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { ChatCompletion } from "../../src/api/ChatCompletion.js"
import type { Message, Tool } from "../../src/api/ChatMessage.js"
import { type EntryChoice, isChoice } from "../../src/api/Trajectory.js"
import type { ApiError } from "../../src/client/ApiError.js"
import * as Policy from "../../src/workflow/Policy.js"
import * as Rollout from "../../src/workflow/Rollout.js"
import * as RolloutFetch from "../../src/workflow/RolloutFetch.js"
import {
  aiSdk,
  type Connection,
  effectAi,
  langChain,
  openAiAgents,
  QUESTION,
  SYSTEM
} from "../support/frameworkAgents.js"
import { ChatOnlyBackend, refusedPaths } from "./chatOnly.js"
import { normalized } from "./support.js"

const MODEL = "effect-rl/tiny-2k"
/** The rollout's seed, and the output limit every agent sets. */
const SETTINGS = { seed: 9, max_completion_tokens: 96 }

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

/** Every choice of a trajectory, its histories' too, in order. */
const choicesOf = (trajectory: Rollout.Draft) =>
  [
    ...trajectory.messages_and_choices,
    ...(trajectory.additional_histories ?? []).flatMap((h) => h.messages_and_choices)
  ].filter(isChoice)

/**
 * Runs an agent given a connection inside a rollout (through the rollout's `fetch`, seeded), then the chat
 * requests written by hand for its conversation (`byHand`, given the choices the rollout sampled) with
 * `Rollout.chat` in a second rollout: both trajectories, both rollouts' requests as the policy received them,
 * and the agent's value.
 */
const recordAndReplay = <A>(
  name: string,
  agent: (connection: Connection) => Effect.Effect<A, unknown>,
  byHand: (choices: ReadonlyArray<EntryChoice>) => ReadonlyArray<Policy.Request>
) =>
  Effect.gen(function* () {
    const trainable = yield* Policy.trainable({ project: "frameworks", name, base_model: MODEL })
    const { policy, requests } = capturing(trainable)
    const recorded = yield* Rollout.run(
      policy,
      Effect.flatMap(RolloutFetch.fetch({ request: { seed: SETTINGS.seed } }), (fetch) =>
        agent({ baseURL: RolloutFetch.BASE_URL, apiKey: "rollout", model: "any", fetch })
      )
    )
    const expected = byHand(choicesOf(recorded.trajectory))
    const replay = capturing(trainable)
    const replayed = yield* Rollout.run(
      replay.policy,
      Effect.forEach(expected, (request) => Rollout.chat(request))
    )
    return { recorded, replayed, requests, expected: replay.requests }
  })

/**
 * The requests the agent's turns reached the policy as are those written by hand (made with `Rollout.chat`),
 * the recorded trajectory (its tools too) is theirs, every choice carries its token ids and logprobs, and the
 * agent's turns continue one conversation (`histories` of them: a translated request that lost its place in
 * the conversation would start another).
 */
const checkRecorded = (result: Effect.Effect.Success<ReturnType<typeof recordAndReplay>>, histories = 1) => {
  const { recorded, replayed, requests, expected } = result
  expect(requests.length).toBeGreaterThan(0)
  expect(requests).toEqual(expected)
  expect(1 + (recorded.trajectory.additional_histories?.length ?? 0)).toBe(histories)
  const entries = recorded.trajectory.messages_and_choices
  expect(entries.map(normalized)).toEqual(replayed.trajectory.messages_and_choices.map(normalized))
  expect((recorded.trajectory.additional_histories ?? []).map((h) => h.messages_and_choices.map(normalized))).toEqual(
    (replayed.trajectory.additional_histories ?? []).map((h) => h.messages_and_choices.map(normalized))
  )
  expect(recorded.trajectory.tools).toEqual(replayed.trajectory.tools)
  const choices = choicesOf(recorded.trajectory)
  expect(choices.length).toBe(requests.length)
  for (const choice of choices) {
    expect(choice.token_ids?.length).toBeGreaterThan(0)
    expect(choice.logprobs?.content?.length).toBe(choice.token_ids?.length)
  }
  expect(refusedPaths).toEqual([])
}

/** The `add` tool as a chat request carries it. */
const addTool = (description: string, parameters: Record<string, unknown>, strict?: boolean): Tool =>
  ({
    type: "function",
    function: { name: "add", description, parameters, ...(strict === undefined ? {} : { strict }) }
  }) as Tool

/** The JSON Schema the AI SDK and the Agents SDK make of the agents' zod `{ a: int, b: int }`. */
const zodAdd = {
  $schema: "http://json-schema.org/draft-07/schema#",
  type: "object",
  properties: {
    a: { type: "integer", minimum: Number.MIN_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER },
    b: { type: "integer", minimum: Number.MIN_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER }
  },
  required: ["a", "b"],
  additionalProperties: false
}

/** The agents' system prompt and question. */
const asked: ReadonlyArray<Message> = [
  { role: "system", content: SYSTEM },
  { role: "user", content: QUESTION }
]

/** The conversation after a turn that called `add` once: its call, then the sum as the tool's result. */
const afterCall = (choice: EntryChoice | undefined): Array<Message> => {
  const calls = choice?.message.tool_calls ?? []
  expect(calls).toHaveLength(1)
  const call = calls[0]!
  if (!("function" in call)) throw new Error("expected a function call")
  const { a, b } = JSON.parse(call.function.arguments) as { a: number; b: number }
  return [
    ...asked,
    {
      role: "assistant",
      content: null,
      tool_calls: [{ id: call.id, type: "function", function: { name: "add", arguments: call.function.arguments } }]
    },
    { role: "tool", tool_call_id: call.id!, content: String(a + b) }
  ] as Array<Message>
}

describe("Responses-API libraries recorded by a rollout over a chat-completions-only backend", () => {
  it.layer(ChatOnlyBackend, { timeout: 120_000 })((it) => {
    it.effect("the AI SDK's default provider: two steps of calls, as the same requests written by hand", () =>
      Effect.gen(function* () {
        const tools = [addTool("Adds two integers", zodAdd)]
        const result = yield* recordAndReplay(
          "ai-sdk",
          (c) => Effect.promise(() => aiSdk(c)),
          // `system` is sent as a system input message; the call stays required on both steps.
          (choices) => [
            { ...SETTINGS, messages: [...asked], tools, tool_choice: "required" },
            { ...SETTINGS, messages: afterCall(choices[0]), tools, tool_choice: "required" }
          ]
        )
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

    it.effect("the Agents SDK's default model: its turns as the same requests written by hand", () =>
      Effect.gen(function* () {
        const tools = [addTool("Adds two integers", zodAdd, true)]
        const result = yield* recordAndReplay(
          "agents",
          (c) => Effect.promise(() => openAiAgents(c)),
          // `instructions` is the system message; the call required on the first turn, then no tool_choice.
          (choices) => [
            { ...SETTINGS, messages: [...asked], tools, tool_choice: "required" },
            { ...SETTINGS, messages: afterCall(choices[0]), tools }
          ]
        )
        checkRecorded(result)
        expect(result.recorded.value.items.slice(0, 2)).toEqual(["tool_call_item", "tool_call_output_item"])
      })
    )

    it.effect("@effect/ai-openai's OpenAiLanguageModel: a Toolkit call and an object, as written by hand", () =>
      Effect.gen(function* () {
        const tools = [
          addTool(
            "Adds two numbers",
            // In the order @effect/ai sends it: the tools are in the prompt, so their keys' order is sampled.
            {
              type: "object",
              required: ["a", "b"],
              properties: { a: { type: "number" }, b: { type: "number" } },
              additionalProperties: false
            },
            true
          )
        ]
        const result = yield* recordAndReplay("effect-ai", effectAi, () => [
          { ...SETTINGS, messages: [...asked], tools, tool_choice: "required" },
          {
            ...SETTINGS,
            messages: [{ role: "user", content: "A fruit?" }],
            response_format: {
              type: "json_schema",
              json_schema: {
                name: "fruit",
                description: "Response with a JSON object",
                schema: {
                  type: "object",
                  properties: { fruit: { type: "string", enum: ["apple", "pear"] } },
                  required: ["fruit"],
                  additionalProperties: false
                },
                strict: true
              }
            }
          }
        ])
        checkRecorded(result, 2)
        expect(result.recorded.value.calls.length).toBeGreaterThan(0)
        expect(["apple", "pear"]).toContain(result.recorded.value.fruit)
        // Two conversations: the tool call's, and the object's as an additional history.
        expect(result.recorded.trajectory.additional_histories?.length).toBe(1)
      })
    )

    it.effect("LangChain with useResponsesApi: a named call, its ToolMessage and a next turn, as by hand", () =>
      Effect.gen(function* () {
        const tools = [
          addTool("Adds two integers", {
            type: "object",
            properties: { a: { type: "integer" }, b: { type: "integer" } },
            required: ["a", "b"],
            additionalProperties: false
          })
        ]
        const result = yield* recordAndReplay(
          "langchain",
          (c) => Effect.promise(() => langChain(c)),
          // The first turn names its tool; the second goes without tool_choice (see `langChain`).
          (choices) => [
            { ...SETTINGS, messages: [...asked], tools, tool_choice: { type: "function", function: { name: "add" } } },
            { ...SETTINGS, messages: afterCall(choices[0]), tools }
          ]
        )
        checkRecorded(result)
        expect(result.recorded.value.call).toBe("add")
      })
    )
  })
})
