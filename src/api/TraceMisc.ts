/**
 * The rest of the trace service (surface A): feedback, costs, threads, completions, the OpenTelemetry
 * export, health and server info.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { JsonObject, JsonValue, OtherKeys, optionalKey } from "./Json.js"
import { ProjectId, Query, SortBy, Timestamp } from "./TraceCall.js"

/** An optional key that may also be `null`, as the service's `X | None = None` fields are. */
const nullable = <S extends Schema.Schema.Any>(schema: S) => Schema.optional(Schema.NullOr(schema))

// ---------------------------------------------------------------------------------------------------------------
// Feedback
// ---------------------------------------------------------------------------------------------------------------

const feedbackFields = {
  id: nullable(Schema.String),
  project_id: ProjectId,
  weave_ref: Schema.String,
  creator: nullable(Schema.String),
  feedback_type: Schema.String,
  payload: JsonObject,
  annotation_ref: nullable(Schema.String),
  runnable_ref: nullable(Schema.String),
  call_ref: nullable(Schema.String),
  trigger_ref: nullable(Schema.String),
  queue_id: nullable(Schema.String),
  scorer_tags: Schema.optional(Schema.Array(Schema.String)),
  scorer_tag_reasons: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  scorer_tag_confidences: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Finite })),
  scorer_ratings: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Finite })),
  scorer_rating_reasons: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  scorer_rating_confidences: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Finite })),
  span_agent_name: Schema.optional(Schema.String),
  span_agent_version: Schema.optional(Schema.String),
  span_status_code: Schema.optional(Schema.String),
  span_conversation_id: Schema.optional(Schema.String),
  span_trace_id: Schema.optional(Schema.String),
  scorer_trace_id: Schema.optional(Schema.String),
  wb_user_id: nullable(Schema.String)
}

/**
 * The body of `POST /feedback/create`: feedback of `feedback_type` (e.g. `wandb.reaction.1`, `wandb.note.1`,
 * or a custom type) with its `payload` on the object or call `weave_ref`.
 */
export const FeedbackCreateReq = Schema.Struct(feedbackFields).annotations({ identifier: "FeedbackCreateReq" })
/** @see {@link FeedbackCreateReq} */
export type FeedbackCreateReq = typeof FeedbackCreateReq.Type

/** The result of a feedback create (and replace). */
export const FeedbackCreateRes = Schema.Struct({
  id: Schema.String,
  created_at: Timestamp,
  wb_user_id: Schema.String,
  payload: JsonObject
}).annotations({ identifier: "FeedbackCreateRes" })
/** @see {@link FeedbackCreateRes} */
export type FeedbackCreateRes = typeof FeedbackCreateRes.Type

/** The body of `POST /feedback/query`: the `fields` to return, a query, order and page. */
export const FeedbackQueryReq = Schema.Struct({
  project_id: ProjectId,
  fields: nullable(Schema.Array(Schema.String)),
  query: nullable(Query),
  sort_by: nullable(Schema.Array(SortBy)),
  limit: nullable(Schema.NonNegativeInt),
  offset: nullable(Schema.NonNegativeInt)
}).annotations({ identifier: "FeedbackQueryReq" })
/** @see {@link FeedbackQueryReq} */
export type FeedbackQueryReq = typeof FeedbackQueryReq.Type

/**
 * A feedback row as `feedback/query` returns it when all fields are asked for. Every key is optional because
 * `fields` selects them; unknown keys are kept.
 */
export const Feedback = Schema.Struct(
  {
    id: optionalKey(Schema.String),
    project_id: optionalKey(Schema.String),
    weave_ref: optionalKey(Schema.String),
    wb_user_id: optionalKey(Schema.NullOr(Schema.String)),
    creator: optionalKey(Schema.NullOr(Schema.String)),
    created_at: optionalKey(Timestamp),
    feedback_type: optionalKey(Schema.String),
    payload: optionalKey(JsonObject),
    annotation_ref: optionalKey(Schema.NullOr(Schema.String)),
    runnable_ref: optionalKey(Schema.NullOr(Schema.String)),
    call_ref: optionalKey(Schema.NullOr(Schema.String)),
    trigger_ref: optionalKey(Schema.NullOr(Schema.String))
  },
  OtherKeys
).annotations({ identifier: "Feedback" })
/** @see {@link Feedback} */
export type Feedback = typeof Feedback.Type

