/**
 * The client of the trace service (surface A): a method for each of its 33 endpoints and the
 * dataset delete, as Effects and Streams failing with `ApiError` (a `{"reason": ...}` body becomes its
 * `description`). The JSON-lines answers (`calls/stream_query`, `table/query_stream`, `threads/stream_query`,
 * `completions/create_stream`) are Streams decoding one line at a time; a line that does not decode fails the
 * stream with a `Decode` error. `file/create` sends multipart, `file/content` answers bytes.
 *
 * Authentication: `Authorization: Bearer <key>` on every call, except the dataset delete, which sends HTTP
 * Basic `api:<key>` as the seed's security scheme for it says (the service accepts both).
 *
 * Retries (408, 409, 429, >= 500, transport failures, time-outs; a stream is retried only until its response
 * begins):
 * - GET `health`, `server_info` and the DELETE of a dataset, as in the other clients;
 * - the reads sent as POST: `call/read`, `calls/query_stats`, `calls/stream_query`, `obj/read`, `objs/query`,
 *   `table/query`, `table/query_stats`, `table/query_stream`, `refs/read_batch`, `file/content`,
 *   `feedback/query`, `cost/query`, `threads/stream_query`;
 * - the creating POSTs that are idempotent by content digest or by a client-chosen id: `obj/create`,
 *   `table/create` and `file/create` (the same content is stored once under its digest), `call/start` when the
 *   start has an `id`, `call/upsert_batch` when every start in it has an `id`, `call/end` (by call id), and
 *   `call/update` (sets a field);
 * - the deletions, which a repeat cannot widen: `calls/delete`, `obj/delete`, `feedback/purge`, `cost/purge`.
 *
 * `feedback/create`, `feedback/replace`, `cost/create`, `table/update` (an append would append twice),
 * `completions/create(_stream)` (each traces a call) and the OTel export are not idempotent: they are sent
 * once, unless the caller gives an idempotency key (sent as `Idempotency-Key`; give one only to a service that
 * honours it).
 *
 * @since 0.1.0
 */
import type * as HttpClient from "@effect/platform/HttpClient"
import type * as ConfigError from "effect/ConfigError"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Stream from "effect/Stream"
import type { ChatCompletionChunk } from "../api/ChatCompletion.js"
import type {
  Call,
  CallCreateBatchReq,
  CallCreateBatchRes,
  CallEndReq,
  CallEndRes,
  CallReadReq,
  CallReadRes,
  CallStartReq,
  CallStartRes,
  CallsDeleteReq,
  CallsDeleteRes,
  CallsQueryReq,
  CallsQueryStatsReq,
  CallsQueryStatsRes,
  CallUpdateReq,
  CallUpdateRes
} from "../api/TraceCall.js"
import type {
  CompletionsCreateReq,
  CompletionsCreateRes,
  CompletionsStreamMeta,
  CostCreateReq,
  CostCreateRes,
  CostPurgeReq,
  CostPurgeRes,
  CostQueryReq,
  CostQueryRes,
  ExportTraceServiceRequest,
  FeedbackCreateReq,
  FeedbackCreateRes,
  FeedbackPurgeReq,
  FeedbackPurgeRes,
  FeedbackQueryReq,
  FeedbackQueryRes,
  FeedbackReplaceReq,
  FeedbackReplaceRes,
  OtelExportRes,
  ServerInfoRes,
  Thread,
  ThreadsQueryReq,
  TraceHealth
} from "../api/TraceMisc.js"
import type {
  DatasetDeleteRes,
  FileContentReadReq,
  FileCreateRes,
  ObjCreateReq,
  ObjCreateRes,
  ObjDeleteReq,
  ObjDeleteRes,
  ObjQueryReq,
  ObjQueryRes,
  ObjReadReq,
  ObjReadRes,
  RefsReadBatchReq,
  RefsReadBatchRes,
  TableCreateReq,
  TableCreateRes,
  TableQueryReq,
  TableQueryRes,
  TableQueryStatsReq,
  TableQueryStatsRes,
  TableRow,
  TableUpdateReq,
  TableUpdateRes
} from "../api/TraceObject.js"
import type { ApiError } from "./ApiError.js"
import { resolveOptions } from "./internal/config.js"
import type { ClientOptions } from "./internal/http.js"

/** The hosted trace service. */
export const DEFAULT_URL = "https://trace.wandb.ai"

/** The env name of the trace service's base URL. */
export const URL_ENV = "EFFECT_RL_TRACE_URL"

/** Options of the trace client. */
export interface Options extends ClientOptions {}

/** Options of a call that is not idempotent. */
export interface WriteOptions {
  /**
   * A key naming this operation: sent as `Idempotency-Key`, it lets the client retry the call. Without it the
   * call is sent once.
   */
  readonly idempotencyKey?: string | undefined
}

