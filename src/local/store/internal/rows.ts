import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { JsonObject } from "../../../api/Json.js"
import { Checkpoint, CheckpointId, ModelId } from "../../../api/Model.js"
import { TrainingJobEventType } from "../../../api/TrainingJob.js"
import { conflict, notFound, type StoreError } from "../StoreError.js"
import { countedWrite } from "./catalogVersion.js"
import { weightsDigest } from "./digest.js"
import { decodeRows, isUniqueViolation, json } from "./sql.js"

/** Checkpoint metrics: finite numbers by name. */
export const CheckpointMetrics = Schema.Record({ key: Schema.String, value: Schema.Finite })

/** A stored checkpoint without its weights. */
export class CheckpointRecord extends Checkpoint.extend<CheckpointRecord>("effect-rl/local/CheckpointRecord")({
  model_id: ModelId,
  created_at: Schema.String
}) {}

const CheckpointRow = Schema.Struct({
  id: CheckpointId,
  model_id: ModelId,
  step: Schema.Int,
  metrics: Schema.parseJson(CheckpointMetrics),
  created_at: Schema.String
})

/** Decodes checkpoint rows (`id, model_id, step, metrics, created_at`). */
export const decodeCheckpoints = (rows: ReadonlyArray<unknown>) =>
  Effect.map(decodeRows(CheckpointRow, "checkpoint")(rows), (decoded) =>
    decoded.map((row) => new CheckpointRecord(row, { disableValidation: true }))
  )

/** The columns of a checkpoint record. */
export const checkpointColumns = "id, model_id, step, metrics, created_at"

/** The finite numbers of a metrics record (a gradient step's nulls and non-finite values dropped). */
export const finiteMetrics = (metrics: Readonly<Record<string, unknown>> | undefined): Record<string, number> => {
  const out: Record<string, number> = {}
  for (const [key, value] of Object.entries(metrics ?? {})) {
    if (typeof value === "number" && Number.isFinite(value)) out[key] = value
  }
  return out
}

/** The bytes of weights as a `Buffer`, which the driver binds as a BLOB. */
const blob = (weights: Uint8Array): Buffer => Buffer.from(weights.buffer, weights.byteOffset, weights.byteLength)

/** Inserts a checkpoint row (in the caller's transaction, if any): `Conflict` when the step exists. */
export const insertCheckpoint = (
  sql: SqlClient.SqlClient,
  input: {
    readonly modelId: string
    readonly step: number
    readonly weights: Uint8Array
    readonly metrics?: Readonly<Record<string, unknown>> | undefined
    readonly now: string
  }
): Effect.Effect<CheckpointRecord, StoreError | SqlError> => {
  const record = new CheckpointRecord(
    {
      id: CheckpointId.make(crypto.randomUUID()),
      model_id: input.modelId as ModelId,
      step: input.step,
      metrics: finiteMetrics(input.metrics),
      created_at: input.now
    },
    { disableValidation: true }
  )
  return countedWrite(
    sql`INSERT INTO checkpoints ${sql.insert({
      id: record.id,
      model_id: record.model_id,
      step: record.step,
      metrics: json(record.metrics),
      weights: blob(input.weights),
      digest: weightsDigest(input.weights),
      created_at: record.created_at
    })}`
  ).pipe(
    Effect.catchIf(isUniqueViolation, () =>
      Effect.fail(conflict(`model ${input.modelId} already has a checkpoint at step ${input.step}`))
    ),
    Effect.as(record)
  )
}

/** The latest step of a model, if it has a checkpoint. */
export const latestStep = (sql: SqlClient.SqlClient, modelId: string): Effect.Effect<Option.Option<number>, SqlError> =>
  Effect.map(
    sql<{ readonly step: number | null }>`SELECT MAX(step) AS step FROM checkpoints WHERE model_id = ${modelId}`,
    (rows) => Option.fromNullable(rows[0]?.step)
  )

/** Fails with `NotFound` unless the model exists. */
export const requireModel = (sql: SqlClient.SqlClient, modelId: string): Effect.Effect<void, StoreError | SqlError> =>
  Effect.flatMap(sql`SELECT 1 AS found FROM models WHERE id = ${modelId}`, (rows) =>
    rows.length === 0 ? Effect.fail(notFound(`model ${modelId} not found`)) : Effect.void
  )

/** A job event as the events listing returns it. */
export const EventItem = Schema.Struct({
  id: Schema.String,
  type: TrainingJobEventType,
  data: JsonObject
})

const EventRow = Schema.Struct({
  id: Schema.String,
  type: TrainingJobEventType,
  data: Schema.parseJson(JsonObject)
})

/** Decodes event rows (`id, type, data`). */
export const decodeEvents = decodeRows(EventRow, "job event")

/** An event to append: its type and data. */
export interface NewEvent {
  readonly type: TrainingJobEventType
  readonly data: JsonObject
}

/**
 * Appends events to a job, in order (in the caller's transaction, if any), and marks the job updated once (when
 * any is a `gradient_step`, also moving its `progress`); the caller notifies waiters after commit.
 */
export const insertEvents = (
  sql: SqlClient.SqlClient,
  input: { readonly jobId: string; readonly events: ReadonlyArray<NewEvent>; readonly now: string }
): Effect.Effect<Array<typeof EventItem.Type>, SqlError> =>
  Effect.gen(function* () {
    const inserted: Array<typeof EventItem.Type> = []
    for (const event of input.events) {
      const id = crypto.randomUUID()
      yield* sql`INSERT INTO job_events (id, job_id, seq, type, data, created_at)
        SELECT ${id}, ${input.jobId}, COALESCE(MAX(seq), 0) + 1, ${event.type}, ${json(event.data)}, ${input.now}
        FROM job_events WHERE job_id = ${input.jobId}`
      inserted.push({ id, type: event.type, data: event.data })
    }
    if (input.events.some((event) => event.type === "gradient_step")) {
      // The job's progress: its gradient steps so far over the number its `training_started` announced.
      yield* sql`UPDATE training_jobs SET updated_at = ${input.now}, progress = COALESCE((
          SELECT MIN(1.0, CAST((SELECT COUNT(*) FROM job_events WHERE job_id = ${input.jobId}
            AND type = 'gradient_step') AS REAL) / n)
          FROM (SELECT json_extract(data, '$.num_sequences') AS n FROM job_events
            WHERE job_id = ${input.jobId} AND type = 'training_started' ORDER BY seq DESC LIMIT 1)
          WHERE n > 0), progress)
        WHERE id = ${input.jobId}`
    } else {
      yield* sql`UPDATE training_jobs SET updated_at = ${input.now} WHERE id = ${input.jobId}`
    }
    return inserted
  })

/** {@link insertEvents} of one event. */
export const insertEvent = (
  sql: SqlClient.SqlClient,
  input: {
    readonly jobId: string
    readonly type: TrainingJobEventType
    readonly data: JsonObject
    readonly now: string
  }
): Effect.Effect<typeof EventItem.Type, SqlError> =>
  Effect.map(
    insertEvents(sql, { jobId: input.jobId, events: [{ type: input.type, data: input.data }], now: input.now }),
    (inserted) => inserted[0]!
  )
