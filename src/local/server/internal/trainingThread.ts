/**
 * The training thread of the local backend: a `worker_threads` worker that runs jobs' training (CPU-bound,
 * synchronous engine code) off the server's event loop, so that the server samples and answers requests while
 * a job trains (on two cores, really at the same time).
 *
 * The job worker (`worker.ts`) sends a job: the checkpoint's bytes, the decoded request and, for SFT, the
 * training data's text. The thread loads the checkpoint, trains (`workerTraining.ts`), and posts back what
 * happens, in order: `started` (the number of gradient steps), one `step` per gradient step (its metrics),
 * then `done` (the new checkpoint's bytes, transferred, and the metrics) or `failed` (the message). The
 * worker appends the events to the store as they come, those that came together in one write ({@link run}).
 *
 * One thread per process, started when a model is created ({@link prestart}) or on first use, and kept (it does
 * not hold the process open): starting one costs a few hundred milliseconds (more from the TypeScript sources),
 * and servers in one process (tests) share it. Once started, the thread runs one small forward and backward pass
 * before any job, so the engine's code is compiled while the first rollouts are gathered, not in the first job
 * (a server that only serves never starts it). It runs jobs one after another, in the order they were sent. A job
 * given up by its caller (interrupted) is cancelled: an SFT job stops before its next step, an RL job (one
 * gradient computation) finishes and is thrown away. If the thread dies, the jobs it held fail and the next job
 * starts a new one.
 *
 * This module is both the thread's entry point and the main thread's side ({@link run}).
 *
 * @since 0.1.0
 */
import { parentPort, type Worker, workerData } from "node:worker_threads"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Queue from "effect/Queue"
import type { CreateSftTrainingJob, CreateTrainingJob } from "../../../api/TrainingJob.js"
import { startModuleThread } from "../../../internal/moduleThread.js"
import { disposeAdamState, makeAdamState } from "../../engine/Optimizer.js"
import { loadCheckpoint, saveCheckpoint } from "../../engine/policy/Checkpoint.js"
import { Policy } from "../../engine/policy/Policy.js"
import { DEFAULT_POLICY_CONFIG } from "../../engine/policy/PolicyConfig.js"
import { yieldToEventLoop } from "../../internal/eventLoop.js"
import type { Emitter, StepMetrics } from "./workerTraining.js"
import { trainRlJob, trainSftJob } from "./workerTraining.js"

/** A job for the thread. */
export type JobMessage =
  | {
      readonly kind: "rl"
      readonly weights: Uint8Array
      readonly step: number
      readonly request: CreateTrainingJob
      /** The learning rate when the config gives none (the model's base model's; default the engine's). */
      readonly defaultLearningRate: number | undefined
      readonly learningRateScale: number | undefined
    }
  | {
      readonly kind: "sft"
      readonly weights: Uint8Array
      readonly step: number
      readonly request: CreateSftTrainingJob
      readonly data: string
      /** The learning rate when the config gives none (the model's base model's; default the engine's). */
      readonly defaultLearningRate: number | undefined
    }

/** What the thread reports about a job, in order. */
export type Report =
  | { readonly type: "started"; readonly numSequences: number }
  | { readonly type: "step"; readonly metrics: StepMetrics }
  | {
      readonly type: "done"
      readonly weights: Uint8Array
      readonly metrics: StepMetrics
      readonly leftOut: ReadonlyArray<readonly [string, number]>
    }
  | { readonly type: "failed"; readonly message: string }

/** A report during the job. */
export type Progress = Extract<Report, { type: "started" | "step" }>
/** The last report of a job. */
export type Outcome = Extract<Report, { type: "done" | "failed" }>

type ToThread =
  | { readonly type: "job"; readonly id: number; readonly job: JobMessage }
  | { readonly type: "cancel"; readonly id: number }
type FromThread = { readonly id: number; readonly report: Report }

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

const CANCELLED = "cancelled"

/**
 * Runs one job in this thread, posting its reports; `cancelled` is asked before each report. (Exported for tests,
 * which run it on their own thread.)
 */
