/**
 * Agents written with the `openai` SDK (Promise-based code), unchanged, against the real embedded backend
 * through the rollout's recorded client: `create` with tools over two turns, streaming, `runTools`, and the
 * SDK's own errors; what they record is what `Rollout.chat` records for the same conversation.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import OpenAI from "openai"
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions"
import { isChoice } from "../../src/api/Trajectory.js"
import * as Policy from "../../src/workflow/Policy.js"
import * as Rollout from "../../src/workflow/Rollout.js"
import * as RolloutOpenAI from "../../src/workflow/RolloutOpenAI.js"
import * as Trainer from "../../src/workflow/Trainer.js"
import { entryKinds, normalized, toolTurnsByHand, WorkflowBackend } from "./support.js"

const add: ChatCompletionTool = {
  type: "function",
  function: {
    name: "add",
    description: "Adds two numbers",
    parameters: {
      type: "object",
      properties: { a: { type: "number" }, b: { type: "number" } },
      required: ["a", "b"],
      additionalProperties: false
    }
  }
}
const SYSTEM = "You add numbers with the add tool."
const QUESTION = "What is 2 + 3?"
const settings = { max_completion_tokens: 120, seed: 5 }

/** A tool agent as a user would write it with the openai SDK: call the tool, send its result, answer. */
const agent = async (openai: OpenAI, stream: boolean) => {
  const messages: Array<ChatCompletionMessageParam> = [
    { role: "system", content: SYSTEM },
    { role: "user", content: QUESTION }
  ]
  const first = stream
    ? await openai.chat.completions
        .stream({ model: "any", messages, tools: [add], tool_choice: "required", ...settings })
        .finalChatCompletion()
    : await openai.chat.completions.create({
        model: "any",
        messages,
        tools: [add],
        tool_choice: "required",
        ...settings
      })
  const message = first.choices[0]!.message
  const call = message.tool_calls![0]!
  if (call.type !== "function") throw new Error("expected a function call")
  const { a, b } = JSON.parse(call.function.arguments) as { a: number; b: number }
  messages.push(message, { role: "tool", tool_call_id: call.id, content: String(a + b) })
  const second = await openai.chat.completions.create({
    model: "any",
    messages,
    tools: [add],
    tool_choice: "none",
    ...settings
  })
  return { sum: a + b, arguments: call.function.arguments, answer: second.choices[0]!.message.content }
}

