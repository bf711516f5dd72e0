/**
 * Logged trajectory groups: the log endpoint's request stored under (model, split, step), with the metrics
 * computed from it (see `Metrics`). The step is the model's latest checkpoint step unless given.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { compute } from "../../api/internal/metrics.js"
import type { LogRequest } from "../../api/Trajectory.js"
import { CheckpointMetrics, latestStep, requireModel } from "./internal/rows.js"
import { decodeRows, json, nowIso, orDieSql } from "./internal/sql.js"
import { corrupt, type StoreError } from "./StoreError.js"

/** A stored log entry without its groups. */
export const LogRecord = Schema.Struct({
  id: Schema.String,
  model_id: Schema.String,
  split: Schema.String,
  step: Schema.Int,
  metrics: CheckpointMetrics,
  created_at: Schema.String
})
/** @see {@link LogRecord} */
export type LogRecord = typeof LogRecord.Type

const LogRow = Schema.Struct({ ...LogRecord.fields, metrics: Schema.parseJson(CheckpointMetrics) })
const decodeLogs = decodeRows(LogRow, "log entry")

/** The logs repository. */
export interface Service {
  /**
   * Stores a log request's groups under its split and the step (default: the model's latest step, 0 without
   * checkpoints), with their metrics; `NotFound` without the model.
   */
  readonly record: (
    modelId: string,
    request: LogRequest,
    step?: number | undefined
  ) => Effect.Effect<LogRecord, StoreError>
  /** A model's log entries (of a split, when given), oldest first. */
  readonly list: (modelId: string, split?: string | undefined) => Effect.Effect<ReadonlyArray<LogRecord>, StoreError>
  /** The groups of a log entry, as stored (JSON). */
  readonly groups: (id: string) => Effect.Effect<Option.Option<unknown>, StoreError>
}

/** The logs repository service. */
export class Logs extends Context.Tag("effect-rl/local/store/Logs")<Logs, Service>() {}

/** Builds the logs repository over the `SqlClient`. */
export const make: Effect.Effect<Service, never, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient

  const record = (modelId: string, request: LogRequest, step?: number | undefined) =>
    Effect.gen(function* () {
      yield* requireModel(sql, modelId)
      const entry: LogRecord = {
        id: crypto.randomUUID(),
        model_id: modelId,
        split: request.split,
        step: step ?? Option.getOrElse(yield* latestStep(sql, modelId), () => 0),
        metrics: compute(request.trajectory_groups),
        created_at: yield* nowIso
      }
      yield* sql`INSERT INTO logs ${sql.insert({
        ...entry,
        metrics: json(entry.metrics),
        trajectory_groups: json(request.trajectory_groups)
      })}`
      return entry
    }).pipe(sql.withTransaction, orDieSql, Effect.withSpan("Logs.record"))

  const list = (modelId: string, split?: string | undefined) =>
    (split === undefined
      ? sql`SELECT id, model_id, split, step, metrics, created_at FROM logs WHERE model_id = ${modelId}
          ORDER BY rowid`
      : sql`SELECT id, model_id, split, step, metrics, created_at FROM logs
          WHERE model_id = ${modelId} AND split = ${split} ORDER BY rowid`
    ).pipe(Effect.flatMap(decodeLogs), orDieSql)

  const groups = (id: string) =>
    sql<{ readonly trajectory_groups: string }>`SELECT trajectory_groups FROM logs WHERE id = ${id}`.pipe(
      Effect.flatMap((rows) =>
        rows[0] === undefined
          ? Effect.succeedNone
          : Effect.map(
              Effect.try({
                try: (): unknown => JSON.parse(rows[0]!.trajectory_groups),
                catch: () => corrupt(`the groups of log entry ${id} are not JSON`)
              }),
              Option.some
            )
      ),
      orDieSql
    )

  return { record, list, groups }
})

/** The logs repository layer. */
export const layer: Layer.Layer<Logs, never, SqlClient.SqlClient> = Layer.effect(Logs, make)
