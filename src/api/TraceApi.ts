/**
 * The trace service (surface A) defined once, as a platform `HttpApi`: every endpoint of its published API with its path
 * exactly as the seed spells it, the aliases the service also serves (`/otel/v1/traces`, `/files/create`,
 * `/files/content`), and the dataset delete `DELETE /v2/{entity}/{project}/datasets/{object_id}`. The trace
 * client derives its calls from these definitions and the embedded backend its routes.
 *
 * Every endpoint declares the service's error bodies (`TraceError`: 400, 403, 404, 413) and the 422
 * `HTTPValidationError`, at the level of the whole api.
 *
 * Bodies that are not one JSON document are declared raw:
 * - the JSON-lines answers (`calls/stream_query`, `table/query_stream`, `threads/stream_query`,
 *   `completions/create_stream`, content type `application/jsonl`) are {@link JsonLines}: the body as text, one
 *   JSON value per line. A server answers them with `handleRaw` and a streamed response; a client streams the
 *   body and decodes each line with the line schema named in the endpoint's doc (`TraceCall.Call`,
 *   `TraceObject.TableRow`, `TraceMisc.Thread`, and for completions `TraceMisc.CompletionsStreamMeta` then
 *   chat-completions chunks).
 * - `file/content` answers the raw bytes ({@link FileBytes}).
 * - `file/create` takes `multipart/form-data` ({@link FileCreateForm}): a derived client passes a `FormData`
 *   with `project_id` and the upload `file`; the server receives the file persisted to disk.
 * - the OTel export takes OTLP as JSON or as protobuf bytes ({@link OtelExportPayload}).
 *
 * Security: the seed gives Bearer for the service and HTTP Basic for the dataset delete; authentication is a
 * middleware of the server and a request transform of the client, not part of these definitions.
 *
 * @since 0.1.0
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as Multipart from "@effect/platform/Multipart"
import * as Schema from "effect/Schema"
import { HTTPValidationError } from "./HttpValidationError.js"
import {
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
  CallUpdateRes,
  ProjectId
} from "./TraceCall.js"
import { InvalidField, InvalidRequest, NotFound, TooLarge } from "./TraceError.js"
import {
  CompletionsCreateReq,
  CompletionsCreateRes,
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
  ThreadsQueryReq,
  TraceHealth
} from "./TraceMisc.js"
import {
  DatasetDeleteParams,
  DatasetDeletePath,
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
  TableUpdateReq,
  TableUpdateRes
} from "./TraceObject.js"

/** The content type of the JSON-lines answers. */
export const jsonLinesContentType = "application/jsonl"

/** A JSON-lines body, as text: one JSON value per line (see the module header). */
export const JsonLines = HttpApiSchema.Text({ contentType: jsonLinesContentType })

/** The raw bytes of a file's content. */
export const FileBytes = HttpApiSchema.Uint8Array({ contentType: "application/octet-stream" })

/** The multipart body of `file/create`: the text field `project_id` (and `expected_digest`), the upload `file`. */
export const FileCreateForm = HttpApiSchema.Multipart(
  Schema.Struct({
    project_id: ProjectId,
    expected_digest: Schema.optional(Schema.String),
    file: Multipart.SingleFileSchema
  })
)

/** The OTLP protobuf body of the OTel export (`application/x-protobuf`), as bytes. */
export const OtlpProtobuf = HttpApiSchema.Uint8Array({ contentType: "application/x-protobuf" })

/**
 * The body of the OTel export: OTLP protobuf bytes, or its JSON encoding. The bytes come first, so a client
 * that passes a `Uint8Array` sends protobuf and one that passes an object sends JSON.
 */
export const OtelExportPayload = Schema.Union(OtlpProtobuf, ExportTraceServiceRequest)

// ---------------------------------------------------------------------------------------------------------------
// Calls
// ---------------------------------------------------------------------------------------------------------------

/** `POST /call/start` (Call Start) */
export const callStart = HttpApiEndpoint.post("callStart", "/call/start")
  .setPayload(CallStartReq)
  .addSuccess(CallStartRes)

/** `POST /call/end` (Call End) */
export const callEnd = HttpApiEndpoint.post("callEnd", "/call/end").setPayload(CallEndReq).addSuccess(CallEndRes)

