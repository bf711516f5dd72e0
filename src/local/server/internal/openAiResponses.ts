/**
 * The Responses API over the engine: `POST /v1/responses` translated onto the one chat-completions path
 * (`ResponsesChat.chatRequestOf`, then `inference.admit` and the same decoding, logprobs, constraints, bounds
 * and errors), the completion translated back (`responseOf`, or `ResponseEvents` when streamed); stored
 * responses (`StoredResponses`) for `previous_response_id`, `item_reference`, `GET`, `DELETE` and the input
 * items.
 *
 * Streamed: `event: <type>` and `data: <event>` per server-sent event, in the documented order, each with its
 * `sequence_number`; an error after the stream began is an `error` event, and the stream ends. A streamed
 * response is stored once it is complete. Errors before: the OpenAI shape `{error: {message, type, param,
 * code}}`, 400 naming the field for a request that does not decode or that the engine cannot serve.
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { ChatCompletionRequest } from "../../../api/ChatCompletion.js"
import { follow } from "../../../api/internal/responseChain.js"
import { type Response, ResponseCreateRequest } from "../../../api/Responses.js"
import {
  type AnyItem,
  chatRequestOf,
  firstField,
  historyItemsOf,
  inputItemsPage,
  itemsOf,
  newResponseId,
  ResponseEvents,
  type ResponseMeta,
  type ResponsesRequestError,
  responseIdOfItem,
  responseOf,
  responsesMessageOf,
  responsesParamOf,
  sseOf,
  storedInputItemsOf
} from "../../../api/ResponsesChat.js"
import { EngineError } from "../../engine/EngineError.js"
import { runRounds } from "../../engine/Sampler.js"
import { StoredResponses } from "../../store/StoredResponses.js"
import { admit, BASE_MODEL, chunkStream } from "./inference.js"
import type { PolicyCache } from "./policyCache.js"
import { openAi } from "./responses.js"
import type { SamplingBudget } from "./sampling.js"

const decodeRequest = Schema.decodeUnknownEither(ResponseCreateRequest)
const decodeChat = Schema.decodeUnknownEither(ChatCompletionRequest)

const invalidRequest = (message: string, param: string | null = null) =>
  openAi(400, "invalid_request_error", message, param)

const notFound = (id: string) => openAi(404, "invalid_request_error", `Response with id '${id}' not found.`)

/** The items of the responses a request continues, oldest first: each one's input items, then its output. */
const historyOf = (store: StoredResponses["Type"], previousId: string | null | undefined) =>
  Effect.map(
    follow(previousId, store.get, (stored) => ({
      id: stored.response.id,
      previousResponseId: stored.previousResponseId
    })),
    Either.mapBoth({ onLeft: (error) => invalidRequest(error.message, error.param), onRight: historyItemsOf })
  )

/** The stored items the request's `item_reference`s name, by id (those found). */
const referencedItems = (
  store: StoredResponses["Type"],
  request: ResponseCreateRequest,
  history: ReadonlyArray<AnyItem>
) =>
  Effect.gen(function* () {
    const found = new Map<string, AnyItem>()
    for (const item of history) if (typeof item.id === "string") found.set(item.id, item)
    if (typeof request.input === "string" || request.input === undefined) return found
    for (const item of request.input as ReadonlyArray<AnyItem>) {
      if (item.type !== "item_reference" || typeof item.id !== "string" || found.has(item.id)) continue
      const responseId = responseIdOfItem(item.id)
      if (responseId === undefined) continue
      const stored = yield* store.get(responseId)
      if (Option.isNone(stored)) continue
      for (const other of itemsOf(stored.value)) {
        if (typeof other.id === "string") found.set(other.id, other)
      }
    }
    return found
  })

const translationError = (error: ResponsesRequestError) => invalidRequest(error.message, error.param)

const streamErrorMessage = (error: unknown) =>
  error instanceof EngineError ? error.message : "Internal Server Error: the response could not be completed"

/**
 * `POST /v1/responses` over a policy cache and the sampling budget (see the module).
 */
