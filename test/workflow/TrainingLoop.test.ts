/**
 * The training loop on the real embedded backend: steps are checkpoints, scenarios per step are fixed,
 * validation is logged and evaluated, the loop stops at a target, and a loop interrupted mid-step resumes from
 * the model's latest checkpoint without redoing or skipping a step.
 */

import { mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as HttpClient from "@effect/platform/HttpClient"
import { describe, expect, it, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Redacted from "effect/Redacted"
import * as Ref from "effect/Ref"
import * as Stream from "effect/Stream"
import * as Backend from "../../src/Backend.js"
import { TrainingClient } from "../../src/client/TrainingClient.js"
import * as Policy from "../../src/workflow/Policy.js"
import * as Reward from "../../src/workflow/Reward.js"
import * as TrainingLoop from "../../src/workflow/TrainingLoop.js"
import { API_KEY } from "../support/clients.js"
import { pick, reward, seededYesOrNo, TINY, WorkflowBackend } from "./support.js"

const SCENARIOS = ["a", "b", "c", "a", "b"]

describe("TrainingLoop.order and scenariosOf", () => {
  it("shuffles deterministically and takes groupsPerStep per step, wrapping around", () => {
    const shuffled = TrainingLoop.order(10, 3)
    expect([...shuffled].sort((x, y) => x - y)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    expect(TrainingLoop.order(10, 3)).toEqual(shuffled)
    expect(TrainingLoop.order(10, 4)).not.toEqual(shuffled)
    const items = ["p", "q", "r", "s", "t"]
    const steps = [0, 1, 2].map((step) => TrainingLoop.scenariosOf(items, step, 2, 9))
    const order = TrainingLoop.order(5, 9).map((i) => items[i])
    expect(steps).toEqual([
      [order[0], order[1]],
      [order[2], order[3]],
      [order[4], order[0]]
    ])
  })
})

describe("TrainingLoop against the embedded backend", () => {
  layer(WorkflowBackend, { timeout: 120_000, excludeTestServices: true })((it) => {
    it.effect("runs to the step budget: one checkpoint per step, train and val logged, val at the end", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "loop", name: "budget", base_model: TINY })
        const seen = yield* Ref.make<ReadonlyArray<string>>([])
        const summary = yield* TrainingLoop.run({
          policy,
          scenarios: SCENARIOS,
          validation: ["a", "b"],
          rollout: (scenario) => Effect.tap(pick(scenario), () => Ref.update(seen, (xs) => [...xs, scenario])),
          reward,
          groupsPerStep: 2,
          rolloutsPerGroup: 3,
          steps: 2,
          evalEvery: 1,
          gather: { progress: false },
          retention: false
        })
        expect(summary.startStep).toBe(0)
        expect(summary.finalStep).toBe(2)
        expect(summary.stoppedBy).toBe("budget")
        expect(summary.steps.map((s) => [s.step, s.trainedStep])).toEqual([
          [0, 1],
          [1, 2]
        ])
        for (const report of summary.steps) {
          expect(report.train.num_trajectories).toBe(6)
          expect(report.validation?.num_trajectories).toBe(2)
          // A job takes a gradient step exactly when some group's rewards differ (else nothing is trainable).
          expect(report.training.num_trajectories !== undefined).toBe((report.train.num_groups_trainable ?? 0) > 0)
        }
        expect(summary.finalValidation?.num_trajectories).toBe(2)
        expect(yield* policy.step).toBe(2)
        // Each step's scenarios are those `scenariosOf` names, each rolled out 3 times (plus validation).
        const expected = [0, 1].flatMap((step) => TrainingLoop.scenariosOf(SCENARIOS, step, 2))
        const rolled = yield* Ref.get(seen)
        for (const scenario of new Set(expected)) {
          expect(rolled.filter((s) => s === scenario).length).toBeGreaterThanOrEqual(
            3 * expected.filter((s) => s === scenario).length
          )
        }
        const client = yield* TrainingClient
        const steps = yield* Stream.runCollect(client.checkpoints(policy.record.id))
        expect([...steps].map((c) => c.step)).toEqual([0, 1, 2])
      })
    )

    it.effect(
      "informativeGroups: trains on the groups whose rewards differ, topping a step up to groupsPerStep of them",
      () =>
        Effect.gen(function* () {
          // "flat" scenarios score every rollout 1 (no signal); "live" ones score rollout i by its parity.
          const scenarios = ["flat-1", "flat-2", "flat-3", "flat-4", "live-1", "live-2"]
          const byIndex = (scenario: string, index: number) => Effect.as(pick("a"), { scenario, index })
          const parity = Reward.fromFunction<string, { readonly index: number }>(({ scenario, value }) =>
            scenario.startsWith("flat") ? 1 : value.index % 2
          )
          const rolled = yield* Ref.make(0)
          const run = (name: string, from: ReadonlyArray<string>) =>
            Effect.gen(function* () {
              const policy = yield* Policy.trainable({ project: "loop", name, base_model: TINY })
              return yield* TrainingLoop.run({
                policy,
                scenarios: from,
                rollout: (scenario, index) =>
                  Effect.zipLeft(
                    byIndex(scenario, index),
                    Ref.update(rolled, (n) => n + 1)
                  ),
                reward: parity,
                groupsPerStep: 2,
                rolloutsPerGroup: 2,
                steps: 2,
                informativeGroups: { maxGroups: 8 },
                state: false,
                retention: false,
                gather: { progress: false }
              })
            })
          const mixed = yield* run("informative", scenarios)
          for (const report of mixed.steps) {
            const groups = report.groups!
            expect(groups.gathered).toBeLessThanOrEqual(8)
            expect(groups.informative >= 2 || groups.gathered === 8, JSON.stringify(groups)).toBe(true)
            // Every group gathered is logged and counted; only the informative ones are trained on.
            expect(report.train.num_groups_submitted).toBe(groups.gathered)
            expect(report.train.num_groups_trainable).toBe(groups.informative)
            expect(report.train.num_trajectories).toBe(2 * groups.gathered)
            expect(report.training.num_groups).toBe(groups.informative)
            expect(report.training.num_groups_skipped).toBe(0)
            expect(groups.rounds > 0).toBe(groups.gathered > 2)
          }
          expect(mixed.steps.some((report) => report.groups!.gathered > 2)).toBe(true)
          // No group informative: the step gathers up to maxGroups, then its job (no gradient step) still makes a checkpoint.
          yield* Ref.set(rolled, 0)
          const flat = yield* run("flat", scenarios.slice(0, 4))
          expect(flat.steps.map((r) => [r.trainedStep, r.groups!.gathered, r.groups!.informative])).toEqual([
            [1, 8, 0],
            [2, 8, 0]
          ])
          expect(yield* Ref.get(rolled)).toBe(2 * 8 * 2)
          expect(flat.steps.every((r) => r.training.num_groups === undefined)).toBe(true)
        })
    )

    it.scoped("keeps the latest checkpoint and the best by reward by default; removes finished steps' records", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "loop", name: "retention", base_model: TINY })
        const state = mkdtempSync(join(tmpdir(), "effect-rl-retention-"))
        yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(state, { recursive: true, force: true })))
        const client = yield* TrainingClient
        const kept: Array<ReadonlyArray<number>> = []
        const summary = yield* TrainingLoop.run({
          policy,
          scenarios: SCENARIOS,
          rollout: pick,
          reward,
          groupsPerStep: 2,
          rolloutsPerGroup: 3,
          steps: 10,
          state,
          gather: { progress: false },
          onStep: () =>
            Stream.runCollect(client.checkpoints(policy.record.id)).pipe(
              Effect.flatMap((steps) => Effect.sync(() => void kept.push([...steps].map((c) => c.step)))),
              Effect.orDie
            )
        })
        expect(summary.steps).toHaveLength(10)
        // The step whose rollouts scored the best reward (the later one on a tie), and the latest checkpoint.
        const rewards = summary.steps.map((s) => s.train.reward ?? Number.NaN)
        const best = summary.steps.reduce((b, s) => ((s.train.reward ?? -1) >= (b.train.reward ?? -1) ? s : b)).step
        const steps = yield* Stream.runCollect(client.checkpoints(policy.record.id))
        expect(
          [...steps].map((c) => c.step),
          rewards.join(" ")
        ).toEqual([...new Set([best, 10])].sort((a, b) => a - b))
        // Never more than the latest, the best so far and the one just made, at any step.
        for (const after of kept) expect(after.length).toBeLessThanOrEqual(2)
        // Each step's record went once the step was taken.
        expect(readdirSync(state)).toEqual([])
      })
    )

    it.effect("stops at the target metric", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "loop", name: "target", base_model: TINY })
        const summary = yield* TrainingLoop.run({
          policy,
          scenarios: SCENARIOS,
          rollout: pick,
          reward: Reward.constant(0.5),
          groupsPerStep: 1,
          rolloutsPerGroup: 2,
          steps: 5,
          stopAt: { metric: "reward", value: 0.5 },
          gather: { progress: false }
        })
        expect(summary.stoppedBy).toBe("target")
        expect(summary.steps).toHaveLength(1)
        expect(summary.finalStep).toBe(1)
      })
    )

    it.effect("fails with the Promise agent's own error leading, and says how to tolerate failures", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "loop", name: "promise-agent", base_model: TINY })
        // An agent written with Promises (as with the `openai` SDK), run by `Effect.tryPromise(() => ...)`.
        const agent = async (scenario: string): Promise<string> => {
          if (scenario === "b") throw new Error("context too long: 4097 tokens, the limit is 4096")
          return scenario
        }
        const error = yield* Effect.flip(
          TrainingLoop.run({
            policy,
            scenarios: ["b"],
            rollout: (scenario) => Effect.tryPromise(() => agent(scenario)),
            reward,
            groupsPerStep: 1,
            rolloutsPerGroup: 2,
            steps: 1,
            state: false,
            gather: { progress: false, concurrency: 1 }
          })
        )
        expect(error._tag).toBe("GatherError")
        expect(error.message).toMatch(/^Error: context too long: 4097 tokens, the limit is 4096 \(1 failed rollout/)
        expect(error.message).toContain("set maxExceptions")
        expect(error.message).not.toContain("UnknownException")
        expect(yield* policy.step).toBe(0)
      })
    )

    it.effect("interrupted mid-step, the loop resumes at the latest checkpoint: no step redone or skipped", () =>
      Effect.gen(function* () {
        const first = yield* Policy.trainable({ project: "loop", name: "resume", base_model: TINY })
        const steps = yield* Ref.make<ReadonlyArray<number>>([])
        const options = {
          scenarios: SCENARIOS,
          rollout: pick,
          reward,
          groupsPerStep: 2,
          rolloutsPerGroup: 2,
          steps: 3,
          gather: { progress: false }
        } as const
        // Run until step 1 is trained, then hang the next gather (a rollout that never ends) and interrupt it:
        // the crash happens between checkpoints 1 and 2.
        const hang = yield* Ref.make(false)
        const fiber = yield* TrainingLoop.run({
          ...options,
          policy: first,
          rollout: (scenario: string) => Effect.flatMap(Ref.get(hang), (h) => (h ? Effect.never : pick(scenario))),
          onStep: (report) =>
            Effect.zipRight(
              Ref.update(steps, (xs) => [...xs, report.step]),
              Ref.set(hang, report.trainedStep >= 1)
            )
        }).pipe(Effect.fork)
        yield* Ref.get(hang).pipe(Effect.delay("50 millis"), Effect.repeat({ until: (hung) => hung }))
        yield* Fiber.interrupt(fiber)
        expect(yield* Ref.get(steps)).toEqual([0])

        // A new process: the same model by name, at its latest checkpoint.
        const again = yield* Policy.trainable({ project: "loop", name: "resume", base_model: TINY })
        expect(again.record.id).toBe(first.record.id)
        const summary = yield* TrainingLoop.run({
          ...options,
          policy: again,
          onStep: (report) => Ref.update(steps, (xs) => [...xs, report.step])
        })
        expect(summary.startStep).toBe(1)
        expect(yield* Ref.get(steps)).toEqual([0, 1, 2])
        expect(summary.finalStep).toBe(3)
      })
    )
  })
})

