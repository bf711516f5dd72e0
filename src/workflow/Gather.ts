/**
 * Gathering trajectory groups: M scenarios x N rollouts each, run concurrently, scored, and assembled into
 * the `TrajectoryGroup`s a training job takes.
 *
 * ```ts
 * const groups = yield* Gather.groups({
 *   policy,
 *   scenarios: questions,
 *   rolloutsPerGroup: 8,
 *   rollout: (question) => answer(question),            // agent code, using Rollout.chat
 *   reward: ({ scenario, value }) => Effect.succeed(value === scenario.answer ? 1 : 0),
 *   concurrency: 64,
 *   timeout: "2 minutes",
 *   maxExceptions: { fraction: 0.05 }
 * })
 * ```
 *
 * How it runs:
 * - Each rollout is `Rollout.run(policy, rollout(scenario, i), {metadata})` followed by its `reward`, under one
 *   time limit (`timeout`); the result is a wire `Trajectory` (the draft, the reward, and a `Scored`'s metrics
 *   merged into `metrics`).
 * - At most `concurrency` rollouts are in flight overall (a semaphore), and at most `groupConcurrency` of one
 *   group. Groups start in scenario order, a bounded number at a time (enough to keep every rollout slot busy
 *   while some groups finish their last rollouts or run their hooks), so memory stays flat for any number of
 *   scenarios and the first groups are done first.
 * - A rollout (or its reward) that fails, with a typed error, a defect or the time limit, is recorded as a
 *   `RolloutException` in its group's `exceptions` and counted. When the count goes over `maxExceptions` (a
 *   count, or a fraction of all planned rollouts; default 0: the first exception fails the gather), the gather
 *   fails with a {@link GatherError} carrying every exception so far, and everything in flight is interrupted.
 *   An interruption is not an exception: it propagates.
 * - When a group's rollouts are done, the `scoreGroup` scorer (a judge, a group-relative reward) re-scores its
 *   trajectories, then the `afterGroup` hook sees (and may replace) the group; their failures are the
 *   gather's failures.
 * - {@link stream} emits each group as it completes (completion order); {@link groups} collects them all, in
 *   scenario order.
 * - Interrupting the stream, or the effect, interrupts every rollout in flight; the clients abort their HTTP
 *   requests on interruption, so no request keeps running.
 * - Traced (when a `Tracing` layer is provided): each rollout is a call (display name from the scenario: its
 *   text, `id`, `name` or `title`, and the rollout's index; inputs the scenario; output the messages, value,
 *   reward and metrics; the exception when it failed or ran out of time) under the current call, its chat
 *   completions child calls, and the reward after `scoreGroup` is feedback of type `reward` on it; the
 *   trajectory's metadata names the call (`trace_call`, see `Tracing.TRACE_CALL_METADATA`).
 * - Progress is shown on stderr: a redrawn line on a terminal, a plain line every 10 seconds otherwise, quiet
 *   under a test runner unless asked ({@link Options.progress}).
 *
 * `scenarios` is read once, up front (the fraction limit and the progress total need the count).
 *
 * **Where rollouts run.** By default each rollout runs in this process. A {@link Executor} provided as
 * {@link CurrentExecutor} (e.g. `RolloutCluster.layer`) runs each rollout and its reward elsewhere and hands
 * back the scored draft; everything else above (scheduling, time limit, exceptions, scorer, hook, progress,
 * the rollout's traced call) stays here. {@link Options.key} names the gather for such an executor, so that
 * a driver restarted with the same key gets back the rollouts that had finished instead of running them again.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Stream from "effect/Stream"
import type { Metadata, RolloutException, Trajectory, TrajectoryGroup } from "../api/Trajectory.js"
import * as internal from "./internal/gather.js"
import type { ProgressOptions } from "./internal/progress.js"
import type { Policy } from "./Policy.js"
import type { GroupScorer, Reward, Scored } from "./Reward.js"
import type { Current, Draft } from "./Rollout.js"

/** The default number of rollouts in flight overall. */
export const DEFAULT_CONCURRENCY = 32

/** One finished rollout of a group: what the agent code returned, and its scored trajectory. */
export interface GatheredRollout<A> {
  /** The rollout's index in its group (0 to `rolloutsPerGroup - 1`). */
  readonly index: number
  /** What the agent code returned. */
  readonly value: A
  /** The trajectory, with its reward. */
  readonly trajectory: Trajectory
}

