/**
 * The calls of the trace surface over the store's `TraceCalls`: start, end, upsert_batch, read, update,
 * delete, stream_query and query_stats.
 *
 * - Ids: a UUID or an OpenTelemetry hex id; a start without an id gets a UUIDv7, without a trace id its
 *   parent's trace (when known) or a new one. A malformed id, project id or timestamp is 400 `{reason}`.
 * - An end may come before its start, in the same batch or an earlier one: it is stored and merged, and the
 *   call shows up once its start has arrived.
 * - Reads add the derived `summary.weave` (see `callWire.ts`).
 * - Queries: the filter's lists (op names with `:*` prefixes, trace, call, parent, thread, turn, user and run
 *   ids, roots only) are SQL; `input_refs`/`output_refs`, `expand_columns`, the query language, `sort_by`
 *   (default `started_at asc, id asc`), `offset` and `limit` are applied in TypeScript over those rows (see
 *   `query.ts`), in that order, so a query or sort may reach into expanded values.
 * - `expand_columns`: the object and op refs (extras included, so dataset rows too) at those paths are replaced
 *   by their values as `refs/read_batch` resolves them, an object gaining `_ref`; table and call refs, refs of
 *   other projects and anything else stay as they are (as the service does). With
 *   `return_expanded_column_values: false` the expansion serves the query and sort only.
 * - `columns`: only those fields and `id`, `project_id`, `trace_id`, `op_name`, `started_at` carry values; a
 *   dotted column selects its top-level field whole. Unknown columns are 403.
 * - `include_storage_size`/`include_total_storage_size`: sizes of the calls' stored JSON (see `callWire.ts`).
 * - `include_feedback` adds `summary.weave.feedback` (the call's feedback rows), `include_costs` (also on
 *   call/read) `summary.weave.costs` (its usage priced by the project's costs): see `TraceFeedback.decorateCalls`.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type { JsonObject, JsonValue } from "../../../../api/Json.js"
import {
  Call,
  type CallCreateBatchReq,
  type CallEndInsert,
  type CallEndReq,
  type CallReadReq,
  type CallStartInsert,
  type CallStartReq,
  type CallsDeleteReq,
  type CallsFilter,
  type CallsQueryReq,
  type CallsQueryStatsReq,
  type CallUpdateReq,
  type Query,
  type SortBy
} from "../../../../api/TraceCall.js"
import { InvalidField, InvalidRequest, NotFound } from "../../../../api/TraceError.js"
import * as TraceCalls from "../../../store/TraceCalls.js"
import * as TraceFeedback from "../../../store/TraceFeedback.js"
import type * as TraceObjects from "../../../store/TraceObjects.js"
import { callsWire, storageSize } from "./callWire.js"
import { checkProject, type Instant, instant, invalid, isCallId, isProjectId, newId } from "./ids.js"
import { jsonLinesResponse, jsonLinesText } from "./jsonLines.js"
import { fieldPaths, getField, invalidField, matches, page, setField, sortBy as sortByKeys } from "./query.js"
import { resolveObjectRef } from "./refs.js"

/** Why an id is refused, or undefined when it is absent or well formed. */
const badId = (name: string, id: string | null | undefined): string | undefined =>
  id === null || id === undefined || isCallId(id) ? undefined : `Invalid ${name}: ${id}`

/** The fields of a start that its checks and its stored row read, besides its JSON (objects or text). */
type StartFields = Omit<CallStartInsert, "attributes" | "inputs" | "otel_dump">

/** A start as stored, its JSON (`attributes`, `inputs`) as objects or as text (`J`). */
export type StoredStart<J> = Omit<TraceCalls.CallStart, "attributes" | "inputs"> & {
  readonly attributes: J
  readonly inputs: J
}

/**
 * Why a start is refused (a 400 `{reason}`), checked in order: the project, the ids, then the time; or its time,
 * read. Plain functions, so that a batch of thousands of calls is checked in one loop.
 */
const checkedStart = (start: StartFields): Instant | string => {
  if (!isProjectId(start.project_id)) return INVALID_PROJECT
  const bad = badId("id", start.id) ?? badId("trace_id", start.trace_id) ?? badId("parent_id", start.parent_id)
  return bad ?? instant(start.started_at) ?? `Invalid started_at: ${start.started_at}`
}