/** `POST /call/upsert_batch` (Call Start Batch): starts and ends, in order. */
export const callUpsertBatch = HttpApiEndpoint.post("callUpsertBatch", "/call/upsert_batch")
  .setPayload(CallCreateBatchReq)
  .addSuccess(CallCreateBatchRes)

/** `POST /call/read` (Call Read) */
export const callRead = HttpApiEndpoint.post("callRead", "/call/read").setPayload(CallReadReq).addSuccess(CallReadRes)

/** `POST /call/update` (Call Update) */
export const callUpdate = HttpApiEndpoint.post("callUpdate", "/call/update")
  .setPayload(CallUpdateReq)
  .addSuccess(CallUpdateRes)

/** `POST /calls/delete` (Calls Delete): soft, with every descendant. */
export const callsDelete = HttpApiEndpoint.post("callsDelete", "/calls/delete")
  .setPayload(CallsDeleteReq)
  .addSuccess(CallsDeleteRes)

/** `POST /calls/query_stats` (Calls Query Stats) */
export const callsQueryStats = HttpApiEndpoint.post("callsQueryStats", "/calls/query_stats")
  .setPayload(CallsQueryStatsReq)
  .addSuccess(CallsQueryStatsRes)

/** `POST /calls/stream_query` (Calls Query Stream): JSON lines of `TraceCall.Call`. */
export const callsStreamQuery = HttpApiEndpoint.post("callsStreamQuery", "/calls/stream_query")
  .setPayload(CallsQueryReq)
  .addSuccess(JsonLines)

// ---------------------------------------------------------------------------------------------------------------
// Costs
// ---------------------------------------------------------------------------------------------------------------

/** `POST /cost/create` (Cost Create) */
export const costCreate = HttpApiEndpoint.post("costCreate", "/cost/create")
  .setPayload(CostCreateReq)
  .addSuccess(CostCreateRes)

/** `POST /cost/purge` (Cost Purge) */
export const costPurge = HttpApiEndpoint.post("costPurge", "/cost/purge")
  .setPayload(CostPurgeReq)
  .addSuccess(CostPurgeRes)

/** `POST /cost/query` (Cost Query) */
export const costQuery = HttpApiEndpoint.post("costQuery", "/cost/query")
  .setPayload(CostQueryReq)
  .addSuccess(CostQueryRes)

// ---------------------------------------------------------------------------------------------------------------
// Feedback
// ---------------------------------------------------------------------------------------------------------------

/** `POST /feedback/create` (Feedback Create) */
export const feedbackCreate = HttpApiEndpoint.post("feedbackCreate", "/feedback/create")
  .setPayload(FeedbackCreateReq)
  .addSuccess(FeedbackCreateRes)

/** `POST /feedback/purge` (Feedback Purge): id-based queries only. */
export const feedbackPurge = HttpApiEndpoint.post("feedbackPurge", "/feedback/purge")
  .setPayload(FeedbackPurgeReq)
  .addSuccess(FeedbackPurgeRes)

/** `POST /feedback/query` (Feedback Query) */
export const feedbackQuery = HttpApiEndpoint.post("feedbackQuery", "/feedback/query")
  .setPayload(FeedbackQueryReq)
  .addSuccess(FeedbackQueryRes)

/** `POST /feedback/replace` (Feedback Replace): purge, then create. */
export const feedbackReplace = HttpApiEndpoint.post("feedbackReplace", "/feedback/replace")
  .setPayload(FeedbackReplaceReq)
  .addSuccess(FeedbackReplaceRes)

// ---------------------------------------------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------------------------------------------

/** `POST /file/content` (File Content): the raw bytes. */
export const fileContent = HttpApiEndpoint.post("fileContent", "/file/content")
  .setPayload(FileContentReadReq)
  .addSuccess(FileBytes)

/** `POST /file/create` (File Create): multipart; answers the byte digest. */
export const fileCreate = HttpApiEndpoint.post("fileCreate", "/file/create")
  .setPayload(FileCreateForm)
  .addSuccess(FileCreateRes)

/** `POST /files/content`: the plural alias of {@link fileContent}. */
export const filesContent = HttpApiEndpoint.post("filesContent", "/files/content")
  .setPayload(FileContentReadReq)
  .addSuccess(FileBytes)

/** `POST /files/create`: the plural alias of {@link fileCreate}. */
export const filesCreate = HttpApiEndpoint.post("filesCreate", "/files/create")
  .setPayload(FileCreateForm)
  .addSuccess(FileCreateRes)