describe("TrainingLoop with a group-relative scorer", () => {
  // The bodies of the RL jobs the loop submits, read off the client's own request hook.
  const jobs: Array<{
    readonly trajectory_groups: ReadonlyArray<{ readonly trajectories: ReadonlyArray<{ readonly reward: number }> }>
  }> = []
  const recording = Backend.local({
    apiKey: Redacted.make(API_KEY),
    client: {
      transformClient: HttpClient.tapRequest((request) =>
        Effect.sync(() => {
          if (request.url.endsWith("/v1/preview/training-jobs") && request.body._tag === "Uint8Array") {
            jobs.push(JSON.parse(new TextDecoder().decode(request.body.body)))
          }
        })
      )
    }
  })

  // Seeded, so whether the reward rises is the training's doing, not one lucky draw at step 0 (unseeded, step 0
  // once drew 22 "yes" of 24 and left no room to rise).
  const seeded = seededYesOrNo()

  layer(recording, { timeout: 120_000, excludeTestServices: true })((it) => {
    it.effect("reports the reward the task gave, rising, while it trains on the centred values", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "loop", name: "relative", base_model: TINY })
        const summary = yield* TrainingLoop.run({
          policy,
          scenarios: ["Shall we?", "Ready?", "Is it on?"],
          rollout: seeded,
          reward: Reward.fromFunction<string, string>(({ value }) => (value === "yes" ? 1 : 0)),
          scoreGroup: Reward.groupRelative({ mode: "zscore" }),
          groupsPerStep: 3,
          rolloutsPerGroup: 8,
          steps: 6,
          gather: { progress: false }
        })
        const reported = summary.steps.map((s) => s.train.reward ?? Number.NaN)
        // The task's reward: a fraction of "yes" answers, never the centred 0 of every step.
        for (const r of reported) expect(r).toBeGreaterThanOrEqual(0)
        expect(reported.some((r) => r > 0.05)).toBe(true)
        expect((reported[4]! + reported[5]!) / 2).toBeGreaterThan((reported[0]! + reported[1]!) / 2)
        // What was trained on: each group's z-scores (mean 0; 0 everywhere in a group of equal rewards).
        expect(jobs).toHaveLength(6)
        for (const job of jobs) {
          for (const group of job.trajectory_groups) {
            const rewards = group.trajectories.map((t) => t.reward)
            expect(Math.abs(rewards.reduce((a, b) => a + b, 0) / rewards.length)).toBeLessThan(1e-9)
          }
        }
        expect(summary.steps.every((s) => Math.abs(s.train.relative_reward ?? Number.NaN) < 1e-9)).toBe(true)
      })
    )
  })
})
