/**
 * Example: the tool agent of `tools.ts` (call the right tool for the right city, answer with its result),
 * written with `@effect/ai` (`Tool`, `Toolkit`, `Chat`, `LanguageModel`) and trained unchanged:
 * `RolloutModel.layer` provides the `LanguageModel`, backed by the rollout's policy, each generation recorded
 * in the trajectory. The same world, question and reward as `tools.ts`, and its base model (on the
 * embedded backend the pretrained `effect-rl/base-2k`).
 *
 * Needs `@effect/ai` (`npm install @effect/ai@^0.37.0`, an optional peer dependency of effect-rl).
 *
 * Run: `npx tsx examples/tools-effect-ai.ts [--steps n]`.
 */
import { Chat, Tool, Toolkit } from "@effect/ai"
import { Effect, Schema } from "effect"
import { Example } from "effect-rl"
import * as RolloutModel from "effect-rl/RolloutModel"
import { ANSWERS, CITIES, exampleOf, type Played, question, type Scenario } from "./tools.js"

const City = { city: Schema.Literal(...CITIES) }
const Weather = Tool.make("weather", { description: "Weather in a city", parameters: City, success: Schema.String })
const Clock = Tool.make("clock", { description: "Time in a city", parameters: City, success: Schema.String })
const WorldTools = Toolkit.make(Weather, Clock)

/** The agent, in @effect/ai: a chat that must call a tool, then answers as a constrained object. */
export const play = (scenario: Scenario) =>
  Effect.gen(function* () {
    const chat = yield* Chat.empty
    const first = yield* chat.generateText({ prompt: question(scenario), toolkit: WorldTools, toolChoice: "required" })
    const answer = yield* chat.generateObject({
      prompt: [],
      toolkit: WorldTools,
      toolChoice: "none",
      schema: Schema.Struct({ answer: Schema.Literal(...ANSWERS) })
    })
    const call = first.toolCalls[0]
    return { tool: call?.name, city: call?.params.city, answer: answer.value.answer } satisfies Played
  }).pipe(
    // The handlers answer from the scenario's world; the model is the rollout's policy.
    Effect.provide(
      WorldTools.toLayer({
        weather: ({ city }) => Effect.succeed(scenario.weather[city]),
        clock: ({ city }) => Effect.succeed(scenario.time[city])
      })
    ),
    Effect.provide(RolloutModel.layer({ request: { max_completion_tokens: 80 } }))
  )

/** The example: as `tools.ts`, with the agent written with @effect/ai (Toolkit, Chat). */
export const example: Example.Example = exampleOf(
  "tools-effect-ai",
  "The tool agent of `tools`, written with @effect/ai (Toolkit, Chat) and trained unchanged.",
  play
)

Example.main(example, import.meta.url)
