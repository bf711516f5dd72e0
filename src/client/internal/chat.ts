/**
 * Chat completions, shared by the training and inference clients: one call, or a stream of typed chunks
 * parsed from server-sent events. Retries cover obtaining the response only, never a stream that has begun;
 * interrupting the stream aborts the HTTP request.
 *
 * @internal
 */
import * as HttpClientError from "@effect/platform/HttpClientError"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Channel from "effect/Channel"
import type * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { ChatCompletionChunk, type ChatCompletionRequest } from "../../api/ChatCompletion.js"
import { decodeChunk as decodeChunkFast } from "../../api/internal/chunkDecode.js"
import { createChatCompletion } from "../../api/TrainingApi.js"
import { ApiError, reasonOfStatus } from "../ApiError.js"
import { endpointCall } from "./endpoint.js"
import { bodyBroke, type Call, decodeError, readText, requestIdOf, send, type Transport } from "./http.js"
import * as Sse from "./sse.js"
import * as SseBody from "./sseBody.js"

const completions = endpointCall(createChatCompletion)
const decodeChunk = Schema.decodeUnknownEither(ChatCompletionChunk, { errors: "all" })

/**
 * How long the rest of a body is read after `data: [DONE]` (a server ends it at once; reading it to its end keeps
 * the connection for the next request), before the request is aborted.
 */
const DRAIN_AFTER_DONE = "100 millis"

/** Create a chat completion (retried per the convention: chat completions are safe to repeat). */
export const create = (
  transport: Transport,
  request: ChatCompletionRequest,
  headers?: Readonly<Record<string, string>>
) => completions.run(transport, { payload: { ...request, stream: false }, headers, retry: true })

/** Stream a chat completion's chunks. */
export const stream = (
  transport: Transport,
  request: ChatCompletionRequest,
  headers?: Readonly<Record<string, string>>
): Stream.Stream<ChatCompletionChunk, ApiError> =>
  // `Channel.unwrap` rather than `Stream.unwrap`: the stream is decided once, not flattened chunk by chunk.
  Stream.fromChannel(
    Channel.unwrap(
      Effect.flatMap(completions.prepare({ payload: { ...request, stream: true }, headers, retry: true }), (call) =>
        Effect.flatMap(
          send(transport, { ...call, headers: { ...call.headers, accept: "text/event-stream" } }, Effect.succeed),
          (response) => events(call, response)
        )
      )
    )
  )

/** The response's chunks, or the failure of a response that is not an event stream. */
const events = (
  call: Call,
  response: HttpClientResponse.HttpClientResponse
): Effect.Effect<
  Channel.Channel<Chunk.Chunk<ChatCompletionChunk>, unknown, ApiError, unknown, unknown, unknown>,
  ApiError
> => {
  // The platform makes the headers anew each time they are asked for.
  const responseHeaders = response.headers
  const requestId = requestIdOf(responseHeaders)
  const contentType = responseHeaders["content-type"] ?? ""
  const status = response.status
  if (!contentType.includes("text/event-stream")) {
    // A server that ignored `stream` and answered with one JSON body: not a stream of chunks.
    return Effect.flatMap(readText(call, response), (text) =>
      Effect.fail(decodeError(call, status, requestId, text, `expected text/event-stream, got '${contentType}'`))
    )
  }
  // One stage from bytes to typed chunks (see `Sse.decodeEvents`); each event parsed once, and decoded by the fast
  // decoder of chunks, or by the schema when that one is not sure (the schema's issues, then).
  const decode = (event: Sse.SseEvent): Sse.Decoded<ChatCompletionChunk, ApiError> => {
    if (event.data === "[DONE]") return Sse.End
    let json: unknown
    try {
      json = JSON.parse(event.data)
    } catch (e) {
      return Either.left(decodeError(call, status, requestId, event.data, `an event is not JSON: ${String(e)}`))
    }
    const error = (json as { readonly error?: unknown } | null)?.error
    if (event.event === "error" || (error !== undefined && error !== null && error !== false)) {
      return Either.left(midStreamError(call, status, requestId, error ?? json))
    }
    const fast = decodeChunkFast(json)
    if (fast !== undefined) return Either.right(fast)
    return Either.mapLeft(decodeChunk(json), (e) =>
      decodeError(call, status, requestId, event.data, `a chunk does not match: ${e.message}`)
    )
  }
  const broke = bodyBroke(call, response, "stream")
  // The Node body read directly when the platform's Node client gave it (see `SseBody`), else the platform's byte
  // stream.
  const body = SseBody.nodeBodyOf(response)
  const chunks =
    body !== undefined
      ? SseBody.decodeBody(body, decode, {
          drainAfterEnd: DRAIN_AFTER_DONE,
          // The error the platform's `response.stream` fails with, for the same description.
          onBodyError: (cause) =>
            broke(new HttpClientError.ResponseError({ request: response.request, response, reason: "Decode", cause }))
        })
      : Sse.decodeEvents(response.stream, decode, { drainAfterEnd: DRAIN_AFTER_DONE, onBodyError: broke })
  return Effect.succeed(Stream.toChannel(chunks))
}

/** The typed error of an `{"error": {...}}` event sent after the stream began (the status is already 200). */
const midStreamError = (
  call: { readonly method: string; readonly path: string },
  status: number,
  requestId: string | undefined,
  error: unknown
): ApiError => {
  const body = typeof error === "object" && error !== null ? (error as Record<string, unknown>) : {}
  const code = body.code
  const message = typeof body.message === "string" ? body.message : typeof error === "string" ? error : "stream error"
  return new ApiError({
    reason: typeof code === "number" && code >= 400 ? reasonOfStatus(code) : "ServerError",
    method: call.method,
    path: call.path,
    status,
    description: message,
    requestId,
    errorType: typeof body.type === "string" ? body.type : undefined,
    code: typeof code === "number" || typeof code === "string" ? code : undefined,
    param: typeof body.param === "string" ? body.param : undefined,
    retryable: false
  })
}
