/**
 * The pipelined (off-policy) loop on the real embedded backend, where training runs on its own thread while
 * the next step's rollouts decode: it learns (the reward rises as in the sequential loop's test), every step
 * trains trajectories at most one checkpoint stale, evaluation runs on the step's own checkpoint, and the jobs
 * follow one another. (Wall time is measured in `bench/loop.ts`, not asserted.)
 */
import { describe, expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { TrainingClient } from "../../src/client/TrainingClient.js"
import * as Policy from "../../src/workflow/Policy.js"
import * as Reward from "../../src/workflow/Reward.js"
import * as TrainingLoop from "../../src/workflow/TrainingLoop.js"
import { seededYesOrNo, TINY, WorkflowBackend } from "./support.js"

describe("TrainingLoop offPolicy on the embedded backend", () => {
  layer(WorkflowBackend, { timeout: 120_000, excludeTestServices: true })((it) => {
    it.effect("learns while the next step gathers during training; staleness at most 1", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "loop", name: "off-policy", base_model: TINY })
        const summary = yield* TrainingLoop.run({
          policy,
          scenarios: ["Shall we?", "Ready?", "Is it on?"],
          validation: ["Go?"],
          rollout: seededYesOrNo(),
          reward: Reward.fromFunction<string, string>(({ value }) => (value === "yes" ? 1 : 0)),
          groupsPerStep: 3,
          rolloutsPerGroup: 8,
          steps: 6,
          evalEvery: 3,
          state: false,
          retention: false,
          config: { max_negative_advantage_importance_sampling_weight: 4 },
          offPolicy: { maxStaleness: 1 },
          gather: { progress: false }
        })
        expect(summary.finalStep).toBe(6)
        expect(summary.steps.map((s) => [s.step, s.trainedStep])).toEqual([
          [0, 1],
          [1, 2],
          [2, 3],
          [3, 4],
          [4, 5],
          [5, 6]
        ])
        for (const report of summary.steps) {
          expect(report.staleness?.max).toBeLessThanOrEqual(1)
          expect(report.staleness?.dropped).toBe(0)
          expect(report.train.num_trajectories).toBe(24)
        }
        expect(summary.steps.filter((s) => s.validation !== undefined).map((s) => s.step)).toEqual([0, 3])
        expect(summary.finalValidation?.num_trajectories).toBe(1)
        const rewards = summary.steps.map((s) => s.train.reward ?? Number.NaN)
        expect((rewards[4]! + rewards[5]!) / 2, rewards.join(" ")).toBeGreaterThan((rewards[0]! + rewards[1]!) / 2)
        const client = yield* TrainingClient
        const steps = yield* Stream.runCollect(client.checkpoints(policy.record.id))
        expect([...steps].map((c) => c.step)).toEqual([0, 1, 2, 3, 4, 5, 6])
      })
    )
  })
})
