/**
 * The Responses API of a running rollout, on any backend: a request is translated into a chat completion of
 * the rollout's policy (`ResponsesChat.chatRequestOf`), made with `Rollout.chat` (so it is recorded as the
 * service's `messages_and_choices`, with the token ids and logprobs as sampled), and the choice is translated
 * back into a `Response` (`responseOf`), or into its server-sent events once it is complete (a rollout records
 * whole choices). Responses are kept for the rollout's lifetime unless `store: false`, for
 * `previous_response_id`, `item_reference`, and the reads (`GET`, `DELETE`, `.../input_items`).
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { type ChatCompletion, ChatCompletionRequest } from "../../api/ChatCompletion.js"
import { ChunkJoin } from "../../api/internal/chunkJoin.js"
import { follow } from "../../api/internal/responseChain.js"
import { ResponseCreateRequest } from "../../api/Responses.js"
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
  responseOf,
  responsesMessageOf,
  responsesParamOf,
  type StoredResponse,
  storedInputItemsOf
} from "../../api/ResponsesChat.js"
import * as Rollout from "../Rollout.js"
import {
  errorEvent,
  errorResponse,
  failureResponse,
  invalidRequest,
  json,
  type RouteContext,
  relay
} from "./rolloutHttp.js"

const decodeRequest = Schema.decodeUnknownEither(ResponseCreateRequest)
const decodeChat = Schema.decodeUnknownEither(ChatCompletionRequest)

const refused = (error: ResponsesRequestError) =>
  errorResponse(400, error.message, "invalid_request_error", error.param)

const notFound = (id: string) => errorResponse(404, `Response with id '${id}' not found.`, "invalid_request_error")

/** A path segment's id, percent-decoded; `undefined` when it is not valid percent-encoding (`%zz`): no such id. */
const decodedId = (segment: string): string | undefined => {
  try {
    return decodeURIComponent(segment)
  } catch {
    return undefined
  }
}

/** The items of the responses a request continues, oldest first, or the 400 naming why the chain breaks. */
const historyOf = (
  stored: ReadonlyMap<string, StoredResponse>,
  previousId: string | null | undefined
): Either.Either<Array<AnyItem>, Response> =>
  Effect.runSync(
    follow(
      previousId,
      (id) => Effect.sync(() => Option.fromNullable(stored.get(id))),
      (one) => ({ id: one.response.id, previousResponseId: one.previousResponseId })
    )
  ).pipe(
    Either.mapBoth({
      onLeft: (error) => errorResponse(400, error.message, "invalid_request_error", error.param),
      onRight: historyItemsOf
    })
  )

/** A stored item by id, among every response the rollout kept. */
const resolverOf = (stored: ReadonlyMap<string, StoredResponse>) => (id: string) => {
  for (const one of stored.values()) {
    for (const item of itemsOf(one)) {
      if (item.id === id) return item
    }
  }
  return undefined
}

