/**
 * Training jobs of the local backend: enqueued by the job endpoints, claimed by the worker one at a time per
 * model in creation order, and ended by `succeed` (a new checkpoint, the job's step and its
 * `training_ended` event in one transaction, so a client that sees the event finds the checkpoint) or `fail`
 * (the status and a `training_failed` event, together).
 *
 * ## Crash recovery
 * `recover` fails every job left `RUNNING` (the process died during it) with a `training_failed` event
 * ("the server stopped while the job was running"); {@link layer} runs it when built. Pending jobs stay
 * pending and are claimed again.
 *
 * ## Request bodies
 * A job keeps its request body (an RL job's trajectory groups, often the largest thing stored) only until it
 * ends: nothing reads it after the claim but a claim again after a crash, and the log endpoint keeps the
 * trajectories. `succeed` and `fail` release it (`request` then answers `null`); `recover` releases those
 * that ended before a store written by an earlier version was opened.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import * as Queue from "effect/Queue"
import * as Schema from "effect/Schema"
import type { JsonObject } from "../../api/Json.js"
import { TrainingJobStatus } from "../../api/TrainingJob.js"
import {
  type CheckpointRecord,
  insertCheckpoint,
  insertEvent as insertEventRow,
  latestStep,
  requireModel
} from "./internal/rows.js"
import { decodeRows, json, nowIso, orDieSql } from "./internal/sql.js"
import { JobEvents } from "./JobEvents.js"
import { conflict, notFound, type StoreError } from "./StoreError.js"

/** The message of a job failed by crash recovery. */
export const INTERRUPTED_MESSAGE = "the server stopped while the job was running"

/** The kind of a job. */
export const JobKind = Schema.Literal("rl", "sft")
/** @see {@link JobKind} */
export type JobKind = typeof JobKind.Type

/**
 * The status of a job, as the published `TrainingJobStatus` names them: `PENDING` until the worker claims it,
 * `RUNNING`, then `COMPLETED` or `FAILED` (`CANCELLED` is allowed by the table; nothing cancels a job yet).
 */
export const JobStatus = TrainingJobStatus
/** @see {@link JobStatus} */
export type JobStatus = typeof JobStatus.Type

/**
 * A stored job, in the published record's shape (`TrainingJobResponse`: `progress` the share of its gradient
 * steps done, null before it starts; `training_start` and `training_end` when it was claimed and ended;
 * `updated_at` its last change), and the embedded backend's own `kind` and `step` (the checkpoint step a
 * completed job made). Its `request` body is read with `request`. Stores written by earlier versions are
 * migrated to it (migration 8).
 */
export const JobRecord = Schema.Struct({
  id: Schema.String,
  model_id: Schema.String,
  kind: JobKind,
  status: JobStatus,
  progress: Schema.NullOr(Schema.Number),
  error_message: Schema.NullOr(Schema.String),
  training_start: Schema.NullOr(Schema.String),
  training_end: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  updated_at: Schema.String,
  step: Schema.NullOr(Schema.Int)
})
/** @see {@link JobRecord} */
export type JobRecord = typeof JobRecord.Type

/** A claimed job: its record (now `RUNNING`) and its request body. */
export interface Claimed {
  /** The job. */
  readonly job: JobRecord
  /** The request body it was created with. */
  readonly request: unknown
}

/** The checkpoint a succeeding job leaves. */
export interface Result {
  /** The engine's checkpoint bytes. */
  readonly weights: Uint8Array
  /** The step's metrics (non-finite values dropped). */
  readonly metrics?: Readonly<Record<string, unknown>> | undefined
  /** The new step (default: the model's latest step + 1). */
  readonly step?: number | undefined
}

