/**
 * Trainable models and their checkpoints (training service, surface B), and the cursor page envelope the
 * service lists them in.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { LooseMetric } from "./Json.js"

/**
 * A model's id: a UUID. The service checks it as one wherever it takes it (a path, a body: a 422 otherwise), so
 * it only hands out UUIDs, and the client checks it before sending.
 */
export const ModelId = Schema.UUID.pipe(Schema.brand("effect-rl/ModelId"))
/** @see {@link ModelId} */
export type ModelId = typeof ModelId.Type

/**
 * A checkpoint's id: a non-empty string, as the reference client types it. The service makes UUIDs (the embedded
 * backend too), but no request checks one (the listing's `after` cursor is any string), so a service that hands
 * out another form is still read and paged.
 */
export const CheckpointId = Schema.NonEmptyString.pipe(Schema.brand("effect-rl/CheckpointId"))
/** @see {@link CheckpointId} */
export type CheckpointId = typeof CheckpointId.Type

/**
 * The body of model creation. `name` is unique within a project; with `return_existing: true` an existing
 * model of that name is returned instead of a conflict. A null `entity` means the caller's default entity.
 */
export const ModelCreate = Schema.Struct({
  entity: Schema.optional(Schema.NullOr(Schema.String)),
  project: Schema.String,
  name: Schema.String,
  base_model: Schema.String,
  return_existing: Schema.optional(Schema.Boolean)
}).annotations({ identifier: "ModelCreate" })
/** @see {@link ModelCreate} */
export type ModelCreate = typeof ModelCreate.Type

/** A trainable model. */
export class Model extends Schema.Class<Model>("effect-rl/Model")({
  id: ModelId,
  entity: Schema.String,
  project: Schema.String,
  name: Schema.String,
  base_model: Schema.String,
  run_id: Schema.optional(Schema.NullOr(Schema.String))
}) {}

/** The result of deleting a model: how many checkpoints went with it, and whether its run did. */
export class DeleteModelResult extends Schema.Class<DeleteModelResult>("effect-rl/DeleteModelResult")({
  model_id: ModelId,
  deleted_checkpoints: Schema.Int,
  deleted_run: Schema.Boolean
}) {}

/**
 * A checkpoint's metrics: finite numbers by name. A value the service could not compute reaches the wire as
 * `null` (or `"NaN"`, `"Infinity"`, `"-Infinity"`); such entries are left out when decoding.
 */
export const CheckpointMetrics: Schema.Schema<
  { readonly [x: string]: number },
  { readonly [x: string]: number | null | "NaN" | "Infinity" | "-Infinity" }
> = Schema.transform(
  Schema.Record({ key: Schema.String, value: LooseMetric }),
  Schema.Record({ key: Schema.String, value: Schema.Finite }),
  {
    strict: true,
    decode: (metrics) => {
      const out: Record<string, number> = {}
      for (const [key, value] of Object.entries(metrics)) if (value !== null) out[key] = value
      return out
    },
    encode: (metrics) => metrics
  }
).annotations({ identifier: "CheckpointMetrics" })

/** A checkpoint: the model's weights after training step `step`, with that step's metrics. */
export class Checkpoint extends Schema.Class<Checkpoint>("effect-rl/Checkpoint")({
  id: CheckpointId,
  step: Schema.Int,
  metrics: CheckpointMetrics
}) {}

/** The body of checkpoint deletion: the steps to delete. */
export const DeleteCheckpointsRequest = Schema.Struct({
  steps: Schema.Array(Schema.Int)
}).annotations({ identifier: "DeleteCheckpointsRequest" })
/** @see {@link DeleteCheckpointsRequest} */
export type DeleteCheckpointsRequest = typeof DeleteCheckpointsRequest.Type

/** The result of checkpoint deletion: how many were deleted, and which requested steps did not exist. */
export class DeleteCheckpointsResult extends Schema.Class<DeleteCheckpointsResult>("effect-rl/DeleteCheckpointsResult")(
  {
    deleted_count: Schema.Int,
    not_found_steps: Schema.Array(Schema.Int)
  }
) {}

/** A page of a cursor-paged list. */
export interface CursorPage<A> {
  readonly object: string
  readonly data: ReadonlyArray<A>
  readonly first_id: string
  readonly last_id: string
  readonly has_more: boolean
}

/**
 * The cursor page envelope `{object: "list", data, first_id, last_id, has_more}`: pass the page's `last_id`
 * as `after` to read the next page while `has_more` is true.
 */
export const CursorPage = <A, I, R>(
  item: Schema.Schema<A, I, R>
): Schema.Schema<
  CursorPage<A>,
  {
    readonly object?: string | undefined
    readonly data: ReadonlyArray<I>
    readonly first_id?: string | undefined
    readonly last_id?: string | undefined
    readonly has_more: boolean
  },
  R
> =>
  Schema.Struct({
    object: Schema.optionalWith(Schema.String, { default: () => "list" }),
    data: Schema.Array(item),
    first_id: Schema.optionalWith(Schema.String, { default: () => "" }),
    last_id: Schema.optionalWith(Schema.String, { default: () => "" }),
    has_more: Schema.Boolean
  })

/** The sort order of a checkpoint listing (by step). */
export const Order = Schema.Literal("asc", "desc")
/** @see {@link Order} */
export type Order = typeof Order.Type

/** The page limit of the paged endpoints: 1 to 100. */
export const PageLimit = Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 100))

/** The query of the checkpoint listing. */
export const ListCheckpointsParams = Schema.Struct({
  after: Schema.optional(Schema.String),
  limit: Schema.optional(PageLimit),
  order: Schema.optional(Order)
}).annotations({ identifier: "ListCheckpointsParams" })
/** @see {@link ListCheckpointsParams} */
export type ListCheckpointsParams = typeof ListCheckpointsParams.Type

/** The page of checkpoints. */
export const CheckpointPage = CursorPage(Checkpoint).annotations({ identifier: "CheckpointPage" })
/** @see {@link CheckpointPage} */
export type CheckpointPage = CursorPage<Checkpoint>

/** The trainable base models (`GET /v1/preview/base-models`, newer deployments). */
export const BaseModels = Schema.Array(Schema.String).annotations({ identifier: "BaseModels" })
