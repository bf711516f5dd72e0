/**
 * Tests of the reward functions and their combinators (`src/workflow/Reward.ts`): plain functions, weighted
 * sums, clamps, format penalties, group-relative scores and chained group scorers.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Reward from "../../src/workflow/Reward.js"
import type { Draft } from "../../src/workflow/Rollout.js"

interface Problem {
  readonly answer: string
}

const trajectory: Draft = { messages_and_choices: [{ role: "user", content: "2 + 2 =" }] }
const input = (value: string, answer = "4"): Reward.Input<Problem, string> => ({
  scenario: { answer },
  trajectory,
  value
})

const correct: Reward.Reward<Problem, string> = Reward.fromFunction(({ scenario, value }) =>
  value.trim() === scenario.answer ? 1 : 0
)

class Broken extends Data.TaggedError("Broken")<{ readonly why: string }> {}

/** A group as a group scorer sees it, with the given rewards (and a metric that must survive). */
const groupOf = (rewards: ReadonlyArray<number>): ReadonlyArray<Reward.Scoring<Problem, string>> =>
  rewards.map((reward, i) => ({ ...input(String(i)), score: { reward, metrics: { turns: i } } }))

describe("Reward", () => {
  it("normalize turns a number into a Scored and leaves a Scored as it is", () => {
    expect(Reward.normalize(0.25)).toEqual({ reward: 0.25 })
    const scored = { reward: 2, metrics: { a: 1 } }
    expect(Reward.normalize(scored)).toBe(scored)
  })

  it.effect("fromFunction, constant and map", () =>
    Effect.gen(function* () {
      expect(yield* correct(input(" 4 "))).toBe(1)
      expect(yield* correct(input("5"))).toBe(0)
      expect(yield* Reward.constant(-0.5)(input("x"))).toBe(-0.5)
      const doubled = Reward.map(correct, (scored, { value }) => ({
        reward: scored.reward * 2,
        metrics: { length: value.length }
      }))
      expect(yield* doubled(input("4"))).toEqual({ reward: 2, metrics: { length: 1 } })
    })
  )

  describe("weighted", () => {
    it.effect("sums the weighted rewards and records each part and its metrics", () =>
      Effect.gen(function* () {
        const length: Reward.Reward<Problem, string> = Reward.fromFunction(({ value }) => ({
          reward: value.length,
          metrics: { long: value.length > 3, chars: value.length }
        }))
        const reward = Reward.weighted(
          { name: "correct", reward: correct, weight: 2 },
          { name: "length", reward: length, weight: -0.25 }
        )
        const score = Reward.normalize(yield* reward(input("4")))
        expect(score.reward).toBeCloseTo(2 * 1 - 0.25 * 1)
        expect(score.metrics).toEqual({ correct: 1, length: 1, "length/long": false, "length/chars": 1 })
        const wrong = Reward.normalize(yield* reward(input("five")))
        expect(wrong.reward).toBeCloseTo(2 * 0 - 0.25 * 4)
        expect(wrong.metrics).toEqual({ correct: 0, length: 4, "length/long": true, "length/chars": 4 })
      })
    )

    it.live("runs the parts concurrently", () =>
      Effect.gen(function* () {
        // The first part waits for the second: run one after the other, they would never finish.
        const gate = yield* Deferred.make<void>()
        const waits: Reward.Reward<Problem, string> = () => Effect.as(Deferred.await(gate), 1)
        const opens: Reward.Reward<Problem, string> = () => Effect.as(Deferred.succeed(gate, undefined), 3)
        const reward = Reward.weighted(
          { name: "waits", reward: waits, weight: 1 },
          { name: "opens", reward: opens, weight: 1 }
        )
        const score = yield* reward(input("4")).pipe(Effect.timeout("2 seconds"))
        expect(Reward.normalize(score).reward).toBe(4)
      })
    )

    it.effect("fails with a part's error, whose type it keeps", () =>
      Effect.gen(function* () {
        const broken: Reward.Reward<Problem, string, Broken> = () => Effect.fail(new Broken({ why: "no grader" }))
        const reward: Reward.Reward<Problem, string, Broken> = Reward.weighted(
          { name: "correct", reward: correct, weight: 1 },
          { name: "broken", reward: broken, weight: 1 }
        )
        const exit = yield* Effect.exit(reward(input("4")))
        expect(exit).toEqual(Exit.fail(new Broken({ why: "no grader" })))
      })
    )

    it("refuses two parts of the same name", () => {
      expect(() =>
        Reward.weighted({ name: "a", reward: correct, weight: 1 }, { name: "a", reward: correct, weight: 2 })
      ).toThrow(/names must differ/)
    })
  })

  describe("clamp", () => {
    it.effect("bounds the reward and keeps the metrics", () =>
      Effect.gen(function* () {
        const raw: Reward.Reward<Problem, string> = Reward.fromFunction(({ value }) => ({
          reward: Number(value),
          metrics: { raw: Number(value) }
        }))
        const clamped = Reward.clamp(raw, { min: -1, max: 1 })
        expect(yield* clamped(input("-3"))).toEqual({ reward: -1, metrics: { raw: -3 } })
        expect(yield* clamped(input("0.5"))).toEqual({ reward: 0.5, metrics: { raw: 0.5 } })
        expect(yield* clamped(input("7"))).toEqual({ reward: 1, metrics: { raw: 7 } })
      })
    )

    it("refuses min above max", () => {
      expect(() => Reward.clamp(correct, { min: 1, max: 0 })).toThrow(RangeError)
    })
  })

  describe("formatPenalty", () => {
    it.effect("subtracts the penalty and records format_error when the check fails", () =>
      Effect.gen(function* () {
        const reward = Reward.formatPenalty(correct, { check: ({ value }) => /^\d+$/.test(value), penalty: 0.5 })
        expect(yield* reward(input("4"))).toEqual({ reward: 1, metrics: { format_error: 0 } })
        expect(yield* reward(input(" 4 "))).toEqual({ reward: 0.5, metrics: { format_error: 1 } })
        expect(yield* reward(input("x"))).toEqual({ reward: -0.5, metrics: { format_error: 1 } })
      })
    )

    it.effect("takes an effectful check, a metric name, and keeps the reward's metrics", () =>
      Effect.gen(function* () {
        const scored: Reward.Reward<Problem, string> = () => Effect.succeed({ reward: 3, metrics: { steps: 2 } })
        const reward = Reward.formatPenalty(scored, {
          check: ({ value }) =>
            value === "boom" ? Effect.fail(new Broken({ why: "checker" })) : Effect.succeed(value === "ok"),
          penalty: 1,
          name: "bad_json"
        })
        expect(yield* reward(input("ok"))).toEqual({ reward: 3, metrics: { steps: 2, bad_json: 0 } })
        expect(yield* reward(input("nope"))).toEqual({ reward: 2, metrics: { steps: 2, bad_json: 1 } })
        expect(yield* Effect.exit(reward(input("boom")))).toEqual(Exit.fail(new Broken({ why: "checker" })))
      })
    )
  })

  describe("groupRelative", () => {
    // What is trained on: the relative value, kept under its own name; the reward stays the task's.
    const rewardsOf = (scores: ReadonlyArray<Reward.Scored>) => scores.map((s) => s.metrics?.[Reward.RELATIVE_REWARD])

    it.effect("centered subtracts the mean; the reward and the metrics stay as the task gave them", () =>
      Effect.gen(function* () {
        const scores = yield* Reward.groupRelative({ mode: "centered" })(groupOf([1, 2, 6]))
        expect(rewardsOf(scores)).toEqual([-2, -1, 3])
        expect(scores).toEqual([
          { reward: 1, metrics: { turns: 0, relative_reward: -2 } },
          { reward: 2, metrics: { turns: 1, relative_reward: -1 } },
          { reward: 6, metrics: { turns: 2, relative_reward: 3 } }
        ])
      })
    )

    it.effect("zscore divides by the population standard deviation; equal rewards give 0", () =>
      Effect.gen(function* () {
        const scores = yield* Reward.groupRelative({ mode: "zscore" })(groupOf([1, 2, 3]))
        // mean 2, population std sqrt(2/3): z = ±1 / sqrt(2/3) = ±sqrt(3/2)
        const z = rewardsOf(scores)
        expect(z[0]).toBeCloseTo(-Math.sqrt(1.5), 10)
        expect(z[1]).toBeCloseTo(0, 10)
        expect(z[2]).toBeCloseTo(Math.sqrt(1.5), 10)
        expect(rewardsOf(yield* Reward.groupRelative({ mode: "zscore" })(groupOf([5, 5, 5])))).toEqual([0, 0, 0])
      })
    )

    it.effect("rank is the fraction of the others beaten, ties counting half", () =>
      Effect.gen(function* () {
        const scores = yield* Reward.groupRelative({ mode: "rank" })(groupOf([3, 1, 3, 2]))
        expect(rewardsOf(scores)).toEqual([2.5 / 3, 0, 2.5 / 3, 1 / 3])
        expect(rewardsOf(yield* Reward.groupRelative({ mode: "rank" })(groupOf([7])))).toEqual([0.5])
      })
    )

    it.effect("sequence chains scorers; of two relative transforms the last is trained on, the reward stays", () =>
      Effect.gen(function* () {
        const scorer = Reward.sequence(
          Reward.groupRelative({ mode: "centered" }),
          Reward.groupRelative({ mode: "rank" })
        )
        const scores = yield* scorer(groupOf([10, 20, 30]))
        expect(rewardsOf(scores)).toEqual([0, 0.5, 1])
        expect(scores.map((s) => s.reward)).toEqual([10, 20, 30])
        expect(scores.map((s) => s.metrics?.original_reward)).toEqual([undefined, undefined, undefined])
      })
    )

    it.effect("sequence passes each scorer the scores of the one before, and keeps the error type", () =>
      Effect.gen(function* () {
        const seen: Array<ReadonlyArray<number>> = []
        const double: Reward.GroupScorer<Problem, string, Broken> = (group) =>
          Effect.sync(() => {
            seen.push(group.map((item) => item.score.reward))
            return group.map((item) => ({ reward: item.score.reward * 2 }))
          })
        const failing: Reward.GroupScorer<unknown, unknown, Broken> = () => Effect.fail(new Broken({ why: "late" }))
        const scorer: Reward.GroupScorer<Problem, string, Broken> = Reward.sequence(double, double)
        expect((yield* scorer(groupOf([1, 3]))).map((s) => s.reward)).toEqual([4, 12])
        expect(seen).toEqual([
          [1, 3],
          [2, 6]
        ])
        const exit = yield* Effect.exit(Reward.sequence(double, failing)(groupOf([1])))
        expect(exit).toEqual(Exit.fail(new Broken({ why: "late" })))
      })
    )

    it.effect("sequence makes a scorer that returns the wrong number of scores a defect", () =>
      Effect.gen(function* () {
        const short: Reward.GroupScorer<unknown, unknown> = () => Effect.succeed([{ reward: 1 }])
        const exit = yield* Effect.exit(Reward.sequence(short)(groupOf([1, 2])))
        expect(Exit.isFailure(exit) && !Exit.isInterrupted(exit)).toBe(true)
        expect(String(Exit.isFailure(exit) ? exit.cause : "")).toMatch(/one score per rollout/)
      })
    )
  })
})