export const createResponse = (cache: PolicyCache, budget: SamplingBudget) => () =>
  Effect.gen(function* () {
    const httpRequest = yield* HttpServerRequest.HttpServerRequest
    const body = yield* Effect.either(httpRequest.json)
    if (Either.isLeft(body)) return invalidRequest("the request body is not JSON")
    const decoded = decodeRequest(body.right)
    if (Either.isLeft(decoded)) {
      return invalidRequest(ParseResult.TreeFormatter.formatErrorSync(decoded.left), firstField(decoded.left))
    }
    const request = decoded.right
    const store = yield* StoredResponses
    const history = yield* historyOf(store, request.previous_response_id)
    if (Either.isLeft(history)) return history.left
    const references = yield* referencedItems(store, request, history.right)
    const resolve = (id: string) => references.get(id)
    const chat = chatRequestOf(request, { history: history.right, resolve })
    if (Either.isLeft(chat)) return translationError(chat.left)
    const streamed = request.stream === true
    const payload = {
      ...chat.right,
      model: request.model ?? BASE_MODEL,
      ...(streamed ? { stream: true, stream_options: { include_usage: true } } : {})
    }
    // The chat request's own checks (across fields too), in the Responses request's words.
    const checked = decodeChat(payload)
    if (Either.isLeft(checked)) {
      const issue = ParseResult.ArrayFormatter.formatErrorSync(checked.left)[0]
      return invalidRequest(
        responsesMessageOf(issue?.message ?? ParseResult.TreeFormatter.formatErrorSync(checked.left)),
        responsesParamOf(firstField(checked.left))
      )
    }
    const admitted = yield* admit(cache, budget, checked.right, (error) =>
      invalidRequest(responsesMessageOf(error.message), responsesParamOf(error.param))
    )
    if (Either.isLeft(admitted)) return admitted.left
    const meta: ResponseMeta = {
      id: newResponseId(),
      createdAt: Math.floor((yield* Clock.currentTimeMillis) / 1000),
      model: admitted.right.name,
      store: request.store !== false
    }
    const save = (response: Response) =>
      meta.store
        ? store.put({
            response,
            inputItems: storedInputItemsOf(request, meta.id, resolve),
            previousResponseId: request.previous_response_id ?? null
          })
        : Effect.void
    if (!streamed) {
      const completion = yield* runRounds(admitted.right.rounds())
      const response = responseOf(completion, request, meta)
      yield* save(response)
      return HttpServerResponse.unsafeJson(response)
    }
    const events = new ResponseEvents(request, meta)
    const body_ = Stream.fromIterable(events.start()).pipe(
      Stream.concat(chunkStream(admitted.right.stream()).pipe(Stream.mapConcat((chunk) => events.push(chunk)))),
      Stream.concat(
        Stream.suspend(() => {
          const last = events.end()
          const final = last.at(-1)
          const save_ = final !== undefined && "response" in final ? save(final.response) : Effect.void
          return Stream.fromEffect(Effect.as(save_, last)).pipe(Stream.flattenIterables)
        })
      ),
      Stream.map(sseOf),
      Stream.catchAll((error) =>
        Stream.fromEffect(
          Effect.as(
            error instanceof EngineError ? Effect.void : Effect.logError("response stream failed", error),
            sseOf(
              events.error(streamErrorMessage(error), error instanceof EngineError ? "invalid_request" : "server_error")
            )
          )
        )
      ),
      Stream.encodeText
    )
    return HttpServerResponse.stream(body_, {
      contentType: "text/event-stream",
      headers: { "cache-control": "no-cache" }
    })
  })

/** `GET /v1/responses/{response_id}`: a stored response, or 404. */
export const getResponse = ({ path }: { readonly path: { readonly response_id: string } }) =>
  Effect.flatMap(StoredResponses, (store) =>
    Effect.map(store.get(path.response_id), (stored) =>
      Option.match(stored, {
        onNone: () => notFound(path.response_id),
        onSome: ({ response }) => HttpServerResponse.unsafeJson(response)
      })
    )
  )

/** `DELETE /v1/responses/{response_id}`: `{id, object: "response", deleted: true}`, or 404. */
export const deleteResponse = ({ path }: { readonly path: { readonly response_id: string } }) =>
  Effect.flatMap(StoredResponses, (store) =>
    Effect.map(store.remove(path.response_id), (removed) =>
      removed
        ? HttpServerResponse.unsafeJson({ id: path.response_id, object: "response", deleted: true })
        : notFound(path.response_id)
    )
  )

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
}) =>
  Effect.gen(function* () {
    const stored = yield* Effect.flatMap(StoredResponses, (store) => store.get(path.response_id))
    if (Option.isNone(stored)) return notFound(path.response_id)
    const page = inputItemsPage(stored.value.inputItems, urlParams)
    if (Either.isLeft(page)) return translationError(page.left)
    return HttpServerResponse.unsafeJson(page.right)
  })
