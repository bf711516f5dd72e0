/**
 * The trace client's implementation, loaded when a client is made (`TraceClient.make`, its layers), so that
 * importing the package does not build the trace service's schemas.
 *
 * @internal
 */
import * as HttpBody from "@effect/platform/HttpBody"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Effect from "effect/Effect"
import * as Encoding from "effect/Encoding"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Api from "../../api/TraceApi.js"
import { Call } from "../../api/TraceCall.js"
import { ExportTraceServiceRequest, OtelExportRes, Thread } from "../../api/TraceMisc.js"
import { DatasetDeleteRes, FileCreateRes, TableRow } from "../../api/TraceObject.js"
import { ApiError } from "../ApiError.js"
import type { Options, Service, WriteOptions } from "../TraceClient.js"
import { endpointCall } from "./endpoint.js"
import {
  bodyBroke,
  decodeJson,
  invalidRequest,
  makeTransport,
  readText,
  requestIdOf,
  send,
  type Call as WireCall
} from "./http.js"
import * as JsonLines from "./jsonLines.js"

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

/** Builds the client over the platform `HttpClient`, with options given in full (see `TraceClient.make`). */
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
