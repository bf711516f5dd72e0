/**
 * The training service (surface B) defined once, as a platform `HttpApi`: every endpoint of its published API plus
 * `GET /v1/preview/base-models`, with its path, query, body and success schemas. The clients derive their
 * calls from these definitions and the embedded backend its routes, so the two cannot drift apart.
 *
 * @since 0.1.0
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { ChatCompletion, ChatCompletionRequest } from "./ChatCompletion.js"
import { Health, SystemCheck } from "./Health.js"
import { HTTPValidationError } from "./HttpValidationError.js"
import {
  BaseModels,
  CheckpointPage,
  CursorPage,
  DeleteCheckpointsRequest,
  DeleteCheckpointsResult,
  DeleteModelResult,
  ListCheckpointsParams,
  Model,
  ModelCreate,
  ModelId
} from "./Model.js"
import {
  CreateSftTrainingJob,
  CreateTrainingJob,
  ListEventsParams,
  TrainingJob,
  TrainingJobEvent,
  TrainingJobId
} from "./TrainingJob.js"
import { LogRequest, LogResult } from "./Trajectory.js"

const ModelPath = Schema.Struct({ model_id: ModelId })
const JobPath = Schema.Struct({ training_job_id: TrainingJobId })
const invalid = { status: 422 } as const

/**
 * The response header by which a backend says it honours `Idempotency-Key` on the POSTs that create or log (a
 * repeat of a key answers the first response and creates nothing new): `x-idempotency-keys: honoured`. The
 * embedded backend sends it on every response; the hosted service does not, so the client treats it as a
 * backend that may run a repeated create twice (see `TrainingClient`).
 */
export const IDEMPOTENCY_KEYS_HEADER = "x-idempotency-keys"

/** The value of {@link IDEMPOTENCY_KEYS_HEADER} that says keys are honoured. */
export const IDEMPOTENCY_KEYS_HONOURED = "honoured"

/** The page of training job events. */
export const TrainingJobEventPage = CursorPage(TrainingJobEvent).annotations({ identifier: "TrainingJobEventPage" })
/** @see {@link TrainingJobEventPage} */
export type TrainingJobEventPage = CursorPage<TrainingJobEvent>

/** `POST /v1/chat/completions` */
export const createChatCompletion = HttpApiEndpoint.post("createChatCompletion", "/v1/chat/completions")
  .setPayload(ChatCompletionRequest)
  .addSuccess(ChatCompletion)
  .addError(HTTPValidationError, invalid)

/** `POST /v1/chat/completions/`: the same operation under the trailing-slash path. */
export const createChatCompletionSlash = HttpApiEndpoint.post("createChatCompletionSlash", "/v1/chat/completions/")
  .setPayload(ChatCompletionRequest)
  .addSuccess(ChatCompletion)
  .addError(HTTPValidationError, invalid)

/** `POST /v1/preview/models` */
export const createModel = HttpApiEndpoint.post("createModel", "/v1/preview/models")
  .setPayload(ModelCreate)
  .addSuccess(Model)
  .addError(HTTPValidationError, invalid)

/** `DELETE /v1/preview/models/{model_id}` */
export const deleteModel = HttpApiEndpoint.del("deleteModel", "/v1/preview/models/:model_id")
  .setPath(ModelPath)
  .addSuccess(DeleteModelResult)
  .addError(HTTPValidationError, invalid)

/** `DELETE /v1/preview/models/{model_id}/checkpoints` (JSON body with the steps) */
export const deleteCheckpoints = HttpApiEndpoint.del("deleteCheckpoints", "/v1/preview/models/:model_id/checkpoints")
  .setPath(ModelPath)
  .setPayload(DeleteCheckpointsRequest)
  .addSuccess(DeleteCheckpointsResult)
  .addError(HTTPValidationError, invalid)

/** `GET /v1/preview/models/{model_id}/checkpoints?after=&limit=&order=` */
export const listCheckpoints = HttpApiEndpoint.get("listCheckpoints", "/v1/preview/models/:model_id/checkpoints")
  .setPath(ModelPath)
  .setUrlParams(ListCheckpointsParams)
  .addSuccess(CheckpointPage)
  .addError(HTTPValidationError, invalid)

/** `POST /v1/preview/models/{model_id}/log` */
export const log = HttpApiEndpoint.post("log", "/v1/preview/models/:model_id/log")
  .setPath(ModelPath)
  .setPayload(LogRequest)
  .addSuccess(LogResult)
  .addError(HTTPValidationError, invalid)

/** `POST /v1/preview/sft-training-jobs` */
export const createSftTrainingJob = HttpApiEndpoint.post("createSftTrainingJob", "/v1/preview/sft-training-jobs")
  .setPayload(CreateSftTrainingJob)
  .addSuccess(TrainingJob)
  .addError(HTTPValidationError, invalid)

/** `POST /v1/preview/training-jobs` */
export const createTrainingJob = HttpApiEndpoint.post("createTrainingJob", "/v1/preview/training-jobs")
  .setPayload(CreateTrainingJob)
  .addSuccess(TrainingJob)
  .addError(HTTPValidationError, invalid)

/** `GET /v1/preview/training-jobs/{training_job_id}` */
export const getTrainingJob = HttpApiEndpoint.get("getTrainingJob", "/v1/preview/training-jobs/:training_job_id")
  .setPath(JobPath)
  .addSuccess(TrainingJob)
  .addError(HTTPValidationError, invalid)

/** `GET /v1/preview/training-jobs/{training_job_id}/events?after=&limit=` */
export const listTrainingJobEvents = HttpApiEndpoint.get(
  "listTrainingJobEvents",
  "/v1/preview/training-jobs/:training_job_id/events"
)
  .setPath(JobPath)
  .setUrlParams(ListEventsParams)
  .addSuccess(TrainingJobEventPage)
  .addError(HTTPValidationError, invalid)

/** `GET /v1/health` */
export const health = HttpApiEndpoint.get("health", "/v1/health").addSuccess(Health)

/** `GET /v1/system-check` */
export const systemCheck = HttpApiEndpoint.get("systemCheck", "/v1/system-check").addSuccess(SystemCheck)

/** `GET /v1/preview/base-models` (newer deployments) */
export const listBaseModels = HttpApiEndpoint.get("listBaseModels", "/v1/preview/base-models").addSuccess(BaseModels)

/** The chat-completions group. */
export class ChatGroup extends HttpApiGroup.make("chat", { topLevel: true })
  .add(createChatCompletion)
  .add(createChatCompletionSlash) {}

/** The models and checkpoints group. */
export class ModelsGroup extends HttpApiGroup.make("models", { topLevel: true })
  .add(createModel)
  .add(deleteModel)
  .add(deleteCheckpoints)
  .add(listCheckpoints)
  .add(log)
  .add(listBaseModels) {}

/** The training jobs group. */
export class JobsGroup extends HttpApiGroup.make("jobs", { topLevel: true })
  .add(createTrainingJob)
  .add(createSftTrainingJob)
  .add(getTrainingJob)
  .add(listTrainingJobEvents) {}

/** The health group. */
export class HealthGroup extends HttpApiGroup.make("health", { topLevel: true }).add(health).add(systemCheck) {}

/** The whole training service. */
export class TrainingApi extends HttpApi.make("TrainingApi")
  .add(ChatGroup)
  .add(ModelsGroup)
  .add(JobsGroup)
  .add(HealthGroup) {}
