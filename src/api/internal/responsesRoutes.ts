/**
 * The Responses API's routes, written once for every server of them: the embedded backend's `/v1/responses`
 * (over its engine and its SQLite store) and a rollout's (over the rollout's policy and the responses it keeps).
 * Each server gives a {@link Backend}: where responses are stored, how a chat completion is admitted and made,
 * and its error bodies; the routes do the rest:
 *
 * - `POST /responses`: the request decoded and checked (`ResponseCreateRequest`), its `previous_response_id`
 *   chain followed (bounded, a cycle named), its `item_reference`s resolved, translated onto a chat completion
 *   (`ResponsesChat.chatRequestOf`) and checked as one, in the Responses request's words; then the completion,
 *   answered as a `Response`, or with `stream: true` as the Responses events of the chunks as they are sampled.
 *   A streamed response answers once its first chunk has come, so that a completion refused before it samples
 *   keeps its status; a failure after is an `error` event. Stored (unless `store: false`) once it is complete.
 * - Every complete response is told to the backend with its request (`exchanged`), stored or not.
 * - `GET`/`DELETE /responses/{id}`, `GET /responses/{id}/input_items`: a stored response, its deletion, a page of
 *   its input items; 404 for an id that is not a stored response's.
 *
 * Every route answers an `HttpServerResponse`, so each server mounts them on its own `HttpApi` group.
 */
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import type * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { type ChatCompletion, type ChatCompletionChunk, ChatCompletionRequest } from "../ChatCompletion.js"
import { type Response, ResponseCreateRequest } from "../Responses.js"
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
  responseIdOfItem,
  responseOf,
  responsesMessageOf,
  responsesParamOf,
  type StoredResponse,
  sseOf,
  storedInputItemsOf
} from "../ResponsesChat.js"
import { follow } from "./responseChain.js"
import type { Started } from "./started.js"

/** An error in the OpenAI shape, before a server writes it in its own body. */
export interface OpenAiError {
  readonly status: number
  readonly type: string
  readonly message: string
  readonly param: string | null
  readonly code: string | number | null
}

/** Where a server keeps its responses. */
export interface ResponseStore {
  /** A stored response, or none. */
  readonly get: (id: string) => Effect.Effect<Option.Option<StoredResponse>>
  /** Stores a response (replacing one of the same id). */
  readonly put: (stored: StoredResponse) => Effect.Effect<void>
  /** Deletes a stored response: whether there was one. */
  readonly remove: (id: string) => Effect.Effect<boolean>
}

/** A chat completion a server has admitted, to be made whole or streamed. */
export interface Completion<E> {
  /** The model the response names; the completion's own when absent. */
  readonly model?: string | undefined
  /** The completion, whole. */
  readonly whole: Effect.Effect<ChatCompletion, E>
  /** The completion's chunks as they are sampled, started (see `started.ts`): its first chunk come, or its failure. */
  readonly start: Effect.Effect<Exit.Exit<Started<ChatCompletionChunk, E>, E>, never, Scope.Scope>
}

/** What a server gives the routes that read its stored responses. */
export interface Stored {
  /** Its stored responses. */
  readonly store: ResponseStore
  /** The server's error body for an error. */
  readonly error: (error: OpenAiError) => HttpServerResponse.HttpServerResponse
}

/** What a server gives the routes (see the module). */
export interface Backend<E> extends Stored {
  /** Chat request fields under what the translated request sets (a rollout's defaults, e.g. its `seed`). */
  readonly defaults?: object | undefined
  /**
   * Admits the chat completion a Responses request translates to (checked by its schema; `stream` and
   * `stream_options` set when it is streamed): the completion to make, or the server's refusal (in the Responses
   * request's words: see `ResponsesChat.responsesMessageOf`). In the request's scope, which lasts as long as its
   * response is being written.
   */
  readonly admit: (
    request: ChatCompletionRequest
  ) => Effect.Effect<Either.Either<Completion<E>, HttpServerResponse.HttpServerResponse>, never, Scope.Scope>
  /**
   * A failed completion as the caller's error, in the chat request's words (the routes reword it); `undefined`
   * for a failure that is not the caller's (logged; a server error).
   */
  readonly failure: (cause: Cause.Cause<E>) => OpenAiError | undefined
  /**
   * Told of every response once it is complete, stored or not, with the request it answers (as the caller sent
   * it): a rollout records the exchange in its trajectory's `exchanges`.
   */
  readonly exchanged?: ((request: ResponseCreateRequest, response: Response) => Effect.Effect<void>) | undefined
}