/** The training jobs repository. */
export interface Service {
  /** Enqueues a job with its request body (any JSON): `NotFound` without the model. */
  readonly enqueue: (modelId: string, kind: JobKind, request: unknown) => Effect.Effect<JobRecord, StoreError>
  /** A job: `NotFound` when there is none. */
  readonly get: (id: string) => Effect.Effect<JobRecord, StoreError>
  /** A job's request body (`null` once the job has ended: see "Request bodies"): `NotFound` without the job. */
  readonly request: (id: string) => Effect.Effect<unknown, StoreError>
  /** A model's jobs (or every job), in creation order. */
  readonly list: (modelId?: string) => Effect.Effect<ReadonlyArray<JobRecord>, StoreError>
  /**
   * Claims the oldest pending job (of the model, or of any model) whose model has no running job, and marks
   * it `RUNNING`.
   */
  readonly claim: (modelId?: string) => Effect.Effect<Option.Option<Claimed>, StoreError>
  /**
   * Ends a running job: stores its checkpoint, marks it `COMPLETED` with the step and appends
   * `training_ended`, in one transaction. `Conflict` unless running, or when the step exists.
   */
  readonly succeed: (
    id: string,
    result: Result
  ) => Effect.Effect<{ readonly job: JobRecord; readonly checkpoint: CheckpointRecord }, StoreError>
  /** Ends a pending or running job as `FAILED` with a `training_failed` event; `Conflict` when it has ended. */
  readonly fail: (id: string, message: string) => Effect.Effect<JobRecord, StoreError>
  /**
   * Claims a job like `claim`, waiting up to `waitMs` for one to become claimable (a job enqueued, or a
   * running one ended) when there is none yet; woken in-process, timed on the `Clock`.
   */
  readonly claimNext: (waitMs: number, modelId?: string) => Effect.Effect<Option.Option<Claimed>, StoreError>
  /**
   * Fails every job left `RUNNING` (see the module comment) and releases the request bodies of jobs that
   * ended; returns how many jobs it failed.
   */
  readonly recover: Effect.Effect<number, StoreError>
}

/** The training jobs repository service. */
export class Jobs extends Context.Tag("effect-rl/local/store/Jobs")<Jobs, Service>() {}

/** What an ended job's request body is replaced by (JSON `null`; the column takes no SQL NULL). */
const RELEASED = "null"

const decodeJobs = decodeRows(JobRecord, "training job")
const decodeRequest = decodeRows(Schema.Struct({ request: Schema.parseJson() }), "training job request")
const columns =
  "id, model_id, kind, status, progress, error_message, training_start, training_end, created_at, updated_at, step"