/** The fields of an end that its checks read. */
type EndFields = Pick<CallEndInsert, "project_id" | "id" | "ended_at">

/** Why an end is refused, checked as a start's is; or its time, read. */
export const checkedEnd = (end: EndFields): Instant | string => {
  if (!isProjectId(end.project_id)) return INVALID_PROJECT
  return badId("id", end.id) ?? instant(end.ended_at) ?? `Invalid ended_at: ${end.ended_at}`
}

const INVALID_PROJECT = `Invalid project_id: expected "entity/project"`

/** A start as stored, its id and trace id settled. */
const storedStart = <J>(
  start: StartFields & { readonly attributes: J; readonly inputs: J },
  id: string,
  traceId: string,
  started: Instant
): StoredStart<J> => ({
  project_id: start.project_id,
  id,
  trace_id: traceId,
  parent_id: start.parent_id ?? null,
  op_name: start.op_name,
  display_name: start.display_name ?? null,
  thread_id: start.thread_id ?? null,
  turn_id: start.turn_id ?? null,
  started_at: started.iso,
  started_key: started.micros,
  attributes: start.attributes,
  inputs: start.inputs,
  wb_user_id: start.wb_user_id ?? null,
  wb_run_id: start.wb_run_id ?? null,
  wb_run_step: start.wb_run_step ?? null
})

/**
 * A start as stored when its own fields settle it, or why it is refused, or `undefined` when it needs more (an id
 * made, or the trace id of a parent not in the batch read from the store: see {@link toStart}). `traces` holds
 * the trace ids of the batch's earlier starts, for children without one. Its JSON is carried as given (`J`:
 * objects, or their text).
 */
export const settledStart = <J>(
  start: StartFields & { readonly attributes: J; readonly inputs: J },
  traces: Map<string, string>
): StoredStart<J> | string | undefined => {
  const started = checkedStart(start)
  if (typeof started === "string") return started
  const parentId = start.parent_id ?? null
  const known = start.trace_id ?? (parentId === null ? undefined : traces.get(parentId))
  if (start.id === null || start.id === undefined || known === undefined) return undefined
  traces.set(start.id, known)
  return storedStart(start, start.id, known, started)
}

/** A start as stored (see {@link settledStart}), making its id and reading its parent's trace when needed. */
const toStart = (
  calls: TraceCalls.Service,
  start: CallStartInsert,
  traces: Map<string, string>
): Effect.Effect<TraceCalls.CallStart, InvalidRequest> => {
  const settled = settledStart(start, traces)
  if (typeof settled === "string") return Effect.fail(new InvalidRequest({ reason: settled }))
  if (settled !== undefined) return Effect.succeed(settled)
  const started = checkedStart(start) as Instant
  const parentId = start.parent_id ?? null
  return Effect.gen(function* () {
    const id = start.id ?? (yield* newId)
    const inherited = (parent: string) =>
      traces.has(parent)
        ? Effect.succeed(traces.get(parent))
        : Effect.map(
            calls.read(start.project_id, parent),
            Option.map((p) => p.trace_id)
          ).pipe(Effect.map(Option.getOrUndefined), Effect.orDie)
    const traceId = start.trace_id ?? (parentId === null ? undefined : yield* inherited(parentId)) ?? (yield* newId)
    traces.set(id, traceId)
    return storedStart(start, id, traceId, started)
  })
}

/** An end as stored, or why it is refused. */
const storedEnd = (end: CallEndInsert): TraceCalls.CallEnd | string => {
  const ended = checkedEnd(end)
  if (typeof ended === "string") return ended
  return {
    project_id: end.project_id,
    id: end.id,
    ended_at: ended.iso,
    output: end.output === undefined ? Option.none() : Option.some(end.output),
    // The summary schema is an open record of JSON values.
    summary: end.summary as JsonObject,
    exception: end.exception ?? null,
    wb_run_step_end: end.wb_run_step_end ?? null
  }
}

const toEnd = (end: CallEndInsert): Effect.Effect<TraceCalls.CallEnd, InvalidRequest> => {
  const stored = storedEnd(end)
  return typeof stored === "string" ? Effect.fail(new InvalidRequest({ reason: stored })) : Effect.succeed(stored)
}