// ---------------------------------------------------------------------------------------------------------------
// Objects
// ---------------------------------------------------------------------------------------------------------------

/** `POST /obj/create` (Obj Create) */
export const objCreate = HttpApiEndpoint.post("objCreate", "/obj/create")
  .setPayload(ObjCreateReq)
  .addSuccess(ObjCreateRes)

/** `POST /obj/delete` (Obj Delete) */
export const objDelete = HttpApiEndpoint.post("objDelete", "/obj/delete")
  .setPayload(ObjDeleteReq)
  .addSuccess(ObjDeleteRes)

/** `POST /obj/read` (Obj Read) */
export const objRead = HttpApiEndpoint.post("objRead", "/obj/read").setPayload(ObjReadReq).addSuccess(ObjReadRes)

/** `POST /objs/query` (Objs Query) */
export const objsQuery = HttpApiEndpoint.post("objsQuery", "/objs/query")
  .setPayload(ObjQueryReq)
  .addSuccess(ObjQueryRes)

// ---------------------------------------------------------------------------------------------------------------
// OpenTelemetry
// ---------------------------------------------------------------------------------------------------------------

/** `POST /otel/v1/trace` (Export Trace): OTLP protobuf or JSON; spans become calls. */
export const otelExportTrace = HttpApiEndpoint.post("otelExportTrace", "/otel/v1/trace")
  .setPayload(OtelExportPayload)
  .addSuccess(OtelExportRes)

/** `POST /otel/v1/traces`: the same operation under the standard OTLP/HTTP path. */
export const otelExportTraces = HttpApiEndpoint.post("otelExportTraces", "/otel/v1/traces")
  .setPayload(OtelExportPayload)
  .addSuccess(OtelExportRes)

// ---------------------------------------------------------------------------------------------------------------
// Refs, service, tables, threads, completions, datasets
// ---------------------------------------------------------------------------------------------------------------

/** `POST /refs/read_batch` (Refs Read Batch) */
export const refsReadBatch = HttpApiEndpoint.post("refsReadBatch", "/refs/read_batch")
  .setPayload(RefsReadBatchReq)
  .addSuccess(RefsReadBatchRes)

/** `GET /health` (Read Root) */
export const traceHealth = HttpApiEndpoint.get("traceHealth", "/health").addSuccess(TraceHealth)

/** `GET /server_info` (Server Info) */
export const serverInfo = HttpApiEndpoint.get("serverInfo", "/server_info").addSuccess(ServerInfoRes)

/** `POST /table/create` (Table Create) */
export const tableCreate = HttpApiEndpoint.post("tableCreate", "/table/create")
  .setPayload(TableCreateReq)
  .addSuccess(TableCreateRes)

/** `POST /table/query` (Table Query) */
export const tableQuery = HttpApiEndpoint.post("tableQuery", "/table/query")
  .setPayload(TableQueryReq)
  .addSuccess(TableQueryRes)

/** `POST /table/query_stats` (Table Query Stats) */
export const tableQueryStats = HttpApiEndpoint.post("tableQueryStats", "/table/query_stats")
  .setPayload(TableQueryStatsReq)
  .addSuccess(TableQueryStatsRes)

/** `POST /table/update` (Table Update) */
export const tableUpdate = HttpApiEndpoint.post("tableUpdate", "/table/update")
  .setPayload(TableUpdateReq)
  .addSuccess(TableUpdateRes)

/** `POST /table/query_stream` (Table Query Stream): JSON lines of `TraceObject.TableRow`. */
export const tableQueryStream = HttpApiEndpoint.post("tableQueryStream", "/table/query_stream")
  .setPayload(TableQueryReq)
  .addSuccess(JsonLines)

/** `POST /threads/stream_query` (Threads Query Stream): JSON lines of `TraceMisc.Thread`. */
export const threadsStreamQuery = HttpApiEndpoint.post("threadsStreamQuery", "/threads/stream_query")
  .setPayload(ThreadsQueryReq)
  .addSuccess(JsonLines)

/** `POST /completions/create` (Completions Create) */
export const completionsCreate = HttpApiEndpoint.post("completionsCreate", "/completions/create")
  .setPayload(CompletionsCreateReq)
  .addSuccess(CompletionsCreateRes)

