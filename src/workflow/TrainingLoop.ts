/**
 * The training loop: over a dataset of scenarios, step after step, gather groups of rollouts with the
 * current policy, log them, train on them, and evaluate on a validation split every few steps, until a
 * step budget or a target metric is reached.
 *
 * **Steps are checkpoints.** The loop's step is the policy's checkpoint step: step `k` gathers with the
 * weights of checkpoint `k` and its training job makes checkpoint `k + 1`. The scenarios of step `k` are a
 * fixed function of `k` (the dataset shuffled once with `seed`, then taken `groupsPerStep` at a time, wrapping
 * around), so a loop that is **resumed** after a crash starts from the model's latest checkpoint and carries
 * on with the scenarios that step would have had: no step is redone or skipped. (A step whose job had
 * finished before the crash is done.) **No step is trained twice:** the loop records the job it submits for
 * each step (`state`: by default files under `.effect-rl/submissions` in the working directory; any
 * `KeyValueStore`; see `Submissions`), so a loop restarted while its job still trains does not gather the
 * step again: it follows that job to its end (the step's report carries the training metrics recorded with
 * it) and carries on. Where the record says a job may exist but not which (a crash between asking for it and
 * the answer, or an answer lost), the step is asked for again under the same idempotency key on a backend
 * that honours keys, and elsewhere the loop stops with `TrainerError` `Ambiguous` rather than risk a second
 * job (see `Trainer`).
 *
 * **Evaluation.** With `validation` scenarios and `evalEvery: k`, the policy is evaluated before training at
 * every step divisible by `k` and once more at the end: `validationRollouts` rollouts per scenario, logged
 * under `val`. Training groups are logged under `train`. The metrics of both are computed here
 * ({@link Metrics.compute}), so the loop reports the same numbers on any backend.
 *
 * **Stopping.** At `steps` (the budget: the checkpoint step to reach), or when `stopAt`'s metric reaches its
 * value (on the validation metrics when they are computed that step, else the training ones). Interrupting
 * the loop (Ctrl-C under `NodeRuntime.runMain`) interrupts every rollout in flight; a training job already
 * submitted finishes on the service and the next run resumes after it.
 *
 * **Retention.** After each step the loop deletes the checkpoints it no longer needs: by default
 * ({@link DEFAULT_RETENTION}) it keeps the latest and the one whose rollouts scored the best `reward` in this run
 * (the validation reward when it evaluates, else the training groups'), and none from before the step it
 * started at; `retention` says otherwise (see {@link Retention} and `Trainer.prune`), `false` keeps them all.
 * The record of each step's job (`state`) is removed once the step is taken.
 *
 * **Rollouts elsewhere.** With `RolloutCluster.layer` provided (and the `rollout` and `reward` of a
 * `RolloutAgent`), each rollout runs on a runner process of a cluster; the loop is otherwise the same. Its
 * gathers are keyed by model, split and step (`Gather.Options.key`), so a loop restarted mid-gather gets back
 * the rollouts that had finished instead of running them again.
 *
 * **Tracing.** With a `Tracing` layer provided, each step is a call (`step <n>`) whose descendants are its
 * rollouts (and its evaluation), with the step's report as output; see `Tracing`.
 *
 * **Informative groups.** A group whose rewards are all equal has zero advantage everywhere: it carries no signal
 * and the trainer skips it. With `informativeGroups: true` (or `{ maxGroups }`), a step whose own `groupsPerStep`
 * groups hold fewer than `groupsPerStep` informative ones (rewards that differ, as trained: a `relative_reward`
 * where there is one) gathers more, in rounds, from the dataset shuffled with a seed of its own per round, until
 * `groupsPerStep` are informative or `maxGroups` (default 4 x `groupsPerStep`) are gathered; each round asks for
 * the groups still missing divided by the share of informative groups so far. All the groups gathered are logged
 * and counted in the step's `train` metrics; only the informative ones are sent to the trainer (all of them when
 * none is, so the step still makes its checkpoint); {@link StepReport.groups} says how many. It works the same on
 * any backend and in both modes below (a top-up is part of the step's gathering). Off by default
 * ({@link DEFAULT_INFORMATIVE_GROUPS}). Measured (`npm run bench:rl-holds`, the shop agent of issue 37, 6 groups x
 * 8 rollouts on `effect-rl/base-2k`): a run whose policy answered each shop all right or all wrong (67-100% of its
 * groups flat from step 2 on, right answers 0.37 over the last three steps) learned with it (0.81); another went
 * from 0.79 to 0.89. Steps still swing with it (see the bench's figures): it is not enough alone.
 *
 * **Off-policy (pipelined) steps.** By default a step gathers, then trains, then the next one gathers: the
 * rollouts wait for the trainer and the trainer for the rollouts, so a step takes gather + train. With
 * `offPolicy: { maxStaleness: 1 }`, step `k + 1` gathers on checkpoint `k` while step `k`'s job trains
 * checkpoint `k` into `k + 1`, so a step takes about max(gather, train). The policy moves to each new
 * checkpoint as soon as its job ends: rollouts that start after sample from it, rollouts already running finish
 * on the checkpoint they started on (`Rollout.run` holds a trainable policy's version per rollout), and each
 * trajectory records that version (`initial_policy_version` / `final_policy_version`). Gathering runs at most
 * `maxStaleness` checkpoints ahead (step `k` starts gathering once checkpoint `k - maxStaleness` exists), and a
 * trajectory sampled more than `maxStaleness` checkpoints before the weights its job trains is dropped (counted
 * in the report's `staleness.dropped` and the metric {@link staleTrajectoriesDropped}; a step left with none is
 * gathered again). Jobs still run one at a time, in step order, each recorded in `state` as above; evaluation
 * at step `k` runs on checkpoint `k` before its job is submitted; `stopAt` is checked after each job, and
 * whatever was gathered ahead is then dropped (interrupted); retention keeps at least the `maxStaleness + 1`
 * latest checkpoints while the loop runs (rollouts ahead still sample from them) and prunes as asked at the
 * end; each step's traced call spans its gathering and its training. A step's `seconds` is then its share of
 * the wall time (from the end of the step before).
 *
 * The importance-sampling keys of `config` (`experimental_config`) are what make stale trajectories safe to
 * train on: the ratio `rho = exp(l_new - l_old)` compares the weights being trained with the logprobs the
 * trajectory recorded at sampling (the embedded trainer uses exactly those), so one checkpoint of staleness
 * shows up in `rho` and is corrected. For a pipelined loop:
 * - leave `precalculate_logprobs` off: it recomputes `l_old` with the current weights, so `rho` starts at 1
 *   and the staleness is not corrected (unless with `truncated_importance_sampling`, below);
 * - keep the ratio bounded: the clip (`epsilon` / `epsilon_high`; CISPO's default upper bound of 5 is loose,
 *   `epsilon_high: 1` to 2 suits stale data), `max_negative_advantage_importance_sampling_weight` (e.g. 2 to
 *   5: `rho <- min(rho, M)`), or `mask_prob_ratio: true` (tokens whose ratio leaves the clip bounds are not
 *   trained);
 * - `importance_sampling_level: "sequence"` (or `"geometric_average"`) for long, multi-turn trajectories, whose
 *   per-token ratios are noisy; `"token"` (the default) for short ones;
 * - or the decoupled form: `precalculate_logprobs: true` with `truncated_importance_sampling: U` (e.g. 2): the
 *   clip acts around the current weights and each token is weighted by `min(exp(l_current - l_sampled), U)`.
 * `maxStaleness` 1 is the usual choice: it already hides the shorter of gathering and training.
 *
 * ```ts
 * const summary = yield* TrainingLoop.run({
 *   policy, scenarios, rollout: play, reward: Reward.fromFunction(({ value }) => value),
 *   groupsPerStep: 4, rolloutsPerGroup: 8, steps: 10,
 *   offPolicy: { maxStaleness: 1 },                       // optional: gather the next step while this one trains
 *   config: { max_negative_advantage_importance_sampling_weight: 4 }
 * })
 * ```
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import type { ExperimentalConfig } from "../api/TrainingJob.js"
import type { TrajectoryGroup } from "../api/Trajectory.js"
import type { ApiError } from "../client/ApiError.js"
import type { TrainingClient } from "../client/TrainingClient.js"
import * as Gather from "./Gather.js"
import * as Pipeline from "./internal/pipeline.js"
import { toJson } from "./internal/tracing.js"
import * as Metrics from "./Metrics.js"
import type { Trainable } from "./Policy.js"
import type { GroupScorer, Reward } from "./Reward.js"
import type { Current } from "./Rollout.js"
import * as Submissions from "./Submissions.js"
import * as Tracing from "./Tracing.js"
import * as Trainer from "./Trainer.js"

/** Options of {@link run}. */
export interface Options<S, A, E, R, ER = never, RR = never, EG = never, RG = never> {
  /** The trainable policy (its latest checkpoint is where the loop starts or resumes). */
  readonly policy: Trainable
  /** The training scenarios (one group each per step). */
  readonly scenarios: ReadonlyArray<S>
  /** The validation scenarios (see `evalEvery`). */
  readonly validation?: ReadonlyArray<S> | undefined
  /** The agent code of one rollout. */
  readonly rollout: (scenario: S, index: number) => Effect.Effect<A, E, R>
  /** The reward of one finished rollout. */
  readonly reward: Reward<S, A, ER, RR>
  /** Re-scores each group together (a judge, group-relative scoring). */
  readonly scoreGroup?: GroupScorer<S, A, EG, RG> | undefined
  /** Groups (scenarios) per training step. */
  readonly groupsPerStep: number
  /** Rollouts per group. */
  readonly rolloutsPerGroup: number
  /** The step budget: the loop ends once the policy's checkpoint step reaches it. */
  readonly steps: number
  /** Evaluate on `validation` every this many steps (and at the end); default: never. */
  readonly evalEvery?: number | undefined
  /** Rollouts per validation scenario (default 1). */
  readonly validationRollouts?: number | undefined
  /** Stop once a metric reaches a value (`direction` `max`: at or above it, the default; `min`: at or below). */
  readonly stopAt?:
    | { readonly metric: string; readonly value: number; readonly direction?: "max" | "min" | undefined }
    | undefined
  /** The `experimental_config` of every training job (e.g. `learning_rate`). */
  readonly config?: ExperimentalConfig | undefined
  /** The order of the scenarios is shuffled once with this seed (default 0); the same seed, the same steps. */
  readonly seed?: number | undefined
  /** Gathering: rollouts in flight, per-rollout time limit, tolerated failures, progress. */
  readonly gather?:
    | {
        readonly concurrency?: number | undefined
        readonly groupConcurrency?: number | undefined
        readonly timeout?: Duration.DurationInput | undefined
        readonly maxExceptions?: Gather.MaxExceptions | undefined
        readonly progress?: Gather.Options<S, A, E, R>["progress"]
      }
    | undefined
  /**
   * Checkpoint retention after each step (see "Retention" in the module): by default
   * {@link DEFAULT_RETENTION}, the latest checkpoint and the one whose rollouts scored the best reward; `false`
   * keeps every checkpoint.
   */
  readonly retention?: Retention | false | undefined
  /** Following each job (long poll, poll interval, per-event callback). */
  readonly follow?: Trainer.FollowOptions | undefined
  /**
   * Where the job submitted for each step is recorded (see the module and `Submissions`): a directory (default
   * `Submissions.DEFAULT_DIRECTORY`, `.effect-rl/submissions` under the working directory), any
   * `KeyValueStore`, or `false` to keep no record (then a restart may submit a step again on a backend that
   * does not honour idempotency keys).
   */
  readonly state?: Submissions.Location | false | undefined
  /** Called after each step with its report. */
  readonly onStep?: ((report: StepReport) => Effect.Effect<void>) | undefined
  /**
   * Pipelined, off-policy steps (see "Off-policy" in the module): the next steps gather while the current
   * one's job trains, on weights at most `maxStaleness` checkpoints behind those their job trains. Default:
   * none, each step gathers on the weights it trains (on-policy, sequential).
   */
  readonly offPolicy?: OffPolicy | undefined
  /**
   * Train on informative groups only, and top a step up with more gathered ones (see "Informative groups" in
   * the module): `true` for the defaults of {@link InformativeGroups}, or its options; `false` trains on the
   * step's groups as gathered. Default: {@link DEFAULT_INFORMATIVE_GROUPS}.
   */
  readonly informativeGroups?: boolean | InformativeGroups | undefined
}

