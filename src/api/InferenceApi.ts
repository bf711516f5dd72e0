/**
 * The inference service (surface C) defined once as a platform `HttpApi`: the model list, and
 * the chat completions the inference host also serves.
 *
 * @since 0.1.0
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { ModelList } from "./InferenceModel.js"
import { createChatCompletion } from "./TrainingApi.js"

/** `GET /v1/models` */
export const listModels = HttpApiEndpoint.get("listModels", "/v1/models").addSuccess(ModelList)

/** The inference group. */
export class InferenceGroup extends HttpApiGroup.make("inference", { topLevel: true })
  .add(listModels)
  .add(createChatCompletion) {}

/** The whole inference service. */
export class InferenceApi extends HttpApi.make("InferenceApi").add(InferenceGroup) {}
