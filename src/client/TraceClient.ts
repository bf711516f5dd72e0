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
import * as HttpBody from "@effect/platform/HttpBody"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import type * as ConfigError from "effect/ConfigError"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Encoding from "effect/Encoding"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type { ChatCompletionChunk } from "../api/ChatCompletion.js"
import * as Api from "../api/TraceApi.js"
import type {
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
import { Call } from "../api/TraceCall.js"
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
  FeedbackCreateReq,
  FeedbackCreateRes,
  FeedbackPurgeReq,
  FeedbackPurgeRes,
  FeedbackQueryReq,
  FeedbackQueryRes,
  FeedbackReplaceReq,
  FeedbackReplaceRes,
  ServerInfoRes,
  ThreadsQueryReq,
  TraceHealth
} from "../api/TraceMisc.js"
import { ExportTraceServiceRequest, OtelExportRes, Thread } from "../api/TraceMisc.js"
import type {
  FileContentReadReq,
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
  TableUpdateReq,
  TableUpdateRes
} from "../api/TraceObject.js"
import { DatasetDeleteRes, FileCreateRes, TableRow } from "../api/TraceObject.js"
import { ApiError } from "./ApiError.js"
import { resolveOptions } from "./internal/config.js"
import { endpointCall } from "./internal/endpoint.js"
import {
  bodyBroke,
  type ClientOptions,
  decodeJson,
  invalidRequest,
  makeTransport,
  readText,
  requestIdOf,
  send,
  type Call as WireCall
} from "./internal/http.js"
import * as JsonLines from "./internal/jsonLines.js"

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

const calls = {
  callStart: endpointCall(Api.callStart),
  callEnd: endpointCall(Api.callEnd),
  callUpsertBatch: endpointCall(Api.callUpsertBatch),
  callRead: endpointCall(Api.callRead),
  callUpdate: endpointCall(Api.callUpdate),
  callsDelete: endpointCall(Api.callsDelete),
  callsQueryStats: endpointCall(Api.callsQueryStats),
  callsStreamQuery: endpointCall(Api.callsStreamQuery),
  costCreate: endpointCall(Api.costCreate),
  costPurge: endpointCall(Api.costPurge),
  costQuery: endpointCall(Api.costQuery),
  feedbackCreate: endpointCall(Api.feedbackCreate),
  feedbackPurge: endpointCall(Api.feedbackPurge),
  feedbackQuery: endpointCall(Api.feedbackQuery),
  feedbackReplace: endpointCall(Api.feedbackReplace),
  fileContent: endpointCall(Api.fileContent),
  objCreate: endpointCall(Api.objCreate),
  objDelete: endpointCall(Api.objDelete),
  objRead: endpointCall(Api.objRead),
  objsQuery: endpointCall(Api.objsQuery),
  refsReadBatch: endpointCall(Api.refsReadBatch),
  health: endpointCall(Api.traceHealth),
  serverInfo: endpointCall(Api.serverInfo),
  tableCreate: endpointCall(Api.tableCreate),
  tableQuery: endpointCall(Api.tableQuery),
  tableQueryStats: endpointCall(Api.tableQueryStats),
  tableUpdate: endpointCall(Api.tableUpdate),
  tableQueryStream: endpointCall(Api.tableQueryStream),
  threadsStreamQuery: endpointCall(Api.threadsStreamQuery),
  completionsCreate: endpointCall(Api.completionsCreate),
  completionsCreateStream: endpointCall(Api.completionsCreateStream),
  datasetDelete: endpointCall(Api.datasetDelete)
}

/** The headers and retry mode of a call that is not idempotent. */
const write = (options: WriteOptions | undefined) =>
  options?.idempotencyKey === undefined
    ? { retry: false }
    : { retry: true, headers: { "Idempotency-Key": options.idempotencyKey } }

const span = (name: string, projectId?: string) =>
  Effect.withSpan(`TraceClient.${name}`, { attributes: projectId === undefined ? {} : { project_id: projectId } })

/** `Authorization: Basic base64("api:" + key)`, the credentials of the dataset delete. */
const basicAuth = (apiKey: Redacted.Redacted): string =>
  `Basic ${Encoding.encodeBase64(`api:${Redacted.value(apiKey)}`)}`