/** The result of a feedback query: the rows, each with the fields asked for (see {@link Feedback}). */
export const FeedbackQueryRes = Schema.Struct({ result: Schema.Array(JsonObject) }).annotations({
  identifier: "FeedbackQueryRes"
})
/** @see {@link FeedbackQueryRes} */
export type FeedbackQueryRes = typeof FeedbackQueryRes.Type

/** The body of `POST /feedback/purge`; the service accepts only queries on ids (`$eq` on `id`, or `$or`s of them). */
export const FeedbackPurgeReq = Schema.Struct({ project_id: ProjectId, query: Query }).annotations({
  identifier: "FeedbackPurgeReq"
})
/** @see {@link FeedbackPurgeReq} */
export type FeedbackPurgeReq = typeof FeedbackPurgeReq.Type

/** The result of a feedback purge: `{}`. */
export const FeedbackPurgeRes = Schema.Struct({}).annotations({ identifier: "FeedbackPurgeRes" })
/** @see {@link FeedbackPurgeRes} */
export type FeedbackPurgeRes = typeof FeedbackPurgeRes.Type

/** The body of `POST /feedback/replace`: purge `feedback_id`, then create this feedback. */
export const FeedbackReplaceReq = Schema.Struct({ ...feedbackFields, feedback_id: Schema.String }).annotations({
  identifier: "FeedbackReplaceReq"
})
/** @see {@link FeedbackReplaceReq} */
export type FeedbackReplaceReq = typeof FeedbackReplaceReq.Type

/** The result of a feedback replace: the new feedback. */
export const FeedbackReplaceRes = FeedbackCreateRes
/** @see {@link FeedbackReplaceRes} */
export type FeedbackReplaceRes = FeedbackCreateRes

// ---------------------------------------------------------------------------------------------------------------
// Costs
// ---------------------------------------------------------------------------------------------------------------

/** The prices of one LLM, per token. */
export const CostCreateInput = Schema.Struct({
  prompt_token_cost: Schema.Finite,
  completion_token_cost: Schema.Finite,
  cache_read_input_token_cost: Schema.optional(Schema.Finite),
  cache_creation_input_token_cost: Schema.optional(Schema.Finite),
  prompt_token_cost_unit: nullable(Schema.String),
  completion_token_cost_unit: nullable(Schema.String),
  effective_date: nullable(Timestamp),
  provider_id: nullable(Schema.String)
}).annotations({ identifier: "CostCreateInput" })
/** @see {@link CostCreateInput} */
export type CostCreateInput = typeof CostCreateInput.Type

/** The body of `POST /cost/create`: prices by `llm_id`. */
export const CostCreateReq = Schema.Struct({
  project_id: ProjectId,
  costs: Schema.Record({ key: Schema.String, value: CostCreateInput }),
  wb_user_id: nullable(Schema.String)
}).annotations({ identifier: "CostCreateReq" })
/** @see {@link CostCreateReq} */
export type CostCreateReq = typeof CostCreateReq.Type

/** The result of a cost create: `[id, llm_id]` per cost created. */
export const CostCreateRes = Schema.Struct({
  ids: Schema.Array(Schema.Tuple(Schema.String, Schema.String))
}).annotations({ identifier: "CostCreateRes" })
/** @see {@link CostCreateRes} */
export type CostCreateRes = typeof CostCreateRes.Type

