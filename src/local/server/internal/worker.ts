/**
 * The job worker of the local backend: one fiber that claims queued training jobs (`Jobs.claimNext`, oldest
 * first, one running job per model, so a model's jobs run in creation order) and runs each on the engine.
 *
 * ## A job's run
 * 1. Load the model's latest checkpoint (weights, and Adam state when it holds one; a fresh state otherwise).
 * 2. Decode the stored request (`CreateTrainingJob` or `CreateSftTrainingJob`); for SFT read and decode the
 *    JSONL at `training_data_url`. The learning rate the job applies when its config gives none is its model's
 *    base model's (`learningRatesOf` in `baseModels.ts`; RL's then multiplied by `learningRateScale`).
 * 3. Train on the training thread (`trainingThread.ts`, off the event loop): it reports
 *    `training_started` with `num_sequences`, the number of gradient steps the job will take (computed before
 *    training from the same batching the trainer uses; 0 for an RL job with no trainable group), then one
 *    `gradient_step` per step with its metrics, appended as they come (those that came together in one write), and
 *    the new weights.
 * 4. `Jobs.succeed`: the new checkpoint (weights with the Adam state, step = the loaded step + 1, the
 *    steps' mean metrics), the job's status and `training_ended`, in one transaction.
 *
 * Any failure (a request or training data that does not decode, an engine error, a defect) ends the job
 * with `Jobs.fail` and its message; the worker goes on with the next job.
 *
 * ## Interruption
 * When the worker's scope closes (server shutdown) the running job is interrupted (cancelled on the training
 * thread: an SFT job stops before its next step, an RL job's result is thrown away) and failed with
 * `INTERRUPTED_MESSAGE`. The final
 * `Jobs.succeed` is uninterruptible and transactional: a job is either succeeded with its checkpoint or
 * failed, never half-written. A crash is handled by the store's `recover` at the next start.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import { CreateSftTrainingJob, CreateTrainingJob } from "../../../api/TrainingJob.js"
import { yieldToEventLoop } from "../../internal/eventLoop.js"
import { Checkpoints } from "../../store/Checkpoints.js"
import { fullMessage, isDiskFull } from "../../store/DiskSpace.js"
import { JobEvents } from "../../store/JobEvents.js"
import { type Claimed, INTERRUPTED_MESSAGE, type JobRecord, Jobs } from "../../store/Jobs.js"
import { Models } from "../../store/Models.js"
import { type LearningRates, learningRatesOf } from "./baseModels.js"
import * as TrainingThread from "./trainingThread.js"
import { JobFailure, type ReadTrainingData, readTrainingData } from "./workerData.js"
import { decodeRequest } from "./workerTraining.js"

/** Options of {@link make} and {@link layer}. */
export interface Options {
  /** How long one `claimNext` waits for a job before the loop asks again, in ms (default 1000). */
  readonly pollMs?: number | undefined
  /** Multiplies the RL learning rate (see `Trainer`); default 1. */
  readonly learningRateScale?: number | undefined
  /**
   * Reads SFT training data (default: nothing may be read, every job with training data fails; see
   * `workerData.ts`). The server passes one that reads its own uploads and what its read policy allows.
   */
  readonly readTrainingData?: ReadTrainingData | undefined
  /** The data directory, named in the message of a job that failed for want of space. */
  readonly dataDir?: string | undefined
}

/** The job worker. */
export interface Service {
  /**
   * Claims the next job (waiting up to `waitMs` for one) and runs it to its end: the job's final record, or
   * none when there was no job. Never fails: a job's failure is recorded on the job.
   */
  readonly runNext: (waitMs: number) => Effect.Effect<Option.Option<JobRecord>>
}

/** The job worker service. */
export class Worker extends Context.Tag("effect-rl/local/server/Worker")<Worker, Service>() {}

/** The checkpoint a job trains from, and the learning rates of its model's base model (when it has them). */
interface Base {
  readonly weights: Uint8Array
  readonly step: number
  readonly learningRates: LearningRates | undefined
}

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/** The `error_message` of a failed run (`dataDir`: named when the disk is full). */
export const describeCause = (cause: Cause.Cause<unknown>, dataDir?: string | undefined): string => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) return isDiskFull(failure.value) ? fullMessage(dataDir) : messageOf(failure.value)
  const defect = Cause.dieOption(cause)
  if (Option.isSome(defect) && isDiskFull(defect.value)) return fullMessage(dataDir)
  if (Option.isSome(defect)) return `internal error: ${messageOf(defect.value)}`
  return `internal error: ${Cause.pretty(cause)}`
}

/**
 * The log line of a job that ended: its new step and, when the engine produced non-finite metric values
 * (left out of the `gradient_step` events, which carry only finite numbers), how many of which.
 */
export const endedLine = (id: string, kind: string, step: number, leftOut: ReadonlyMap<string, number>): string => {
  const total = [...leftOut.values()].reduce((a, b) => a + b, 0)
  const counts = [...leftOut].map(([key, n]) => `${key} x${n}`).join(", ")
  return `training job ${id} (${kind}) ended: checkpoint step ${step}${total === 0 ? "" : `; ${total} non-finite metric values left out of its events (${counts})`}`
}