/** Whether a JSON value holds a ref string equal to one of `refs` or below it (`<ref>/...`). */
const holdsRef = (value: JsonValue | undefined, refs: ReadonlyArray<string>): boolean => {
  if (typeof value === "string") return refs.some((ref) => value === ref || value.startsWith(`${ref}/`))
  if (value === null || value === undefined || typeof value !== "object") return false
  const items: ReadonlyArray<JsonValue> = Array.isArray(value) ? value : Object.values(value as JsonObject)
  return items.some((item) => holdsRef(item, refs))
}

const nonEmpty = (list: ReadonlyArray<string> | null | undefined) =>
  list === null || list === undefined || list.length === 0 ? undefined : list

const sqlFilter = (filter: CallsFilter | null | undefined): TraceCalls.CallFilter => {
  const opNames = filter?.op_names ?? []
  return {
    op_names: opNames.filter((name) => !name.endsWith(":*")),
    op_prefixes: opNames.filter((name) => name.endsWith(":*")).map((name) => name.slice(0, -1)),
    trace_ids: nonEmpty(filter?.trace_ids),
    call_ids: nonEmpty(filter?.call_ids),
    parent_ids: nonEmpty(filter?.parent_ids),
    thread_ids: nonEmpty(filter?.thread_ids),
    turn_ids: nonEmpty(filter?.turn_ids),
    wb_user_ids: nonEmpty(filter?.wb_user_ids),
    wb_run_ids: nonEmpty(filter?.wb_run_ids),
    trace_roots_only: filter?.trace_roots_only ?? undefined
  }
}

const isDefaultOrder = (sortBy: ReadonlyArray<SortBy>) =>
  sortBy.length === 0 || (sortBy.length === 1 && sortBy[0]?.field === "started_at" && sortBy[0].direction === "asc")

const isPlainObject = (value: JsonValue): value is JsonObject =>
  value !== null && typeof value === "object" && !Array.isArray(value)

/**
 * The calls with the object refs at the given paths replaced by their values, as the service expands them:
 * shallower paths first (so `inputs.model.prompt` reaches into an expanded `inputs.model`), an object value gaining
 * `_ref` (the ref) unless it has one; each distinct ref is resolved once. The calls given are not changed.
 */
const expandColumns = (projectId: string, calls: ReadonlyArray<JsonObject>, columns: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const views = calls.map((call) => structuredClone(call) as JsonObject)
    const resolved = new Map<string, Option.Option<JsonValue>>()
    const depths = [...new Set(columns.map((column) => column.split(".").length))].sort((a, b) => a - b)
    for (const depth of depths) {
      const level = columns.filter((column) => column.split(".").length === depth)
      for (const view of views) {
        for (const column of level) {
          const ref = getField(view, column)
          if (typeof ref !== "string" || !ref.startsWith("weave:///")) continue
          let value = resolved.get(ref)
          if (value === undefined) {
            value = yield* resolveObjectRef(projectId, ref)
            resolved.set(ref, value)
          }
          if (Option.isNone(value)) continue
          const copy = structuredClone(value.value)
          setField(view, column, isPlainObject(copy) && !Object.hasOwn(copy, "_ref") ? { ...copy, _ref: ref } : copy)
        }
      }
    }
    return views
  })

/** A selected call as stored (`call`) and as queries see it, with its `expand_columns` expanded (`view`). */
interface Selected {
  readonly call: JsonObject
  readonly view: JsonObject
}

/** What a calls query asks for, beyond its project. */
interface SelectRequest {
  readonly project_id: string
  readonly filter?: CallsFilter | null | undefined
  readonly query?: Query | null | undefined
  readonly sort_by?: ReadonlyArray<SortBy> | null | undefined
  readonly expand_columns?: ReadonlyArray<string> | null | undefined
}

/** The project and the fields a query and sort name, checked before anything is read. */
const checkSelect = (request: SelectRequest) =>
  Effect.gen(function* () {
    yield* checkProject(request.project_id)
    const query = request.query ?? undefined
    for (const path of [
      ...(query === undefined ? [] : fieldPaths(query.$expr)),
      ...(request.sort_by ?? []).map((s) => s.field)
    ]) {
      const reason = invalidField(path)
      if (reason !== undefined) return yield* Effect.fail(new InvalidField({ reason }))
    }
  })

