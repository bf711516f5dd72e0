/**
 * The trainer's machinery: following a job's events robustly, summing up its gradient steps, the default
 * idempotency keys, and which checkpoints retention keeps.
 *
 * @internal
 */
import { createHash } from "node:crypto"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import type { Checkpoint } from "../../api/Model.js"
import type { TrainingJobEvent, TrainingJobId } from "../../api/TrainingJob.js"
import type { ApiError } from "../../client/ApiError.js"
import type { Service as TrainingClientService } from "../../client/TrainingClient.js"

/** How the trainer follows a job (defaults: `wait` 10 s, `pollInterval` 1 s, `resumes` 5). */
export interface FollowSettings {
  readonly after?: string | undefined
  readonly wait: Duration.Duration
  readonly pollInterval: Duration.Duration
  readonly resumes: number
}

/**
 * A job's events, each once, up to the terminal one, resumed after a failure that the client's own retries
 * did not get past: the client's follow (long poll, per-page retries with backoff, duplicates dropped within
 * one run) is restarted from the last event seen, at most `resumes` times in a row with exponential backoff
 * from `pollInterval`, and events already emitted before the restart are dropped again here.
 */
export const followEvents = (
  client: TrainingClientService,
  jobId: TrainingJobId,
  settings: FollowSettings
): Stream.Stream<TrainingJobEvent, ApiError> =>
  Stream.suspend(() => {
    const seen = new Set<string>()
    let after = settings.after
    const run = Stream.suspend(() =>
      client.followTrainingJobEvents(jobId, { after, wait: settings.wait, pollInterval: settings.pollInterval })
    ).pipe(
      Stream.filter((event) => {
        if (seen.has(event.id)) return false
        seen.add(event.id)
        after = event.id
        return true
      })
    )
    const resume = Schedule.exponential(settings.pollInterval).pipe(
      Schedule.jittered,
      Schedule.intersect(Schedule.recurs(settings.resumes)),
      Schedule.whileInput((error: ApiError) => error.retryable),
      Schedule.tapInput((error: ApiError) =>
        Effect.logDebug(`effect-rl: resuming the events of training job ${jobId} after ${error.reason}`)
      )
    )
    return Stream.retry(run, resume)
  })

/** What a job's events said, summed up as they come. */
export interface Tally {
  /** Event ids taken into account. */
  readonly seen: Set<string>
  /** `training_started.num_sequences`, once seen (null when the service sent none). */
  numSequences: number | null | undefined
  /** The gradient steps seen. */
  gradientSteps: number
  /** Per metric: the sum of its finite values and how many steps had one. */
  readonly sums: Map<string, { sum: number; count: number }>
}

/** An empty tally. */
export const emptyTally = (): Tally => ({ seen: new Set(), numSequences: undefined, gradientSteps: 0, sums: new Map() })

/** Adds an event to the tally; `false` when it was already counted. */
export const count = (tally: Tally, event: TrainingJobEvent): boolean => {
  if (tally.seen.has(event.id)) return false
  tally.seen.add(event.id)
  if (event.type === "training_started") {
    tally.numSequences = event.data.num_sequences ?? null
  } else if (event.type === "gradient_step") {
    tally.gradientSteps++
    for (const [key, value] of Object.entries(event.data)) {
      if (typeof value !== "number" || !Number.isFinite(value)) continue
      const entry = tally.sums.get(key) ?? { sum: 0, count: 0 }
      entry.sum += value
      entry.count++
      tally.sums.set(key, entry)
    }
  }
  return true
}

/** Each metric's mean over the gradient steps that reported it. */
export const averages = (tally: Tally): Record<string, number> => {
  const out: Record<string, number> = {}
  for (const [key, { sum, count }] of [...tally.sums].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    out[key] = sum / count
  }
  return out
}

/**
 * Whether the events seen may be missing some (a page served out of order can carry the terminal event
 * before steps that came earlier): `training_started` was not seen, or fewer gradient steps than it announced.
 */
export const incomplete = (tally: Tally): boolean =>
  tally.numSequences === undefined || (tally.numSequences !== null && tally.gradientSteps < tally.numSequences)

/** The SHA-256 of a value's JSON, in hex (the first 32 digits). */
export const digest = (value: unknown): string =>
  createHash("sha256").update(JSON.stringify(value)).digest("hex").slice(0, 32)

/** The default idempotency key of a job or a log call: what, on which model, at which step, of which body. */
export const defaultKey = (kind: string, modelId: string, step: number, body: unknown): string =>
  `effect-rl-${kind}-${modelId}-step${step}-${digest(body)}`

/** Which checkpoint steps retention keeps (see `Trainer.prune`). */
export const retained = (
  checkpoints: ReadonlyArray<Checkpoint>,
  options: {
    readonly keepLatest: number
    readonly best?: { readonly metric: string; readonly direction: "max" | "min" } | undefined
    readonly current: number
  }
): Set<number> => {
  const keep = new Set<number>([options.current])
  const byStep = [...checkpoints].sort((a, b) => b.step - a.step)
  for (const checkpoint of byStep.slice(0, Math.max(0, options.keepLatest))) keep.add(checkpoint.step)
  const best = options.best
  if (best !== undefined) {
    let winner: Checkpoint | undefined
    for (const checkpoint of byStep) {
      const value = checkpoint.metrics[best.metric]
      if (value === undefined) continue
      const top = winner?.metrics[best.metric]
      // Latest first, so a tie keeps the later step.
      if (top === undefined || (best.direction === "max" ? value > top : value < top)) winner = checkpoint
    }
    if (winner !== undefined) keep.add(winner.step)
  }
  return keep
}

/** A duration input, decoded, or the default. */
export const durationOr = (input: Duration.DurationInput | undefined, fallback: Duration.DurationInput) =>
  Duration.decode(input ?? fallback)
