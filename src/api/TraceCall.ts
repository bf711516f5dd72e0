/**
 * Calls of the trace service (surface A; shapes from its published OpenAPI document and its SDK's behaviour):
 * the call record, start, end, the batched upsert, read, update, delete, the streamed query with its filter, the
 * query language (`{"$expr": ...}`) and `sort_by`, and the query statistics. The query language and `SortBy`
 * are shared by the feedback and cost queries.
 *
 * Requests are closed records (a key not named here is dropped); responses and records keep what the service
 * may add where it documents open objects (`summary`, usage), and drop other unknown keys, so a newer service
 * never breaks decoding.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { withFastDecode } from "./internal/fastPath.js"
import { callCreateBatchReq } from "./internal/traceFastPath.js"
import { JsonObject, JsonValue, OtherKeys, optionalKey } from "./Json.js"

/** An optional key that may also be `null`, as the service's `X | None = None` fields are. */
const nullable = <S extends Schema.Schema.Any>(schema: S) => Schema.optional(Schema.NullOr(schema))

/** A project on the wire: `"entity/project"`. */
export const ProjectId = Schema.String.annotations({
  identifier: "ProjectId",
  description: 'The project as "entity/project"'
})
/** @see {@link ProjectId} */
export type ProjectId = typeof ProjectId.Type

/**
 * A timestamp: an ISO 8601 string (`Date.toISOString()` form is fine; the service answers in UTC with `Z`, with
 * up to microseconds). Kept as a string so that no precision is lost on the way through.
 */
export const Timestamp = Schema.String.annotations({ identifier: "Timestamp" })
/** @see {@link Timestamp} */
export type Timestamp = typeof Timestamp.Type

/** One sort key: a field (a dot path for nested fields) and a direction. */
export const SortBy = Schema.Struct({
  field: Schema.String,
  direction: Schema.Literal("asc", "desc")
}).annotations({ identifier: "SortBy" })
/** @see {@link SortBy} */
export type SortBy = typeof SortBy.Type

// ---------------------------------------------------------------------------------------------------------------
// The query language
// ---------------------------------------------------------------------------------------------------------------

/** `{"$literal": v}`: a constant. Nested objects and lists hold literal operations, as the service defines. */
export interface LiteralOperation {
  readonly $literal: LiteralValue
}
/** The value of a {@link LiteralOperation}. */
export type LiteralValue =
  | string
  | number
  | boolean
  | null
  | { readonly [key: string]: LiteralOperation }
  | ReadonlyArray<LiteralOperation>

/** `{"$getField": "dot.path"}`: a field of the record, e.g. `inputs.x`, `summary.weave.status`. */
export interface GetFieldOperation {
  readonly $getField: string
}

/** The types `$convert` converts to; `exists` is whether the field is present. */
export const ConvertTo = Schema.Literal("double", "string", "int", "bool", "exists")
/** @see {@link ConvertTo} */
export type ConvertTo = typeof ConvertTo.Type

/** `{"$convert": {input, to}}`: a type conversion. */
export interface ConvertOperation {
  readonly $convert: { readonly input: Operand; readonly to: ConvertTo }
}

/** `{"$size": operand}`: the length of a list or a string (in the published OpenAPI document). */
export interface SizeOperation {
  readonly $size: Operand
}

/** `{"$and": [...]}` */
export interface AndOperation {
  readonly $and: ReadonlyArray<Operand>
}
/** `{"$or": [...]}` */
export interface OrOperation {
  readonly $or: ReadonlyArray<Operand>
}
/** `{"$not": [operand]}` (a one-element list) */
export interface NotOperation {
  readonly $not: readonly [Operand]
}
/** `{"$eq": [a, b]}` */
export interface EqOperation {
  readonly $eq: readonly [Operand, Operand]
}
/** `{"$gt": [a, b]}` */
export interface GtOperation {
  readonly $gt: readonly [Operand, Operand]
}
/** `{"$gte": [a, b]}` */
export interface GteOperation {
  readonly $gte: readonly [Operand, Operand]
}
/** `{"$lt": [a, b]}` */
export interface LtOperation {
  readonly $lt: readonly [Operand, Operand]
}
/** `{"$lte": [a, b]}` */
export interface LteOperation {
  readonly $lte: readonly [Operand, Operand]
}
/** `{"$in": [operand, [operands]]}` */
export interface InOperation {
  readonly $in: readonly [Operand, ReadonlyArray<Operand>]
}
/** `{"$contains": {input, substr, case_insensitive?}}` */
export interface ContainsOperation {
  readonly $contains: {
    readonly input: Operand
    readonly substr: Operand
    readonly case_insensitive?: boolean | null | undefined
  }
}

