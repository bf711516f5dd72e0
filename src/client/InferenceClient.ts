/**
 * The client of the inference service (surface C): the model list and chat completions on the
 * inference host. An optional project (`<team>/<project>`) is sent as `OpenAI-Project` for usage tracking.
 *
 * @since 0.1.0
 */
import * as HttpClient from "@effect/platform/HttpClient"
import type * as ConfigError from "effect/ConfigError"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Stream from "effect/Stream"
import type { ChatCompletion, ChatCompletionChunk, ChatCompletionRequest } from "../api/ChatCompletion.js"
import * as Api from "../api/InferenceApi.js"
import type { ModelList } from "../api/InferenceModel.js"
import type { ApiError } from "./ApiError.js"
import * as Chat from "./internal/chat.js"
import { resolveOptions } from "./internal/config.js"
import { endpointCall } from "./internal/endpoint.js"
import { type ClientOptions, makeTransport } from "./internal/http.js"

/** The hosted inference service. */
export const DEFAULT_URL = "https://api.inference.wandb.ai"

/** The env name of the inference service's base URL. */
export const URL_ENV = "EFFECT_RL_INFERENCE_URL"

/** The header naming the project a call is tracked under. */
export const PROJECT_HEADER = "OpenAI-Project"

/** Options of the inference client. */
export interface Options extends ClientOptions {
  /** The default project (`<team>/<project>`) of every call, sent as `OpenAI-Project`. */
  readonly project?: string | undefined
}

/** Options of one call. */
export interface CallOptions {
  /** The project of this call, overriding the client's. */
  readonly project?: string | undefined
}

/** The inference client's methods. */
export interface Service {
  /** `GET /v1/models`: the models that can be named in chat completions. */
  readonly listModels: (options?: CallOptions) => Effect.Effect<ModelList, ApiError>
  /** `POST /v1/chat/completions` on the inference host. */
  readonly createChatCompletion: (
    request: ChatCompletionRequest,
    options?: CallOptions
  ) => Effect.Effect<ChatCompletion, ApiError>
  /** `POST /v1/chat/completions` with `stream: true`: the chunks as they come. */
  readonly streamChatCompletion: (
    request: ChatCompletionRequest,
    options?: CallOptions
  ) => Stream.Stream<ChatCompletionChunk, ApiError>
}

/** The inference client service. */
export class InferenceClient extends Context.Tag("effect-rl/InferenceClient")<InferenceClient, Service>() {}

const listModels = endpointCall(Api.listModels)

/** Build the client over the platform `HttpClient`, with options given in full (no env read). */
export const make = (options: Options & { readonly baseUrl: string | URL }) =>
  Effect.gen(function* () {
    const transport = makeTransport(yield* HttpClient.HttpClient, options)
    const headers = (call?: CallOptions) => {
      const project = call?.project ?? options.project
      return project === undefined ? undefined : { [PROJECT_HEADER]: project }
    }
    const service: Service = {
      listModels: (call) =>
        listModels
          .run(transport, { headers: headers(call), retry: true })
          .pipe(Effect.withSpan("InferenceClient.listModels")),
      createChatCompletion: (request, call) =>
        Chat.create(transport, request, headers(call)).pipe(
          // No stack trace: it would name this line, not the caller's, at a cost of about 0.4% of `npm start`.
          Effect.withSpan("InferenceClient.createChatCompletion", {
            attributes: { model: request.model ?? "" },
            captureStackTrace: false
          })
        ),
      streamChatCompletion: (request, call) => Chat.stream(transport, request, headers(call))
    }
    return service
  })

/** The client as a layer, with options given in full; `baseUrl` defaults to the hosted service. */
export const layer = (options: Options = {}): Layer.Layer<InferenceClient, never, HttpClient.HttpClient> =>
  Layer.effect(InferenceClient, make({ ...options, baseUrl: options.baseUrl ?? DEFAULT_URL }))

/**
 * The client as a layer reading the environment: `WANDB_API_KEY` (as a `Redacted`) and
 * `EFFECT_RL_INFERENCE_URL`, each used only where `options` leaves it out.
 */
export const layerConfig = (
  options: Options = {}
): Layer.Layer<InferenceClient, ConfigError.ConfigError, HttpClient.HttpClient> =>
  Layer.effect(InferenceClient, Effect.flatMap(resolveOptions(options, URL_ENV, DEFAULT_URL), make))