/**
 * Of some stored calls (in the query's SQL order), those the query keeps, as answered and as queries see them:
 * the derived fields, the ref filters, `expand_columns` and the query language. Each call is judged on its own,
 * so the calls of a query may go through this page by page.
 */
const selectRecords = (request: SelectRequest, records: ReadonlyArray<TraceCalls.CallRecord>) =>
  Effect.gen(function* () {
    const calls = yield* TraceCalls.TraceCalls
    const wire = yield* callsWire(calls, request.project_id, records)
    const inputRefs = nonEmpty(request.filter?.input_refs)
    const outputRefs = nonEmpty(request.filter?.output_refs)
    const byRefs = wire.filter(
      (call) =>
        (inputRefs === undefined || holdsRef(call.inputs, inputRefs)) &&
        (outputRefs === undefined || holdsRef(call.output, outputRefs))
    )
    const expand = nonEmpty(request.expand_columns)
    const views = expand === undefined ? byRefs : yield* expandColumns(request.project_id, byRefs, expand)
    const selected = byRefs.map((call, i): Selected => ({ call, view: views[i] ?? call }))
    const query = request.query ?? undefined
    return query === undefined ? selected : selected.filter((item) => matches(item.view, query.$expr))
  })

/** The calls a query selects, in order, before offset and limit. */
const select = (request: SelectRequest) =>
  Effect.gen(function* () {
    const calls = yield* TraceCalls.TraceCalls
    yield* checkSelect(request)
    const records = yield* Effect.orDie(calls.query(request.project_id, sqlFilter(request.filter)))
    const kept = yield* selectRecords(request, records)
    const sortBy = request.sort_by ?? []
    return isDefaultOrder(sortBy) ? kept : sortByKeys(kept, (item) => item.view, sortBy)
  })

/** Calls read from the store per page of a streamed query in the default order. */
const PAGE = 1000

/**
 * The calls a query selects in the default order, as a stream read from the store page by page (so the first
 * lines leave before the last calls are read, and memory holds a page, not the project), offset and limit
 * applied.
 */
const selectPaged = (request: SelectRequest, offset: number, limit: number | undefined) =>
  Stream.unwrap(
    Effect.gen(function* () {
      const calls = yield* TraceCalls.TraceCalls
      const filter = sqlFilter(request.filter)
      const context = yield* Effect.context<TraceCalls.TraceCalls | TraceObjects.TraceObjects>()
      const pages = Stream.paginateEffect(undefined as TraceCalls.PageCursor | undefined, (after) =>
        Effect.map(Effect.orDie(calls.queryPage(request.project_id, filter, after, PAGE)), (records) => {
          const last = records[records.length - 1]
          const next =
            records.length < PAGE || last === undefined
              ? Option.none()
              : Option.some({ started_key: last.started_key, id: last.id })
          return [records, next] as const
        })
      )
      const selected = pages.pipe(
        Stream.mapEffect((records) => Effect.provide(selectRecords(request, records), context)),
        Stream.flattenIterables,
        Stream.drop(offset)
      )
      return limit === undefined ? selected : Stream.take(selected, limit)
    })
  )

/** The fields the service answers whatever `columns` names. */
const REQUIRED_COLUMNS = ["id", "project_id", "trace_id", "op_name", "started_at"]

/**
 * A call with only the named columns (and the required ones); a dotted column (`inputs.x`) selects its top-level
 * field whole, as the service does. The others are answered empty: `{}` for `attributes` and `inputs`, no
 * `output`, null for the rest.
 */
const keepColumns = (call: JsonObject, columns: ReadonlyArray<string>): JsonObject => {
  const kept = new Set([...REQUIRED_COLUMNS, ...columns.map((column) => column.split(".")[0] ?? column)])
  const out: Record<string, JsonValue> = {}
  for (const [key, value] of Object.entries(call)) {
    if (kept.has(key)) out[key] = value
    else if (key === "attributes" || key === "inputs") out[key] = {}
    else if (key !== "output") out[key] = null
  }
  return out
}

