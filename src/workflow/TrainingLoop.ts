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
 * **Tracing.** With a `Tracing` layer provided, each step is a call (`step <n>`) whose descendants are its
 * rollouts (and its evaluation), with the step's report as output; see `Tracing`.
 *
 * ```ts
 * const summary = yield* TrainingLoop.run({
 *   policy, scenarios, rollout: play, reward: Reward.fromFunction(({ value }) => value),
 *   groupsPerStep: 4, rolloutsPerGroup: 8, steps: 10
 * })
 * ```
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { ExperimentalConfig } from "../api/TrainingJob.js"
import type { ApiError } from "../client/ApiError.js"
import type { TrainingClient } from "../client/TrainingClient.js"
import * as Gather from "./Gather.js"
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
  /** Checkpoint retention after each step (see `Trainer.prune`); default: keep everything. */
  readonly retention?: Trainer.PruneOptions | undefined
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
  /** Wall time of the step, in seconds. */
  readonly seconds: number
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

/**
 * Runs the loop (see the module comment): from the policy's current step to `steps`, or until `stopAt`.
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

    const gatherOptions = {
      policy,
      rollout: options.rollout,
      reward: options.reward,
      ...(options.scoreGroup === undefined ? {} : { scoreGroup: options.scoreGroup }),
      ...options.gather
    }

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
          rolloutsPerGroup: options.validationRollouts ?? 1
        })
        const groups = Gather.trajectoryGroups(gathered)
        yield* Trainer.log(policy, groups, "val")
        return Metrics.compute(groups)
      })
    ).pipe(Effect.withSpan("TrainingLoop.evaluate"))

    /** One step: evaluate (when due), gather, log, train, prune; when traced, a call over all of it. */
    const runStep = (step: number) =>
      Tracing.call(
        () => ({
          op: Tracing.STEP_OP,
          displayName: `step ${step}`,
          inputs: { step, model: policy.name, groups: options.groupsPerStep, rollouts: options.rolloutsPerGroup },
          output: (report: StepReport) => toJson(report)
        }),
        Effect.gen(function* () {
          const started = yield* Clock.currentTimeMillis
          const validationMetrics = evaluates && step % evalEvery === 0 ? yield* evaluate : undefined
          // A job an earlier run submitted for this step: followed, not gathered and submitted again.
          const resumed =
            state === undefined ? Option.none() : yield* Trainer.resume(policy, { ...options.follow, state })
          if (Option.isSome(resumed)) {
            if (options.retention !== undefined) yield* Trainer.prune(policy, options.retention)
            return {
              step,
              trainedStep: resumed.value.step,
              train: resumed.value.submission.metrics ?? {},
              training: resumed.value.metrics,
              ...(validationMetrics === undefined ? {} : { validation: validationMetrics }),
              seconds: ((yield* Clock.currentTimeMillis) - started) / 1000
            } satisfies StepReport
          }
          const gathered = yield* Gather.groups({
            ...gatherOptions,
            scenarios: scenariosOf(options.scenarios, step, options.groupsPerStep, seed),
            rolloutsPerGroup: options.rolloutsPerGroup,
            metadata: (_, index) => ({ step, group: index })
          })
          const groups = Gather.trajectoryGroups(gathered)
          const train = Metrics.compute(groups)
          yield* Trainer.log(policy, groups, "train")
          const result = yield* Trainer.train(policy, groups, {
            ...options.follow,
            ...(state === undefined ? {} : { state }),
            ...(options.config === undefined ? {} : { config: options.config })
          })
          if (options.retention !== undefined) yield* Trainer.prune(policy, options.retention)
          return {
            step,
            trainedStep: result.step,
            train,
            training: result.metrics,
            ...(validationMetrics === undefined ? {} : { validation: validationMetrics }),
            seconds: ((yield* Clock.currentTimeMillis) - started) / 1000
          } satisfies StepReport
        })
      )

    const startStep = yield* policy.step
    const reports: Array<StepReport> = []
    let step = startStep
    let stoppedBy: StopReason = "budget"
    let lastValidation: { readonly step: number; readonly metrics: Metrics.Metrics } | undefined
    yield* Effect.logInfo(`training loop: from step ${startStep} to ${options.steps}`)

    while (step < options.steps) {
      const report = yield* runStep(step)
      const { train, validation: validationMetrics } = report
      if (validationMetrics !== undefined) lastValidation = { step, metrics: validationMetrics }
      reports.push(report)
      yield* Effect.logInfo(
        `step ${step} -> ${report.trainedStep}: reward ${train.reward?.toFixed(3) ?? "-"}` +
          (validationMetrics?.reward === undefined ? "" : `, val reward ${validationMetrics.reward.toFixed(3)}`) +
          ` (${report.seconds.toFixed(1)} s)`
      )
      if (options.onStep !== undefined) yield* options.onStep(report)
      // A backend numbering checkpoints its own way still moves the loop on.
      step = Math.max(report.trainedStep, step + 1)
      if (options.stopAt !== undefined && reached(validationMetrics ?? train, options.stopAt)) {
        stoppedBy = "target"
        break
      }
    }

    let finalValidation = lastValidation?.step === step ? lastValidation.metrics : undefined
    if (evaluates && finalValidation === undefined && reports.length > 0) finalValidation = yield* evaluate
    return {
      startStep,
      finalStep: step,
      steps: reports,
      ...(finalValidation === undefined ? {} : { finalValidation }),
      stoppedBy
    } satisfies Summary
  }).pipe(Effect.withSpan("TrainingLoop.run"))
