/**
 * The checkpoints of the local backend's models: the engine's weights after each training step, with the
 * step's metrics. Step 0 is the base model's initial weights (see `Models.create`). An insert is one
 * statement in a transaction, so a checkpoint is either listed with its weights or not there at all.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { Checkpoint, type CheckpointPage, DeleteCheckpointsResult, type Order } from "../../api/Model.js"
import { catalogVersion, countedWrite } from "./internal/catalogVersion.js"
import { weightsDigest } from "./internal/digest.js"
import {
  CheckpointRecord,
  checkpointColumns,
  decodeCheckpoints,
  insertCheckpoint,
  latestStep,
  requireModel
} from "./internal/rows.js"
import { nowIso, orDieSql } from "./internal/sql.js"
import { corrupt, notFound, type StoreError } from "./StoreError.js"

export {
  /** A stored checkpoint without its weights: the wire `Checkpoint` (it encodes as one) with its model and time. */
  CheckpointRecord,
  /**
   * The count of writes to the models and checkpoints in this process: what a model name resolves to stays the
   * same while it is unchanged (see `internal/catalogVersion.ts` for why that holds).
   */
  catalogVersion
}

/** A checkpoint to store. */
export interface NewCheckpoint {
  /** The training step; unique per model. */
  readonly step: number
  /** The engine's checkpoint bytes. */
  readonly weights: Uint8Array
  /** The step's metrics; values that are not finite numbers are dropped. */
  readonly metrics?: Readonly<Record<string, unknown>> | undefined
}

/** The query of a checkpoint listing: `after` is the id of the last checkpoint of the previous page. */
export interface ListOptions {
  /** The id of the last checkpoint of the previous page. */
  readonly after?: string | undefined
  /** Page size, 1 to 100 (default 20; clamped). */
  readonly limit?: number | undefined
  /** By step, ascending (default) or descending. */
  readonly order?: Order | undefined
}

/** The default page size of the listings. */
export const DEFAULT_LIMIT = 20

/** Clamps a page size to 1..100 (default {@link DEFAULT_LIMIT}). */
export const clampLimit = (limit: number | undefined): number =>
  Math.min(100, Math.max(1, Math.floor(limit ?? DEFAULT_LIMIT)))

/** The checkpoints repository. */
export interface Service {
  /** Stores a checkpoint: `NotFound` without the model, `Conflict` when the step exists. */
  readonly insert: (modelId: string, checkpoint: NewCheckpoint) => Effect.Effect<CheckpointRecord, StoreError>
  /** A page of a model's checkpoints; `NotFound` without the model or the `after` checkpoint. */
  readonly list: (modelId: string, options?: ListOptions) => Effect.Effect<CheckpointPage, StoreError>
  /** A model's checkpoint of the highest step; `NotFound` without the model. */
  readonly latest: (modelId: string) => Effect.Effect<Option.Option<CheckpointRecord>, StoreError>
  /** A model's checkpoint of a step: `NotFound` when there is none. */
  readonly get: (modelId: string, step: number) => Effect.Effect<CheckpointRecord, StoreError>
  /**
   * The weights of a model's checkpoint of a step, verified against the digest written with them: `NotFound`
   * when there is none, `Corrupt` (naming the model and step) when they do not match.
   */
  readonly weights: (modelId: string, step: number) => Effect.Effect<Uint8Array, StoreError>
  /** Deletes a model's checkpoints of the given steps; `NotFound` without the model. */
  readonly remove: (modelId: string, steps: ReadonlyArray<number>) => Effect.Effect<DeleteCheckpointsResult, StoreError>
  /** Every checkpoint of every model, by model then step (for the inference model list). */
  readonly all: Effect.Effect<ReadonlyArray<CheckpointRecord>, StoreError>
}

/** The checkpoints repository service. */
export class Checkpoints extends Context.Tag("effect-rl/local/store/Checkpoints")<Checkpoints, Service>() {}

