/**
 * The uploaded files extension (see `LocalApi`'s module comment): the two handlers over the store's `Files`,
 * and the job worker's training data reader that takes this backend's own file URLs from the store by id
 * instead of over HTTP.
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import type * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { Files, type Service as FilesService } from "../../store/Files.js"
import { fileContentPath, fileIdOfPath, LocalFile } from "../LocalApi.js"
import { detail } from "./responses.js"
import { JobFailure, type ReadTrainingData } from "./workerData.js"

/** The media types an upload may be sent as (a missing `Content-Type` counts as `application/octet-stream`). */
const ACCEPTED = new Set(["application/jsonl", "application/x-ndjson", "application/octet-stream", "text/plain"])

const mediaTypeOf = (header: string | undefined): string =>
  (header ?? "application/octet-stream").split(";")[0]?.trim().toLowerCase() ?? ""

/** A `Host` header that is a plain `host[:port]` (no scheme, path or spaces). */
const SANE_HOST = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::\d{1,5})?$/

/**
 * The origin the request was sent to: `http://` (the server speaks plain HTTP) and its `Host` header, or
 * the address of the socket it arrived on when that header is missing or odd.
 */
const originOf = (request: HttpServerRequest.HttpServerRequest): string => {
  const host = request.headers.host
  if (host !== undefined && SANE_HOST.test(host)) return `http://${host}`
  let socket: { readonly localAddress?: string | undefined; readonly localPort?: number | undefined } = {}
  try {
    socket = NodeHttpServerRequest.toIncomingMessage(request).socket
  } catch {
    // A request rebuilt from a buffered body (see `body.ts`) has no socket.
  }
  const { localAddress, localPort } = socket
  if (localAddress === undefined || localPort === undefined) return "http://127.0.0.1"
  return localAddress.includes(":") ? `http://[${localAddress}]:${localPort}` : `http://${localAddress}:${localPort}`
}

/** `POST /v1/local/files`: stores the raw body and answers `{id, url, bytes}`; 415 for another media type. */
export const uploadFile: Effect.Effect<
  LocalFile | HttpServerResponse.HttpServerResponse,
  never,
  Files | HttpServerRequest.HttpServerRequest
> = Effect.gen(function* () {
  const request = yield* HttpServerRequest.HttpServerRequest
  const mediaType = mediaTypeOf(request.headers["content-type"])
  if (!ACCEPTED.has(mediaType)) {
    return detail(415, `Unsupported media type ${mediaType}: send the JSONL as ${[...ACCEPTED].join(", ")}`)
  }
  // A body over the limit was refused (413) before reaching here; a read failure is a defect the error
  // middleware answers (413 or 422).
  const body = new Uint8Array(yield* Effect.orDie(request.arrayBuffer))
  const files = yield* Files
  const record = yield* files.put(body, mediaType)
  return new LocalFile({ id: record.id, url: `${originOf(request)}${fileContentPath(record.id)}`, bytes: record.bytes })
}).pipe(Effect.withSpan("Files.upload"))

/** `GET /v1/local/files/{file_id}/content`: the bytes, or 404 `{"detail": "File not found"}`. */
export const getFileContent = ({
  path
}: {
  readonly path: { readonly file_id: string }
}): Effect.Effect<Uint8Array | HttpServerResponse.HttpServerResponse, never, Files> =>
  Effect.flatMap(Files, (files) => files.content(path.file_id)).pipe(
    Effect.map(
      Option.getOrElse((): Uint8Array | HttpServerResponse.HttpServerResponse => detail(404, "File not found"))
    )
  )

/**
 * A training data reader that reads a file URL of this backend (an http(s) URL whose path is
 * `/v1/local/files/<id>/content`) from the store by its id, without HTTP or a key, whatever host and port the
 * URL names: the port of a server started on port 0 changes at every restart, and a job queued before one
 * still names its data by the old one. Any other URL goes to `fallback` (the read policy's reader).
 */
export const ownFilesReader =
  (files: FilesService, fallback: ReadTrainingData): ReadTrainingData =>
  (url) =>
    Effect.gen(function* () {
      const parsed = URL.canParse(url) ? new URL(url) : undefined
      const web = parsed !== undefined && (parsed.protocol === "http:" || parsed.protocol === "https:")
      const id = web ? fileIdOfPath(parsed.pathname) : undefined
      if (id === undefined) return yield* fallback(url)
      const content = yield* files.content(id)
      if (Option.isNone(content)) {
        return yield* new JobFailure({ message: `training data file ${id} is not stored on this server` })
      }
      return new TextDecoder().decode(content.value)
    })