/**
 * Options of the OTel export. The service takes the project of the spans from their resource's
 * `wandb.entity` and `wandb.project` attributes, or else from a `project_id` header, which `projectId` sends.
 */
export interface OtelExportOptions extends WriteOptions {
  /** The `"entity/project"` of spans whose resource does not name one. */
  readonly projectId?: string | undefined
}

/** A file to upload with `file/create`. */
export interface FileUpload {
  /** The project (`entity/project`). */
  readonly project_id: string
  /** The file's name, sent as the upload's file name. */
  readonly name: string
  /** The content. */
  readonly content: Uint8Array
  /** The upload's content type (default `application/octet-stream`). */
  readonly contentType?: string | undefined
  /** The digest the client computed; the service refuses the upload when its own differs. */
  readonly expected_digest?: string | undefined
}

/** Options of the dataset delete. */
export interface DatasetDeleteOptions {
  /** Delete only these versions (sent as `digests=a&digests=b`); without them, all versions. */
  readonly digests?: ReadonlyArray<string> | undefined
}

/** One line of `completions/create_stream`: the leading metadata, or a chat-completions chunk. */
export type CompletionsStreamEvent =
  | { readonly _tag: "Meta"; readonly meta: CompletionsStreamMeta["_meta"] }
  | { readonly _tag: "Chunk"; readonly chunk: ChatCompletionChunk }