/** The body of `POST /cost/query`. */
export const CostQueryReq = Schema.Struct({
  project_id: ProjectId,
  fields: nullable(Schema.Array(Schema.String)),
  query: nullable(Query),
  sort_by: nullable(Schema.Array(SortBy)),
  limit: nullable(Schema.NonNegativeInt),
  offset: nullable(Schema.NonNegativeInt)
}).annotations({ identifier: "CostQueryReq" })
/** @see {@link CostQueryReq} */
export type CostQueryReq = typeof CostQueryReq.Type

/** One cost as a cost query returns it (the fields asked for). */
export const CostQueryOutput = Schema.Struct({
  id: nullable(Schema.String),
  llm_id: nullable(Schema.String),
  prompt_token_cost: nullable(Schema.Finite),
  completion_token_cost: nullable(Schema.Finite),
  prompt_token_cost_unit: nullable(Schema.String),
  completion_token_cost_unit: nullable(Schema.String),
  effective_date: nullable(Timestamp),
  provider_id: nullable(Schema.String)
}).annotations({ identifier: "CostQueryOutput" })
/** @see {@link CostQueryOutput} */
export type CostQueryOutput = typeof CostQueryOutput.Type

/** The result of a cost query. */
export const CostQueryRes = Schema.Struct({ results: Schema.Array(CostQueryOutput) }).annotations({
  identifier: "CostQueryRes"
})
/** @see {@link CostQueryRes} */
export type CostQueryRes = typeof CostQueryRes.Type

/** The body of `POST /cost/purge`. */
export const CostPurgeReq = Schema.Struct({ project_id: ProjectId, query: Query }).annotations({
  identifier: "CostPurgeReq"
})
/** @see {@link CostPurgeReq} */
export type CostPurgeReq = typeof CostPurgeReq.Type

/** The result of a cost purge: `{}`. */
export const CostPurgeRes = Schema.Struct({}).annotations({ identifier: "CostPurgeRes" })
/** @see {@link CostPurgeRes} */
export type CostPurgeRes = typeof CostPurgeRes.Type

// ---------------------------------------------------------------------------------------------------------------
// Threads
// ---------------------------------------------------------------------------------------------------------------

/** The filter of a threads query. */
export const ThreadsQueryFilter = Schema.Struct({
  after_datetime: nullable(Timestamp),
  before_datetime: nullable(Timestamp),
  thread_ids: nullable(Schema.Array(Schema.String))
}).annotations({ identifier: "ThreadsQueryFilter" })
/** @see {@link ThreadsQueryFilter} */
export type ThreadsQueryFilter = typeof ThreadsQueryFilter.Type

/** The body of `POST /threads/stream_query`; the answer is JSON lines of {@link Thread}. */
export const ThreadsQueryReq = Schema.Struct({
  project_id: ProjectId,
  filter: nullable(ThreadsQueryFilter),
  limit: nullable(Schema.NonNegativeInt),
  offset: nullable(Schema.NonNegativeInt),
  sort_by: nullable(Schema.Array(SortBy))
}).annotations({ identifier: "ThreadsQueryReq" })
/** @see {@link ThreadsQueryReq} */
export type ThreadsQueryReq = typeof ThreadsQueryReq.Type

/** A thread: statistics over its turn calls (the calls whose id is their `turn_id`). */
export class Thread extends Schema.Class<Thread>("effect-rl/trace/Thread")({
  thread_id: Schema.String,
  turn_count: Schema.Int,
  start_time: Timestamp,
  last_updated: Timestamp,
  first_turn_id: Schema.NullOr(Schema.String),
  last_turn_id: Schema.NullOr(Schema.String),
  p50_turn_duration_ms: Schema.NullOr(Schema.Finite),
  p99_turn_duration_ms: Schema.NullOr(Schema.Finite)
}) {}

// ---------------------------------------------------------------------------------------------------------------
// Completions
// ---------------------------------------------------------------------------------------------------------------

/**
 * The inputs of a completion: the model, the messages (chat-completions messages), and any other
 * chat-completions parameter (kept as sent).
 */
