/**
 * The events of training jobs: appended in order (a per-job `seq`), listed as cursor pages, and waited for.
 *
 * `waitForEvents` is the data side of the events endpoint's long poll (`wait_ms`): it returns as soon as an
 * event after the cursor exists, woken in-process by a `PubSub` that every append publishes to after its
 * commit, or when the time is up (on the `Clock`, so tests drive it with `TestClock`).
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as PubSub from "effect/PubSub"
import * as Queue from "effect/Queue"
import type { JsonObject } from "../../api/Json.js"
import type { CursorPage } from "../../api/Model.js"
import type { TrainingJobEventType } from "../../api/TrainingJob.js"
import { clampLimit } from "./Checkpoints.js"
import { decodeEvents, type EventItem, insertEvents, type NewEvent } from "./internal/rows.js"
import { nowIso, orDieSql } from "./internal/sql.js"
import { notFound, type StoreError } from "./StoreError.js"

/** An event to append ({@link Service.appendAll}): its type and data. */
export type { NewEvent }

/** A job event as listed: `{id, type, data}` (the wire `TrainingJobEvent`). */
export type JobEvent = typeof EventItem.Type

/** The query of an event listing: `after` is the id of the last event seen. */
export interface ListOptions {
  /** The id of the last event seen. */
  readonly after?: string | undefined
  /** Page size, 1 to 100 (default 20; clamped). */
  readonly limit?: number | undefined
}

/** The job events repository. */
export interface Service {
  /** Appends an event to a job and wakes its waiters: `NotFound` without the job. */
  readonly append: (jobId: string, type: TrainingJobEventType, data?: JsonObject) => Effect.Effect<JobEvent, StoreError>
  /**
   * Appends events to a job in order, in one transaction, and wakes its waiters once: `NotFound` without the
   * job. The training worker writes a job's steps this way, as many as came since its last write.
   */
  readonly appendAll: (
    jobId: string,
    events: ReadonlyArray<NewEvent>
  ) => Effect.Effect<ReadonlyArray<JobEvent>, StoreError>
  /** A page of a job's events, oldest first; `NotFound` without the job or the `after` event. */
  readonly list: (jobId: string, options?: ListOptions) => Effect.Effect<CursorPage<JobEvent>, StoreError>
  /**
   * Waits until the job has an event after `after` (any event when undefined) or `waitMs` has passed;
   * true when there is one. `NotFound` without the job or the `after` event.
   */
  readonly waitForEvents: (
    jobId: string,
    after: string | undefined,
    waitMs: number
  ) => Effect.Effect<boolean, StoreError>
  /**
   * Wakes the waiters of a job. `append` does it; call it after committing events written inside a wider
   * transaction (as `Jobs` does).
   */
  readonly notify: (jobId: string) => Effect.Effect<void>
}

/** The job events repository service. */
export class JobEvents extends Context.Tag("effect-rl/local/store/JobEvents")<JobEvents, Service>() {}

/** Builds the job events repository over the `SqlClient`. */
export const make: Effect.Effect<Service, never, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const appended = yield* PubSub.unbounded<string>()

  const requireJob = (jobId: string) =>
    Effect.flatMap(sql`SELECT 1 AS found FROM training_jobs WHERE id = ${jobId}`, (rows) =>
      rows.length === 0 ? Effect.fail(notFound(`training job ${jobId} not found`)) : Effect.void
    )

  /** The seq of the `after` event (0 when undefined). */
  const seqAfter = (jobId: string, after: string | undefined) =>
    after === undefined
      ? Effect.succeed(0)
      : Effect.flatMap(
          sql<{ readonly seq: number }>`SELECT seq FROM job_events WHERE id = ${after} AND job_id = ${jobId}`,
          (rows) =>
            rows[0] === undefined
              ? Effect.fail(notFound(`event ${after} of training job ${jobId} not found`))
              : Effect.succeed(rows[0].seq)
        )

  const notify = (jobId: string) => Effect.asVoid(PubSub.publish(appended, jobId))

  const appendAll = (jobId: string, events: ReadonlyArray<NewEvent>) =>
    Effect.gen(function* () {
      yield* requireJob(jobId)
      return yield* insertEvents(sql, { jobId, events, now: yield* nowIso })
    }).pipe(
      sql.withTransaction,
      orDieSql,
      Effect.tap(notify(jobId)),
      Effect.withSpan("JobEvents.appendAll", { attributes: { events: events.length } })
    )

  const append = (jobId: string, type: TrainingJobEventType, data: JsonObject = {}) =>
    Effect.map(appendAll(jobId, [{ type, data }]), (appended) => appended[0]!).pipe(Effect.withSpan("JobEvents.append"))

  const list = (jobId: string, options: ListOptions = {}) =>
    Effect.gen(function* () {
      yield* requireJob(jobId)
      const limit = clampLimit(options.limit)
      const seq = yield* seqAfter(jobId, options.after)
      const rows = yield* sql`SELECT id, type, data FROM job_events WHERE job_id = ${jobId} AND seq > ${seq}
        ORDER BY seq LIMIT ${limit + 1}`.pipe(Effect.flatMap(decodeEvents))
      const data = rows.slice(0, limit)
      return {
        object: "list",
        data,
        first_id: data[0]?.id ?? "",
        last_id: data[data.length - 1]?.id ?? "",
        has_more: rows.length > limit
      } satisfies CursorPage<JobEvent>
    }).pipe(sql.withTransaction, orDieSql)

  const waitForEvents = (jobId: string, after: string | undefined, waitMs: number) =>
    Effect.gen(function* () {
      // Subscribe before the first check, so an append between the check and the wait is not missed.
      const wakeups = yield* PubSub.subscribe(appended)
      yield* requireJob(jobId)
      const seq = yield* seqAfter(jobId, after)
      const deadline = (yield* Clock.currentTimeMillis) + waitMs
      while (true) {
        const next = yield* sql`SELECT 1 AS found FROM job_events WHERE job_id = ${jobId} AND seq > ${seq} LIMIT 1`
        if (next.length > 0) return true
        const remaining = deadline - (yield* Clock.currentTimeMillis)
        if (remaining <= 0) return false
        yield* Queue.take(wakeups).pipe(Effect.repeat({ until: (id) => id === jobId }), Effect.timeoutOption(remaining))
      }
    }).pipe(Effect.scoped, orDieSql, Effect.withSpan("JobEvents.waitForEvents"))

  return { append, appendAll, list, waitForEvents, notify }
})

/** The job events repository layer. */
export const layer: Layer.Layer<JobEvents, never, SqlClient.SqlClient> = Layer.effect(JobEvents, make)