/** The informative-groups mode of {@link run} (see "Informative groups" in the module). */
export interface InformativeGroups {
  /**
   * The most groups gathered for one step, its own `groupsPerStep` included (default 4 x `groupsPerStep`): a
   * step that has not found `groupsPerStep` informative groups by then trains on those it has.
   */
  readonly maxGroups?: number | undefined
}

/**
 * Checkpoint retention of {@link run}: what `Trainer.prune` keeps after each step (the latest `keepLatest`, the
 * best by a checkpoint's own `metrics`, ...), and the checkpoint whose rollouts scored best in this run.
 */
export interface Retention extends Trainer.PruneOptions {
  /**
   * Also keep the checkpoint whose rollouts scored best in this run by this metric of the steps' metrics: the
   * validation metrics when the loop evaluates (`validation` and `evalEvery`), else the training groups'
   * (direction `max` by default; the later step on a tie). With it, a run deletes no checkpoint from before
   * the step it started at (it does not know how those scored).
   */
  readonly bestRollouts?: { readonly metric: string; readonly direction?: "max" | "min" | undefined } | undefined
}

/**
 * The loop's retention unless told otherwise: the latest checkpoint and the one whose rollouts scored the best
 * `reward` (as the reference client's users keep with `delete_checkpoints`). A 10-step `train minimal` run
 * keeps 2 checkpoints of 11, its data directory 4.3 MB instead of 13.8 MB.
 */