const decodeRequest = Schema.decodeUnknownEither(ResponseCreateRequest)
const decodeChat = Schema.decodeUnknownEither(ChatCompletionRequest)

const invalid = (message: string, param: string | null = null): OpenAiError => ({
  status: 400,
  type: "invalid_request_error",
  message,
  param,
  code: null
})

const notFound = (id: string): OpenAiError => ({
  status: 404,
  type: "invalid_request_error",
  message: `Response with id '${id}' not found.`,
  param: null,
  code: null
})

/** An error of the chat request, in the Responses request's words. */
const reworded = (error: OpenAiError): OpenAiError => ({
  ...error,
  message: responsesMessageOf(error.message),
  param: responsesParamOf(error.param)
})

/** The items of the responses a request continues (oldest first), or the error naming why the chain breaks. */
const historyOf = (store: ResponseStore, previousId: string | null | undefined) =>
  Effect.map(
    follow(previousId, store.get, (stored) => ({
      id: stored.response.id,
      previousResponseId: stored.previousResponseId
    })),
    Either.mapBoth({ onLeft: (error) => invalid(error.message, error.param), onRight: historyItemsOf })
  )

/** The stored items a request's `item_reference`s name, by id: those of its history, then of the responses named. */
const referencedItems = (store: ResponseStore, request: ResponseCreateRequest, history: ReadonlyArray<AnyItem>) =>
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
      for (const other of itemsOf(stored.value)) if (typeof other.id === "string") found.set(other.id, other)
    }
    return found
  })

const SSE_HEADERS = { "cache-control": "no-cache" } as const

/**
 * `POST /responses` with the body's JSON `body` (already parsed; see the module), over a backend. Needs a
 * scope that lasts as long as the response's body is being written (the request's).
 */