/** An operation: what `$expr` holds. */
export type Operation =
  | AndOperation
  | OrOperation
  | NotOperation
  | EqOperation
  | GtOperation
  | GteOperation
  | LtOperation
  | LteOperation
  | InOperation
  | ContainsOperation

/** An operand: a literal, a field, a conversion, a size, or a nested operation. */
export type Operand = LiteralOperation | GetFieldOperation | ConvertOperation | SizeOperation | Operation

const operand = Schema.suspend((): Schema.Schema<Operand> => Operand)
const pair = Schema.Tuple(operand, operand)

/** Schema of {@link LiteralOperation}. */
export const LiteralOperation: Schema.Schema<LiteralOperation> = Schema.Struct({
  $literal: Schema.Union(
    Schema.String,
    Schema.Finite,
    Schema.Boolean,
    Schema.Null,
    Schema.Record({ key: Schema.String, value: Schema.suspend(() => LiteralOperation) }),
    Schema.Array(Schema.suspend(() => LiteralOperation))
  )
}).annotations({ identifier: "LiteralOperation" })

/** Schema of {@link GetFieldOperation}. */
export const GetFieldOperation: Schema.Schema<GetFieldOperation> = Schema.Struct({
  $getField: Schema.String
}).annotations({ identifier: "GetFieldOperation" })

/** Schema of {@link ConvertOperation}. */
export const ConvertOperation: Schema.Schema<ConvertOperation> = Schema.Struct({
  $convert: Schema.Struct({ input: operand, to: ConvertTo })
}).annotations({ identifier: "ConvertOperation" })

/** Schema of {@link SizeOperation}. */
export const SizeOperation: Schema.Schema<SizeOperation> = Schema.Struct({ $size: operand }).annotations({
  identifier: "SizeOperation"
})

/** Schema of {@link AndOperation}. */
export const AndOperation: Schema.Schema<AndOperation> = Schema.Struct({ $and: Schema.Array(operand) }).annotations({
  identifier: "AndOperation"
})
/** Schema of {@link OrOperation}. */
export const OrOperation: Schema.Schema<OrOperation> = Schema.Struct({ $or: Schema.Array(operand) }).annotations({
  identifier: "OrOperation"
})
/** Schema of {@link NotOperation}. */
export const NotOperation: Schema.Schema<NotOperation> = Schema.Struct({ $not: Schema.Tuple(operand) }).annotations({
  identifier: "NotOperation"
})
/** Schema of {@link EqOperation}. */
export const EqOperation: Schema.Schema<EqOperation> = Schema.Struct({ $eq: pair }).annotations({
  identifier: "EqOperation"
})
/** Schema of {@link GtOperation}. */
export const GtOperation: Schema.Schema<GtOperation> = Schema.Struct({ $gt: pair }).annotations({
  identifier: "GtOperation"
})
/** Schema of {@link GteOperation}. */
export const GteOperation: Schema.Schema<GteOperation> = Schema.Struct({ $gte: pair }).annotations({
  identifier: "GteOperation"
})
/** Schema of {@link LtOperation}. */
export const LtOperation: Schema.Schema<LtOperation> = Schema.Struct({ $lt: pair }).annotations({
  identifier: "LtOperation"
})
/** Schema of {@link LteOperation}. */
export const LteOperation: Schema.Schema<LteOperation> = Schema.Struct({ $lte: pair }).annotations({
  identifier: "LteOperation"
})
/** Schema of {@link InOperation}. */
export const InOperation: Schema.Schema<InOperation> = Schema.Struct({
  $in: Schema.Tuple(operand, Schema.Array(operand))
}).annotations({ identifier: "InOperation" })
/** Schema of {@link ContainsOperation}. */
export const ContainsOperation: Schema.Schema<ContainsOperation> = Schema.Struct({
  $contains: Schema.Struct({ input: operand, substr: operand, case_insensitive: nullable(Schema.Boolean) })
}).annotations({ identifier: "ContainsOperation" })