/** Build the client over the platform `HttpClient`, with options given in full (no env read). */
export const make = (options: Options & { readonly baseUrl: string | URL }) =>
  Effect.gen(function* () {
    const apiKey = options.apiKey
    // Bearer unless the call set its own credentials (the dataset delete sets Basic).
    const authenticated = HttpClient.mapRequest(yield* HttpClient.HttpClient, (request) =>
      apiKey === undefined || request.headers.authorization !== undefined
        ? request
        : HttpClientRequest.bearerToken(request, apiKey)
    )
    const transport = makeTransport(authenticated, { ...options, apiKey: undefined })

    /** Send a prepared call and decode its JSON body with `schema`. */
    const sendJson = <A, I>(call: WireCall, schema: Schema.Schema<A, I>) =>
      send(transport, call, (response) =>
        Effect.map(readText(call, response), (text) => ({ text, status: response.status, headers: response.headers }))
      ).pipe(
        Effect.flatMap(({ text, status, headers }) => decodeJson(call, schema, text, status, requestIdOf(headers)))
      )

    /** Send a prepared JSON-lines call and decode its lines with `decode`. */
    const sendLines = <A>(
      prepared: Effect.Effect<WireCall, ApiError>,
      decode: (call: WireCall, response: HttpClientResponse.HttpClientResponse) => Stream.Stream<A, ApiError>
    ): Stream.Stream<A, ApiError> =>
      Stream.unwrap(
        Effect.gen(function* () {
          const call = yield* prepared
          const jsonl = { ...call, headers: { ...call.headers, accept: Api.jsonLinesContentType } }
          const response = yield* send(transport, jsonl, (r) => Effect.succeed(r))
          return decode(call, response)
        })
      )

    const service: Service = {
      callStart: (request) =>
        calls.callStart
          .run(transport, { payload: request, retry: request.start.id != null })
          .pipe(span("callStart", request.start.project_id)),
      callEnd: (request) =>
        calls.callEnd.run(transport, { payload: request, retry: true }).pipe(span("callEnd", request.end.project_id)),
      callUpsertBatch: (request) =>
        calls.callUpsertBatch
          .run(transport, {
            payload: request,
            retry: request.batch.every((item) => item.mode === "end" || item.req.start.id != null)
          })
          .pipe(Effect.withSpan("TraceClient.callUpsertBatch", { attributes: { items: request.batch.length } })),
      callRead: (request) =>
        calls.callRead.run(transport, { payload: request, retry: true }).pipe(span("callRead", request.project_id)),
      callUpdate: (request) =>
        calls.callUpdate.run(transport, { payload: request, retry: true }).pipe(span("callUpdate", request.project_id)),
      callsDelete: (request) =>
        calls.callsDelete
          .run(transport, { payload: request, retry: true })
          .pipe(span("callsDelete", request.project_id)),
      callsQueryStats: (request) =>
        calls.callsQueryStats
          .run(transport, { payload: request, retry: true })
          .pipe(span("callsQueryStats", request.project_id)),
      callsStreamQuery: (request) =>
        sendLines(calls.callsStreamQuery.prepare({ payload: request, retry: true }), (call, response) =>
          JsonLines.decodeResponse(call, response, Call)
        ),
      costCreate: (request, options) =>
        calls.costCreate
          .run(transport, { payload: request, ...write(options) })
          .pipe(span("costCreate", request.project_id)),
      costPurge: (request) =>
        calls.costPurge.run(transport, { payload: request, retry: true }).pipe(span("costPurge", request.project_id)),
      costQuery: (request) =>
        calls.costQuery.run(transport, { payload: request, retry: true }).pipe(span("costQuery", request.project_id)),
      feedbackCreate: (request, options) =>
        calls.feedbackCreate
          .run(transport, { payload: request, ...write(options) })
          .pipe(span("feedbackCreate", request.project_id)),
      feedbackPurge: (request) =>
        calls.feedbackPurge
          .run(transport, { payload: request, retry: true })
          .pipe(span("feedbackPurge", request.project_id)),
      feedbackQuery: (request) =>
        calls.feedbackQuery
          .run(transport, { payload: request, retry: true })
          .pipe(span("feedbackQuery", request.project_id)),
      feedbackReplace: (request, options) =>
        calls.feedbackReplace
          .run(transport, { payload: request, ...write(options) })
          .pipe(span("feedbackReplace", request.project_id)),
      fileContent: (request) =>
        Effect.flatMap(calls.fileContent.prepare({ payload: request, retry: true }), (call) =>
          send(transport, { ...call, headers: { accept: "application/octet-stream" } }, (response) =>
            Effect.map(
              Effect.mapError(response.arrayBuffer, bodyBroke(call, response, "body")),
              (buffer) => new Uint8Array(buffer)
            )
          )
        ).pipe(span("fileContent", request.project_id)),
      fileCreate: (file) =>
        Effect.gen(function* () {
          const at = { method: "POST" as const, path: Api.fileCreate.path }
          const form = new FormData()
          form.append("project_id", file.project_id)
          if (file.expected_digest !== undefined) form.append("expected_digest", file.expected_digest)
          form.append(
            "file",
            new Blob([file.content], { type: file.contentType ?? "application/octet-stream" }),
            file.name
          )
          // Serialized here, once: every HttpClient (undici's included) then sends plain bytes, and a retry
          // sends the same bytes under the same boundary.
          const rawBody = yield* multipartBody(at, form)
          return yield* sendJson({ ...at, rawBody, retry: true }, FileCreateRes)
        }).pipe(span("fileCreate", file.project_id)),
      objCreate: (request) =>
        calls.objCreate
          .run(transport, { payload: request, retry: true })
          .pipe(span("objCreate", request.obj.project_id)),
      objDelete: (request) =>
        calls.objDelete.run(transport, { payload: request, retry: true }).pipe(span("objDelete", request.project_id)),
      objRead: (request) =>
        calls.objRead.run(transport, { payload: request, retry: true }).pipe(span("objRead", request.project_id)),
      objsQuery: (request) =>
        calls.objsQuery.run(transport, { payload: request, retry: true }).pipe(span("objsQuery", request.project_id)),
      otelExportTrace: (payload, options) =>
        Effect.gen(function* () {
          const written: { readonly retry: boolean; readonly headers?: Record<string, string> } = write(options)
          const headers = {
            ...written.headers,
            ...(options?.projectId === undefined ? {} : { project_id: options.projectId })
          }
          const retry = written.retry
          const at = { method: "POST" as const, path: Api.otelExportTrace.path }
          if (payload instanceof Uint8Array) {
            const rawBody = HttpBody.uint8Array(payload, "application/x-protobuf")
            return yield* sendJson({ ...at, rawBody, headers, retry }, OtelExportRes)
          }
          const encoded = yield* Schema.encode(ExportTraceServiceRequest)(payload).pipe(
            Effect.mapError((error) => invalidRequest(at, "body", error))
          )
          return yield* sendJson({ ...at, body: JSON.stringify(encoded), headers, retry }, OtelExportRes)
        }).pipe(span("otelExportTrace")),
      refsReadBatch: (request) =>
        calls.refsReadBatch.run(transport, { payload: request, retry: true }).pipe(span("refsReadBatch")),
      health: calls.health.run(transport, { retry: true }).pipe(span("health")),
      serverInfo: calls.serverInfo.run(transport, { retry: true }).pipe(span("serverInfo")),
      tableCreate: (request) =>
        calls.tableCreate
          .run(transport, { payload: request, retry: true })
          .pipe(span("tableCreate", request.table.project_id)),
      tableQuery: (request) =>
        calls.tableQuery.run(transport, { payload: request, retry: true }).pipe(span("tableQuery", request.project_id)),
      tableQueryStats: (request) =>
        calls.tableQueryStats
          .run(transport, { payload: request, retry: true })
          .pipe(span("tableQueryStats", request.project_id)),
      tableUpdate: (request, options) =>
        calls.tableUpdate
          .run(transport, { payload: request, ...write(options) })
          .pipe(span("tableUpdate", request.project_id)),
      tableQueryStream: (request) =>
        sendLines(calls.tableQueryStream.prepare({ payload: request, retry: true }), (call, response) =>
          JsonLines.decodeResponse(call, response, TableRow)
        ),
      threadsStreamQuery: (request) =>
        sendLines(calls.threadsStreamQuery.prepare({ payload: request, retry: true }), (call, response) =>
          JsonLines.decodeResponse(call, response, Thread)
        ),
      completionsCreate: (request, options) =>
        calls.completionsCreate
          .run(transport, { payload: request, ...write(options) })
          .pipe(span("completionsCreate", request.project_id)),
      completionsCreateStream: (request, options) =>
        sendLines(
          calls.completionsCreateStream.prepare({ payload: request, ...write(options) }),
          JsonLines.completionsEvents
        ),
      datasetDelete: (entity, project, objectId, options) =>
        Effect.flatMap(
          calls.datasetDelete.prepare({
            path: { entity, project, object_id: objectId },
            retry: true,
            ...(apiKey === undefined ? {} : { headers: { authorization: basicAuth(apiKey) } })
          }),
          (call) =>
            sendJson(
              {
                ...call,
                ...(options?.digests === undefined ? {} : { urlParams: { digests: options.digests } })
              },
              DatasetDeleteRes
            )
        ).pipe(
          Effect.withSpan("TraceClient.datasetDelete", {
            attributes: { entity, project, object_id: objectId, digests: options?.digests?.length ?? 0 }
          })
        )
    }
    return service
  })

/** A form as `multipart/form-data` bytes with its boundary, encoded by the platform's `Response`. */
const multipartBody = (
  at: Pick<WireCall, "method" | "path">,
  form: FormData
): Effect.Effect<HttpBody.HttpBody, ApiError> =>
  Effect.tryPromise({
    try: async () => {
      const encoded = new Response(form)
      const bytes = new Uint8Array(await encoded.arrayBuffer())
      return HttpBody.uint8Array(bytes, encoded.headers.get("content-type") ?? "multipart/form-data")
    },
    catch: (error) =>
      new ApiError({
        reason: "InvalidRequest",
        method: at.method,
        path: at.path,
        description: `the multipart body could not be encoded: ${error instanceof Error ? error.message : String(error)}`,
        retryable: false
      })
  })

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
