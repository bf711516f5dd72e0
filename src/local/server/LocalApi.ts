/**
 * The one api the embedded backend serves: the training service's groups (`chat`, `models`, `jobs`,
 * `health`), the inference service's model list, and every group of the trace service (`traceCalls`,
 * `traceObjects`, ...), on one origin. Built from the definitions in `src/api/`, so the server's routes and the
 * clients' calls come from the same endpoints.
 *
 * ## Extension: uploaded files
 * Not in the hosted contract, the `files` group lets a caller hand this backend SFT training data over HTTP
 * (the contract only takes a `training_data_url`):
 * - `POST /v1/local/files` with the raw JSONL as the body (`Content-Type` `application/jsonl`,
 *   `application/octet-stream` or `text/plain`; any other is 415; over the server's body limit 413) stores it
 *   and answers `{id, url, bytes}`, where `url` is `<origin>/v1/local/files/<id>/content` on the origin the
 *   request was sent to;
 * - `GET /v1/local/files/{id}/content` answers the bytes (`application/jsonl`), 404 `{"detail": "File not
 *   found"}` for an unknown id.
 *
 * Both need the key, like every route. An SFT job whose `training_data_url` is such a `url` of this server
 * is read by the job worker straight from the store, so the URL needs no key.
 *
 * ## Extension: the dashboard's reads
 * The `dashboard` group (`/v1/local/models`, `/v1/local/logs/...`) is what the page at `/ui/` reads; see
 * `DashboardApi`. So are the traces pages' reads (`/v1/local/trace/...`) and the one route that takes no key,
 * `POST /v1/local/sign-in` (a one-time token from the printed dashboard link for the key).
 *
 * ## Extension: the Responses API
 * The `responses` group (`/v1/responses`, `GET`/`DELETE /v1/responses/{id}`, `.../input_items`) serves the
 * Responses API as a translation onto chat completions; see `ResponsesApi` and `ResponsesChat`.
 *
 * @since 0.1.0
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as Schema from "effect/Schema"
import { listModels } from "../../api/InferenceApi.js"
import { ResponsesGroup } from "../../api/ResponsesApi.js"
import {
  CallsGroup,
  CompletionsGroup,
  CostsGroup,
  DatasetsGroup,
  FeedbackGroup,
  ObjectsGroup,
  RefsGroup,
  ServiceGroup,
  TablesGroup,
  ThreadsGroup,
  FilesGroup as TraceFilesApiGroup
} from "../../api/TraceApi.js"
import { InvalidField, InvalidRequest, NotFound, TooLarge } from "../../api/TraceError.js"
import { OtelExportRes } from "../../api/TraceMisc.js"
import { TrainingApi } from "../../api/TrainingApi.js"
import { DashboardGroup, DashboardTracesGroup, SignInGroup } from "./DashboardApi.js"

/**
 * The inference surface's `GET /v1/models`. Its chat completion endpoint is the training group's own
 * `createChatCompletion` (the same definition), so it is served once, by the `chat` group.
 */
export class InferenceModelsGroup extends HttpApiGroup.make("inference", { topLevel: true }).add(listModels) {}

/** An uploaded file: its id, the URL of its content on this server, and its size in bytes. */
export class LocalFile extends Schema.Class<LocalFile>("effect-rl/local/LocalFile")({
  id: Schema.String,
  url: Schema.String,
  bytes: Schema.Int
}) {}

/** The path of a file's content, `/v1/local/files/<id>/content`, for building and recognising its URL. */
export const fileContentPath = (id: string): string => `/v1/local/files/${encodeURIComponent(id)}/content`

/** The file id of a `/v1/local/files/<id>/content` path, or undefined for any other path. */
export const fileIdOfPath = (pathname: string): string | undefined => {
  const match = /^\/v1\/local\/files\/([^/]+)\/content$/.exec(pathname)
  if (match === null || match[1] === undefined) return undefined
  try {
    return decodeURIComponent(match[1])
  } catch {
    return undefined
  }
}

/**
 * `POST /v1/local/files` (extension). The body is read raw by the handler, not through a payload schema:
 * the platform would parse `application/jsonl` as one JSON document.
 */
export const uploadFile = HttpApiEndpoint.post("uploadFile", "/v1/local/files").addSuccess(LocalFile)