/** A finished group: its scenario, the wire group, and the rollouts that finished (those of `group.trajectories`). */
export interface Gathered<S, A> {
  /** The scenario. */
  readonly scenario: S
  /** The scenario's index in `scenarios`. */
  readonly index: number
  /** The trajectory group as the training service takes it (failed rollouts in `exceptions`). */
  readonly group: TrajectoryGroup
  /** The rollouts that finished, in index order, one per trajectory of `group.trajectories`. */
  readonly rollouts: ReadonlyArray<GatheredRollout<A>>
}

/** How many failed rollouts a gather tolerates: a count, or a fraction of all planned rollouts. */
export type MaxExceptions = number | { readonly fraction: number }

/** Where and how progress is shown (see {@link Options.progress}). */
export type Progress = ProgressOptions

/** Options of {@link stream} and {@link groups}. */
export interface Options<S, A, E, R, ER = never, RR = never, EG = never, RG = never, EH = never, RH = never> {
  /** The policy every rollout talks to. */
  readonly policy: Policy
  /** The scenarios: one group each. */
  readonly scenarios: Iterable<S>
  /** How many rollouts each group has. */
  readonly rolloutsPerGroup: number
  /** The agent code of one rollout of a scenario (`index`: the rollout's index in its group). */
  readonly rollout: (scenario: S, index: number) => Effect.Effect<A, E, R>
  /** The reward of one finished rollout. */
  readonly reward: Reward<S, A, ER, RR>
  /** Rollouts in flight overall (default {@link DEFAULT_CONCURRENCY}). */
  readonly concurrency?: number | undefined
  /** Rollouts in flight within one group (default: all of them). */
  readonly groupConcurrency?: number | undefined
  /** The time limit of one rollout and its reward; one that runs over is recorded as an exception. */
  readonly timeout?: Duration.DurationInput | undefined
  /**
   * How many failed rollouts are tolerated before the gather fails: a count, or `{fraction}` of all planned
   * rollouts (default 0: the first failure fails the gather).
   */
  readonly maxExceptions?: MaxExceptions | undefined
  /** Metadata of a scenario, recorded on each of its trajectories and on its group. */
  readonly metadata?: ((scenario: S, index: number) => Metadata) | undefined
  /** Re-scores each group's finished rollouts together (a judge, a group-relative reward). */
  readonly scoreGroup?: GroupScorer<S, A, EG, RG> | undefined
  /**
   * Runs after each group is scored, before it is emitted; it may return a replacement group (e.g. with
   * group metrics added).
   */
  // biome-ignore lint/suspicious/noConfusingVoidType: a hook that only looks at the group returns `Effect<void>`
  readonly afterGroup?: ((gathered: Gathered<S, A>) => Effect.Effect<Gathered<S, A> | void, EH, RH>) | undefined
  /**
   * Progress on stderr: `"auto"` (default: a redrawn line on a terminal, a plain line every 10 seconds
   * otherwise, nothing under a test runner), `true`, `false`, or {@link Progress} options (sink, interval).
   */
  readonly progress?: "auto" | boolean | Progress | undefined
  /**
   * A stable name of this gather (e.g. the model, the split and the step), for an executor that runs
   * rollouts elsewhere ({@link CurrentExecutor}): rollout `i` of group `g` of the gather `key` is one piece of
   * work, run once even across a restart of this process. Default: a fresh random key (nothing is resumed).
   */
  readonly key?: string | undefined
}

/** One rollout as an {@link Executor} is asked to run it. */
export interface Job<S> {
  /** The scenario. */
  readonly scenario: S
  /** The scenario's index in `scenarios` (its group). */
  readonly group: number
  /** The rollout's index in its group. */
  readonly index: number
  /** The scenario's metadata, recorded on the trajectory. */
  readonly metadata: Metadata | undefined
}

/** A rollout an {@link Executor} ran: what the agent code returned, its draft and its (normalised) score. */
export interface Executed<A> {
  /** What the agent code returned. */
  readonly value: A
  /** The recorded trajectory, without reward. */
  readonly trajectory: Draft
  /** The reward and its metrics. */
  readonly score: Scored
}

/** What an {@link Executor} is bound to for one gather. */
export interface Binding<S, A> {
  /** The gather's key ({@link Options.key}, or a fresh one). */
  readonly key: string
  /** The policy every rollout talks to. */
  readonly policy: Policy
  /** The agent code (an executor running it elsewhere finds it by identity, e.g. in a list of agents). */
  readonly rollout: (scenario: S, index: number) => Effect.Effect<A, unknown, never>
  /** The reward. */
  readonly reward: Reward<S, A, unknown, never>
}

