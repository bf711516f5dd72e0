/**
 * The pipelined (off-policy) training loop against a scripted service with realistic latencies (minute-long
 * gathers and jobs) on the test clock: a step takes about max(gather, train) where the sequential loop takes
 * their sum; no trajectory is trained more than `maxStaleness` checkpoints after the weights that sampled it;
 * each rollout samples every turn from the checkpoint it started on, and records it; stale trajectories are
 * dropped and counted; a restarted loop trains no step twice; `stopAt` and retention keep their meaning.
 */
import * as KeyValueStore from "@effect/platform/KeyValueStore"
import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import type { Trajectory } from "../../src/api/Trajectory.js"
import * as Policy from "../../src/workflow/Policy.js"
import * as Reward from "../../src/workflow/Reward.js"
import * as Rollout from "../../src/workflow/Rollout.js"
import * as TrainingLoop from "../../src/workflow/TrainingLoop.js"
import * as ScriptedService from "../support/ScriptedService.js"

const TURNS = 4

/** How far the test clock moves at a time. */
const STEP = "10 seconds"

/** A conversation of `TURNS` turns; its value is the checkpoint each turn was answered by. */
const play = () =>
  Effect.gen(function* () {
    const convo = yield* Rollout.conversation()
    const answers: Array<string> = []
    for (let turn = 0; turn < TURNS; turn++) {
      yield* convo.user(`turn ${turn}`)
      answers.push(String((yield* convo.reply()).message.content))
    }
    return answers as ReadonlyArray<string>
  })

/** Varied rewards, so every group is trainable. */
const reward = Reward.fromFunction<number, ReadonlyArray<string>>(({ scenario, trajectory }) =>
  (scenario + (trajectory.messages_and_choices.length % 3)) % 2 === 0 ? 1 : 0
)

const memoryStore = Effect.provide(KeyValueStore.KeyValueStore, KeyValueStore.layerMemory)

interface Setup {
  /** Seconds a rollout takes (all of a step's rollouts run at once, so a gather takes as long). */
  readonly gather: number
  /** Seconds a job trains. */
  readonly train: number
  readonly steps?: number
  readonly maxStaleness?: number | undefined
  readonly options?: Partial<TrainingLoop.Options<number, ReadonlyArray<string>, unknown, Rollout.Current>>
  readonly policy?: (policy: Policy.Trainable) => Policy.Trainable
  readonly state?: KeyValueStore.KeyValueStore
  readonly service?: ScriptedService.Scripted
}

/** Runs a loop on the scripted service, driving the test clock a second at a time until it ends. */
const runLoop = (setup: Setup) =>
  Effect.gen(function* () {
    const service =
      setup.service ??
      ScriptedService.make({
        completion: () => Duration.seconds(setup.gather / TURNS),
        train: Duration.seconds(setup.train)
      })
    const state = setup.state ?? (yield* memoryStore)
    const fiber = yield* Effect.gen(function* () {
      const trainable = yield* Policy.trainable({ project: "scripted", name: "policy", base_model: "base" })
      const policy = setup.policy?.(trainable) ?? trainable
      return yield* TrainingLoop.run({
        policy,
        scenarios: Array.from({ length: 10 }, (_, i) => i),
        rollout: play,
        reward,
        groupsPerStep: 2,
        rolloutsPerGroup: 4,
        steps: setup.steps ?? 6,
        state,
        gather: { progress: false },
        follow: { onEvent: () => Effect.void },
        ...(setup.maxStaleness === undefined ? {} : { offPolicy: { maxStaleness: setup.maxStaleness } }),
        ...setup.options
      })
    }).pipe(Effect.provide(service.layer), Logger.withMinimumLogLevel(LogLevel.Warning), Effect.fork)
    return { service, fiber, state }
  })

const drive = <A, E>(fiber: Fiber.Fiber<A, E>, until?: () => boolean) =>
  Effect.gen(function* () {
    while (Option.isNone(yield* Fiber.poll(fiber)) && !(until?.() ?? false)) yield* TestClock.adjust(STEP)
  })

const finish = (setup: Setup) =>
  Effect.gen(function* () {
    const { service, fiber } = yield* runLoop(setup)
    yield* drive(fiber)
    return { service, summary: yield* Fiber.join(fiber) }
  })

const mean = (xs: ReadonlyArray<number>) => xs.reduce((a, b) => a + b, 0) / xs.length

/** Every trajectory a job trained, with the checkpoint its job trained from. */
const trained = (service: ScriptedService.Scripted) =>
  service.jobs.flatMap((job) =>
    job.body.trajectory_groups.flatMap((group) =>
      group.trajectories.map((trajectory) => ({ from: job.from, trajectory }))
    )
  )

