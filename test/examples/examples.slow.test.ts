/**
 * Tests of the examples: every example of the registry (`examples/index.ts`, the one `effect-rl train` uses)
 * trains for two steps on the real embedded backend, and the report helpers of `Example` (`chart`,
 * `summaryLine`, `bestStep`, `parseArgs`) give the figures the report prints.
 */
import { resolve } from "node:path"
import { describe, expect, it, layer } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Package from "effect-rl"
import { examples } from "../../examples/index.js"
import { distinctReplies } from "../../examples/judged.js"
import { Model } from "../../src/api/Model.js"
import * as Backend from "../../src/Backend.js"
import { TrainingClient } from "../../src/client/TrainingClient.js"
import * as Example from "../../src/Example.js"
import type { Trainable } from "../../src/workflow/Policy.js"
import type { GroupScorer, Scoring } from "../../src/workflow/Reward.js"
import type { StepReport, Summary } from "../../src/workflow/TrainingLoop.js"

layer(Backend.local(), { excludeTestServices: true, timeout: "60 seconds" })(
  "a run of every example for two steps on the local backend",
  (it) => {
    it.effect("the registry names each example by its own name", () =>
      Effect.sync(() => {
        expect(Object.keys(examples)).toEqual(
          expect.arrayContaining(["tictactoe", "arithmetic", "judged", "sft-then-rl"])
        )
        for (const [name, example] of Object.entries(examples)) {
          expect(example.name).toBe(name)
          expect(example.description.length).toBeGreaterThan(0)
        }
        // The examples run the sources (vitest.config.ts aliases the package name to src/), not a build.
        expect(Package.Example.summaryLine).toBe(Example.summaryLine)
      })
    )

    for (const [name, example] of Object.entries(examples)) {
      it.effect(
        name,
        () =>
          Effect.gen(function* () {
            const client = yield* TrainingClient
            const started = yield* Clock.currentTimeMillis
            const outcome = yield* example.train({
              steps: 2,
              // The example's own local model, whatever EFFECT_RL_BASE_MODEL says in this shell.
              baseModel: example.localBaseModel ?? Example.LOCAL_BASE_MODEL,
              modelName: `test-${name}`
            })
            const seconds = ((yield* Clock.currentTimeMillis) - started) / 1000
            const { summary, policy } = outcome

            expect(summary.steps).toHaveLength(2)
            for (const step of summary.steps) expect(step.train.num_trajectories).toBeGreaterThan(0)
            expect(summary.steps.map((s) => s.step)).toEqual([summary.startStep, summary.startStep + 1])
            expect(summary.finalStep).toBe(summary.startStep + 2)
            expect(summary.stoppedBy).toBe("budget")
            // The policy follows the training, and the backend has the checkpoint it samples from.
            expect(yield* policy.step).toBe(summary.finalStep)
            const latest = yield* client.latestCheckpoint(policy.record.id)
            expect(Option.map(latest, (c) => c.step)).toEqual(Option.some(summary.finalStep))
            expect(policy.record.name).toBe(`test-${name}`)

            const line = Example.summaryLine(outcome, seconds, "model")
            expect(line.steps).toBe(2)
            expect(Number.isFinite(line.first_reward)).toBe(true)
            expect(Number.isFinite(line.last3_reward)).toBe(true)
            expect(Number.isFinite(line.seconds)).toBe(true)
            expect(line.seconds).toBeGreaterThan(0)
          }).pipe(Logger.withMinimumLogLevel(LogLevel.Warning)),
        90_000
      )
    }
  }
)

const model = Schema.decodeUnknownSync(Model)({
  id: "00000000-0000-4000-8000-000000000001",
  entity: "local",
  project: "examples",
  name: "m",
  base_model: "effect-rl/tiny"
})

/** A trainable policy for the report helpers, which read only its record (nothing is sampled). */
const policy: Trainable = {
  name: "m",
  model: Option.some(model) as Option.Some<Model>,
  record: model,
  version: Effect.succeed(0),
  step: Effect.succeed(0),
  pinned: false,
  setStep: () => Effect.void,
  complete: () => Effect.dieMessage("the report helpers do not sample")
}

const report = (step: number, reward: number | undefined): StepReport => ({
  step,
  trainedStep: step + 1,
  train: reward === undefined ? { num_trajectories: 0 } : { reward, num_trajectories: 8 },
  training: {},
  seconds: 1
})

const summaryOf = (steps: ReadonlyArray<StepReport>, extra: Partial<Summary> = {}): Summary => ({
  startStep: steps[0]?.step ?? 0,
  finalStep: (steps.at(-1)?.step ?? -1) + 1,
  steps,
  stoppedBy: "budget",
  ...extra
})