/** The trace client's methods. */
export interface Service {
  /** `POST /call/start`: start a call (retried when the start has an `id`). */
  readonly callStart: (request: CallStartReq) => Effect.Effect<CallStartRes, ApiError>
  /** `POST /call/end`: end a call. */
  readonly callEnd: (request: CallEndReq) => Effect.Effect<CallEndRes, ApiError>
  /** `POST /call/upsert_batch`: starts and ends in order (retried when every start has an `id`). */
  readonly callUpsertBatch: (request: CallCreateBatchReq) => Effect.Effect<CallCreateBatchRes, ApiError>
  /** `POST /call/read`: one call, or `null`. */
  readonly callRead: (request: CallReadReq) => Effect.Effect<CallReadRes, ApiError>
  /** `POST /call/update`: set a call's display name. */
  readonly callUpdate: (request: CallUpdateReq) => Effect.Effect<CallUpdateRes, ApiError>
  /** `POST /calls/delete`: soft-delete calls with their descendants. */
  readonly callsDelete: (request: CallsDeleteReq) => Effect.Effect<CallsDeleteRes, ApiError>
  /** `POST /calls/query_stats`: how many calls match. */
  readonly callsQueryStats: (request: CallsQueryStatsReq) => Effect.Effect<CallsQueryStatsRes, ApiError>
  /** `POST /calls/stream_query`: the matching calls, decoded line by line. */
  readonly callsStreamQuery: (request: CallsQueryReq) => Stream.Stream<Call, ApiError>
  /** `POST /cost/create` (sent once without an idempotency key). */
  readonly costCreate: (request: CostCreateReq, options?: WriteOptions) => Effect.Effect<CostCreateRes, ApiError>
  /** `POST /cost/purge` */
  readonly costPurge: (request: CostPurgeReq) => Effect.Effect<CostPurgeRes, ApiError>
  /** `POST /cost/query` */
  readonly costQuery: (request: CostQueryReq) => Effect.Effect<CostQueryRes, ApiError>
  /** `POST /feedback/create` (sent once without an idempotency key). */
  readonly feedbackCreate: (
    request: FeedbackCreateReq,
    options?: WriteOptions
  ) => Effect.Effect<FeedbackCreateRes, ApiError>
  /** `POST /feedback/purge` */
  readonly feedbackPurge: (request: FeedbackPurgeReq) => Effect.Effect<FeedbackPurgeRes, ApiError>
  /** `POST /feedback/query` */
  readonly feedbackQuery: (request: FeedbackQueryReq) => Effect.Effect<FeedbackQueryRes, ApiError>
  /** `POST /feedback/replace` (sent once without an idempotency key). */
  readonly feedbackReplace: (
    request: FeedbackReplaceReq,
    options?: WriteOptions
  ) => Effect.Effect<FeedbackReplaceRes, ApiError>
  /** `POST /file/content`: a file's bytes. */
  readonly fileContent: (request: FileContentReadReq) => Effect.Effect<Uint8Array, ApiError>
  /** `POST /file/create` (multipart): store a file, answering its byte digest. */
  readonly fileCreate: (file: FileUpload) => Effect.Effect<FileCreateRes, ApiError>
  /** `POST /obj/create`: store an object version, answering its digest. */
  readonly objCreate: (request: ObjCreateReq) => Effect.Effect<ObjCreateRes, ApiError>
  /** `POST /obj/delete` */
  readonly objDelete: (request: ObjDeleteReq) => Effect.Effect<ObjDeleteRes, ApiError>
  /** `POST /obj/read` */
  readonly objRead: (request: ObjReadReq) => Effect.Effect<ObjReadRes, ApiError>
  /** `POST /objs/query` */
  readonly objsQuery: (request: ObjQueryReq) => Effect.Effect<ObjQueryRes, ApiError>
  /**
   * `POST /otel/v1/trace`: OTLP spans, as protobuf bytes (`application/x-protobuf`) or as OTLP JSON (sent once
   * without an idempotency key).
   */
  readonly otelExportTrace: (
    payload: Uint8Array | ExportTraceServiceRequest,
    options?: OtelExportOptions
  ) => Effect.Effect<OtelExportRes, ApiError>
  /** `POST /refs/read_batch`: the values of refs. */
  readonly refsReadBatch: (request: RefsReadBatchReq) => Effect.Effect<RefsReadBatchRes, ApiError>
  /** `GET /health` */
  readonly health: Effect.Effect<TraceHealth, ApiError>
  /** `GET /server_info` */
  readonly serverInfo: Effect.Effect<ServerInfoRes, ApiError>
  /** `POST /table/create`: store rows, answering the table and row digests. */
  readonly tableCreate: (request: TableCreateReq) => Effect.Effect<TableCreateRes, ApiError>
  /** `POST /table/query` */
  readonly tableQuery: (request: TableQueryReq) => Effect.Effect<TableQueryRes, ApiError>
  /** `POST /table/query_stats` */
  readonly tableQueryStats: (request: TableQueryStatsReq) => Effect.Effect<TableQueryStatsRes, ApiError>
  /** `POST /table/update` (sent once without an idempotency key). */
  readonly tableUpdate: (request: TableUpdateReq, options?: WriteOptions) => Effect.Effect<TableUpdateRes, ApiError>
  /** `POST /table/query_stream`: the rows, decoded line by line. */
  readonly tableQueryStream: (request: TableQueryReq) => Stream.Stream<TableRow, ApiError>
  /** `POST /threads/stream_query`: the threads, decoded line by line. */
  readonly threadsStreamQuery: (request: ThreadsQueryReq) => Stream.Stream<Thread, ApiError>
  /** `POST /completions/create` (traces a call, so sent once without an idempotency key). */
  readonly completionsCreate: (
    request: CompletionsCreateReq,
    options?: WriteOptions
  ) => Effect.Effect<CompletionsCreateRes, ApiError>
  /**
   * `POST /completions/create_stream`: the metadata line, then the chunks. A line carrying `error` (and no
   * `choices`) fails the stream with a `ServerError`.
   */
  readonly completionsCreateStream: (
    request: CompletionsCreateReq,
    options?: WriteOptions
  ) => Stream.Stream<CompletionsStreamEvent, ApiError>
  /**
   * `DELETE /v2/{entity}/{project}/datasets/{object_id}`: delete the given versions of a dataset, or all of
   * them; sent with HTTP Basic credentials.
   */
  readonly datasetDelete: (
    entity: string,
    project: string,
    objectId: string,
    options?: DatasetDeleteOptions
  ) => Effect.Effect<DatasetDeleteRes, ApiError>
}

/** The trace client service. */
export class TraceClient extends Context.Tag("effect-rl/TraceClient")<TraceClient, Service>() {}

/**
 * Builds the client over the platform `HttpClient`, with options given in full (no env read). Its
 * implementation (and the trace service's schemas) loads here, not when the package is imported.
 */
export const make = (
  options: Options & { readonly baseUrl: string | URL }
): Effect.Effect<Service, never, HttpClient.HttpClient> =>
  Effect.flatMap(
    Effect.promise(() => import("./internal/traceClient.js")),
    (implementation) => implementation.make(options)
  )

/** The client as a layer, with options given in full; `baseUrl` defaults to the hosted service. */
export const layer = (options: Options = {}): Layer.Layer<TraceClient, never, HttpClient.HttpClient> =>
  Layer.effect(TraceClient, make({ ...options, baseUrl: options.baseUrl ?? DEFAULT_URL }))

/**
 * The client as a layer reading the environment: `WANDB_API_KEY` (as a `Redacted`) and `EFFECT_RL_TRACE_URL`,
 * each used only where `options` leaves it out.
 */
export const layerConfig = (
  options: Options = {}
): Layer.Layer<TraceClient, ConfigError.ConfigError, HttpClient.HttpClient> =>
  Layer.effect(TraceClient, Effect.flatMap(resolveOptions(options, URL_ENV, DEFAULT_URL), make))