/** Schema of {@link Operation}. */
export const Operation: Schema.Schema<Operation> = Schema.Union(
  AndOperation,
  OrOperation,
  NotOperation,
  EqOperation,
  GtOperation,
  GteOperation,
  LtOperation,
  LteOperation,
  InOperation,
  ContainsOperation
).annotations({ identifier: "Operation" })

/** Schema of {@link Operand}. */
export const Operand: Schema.Schema<Operand> = Schema.Union(
  LiteralOperation,
  GetFieldOperation,
  ConvertOperation,
  SizeOperation,
  Operation
).annotations({ identifier: "Operand" })

/** A query: `{"$expr": operation}`. */
export const Query = Schema.Struct({ $expr: Operation }).annotations({ identifier: "Query" })
/** @see {@link Query} */
export type Query = typeof Query.Type

// ---------------------------------------------------------------------------------------------------------------
// Summaries
// ---------------------------------------------------------------------------------------------------------------

/** Token usage of one model, as clients send it in `summary.usage`; other keys are kept. */
export const LLMUsage = Schema.Struct(
  {
    prompt_tokens: optionalKey(Schema.NullOr(Schema.Int)),
    input_tokens: optionalKey(Schema.NullOr(Schema.Int)),
    completion_tokens: optionalKey(Schema.NullOr(Schema.Int)),
    output_tokens: optionalKey(Schema.NullOr(Schema.Int)),
    requests: optionalKey(Schema.NullOr(Schema.Int)),
    total_tokens: optionalKey(Schema.NullOr(Schema.Int)),
    cache_creation_input_tokens: optionalKey(Schema.NullOr(Schema.Int)),
    cache_read_input_tokens: optionalKey(Schema.NullOr(Schema.Int))
  },
  OtherKeys
).annotations({ identifier: "LLMUsage" })
/** @see {@link LLMUsage} */
export type LLMUsage = typeof LLMUsage.Type

/** The statuses the service derives for a call in `summary.weave.status`. */
export const CallStatus = Schema.Literal("success", "error", "running", "descendant_error")
/** @see {@link CallStatus} */
export type CallStatus = typeof CallStatus.Type

/**
 * The part of the summary the service derives on reads: `{status, latency_ms, trace_name}`, plus what it adds
 * (`costs`, `feedback`, ...). `status` is typed as a string so that a status added later still decodes; the
 * known ones are {@link CallStatus}.
 */
export const WeaveSummary = Schema.Struct(
  {
    status: optionalKey(Schema.String),
    latency_ms: optionalKey(Schema.NullOr(Schema.Finite)),
    trace_name: optionalKey(Schema.NullOr(Schema.String))
  },
  OtherKeys
).annotations({ identifier: "WeaveSummary" })
/** @see {@link WeaveSummary} */
export type WeaveSummary = typeof WeaveSummary.Type

/** A call's summary: `usage` per model, `status_counts`, the derived `weave` part on reads, and any other keys. */
export const CallSummary = Schema.Struct(
  {
    usage: optionalKey(Schema.Record({ key: Schema.String, value: LLMUsage })),
    status_counts: optionalKey(Schema.Record({ key: Schema.String, value: Schema.Int })),
    weave: optionalKey(WeaveSummary)
  },
  OtherKeys
).annotations({ identifier: "CallSummary" })
/** @see {@link CallSummary} */
export type CallSummary = typeof CallSummary.Type

