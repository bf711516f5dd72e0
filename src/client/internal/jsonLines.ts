/**
 * JSON lines (`application/jsonl`): a body of bytes becomes text, then lines (LF, CRLF or CR, split anywhere
 * across network reads), then one value per non-blank line decoded with a Schema. A line that is not JSON or
 * does not match its schema fails the stream with a `Decode` `ApiError` naming the line; it is never dropped.
 * Also the lines of `completions/create_stream` (metadata, chunks, and an `{error}` line that ends it).
 *
 * @internal
 */
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Channel from "effect/Channel"
import * as Chunk from "effect/Chunk"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { ChatCompletionChunk } from "../../api/ChatCompletion.js"
import { decodeChunk as decodeChunkFast } from "../../api/internal/chunkDecode.js"
import { CompletionsStreamMeta } from "../../api/TraceMisc.js"
import { ApiError } from "../ApiError.js"
import type { CompletionsStreamEvent } from "../TraceClient.js"
import { bodyBroke, type Call, decodeError, requestIdOf } from "./http.js"

/** One line of the body with its 1-based number (blank lines are counted, not emitted). */
export interface Line {
  readonly number: number
  readonly text: string
}

/**
 * The line splitter of `Stream.splitLines`, as a plain state machine: LF and CRLF end a line (a CRLF may be
 * split across reads; a lone CR stays in its line); what follows the last line end is kept for the next read.
 */
const makeSplitter = () => {
  let builder = ""
  let midCRLF = false
  const feed = (str: string, out: Array<string>) => {
    if (str.length === 0) return
    let from = 0
    let indexOfCR = str.indexOf("\r")
    let indexOfLF = str.indexOf("\n")
    if (midCRLF) {
      if (indexOfLF === 0) {
        out.push(builder)
        builder = ""
        from = 1
        indexOfLF = str.indexOf("\n", from)
      } else {
        builder = `${builder}\r`
      }
      midCRLF = false
    }
    while (indexOfCR !== -1 || indexOfLF !== -1) {
      if (indexOfCR === -1 || (indexOfLF !== -1 && indexOfLF < indexOfCR)) {
        if (builder.length === 0) out.push(str.substring(from, indexOfLF))
        else {
          out.push(builder + str.substring(from, indexOfLF))
          builder = ""
        }
        from = indexOfLF + 1
        indexOfLF = str.indexOf("\n", from)
      } else if (str.length === indexOfCR + 1) {
        midCRLF = true
        indexOfCR = -1
      } else if (indexOfLF === indexOfCR + 1) {
        if (builder.length === 0) out.push(str.substring(from, indexOfCR))
        else {
          out.push(builder + str.substring(from, indexOfCR))
          builder = ""
        }
        from = indexOfCR + 2
        indexOfCR = str.indexOf("\r", from)
        indexOfLF = str.indexOf("\n", from)
      } else {
        indexOfCR = str.indexOf("\r", indexOfCR + 1)
      }
    }
    builder += midCRLF ? str.substring(from, str.length - 1) : str.substring(from)
  }
  /** What is left at the end of input (or before a failure), as a last line. */
  const rest = (out: Array<string>) => {
    if (builder.length > 0) out.push(builder)
    builder = ""
  }
  return { feed, rest }
}

/**
 * Bytes of a JSON-lines body to decoded values in ONE stage: each read is decoded as UTF-8 text, split into
 * lines, the blank ones counted and skipped, and each other line decoded by `decode`; the values of a read are
 * emitted as one chunk, a failure after the values before it. The same as `Stream.decodeText`,
 * `Stream.splitLines`, numbering, filtering and a `Stream.mapEffect` of `decode`, without a stage per line
 * (a line left at the end, or before the body broke, is decoded too, as `splitLines` emits it).
 */