export const DEFAULT_RETENTION: Retention = { keepLatest: 1, bestRollouts: { metric: "reward" } }

/**
 * Whether {@link run} trains on informative groups only, topping steps up, when `informativeGroups` is not given
 * (see "Informative groups" in the module).
 */
export const DEFAULT_INFORMATIVE_GROUPS: boolean = false

/** How many groups a step gathered and trained on (with `informativeGroups`). */
export interface GroupsGathered {
  /** The groups gathered: the step's own, then the top-ups. */
  readonly gathered: number
  /** Those whose rewards differ: the ones trained on. */
  readonly informative: number
  /** The rounds of top-ups. */
  readonly rounds: number
}

/** The pipelined mode of {@link run}. */
export interface OffPolicy {
  /**
   * The most checkpoints between the weights that sampled a trajectory and the weights its job trains: an
   * integer, 1 or more (1: step `k + 1` gathers on checkpoint `k` while step `k`'s job makes checkpoint
   * `k + 1`); 0 is the sequential loop.
   */
  readonly maxStaleness: number
}

/** How far behind the weights its job trained a step's trajectories were sampled (off-policy loops). */
export interface Staleness {
  /** The bound, `offPolicy.maxStaleness`. */
  readonly bound: number
  /** The most checkpoints between a trained trajectory's sampling weights and the weights trained. */
  readonly max: number
  /** The mean of that over the trajectories trained. */
  readonly mean: number
  /** Trajectories dropped for being sampled more than `bound` checkpoints back. */
  readonly dropped: number
}