/** The summary a client sends with a call's end (`SummaryInsertMap`): usage, status counts, any other keys. */
export const SummaryInsert = Schema.Struct(
  {
    usage: optionalKey(Schema.Record({ key: Schema.String, value: LLMUsage })),
    status_counts: optionalKey(Schema.Record({ key: Schema.String, value: Schema.Int }))
  },
  OtherKeys
).annotations({ identifier: "SummaryInsert" })
/** @see {@link SummaryInsert} */
export type SummaryInsert = typeof SummaryInsert.Type

// ---------------------------------------------------------------------------------------------------------------
// The call record
// ---------------------------------------------------------------------------------------------------------------

/**
 * A call as the service returns it (`CallSchema`). Ids are UUIDv7 strings (OpenTelemetry hex ids are also
 * accepted); `op_name` is normally an op ref `weave:///entity/project/op/<name>:<digest>`. Unknown keys are
 * dropped on decode.
 */
export class Call extends Schema.Class<Call>("effect-rl/trace/Call")({
  id: Schema.String,
  project_id: ProjectId,
  op_name: Schema.String,
  display_name: nullable(Schema.String),
  trace_id: Schema.String,
  parent_id: nullable(Schema.String),
  thread_id: nullable(Schema.String),
  turn_id: nullable(Schema.String),
  started_at: Timestamp,
  attributes: JsonObject,
  inputs: JsonObject,
  ended_at: nullable(Timestamp),
  exception: nullable(Schema.String),
  output: Schema.optional(JsonValue),
  summary: nullable(CallSummary),
  wb_user_id: nullable(Schema.String),
  wb_username: nullable(Schema.String),
  wb_run_id: nullable(Schema.String),
  wb_run_step: nullable(Schema.Int),
  wb_run_step_end: nullable(Schema.Int),
  deleted_at: nullable(Timestamp),
  expire_at: nullable(Timestamp),
  storage_size_bytes: nullable(Schema.Int),
  total_storage_size_bytes: nullable(Schema.Int)
}) {}

// ---------------------------------------------------------------------------------------------------------------
// Start, end, upsert_batch
// ---------------------------------------------------------------------------------------------------------------

/** A call's start as a client sends it (`StartedCallSchemaForInsert`). Without `id`/`trace_id` the service makes them. */
export const CallStartInsert = Schema.Struct({
  project_id: ProjectId,
  id: nullable(Schema.String),
  op_name: Schema.String,
  display_name: nullable(Schema.String),
  trace_id: nullable(Schema.String),
  parent_id: nullable(Schema.String),
  thread_id: nullable(Schema.String),
  turn_id: nullable(Schema.String),
  started_at: Timestamp,
  attributes: JsonObject,
  inputs: JsonObject,
  otel_dump: nullable(JsonObject),
  wb_user_id: nullable(Schema.String),
  wb_run_id: nullable(Schema.String),
  wb_run_step: nullable(Schema.Int)
}).annotations({ identifier: "CallStartInsert" })
/** @see {@link CallStartInsert} */
export type CallStartInsert = typeof CallStartInsert.Type

/** The body of `POST /call/start`: `{start}`. */
export const CallStartReq = Schema.Struct({ start: CallStartInsert }).annotations({ identifier: "CallStartReq" })
/** @see {@link CallStartReq} */
export type CallStartReq = typeof CallStartReq.Type

/** The result of a call start: the call's id and its trace's id. */
export const CallStartRes = Schema.Struct({ id: Schema.String, trace_id: Schema.String }).annotations({
  identifier: "CallStartRes"
})
/** @see {@link CallStartRes} */
export type CallStartRes = typeof CallStartRes.Type

/** A call's end as a client sends it (`EndedCallSchemaForInsert`). */
export const CallEndInsert = Schema.Struct({
  project_id: ProjectId,
  id: Schema.String,
  trace_id: nullable(Schema.String),
  is_eval: nullable(Schema.Boolean),
  ended_at: Timestamp,
  started_at: nullable(Timestamp),
  exception: nullable(Schema.String),
  output: Schema.optional(JsonValue),
  summary: SummaryInsert,
  wb_run_step_end: nullable(Schema.Int)
}).annotations({ identifier: "CallEndInsert" })
/** @see {@link CallEndInsert} */
export type CallEndInsert = typeof CallEndInsert.Type