/** Builds the checkpoints repository over the `SqlClient`. */
export const make: Effect.Effect<Service, never, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const columns = sql.literal(checkpointColumns)

  const insert = (modelId: string, checkpoint: NewCheckpoint) =>
    Effect.gen(function* () {
      yield* requireModel(sql, modelId)
      const now = yield* nowIso
      return yield* insertCheckpoint(sql, { modelId, ...checkpoint, now })
    }).pipe(sql.withTransaction, orDieSql, Effect.withSpan("Checkpoints.insert"))

  const list = (modelId: string, options: ListOptions = {}) =>
    Effect.gen(function* () {
      yield* requireModel(sql, modelId)
      const limit = clampLimit(options.limit)
      const descending = options.order === "desc"
      const clauses = [sql`model_id = ${modelId}`]
      if (options.after !== undefined) {
        const after = yield* sql<{ readonly step: number }>`SELECT step FROM checkpoints
          WHERE id = ${options.after} AND model_id = ${modelId}`
        const step = after[0]?.step
        if (step === undefined) return yield* notFound(`checkpoint ${options.after} of model ${modelId} not found`)
        clauses.push(descending ? sql`step < ${step}` : sql`step > ${step}`)
      }
      const rows = yield* sql`SELECT ${columns} FROM checkpoints WHERE ${sql.and(clauses)}
        ORDER BY step ${sql.literal(descending ? "DESC" : "ASC")} LIMIT ${limit + 1}`.pipe(
        Effect.flatMap(decodeCheckpoints)
      )
      const data = rows
        .slice(0, limit)
        .map((row) => new Checkpoint({ id: row.id, step: row.step, metrics: row.metrics }, { disableValidation: true }))
      return {
        object: "list",
        data,
        first_id: data[0]?.id ?? "",
        last_id: data[data.length - 1]?.id ?? "",
        has_more: rows.length > limit
      } satisfies CheckpointPage
    }).pipe(sql.withTransaction, orDieSql, Effect.withSpan("Checkpoints.list"))

  const latest = (modelId: string) =>
    Effect.gen(function* () {
      yield* requireModel(sql, modelId)
      const rows = yield* sql`SELECT ${columns} FROM checkpoints WHERE model_id = ${modelId}
        ORDER BY step DESC LIMIT 1`.pipe(Effect.flatMap(decodeCheckpoints))
      return Option.fromNullable(rows[0])
    }).pipe(sql.withTransaction, orDieSql)

  const get = (modelId: string, step: number) =>
    sql`SELECT ${columns} FROM checkpoints WHERE model_id = ${modelId} AND step = ${step}`.pipe(
      Effect.flatMap(decodeCheckpoints),
      Effect.flatMap((rows) =>
        rows[0] === undefined
          ? Effect.fail(notFound(`model ${modelId} has no checkpoint at step ${step}`))
          : Effect.succeed(rows[0])
      ),
      orDieSql
    )

  const weights = (modelId: string, step: number) =>
    sql<{
      readonly weights: Uint8Array
      readonly digest: string | null
      readonly name: string
    }>`SELECT c.weights, c.digest, m.entity || '/' || m.project || '/' || m.name AS name
      FROM checkpoints c JOIN models m ON m.id = c.model_id
      WHERE c.model_id = ${modelId} AND c.step = ${step}`.pipe(
      Effect.flatMap((rows) => {
        const row = rows[0]
        if (row === undefined) return Effect.fail(notFound(`model ${modelId} has no checkpoint at step ${step}`))
        if (row.digest !== weightsDigest(row.weights)) {
          return Effect.fail(
            corrupt(
              `checkpoint step ${step} of model ${row.name} is damaged: its weights do not match the digest written with them; delete that checkpoint (or restore a backup of the data directory) and train on from another`
            )
          )
        }
        return Effect.succeed(row.weights)
      }),
      orDieSql,
      Effect.withSpan("Checkpoints.weights")
    )

  const remove = (modelId: string, steps: ReadonlyArray<number>) =>
    Effect.gen(function* () {
      yield* requireModel(sql, modelId)
      const requested = [...new Set(steps)]
      if (requested.length === 0) return new DeleteCheckpointsResult({ deleted_count: 0, not_found_steps: [] })
      const found = yield* sql<{ readonly step: number }>`SELECT step FROM checkpoints
        WHERE model_id = ${modelId} AND ${sql.in("step", requested)}`
      const existing = new Set(found.map((row) => row.step))
      if (existing.size > 0) {
        yield* countedWrite(
          sql`DELETE FROM checkpoints WHERE model_id = ${modelId} AND ${sql.in("step", [...existing])}`
        )
      }
      return new DeleteCheckpointsResult({
        deleted_count: existing.size,
        not_found_steps: requested.filter((step) => !existing.has(step))
      })
    }).pipe(sql.withTransaction, orDieSql, Effect.withSpan("Checkpoints.remove"))

  const all = sql`SELECT ${columns} FROM checkpoints ORDER BY model_id, step`.pipe(
    Effect.flatMap(decodeCheckpoints),
    orDieSql
  )

  return { insert, list, latest, get, weights, remove, all }
})

/** The checkpoints repository layer. */
export const layer: Layer.Layer<Checkpoints, never, SqlClient.SqlClient> = Layer.effect(Checkpoints, make)

/** The latest step of a model, if it has any checkpoint (in the caller's transaction, if any). */
export const latestStepOf = (modelId: string): Effect.Effect<Option.Option<number>, never, SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => latestStep(sql, modelId)).pipe(Effect.orDie)
