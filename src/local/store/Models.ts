/**
 * The models of the local backend: created with `return_existing` semantics (the name is unique within an
 * entity's project), found by id or by name, deleted with their checkpoints, jobs and logs.
 *
 * A model is created together with its step 0 checkpoint (the base model's initial weights) when the caller
 * gives `initialWeights`, in one transaction: a model without its step 0 is never visible.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { DeleteModelResult, Model, type ModelCreate, type ModelId } from "../../api/Model.js"
import { countedWrite } from "./internal/catalogVersion.js"
import { type CheckpointRecord, insertCheckpoint } from "./internal/rows.js"
import { decodeRows, isUniqueViolation, nowIso, orDieSql } from "./internal/sql.js"
import { conflict, notFound, type StoreError } from "./StoreError.js"

/** The entity of models created without one: the local backend's single user. */
export const DEFAULT_ENTITY = "local"

/** A stored model: the wire `Model` (it encodes as one) with its creation time. */
export class ModelRecord extends Model.extend<ModelRecord>("effect-rl/local/ModelRecord")({
  created_at: Schema.String
}) {}

/** Options of {@link Service.create}. */
export interface CreateOptions<E, R> {
  /**
   * The base model's initial weights, stored as step 0 when the model is created (not when it exists). It
   * runs inside the creation's transaction, which holds the database: keep it quick and free of store calls
   * from other fibers.
   */
  readonly initialWeights?: Effect.Effect<Uint8Array, E, R> | undefined
}

/** The result of {@link Service.create}: the model, whether it is new, and its step 0 when one was stored. */
export interface Created {
  /** The model. */
  readonly model: ModelRecord
  /** False when an existing model was returned (`return_existing`). */
  readonly created: boolean
  /** The step 0 checkpoint stored with a new model, when `initialWeights` was given. */
  readonly initialCheckpoint: Option.Option<CheckpointRecord>
}

/** The models repository. */
export interface Service {
  /**
   * Creates a model. When the name is taken in that entity's project, returns the existing model with
   * `return_existing: true`, else fails with `Conflict`. A null or missing entity is the default entity.
   */
  readonly create: <E = never, R = never>(
    request: ModelCreate,
    options?: CreateOptions<E, R>
  ) => Effect.Effect<Created, StoreError | E, R>
  /** The model of an id: `NotFound` when there is none. */
  readonly get: (id: string) => Effect.Effect<ModelRecord, StoreError>
  /** The model of a name in an entity's project (a null entity is the default one). */
  readonly find: (
    entity: string | null | undefined,
    project: string,
    name: string
  ) => Effect.Effect<Option.Option<ModelRecord>, StoreError>
  /** Every model, oldest first. */
  readonly list: Effect.Effect<ReadonlyArray<ModelRecord>, StoreError>
  /** Deletes a model with its checkpoints, jobs, events and logs; `NotFound` when there is none. */
  readonly remove: (id: string) => Effect.Effect<DeleteModelResult, StoreError>
}

/** The models repository service. */
export class Models extends Context.Tag("effect-rl/local/store/Models")<Models, Service>() {}

/** Options of {@link make} and {@link layer}. */
export interface Options {
  /** The entity of models created without one (default {@link DEFAULT_ENTITY}). */
  readonly defaultEntity?: string | undefined
}

const decodeModels = decodeRows(ModelRecord, "model")
const columns = "id, entity, project, name, base_model, run_id, created_at"

/** Builds the models repository over the `SqlClient`. */
export const make = (options: Options = {}): Effect.Effect<Service, never, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const defaultEntity = options.defaultEntity ?? DEFAULT_ENTITY

    const findRow = (entity: string, project: string, name: string) =>
      sql`SELECT ${sql.literal(columns)} FROM models
        WHERE entity = ${entity} AND project = ${project} AND name = ${name}`.pipe(
        Effect.flatMap(decodeModels),
        Effect.map((rows) => Option.fromNullable(rows[0]))
      )

    const create = <E, R>(
      request: ModelCreate,
      createOptions: CreateOptions<E, R> = {}
    ): Effect.Effect<Created, StoreError | E, R> => {
      const entity = request.entity ?? defaultEntity
      return Effect.gen(function* () {
        const existing = yield* findRow(entity, request.project, request.name)
        if (Option.isSome(existing)) {
          if (request.return_existing === true) {
            return { model: existing.value, created: false, initialCheckpoint: Option.none() }
          }
          return yield* conflict(`model ${request.name} already exists in ${entity}/${request.project}`)
        }
        const now = yield* nowIso
        const model = new ModelRecord(
          {
            id: crypto.randomUUID() as ModelId,
            entity,
            project: request.project,
            name: request.name,
            base_model: request.base_model,
            run_id: null,
            created_at: now
          },
          { disableValidation: true }
        )
        yield* sql`INSERT INTO models ${sql.insert({ ...model })}`.pipe(
          Effect.catchIf(isUniqueViolation, () =>
            Effect.fail(conflict(`model ${request.name} already exists in ${entity}/${request.project}`))
          )
        )
        const initialWeights = createOptions.initialWeights
        const initialCheckpoint =
          initialWeights === undefined
            ? Option.none<CheckpointRecord>()
            : Option.some(
                yield* Effect.flatMap(initialWeights, (weights) =>
                  insertCheckpoint(sql, { modelId: model.id, step: 0, weights, metrics: {}, now })
                )
              )
        return { model, created: true, initialCheckpoint }
      }).pipe(sql.withTransaction, orDieSql, Effect.withSpan("Models.create"))
    }

    const get = (id: string) =>
      sql`SELECT ${sql.literal(columns)} FROM models WHERE id = ${id}`.pipe(
        Effect.flatMap(decodeModels),
        Effect.flatMap((rows) =>
          rows[0] === undefined ? Effect.fail(notFound(`model ${id} not found`)) : Effect.succeed(rows[0])
        ),
        orDieSql
      )

    const find = (entity: string | null | undefined, project: string, name: string) =>
      orDieSql(findRow(entity ?? defaultEntity, project, name))

    const list = sql`SELECT ${sql.literal(columns)} FROM models ORDER BY rowid`.pipe(
      Effect.flatMap(decodeModels),
      orDieSql
    )

    const remove = (id: string) =>
      Effect.gen(function* () {
        const model = yield* get(id)
        const counted = yield* sql<{ readonly n: number }>`SELECT COUNT(*) AS n FROM checkpoints WHERE model_id = ${id}`
        yield* countedWrite(sql`DELETE FROM models WHERE id = ${id}`)
        return new DeleteModelResult({
          model_id: model.id,
          deleted_checkpoints: counted[0]?.n ?? 0,
          deleted_run: false
        })
      }).pipe(sql.withTransaction, orDieSql, Effect.withSpan("Models.remove"))

    return { create, get, find, list, remove }
  })

/** The models repository layer. */
export const layer = (options: Options = {}): Layer.Layer<Models, never, SqlClient.SqlClient> =>
  Layer.effect(Models, make(options))