/**
 * Runs rollouts somewhere other than this process (see "Where rollouts run" in the module). `bind` is asked
 * once per gather and returns how to run one rollout of it; a failure of that effect is recorded as the
 * rollout's exception (a {@link RolloutFailed} verbatim), an interruption propagates.
 */
export interface Executor {
  /** A short name for logs. */
  readonly name: string
  /** Binds the executor to a gather; dies when it cannot run this agent (say why). */
  readonly bind: <S, A>(binding: Binding<S, A>) => Effect.Effect<(job: Job<S>) => Effect.Effect<Executed<A>, unknown>>
  /**
   * Forgets what the executor keeps to resume the gather `key` (e.g. its stored messages and replies), once
   * nothing will gather it again; never fails (a failure is only logged). Optional.
   */
  readonly release?: ((key: string) => Effect.Effect<void>) | undefined
}

/** The executor gathers use: `undefined` (the default) runs every rollout in this process. */
export class CurrentExecutor extends Context.Reference<CurrentExecutor>()("effect-rl/Gather/CurrentExecutor", {
  defaultValue: (): Executor | undefined => undefined
}) {}

/**
 * Tells the current executor (if any) that the gather `key` is done with: a `TrainingLoop` does so for a step's
 * gathers once the step is taken, so that a cluster's storage does not keep every rollout of the run.
 */
export const release = (key: string): Effect.Effect<void> =>
  Effect.flatMap(CurrentExecutor, (executor) => executor?.release?.(key) ?? Effect.void)

/** A rollout that failed elsewhere (tag `RolloutFailed`), recorded in its group as the exception it carries. */
export class RolloutFailed extends Data.TaggedError("RolloutFailed")<{
  /** The exception as it was recorded where the rollout ran. */
  readonly exception: RolloutException
}> {
  override get message(): string {
    return `${this.exception.type}: ${this.exception.message}`
  }
}

/** Why a gather failed: `TooManyExceptions`, more failed rollouts than `maxExceptions` allows. */
export type GatherErrorReason = "TooManyExceptions"

/** A gather that failed; everything in flight was interrupted. */
export class GatherError extends Data.TaggedError("GatherError")<{
  /** Why it failed. */
  readonly reason: GatherErrorReason
  /** Every failed rollout so far, in the order they failed. */
  readonly exceptions: ReadonlyArray<RolloutException>
  /** The most failed rollouts tolerated (a fraction resolved against `planned`). */
  readonly limit: number
  /** The rollouts planned (scenarios x rollouts per group). */
  readonly planned: number
  /** The rollouts that had finished, with a trajectory or an exception. */
  readonly finished: number
}> {
  /**
   * The first failed rollout's own error leads (`Error: context too long (...)`), then the count against the
   * limit, then how to tolerate failures.
   */
  override get message(): string {
    const first = this.exceptions[0]
    const count = this.exceptions.length
    const failed = count === 1 ? "1 failed rollout" : `the first of ${count} failed rollouts`
    return (
      (first === undefined ? "" : `${first.type}: ${first.message} `) +
      `(${failed}, more than the ${this.limit} tolerated; ${this.finished} of ${this.planned} finished). ` +
      "To tolerate failed rollouts, set maxExceptions to a count or a fraction of the rollouts " +
      "(maxExceptions: { fraction: 0.05 }; in TrainingLoop.run, under gather)"
    )
  }
}

/**
 * Gathers the groups as a stream, each emitted as soon as its rollouts, scorer and hook are done
 * (completion order). See the module comment.
 */
export const stream = <S, A, E, R, ER = never, RR = never, EG = never, RG = never, EH = never, RH = never>(
  options: Options<S, A, E, R, ER, RR, EG, RG, EH, RH>
): Stream.Stream<Gathered<S, A>, GatherError | EG | EH, Exclude<R, Current> | RR | RG | RH> => internal.stream(options)

/** Gathers all the groups, in scenario order. See the module comment. */
export const groups = <S, A, E, R, ER = never, RR = never, EG = never, RG = never, EH = never, RH = never>(
  options: Options<S, A, E, R, ER, RR, EG, RG, EH, RH>
): Effect.Effect<ReadonlyArray<Gathered<S, A>>, GatherError | EG | EH, Exclude<R, Current> | RR | RG | RH> =>
  internal.groups(options)

/** The wire groups of some gathered groups (what `Trainer.train` and the log endpoint take). */
export const trajectoryGroups = <S, A>(gathered: ReadonlyArray<Gathered<S, A>>): ReadonlyArray<TrajectoryGroup> =>
  gathered.map((g) => g.group)