/** The checkpoints that answered a trajectory's turns (each answer names its checkpoint). */
const answeredBy = (trajectory: Trajectory) =>
  trajectory.messages_and_choices.flatMap((entry) =>
    "message" in entry && typeof entry.message.content === "string"
      ? [Number(entry.message.content.replace("step", ""))]
      : []
  )

describe("TrainingLoop offPolicy on a scripted service (test clock)", () => {
  for (const [gather, train] of [
    [60, 45],
    [45, 60]
  ] as const) {
    it.effect(`gather ${gather} s, train ${train} s: sequential steps take the sum, pipelined ones the max`, () =>
      Effect.gen(function* () {
        const sequential = yield* finish({ gather, train })
        const pipelined = yield* finish({ gather, train, maxStaleness: 1 })
        for (const { summary, service } of [sequential, pipelined]) {
          expect(summary.finalStep).toBe(6)
          expect(service.jobs.map((job) => job.from)).toEqual([0, 1, 2, 3, 4, 5])
        }
        const seconds = (summary: TrainingLoop.Summary) => summary.steps.map((step) => step.seconds)
        for (const s of seconds(sequential.summary)) expect(s).toBeCloseTo(gather + train, 0)
        // The first step has nothing to overlap with; each one after takes the longer of the two.
        const ideal = Math.max(gather, train)
        const steady = seconds(pipelined.summary).slice(1)
        expect(seconds(pipelined.summary)[0]).toBeCloseTo(gather + train, 0)
        expect(mean(steady) / ideal).toBeLessThan(1.03)
        for (const s of steady) expect(s).toBeGreaterThanOrEqual(ideal - 1)
        // Jobs never overlap: each starts after the one before ended.
        const jobs = pipelined.service.jobs
        for (let i = 1; i < jobs.length; i++) expect(jobs[i]!.startedAt).toBeGreaterThanOrEqual(jobs[i - 1]!.endsAt)
        for (const report of pipelined.summary.steps) {
          expect(report.staleness?.bound).toBe(1)
          expect(report.staleness?.max).toBeLessThanOrEqual(1)
          expect(report.staleness?.dropped).toBe(0)
        }
        expect(sequential.summary.steps.every((step) => step.staleness === undefined)).toBe(true)
      })
    )
  }

  for (const bound of [1, 2]) {
    it.effect(
      `maxStaleness ${bound}: every trajectory's versions are the checkpoint that sampled it, within the bound`,
      () =>
        Effect.gen(function* () {
          // Gathering is fast and training slow, so gathering runs as far ahead as the bound lets it.
          const { service, summary } = yield* finish({ gather: 20, train: 60, maxStaleness: bound })
          const all = trained(service)
          expect(all).toHaveLength(6 * 8)
          let most = 0
          for (const { from, trajectory } of all) {
            const version = trajectory.initial_policy_version
            expect(typeof version).toBe("number")
            expect(trajectory.final_policy_version).toBe(version)
            // Every turn was answered by the checkpoint the trajectory records.
            expect(answeredBy(trajectory)).toEqual(Array.from({ length: TURNS }, () => version))
            expect(from - version!).toBeGreaterThanOrEqual(0)
            expect(from - version!).toBeLessThanOrEqual(bound)
            most = Math.max(most, from - version!)
          }
          expect(most).toBe(bound)
          expect(Math.max(...summary.steps.map((s) => s.staleness?.max ?? 0))).toBe(bound)
          expect(summary.steps.map((s) => s.staleness?.mean)).toEqual(
            service.jobs.map((job) =>
              mean(
                job.body.trajectory_groups.flatMap((g) =>
                  g.trajectories.map((t) => job.from - t.initial_policy_version!)
                )
              )
            )
          )
        })
    )
  }

  it.effect("the policy moves to a checkpoint as soon as it exists; rollouts running finish on theirs", () =>
    Effect.gen(function* () {
      // Four rollouts at a time, eight per step: two waves of 60 s. Step 1's first wave starts on checkpoint 0;
      // checkpoint 1 appears (a 20 s job) during it, so the second wave starts on checkpoint 1.
      const { service } = yield* finish({
        gather: 60,
        train: 20,
        steps: 3,
        maxStaleness: 1,
        options: { gather: { progress: false, concurrency: 4 } }
      })
      const step1 = trained(service).filter(({ from }) => from === 1)
      const versions = step1.map(({ trajectory }) => trajectory.initial_policy_version)
      expect(versions.filter((v) => v === 0)).toHaveLength(4)
      expect(versions.filter((v) => v === 1)).toHaveLength(4)
      for (const { trajectory } of step1) {
        expect(new Set(answeredBy(trajectory))).toEqual(new Set([trajectory.initial_policy_version]))
      }
      // Some first-wave rollout was still running when checkpoint 1 appeared, and finished on checkpoint 0.
      const checkpoint1 = service.jobs[0]!.endsAt
      expect(
        service.completions.some((c) => c.step === 0 && c.startedAt < checkpoint1 && c.endedAt > checkpoint1)
      ).toBe(true)
    })
  )

  it.effect("trajectories sampled beyond the bound are dropped and counted", () =>
    Effect.gen(function* () {
      const before = (yield* Metric.value(TrainingLoop.staleTrajectoriesDropped)).count
      // A policy whose every other rollout says it sampled from 5 checkpoints back.
      let taken = 0
      const lagging = (policy: Policy.Trainable): Policy.Trainable => ({
        ...policy,
        snapshot: Effect.map(policy.snapshot!, (held) =>
          taken++ % 2 === 0 ? held : { ...held, version: Effect.map(held.version, (v) => (v ?? 0) - 5) }
        )
      })
      const { service, summary } = yield* finish({ gather: 60, train: 45, steps: 3, maxStaleness: 1, policy: lagging })
      for (const report of summary.steps) {
        expect(report.staleness?.dropped).toBe(4)
        expect(report.train.num_trajectories).toBe(4)
      }
      for (const { from, trajectory } of trained(service)) {
        expect(from - trajectory.initial_policy_version!).toBeLessThanOrEqual(1)
      }
      expect((yield* Metric.value(TrainingLoop.staleTrajectoriesDropped)).count - before).toBe(12)
    })
  )

  it.effect("a step whose every trajectory is beyond the bound is gathered again", () =>
    Effect.gen(function* () {
      // Step 0's first eight rollouts say they sampled from 5 checkpoints back.
      let taken = 0
      const lagging = (policy: Policy.Trainable): Policy.Trainable => ({
        ...policy,
        snapshot: Effect.map(policy.snapshot!, (held) =>
          taken++ < 8 ? { ...held, version: Effect.map(held.version, (v) => (v ?? 0) - 5) } : held
        )
      })
      const { service, summary } = yield* finish({ gather: 60, train: 45, steps: 2, maxStaleness: 1, policy: lagging })
      // Step 0 dropped its 8 and gathered again, on checkpoint 0.
      expect(summary.steps.map((s) => s.staleness?.dropped)).toEqual([8, 0])
      expect(summary.steps.map((s) => s.train.num_trajectories)).toEqual([8, 8])
      expect(service.jobs).toHaveLength(2)
      const step0 = trained(service).filter(({ from }) => from === 0)
      expect(step0.map(({ trajectory }) => trajectory.initial_policy_version)).toEqual(Array(8).fill(0))
    })
  )

  it.effect("stopAt stops after the step that reaches it: nothing gathered ahead is trained", () =>
    Effect.gen(function* () {
      const { service, summary } = yield* finish({
        gather: 30,
        train: 60,
        steps: 6,
        maxStaleness: 2,
        options: { gather: { progress: false }, stopAt: { metric: "num_trajectories", value: 8 } }
      })
      expect(summary.stoppedBy).toBe("target")
      expect(summary.finalStep).toBe(1)
      expect(service.jobs).toHaveLength(1)
    })
  )

  it.effect("retention keeps the checkpoints rollouts gathering ahead sample from, then prunes as asked", () =>
    Effect.gen(function* () {
      // A rollout on a deleted checkpoint fails (and fails the gather): none does.
      const { service, summary } = yield* finish({
        gather: 60,
        train: 45,
        steps: 4,
        maxStaleness: 1,
        options: { gather: { progress: false }, retention: { keepLatest: 1 } }
      })
      expect(summary.finalStep).toBe(4)
      expect([...service.deleted].sort()).toEqual([0, 1, 2, 3])
    })
  )

  it.effect("a loop interrupted while a job trains, restarted, follows that job: no step trained twice", () =>
    Effect.gen(function* () {
      const service = ScriptedService.make({ completion: () => "15 seconds", train: "45 seconds" })
      const first = yield* runLoop({ gather: 60, train: 45, steps: 4, maxStaleness: 1, service })
      // Stop it once step 1's job is submitted (step 2 is gathering meanwhile).
      yield* drive(first.fiber, () => service.jobs.length === 2)
      yield* Fiber.interrupt(first.fiber)
      expect(service.jobs.map((job) => job.from)).toEqual([0, 1])
      const again = yield* runLoop({ gather: 60, train: 45, steps: 4, maxStaleness: 1, service, state: first.state })
      yield* drive(again.fiber)
      const summary = yield* Fiber.join(again.fiber)
      expect(summary.startStep).toBe(1)
      expect(summary.steps.map((s) => s.step)).toEqual([1, 2, 3])
      expect(service.jobs.map((job) => job.from)).toEqual([0, 1, 2, 3])
    })
  )
})