describe("RolloutOpenAI against the embedded backend", () => {
  it.layer(WorkflowBackend, { timeout: 120_000 })((it) => {
    it.effect("a Promise-based agent's turns are recorded as Rollout.chat records them, and train", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "sdk", name: "agent", base_model: "effect-rl/tiny-2k" })
        const viaSdk = yield* Rollout.run(
          policy,
          Effect.flatMap(RolloutOpenAI.client(), (openai) => Effect.promise(() => agent(openai, false)))
        )
        const viaChat = yield* toolTurnsByHand(policy, {
          system: SYSTEM,
          question: QUESTION,
          tools: [add] as never,
          request: settings,
          result: String(viaSdk.value.sum)
        })
        const entries = viaSdk.trajectory.messages_and_choices
        expect(entryKinds(entries)).toEqual(["system", "user", "choice", "tool", "choice"])
        expect(viaSdk.trajectory.additional_histories).toBeUndefined()
        expect(entries.map(normalized)).toEqual(viaChat.trajectory.messages_and_choices.map(normalized))
        const choices = entries.filter(isChoice)
        expect(choices[0]!.message.tool_calls![0]).toMatchObject({ function: { arguments: viaSdk.value.arguments } })
        expect(choices[1]!.message.content).toBe(viaSdk.value.answer)
        for (const choice of choices) expect(choice.logprobs?.content?.length).toBe(choice.token_ids?.length)
        const trained = yield* Trainer.train(policy, [
          {
            trajectories: [
              { ...viaSdk.trajectory, reward: 1 },
              { ...viaChat.trajectory, reward: 0 }
            ]
          }
        ])
        expect(trained.step).toBe(1)
      })
    )

    it.effect("streamed requests get the recorded choice as events the SDK assembles into the same calls", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "sdk", name: "stream", base_model: "effect-rl/tiny-2k" })
        const streamed = yield* Rollout.run(
          policy,
          Effect.flatMap(RolloutOpenAI.client(), (openai) => Effect.promise(() => agent(openai, true)))
        )
        const choices = streamed.trajectory.messages_and_choices.filter(isChoice)
        expect(choices).toHaveLength(2)
        expect(choices[0]!.message.tool_calls![0]).toMatchObject({ function: { arguments: streamed.value.arguments } })
        expect(streamed.trajectory.additional_histories).toBeUndefined()
      })
    )

    it.effect("runTools runs its loop through the rollout, every turn and result recorded in one history", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "sdk", name: "runner", base_model: "effect-rl/tiny-2k" })
        /** The SDK's own tool runner, as an agent uses it: `auto` unless `required` is asked for. */
        const runTools = (required: boolean) => {
          const calls: Array<{ a: number; b: number }> = []
          return Rollout.run(
            policy,
            Effect.flatMap(RolloutOpenAI.client({ request: { seed: 2 } }), (openai) =>
              Effect.promise(async () => {
                const runner = openai.chat.completions.runTools(
                  {
                    model: "any",
                    messages: [{ role: "user", content: QUESTION }],
                    max_completion_tokens: 120,
                    ...(required ? { tool_choice: "required" as const } : {}),
                    tools: [
                      {
                        type: "function",
                        function: {
                          name: "add",
                          description: "Adds two numbers",
                          parameters: add.function.parameters!,
                          parse: (input: string) => JSON.parse(input) as { a: number; b: number },
                          function: (args: { a: number; b: number }) => {
                            calls.push(args)
                            return String(args.a + args.b)
                          }
                        }
                      }
                    ]
                  },
                  { maxChatCompletions: 4 }
                )
                await runner.done()
                return { completions: runner.allChatCompletions().length, calls }
              })
            )
          )
        }
        const kinds = (entries: ReadonlyArray<unknown>) =>
          entries.map((e) => (isChoice(e as never) ? "choice" : (e as { role: string }).role))

        // With `auto` (what runTools sends) the untrained policy answers in text: one turn, recorded.
        const auto = yield* runTools(false)
        expect(auto.value.completions).toBe(1)
        expect(kinds(auto.trajectory.messages_and_choices)).toEqual(["user", "choice"])

        // With `required` it calls every turn until the runner's limit: four calls run, the first three
        // results sent back, all in one recorded conversation.
        const required = yield* runTools(true)
        expect(required.value.completions).toBe(4)
        const entries = required.trajectory.messages_and_choices
        expect(kinds(entries)).toEqual(["user", "choice", "tool", "choice", "tool", "choice", "tool", "choice"])
        const choices = entries.filter(isChoice)
        const made = choices.flatMap((c) => c.message.tool_calls ?? [])
        expect(made.map((c) => (c.type === "function" ? JSON.parse(c.function.arguments) : c))).toEqual(
          required.value.calls
        )
        const results = entries.filter((e) => !isChoice(e) && "role" in e && e.role === "tool") as Array<{
          content: string
        }>
        expect(results.map((r) => r.content)).toEqual(required.value.calls.slice(0, 3).map(({ a, b }) => String(a + b)))
        expect(required.trajectory.additional_histories).toBeUndefined()
      })
    )

    it.effect("what the service refuses is the SDK's own error; other endpoints are a 404", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "sdk", name: "errors", base_model: "effect-rl/tiny-2k" })
        const errors = yield* Rollout.run(
          policy,
          Effect.flatMap(RolloutOpenAI.client(), (openai) =>
            Effect.promise(async () => {
              const caught = async (promise: Promise<unknown>) => {
                try {
                  await promise
                  return undefined
                } catch (error) {
                  return error as InstanceType<typeof OpenAI.APIError>
                }
              }
              const user: ChatCompletionMessageParam = { role: "user", content: QUESTION }
              return {
                refused: [
                  await caught(
                    openai.chat.completions.create({
                      model: "any",
                      messages: [user],
                      tools: [add],
                      tool_choice: "required",
                      max_completion_tokens: 8
                    })
                  ),
                  await caught(
                    openai.chat.completions.create({ model: "any", messages: [user], tool_choice: "required" })
                  ),
                  await caught(openai.embeddings.create({ model: "any", input: "x" }))
                ],
                models: (await openai.models.list()).data.map((model) => model.id)
              }
            })
          )
        )
        const [budget, invalid, other] = errors.value.refused
        const models = errors.value.models
        expect(budget).toBeInstanceOf(OpenAI.BadRequestError)
        expect(budget!.message).toContain("max_completion_tokens must be at least")
        expect(invalid).toBeInstanceOf(OpenAI.BadRequestError)
        expect(invalid!.message).toContain('tool_choice "required" needs tools')
        expect(other).toBeInstanceOf(OpenAI.NotFoundError)
        // The model list names the rollout's policy, the one model a rollout serves.
        expect(models).toEqual([policy.name])
        expect(errors.trajectory.messages_and_choices).toEqual([])
      })
    )
  })
})