export const decodeLines = <A, E, E1>(
  bytes: Stream.Stream<Uint8Array, E1>,
  decode: (line: Line) => Either.Either<A, E>
): Stream.Stream<A, E | E1> =>
  Stream.suspend(() => {
    const decoder = new TextDecoder()
    const splitter = makeSplitter()
    const texts: Array<string> = []
    let number = 0
    /** Decodes the split lines into `out`: the failure, or undefined. */
    const drain = (out: Array<A>): Either.Left<E, A> | undefined => {
      for (let i = 0; i < texts.length; i++) {
        const text = texts[i]!
        number++
        if (text.trim() === "") continue
        const decoded = decode({ number, text })
        if (Either.isLeft(decoded)) {
          texts.length = 0
          return decoded
        }
        out.push(decoded.right)
      }
      texts.length = 0
      return undefined
    }
    type Reader = Channel.Channel<Chunk.Chunk<A>, Chunk.Chunk<Uint8Array>, E | E1, E1, unknown, unknown>
    const emit = (out: Array<A>, then: Reader): Reader =>
      out.length === 0 ? then : Channel.zipRight(Channel.write(Chunk.unsafeFromArray(out)), then)
    const loop: Reader = Channel.readWithCause({
      onInput: (input: Chunk.Chunk<Uint8Array>) => {
        const out: Array<A> = []
        for (const piece of input) {
          splitter.feed(decoder.decode(piece, { stream: true }), texts)
          const failed = drain(out)
          if (failed !== undefined) return emit(out, Channel.fail(failed.left))
        }
        return emit(out, loop)
      },
      onFailure: (cause) => {
        splitter.rest(texts)
        const out: Array<A> = []
        const failed = drain(out)
        return emit(out, failed === undefined ? Channel.failCause(cause) : Channel.fail(failed.left))
      },
      onDone: () => {
        splitter.rest(texts)
        const out: Array<A> = []
        const failed = drain(out)
        return emit(out, failed === undefined ? Channel.void : Channel.fail(failed.left))
      }
    })
    return Stream.pipeThroughChannel(bytes, loop)
  })

/** Parse a line as JSON, failing with a `Decode` error that names the line. */
export const parseLine = (
  call: Pick<Call, "method" | "path">,
  status: number | undefined,
  requestId: string | undefined,
  line: Line
): Either.Either<unknown, ApiError> => {
  try {
    return Either.right(JSON.parse(line.text) as unknown)
  } catch (e) {
    return Either.left(
      decodeError(
        call,
        status,
        requestId,
        line.text,
        `line ${line.number} is not JSON: ${e instanceof Error ? e.message : String(e)}`
      )
    )
  }
}

/** A decoder of parsed lines with `schema`, failing with a `Decode` error that names the line. */
export const lineDecoder = <A, I>(
  call: Pick<Call, "method" | "path">,
  schema: Schema.Schema<A, I>,
  status: number | undefined,
  requestId: string | undefined
): ((line: Line, json: unknown) => Either.Either<A, ApiError>) => {
  const decode = Schema.decodeUnknownEither(schema, { errors: "all" })
  return (line, json) =>
    Either.mapLeft(decode(json), (error) =>
      decodeError(call, status, requestId, line.text, `line ${line.number} does not match: ${error.message}`)
    )
}

/** The body of a 2xx response, a broken connection mapped to a `Transport` error. */
const responseBytes = (
  call: Pick<Call, "method" | "path">,
  response: HttpClientResponse.HttpClientResponse
): Stream.Stream<Uint8Array, ApiError> => Stream.mapError(response.stream, bodyBroke(call, response, "stream"))

/** Decode every line of a 2xx response with `schema`. */
export const decodeResponse = <A, I>(
  call: Pick<Call, "method" | "path">,
  response: HttpClientResponse.HttpClientResponse,
  schema: Schema.Schema<A, I>
): Stream.Stream<A, ApiError> => {
  const requestId = requestIdOf(response.headers)
  const decodeLine = lineDecoder(call, schema, response.status, requestId)
  return decodeLines(responseBytes(call, response), (line) =>
    Either.flatMap(parseLine(call, response.status, requestId, line), (json) => decodeLine(line, json))
  )
}

/** The lines of `completions/create_stream`: `{_meta}` lines, chunks, and `{error}` lines that end it. */
export const completionsEvents = (
  call: Call,
  response: HttpClientResponse.HttpClientResponse
): Stream.Stream<CompletionsStreamEvent, ApiError> => {
  const requestId = requestIdOf(response.headers)
  const decodeMeta = lineDecoder(call, CompletionsStreamMeta, response.status, requestId)
  const decodeChunk = lineDecoder(call, ChatCompletionChunk, response.status, requestId)
  return decodeLines(responseBytes(call, response), (line) =>
    Either.flatMap(
      parseLine(call, response.status, requestId, line),
      (json): Either.Either<CompletionsStreamEvent, ApiError> => {
        const record = typeof json === "object" && json !== null ? (json as Record<string, unknown>) : {}
        if ("_meta" in record) {
          return Either.map(decodeMeta(line, json), (meta) => ({ _tag: "Meta", meta: meta._meta }))
        }
        if (record.error !== undefined && record.error !== null && !("choices" in record)) {
          const error = record.error
          const message =
            typeof error === "string"
              ? error
              : typeof error === "object" && typeof (error as Record<string, unknown>).message === "string"
                ? String((error as Record<string, unknown>).message)
                : JSON.stringify(error)
          return Either.left(
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
        const fast = decodeChunkFast(json)
        if (fast !== undefined) return Either.right({ _tag: "Chunk", chunk: fast })
        return Either.map(decodeChunk(line, json), (chunk) => ({ _tag: "Chunk", chunk }))
      }
    )
  )
}
