/**
 * The engine side of the job worker: running one RL or SFT job's training on a loaded policy, with the
 * events it emits. Pure of the store except for the `emit` callback it is given.
 *
 * ## Gradient steps
 * Training is CPU-bound and synchronous; the server runs it on its training thread (`trainingThread.ts`), off
 * the event loop. An SFT job is cut into its batches here (the same cut `trainSft` makes) and trained one
 * step at a time, yielding between steps, so that a cancellation lands between steps. An RL job is one
 * `trainRl` call, since its advantages and token weights are computed over the whole job.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type { CreateSftTrainingJob, CreateTrainingJob } from "../../../api/TrainingJob.js"
import { rlGroupsOf, type SftExample, sftSequenceOf } from "../../engine/Batches.js"
import type { AdamState } from "../../engine/Optimizer.js"
import type { Policy } from "../../engine/policy/Policy.js"
import {
  hasTrainableTokens,
  rlStepCount,
  type SftStepMetrics,
  sftBatches,
  trainRl,
  trainSft
} from "../../engine/Trainer.js"
import { yieldToEventLoop } from "../../internal/eventLoop.js"
import { decodeSftLines, JobFailure } from "./workerData.js"

export { JobFailure }

/**
 * One step's metrics, as the `gradient_step` event's data: finite numbers only, so that a client's `float()`
 * reads every value (a non-finite one is left out, and counted in {@link Trained.leftOut}).
 */
export type StepMetrics = Readonly<Record<string, number>>

/** What the trainer reports to the worker while a job runs. */
export interface Emitter<E, R> {
  /** Called once before the first step, with the number of gradient steps the job will take. */
  readonly started: (numSequences: number) => Effect.Effect<void, E, R>
  /** Called after each gradient step. */
  readonly step: (metrics: StepMetrics) => Effect.Effect<void, E, R>
}

/** The outcome of a job's training: the checkpoint's metrics (the steps' means). */
export interface Trained {
  /** The means over the steps of every metric (the job's summary when it took no step). */
  readonly metrics: StepMetrics
  /** Per metric, how many non-finite values (NaN, infinities) the steps had, left out of their events. */
  readonly leftOut: ReadonlyMap<string, number>
}

/** Options of {@link trainRlJob}. */
export interface RlJobOptions {
  /** The learning rate when the config gives none (default the engine's, `DEFAULT_RL_LEARNING_RATE`). */
  readonly defaultLearningRate?: number | undefined
  /** Multiplies the RL learning rate (see `Trainer`); default 1. */
  readonly learningRateScale?: number | undefined
}

/** Options of {@link trainSftJob}. */
export interface SftJobOptions {
  /** The learning rate when the config gives none (default the engine's, `DEFAULT_SFT_LEARNING_RATE`). */
  readonly defaultLearningRate?: number | undefined
}

/** The finite numeric entries of an engine's metrics record, counting the others in `leftOut`. */
export const asMetrics = (record: object, leftOut: Map<string, number>): StepMetrics => {
  const out: Record<string, number> = {}
  for (const [key, value] of Object.entries(record)) {
    if (typeof value !== "number") continue
    if (Number.isFinite(value)) out[key] = value
    else leftOut.set(key, (leftOut.get(key) ?? 0) + 1)
  }
  return out
}

/** The mean of every metric over the steps that have it. */
export const meanMetrics = (steps: ReadonlyArray<StepMetrics>): StepMetrics => {
  const sums = new Map<string, { sum: number; n: number }>()
  for (const step of steps) {
    for (const [key, value] of Object.entries(step)) {
      const entry = sums.get(key) ?? { sum: 0, n: 0 }
      entry.sum += value
      entry.n += 1
      sums.set(key, entry)
    }
  }
  const out: Record<string, number> = {}
  for (const [key, { sum, n }] of sums) out[key] = sum / n
  return out
}

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/** Runs a throwing engine call, its exception a {@link JobFailure} prefixed with `what`. */
const attempt = <A>(what: string, f: () => A): Effect.Effect<A, JobFailure> =>
  Effect.try({ try: f, catch: (error) => new JobFailure({ message: `${what}: ${messageOf(error)}` }) })