/** What one step did. */
export interface StepReport {
  /** The checkpoint step the rollouts sampled from. */
  readonly step: number
  /** The checkpoint step the training job made. */
  readonly trainedStep: number
  /** The metrics of the training groups (see `Metrics.compute`). */
  readonly train: Metrics.Metrics
  /** The training job's metrics, averaged over its gradient steps. */
  readonly training: Record<string, number>
  /** The validation metrics, when the policy was evaluated at this step. */
  readonly validation?: Metrics.Metrics | undefined
  /**
   * Wall time of the step, in seconds; in an off-policy loop, from the end of the step before (or the start)
   * to the end of this one, its share of the loop's wall time (its gathering began earlier).
   */
  readonly seconds: number
  /** With `offPolicy`: how stale the trained trajectories were, and how many were dropped. */
  readonly staleness?: Staleness | undefined
  /** With `informativeGroups`: the groups gathered, and the informative ones trained on. */
  readonly groups?: GroupsGathered | undefined
}

/** Why the loop ended. */
export type StopReason = "budget" | "target"

/** What the loop did. */
export interface Summary {
  /** The checkpoint step the loop started (or resumed) from. */
  readonly startStep: number
  /** The checkpoint step it ended at. */
  readonly finalStep: number
  /** A report per step run. */
  readonly steps: ReadonlyArray<StepReport>
  /** The validation metrics at the end, when there is a validation split and `evalEvery`. */
  readonly finalValidation?: Metrics.Metrics | undefined
  /** Why it ended. */
  readonly stoppedBy: StopReason
}

/** A deterministic shuffle (Fisher–Yates over a 32-bit LCG seeded with `seed`) of the indices `0..n-1`. */
export const order = (n: number, seed: number): ReadonlyArray<number> => {
  const out = Array.from({ length: n }, (_, i) => i)
  let state = (seed ^ 0x9e3779b9) >>> 0
  for (let i = n - 1; i > 0; i--) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0
    const j = state % (i + 1)
    const t = out[i]!
    out[i] = out[j]!
    out[j] = t
  }
  return out
}

/** The scenarios of step `step`: `groupsPerStep` of the shuffled dataset, wrapping around. */
export const scenariosOf = <S>(
  scenarios: ReadonlyArray<S>,
  step: number,
  groupsPerStep: number,
  seed = 0
): ReadonlyArray<S> => {
  if (scenarios.length === 0) return []
  const shuffled = order(scenarios.length, seed)
  return Array.from(
    { length: groupsPerStep },
    (_, j) => scenarios[shuffled[(step * groupsPerStep + j) % scenarios.length]!]!
  )
}

const reached = (metrics: Metrics.Metrics, stopAt: NonNullable<Options<never, never, never, never>["stopAt"]>) => {
  const value = metrics[stopAt.metric]
  if (value === undefined) return false
  return stopAt.direction === "min" ? value <= stopAt.value : value >= stopAt.value
}

/** The fewest checkpoints between the weights that sampled a trajectory and checkpoint `step`, if recorded. */
const stalenessOf = (step: number, trajectory: TrajectoryGroup["trajectories"][number]): number | undefined => {
  const versions = [trajectory.initial_policy_version, trajectory.final_policy_version].filter(
    (v): v is number => typeof v === "number"
  )
  return versions.length === 0 ? undefined : step - Math.min(...versions)
}