/** The body of `POST /call/end`: `{end}`. */
export const CallEndReq = Schema.Struct({ end: CallEndInsert }).annotations({ identifier: "CallEndReq" })
/** @see {@link CallEndReq} */
export type CallEndReq = typeof CallEndReq.Type

/** The result of a call end: `{}`. */
export const CallEndRes = Schema.Struct({}).annotations({ identifier: "CallEndRes" })
/** @see {@link CallEndRes} */
export type CallEndRes = typeof CallEndRes.Type

/** A start in a batch: `{mode: "start", req: {start}}`. */
export const CallBatchStart = Schema.Struct({ mode: Schema.Literal("start"), req: CallStartReq }).annotations({
  identifier: "CallBatchStart"
})
/** @see {@link CallBatchStart} */
export type CallBatchStart = typeof CallBatchStart.Type

/** An end in a batch: `{mode: "end", req: {end}}`. */
export const CallBatchEnd = Schema.Struct({ mode: Schema.Literal("end"), req: CallEndReq }).annotations({
  identifier: "CallBatchEnd"
})
/** @see {@link CallBatchEnd} */
export type CallBatchEnd = typeof CallBatchEnd.Type

const CallCreateBatchReqStruct = Schema.Struct({
  batch: Schema.Array(Schema.Union(CallBatchStart, CallBatchEnd))
}).annotations({ identifier: "CallCreateBatchReq" })

/**
 * The body of `POST /call/upsert_batch`. An end may arrive in a later batch than its start. A batch carries
 * thousands of calls: one that plainly matches is decoded in one pass (internal/traceFastPath.ts), any other by
 * the schema.
 */
export const CallCreateBatchReq: Schema.Schema<typeof CallCreateBatchReqStruct.Type> = withFastDecode(
  CallCreateBatchReqStruct,
  callCreateBatchReq as (u: unknown) => typeof CallCreateBatchReqStruct.Type | undefined
)
/** @see {@link CallCreateBatchReq} */
export type CallCreateBatchReq = typeof CallCreateBatchReq.Type

/** The result of a batch: one result per item, in order (`{id, trace_id}` for a start, `{}` for an end). */
export const CallCreateBatchRes = Schema.Struct({
  res: Schema.Array(Schema.Union(CallStartRes, CallEndRes))
}).annotations({ identifier: "CallCreateBatchRes" })
/** @see {@link CallCreateBatchRes} */
export type CallCreateBatchRes = typeof CallCreateBatchRes.Type

// ---------------------------------------------------------------------------------------------------------------
// Read, update, delete
// ---------------------------------------------------------------------------------------------------------------

/** The body of `POST /call/read`. */
export const CallReadReq = Schema.Struct({
  project_id: ProjectId,
  id: Schema.String,
  include_costs: nullable(Schema.Boolean),
  include_storage_size: nullable(Schema.Boolean),
  include_total_storage_size: nullable(Schema.Boolean)
}).annotations({ identifier: "CallReadReq" })
/** @see {@link CallReadReq} */
export type CallReadReq = typeof CallReadReq.Type

/** The result of a call read: the call, or null when there is none. */
export const CallReadRes = Schema.Struct({ call: Schema.NullOr(Call) }).annotations({ identifier: "CallReadRes" })
/** @see {@link CallReadRes} */
export type CallReadRes = typeof CallReadRes.Type

/** The body of `POST /call/update`: a new display name. */
export const CallUpdateReq = Schema.Struct({
  project_id: ProjectId,
  call_id: Schema.String,
  display_name: nullable(Schema.String),
  wb_user_id: nullable(Schema.String)
}).annotations({ identifier: "CallUpdateReq" })
/** @see {@link CallUpdateReq} */
export type CallUpdateReq = typeof CallUpdateReq.Type

/** The result of a call update: `{}`. */
export const CallUpdateRes = Schema.Struct({}).annotations({ identifier: "CallUpdateRes" })
/** @see {@link CallUpdateRes} */
export type CallUpdateRes = typeof CallUpdateRes.Type