/**
 * `POST /completions/create_stream` (Completions Create Stream): JSON lines, the first
 * `TraceMisc.CompletionsStreamMeta`, then chat-completions chunks.
 */
export const completionsCreateStream = HttpApiEndpoint.post("completionsCreateStream", "/completions/create_stream")
  .setPayload(CompletionsCreateReq)
  .addSuccess(JsonLines)

/**
 * `DELETE /v2/{entity}/{project}/datasets/{object_id}?digests=a&digests=b` (Dataset Delete): with digests only
 * those versions, without them all versions.
 */
export const datasetDelete = HttpApiEndpoint.del("datasetDelete", "/v2/:entity/:project/datasets/:object_id")
  .setPath(DatasetDeletePath)
  .setUrlParams(DatasetDeleteParams)
  .addSuccess(DatasetDeleteRes)

// ---------------------------------------------------------------------------------------------------------------
// Groups
// ---------------------------------------------------------------------------------------------------------------

/** The calls group. */
export class CallsGroup extends HttpApiGroup.make("traceCalls", { topLevel: true })
  .add(callStart)
  .add(callEnd)
  .add(callUpsertBatch)
  .add(callRead)
  .add(callUpdate)
  .add(callsDelete)
  .add(callsQueryStats)
  .add(callsStreamQuery) {}

/** The costs group. */
export class CostsGroup extends HttpApiGroup.make("traceCosts", { topLevel: true })
  .add(costCreate)
  .add(costPurge)
  .add(costQuery) {}

/** The feedback group. */
export class FeedbackGroup extends HttpApiGroup.make("traceFeedback", { topLevel: true })
  .add(feedbackCreate)
  .add(feedbackPurge)
  .add(feedbackQuery)
  .add(feedbackReplace) {}

/** The files group, with the plural aliases. */
export class FilesGroup extends HttpApiGroup.make("traceFiles", { topLevel: true })
  .add(fileContent)
  .add(fileCreate)
  .add(filesContent)
  .add(filesCreate) {}

/** The objects group. */
export class ObjectsGroup extends HttpApiGroup.make("traceObjects", { topLevel: true })
  .add(objCreate)
  .add(objDelete)
  .add(objRead)
  .add(objsQuery) {}

/** The OpenTelemetry export group. */
export class OtelGroup extends HttpApiGroup.make("traceOtel", { topLevel: true })
  .add(otelExportTrace)
  .add(otelExportTraces) {}

/** The refs group. */
export class RefsGroup extends HttpApiGroup.make("traceRefs", { topLevel: true }).add(refsReadBatch) {}

/** The service information group. */
export class ServiceGroup extends HttpApiGroup.make("traceService", { topLevel: true })
  .add(traceHealth)
  .add(serverInfo) {}

/** The tables group. */
export class TablesGroup extends HttpApiGroup.make("traceTables", { topLevel: true })
  .add(tableCreate)
  .add(tableQuery)
  .add(tableQueryStats)
  .add(tableUpdate)
  .add(tableQueryStream) {}

/** The threads group. */
export class ThreadsGroup extends HttpApiGroup.make("traceThreads", { topLevel: true }).add(threadsStreamQuery) {}

/** The completions group. */
export class CompletionsGroup extends HttpApiGroup.make("traceCompletions", { topLevel: true })
  .add(completionsCreate)
  .add(completionsCreateStream) {}

/** The datasets group (`/v2/`). */
export class DatasetsGroup extends HttpApiGroup.make("traceDatasets", { topLevel: true }).add(datasetDelete) {}

/**
 * The whole trace service. Group and endpoint names are prefixed or specific enough (`traceHealth`) to be
 * merged with the training api into the embedded backend's one api.
 */
export class TraceApi extends HttpApi.make("TraceApi")
  .add(CallsGroup)
  .add(CostsGroup)
  .add(FeedbackGroup)
  .add(FilesGroup)
  .add(ObjectsGroup)
  .add(OtelGroup)
  .add(RefsGroup)
  .add(ServiceGroup)
  .add(TablesGroup)
  .add(ThreadsGroup)
  .add(CompletionsGroup)
  .add(DatasetsGroup)
  .addError(HTTPValidationError, { status: 422 })
  .addError(InvalidRequest, { status: 400 })
  .addError(InvalidField, { status: 403 })
  .addError(NotFound, { status: 404 })
  .addError(TooLarge, { status: 413 }) {}