export const CompletionsInputs = Schema.Struct(
  {
    model: Schema.String,
    messages: optionalKey(Schema.Array(JsonValue)),
    temperature: optionalKey(Schema.NullOr(Schema.Finite)),
    top_p: optionalKey(Schema.NullOr(Schema.Finite)),
    n: optionalKey(Schema.NullOr(Schema.Int)),
    stop: optionalKey(Schema.NullOr(Schema.Union(Schema.String, Schema.Array(JsonValue)))),
    max_completion_tokens: optionalKey(Schema.NullOr(Schema.Int)),
    max_tokens: optionalKey(Schema.NullOr(Schema.Int)),
    presence_penalty: optionalKey(Schema.NullOr(Schema.Finite)),
    frequency_penalty: optionalKey(Schema.NullOr(Schema.Finite)),
    stream: optionalKey(Schema.NullOr(Schema.Boolean)),
    seed: optionalKey(Schema.NullOr(Schema.Int)),
    logprobs: optionalKey(Schema.NullOr(Schema.Boolean)),
    top_logprobs: optionalKey(Schema.NullOr(Schema.Int)),
    tools: optionalKey(Schema.NullOr(Schema.Array(JsonValue))),
    response_format: optionalKey(Schema.NullOr(JsonObject))
  },
  OtherKeys
).annotations({ identifier: "CompletionsInputs" })
/** @see {@link CompletionsInputs} */
export type CompletionsInputs = typeof CompletionsInputs.Type

/**
 * The body of `POST /completions/create` and `POST /completions/create_stream`. With `track_llm_call` (the
 * default) the completion is traced as a call.
 */
export const CompletionsCreateReq = Schema.Struct({
  project_id: ProjectId,
  inputs: CompletionsInputs,
  wb_user_id: nullable(Schema.String),
  track_llm_call: nullable(Schema.Boolean)
}).annotations({ identifier: "CompletionsCreateReq" })
/** @see {@link CompletionsCreateReq} */
export type CompletionsCreateReq = typeof CompletionsCreateReq.Type

/** The result of a completion: the chat-completions response as JSON, and the id of the call that traced it. */
export const CompletionsCreateRes = Schema.Struct({
  response: JsonObject,
  weave_call_id: nullable(Schema.String)
}).annotations({ identifier: "CompletionsCreateRes" })
/** @see {@link CompletionsCreateRes} */
export type CompletionsCreateRes = typeof CompletionsCreateRes.Type

/**
 * The first line of `completions/create_stream`: `{"_meta": {"weave_call_id": ...}}`. The lines after it are
 * chat-completions chunks (JSON objects).
 */
export const CompletionsStreamMeta = Schema.Struct({
  _meta: Schema.Struct({ weave_call_id: optionalKey(Schema.NullOr(Schema.String)) }, OtherKeys)
}).annotations({ identifier: "CompletionsStreamMeta" })
/** @see {@link CompletionsStreamMeta} */
export type CompletionsStreamMeta = typeof CompletionsStreamMeta.Type

// ---------------------------------------------------------------------------------------------------------------
// OpenTelemetry export
// ---------------------------------------------------------------------------------------------------------------

/** An OTLP attribute (JSON encoding): a key and an `AnyValue` (`{stringValue}`, `{intValue}`, ...). */
export const OtlpKeyValue = Schema.Struct(
  { key: Schema.String, value: optionalKey(JsonObject) },
  OtherKeys
).annotations({ identifier: "OtlpKeyValue" })
/** @see {@link OtlpKeyValue} */
export type OtlpKeyValue = typeof OtlpKeyValue.Type

/** OTLP 64-bit integers are strings or numbers in the JSON encoding. */
const OtlpInt64 = Schema.Union(Schema.String, Schema.Int)

/**
 * An OTLP span (JSON encoding): hex `traceId` (32) and `spanId` (16), times in Unix nanoseconds. Other keys
 * (`events`, `links`, `traceState`, ...) are kept.
 */
