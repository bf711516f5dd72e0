/**
 * Chat completions and the model list over the local engine. The models served are the base models, each
 * at its step-0 weights (`Policy.create` with seed 0); trained checkpoints join them once the store lands.
 *
 * - `POST /v1/chat/completions` (and the trailing-slash path): a whole `ChatCompletion`, or with
 *   `stream: true` server-sent events `data: <chunk>\n\n` ending with `data: [DONE]\n\n`; an error after the
 *   stream began is sent as `data: {"error": {...}}` before `[DONE]`.
 * - A request the engine refuses: 400 `{error: {message, type: "BadRequestError", param, code: 400}}`; an
 *   unknown model: 404 in that shape (`NotFoundError`).
 * - `GET /v1/models`: `{object: "list", data: [{id, object: "model", created, owned_by, root, parent,
 *   max_model_len}]}`.
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import type { ChatCompletionChunk, ChatCompletionRequest } from "../../../api/ChatCompletion.js"
import type { InferenceModel } from "../../../api/InferenceModel.js"
import { EngineError, errorBody } from "../../engine/EngineError.js"
import { Policy } from "../../engine/Policy.js"
import { completeEffect, completeStream } from "../../engine/Sampler.js"
import { openAi } from "./responses.js"

/** The base model every fresh backend serves. */
export const BASE_MODEL = "effect-rl/tiny"

const created = Math.floor(Date.now() / 1000)

let policy: Policy | undefined
/** The base model's step-0 weights, made once (deterministic: seed 0). */
const basePolicy = (): Policy => {
  policy ??= Policy.create(undefined, { seed: 0 })
  return policy
}

const models: ReadonlyMap<string, () => Policy> = new Map([[BASE_MODEL, basePolicy]])

/** The model list of `GET /v1/models`. */
export const listModels = Effect.sync(() => ({
  object: "list" as const,
  data: [...models.keys()].map(
    (id): InferenceModel => ({
      id,
      object: "model",
      created,
      owned_by: "effect-rl",
      root: id,
      parent: null,
      max_model_len: basePolicy().contextLength
    })
  )
}))

const engineError = (error: EngineError) => HttpServerResponse.unsafeJson(errorBody(error), { status: 400 })

const sse = (data: string) => `data: ${data}\n\n`

const streamErrorEvent = (error: unknown) => {
  if (error instanceof EngineError) return sse(JSON.stringify(errorBody(error)))
  return sse(
    JSON.stringify({ error: { message: "Internal Server Error", type: "InternalServerError", param: null, code: 500 } })
  )
}

/** The SSE body of a stream of chunks: pulled one by one, so decoding happens as the client reads. */
export const eventStream = (chunks: Generator<ChatCompletionChunk>) =>
  Stream.repeatEffectOption(
    Effect.suspend(() => {
      try {
        const next = chunks.next()
        return next.done ? Effect.fail(Option.none()) : Effect.succeed(sse(JSON.stringify(next.value)))
      } catch (error) {
        return Effect.fail(Option.some(error))
      }
    })
  ).pipe(
    Stream.catchAll((error) =>
      Stream.fromEffect(
        Effect.as(
          error instanceof EngineError ? Effect.void : Effect.logError("chat completion stream failed", error),
          streamErrorEvent(error)
        )
      )
    ),
    Stream.concat(Stream.make(sse("[DONE]"))),
    Stream.encodeText
  )

/** `POST /v1/chat/completions`: a completion, or its stream of chunks, from the engine. */
export const createChatCompletion = ({ payload }: { readonly payload: ChatCompletionRequest }) =>
  Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    const name = payload.model ?? BASE_MODEL
    const model = models.get(name)
    if (model === undefined) {
      return openAi(404, "NotFoundError", `The model \`${name}\` does not exist.`)
    }
    const requestId = request.headers["x-request-id"]
    const options = { modelName: name, ...(requestId === undefined ? {} : { requestId }) }
    if (payload.stream !== true) {
      return yield* completeEffect(model(), payload, options).pipe(
        Effect.catchTag("EngineError", (e) => Effect.succeed(engineError(e)))
      )
    }
    // The request is checked (and refused with a 400) before the stream, and so the 200, begins.
    const chunks = yield* Effect.try({
      try: () => completeStream(model(), payload, options),
      catch: (error) => error
    }).pipe(Effect.either)
    if (chunks._tag === "Left") {
      if (chunks.left instanceof EngineError) return engineError(chunks.left)
      return yield* Effect.die(chunks.left)
    }
    return HttpServerResponse.stream(eventStream(chunks.right), {
      contentType: "text/event-stream",
      headers: { "cache-control": "no-cache" }
    })
  })