export const createResponse = <E>(
  backend: Backend<E>,
  body: unknown
): Effect.Effect<HttpServerResponse.HttpServerResponse, E, Scope.Scope> =>
  Effect.gen(function* () {
    const refuse = (error: OpenAiError) => backend.error(error)
    const decoded = decodeRequest(body)
    if (Either.isLeft(decoded)) {
      return refuse(invalid(ParseResult.TreeFormatter.formatErrorSync(decoded.left), firstField(decoded.left)))
    }
    const request = decoded.right
    const history = yield* historyOf(backend.store, request.previous_response_id)
    if (Either.isLeft(history)) return refuse(history.left)
    const references = yield* referencedItems(backend.store, request, history.right)
    const resolve = (id: string) => references.get(id)
    const chat = chatRequestOf(request, { history: history.right, resolve })
    if (Either.isLeft(chat)) return refuse(invalid(chat.left.message, chat.left.param))
    const streamed = request.stream === true
    // The chat request's own checks (across fields too), in the Responses request's words.
    const checked = decodeChat({
      ...backend.defaults,
      ...chat.right,
      ...(request.model === undefined ? {} : { model: request.model }),
      ...(streamed ? { stream: true, stream_options: { include_usage: true } } : {})
    })
    if (Either.isLeft(checked)) {
      const issue = ParseResult.ArrayFormatter.formatErrorSync(checked.left)[0]
      return refuse(
        reworded(
          invalid(issue?.message ?? ParseResult.TreeFormatter.formatErrorSync(checked.left), firstField(checked.left))
        )
      )
    }
    const admitted = yield* backend.admit(checked.right)
    if (Either.isLeft(admitted)) return admitted.left
    const completion = admitted.right
    const createdAt = Math.floor((yield* Clock.currentTimeMillis) / 1000)
    const store = request.store !== false
    const metaOf = (model: string): ResponseMeta => ({ id: newResponseId(), createdAt, model, store })
    const save = (response: Response, meta: ResponseMeta) =>
      Effect.zipRight(
        backend.exchanged?.(request, response) ?? Effect.void,
        meta.store
          ? backend.store.put({
              response,
              inputItems: storedInputItemsOf(request, meta.id, resolve),
              previousResponseId: request.previous_response_id ?? null
            })
          : Effect.void
      )
    /** A failure as the caller's error (reworded), or `undefined`: the server's own failure. */
    const failureOf = (cause: Cause.Cause<E>) => {
      const error = backend.failure(cause)
      return error === undefined ? undefined : reworded(error)
    }
    if (!streamed) {
      const exit = yield* Effect.exit(completion.whole)
      if (Exit.isFailure(exit)) {
        const error = failureOf(exit.cause)
        return error === undefined ? yield* Effect.failCause(exit.cause) : refuse(error)
      }
      const meta = metaOf(completion.model ?? exit.value.model)
      const response = responseOf(exit.value, request, meta)
      yield* save(response, meta)
      return HttpServerResponse.unsafeJson(response)
    }
    // The first chunk before the answer: a completion refused before it samples keeps its status.
    const chunks = yield* completion.start
    if (Exit.isFailure(chunks)) {
      const error = failureOf(chunks.cause)
      return error === undefined ? yield* Effect.failCause(chunks.cause) : refuse(error)
    }
    const first = chunks.value.first
    const meta = metaOf(completion.model ?? Option.match(first, { onNone: () => "", onSome: (chunk) => chunk.model }))
    const events = new ResponseEvents(request, meta)
    const body_ = Stream.fromIterable(events.start()).pipe(
      Stream.concat(Stream.mapConcat(chunks.value.stream, (chunk) => events.push(chunk))),
      Stream.concat(
        Stream.suspend(() => {
          // The last event carries the whole response, as `responseOf` makes it of the joined chunks.
          const last = events.end()
          const final = last.at(-1)
          const saved = final !== undefined && "response" in final ? save(final.response, meta) : Effect.void
          return Stream.fromIterableEffect(Effect.as(saved, last))
        })
      ),
      Stream.map(sseOf),
      Stream.catchAllCause((cause) => {
        const error = failureOf(cause)
        if (error !== undefined) {
          const code = typeof error.code === "string" ? error.code : "invalid_request"
          return Stream.make(sseOf(events.error(error.message, code, error.param)))
        }
        // The server's own failure: logged, and the stream told so without its cause.
        return Stream.fromEffect(
          Effect.as(
            Effect.logError("a streamed response failed", cause),
            sseOf(events.error("the response could not be completed", "server_error"))
          )
        )
      }),
      Stream.encodeText
    )
    return HttpServerResponse.stream(body_, { contentType: "text/event-stream", headers: SSE_HEADERS })
  })

/** `GET /responses/{id}`: a stored response, or 404. */
export const getResponse = (backend: Stored, id: string) =>
  Effect.map(backend.store.get(id), (stored) =>
    Option.match(stored, {
      onNone: () => backend.error(notFound(id)),
      onSome: ({ response }) => HttpServerResponse.unsafeJson(response)
    })
  )

/** `DELETE /responses/{id}`: `{id, object: "response", deleted: true}`, or 404. */
export const deleteResponse = (backend: Stored, id: string) =>
  Effect.map(backend.store.remove(id), (removed) =>
    removed ? HttpServerResponse.unsafeJson({ id, object: "response", deleted: true }) : backend.error(notFound(id))
  )

/** `GET /responses/{id}/input_items` (`after`, `limit`, `order`): a page of a stored response's input items. */
export const listInputItems = (
  backend: Stored,
  id: string,
  query: {
    readonly after?: string | undefined
    readonly limit?: string | undefined
    readonly order?: string | undefined
  }
) =>
  Effect.map(backend.store.get(id), (stored) => {
    if (Option.isNone(stored)) return backend.error(notFound(id))
    const page = inputItemsPage(stored.value.inputItems, query)
    return Either.isLeft(page)
      ? backend.error(invalid(page.left.message, page.left.param))
      : HttpServerResponse.unsafeJson(page.right)
  })
