/**
 * The models group over the store.
 *
 * - `POST /v1/preview/models`: creates a model with its step 0 (the base model's initial weights, see
 *   `baseModels.ts`); `return_existing: true` returns the model of a taken name, else a taken name is 409
 *   `{"detail": ...}`. A null entity is the local user (`local`). A `base_model` the engine does not serve is
 *   404 `{"detail": "Base model `<name>` not found; see GET /v1/preview/base-models"}`. Idempotent.
 * - `DELETE /v1/preview/models/{model_id}`: the model, its checkpoints, jobs and logs; 404
 *   `{"detail": "Model not found"}` when unknown (as on every route below).
 * - `GET .../checkpoints?after=&limit=&order=`: a cursor page; an `after` that is not one of the model's
 *   checkpoints is 404.
 * - `DELETE .../checkpoints` with `{steps}`: `{deleted_count, not_found_steps}`.
 * - `POST .../log`: stores the groups under their split and the model's latest step and answers
 *   `{"metrics": {...}}`, the metrics of `Metrics.compute` (an extension: the hosted body is unspecified).
 *   Idempotent.
 * - `GET /v1/preview/base-models`: the base models the engine serves.
 */
import type * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import type {
  CheckpointPage,
  DeleteCheckpointsRequest,
  DeleteCheckpointsResult,
  DeleteModelResult,
  ListCheckpointsParams,
  ModelCreate,
  ModelId
} from "../../../api/Model.js"
import { Model } from "../../../api/Model.js"
import { type LogRequest, LogResult } from "../../../api/Trajectory.js"
import { Checkpoints } from "../../store/Checkpoints.js"
import { Logs } from "../../store/Logs.js"
import { Models } from "../../store/Models.js"
import type { StoreError } from "../../store/StoreError.js"
import { baseModelNames, initialWeights } from "./baseModels.js"
import { encoded, idempotent, refuse } from "./idempotency.js"
import { detail } from "./responses.js"
import * as TrainingThread from "./trainingThread.js"

const MODEL_NOT_FOUND = "Model not found"

/** A store failure as a response: `NotFound` 404 (with `notFound` as its detail when given), `Conflict` 409. */
const failure =
  (notFound?: string) =>
  (error: StoreError): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
    if (error.reason === "NotFound") return Effect.succeed(detail(404, notFound ?? error.message))
    if (error.reason === "Conflict") return Effect.succeed(detail(409, error.message))
    return Effect.die(error)
  }

/** `POST /v1/preview/models` */
export const createModel = ({ payload }: { readonly payload: ModelCreate }) =>
  idempotent(
    "POST /v1/preview/models",
    Effect.gen(function* () {
      const weights = initialWeights(payload.base_model)
      if (weights === undefined) {
        return yield* refuse(404, `Base model \`${payload.base_model}\` not found; see GET /v1/preview/base-models`)
      }
      const models = yield* Models
      const created = yield* models
        .create(payload, { initialWeights: Effect.succeed(weights) })
        .pipe(Effect.catchTag("StoreError", (e) => Effect.fail(refuse(e.reason === "Conflict" ? 409 : 404, e.message))))
      // A model to train: the training thread starts now, compiling its code while the first rollouts gather.
      TrainingThread.prestart()
      const { created_at: _, ...model } = created.model
      return yield* encoded(Model, new Model(model, { disableValidation: true }))
    })
  )

/** `DELETE /v1/preview/models/{model_id}` */
export const deleteModel = ({ path }: { readonly path: { readonly model_id: ModelId } }) =>
  Effect.flatMap(Models, (models) => models.remove(path.model_id)).pipe(
    Effect.map((result): DeleteModelResult | HttpServerResponse.HttpServerResponse => result),
    Effect.catchTag("StoreError", failure(MODEL_NOT_FOUND))
  )

/** `GET /v1/preview/models/{model_id}/checkpoints` */
export const listCheckpoints = ({
  path,
  urlParams
}: {
  readonly path: { readonly model_id: ModelId }
  readonly urlParams: ListCheckpointsParams
}) =>
  Effect.gen(function* () {
    yield* Effect.flatMap(Models, (models) => models.get(path.model_id))
    const checkpoints = yield* Checkpoints
    return yield* checkpoints.list(path.model_id, urlParams).pipe(
      Effect.map((page): CheckpointPage | HttpServerResponse.HttpServerResponse => page),
      Effect.catchTag("StoreError", failure())
    )
  }).pipe(Effect.catchTag("StoreError", failure(MODEL_NOT_FOUND)))

/** `DELETE /v1/preview/models/{model_id}/checkpoints` */
export const deleteCheckpoints = ({
  path,
  payload
}: {
  readonly path: { readonly model_id: ModelId }
  readonly payload: DeleteCheckpointsRequest
}) =>
  Effect.flatMap(Checkpoints, (checkpoints) => checkpoints.remove(path.model_id, payload.steps)).pipe(
    Effect.map((result): DeleteCheckpointsResult | HttpServerResponse.HttpServerResponse => result),
    Effect.catchTag("StoreError", failure(MODEL_NOT_FOUND))
  )

/** `POST /v1/preview/models/{model_id}/log` */
export const log = ({
  path,
  payload
}: {
  readonly path: { readonly model_id: ModelId }
  readonly payload: LogRequest
}) =>
  idempotent(
    `POST /v1/preview/models/${path.model_id}/log`,
    Effect.gen(function* () {
      const logs = yield* Logs
      const entry = yield* logs
        .record(path.model_id, payload)
        .pipe(
          Effect.catchTag("StoreError", (e) =>
            Effect.fail(e.reason === "NotFound" ? refuse(404, MODEL_NOT_FOUND) : refuse(409, e.message))
          )
        )
      return yield* encoded(LogResult, { metrics: entry.metrics })
    })
  )

/** `GET /v1/preview/base-models` */
export const listBaseModels = Effect.succeed(baseModelNames)