export const OtlpSpan = Schema.Struct(
  {
    traceId: Schema.String,
    spanId: Schema.String,
    parentSpanId: optionalKey(Schema.String),
    name: Schema.String,
    kind: optionalKey(Schema.Union(Schema.Int, Schema.String)),
    startTimeUnixNano: OtlpInt64,
    endTimeUnixNano: OtlpInt64,
    attributes: optionalKey(Schema.Array(OtlpKeyValue)),
    status: optionalKey(JsonObject)
  },
  OtherKeys
).annotations({ identifier: "OtlpSpan" })
/** @see {@link OtlpSpan} */
export type OtlpSpan = typeof OtlpSpan.Type

/** The spans of one instrumentation scope. */
export const OtlpScopeSpans = Schema.Struct(
  { scope: optionalKey(JsonObject), spans: optionalKey(Schema.Array(OtlpSpan)) },
  OtherKeys
).annotations({ identifier: "OtlpScopeSpans" })
/** @see {@link OtlpScopeSpans} */
export type OtlpScopeSpans = typeof OtlpScopeSpans.Type

/** The resource (service, host, ...) that produced spans: its attributes. */
export const OtlpResource = Schema.Struct(
  { attributes: optionalKey(Schema.Array(OtlpKeyValue)) },
  OtherKeys
).annotations({ identifier: "OtlpResource" })
/** @see {@link OtlpResource} */
export type OtlpResource = typeof OtlpResource.Type

/** The spans of one resource. */
export const OtlpResourceSpans = Schema.Struct(
  {
    resource: optionalKey(OtlpResource),
    scopeSpans: optionalKey(Schema.Array(OtlpScopeSpans))
  },
  OtherKeys
).annotations({ identifier: "OtlpResourceSpans" })
/** @see {@link OtlpResourceSpans} */
export type OtlpResourceSpans = typeof OtlpResourceSpans.Type

/**
 * An OTLP `ExportTraceServiceRequest` in its JSON encoding (`application/json`; lowerCamelCase keys as the
 * protobuf JSON mapping writes them). The protobuf encoding (`application/x-protobuf`) travels as bytes; see
 * `TraceApi.OtelExportPayload`.
 */
export const ExportTraceServiceRequest = Schema.Struct(
  { resourceSpans: optionalKey(Schema.Array(OtlpResourceSpans)) },
  OtherKeys
).annotations({ identifier: "ExportTraceServiceRequest" })
/** @see {@link ExportTraceServiceRequest} */
export type ExportTraceServiceRequest = typeof ExportTraceServiceRequest.Type

/** The spans the service rejected, if any. */
export const ExportTracePartialSuccess = Schema.Struct({
  rejected_spans: Schema.Int,
  error_message: Schema.String
}).annotations({ identifier: "ExportTracePartialSuccess" })
/** @see {@link ExportTracePartialSuccess} */
export type ExportTracePartialSuccess = typeof ExportTracePartialSuccess.Type

/** The result of an OTel export: `{partial_success?}`. */
export const OtelExportRes = Schema.Struct({
  partial_success: nullable(ExportTracePartialSuccess)
}).annotations({ identifier: "OtelExportRes" })
/** @see {@link OtelExportRes} */
export type OtelExportRes = typeof OtelExportRes.Type

// ---------------------------------------------------------------------------------------------------------------
// Service
// ---------------------------------------------------------------------------------------------------------------

/** The body of `GET /health`: `{"status": "ok"}` or the like; other keys are kept. */
export const TraceHealth = Schema.Struct({ status: optionalKey(Schema.String) }, OtherKeys).annotations({
  identifier: "TraceHealth"
})
/** @see {@link TraceHealth} */
export type TraceHealth = typeof TraceHealth.Type

/** The body of `GET /server_info`. */
export const ServerInfoRes = Schema.Struct({
  min_required_weave_python_version: Schema.String,
  trace_server_version: nullable(Schema.String)
}).annotations({ identifier: "ServerInfoRes" })
/** @see {@link ServerInfoRes} */
export type ServerInfoRes = typeof ServerInfoRes.Type