/**
 * The groups of step `step` without the trajectories sampled more than `bound` checkpoints before it (a group
 * left without any goes), and how stale the rest are. A trajectory that records no version is kept.
 */
export const dropStale = (
  step: number,
  bound: number,
  groups: ReadonlyArray<TrajectoryGroup>
): { readonly groups: ReadonlyArray<TrajectoryGroup>; readonly staleness: Staleness } => {
  let dropped = 0
  let sum = 0
  let counted = 0
  let max = 0
  const kept = groups.flatMap((group) => {
    const trajectories = group.trajectories.filter((trajectory) => {
      const staleness = stalenessOf(step, trajectory)
      if (staleness === undefined) return true
      if (staleness > bound) {
        dropped++
        return false
      }
      sum += staleness
      counted++
      max = Math.max(max, staleness)
      return true
    })
    if (trajectories.length === group.trajectories.length) return [group]
    return trajectories.length === 0 ? [] : [{ ...group, trajectories }]
  })
  return { groups: kept, staleness: { bound, max, mean: counted === 0 ? 0 : sum / counted, dropped } }
}

/** Trajectories `TrainingLoop.run` dropped for being sampled too many checkpoints back (`offPolicy`). */
export const staleTrajectoriesDropped = Metric.counter("effect_rl_stale_trajectories_dropped", {
  description: "trajectories dropped by the off-policy training loop for exceeding offPolicy.maxStaleness",
  incremental: true
})

/**
 * Runs the loop (see the module comment): from the policy's current step to `steps`, or until `stopAt`;
 * with `offPolicy`, the next steps gather while the current one trains.
 */
export const run = <S, A, E, R, ER = never, RR = never, EG = never, RG = never>(
  options: Options<S, A, E, R, ER, RR, EG, RG>
): Effect.Effect<
  Summary,
  Gather.GatherError | EG | ApiError | Trainer.TrainingFailed | Trainer.TrainerError,
  Exclude<R, Current> | RR | RG | TrainingClient