/** `storage_size_bytes` of the calls, and `total_storage_size_bytes` (the sum over its trace) of trace roots. */
const storageSizes = (projectId: string, calls: ReadonlyArray<JsonObject>) =>
  Effect.gen(function* () {
    const store = yield* TraceCalls.TraceCalls
    const traceIds = [...new Set(calls.flatMap((call) => (typeof call.trace_id === "string" ? [call.trace_id] : [])))]
    const records = traceIds.length === 0 ? [] : yield* Effect.orDie(store.query(projectId, { trace_ids: traceIds }))
    const own = new Map<string, number>()
    const perTrace = new Map<string, number>()
    for (const record of records) {
      const size = storageSize(record)
      own.set(record.id, size)
      perTrace.set(record.trace_id, (perTrace.get(record.trace_id) ?? 0) + size)
    }
    return {
      own: (call: JsonObject) => (typeof call.id === "string" ? (own.get(call.id) ?? null) : null),
      total: (call: JsonObject) =>
        call.parent_id === null && typeof call.trace_id === "string" ? (perTrace.get(call.trace_id) ?? null) : null
    }
  })

/** `POST /call/start` */
export const callStart = ({ payload }: { readonly payload: CallStartReq }) =>
  Effect.gen(function* () {
    const calls = yield* TraceCalls.TraceCalls
    const start = yield* toStart(calls, payload.start, new Map())
    yield* calls.batch([{ mode: "start", start }])
    return { id: start.id, trace_id: start.trace_id }
  })

/** `POST /call/end` */
export const callEnd = ({ payload }: { readonly payload: CallEndReq }) =>
  Effect.gen(function* () {
    const calls = yield* TraceCalls.TraceCalls
    const end = yield* toEnd(payload.end)
    yield* calls.batch([{ mode: "end", end }])
    return {}
  })

/**
 * `POST /call/upsert_batch`: every item checked first (in order: the first refused one is the answer), then all
 * stored in one transaction. The items are checked in a plain loop; only a start that needs an id made or its
 * parent's trace read from the store goes through an effect. The route reads the body's text first
 * (`upsertBatch.ts`) and comes here with the decoded payload when it does not store the batch from the text.
 */
export const callUpsertBatch = ({ payload }: { readonly payload: CallCreateBatchReq }) =>
  Effect.gen(function* () {
    const calls = yield* TraceCalls.TraceCalls
    const traces = new Map<string, string>()
    const batch = payload.batch
    const items: Array<TraceCalls.BatchItem> = new Array(batch.length)
    const res: Array<{ readonly id: string; readonly trace_id: string } | Record<string, never>> = new Array(
      batch.length
    )
    for (let i = 0; i < batch.length; i++) {
      const item = batch[i]!
      if (item.mode === "start") {
        // Settled in the loop; an effect only for a start that needs one.
        const settled = settledStart(item.req.start, traces)
        if (typeof settled === "string") return yield* invalid(settled)
        const start = settled ?? (yield* toStart(calls, item.req.start, traces))
        items[i] = { mode: "start", start }
        res[i] = { id: start.id, trace_id: start.trace_id }
      } else {
        const end = storedEnd(item.req.end)
        if (typeof end === "string") return yield* invalid(end)
        items[i] = { mode: "end", end }
        res[i] = {}
      }
    }
    yield* calls.batch(items)
    return { res }
  })

const decodeCall = Schema.decodeUnknown(Call)

/** `POST /call/read`: `{call: null}` when there is no such live call. */
export const callRead = ({ payload }: { readonly payload: CallReadReq }) =>
  Effect.gen(function* () {
    const calls = yield* TraceCalls.TraceCalls
    yield* checkProject(payload.project_id)
    const record = yield* Effect.orDie(calls.read(payload.project_id, payload.id))
    if (Option.isNone(record)) return { call: null }
    const wire = yield* callsWire(calls, payload.project_id, [record.value])
    const [decorated] = yield* TraceFeedback.decorateCalls(payload.project_id, wire, {
      costs: payload.include_costs === true
    })
    return { call: yield* Effect.orDie(decodeCall(decorated)) }
  })

