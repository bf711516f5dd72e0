/**
 * The Responses API over the engine: the shared routes (`api/internal/responsesRoutes.ts`, written once for the
 * embedded backend and a rollout) over this server's {@link Backend}: responses kept in the store
 * (`StoredResponses`), a completion admitted as a chat completion is (`inference.admit`: the same decoding,
 * logprobs, constraints, bounds and errors) and made by the engine, errors in the OpenAI shape of the
 * inference surface (`{error: {message, type, param, code}}`, `code` the status).
 *
 * Streamed: `event: <type>` and `data: <event>` per server-sent event, in the documented order, each with its
 * `sequence_number`; an error after the stream began is an `error` event, and the stream ends. A streamed
 * response is stored once it is complete.
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import type * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Routes from "../../../api/internal/responsesRoutes.js"
import { started } from "../../../api/internal/started.js"
import { responsesMessageOf, responsesParamOf } from "../../../api/ResponsesChat.js"
import { EngineError } from "../../engine/EngineError.js"
import { runRounds } from "../../engine/Sampler.js"
import type { Checkpoints } from "../../store/Checkpoints.js"
import type { Models } from "../../store/Models.js"
import { StoredResponses } from "../../store/StoredResponses.js"
import { type Admitted, admit, chunkStream } from "./inference.js"
import type { PolicyCache } from "./policyCache.js"
import { openAi } from "./responses.js"
import type { SamplingBudget } from "./sampling.js"

/** An engine's refusal while it samples: the caller's error (the request it cannot serve); anything else is not. */
const failure = (cause: Cause.Cause<unknown>): Routes.OpenAiError | undefined => {
  const error = Option.getOrUndefined(Option.orElse(Cause.failureOption(cause), () => Cause.dieOption(cause)))
  return error instanceof EngineError
    ? { status: 400, type: "invalid_request_error", message: error.message, param: null, code: "invalid_request" }
    : undefined
}

/** This server's backend of the Responses routes, for the request being answered. */
const backendOf = (
  cache: PolicyCache,
  budget: SamplingBudget
): Effect.Effect<
  Routes.Backend<unknown>,
  never,
  StoredResponses | HttpServerRequest.HttpServerRequest | Checkpoints | Models
> =>
  Effect.zipWith(
    StoredResponses,
    Effect.context<HttpServerRequest.HttpServerRequest | Checkpoints | Models>(),
    (store, context) => ({
      store,
      admit: (chat) =>
        admit(cache, budget, chat, (error) =>
          openAi(400, "invalid_request_error", responsesMessageOf(error.message), responsesParamOf(error.param))
        ).pipe(
          Effect.map((admitted) =>
            Either.map(
              admitted as Either.Either<Admitted, HttpServerResponse.HttpServerResponse>,
              (one): Routes.Completion<unknown> => ({
                model: one.name,
                whole: runRounds(one.rounds()),
                start: started(chunkStream(one.stream()))
              })
            )
          ),
          Effect.provide(context)
        ),
      failure,
      error
    })
  )

/** The errors of this server's OpenAI surface: `code` is the status. */
const error = (error: Routes.OpenAiError) => openAi(error.status, error.type, error.message, error.param)

/** The store, for the routes that only read it. */
const storeOnly: Effect.Effect<Routes.Stored, never, StoredResponses> = Effect.map(StoredResponses, (store) => ({
  store,
  error
}))

/** `POST /v1/responses` over a policy cache and the sampling budget (see the module). */
export const createResponse = (cache: PolicyCache, budget: SamplingBudget) => () =>
  Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    const body = yield* Effect.either(request.json)
    if (Either.isLeft(body)) return openAi(400, "invalid_request_error", "the request body is not JSON")
    // A failure that is not the caller's (the engine's own): a defect, logged, a 500.
    return yield* Effect.orDie(Routes.createResponse(yield* backendOf(cache, budget), body.right))
  })

/** `GET /v1/responses/{response_id}`: a stored response, or 404. */
export const getResponse = ({ path }: { readonly path: { readonly response_id: string } }) =>
  Effect.flatMap(storeOnly, (backend) => Routes.getResponse(backend, path.response_id))

/** `DELETE /v1/responses/{response_id}`: `{id, object: "response", deleted: true}`, or 404. */
export const deleteResponse = ({ path }: { readonly path: { readonly response_id: string } }) =>
  Effect.flatMap(storeOnly, (backend) => Routes.deleteResponse(backend, path.response_id))

/** `GET /v1/responses/{response_id}/input_items`: a page of a stored response's input items, or 404. */
export const listInputItems = ({
  path,
  urlParams
}: {
  readonly path: { readonly response_id: string }
  readonly urlParams: {
    readonly after?: string | undefined
    readonly limit?: string | undefined
    readonly order?: string | undefined
  }
}) => Effect.flatMap(storeOnly, (backend) => Routes.listInputItems(backend, path.response_id, urlParams))
