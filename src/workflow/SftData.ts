/**
 * Where SFT training data goes: an SFT job reads its conversations as JSONL (one `{messages, tools?}` per
 * line) from `training_data_url`, so before the {@link Trainer} submits a job the JSONL must be put where the
 * backend can read it. {@link SftData} is that step, as a service:
 *
 * - {@link localFiles}: uploads the JSONL to the embedded backend's `/v1/local/files` and answers the URL it
 *   gives. Right for the embedded backend, which reads its own uploads from its store; `Backend.local`
 *   provides it.
 * - {@link directory}: writes the JSONL into a directory on this machine (atomically: a temporary file, then
 *   a rename) and answers its `file://` URL. The embedded backend reads it only when started with that
 *   directory allowed (`effect-rl serve --allow-dir <dir>`, `LocalBackend`'s `allowDirs`).
 * - {@link fromFunction}: any upload of your own (an object store, an artifact). The **hosted** service reads
 *   SFT data from an artifact URI (`wandb-artifact:///entity/project/name:v0`), which this package does not
 *   create: upload the JSONL as an artifact with your tools and answer its URI, or, when the data is already
 *   there, skip this service and call `Trainer.trainSftUrl` with the URI.
 *
 * With {@link directory}, file names are the SHA-256 of the content, so the same conversations always get the
 * same URL, which keeps the job's default idempotency key the same when a submission is repeated (an upload
 * with {@link localFiles} gets a new URL each time).
 *
 * @since 0.1.0
 */
import { createHash, randomUUID } from "node:crypto"
import { mkdir, rename, rm, writeFile } from "node:fs/promises"
import { join, resolve } from "node:path"
import { pathToFileURL } from "node:url"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { Message, Tool } from "../api/ChatMessage.js"

/** One SFT example: a conversation whose assistant turns are learned, with the tools it may call. */
export const Conversation = Schema.Struct({
  messages: Schema.Array(Message),
  tools: Schema.optional(Schema.NullOr(Schema.Array(Tool)))
}).annotations({ identifier: "SftConversation" })
/** @see {@link Conversation} */
export type Conversation = typeof Conversation.Type

/** The data could not be serialized (`Encode`) or stored (`Upload`). */
export class SftDataError extends Data.TaggedError("SftDataError")<{
  /** Which step failed. */
  readonly reason: "Encode" | "Upload"
  /** What went wrong. */
  readonly description: string
  /** The underlying failure, if any. */
  readonly cause?: unknown
}> {
  override get message(): string {
    return `SFT data ${this.reason}: ${this.description}`
  }
}

/** The SFT data service: stores a JSONL document and answers the URL a training job reads it from. */
export interface Service {
  /** Stores `jsonl` and answers its `training_data_url`. */
  readonly upload: (jsonl: string) => Effect.Effect<string, SftDataError>
}

/** The SFT data service's tag. */
export class SftData extends Context.Tag("effect-rl/SftData")<SftData, Service>() {}

const encodeLine = Schema.encode(Schema.parseJson(Conversation))

/** The JSONL of some conversations: one JSON object per line, each line ended by a newline. */
export const toJsonl = (conversations: ReadonlyArray<Conversation>): Effect.Effect<string, SftDataError> =>
  Effect.forEach(conversations, (conversation, i) =>
    Effect.mapError(
      encodeLine(conversation),
      (error) =>
        new SftDataError({ reason: "Encode", description: `conversation ${i}: ${error.message}`, cause: error })
    )
  ).pipe(Effect.map((lines) => lines.map((line) => `${line}\n`).join("")))

/** The SHA-256 of a text, in hex. */
const sha256 = (text: string): string => createHash("sha256").update(text).digest("hex")

/**
 * Stores the JSONL as `sft-<sha256>.jsonl` under `dir` (created if missing), written to a temporary file
 * first and renamed into place, so a reader never sees half a file; answers its `file://` URL.
 */
export const writeTo = (dir: string, jsonl: string): Effect.Effect<string, SftDataError> => {
  const root = resolve(dir)
  const file = join(root, `sft-${sha256(jsonl)}.jsonl`)
  const temp = join(root, `.sft-${randomUUID()}.tmp`)
  return Effect.tryPromise({
    try: async () => {
      await mkdir(root, { recursive: true })
      try {
        await writeFile(temp, jsonl, "utf8")
        await rename(temp, file)
      } catch (error) {
        await rm(temp, { force: true })
        throw error
      }
      return pathToFileURL(file).href
    },
    catch: (cause) =>
      new SftDataError({
        reason: "Upload",
        description: `could not write ${file}: ${cause instanceof Error ? cause.message : String(cause)}`,
        cause
      })
  }).pipe(Effect.withSpan("SftData.directory.upload", { attributes: { dir: root, bytes: jsonl.length } }))
}

/** SFT data written under a directory of this machine, read by the backend as `file://` URLs (see the module). */
export const directory = (dir: string): Layer.Layer<SftData> =>
  Layer.succeed(SftData, { upload: (jsonl) => writeTo(dir, jsonl) })

/** SFT data stored by a function of your own (an upload to an object store or an artifact) answering the URL. */
export const fromFunction = (upload: (jsonl: string) => Effect.Effect<string, SftDataError>): Layer.Layer<SftData> =>
  Layer.succeed(SftData, { upload })

/** Options of {@link localFiles}. */
export interface LocalFilesOptions {
  /** The embedded backend's base URL (`LocalBackend`'s `url`). */
  readonly baseUrl: string
  /** Its API key. */
  readonly apiKey: Redacted.Redacted<string>
}

/** The answer of `POST /v1/local/files`. */
const Uploaded = Schema.Struct({ id: Schema.String, url: Schema.String, bytes: Schema.Number })

/**
 * SFT data uploaded to the embedded backend (`POST /v1/local/files`, the backend's extension of the API),
 * answering the URL it gives, which the backend reads from its store by the file's id (see the module).
 */
export const localFiles = (options: LocalFilesOptions): Layer.Layer<SftData, never, HttpClient.HttpClient> =>
  Layer.effect(
    SftData,
    Effect.map(HttpClient.HttpClient, (http) => {
      const client = http.pipe(HttpClient.filterStatusOk)
      const upload = (jsonl: string) =>
        HttpClientRequest.post(`${options.baseUrl.replace(/\/+$/, "")}/v1/local/files`).pipe(
          HttpClientRequest.bearerToken(options.apiKey),
          HttpClientRequest.bodyText(jsonl, "application/jsonl"),
          client.execute,
          Effect.flatMap(HttpClientResponse.schemaBodyJson(Uploaded)),
          Effect.scoped,
          Effect.map((uploaded) => uploaded.url),
          Effect.mapError(
            (cause) =>
              new SftDataError({
                reason: "Upload",
                description: `could not upload to ${options.baseUrl}/v1/local/files: ${cause.message}`,
                cause
              })
          ),
          Effect.withSpan("SftData.localFiles.upload", { attributes: { bytes: jsonl.length } })
        )
      return { upload }
    })
  )