export const runJob = (job: JobMessage, post: (report: Report) => void, cancelled: () => boolean): Promise<void> => {
  const report = (message: Report) =>
    cancelled() ? Effect.fail({ message: CANCELLED }) : Effect.sync(() => post(message))
  const emit: Emitter<{ readonly message: string }, never> = {
    started: (numSequences) => report({ type: "started", numSequences }),
    step: (metrics) => report({ type: "step", metrics })
  }
  const program = Effect.gen(function* () {
    const loaded = yield* Effect.try({
      try: () => loadCheckpoint(job.weights),
      catch: (error) => ({ message: `cannot load the checkpoint of step ${job.step}: ${messageOf(error)}` })
    })
    const optimizer = loaded.optimizer ?? makeAdamState(loaded.policy.parameterCount, {}, loaded.policy.float64)
    // The job's policy and moments give their memory back when it ends, whatever the end: the next job reuses
    // the blocks (this thread allocates too little JavaScript for the collector to find them soon), where each
    // job took about 80 MB of fresh memory in `npm start` and the thread's memory only grew.
    return yield* Effect.gen(function* () {
      const trained =
        job.kind === "rl"
          ? yield* trainRlJob(loaded.policy, optimizer, job.request, emit, {
              defaultLearningRate: job.defaultLearningRate,
              learningRateScale: job.learningRateScale
            })
          : yield* trainSftJob(loaded.policy, optimizer, job.request, job.data, emit, {
              defaultLearningRate: job.defaultLearningRate
            })
      return { weights: saveCheckpoint(loaded.policy, optimizer), trained }
    }).pipe(
      Effect.ensuring(
        Effect.sync(() => {
          loaded.policy.dispose()
          disposeAdamState(optimizer)
        })
      )
    )
  })
  return Effect.runPromise(
    program.pipe(
      Effect.match({
        onFailure: (error) => post({ type: "failed", message: error.message }),
        onSuccess: ({ weights, trained }) =>
          post({ type: "done", weights, metrics: trained.metrics, leftOut: [...trained.leftOut] })
      }),
      Effect.catchAllDefect((defect) => Effect.sync(() => post({ type: "failed", message: messageOf(defect) })))
    )
  )
}

/**
 * One forward and backward pass of a small policy over two short sequences (compiles the training code), with the
 * array types a job passes (Int32Array ids, Uint8Array masks, Float64Array gradients); its memory is given back.
 */
export const warmUp = (): void => {
  const policy = Policy.create({ ...DEFAULT_POLICY_CONFIG, contextLength: 64 }, { seed: 1 })
  const sequences = [48, 40].map((n, s) => Int32Array.from({ length: n }, (_, t) => (t * 31 + s * 7) % 256))
  const want = sequences.map((ids) => Uint8Array.from(ids, (_, t) => (t > 0 ? 1 : 0)))
  policy.forwardBatch(sequences, want)
  policy.backwardBatch(sequences.map((ids) => Float64Array.from(ids, () => -1 / ids.length)))
  policy.dispose()
}

/**
 * Marks the thread's `workerData`, so that this module serves jobs only in a thread started for it: the module
 * is also loaded in other threads (the embedded backend's own, `serverThread.ts`), where it is the caller's side.
 */
const MARK = "effect-rl/trainingThread"

// The thread's side: run the jobs posted to it one after another; a cancel marks one to stop.
if ((workerData as { readonly mark?: unknown } | null)?.mark === MARK && parentPort !== null) {
  const port = parentPort
  const cancelled = new Set<number>()
  // Before the first job: a failure here is the first job's to meet, not the warm-up's.
  let queue = Promise.resolve().then(() => {
    try {
      warmUp()
    } catch {
      // Nothing to report: a job that needs the same code fails on its own.
    }
  })
  port.on("message", (message: ToThread) => {
    if (message.type === "cancel") {
      cancelled.add(message.id)
      return
    }
    const { id, job } = message
    queue = queue.then(() =>
      cancelled.delete(id)
        ? undefined
        : runJob(
            job,
            (report) => {
              const out: FromThread = { id, report }
              if (report.type === "done") port.postMessage(out, [report.weights.buffer as ArrayBuffer])
              else port.postMessage(out)
            },
            () => cancelled.has(id)
          ).finally(() => cancelled.delete(id))
    )
  })
}