const create = async (context: RouteContext, body: unknown, signal: AbortSignal | undefined): Promise<Response> => {
  const decoded = decodeRequest(body)
  if (Either.isLeft(decoded)) return invalidRequest(decoded.left)
  const request = decoded.right
  const recorder = await context.run(Effect.map(Rollout.Current, (current) => current.recorder))
  if (Exit.isFailure(recorder)) return failureResponse(recorder.cause)
  const stored = recorder.value.responses
  const history = historyOf(stored, request.previous_response_id)
  if (Either.isLeft(history)) return history.left
  const resolve = resolverOf(stored)
  const translated = chatRequestOf(request, { history: history.right, resolve })
  if (Either.isLeft(translated)) return refused(translated.left)
  // The chat request's own checks, in the Responses request's words; the rollout's defaults under it.
  const checked = decodeChat({ ...context.options.request, ...translated.right })
  if (Either.isLeft(checked)) {
    return errorResponse(
      400,
      responsesMessageOf(ParseResult.TreeFormatter.formatErrorSync(checked.left)),
      "invalid_request_error",
      responsesParamOf(firstField(checked.left))
    )
  }
  const { model: _model, stream: _stream, stream_options: _options, ...chat } = checked.right
  const words = { message: responsesMessageOf, param: responsesParamOf }
  const store = request.store !== false
  /** The response of the completion, kept (when `store`) for `previous_response_id` and the get routes. */
  const keep = (completion: ChatCompletion, meta: ResponseMeta) => {
    const response = responseOf(completion, request, meta)
    if (meta.store) {
      stored.set(meta.id, {
        response,
        inputItems: storedInputItemsOf(request, meta.id, resolve),
        previousResponseId: request.previous_response_id ?? null
      })
    }
    return response
  }
  if (request.stream === true) {
    const now = await context.run(Clock.currentTimeMillis)
    const createdAt = Math.floor((Exit.isSuccess(now) ? now.value : Date.now()) / 1000)
    // The policy's chunks as Responses events while they are sampled; the response kept once they all came.
    return relay(
      context,
      Rollout.chatStream(chat),
      {
        open: (first) => {
          const meta = { id: newResponseId(), createdAt, model: first.model, store }
          const events = new ResponseEvents(request, meta)
          const joined = new ChunkJoin()
          return {
            start: events.start(),
            events: (chunk) => {
              joined.add(chunk)
              return events.push(chunk)
            },
            end: () => {
              keep(joined.completion()!, meta)
              return events.end()
            },
            error: (cause) => {
              const { message, code, param } = errorEvent(cause, words).error as {
                readonly message: string
                readonly code: string | null
                readonly param: string | null
              }
              return events.error(message, code, param)
            }
          }
        },
        failed: (cause) => failureResponse(cause, words),
        done: false
      },
      signal
    )
  }
  const exit = await context.run(Effect.zip(Rollout.chat(chat), Clock.currentTimeMillis), signal)
  if (Exit.isFailure(exit)) return failureResponse(exit.cause, words)
  const [completion, now] = exit.value
  return json(
    200,
    keep(completion, { id: newResponseId(), createdAt: Math.floor(now / 1000), model: completion.model, store })
  )
}

/**
 * Answers a Responses-API route of the rollout: `POST /responses`, `GET`/`DELETE /responses/{id}`,
 * `GET /responses/{id}/input_items`.
 */
export const responsesRoute = async (
  context: RouteContext,
  method: string,
  route: string,
  body: unknown,
  signal: AbortSignal | undefined,
  query: URLSearchParams = new URLSearchParams()
): Promise<Response> => {
  if (route === "/responses") {
    return method === "POST"
      ? create(context, body, signal)
      : errorResponse(405, `${method} /responses is not served (POST creates a response)`, "invalid_request_error")
  }
  const match = /^\/responses\/([^/]+)(\/input_items)?$/.exec(route)
  if (match === null) return errorResponse(404, `${method} ${route} is not served`, "not_found_error")
  const id = decodedId(match[1]!)
  if (id === undefined) return notFound(match[1]!)
  const recorder = await context.run(Effect.map(Rollout.Current, (current) => current.recorder))
  if (Exit.isFailure(recorder)) return failureResponse(recorder.cause)
  const stored = recorder.value.responses
  const found = stored.get(id)
  if (found === undefined) return notFound(id)
  if (match[2] !== undefined) {
    if (method !== "GET") return errorResponse(405, `${method} ${route} is not served`, "invalid_request_error")
    const page = inputItemsPage(found.inputItems, {
      after: query.get("after") ?? undefined,
      limit: query.get("limit") ?? undefined,
      order: query.get("order") ?? undefined
    })
    return Either.isLeft(page) ? refused(page.left) : json(200, page.right)
  }
  if (method === "GET") return json(200, found.response)
  if (method === "DELETE") {
    stored.delete(id)
    return json(200, { id, object: "response", deleted: true })
  }
  return errorResponse(405, `${method} ${route} is not served`, "invalid_request_error")
}