/** `GET /v1/local/files/{file_id}/content` (extension): the bytes of an uploaded file. */
export const getFileContent = HttpApiEndpoint.get("getFileContent", "/v1/local/files/:file_id/content")
  .setPath(Schema.Struct({ file_id: Schema.String }))
  .addSuccess(HttpApiSchema.Uint8Array({ contentType: "application/jsonl" }))

/** The uploaded files extension (see the module comment). */
export class FilesGroup extends HttpApiGroup.make("files", { topLevel: true }).add(uploadFile).add(getFileContent) {}

/**
 * A trace group with the trace service's error bodies (`{reason}` with 400, 403, 404, 413), which `TraceApi`
 * declares at the level of its whole api. Its 422 comes from the server's error middleware, as on every route.
 */
const withTraceErrors = <Id extends string, Endpoints extends HttpApiEndpoint.HttpApiEndpoint.Any, E, R>(
  group: HttpApiGroup.HttpApiGroup<Id, Endpoints, E, R, true>
) =>
  group
    .addError(InvalidRequest, { status: 400 })
    .addError(InvalidField, { status: 403 })
    .addError(NotFound, { status: 404 })
    .addError(TooLarge, { status: 413 })

/** The trace surface's calls group, with the trace service's error bodies. */
export const TraceCallsGroup = withTraceErrors(CallsGroup)

/** The trace surface's objects group, with the trace service's error bodies. */
export const TraceObjectsGroup = withTraceErrors(ObjectsGroup)

/** The trace surface's tables group, with the trace service's error bodies. */
export const TraceTablesGroup = withTraceErrors(TablesGroup)

/** The trace surface's files (with the plural aliases), with the trace service's error bodies. */
export const TraceFilesGroup = withTraceErrors(TraceFilesApiGroup)

/** The trace surface's refs, with the trace service's error bodies. */
export const TraceRefsGroup = withTraceErrors(RefsGroup)

/** The trace surface's dataset delete (`/v2/`), with the trace service's error bodies. */
export const TraceDatasetsGroup = withTraceErrors(DatasetsGroup)

/** The trace surface's feedback, with the trace service's error bodies. */
export const TraceFeedbackGroup = withTraceErrors(FeedbackGroup)

/** The trace surface's costs, with the trace service's error bodies. */
export const TraceCostsGroup = withTraceErrors(CostsGroup)

/** The trace surface's threads, with the trace service's error bodies. */
export const TraceThreadsGroup = withTraceErrors(ThreadsGroup)

/** The trace surface's completions, with the trace service's error bodies. */
export const TraceCompletionsGroup = withTraceErrors(CompletionsGroup)

/**
 * The trace surface's OpenTelemetry export (both paths), with the trace service's error bodies. Unlike
 * `TraceApi`'s `OtelGroup`, whose payload schema lets a client send protobuf bytes or JSON, the server reads
 * the body raw, by its content type: a body the schema would refuse (JSON of another shape, or no JSON at all)
 * is then answered 400 `{reason}` naming the problem, as the service does, instead of the framework's 422.
 */
export const TraceOtelGroup = withTraceErrors(
  HttpApiGroup.make("traceOtel", { topLevel: true })
    .add(HttpApiEndpoint.post("otelExportTrace", "/otel/v1/trace").addSuccess(OtelExportRes))
    .add(HttpApiEndpoint.post("otelExportTraces", "/otel/v1/traces").addSuccess(OtelExportRes))
)

/** The trace surface's `/health` and `/server_info`. */
export const TraceServiceGroup = withTraceErrors(ServiceGroup)

/** The combined api of the embedded backend. */
export class LocalApi extends HttpApi.make("LocalApi")
  .addHttpApi(TrainingApi)
  .add(InferenceModelsGroup)
  .add(ResponsesGroup)
  .add(FilesGroup)
  .add(DashboardGroup)
  .add(DashboardTracesGroup)
  .add(SignInGroup)
  .add(TraceCallsGroup)
  .add(TraceObjectsGroup)
  .add(TraceTablesGroup)
  .add(TraceFilesGroup)
  .add(TraceRefsGroup)
  .add(TraceDatasetsGroup)
  .add(TraceFeedbackGroup)
  .add(TraceCostsGroup)
  .add(TraceThreadsGroup)
  .add(TraceCompletionsGroup)
  .add(TraceOtelGroup)
  .add(TraceServiceGroup) {}