/** Builds the training jobs repository over the `SqlClient`; appends its events through `JobEvents`. */
export const make: Effect.Effect<Service, never, SqlClient.SqlClient | JobEvents> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const events = yield* JobEvents
  const cols = sql.literal(columns)
  const changed = yield* PubSub.unbounded<void>()
  const signal = PubSub.publish(changed, undefined)

  const get = (id: string) =>
    sql`SELECT ${cols} FROM training_jobs WHERE id = ${id}`.pipe(
      Effect.flatMap(decodeJobs),
      Effect.flatMap((rows) =>
        rows[0] === undefined ? Effect.fail(notFound(`training job ${id} not found`)) : Effect.succeed(rows[0])
      )
    )

  const enqueue = (modelId: string, kind: JobKind, request: unknown) =>
    Effect.gen(function* () {
      yield* requireModel(sql, modelId)
      const now = yield* nowIso
      const job: JobRecord = {
        id: crypto.randomUUID(),
        model_id: modelId,
        kind,
        status: "PENDING",
        progress: null,
        error_message: null,
        training_start: null,
        training_end: null,
        created_at: now,
        updated_at: now,
        step: null
      }
      yield* sql`INSERT INTO training_jobs ${sql.insert({ ...job, request: json(request) })}`
      return job
    }).pipe(sql.withTransaction, orDieSql, Effect.tap(signal), Effect.withSpan("Jobs.enqueue"))

  const request = (id: string) =>
    sql`SELECT request FROM training_jobs WHERE id = ${id}`.pipe(
      Effect.flatMap(decodeRequest),
      Effect.flatMap((rows) =>
        rows[0] === undefined ? Effect.fail(notFound(`training job ${id} not found`)) : Effect.succeed(rows[0].request)
      ),
      orDieSql
    )

  const list = (modelId?: string) =>
    (modelId === undefined
      ? sql`SELECT ${cols} FROM training_jobs ORDER BY seq`
      : sql`SELECT ${cols} FROM training_jobs WHERE model_id = ${modelId} ORDER BY seq`
    ).pipe(Effect.flatMap(decodeJobs), orDieSql)

  const claim = (modelId?: string) =>
    Effect.gen(function* () {
      const ofModel = modelId === undefined ? sql`1 = 1` : sql`j.model_id = ${modelId}`
      const next = yield* sql<{ readonly id: string }>`SELECT j.id FROM training_jobs j
        WHERE j.status = 'PENDING' AND ${ofModel} AND NOT EXISTS (
          SELECT 1 FROM training_jobs r WHERE r.model_id = j.model_id AND r.status = 'RUNNING')
        ORDER BY j.seq LIMIT 1`
      const id = next[0]?.id
      if (id === undefined) return Option.none<Claimed>()
      const now = yield* nowIso
      yield* sql`UPDATE training_jobs SET status = 'RUNNING', progress = 0, training_start = ${now}, updated_at = ${now}
        WHERE id = ${id}`
      return Option.some({ job: yield* get(id), request: yield* request(id) })
    }).pipe(sql.withTransaction, orDieSql, Effect.withSpan("Jobs.claim"))

  const succeed = (id: string, result: Result) =>
    Effect.gen(function* () {
      const job = yield* get(id)
      if (job.status !== "RUNNING") return yield* conflict(`training job ${id} is ${job.status}, not RUNNING`)
      const now = yield* nowIso
      const step = result.step ?? Option.getOrElse(yield* latestStep(sql, job.model_id), () => -1) + 1
      const checkpoint = yield* insertCheckpoint(sql, { modelId: job.model_id, ...result, step, now })
      yield* sql`UPDATE training_jobs SET status = 'COMPLETED', progress = 1, training_end = ${now}, updated_at = ${now},
        step = ${step}, request = ${RELEASED} WHERE id = ${id}`
      yield* insertEvent(id, "training_ended", { step }, now)
      return { job: yield* get(id), checkpoint }
    }).pipe(
      sql.withTransaction,
      orDieSql,
      Effect.tap(events.notify(id)),
      Effect.tap(signal),
      Effect.withSpan("Jobs.succeed")
    )

  const insertEvent = (id: string, type: "training_ended" | "training_failed", data: JsonObject, now: string) =>
    insertEventRow(sql, { jobId: id, type, data, now })

  const failJob = (id: string, message: string, now: string) =>
    Effect.zipRight(
      sql`UPDATE training_jobs SET status = 'FAILED', training_end = ${now}, updated_at = ${now},
        error_message = ${message}, request = ${RELEASED} WHERE id = ${id}`,
      insertEvent(id, "training_failed", { error_message: message }, now)
    )

  const fail = (id: string, message: string) =>
    Effect.gen(function* () {
      const job = yield* get(id)
      if (job.status !== "PENDING" && job.status !== "RUNNING") {
        return yield* conflict(`training job ${id} has already ended (${job.status})`)
      }
      yield* failJob(id, message, yield* nowIso)
      return yield* get(id)
    }).pipe(
      sql.withTransaction,
      orDieSql,
      Effect.tap(events.notify(id)),
      Effect.tap(signal),
      Effect.withSpan("Jobs.fail")
    )

  const recover = Effect.gen(function* () {
    const running = yield* sql<{ readonly id: string }>`SELECT id FROM training_jobs WHERE status = 'RUNNING'`
    const now = yield* nowIso
    yield* Effect.forEach(running, (row) => failJob(row.id, INTERRUPTED_MESSAGE, now), { discard: true })
    yield* sql`UPDATE training_jobs SET request = ${RELEASED}
      WHERE status IN ('COMPLETED', 'FAILED', 'CANCELLED') AND request <> ${RELEASED}`
    return running.map((row) => row.id)
  }).pipe(
    sql.withTransaction,
    orDieSql,
    Effect.tap((ids) => Effect.forEach(ids, events.notify, { discard: true })),
    Effect.map((ids) => ids.length),
    Effect.withSpan("Jobs.recover")
  )

  const claimNext = (waitMs: number, modelId?: string) =>
    Effect.gen(function* () {
      // Subscribe before the first claim, so a change between the claim and the wait is not missed.
      const wakeups = yield* PubSub.subscribe(changed)
      const deadline = (yield* Clock.currentTimeMillis) + waitMs
      while (true) {
        const claimed = yield* claim(modelId)
        if (Option.isSome(claimed)) return claimed
        const remaining = deadline - (yield* Clock.currentTimeMillis)
        if (remaining <= 0) return claimed
        yield* Effect.timeoutOption(Queue.take(wakeups), remaining)
      }
    }).pipe(Effect.scoped)

  return {
    enqueue,
    get: (id: string) => orDieSql(get(id)),
    request,
    list,
    claim,
    claimNext,
    succeed,
    fail,
    recover
  }
})

/** Options of {@link layer}. */
export interface Options {
  /** Whether to run `recover` when the layer is built (default true: the server's start). */
  readonly recoverOnStart?: boolean | undefined
}

/** The training jobs repository layer; fails the jobs a crash left running, unless told not to. */
export const layer = (options: Options = {}): Layer.Layer<Jobs, never, SqlClient.SqlClient | JobEvents> =>
  Layer.effect(
    Jobs,
    Effect.tap(make, (jobs) => (options.recoverOnStart === false ? Effect.void : Effect.orDie(jobs.recover)))
  )