/** The body of `POST /calls/delete`. Deletion is soft and takes every descendant (by `parent_id`) with it. */
export const CallsDeleteReq = Schema.Struct({
  project_id: ProjectId,
  call_ids: Schema.Array(Schema.String),
  wb_user_id: nullable(Schema.String)
}).annotations({ identifier: "CallsDeleteReq" })
/** @see {@link CallsDeleteReq} */
export type CallsDeleteReq = typeof CallsDeleteReq.Type

/** The result of a calls delete: how many calls were deleted, descendants included. */
export const CallsDeleteRes = Schema.Struct({ num_deleted: Schema.Int }).annotations({ identifier: "CallsDeleteRes" })
/** @see {@link CallsDeleteRes} */
export type CallsDeleteRes = typeof CallsDeleteRes.Type

// ---------------------------------------------------------------------------------------------------------------
// Query
// ---------------------------------------------------------------------------------------------------------------

/**
 * The filter of a calls query. A name in `op_names` ending in `:*` matches as a prefix. Lists are ORed within
 * a key and the keys ANDed.
 */
export const CallsFilter = Schema.Struct({
  op_names: nullable(Schema.Array(Schema.String)),
  input_refs: nullable(Schema.Array(Schema.String)),
  output_refs: nullable(Schema.Array(Schema.String)),
  parent_ids: nullable(Schema.Array(Schema.String)),
  trace_ids: nullable(Schema.Array(Schema.String)),
  call_ids: nullable(Schema.Array(Schema.String)),
  thread_ids: nullable(Schema.Array(Schema.String)),
  turn_ids: nullable(Schema.Array(Schema.String)),
  trace_roots_only: nullable(Schema.Boolean),
  wb_user_ids: nullable(Schema.Array(Schema.String)),
  wb_run_ids: nullable(Schema.Array(Schema.String))
}).annotations({ identifier: "CallsFilter" })
/** @see {@link CallsFilter} */
export type CallsFilter = typeof CallsFilter.Type

/**
 * The body of `POST /calls/stream_query`; the answer is JSON lines of {@link Call}. The default order is
 * `started_at asc, id asc`.
 */
export const CallsQueryReq = Schema.Struct({
  project_id: ProjectId,
  filter: nullable(CallsFilter),
  limit: nullable(Schema.NonNegativeInt),
  offset: nullable(Schema.NonNegativeInt),
  sort_by: nullable(Schema.Array(SortBy)),
  query: nullable(Query),
  include_costs: nullable(Schema.Boolean),
  include_feedback: nullable(Schema.Boolean),
  include_storage_size: nullable(Schema.Boolean),
  include_total_storage_size: nullable(Schema.Boolean),
  include_usernames: nullable(Schema.Boolean),
  columns: nullable(Schema.Array(Schema.String)),
  expand_columns: nullable(Schema.Array(Schema.String)),
  return_expanded_column_values: nullable(Schema.Boolean)
}).annotations({ identifier: "CallsQueryReq" })
/** @see {@link CallsQueryReq} */
export type CallsQueryReq = typeof CallsQueryReq.Type

/** The body of `POST /calls/query_stats`. */
export const CallsQueryStatsReq = Schema.Struct({
  project_id: ProjectId,
  filter: nullable(CallsFilter),
  query: nullable(Query),
  limit: nullable(Schema.NonNegativeInt),
  include_total_storage_size: nullable(Schema.Boolean),
  expand_columns: nullable(Schema.Array(Schema.String))
}).annotations({ identifier: "CallsQueryStatsReq" })
/** @see {@link CallsQueryStatsReq} */
export type CallsQueryStatsReq = typeof CallsQueryStatsReq.Type

/** The result of `POST /calls/query_stats`: how many calls match. */
export const CallsQueryStatsRes = Schema.Struct({
  count: Schema.Int,
  has_more: Schema.optional(Schema.Boolean),
  total_storage_size_bytes: nullable(Schema.Int)
}).annotations({ identifier: "CallsQueryStatsRes" })
/** @see {@link CallsQueryStatsRes} */
export type CallsQueryStatsRes = typeof CallsQueryStatsRes.Type
