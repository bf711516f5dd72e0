/**
 * JSON lines (`application/jsonl`): a body of bytes becomes text, then lines (LF, CRLF or CR, split anywhere
 * across network reads), then one value per non-blank line decoded with a Schema. A line that is not JSON or
 * does not match its schema fails the stream with a `Decode` `ApiError` naming the line; it is never dropped.
 * Also the lines of `completions/create_stream` (metadata, chunks, and an `{error}` line that ends it).
 *
 * @internal
 */
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { ChatCompletionChunk } from "../../api/ChatCompletion.js"
import { CompletionsStreamMeta } from "../../api/TraceMisc.js"
import { ApiError } from "../ApiError.js"
import type { CompletionsStreamEvent } from "../TraceClient.js"
import { bodyBroke, type Call, decodeError, requestIdOf } from "./http.js"

/** One line of the body with its 1-based number (blank lines are counted, not emitted). */
export interface Line {
  readonly number: number
  readonly text: string
}

/** The non-blank lines of a stream of bytes, numbered. */
export const lines = <E>(bytes: Stream.Stream<Uint8Array, E>): Stream.Stream<Line, E> =>
  bytes.pipe(
    Stream.decodeText(),
    Stream.splitLines,
    Stream.zipWithIndex,
    Stream.filter(([text]) => text.trim() !== ""),
    Stream.map(([text, index]) => ({ number: index + 1, text }))
  )

/** Parse a line as JSON, failing with a `Decode` error that names the line. */
export const parseLine = (
  call: Pick<Call, "method" | "path">,
  status: number | undefined,
  requestId: string | undefined,
  line: Line
): Effect.Effect<unknown, ApiError> =>
  Effect.try({
    try: () => JSON.parse(line.text) as unknown,
    catch: (e) =>
      decodeError(
        call,
        status,
        requestId,
        line.text,
        `line ${line.number} is not JSON: ${e instanceof Error ? e.message : String(e)}`
      )
  })

/** Decode a parsed line with `schema`, failing with a `Decode` error that names the line. */
export const decodeLine = <A, I>(
  call: Pick<Call, "method" | "path">,
  schema: Schema.Schema<A, I>,
  status: number | undefined,
  requestId: string | undefined,
  line: Line,
  json: unknown
): Effect.Effect<A, ApiError> =>
  Schema.decodeUnknown(schema)(json, { errors: "all" }).pipe(
    Effect.mapError((error) =>
      decodeError(call, status, requestId, line.text, `line ${line.number} does not match: ${error.message}`)
    )
  )

/** The lines of a 2xx response, a broken connection mapped to a `Transport` error. */
export const responseLines = (
  call: Pick<Call, "method" | "path">,
  response: HttpClientResponse.HttpClientResponse
): Stream.Stream<Line, ApiError> => {
  return lines(response.stream.pipe(Stream.mapError(bodyBroke(call, response, "stream"))))
}

/** Decode every line of a 2xx response with `schema`. */
export const decodeResponse = <A, I>(
  call: Pick<Call, "method" | "path">,
  response: HttpClientResponse.HttpClientResponse,
  schema: Schema.Schema<A, I>
): Stream.Stream<A, ApiError> => {
  const requestId = requestIdOf(response.headers)
  return responseLines(call, response).pipe(
    Stream.mapEffect((line) =>
      Effect.flatMap(parseLine(call, response.status, requestId, line), (json) =>
        decodeLine(call, schema, response.status, requestId, line, json)
      )
    )
  )
}

/** The lines of `completions/create_stream`: `{_meta}` lines, chunks, and `{error}` lines that end it. */
export const completionsEvents = (
  call: Call,
  response: HttpClientResponse.HttpClientResponse
): Stream.Stream<CompletionsStreamEvent, ApiError> => {
  const requestId = requestIdOf(response.headers)
  return responseLines(call, response).pipe(
    Stream.mapEffect((line) =>
      Effect.flatMap(
        parseLine(call, response.status, requestId, line),
        (json): Effect.Effect<CompletionsStreamEvent, ApiError> => {
          const record = typeof json === "object" && json !== null ? (json as Record<string, unknown>) : {}
          if ("_meta" in record) {
            return Effect.map(
              decodeLine(call, CompletionsStreamMeta, response.status, requestId, line, json),
              (meta) => ({ _tag: "Meta", meta: meta._meta })
            )
          }
          if (record.error !== undefined && record.error !== null && !("choices" in record)) {
            const error = record.error
            const message =
              typeof error === "string"
                ? error
                : typeof error === "object" && typeof (error as Record<string, unknown>).message === "string"
                  ? String((error as Record<string, unknown>).message)
                  : JSON.stringify(error)
            return Effect.fail(
              new ApiError({
                reason: "ServerError",
                method: call.method,
                path: call.path,
                status: response.status,
                description: message,
                requestId,
                retryable: false
              })
            )
          }
          return Effect.map(decodeLine(call, ChatCompletionChunk, response.status, requestId, line, json), (chunk) => ({
            _tag: "Chunk",
            chunk
          }))
        }
      )
    )
  )
}
