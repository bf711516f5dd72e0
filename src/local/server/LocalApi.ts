/**
 * The one api the embedded backend serves: the training service's groups (`chat`, `models`, `jobs`,
 * `health`) and the inference service's model list, on one origin. Built from the definitions in `src/api/`,
 * so the server's routes and the clients' calls come from the same endpoints.
 *
 * @since 0.1.0
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { listModels } from "../../api/InferenceApi.js"
import { TrainingApi } from "../../api/TrainingApi.js"

/**
 * The inference surface's `GET /v1/models`. Its chat completion endpoint is the training group's own
 * `createChatCompletion` (the same definition), so it is served once, by the `chat` group.
 */
export class InferenceModelsGroup extends HttpApiGroup.make("inference", { topLevel: true }).add(listModels) {}

/** The combined api of the embedded backend. */
export class LocalApi extends HttpApi.make("LocalApi").addHttpApi(TrainingApi).add(InferenceModelsGroup) {}
