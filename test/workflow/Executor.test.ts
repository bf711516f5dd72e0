/**
 * `Gather.CurrentExecutor`, the seam `RolloutCluster` plugs into, with a test executor that runs each rollout
 * in this process and records what it was asked: a gather hands it every rollout once, keyed by the gather's
 * `key`, group and index, and records what it returns (and its failures) as it records its own; a training
 * loop keys its gathers by model, split and step, so a restarted loop asks for the same keys again, and
 * releases a step's keys once the step is taken.
 */
import { describe, expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Gather from "../../src/workflow/Gather.js"
import * as Policy from "../../src/workflow/Policy.js"
import { normalize } from "../../src/workflow/Reward.js"
import * as Rollout from "../../src/workflow/Rollout.js"
import * as TrainingLoop from "../../src/workflow/TrainingLoop.js"
import { pick, reward, TINY, WorkflowBackend } from "./support.js"

/** An executor that runs rollouts here, recording the gathers' keys, each rollout asked for and releases. */
const recording = () => {
  const keys: Array<string> = []
  const jobs: Array<string> = []
  /** Each release, with the gathers bound before it (what had been gathered when the key was let go). */
  const released: Array<{ readonly key: string; readonly boundBefore: number }> = []
  const executor: Gather.Executor = {
    name: "recording",
    release: (key) =>
      Effect.sync(() => {
        released.push({ key, boundBefore: keys.length })
      }),
    bind: <S, A>(binding: Gather.Binding<S, A>) =>
      Effect.sync(() => {
        keys.push(binding.key)
        return (job: Gather.Job<S>) =>
          Effect.gen(function* () {
            jobs.push(`${binding.key}/${job.group}/${job.index}`)
            if (job.index === 2) {
              return yield* new Gather.RolloutFailed({
                exception: { type: "Remote", message: "failed over there", traceback: "" }
              })
            }
            const finished = yield* Rollout.run(binding.policy, binding.rollout(job.scenario, job.index), {
              metadata: job.metadata
            })
            const score = normalize(yield* binding.reward({ scenario: job.scenario, ...finished }))
            return { value: finished.value, trajectory: finished.trajectory, score }
          })
      })
  }
  return { executor, keys, jobs, released }
}

describe("Gather.CurrentExecutor", () => {
  layer(WorkflowBackend, { timeout: 120_000, excludeTestServices: true })((it) => {
    it.effect("a gather hands every rollout to the executor once, under its key, and records what comes back", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "executor", name: "gather", base_model: TINY })
        const { executor, keys, jobs } = recording()
        const groups = yield* Gather.groups({
          policy,
          scenarios: ["a", "b"],
          rolloutsPerGroup: 3,
          rollout: pick,
          reward,
          key: "my-gather",
          maxExceptions: 2,
          progress: false
        }).pipe(Effect.provideService(Gather.CurrentExecutor, executor))
        expect(keys).toEqual(["my-gather"])
        expect([...jobs].sort()).toEqual([
          "my-gather/0/0",
          "my-gather/0/1",
          "my-gather/0/2",
          "my-gather/1/0",
          "my-gather/1/1",
          "my-gather/1/2"
        ])
        expect(groups.map((g) => g.rollouts.map((r) => r.index))).toEqual([
          [0, 1],
          [0, 1]
        ])
        expect(groups.map((g) => g.group.exceptions)).toEqual([
          [{ type: "Remote", message: "failed over there", traceback: "" }],
          [{ type: "Remote", message: "failed over there", traceback: "" }]
        ])
        expect(groups[0]!.rollouts[0]!.trajectory.messages_and_choices.length).toBeGreaterThan(0)
      })
    )

    it.effect("a training loop keys its gathers by model, split and step, and releases a step's once taken", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "executor", name: "loop", base_model: TINY })
        const { executor, keys, released } = recording()
        yield* TrainingLoop.run({
          policy,
          scenarios: ["a", "b", "c"],
          validation: ["a"],
          rollout: pick,
          reward,
          groupsPerStep: 2,
          rolloutsPerGroup: 2,
          steps: 2,
          evalEvery: 2,
          state: false,
          gather: { progress: false, maxExceptions: { fraction: 1 } }
        }).pipe(Effect.provideService(Gather.CurrentExecutor, executor))
        const id = policy.record.id
        expect(keys).toEqual([`${id}/val/step-0`, `${id}/train/step-0`, `${id}/train/step-1`, `${id}/val/step-2`])
        // Step 0's gathers are let go after step 0 (before step 1 gathers), step 1's after step 1, and the
        // final evaluation's after it.
        const stepKeys = (step: number, bound: number) =>
          [`${id}/train/step-${step}`, `${id}/train/step-${step}/again`, `${id}/val/step-${step}`].map((key) => ({
            key,
            boundBefore: bound
          }))
        expect(released).toEqual([...stepKeys(0, 2), ...stepKeys(1, 3), { key: `${id}/val/step-2`, boundBefore: 4 }])
      })
    )
  })
})