/**
 * Trains an RL job on the policy and optimiser (in place): `training_started` with the step count, the
 * whole `trainRl` call, then one `gradient_step` per step.
 */
export const trainRlJob = <E, R>(
  policy: Policy,
  optimizer: AdamState,
  request: CreateTrainingJob,
  emit: Emitter<E, R>,
  options: RlJobOptions = {}
): Effect.Effect<Trained, JobFailure | E, R> =>
  Effect.gen(function* () {
    const config = request.experimental_config
    const groups = yield* attempt("invalid trajectory groups", () => rlGroupsOf(request.trajectory_groups))
    yield* emit.started(yield* attempt("invalid experimental_config", () => rlStepCount(groups, config)))
    yield* yieldToEventLoop
    const result = yield* attempt("training failed", () =>
      trainRl(policy, optimizer, groups, config, {
        defaultLearningRate: options.defaultLearningRate,
        learningRateScale: options.learningRateScale
      })
    )
    const leftOut = new Map<string, number>()
    const steps = result.steps.map((step) => asMetrics(step, leftOut))
    for (const step of steps) yield* emit.step(step)
    yield* yieldToEventLoop
    if (steps.length > 0) return { metrics: meanMetrics(steps), leftOut }
    const summary = {
      reward: result.reward,
      reward_std_dev: result.rewardStdDev,
      exception_rate: result.exceptionRate,
      num_trajectories: result.numTrajectories
    }
    return { metrics: asMetrics(summary, leftOut), leftOut }
  })

/**
 * Trains an SFT job on the policy and optimiser (in place) from the JSONL text of its training data: one
 * `trainSft` step per batch, yielding to the event loop between steps.
 */
export const trainSftJob = <E, R>(
  policy: Policy,
  optimizer: AdamState,
  request: CreateSftTrainingJob,
  data: string,
  emit: Emitter<E, R>,
  options: SftJobOptions = {}
): Effect.Effect<Trained, JobFailure | E, R> =>
  Effect.gen(function* () {
    const config = request.config
    const examples: ReadonlyArray<SftExample> = yield* decodeSftLines(data)
    const turns = config?.assistant_turns ?? "all"
    const sequences = yield* attempt("invalid training data", () =>
      examples.map((example) => sftSequenceOf(example, turns)).filter(hasTrainableTokens)
    )
    if (sequences.length === 0) {
      return yield* new JobFailure({ message: "the training data has no assistant turn to learn" })
    }
    const size = config?.batch_size ?? "auto"
    if (size !== "auto" && !(size > 0)) {
      return yield* new JobFailure({ message: `config.batch_size must be a positive integer, got ${size}` })
    }
    const rates = config?.learning_rate ?? options.defaultLearningRate
    if (Array.isArray(rates) && rates.length === 0) {
      return yield* new JobFailure({ message: "config.learning_rate: an empty list" })
    }
    const batches = sftBatches(sequences, size)
    yield* emit.started(batches.length)
    const steps: Array<StepMetrics> = []
    const leftOut = new Map<string, number>()
    for (const [index, batch] of batches.entries()) {
      yield* yieldToEventLoop
      const learningRate = typeof rates === "object" ? rates[Math.min(index, rates.length - 1)] : rates
      const [metrics] = yield* attempt("training failed", () =>
        trainSft(policy, optimizer, batch, { batchSize: batch.length, learningRate })
      )
      const step = asMetrics(metrics as SftStepMetrics, leftOut)
      steps.push(step)
      yield* emit.step(step)
    }
    return { metrics: meanMetrics(steps), leftOut }
  })

/** Decodes a stored request body, a {@link JobFailure} naming the schema when it does not fit. */
export const decodeRequest = <A, I>(schema: Schema.Schema<A, I>, request: unknown): Effect.Effect<A, JobFailure> =>
  Schema.decodeUnknown(schema)(request).pipe(
    Effect.mapError(
      (error) => new JobFailure({ message: `invalid job request: ${ParseResult.TreeFormatter.formatErrorSync(error)}` })
    )
  )