/** `POST /call/update`: sets the display name; 404 without the call, 400 without a name. */
export const callUpdate = ({ payload }: { readonly payload: CallUpdateReq }) =>
  Effect.gen(function* () {
    const calls = yield* TraceCalls.TraceCalls
    yield* checkProject(payload.project_id)
    const name = payload.display_name
    if (name === null || name === undefined) return yield* invalid("Nothing to update: display_name is required")
    const found = yield* calls.setDisplayName(payload.project_id, payload.call_id, name)
    if (!found) return yield* Effect.fail(new NotFound({ reason: `Call not found: ${payload.call_id}` }))
    return {}
  })

/** `POST /calls/delete`: soft, with every descendant. */
export const callsDelete = ({ payload }: { readonly payload: CallsDeleteReq }) =>
  Effect.gen(function* () {
    const calls = yield* TraceCalls.TraceCalls
    yield* checkProject(payload.project_id)
    const now = new Date(yield* Clock.currentTimeMillis).toISOString()
    return { num_deleted: yield* calls.softDelete(payload.project_id, payload.call_ids, now) }
  })

/**
 * The calls of a stream_query page as answered: feedback and costs added when asked for, `columns` kept, then
 * the storage sizes asked for added.
 */
const answer = (payload: CallsQueryReq, columns: ReadonlyArray<string> | undefined, items: Iterable<Selected>) =>
  Effect.gen(function* () {
    const expanded = payload.return_expanded_column_values !== false
    const calls = Array.from(items, (item) => (expanded ? item.view : item.call))
    const decorated = yield* TraceFeedback.decorateCalls(payload.project_id, calls, {
      feedback: payload.include_feedback === true,
      costs: payload.include_costs === true
    })
    const answered = columns === undefined ? decorated : decorated.map((call) => keepColumns(call, columns))
    const withSizes = payload.include_storage_size === true || payload.include_total_storage_size === true
    const sizes = withSizes ? yield* storageSizes(payload.project_id, answered) : undefined
    return sizes === undefined
      ? answered
      : answered.map(
          (call): JsonObject => ({
            ...call,
            ...(payload.include_storage_size === true ? { storage_size_bytes: sizes.own(call) } : {}),
            ...(payload.include_total_storage_size === true ? { total_storage_size_bytes: sizes.total(call) } : {})
          })
        )
  })

/**
 * `POST /calls/stream_query`: JSON lines of calls; `expand_columns` expanded (unless
 * `return_expanded_column_values` is false), then `columns` kept, then the storage sizes asked for added. In the
 * default order the calls stream from the store a page at a time; another `sort_by` needs them all first.
 */
export const callsStreamQuery = ({ payload }: { readonly payload: CallsQueryReq }) =>
  Effect.gen(function* () {
    const columns = nonEmpty(payload.columns)
    for (const column of columns ?? []) {
      const reason = invalidField(column)
      if (reason !== undefined) return yield* Effect.fail(new InvalidField({ reason }))
    }
    if (!isDefaultOrder(payload.sort_by ?? [])) {
      const selected = page(yield* select(payload), payload.offset, payload.limit)
      return jsonLinesResponse(yield* answer(payload, columns, selected))
    }
    yield* checkSelect(payload)
    const context = yield* Effect.context<
      TraceCalls.TraceCalls | TraceObjects.TraceObjects | TraceFeedback.TraceFeedback
    >()
    const lines = selectPaged(payload, payload.offset ?? 0, payload.limit ?? undefined).pipe(
      Stream.grouped(PAGE),
      Stream.mapEffect((items) =>
        Effect.map(answer(payload, columns, items), (rows) => rows.map((row) => `${JSON.stringify(row)}\n`).join(""))
      ),
      Stream.provideContext(context)
    )
    return jsonLinesText(lines)
  })

/**
 * `POST /calls/query_stats`: how many calls match, at most `limit` when given (the service counts the rows of
 * the limited query); with `include_total_storage_size`, the sum of `total_storage_size_bytes` over the
 * matching trace roots among them.
 */
export const callsQueryStats = ({ payload }: { readonly payload: CallsQueryStatsReq }) =>
  Effect.gen(function* () {
    const selected = page(yield* select(payload), 0, payload.limit)
    if (payload.include_total_storage_size !== true) return { count: selected.length }
    const calls = selected.map((item) => item.call)
    const sizes = yield* storageSizes(payload.project_id, calls)
    const total = calls.reduce((sum, call) => sum + (sizes.total(call) ?? 0), 0)
    return { count: selected.length, total_storage_size_bytes: total }
  })
