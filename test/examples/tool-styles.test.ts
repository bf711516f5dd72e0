/**
 * The tool agent written four ways (effect-rl's `Tools`, `@effect/ai`, the `openai` SDK, the AI SDK on the
 * Responses API; `examples/tools*.ts`)
 * against the real embedded backend: each gathers a group, records the same shape of trajectory (the
 * question, a call, its result, the answer), gets the same reward function, and trains.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { reward, scenarios, play as viaTools } from "../../examples/tools.js"
import { play as viaAiSdk } from "../../examples/tools-ai-sdk.js"
import { play as viaEffectAi } from "../../examples/tools-effect-ai.js"
import { play as viaOpenAi } from "../../examples/tools-openai.js"
import { isChoice, type MessageOrChoice } from "../../src/api/Trajectory.js"
import * as Backend from "../../src/Backend.js"
import * as Gather from "../../src/workflow/Gather.js"
import * as Policy from "../../src/workflow/Policy.js"
import * as Trainer from "../../src/workflow/Trainer.js"

const kind = (entry: MessageOrChoice) =>
  isChoice(entry) ? (entry.message.tool_calls?.length ? "call" : "answer") : (entry as { role: string }).role

describe("the tool agent in four styles", () => {
  it.layer(Backend.local(), { timeout: 120_000 })((it) => {
    for (const [style, play] of [
      ["Tools", viaTools],
      ["@effect/ai", viaEffectAi],
      ["openai", viaOpenAi],
      ["AI SDK (Responses API)", viaAiSdk]
    ] as const) {
      it.effect(`${style}: a group recorded as question, call, result, answer; scored and trained`, () =>
        Effect.gen(function* () {
          const policy = yield* Policy.trainable({
            project: "styles",
            name: style.replace(/\W/g, ""),
            base_model: "effect-rl/tiny-2k"
          })
          const [group] = yield* Gather.groups({
            policy,
            scenarios: scenarios(1, 7),
            rolloutsPerGroup: 4,
            rollout: play as typeof viaTools,
            reward
          })
          const trajectories = group!.group.trajectories
          expect(trajectories).toHaveLength(4)
          for (const trajectory of trajectories) {
            expect(trajectory.messages_and_choices.map(kind)).toEqual(["user", "call", "tool", "answer"])
            expect(trajectory.additional_histories).toBeUndefined()
            expect(trajectory.tools?.map((t) => t.function.name)).toEqual(["weather", "clock"])
            expect(trajectory.metrics).toHaveProperty("correct")
            expect(trajectory.reward).toBeGreaterThanOrEqual(0)
            expect(trajectory.reward).toBeLessThanOrEqual(1)
            for (const choice of trajectory.messages_and_choices.filter(isChoice)) {
              expect(choice.logprobs?.content?.length).toBe(choice.token_ids?.length)
            }
          }
          const trained = yield* Trainer.train(policy, [group!.group])
          expect(trained.step).toBe(1)
        })
      )
    }
  })
})