> =>
  Effect.gen(function* () {
    const { policy } = options
    const seed = options.seed ?? 0
    const evalEvery = options.evalEvery ?? 0
    const state = options.state === false ? undefined : (options.state ?? Submissions.DEFAULT_DIRECTORY)
    const validation = options.validation ?? []
    const evaluates = evalEvery > 0 && validation.length > 0
    const bound = options.offPolicy?.maxStaleness ?? 0
    if (!(Number.isInteger(bound) && bound >= 0)) {
      return yield* Effect.dieMessage(`offPolicy.maxStaleness must be an integer >= 0, got ${bound}`)
    }

    const gatherOptions = {
      policy,
      rollout: options.rollout,
      reward: options.reward,
      ...(options.scoreGroup === undefined ? {} : { scoreGroup: options.scoreGroup }),
      ...options.gather
    }

    /** The key of a step's gather of a split (see `Gather.Options.key`). */
    const gatherKey = (split: "train" | "val", step: number) => `${policy.record.id}/${split}/step-${step}`
    const topUp = informativeOf(options.informativeGroups, options.groupsPerStep)
    /** The keys of the top-up gathers of each step not yet taken. */
    const topUpKeys = new Map<number, Array<string>>()
    /** Releases a step's gathers from the executor once the step is taken (nothing gathers them again). */
    const releaseStep = (step: number) =>
      Effect.suspend(() => {
        const more = topUpKeys.get(step) ?? []
        topUpKeys.delete(step)
        return Effect.forEach(
          [gatherKey("train", step), `${gatherKey("train", step)}/again`, gatherKey("val", step), ...more],
          Gather.release,
          { discard: true }
        )
      })

    const evaluate = Tracing.call(
      () => ({
        op: Tracing.EVALUATE_OP,
        displayName: "evaluate",
        inputs: { model: policy.name, scenarios: validation.length, rollouts: options.validationRollouts ?? 1 },
        output: (metrics: Metrics.Metrics) => ({ ...metrics })
      }),
      Effect.gen(function* () {
        const gathered = yield* Gather.groups({
          ...gatherOptions,
          scenarios: validation,
          rolloutsPerGroup: options.validationRollouts ?? 1,
          key: gatherKey("val", yield* policy.step)
        })
        const groups = Gather.trajectoryGroups(gathered)
        yield* Trainer.log(policy, groups, "val")
        return Metrics.compute(groups)
      })
    ).pipe(Effect.withSpan("TrainingLoop.evaluate"))

    /** The validation metrics of the policy as it is now, when evaluation is due at `step`. */
    const validationAt = (step: number) =>
      evaluates && step % evalEvery === 0 ? evaluate : Effect.succeed<Metrics.Metrics | undefined>(undefined)

    /**
     * The training groups of a step, gathered with the policy as it is (and as it moves on). The gather's key
     * names the model and step (and a gathering again), so rollouts run elsewhere are not run twice across a
     * restart of the loop (see `Gather.Options.key`).
     */
    const gatherRound = (step: number, again: boolean, round: number, count: number) => {
      const key = `${gatherKey("train", step)}${again ? "/again" : ""}${round === 0 ? "" : `/more-${round}-${count}`}`
      if (round > 0) topUpKeys.set(step, [...(topUpKeys.get(step) ?? []), key])
      return Effect.map(
        Gather.groups({
          ...gatherOptions,
          scenarios:
            round === 0 ? scenariosOf(options.scenarios, step, count, seed) : topUpScenarios(step, round, count),
          rolloutsPerGroup: options.rolloutsPerGroup,
          metadata: (_, index) => (round === 0 ? { step, group: index } : { step, group: index, round }),
          key
        }),
        Gather.trajectoryGroups
      )
    }
    /** The scenarios of a step's top-up round: the dataset shuffled with a seed of its own per round. */
    const topUpScenarios = (step: number, round: number, count: number) =>
      scenariosOf(options.scenarios, step, count, (seed + Math.imul(round, 0x9e3779b1)) | 0)
    /**
     * The step's groups, then with `informativeGroups` more rounds of other scenarios until `groupsPerStep` of
     * them are informative or `maxGroups` are gathered; each round asks for the groups still missing divided by
     * the share of informative ones so far (at least 1 in `groupsPerStep`).
     */
    const gatherStep = (step: number, again = false) =>
      Effect.gen(function* () {
        const groups = [...(yield* gatherRound(step, again, 0, options.groupsPerStep))]
        if (topUp === undefined) return groups
        let useful = groups.filter(Trainer.informative).length
        for (let round = 1; useful < options.groupsPerStep && groups.length < topUp.maxGroups; round++) {
          const rate = Math.max(useful / groups.length, 1 / options.groupsPerStep)
          const count = Math.min(topUp.maxGroups - groups.length, Math.ceil((options.groupsPerStep - useful) / rate))
          const more = yield* gatherRound(step, again, round, count)
          groups.push(...more)
          useful += more.filter(Trainer.informative).length
        }
        return groups
      })

    const retention = options.retention === false ? undefined : (options.retention ?? DEFAULT_RETENTION)
    /** The step whose rollouts scored best so far, by `retention.bestRollouts` (validation metrics if evaluated). */
    let best: { readonly step: number; readonly value: number } | undefined
    const score = (step: number, train: Metrics.Metrics, validationMetrics: Metrics.Metrics | undefined) => {
      const by = retention?.bestRollouts
      if (by === undefined) return
      const value = (evaluates ? validationMetrics : train)?.[by.metric]
      if (value === undefined || !Number.isFinite(value)) return
      const better = best === undefined || (by.direction === "min" ? value <= best.value : value >= best.value)
      if (better) best = { step, value }
    }
    /** Retention as asked for, with the best-scoring step kept (and nothing older than this run touched). */
    const retentionNow = (keepLatest: number | undefined): Trainer.PruneOptions | undefined =>
      retention === undefined
        ? undefined
        : {
            ...retention,
            ...(keepLatest === undefined ? {} : { keepLatest }),
            ...(retention.bestRollouts === undefined
              ? {}
              : { keep: [...(retention.keep ?? []), ...(best === undefined ? [] : [best.step])], since: startStep })
          }
    // While gathering runs ahead, rollouts in flight sample from the last `bound` checkpoints: keep them.
    const retentionDuring = () =>
      retentionNow(bound === 0 ? undefined : Math.max(retention?.keepLatest ?? 1, bound + 1))
    const prune = (options: Trainer.PruneOptions | undefined) =>
      options === undefined ? Effect.void : Effect.asVoid(Trainer.prune(policy, options))

    type Report = Omit<StepReport, "seconds">
    const withValidation = (validationMetrics: Metrics.Metrics | undefined) =>
      validationMetrics === undefined ? {} : { validation: validationMetrics }

    /** A job an earlier run submitted for this step, followed to its end instead of gathering it again. */
    const resumed = (step: number, validationMetrics: Metrics.Metrics | undefined) =>
      Effect.gen(function* () {
        if (state === undefined) return Option.none<Report>()
        const found = yield* Trainer.resume(policy, { ...options.follow, state })
        if (Option.isNone(found)) return Option.none<Report>()
        score(step, found.value.submission.metrics ?? {}, validationMetrics)
        yield* prune(retentionDuring())
        return Option.some<Report>({
          step,
          trainedStep: found.value.step,
          train: found.value.submission.metrics ?? {},
          training: found.value.metrics,
          ...withValidation(validationMetrics)
        })
      })

    /** Logs a step's groups, trains on them and prunes. */
    const trainOn = (
      step: number,
      groups: ReadonlyArray<TrajectoryGroup>,
      validationMetrics: Metrics.Metrics | undefined,
      staleness: Staleness | undefined,
      submitted?: Effect.Effect<void>
    ) =>
      Effect.gen(function* () {
        const train = Metrics.compute(groups)
        yield* Trainer.log(policy, groups, "train")
        // With `informativeGroups`, only the groups that carry a signal are sent (all of them when none does: the
        // job still makes the step's checkpoint).
        const useful = topUp === undefined ? groups : groups.filter(Trainer.informative)
        const trained = useful.length > 0 ? useful : groups
        const gathered =
          topUp === undefined
            ? undefined
            : {
                gathered: groups.length,
                informative: useful.length,
                rounds: new Set(groups.map((g) => g.metadata?.round ?? 0)).size - 1
              }
        const result = yield* Trainer.train(policy, trained, {
          ...options.follow,
          ...(state === undefined ? {} : { state }),
          ...(options.config === undefined ? {} : { config: options.config }),
          ...(submitted === undefined ? {} : { onSubmitted: () => submitted })
        })
        score(step, train, validationMetrics)
        yield* prune(retentionDuring())
        return {
          step,
          trainedStep: result.step,
          train,
          training: result.metrics,
          ...withValidation(validationMetrics),
          ...(staleness === undefined ? {} : { staleness }),
          ...(gathered === undefined ? {} : { groups: gathered })
        } satisfies Report
      })

    /** A step as a traced call (when a `Tracing` layer is provided) over all of it. */
    const traced = <E2, R2>(step: number, body: Effect.Effect<StepReport, E2, R2>) =>
      Tracing.call(
        () => ({
          op: Tracing.STEP_OP,
          displayName: `step ${step}`,
          inputs: { step, model: policy.name, groups: options.groupsPerStep, rollouts: options.rolloutsPerGroup },
          output: (report: StepReport) => toJson(report)
        }),
        body
      )

    /** One step of the sequential loop: evaluate (when due), gather, log, train, prune. */
    const runStep = (step: number) =>
      traced(
        step,
        Effect.gen(function* () {
          const started = yield* Clock.currentTimeMillis
          const validationMetrics = yield* validationAt(step)
          const seconds = Effect.map(Clock.currentTimeMillis, (now) => (now - started) / 1000)
          const earlier = yield* resumed(step, validationMetrics)
          if (Option.isSome(earlier)) return { ...earlier.value, seconds: yield* seconds } satisfies StepReport
          const groups = yield* gatherStep(step)
          const report = yield* trainOn(step, groups, validationMetrics, undefined)
          return { ...report, seconds: yield* seconds } satisfies StepReport
        })
      )

    const startStep = yield* policy.step
    const reports: Array<StepReport> = []
    let step = startStep
    let stoppedBy: StopReason = "budget"
    let lastValidation: { readonly step: number; readonly metrics: Metrics.Metrics } | undefined
    yield* Effect.logInfo(
      `training loop: from step ${startStep} to ${options.steps}` +
        (bound === 0 ? "" : `, gathering up to ${bound} checkpoint(s) ahead of training`)
    )

    /**
     * Removes the record of the job submitted for a step once the step is taken: its job ended and the policy
     * is past it, so no restart looks it up again (a restart resumes at the model's latest checkpoint).
     */
    const forgetSubmission = (at: number) =>
      state === undefined
        ? Effect.void
        : Submissions.remove(state, policy.record.id, at).pipe(
            Effect.catchAll((error) =>
              Effect.logWarning(`step ${at}: its submission record could not be removed: ${error.message}`)
            )
          )

    /** Takes a step's report: `true` to go on. */
    const take = (at: number, report: StepReport) =>
      Effect.gen(function* () {
        const { train, validation: validationMetrics } = report
        if (validationMetrics !== undefined) lastValidation = { step: at, metrics: validationMetrics }
        reports.push(report)
        yield* releaseStep(at)
        yield* forgetSubmission(at)
        const stale = report.staleness
        yield* Effect.logInfo(
          `step ${at} -> ${report.trainedStep}: reward ${train.reward?.toFixed(3) ?? "-"}` +
            (validationMetrics?.reward === undefined ? "" : `, val reward ${validationMetrics.reward.toFixed(3)}`) +
            (stale === undefined
              ? ""
              : `, staleness ${stale.mean.toFixed(2)} (max ${stale.max}${stale.dropped > 0 ? `, ${stale.dropped} dropped` : ""})`) +
            ` (${report.seconds.toFixed(1)} s)`
        )
        if (options.onStep !== undefined) yield* options.onStep(report)
        // A backend numbering checkpoints its own way still moves the loop on.
        step = Math.max(report.trainedStep, at + 1)
        if (options.stopAt !== undefined && reached(validationMetrics ?? train, options.stopAt)) {
          stoppedBy = "target"
          return false
        }
        return true
      })

    if (bound === 0) {
      while (step < options.steps) {
        const at = step
        if (!(yield* take(at, yield* runStep(at)))) break
      }
    } else {
      // Off-policy: a step's seconds run from the end of the one before (the loop's wall time per step).
      let lastEnd = yield* Clock.currentTimeMillis
      const sinceLastEnd = Effect.map(Clock.currentTimeMillis, (now) => (now - lastEnd) / 1000)
      const recorded = (at: number) =>
        state === undefined || at !== startStep
          ? Effect.succeed(false)
          : Submissions.get(state, policy.record.id, at).pipe(
              Effect.map(Option.isSome),
              Effect.orElseSucceed(() => false)
            )
      yield* Pipeline.run<
        ReadonlyArray<TrajectoryGroup> | undefined,
        StepReport,
        Gather.GatherError | EG | ApiError | Trainer.TrainingFailed | Trainer.TrainerError,
        Exclude<R, Current> | RR | RG | TrainingClient
      >({
        from: startStep,
        to: options.steps,
        maxStaleness: bound,
        around: (at, body) => traced(at, body),
        // A step an earlier run submitted a job for is followed, not gathered (`undefined`).
        gather: (at) =>
          Effect.flatMap(recorded(at), (found) =>
            found ? Effect.succeed(undefined) : Effect.map(gatherStep(at), (groups) => groups)
          ),
        train: (at, gathered, submitted) =>
          Effect.gen(function* () {
            const validationMetrics = yield* validationAt(at)
            if (gathered === undefined) {
              const earlier = yield* resumed(at, validationMetrics)
              if (Option.isSome(earlier)) return { ...earlier.value, seconds: yield* sinceLastEnd } satisfies StepReport
            }
            let { groups, staleness } = dropStale(at, bound, gathered ?? [])
            if (staleness.dropped > 0) yield* Metric.incrementBy(staleTrajectoriesDropped, staleness.dropped)
            if (gathered === undefined || (staleness.dropped > 0 && countOf(groups) === 0)) {
              // Nothing left to train on (or nothing gathered): gather the step again, on checkpoint `at`.
              if (gathered !== undefined) {
                yield* Effect.logWarning(
                  `step ${at}: every trajectory was sampled more than ${bound} checkpoint(s) back; gathering it again`
                )
              }
              const again = dropStale(at, bound, yield* gatherStep(at, gathered !== undefined))
              groups = again.groups
              staleness = { ...again.staleness, dropped: again.staleness.dropped + staleness.dropped }
            }
            const report = yield* trainOn(at, groups, validationMetrics, staleness, submitted)
            return { ...report, seconds: yield* sinceLastEnd } satisfies StepReport
          }),
        accept: (at, report) =>
          Effect.flatMap(take(at, report), (goOn) =>
            Effect.as(
              Effect.map(Clock.currentTimeMillis, (now) => {
                lastEnd = now
              }),
              goOn
            )
          )
      })
      // Retention as asked for, now that no rollout samples from the checkpoints kept for gathering ahead.
      if (reports.length > 0) yield* prune(retentionNow(undefined))
    }

    let finalValidation = lastValidation?.step === step ? lastValidation.metrics : undefined
    if (evaluates && finalValidation === undefined && reports.length > 0) {
      finalValidation = yield* evaluate
      yield* Gather.release(gatherKey("val", step))
    }
    return {
      startStep,
      finalStep: step,
      steps: reports,
      ...(finalValidation === undefined ? {} : { finalValidation }),
      stoppedBy
    } satisfies Summary
  }).pipe(Effect.withSpan("TrainingLoop.run"))

/** The resolved `informativeGroups` option: `undefined` when off. */
const informativeOf = (
  option: boolean | InformativeGroups | undefined,
  groupsPerStep: number
): { readonly maxGroups: number } | undefined => {
  const value = option ?? DEFAULT_INFORMATIVE_GROUPS
  if (value === false) return undefined
  const maxGroups = (value === true ? undefined : value.maxGroups) ?? 4 * groupsPerStep
  return { maxGroups: Math.max(groupsPerStep, Math.floor(maxGroups)) }
}

/** The trajectories of some groups. */
const countOf = (groups: ReadonlyArray<TrajectoryGroup>): number =>
  groups.reduce((n, group) => n + group.trajectories.length, 0)