/** Builds the worker over the store (without starting its loop; see {@link layer}). */
export const make = (options: Options = {}): Effect.Effect<Service, never, Jobs | JobEvents | Checkpoints | Models> =>
  Effect.gen(function* () {
    const jobs = yield* Jobs
    const events = yield* JobEvents
    const checkpoints = yield* Checkpoints
    const models = yield* Models
    const read = options.readTrainingData ?? readTrainingData

    const loadBase = (modelId: string) =>
      Effect.gen(function* () {
        const latest = yield* checkpoints.latest(modelId)
        if (Option.isNone(latest)) {
          return yield* new JobFailure({ message: `model ${modelId} has no checkpoint to train from` })
        }
        const step = latest.value.step
        const learningRates = learningRatesOf((yield* models.get(modelId)).base_model)
        return { weights: yield* checkpoints.weights(modelId, step), step, learningRates } satisfies Base
      })

    /** Appends a job's progress reports as its `training_started` and `gradient_step` events, in one write. */
    const appendProgress = (jobId: string, reports: ReadonlyArray<TrainingThread.Progress>) =>
      Effect.asVoid(
        events.appendAll(
          jobId,
          reports.map((report) =>
            report.type === "started"
              ? { type: "training_started" as const, data: { num_sequences: report.numSequences } }
              : { type: "gradient_step" as const, data: report.metrics }
          )
        )
      )

    /** The job the training thread runs: the checkpoint, the request and (SFT) the data. */
    const jobOf = (claimed: Claimed, base: Base): Effect.Effect<TrainingThread.JobMessage, JobFailure> =>
      claimed.job.kind === "rl"
        ? Effect.map(decodeRequest(CreateTrainingJob, claimed.request), (request) => ({
            kind: "rl" as const,
            weights: base.weights,
            step: base.step,
            request,
            defaultLearningRate: base.learningRates?.rl,
            learningRateScale: options.learningRateScale
          }))
        : Effect.gen(function* () {
            const request = yield* decodeRequest(CreateSftTrainingJob, claimed.request)
            const data = yield* read(request.training_data_url)
            return {
              kind: "sft" as const,
              weights: base.weights,
              step: base.step,
              request,
              data,
              defaultLearningRate: base.learningRates?.sft
            }
          })

    const execute = (claimed: Claimed) =>
      Effect.gen(function* () {
        const base = yield* loadBase(claimed.job.model_id)
        const report = yield* TrainingThread.run(yield* jobOf(claimed, base), (reports) =>
          appendProgress(claimed.job.id, reports)
        )
        if (report.type === "failed") return yield* new JobFailure({ message: report.message })
        const leftOut = new Map(report.leftOut)
        const result = { weights: report.weights, metrics: report.metrics, step: base.step + 1 }
        const job = (yield* Effect.uninterruptible(jobs.succeed(claimed.job.id, result))).job
        // Quiet unless the events had to leave values out (the trainer's own progress says the rest).
        const line = endedLine(claimed.job.id, claimed.job.kind, result.step, leftOut)
        yield* leftOut.size > 0 ? Effect.logWarning(line) : Effect.logDebug(line)
        return job
      })

    // Failing a job is a write too: on a full disk it is tried again for a while (space may come back), then
    // left to the store's recovery at the next start (a job found running then is failed).
    const failJob = (id: string, message: string) =>
      jobs.fail(id, message).pipe(
        Effect.map(Option.some),
        // A SQL failure is a defect of the store; here it is a failure to try again (a full disk) or report.
        Effect.catchAllDefect((defect) => Effect.fail(defect)),
        Effect.retry({
          while: isDiskFull,
          schedule: Schedule.spaced("2 seconds").pipe(Schedule.intersect(Schedule.recurs(30)))
        }),
        Effect.catchAll((error: unknown) =>
          Effect.as(
            Effect.logWarning(
              `training job ${id} could not be failed: ${isDiskFull(error) ? fullMessage(options.dataDir) : messageOf(error)}`
            ),
            Option.none<JobRecord>()
          )
        )
      )

    const run = (claimed: Claimed): Effect.Effect<Option.Option<JobRecord>> =>
      execute(claimed).pipe(
        Effect.map(Option.some),
        Effect.catchAllCause((cause) =>
          Cause.isInterruptedOnly(cause)
            ? Effect.interrupt
            : failJob(claimed.job.id, describeCause(cause, options.dataDir))
        ),
        Effect.onInterrupt(() => Effect.asVoid(failJob(claimed.job.id, INTERRUPTED_MESSAGE))),
        Effect.withSpan("Worker.run", { attributes: { job: claimed.job.id, kind: claimed.job.kind } })
      )

    const runNext = (waitMs: number) =>
      jobs.claimNext(waitMs).pipe(
        Effect.catchAll((error) =>
          Effect.as(Effect.logWarning(`claiming a training job failed: ${error.message}`), Option.none<Claimed>())
        ),
        Effect.flatMap(Option.match({ onNone: () => Effect.succeed(Option.none<JobRecord>()), onSome: run }))
      )

    return { runNext }
  })

/**
 * The worker, its loop running in the layer's scope: claims and runs jobs until the scope closes (which
 * fails a running job with `INTERRUPTED_MESSAGE`, see the module comment).
 */
export const layer = (options: Options = {}): Layer.Layer<Worker, never, Jobs | JobEvents | Checkpoints | Models> =>
  Layer.scoped(
    Worker,
    Effect.gen(function* () {
      const worker = yield* make(options)
      const pollMs = options.pollMs ?? 1000
      const loop = worker.runNext(pollMs).pipe(
        Effect.catchAllCause((cause) => Effect.logError("the training job worker failed", cause)),
        Effect.zipRight(yieldToEventLoop),
        Effect.forever
      )
      yield* Effect.forkScoped(loop)
      return worker
    })
  )
