/**
 * Continuous batching on the decoding scheduler: the completions in flight on a model decode together, one
 * forward pass of the model advancing all of them by a token (and running a piece of each prompt still
 * running) per step, rather than each in a pass of its own.
 *
 * A completion decoding on the scheduler (`runRounds`, or a stream's chunks pulled a step at a time) asks the
 * batcher for its next step and pauses; the batcher is one task of the scheduler, whose step advances every job
 * that asked, grouped by model ({@link stepJobs}). A job asks again only when it is pulled again, so a completion
 * whose client went away (its task dropped) leaves the batch after at most one more step, and a stream whose
 * client reads slowly does not run ahead of it. One step is bounded in work ({@link STEP_BUDGET}: the jobs
 * beyond it wait for the next step), so a turn of the event loop stays short however many completions are in
 * flight.
 *
 * @since 0.1.0
 */
import type { DecodeState, LanguageModel } from "../LanguageModel.js"
import { decoding, type Scheduler, type Task } from "../Scheduler.js"
import { type Job, stepJobs } from "./Job.js"

/**
 * The most work one batched step takes on, in the units of `stepJobs` (36,000: a chunk of a prompt, some 5-10 ms
 * of the local policy's time, as `DEFAULT_CHUNK` sizes it; 64 choices at 100 tokens of context are 42,000). A
 * step always takes the first decoding job and the first prompt piece waiting, whatever their cost.
 */
export const STEP_BUDGET = 36_000

/**
 * The wall time one batched step aims at, in milliseconds: after each step the budget of the next is scaled
 * towards it, between a twelfth of {@link STEP_BUDGET} and all of it. Short steps keep a turn of the event loop
 * close to the scheduler's 10 ms (a `/v1/health` probe waits no longer than before batching), at the price of
 * smaller batches on a busy machine.
 */
export const STEP_MS = 2

/** Steps the jobs that asked for a step, a batch per model, as one task of a scheduler. */
export class Batcher {
  /** Whether completions on the scheduler decode in batches (else each steps alone, in its own task). */
  enabled = true
  /** The batched steps run so far, the jobs they stepped in all, and the most jobs one step held. */
  readonly stats = { steps: 0, jobs: 0, largest: 0 }
  private readonly queue = new Map<LanguageModel<DecodeState>, Set<Job<DecodeState>>>()
  private queued = false
  private readonly task: Task = {
    step: () => this.step(),
    fail: () => undefined
  }

  /** The budget of the next step (see {@link STEP_MS}). */
  private current: number

  /** The wall time a step aims at (see {@link STEP_MS}; infinite: every step takes on the whole budget). */
  stepMs: number

  constructor(
    readonly scheduler: Scheduler,
    readonly budget: number = STEP_BUDGET,
    stepMs: number = STEP_MS
  ) {
    this.current = budget
    this.stepMs = stepMs
  }

  /** The jobs waiting for a step now. */
  get waiting(): number {
    let n = 0
    for (const jobs of this.queue.values()) n += jobs.size
    return n
  }

  /** Asks for the job's next step (a job already waiting keeps its place). */
  request<S extends DecodeState>(job: Job<S>): void {
    const model = job.model as unknown as LanguageModel<DecodeState>
    let jobs = this.queue.get(model)
    if (jobs === undefined) {
      jobs = new Set()
      this.queue.set(model, jobs)
    }
    jobs.add(job as unknown as Job<DecodeState>)
    if (!this.queued) {
      this.queued = true
      this.scheduler.add(this.task)
    }
  }

  private step(): boolean {
    // The task stays while there is work: a step that finds none ends it (a job asking again re-adds it). Ending
    // it as soon as the queue empties would remove and re-add it on every step of a lone completion.
    if (this.queue.size === 0) {
      this.queued = false
      return true
    }
    for (const [model, jobs] of this.queue) {
      try {
        const started = performance.now()
        const stepped = stepJobs(model, jobs, this.current)
        const ms = Math.max(0.05, performance.now() - started)
        const scale = Math.min(2, Math.max(0.5, this.stepMs / ms))
        this.current = Math.min(this.budget, Math.max(this.budget / 12, this.current * scale))
        this.stats.steps += 1
        this.stats.jobs += stepped.length
        this.stats.largest = Math.max(this.stats.largest, stepped.length)
        for (const job of stepped) jobs.delete(job)
        for (const job of jobs) if (job.finished) jobs.delete(job)
      } catch (error) {
        // The jobs of the failed step are left half-way: each fails when it is next pulled.
        for (const job of jobs) job.failure = { error }
        jobs.clear()
      }
      if (jobs.size === 0) this.queue.delete(model)
    }
    return false
  }
}

/** The batcher of this process's decoding scheduler. */
export const batching = new Batcher(decoding)
