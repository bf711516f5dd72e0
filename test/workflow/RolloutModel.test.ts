/**
 * Agents written with `@effect/ai`, unchanged, against the real embedded backend through the rollout's
 * `LanguageModel` layer: `Chat` with a `Toolkit` over several steps, `generateObject`, `streamText`; the
 * trajectories they record are the ones `Rollout.chat` records for the same conversation.
 */
import * as Chat from "@effect/ai/Chat"
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { isChoice } from "../../src/api/Trajectory.js"
import * as Policy from "../../src/workflow/Policy.js"
import * as Rollout from "../../src/workflow/Rollout.js"
import * as RolloutModel from "../../src/workflow/RolloutModel.js"
import * as Tools from "../../src/workflow/Tools.js"
import * as Trainer from "../../src/workflow/Trainer.js"
import { entryKinds, normalized, toolTurnsByHand, WorkflowBackend } from "./support.js"

const Add = Tool.make("add", {
  description: "Adds two numbers",
  parameters: { a: Schema.Number, b: Schema.Number },
  success: Schema.Number
})
const MathToolkit = Toolkit.make(Add)
const MathHandlers = MathToolkit.toLayer({ add: ({ a, b }) => Effect.succeed(a + b) })

const SYSTEM = "You add numbers with the add tool."
const QUESTION = "What is 2 + 3?"
const request = { max_completion_tokens: 120, seed: 11 }

describe("RolloutModel against the embedded backend", () => {
  it.layer(WorkflowBackend, { timeout: 120_000 })((it) => {
    it.effect("a Chat with a Toolkit over two steps records what Rollout.chat records for it", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "ai", name: "chat", base_model: "effect-rl/tiny-2k" })
        // The agent, written with @effect/ai only: a tool step, then an answer.
        const agent = Effect.gen(function* () {
          const chat = yield* Chat.fromPrompt([{ role: "system", content: SYSTEM }])
          const first = yield* chat.generateText({ prompt: QUESTION, toolkit: MathToolkit, toolChoice: "required" })
          const second = yield* chat.generateText({ prompt: [], toolkit: MathToolkit, toolChoice: "none" })
          return { calls: first.toolCalls, results: first.toolResults, answer: second.text }
        })
        const viaAi = yield* Rollout.run(
          policy,
          agent.pipe(Effect.provide([RolloutModel.layer({ request }), MathHandlers]))
        )
        expect(viaAi.value.calls).toHaveLength(1)
        const { a, b } = viaAi.value.calls[0]!.params as { a: number; b: number }
        expect(viaAi.value.results[0]!.result).toBe(a + b)

        // The same conversation by hand with Rollout.chat: the same requests, so the same samples.
        const add = Tools.make("add", {
          description: "Adds two numbers",
          parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
          handler: () => Effect.void
        })
        const viaChat = yield* toolTurnsByHand(policy, {
          system: SYSTEM,
          question: QUESTION,
          tools: [add.definition],
          request,
          result: String(a + b)
        })
        const entries = viaAi.trajectory.messages_and_choices
        expect(entryKinds(entries)).toEqual(["system", "user", "choice", "tool", "choice"])
        expect(viaAi.trajectory.additional_histories).toBeUndefined()
        expect(entries.map(normalized)).toEqual(viaChat.trajectory.messages_and_choices.map(normalized))
        expect(viaAi.trajectory.tools).toEqual(viaChat.trajectory.tools)
        for (const choice of entries.filter(isChoice)) {
          expect(choice.token_ids?.length).toBeGreaterThan(0)
          expect(choice.logprobs?.content?.length).toBe(choice.token_ids?.length)
        }
        expect(entries.filter(isChoice)[1]!.message.content).toBe(viaAi.value.answer)
        // What it recorded trains.
        const trained = yield* Trainer.train(policy, [
          {
            trajectories: [
              { ...viaAi.trajectory, reward: 1 },
              { ...viaChat.trajectory, reward: 0 }
            ]
          }
        ])
        expect(trained.step).toBe(1)
      })
    )

    it.effect("generateObject asks for the schema's JSON and records the choice; streamText records too", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "ai", name: "object", base_model: "effect-rl/tiny-2k" })
        const Answer = Schema.Struct({ sum: Schema.Int, sure: Schema.Boolean })
        const finished = yield* Rollout.run(
          policy,
          Effect.gen(function* () {
            const object = yield* LanguageModel.generateObject({
              prompt: QUESTION,
              schema: Answer,
              objectName: "answer"
            })
            const parts = yield* Stream.runCollect(LanguageModel.streamText({ prompt: "Say hi." }))
            return { value: object.value, parts: [...parts] }
          }).pipe(Effect.provide(RolloutModel.layer({ request: { max_completion_tokens: 40, seed: 3 } })))
        )
        expect(Schema.is(Answer)(finished.value.value)).toBe(true)
        const choices = [
          ...finished.trajectory.messages_and_choices,
          ...(finished.trajectory.additional_histories ?? []).flatMap((h) => h.messages_and_choices)
        ].filter(isChoice)
        expect(choices).toHaveLength(2)
        expect(JSON.parse(choices[0]!.message.content!)).toEqual(finished.value.value)
        const text = finished.value.parts.flatMap((p) => (p.type === "text-delta" ? [p.delta] : [])).join("")
        expect(text).toBe(choices[1]!.message.content)
        expect(finished.value.parts.at(-1)?.type).toBe("finish")
      })
    )

    it.effect("a request the service refuses is an AiError carrying the ApiError", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "ai", name: "refused", base_model: "effect-rl/tiny-2k" })
        const error = yield* Rollout.run(
          policy,
          LanguageModel.generateText({ prompt: QUESTION, toolkit: MathToolkit, toolChoice: "required" }).pipe(
            Effect.provide([RolloutModel.layer({ request: { max_completion_tokens: 8 } }), MathHandlers])
          )
        ).pipe(Effect.flip)
        expect(error._tag).toBe("UnknownError")
        expect(error.message).toContain("max_completion_tokens")
        expect((error as { cause?: { _tag?: string } }).cause?._tag).toBe("ApiError")
      })
    )
  })
})