describe("Example report helpers", () => {
  it("chart scales bars between min(0, values) and the largest value", () => {
    expect(Example.chart([])).toBe("(no steps)")
    const lines = Example.chart(
      [
        { label: "step 0", value: -0.5 },
        { label: "step 10", value: 1.5 },
        { label: "step 2", value: 0.5 }
      ],
      20
    ).split("\n")
    expect(lines).toEqual([
      ` step 0 | ${" ".repeat(20)} -0.500`,
      `step 10 | ${"#".repeat(20)} 1.500`,
      ` step 2 | ${"#".repeat(10)}${" ".repeat(10)} 0.500`
    ])
    // All zero: no bars, and no division by zero.
    expect(Example.chart([{ label: "a", value: 0 }], 4)).toBe("a |      0.000")
  })

  it("summaryLine: steps, the first reward, the mean of the last three (to four decimals), seconds to a tenth", () => {
    const outcome = { summary: summaryOf([0.1, 0.2, 0.3, 0.7].map((r, i) => report(i, r))), policy }
    const line = Example.summaryLine(outcome, 12.345, "model-x")
    expect(line.steps).toBe(4)
    expect(line.first_reward).toBe(0.1)
    expect(line.last3_reward).toBe(0.4)
    const thirds = Example.summaryLine(
      { summary: summaryOf([0.575 / 3, 0.1, 0.2, 0.8].map((r, i) => report(i, r))), policy },
      1,
      "m"
    )
    expect(thirds).toMatchObject({ first_reward: 0.1917, last3_reward: 0.3667 })
    expect(line.seconds).toBe(12.3)
    expect(line.model).toBe("model-x")
    // Fewer than three steps: the mean of those there are; a step without a reward counts as 0.
    const short = Example.summaryLine({ summary: summaryOf([report(0, 0.4), report(1, undefined)]), policy }, 1, "m")
    expect(short).toMatchObject({ steps: 2, first_reward: 0.4, last3_reward: 0.2 })
    expect(Example.summaryLine({ summary: summaryOf([]), policy }, 0, "m")).toMatchObject({
      steps: 0,
      first_reward: null,
      last3_reward: null
    })
  })

  it("bestStep: the step of the best training reward (the later on a tie), or the final one if validated better", () => {
    const steps = [report(0, 0.2), report(1, 0.6), report(2, 0.3), report(3, 0.6), report(4, 0.1)]
    expect(Example.bestStep(summaryOf(steps))).toBe(3)
    expect(Example.bestStep(summaryOf(steps, { finalValidation: { reward: 0.5 } }))).toBe(3)
    expect(Example.bestStep(summaryOf(steps, { finalValidation: { reward: 0.9 } }))).toBe(5)
    expect(Example.bestStep(summaryOf([report(7, undefined)]))).toBeUndefined()
    expect(Example.bestStep(summaryOf([]))).toBeUndefined()
  })

  it("parseArgs reads the flags it knows, and refuses what it does not understand", () => {
    expect(Example.parseArgs(["--steps", "3", "--base-model", "b/m", "--model", "mine", "--data-dir", "d"])).toEqual({
      steps: 3,
      baseModel: "b/m",
      modelName: "mine",
      local: { dataDir: resolve("d") }
    })
    const none = Example.parseArgs([])
    expect([none.steps, none.baseModel, none.modelName, none.local]).toEqual([
      undefined,
      undefined,
      undefined,
      undefined
    ])
    expect(() => Example.parseArgs(["--steps", "abc"])).toThrow("--steps must be a positive integer, got 'abc'")
    expect(() => Example.parseArgs(["--steps", "0"])).toThrow("--steps must be a positive integer")
    expect(() => Example.parseArgs(["--model", "--steps", "3"])).toThrow("--model needs a value")
    expect(() => Example.parseArgs(["--steps"])).toThrow("--steps needs a value")
    expect(() => Example.parseArgs(["--step", "3"])).toThrow("unknown argument '--step'")
  })
})

describe("the judged example's distinctReplies", () => {
  it.effect("asks the scorer about each distinct reply once and gives every rollout its reply's score", () =>
    Effect.gen(function* () {
      const asked: Array<ReadonlyArray<string>> = []
      // A scorer standing in for the judge: scores a reply by its length, and records what it was asked.
      const byLength: GroupScorer<null, string> = (group) =>
        Effect.sync(() => {
          asked.push(group.map((item) => item.value))
          return group.map((item) => ({ reward: item.value.length }))
        })
      const item = (value: string): Scoring<null, string> => ({
        scenario: null,
        value,
        trajectory: { messages_and_choices: [] },
        score: { reward: 0 }
      })
      const scores = yield* distinctReplies(byLength)(["hi", "hello", "hi", "hey", "hello"].map(item))
      expect(asked).toEqual([["hi", "hello", "hey"]])
      expect(scores.map((s) => s.reward)).toEqual([2, 5, 2, 3, 5])
      expect(yield* distinctReplies(byLength)([])).toEqual([])
    })
  )
})