/** Starts the thread on this module (see `startModuleThread`). */
const startThread = (): Worker => startModuleThread(import.meta.url, { workerData: { mark: MARK } })

/** The main thread's side: the thread (when started), and the report queues of the jobs it holds. */
const state = {
  worker: undefined as Worker | undefined,
  nextId: 1,
  pending: new Map<number, Queue.Queue<Report>>()
}

const thread = (): Worker => {
  if (state.worker !== undefined) return state.worker
  const worker = startThread()
  const failAll = (message: string) => {
    if (state.worker === worker) state.worker = undefined
    for (const queue of state.pending.values()) Queue.unsafeOffer(queue, { type: "failed", message })
    state.pending.clear()
  }
  worker.on("message", ({ id, report }: FromThread) => {
    const queue = state.pending.get(id)
    if (queue !== undefined) Queue.unsafeOffer(queue, report)
  })
  worker.on("error", (error) => failAll(`the training thread failed: ${messageOf(error)}`))
  worker.on("exit", (code) => failAll(`the training thread exited with code ${code}`))
  state.worker = worker
  return worker
}

/** Whether this process's training thread is running (started by {@link prestart} or a job). */
export const running = (): boolean => state.worker !== undefined

/** Starts the thread now if it is not running, without holding the process open (see the module comment). */
export const prestart = (): void => {
  // A thread already running is left as it is (held open while it has jobs); a new one has none yet.
  if (state.worker === undefined) thread().unref()
}

/** The most reports {@link run} hands to `onProgress` at once. */
const MOST_REPORTS = 256

/**
 * Runs a job in the training thread: `onProgress` is run with the `started` and `step` reports that came since
 * its last run (one or more, at most 256, in order), one run at a time, with a turn of the event loop between
 * runs; the job's last report (`done` or `failed`) is the result. If the job ends any other way (interrupted,
 * or `onProgress` failed), it is cancelled in the thread.
 *
 * A fast job (small steps) reports faster than each report can be written one by one; the thread's messages
 * are then delivered back to back, in one turn of the event loop, and writing each as it came held the loop for
 * the whole job (no timer or request ran). Here a message only queues its report, and the writes come after.
 */
export const run = <E, R>(
  job: JobMessage,
  onProgress: (reports: ReadonlyArray<Progress>) => Effect.Effect<void, E, R>
): Effect.Effect<Outcome, E, R> =>
  Effect.scoped(
    Effect.gen(function* () {
      const queue = yield* Queue.unbounded<Report>()
      const id = state.nextId++
      yield* Effect.acquireRelease(
        Effect.sync(() => {
          const worker = thread()
          state.pending.set(id, queue)
          // A thread holds the process open while it has jobs, not when idle.
          worker.ref()
          worker.postMessage({ type: "job", id, job } satisfies ToThread)
          return worker
        }),
        (worker, exit) =>
          Effect.sync(() => {
            state.pending.delete(id)
            if (Exit.isFailure(exit)) worker.postMessage({ type: "cancel", id } satisfies ToThread)
            if (state.pending.size === 0) worker.unref()
          })
      )
      while (true) {
        // After the event loop's turn, so that the reports delivered in it are queued and written together.
        yield* yieldToEventLoop
        const reports = Chunk.toReadonlyArray(yield* Queue.takeBetween(queue, 1, MOST_REPORTS))
        const end = reports.findIndex((report) => report.type === "done" || report.type === "failed")
        const progress = (end === -1 ? reports : reports.slice(0, end)) as ReadonlyArray<Progress>
        if (progress.length > 0) yield* onProgress(progress)
        if (end !== -1) return reports[end] as Outcome
      }
    })
  )
