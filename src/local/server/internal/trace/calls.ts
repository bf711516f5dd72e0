/**
 * The calls of the trace surface over the store's `TraceCalls`: start, end, upsert_batch, read, update,
 * delete, stream_query and query_stats.
 *
 * - Ids: a UUID or an OpenTelemetry hex id; a start without an id gets a UUIDv7, without a trace id its
 *   parent's trace (when known) or a new one. A malformed id, project id or timestamp is 400 `{reason}`.
 * - An end may come before its start, in the same batch or an earlier one: it is stored and merged, and the
 *   call shows up once its start has arrived.
 * - Reads add the derived `summary.weave = {status, latency_ms, trace_name}`: `error` with an exception,
 *   `running` without an end, `descendant_error` when a live descendant has an exception (or the client's
 *   `summary.status_counts.error` is positive), else `success`; `latency_ms` from start to end;
 *   `trace_name` the display name, else the op's name (the `<name>` of an op ref).
 * - Queries: the filter's lists (op names with `:*` prefixes, trace, call, parent, thread, turn, user and run
 *   ids, roots only) are SQL; `input_refs`/`output_refs`, the query language, `sort_by` (default
 *   `started_at asc, id asc`), `offset` and `limit` are applied in TypeScript over those rows (see
 *   `query.ts`). `columns`, `expand_columns`, costs and feedback are not applied: full calls are answered.
 */
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type { JsonObject, JsonValue } from "../../../../api/Json.js"
import { jsonLinesContentType } from "../../../../api/TraceApi.js"
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
import { instant, isCallId, isProjectId, newId } from "./ids.js"
import { fieldPaths, invalidField, matches, sortCalls } from "./query.js"

const invalid = (reason: string) => Effect.fail(new InvalidRequest({ reason }))

const checkProject = (projectId: string) =>
  isProjectId(projectId) ? Effect.void : invalid(`Invalid project_id: expected "entity/project"`)

const checkId = (what: string, id: string | null | undefined) =>
  id === null || id === undefined || isCallId(id) ? Effect.void : invalid(`Invalid ${what}: ${id}`)

const timestamp = (what: string, value: string) => {
  const parsed = instant(value)
  return parsed === undefined ? invalid(`Invalid ${what}: ${value}`) : Effect.succeed(parsed)
}

/** A start as stored; `traces` holds the trace ids of the batch's earlier starts, for children without one. */
const toStart = (calls: TraceCalls.Service, start: CallStartInsert, traces: Map<string, string>) =>
  Effect.gen(function* () {
    yield* checkProject(start.project_id)
    yield* checkId("id", start.id)
    yield* checkId("trace_id", start.trace_id)
    yield* checkId("parent_id", start.parent_id)
    const started = yield* timestamp("started_at", start.started_at)
    const id = start.id ?? (yield* newId)
    const parentId = start.parent_id ?? null
    const inherited = (parent: string) =>
      traces.has(parent)
        ? Effect.succeed(traces.get(parent))
        : Effect.map(
            calls.read(start.project_id, parent),
            Option.map((p) => p.trace_id)
          ).pipe(Effect.map(Option.getOrUndefined), Effect.orDie)
    const traceId = start.trace_id ?? (parentId === null ? undefined : yield* inherited(parentId)) ?? (yield* newId)
    traces.set(id, traceId)
    const stored: TraceCalls.CallStart = {
      project_id: start.project_id,
      id,
      trace_id: traceId,
      parent_id: parentId,
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
    }
    return stored
  })

const toEnd = (end: CallEndInsert) =>
  Effect.gen(function* () {
    yield* checkProject(end.project_id)
    yield* checkId("id", end.id)
    const ended = yield* timestamp("ended_at", end.ended_at)
    const stored: TraceCalls.CallEnd = {
      project_id: end.project_id,
      id: end.id,
      ended_at: ended.iso,
      output: end.output === undefined ? Option.none() : Option.some(end.output),
      // The summary schema is an open record of JSON values.
      summary: end.summary as JsonObject,
      exception: end.exception ?? null,
      wb_run_step_end: end.wb_run_step_end ?? null
    }
    return stored
  })

const opShortName = (opName: string): string => {
  const match = /^weave:\/\/\/[^/]+\/[^/]+\/op\/([^:/]+)(?::[^/]*)?$/.exec(opName)
  return match?.[1] ?? opName
}

const errorCount = (summary: JsonObject | null): number => {
  const counts = summary?.status_counts
  if (counts === null || counts === undefined || typeof counts !== "object" || Array.isArray(counts)) return 0
  const error = (counts as JsonObject).error
  return typeof error === "number" ? error : 0
}

/** The calls as answered, with `summary.weave` derived (see the module header). */
const toWire = (calls: TraceCalls.Service, projectId: string, records: ReadonlyArray<TraceCalls.CallRecord>) =>
  Effect.gen(function* () {
    const lineage = yield* calls.lineage(
      projectId,
      records.map((record) => record.trace_id)
    )
    const parents = new Map(lineage.map((row) => [row.id, row.parent_id]))
    const withFailedDescendant = new Set<string>()
    for (const row of lineage) {
      if (!row.failed) continue
      let parent = row.parent_id
      while (parent !== null && !withFailedDescendant.has(parent)) {
        withFailedDescendant.add(parent)
        parent = parents.get(parent) ?? null
      }
    }
    return records.map((record): JsonObject => {
      const ended = record.ended_at === null ? undefined : instant(record.ended_at)
      const status =
        record.exception !== null
          ? "error"
          : record.ended_at === null
            ? "running"
            : withFailedDescendant.has(record.id) || errorCount(record.summary) > 0
              ? "descendant_error"
              : "success"
      const weave: JsonObject = {
        status,
        latency_ms: ended === undefined ? null : Math.round((ended.micros - record.started_key) / 1000),
        trace_name: record.display_name ?? opShortName(record.op_name)
      }
      const wire: Record<string, JsonValue> = {
        id: record.id,
        project_id: record.project_id,
        op_name: record.op_name,
        display_name: record.display_name,
        trace_id: record.trace_id,
        parent_id: record.parent_id,
        thread_id: record.thread_id,
        turn_id: record.turn_id,
        started_at: record.started_at,
        attributes: record.attributes,
        inputs: record.inputs,
        ended_at: record.ended_at,
        exception: record.exception,
        summary: { ...record.summary, weave },
        wb_user_id: record.wb_user_id,
        wb_run_id: record.wb_run_id,
        wb_run_step: record.wb_run_step,
        wb_run_step_end: record.wb_run_step_end,
        deleted_at: null
      }
      if (Option.isSome(record.output)) wire.output = record.output.value
      return wire
    })
  })

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

/** The calls a query selects, in order, before offset and limit. */
const select = (request: {
  readonly project_id: string
  readonly filter?: CallsFilter | null | undefined
  readonly query?: Query | null | undefined
  readonly sort_by?: ReadonlyArray<SortBy> | null | undefined
}) =>
  Effect.gen(function* () {
    const calls = yield* TraceCalls.TraceCalls
    yield* checkProject(request.project_id)
    const query = request.query ?? undefined
    const sortBy = request.sort_by ?? []
    for (const path of [...(query === undefined ? [] : fieldPaths(query.$expr)), ...sortBy.map((s) => s.field)]) {
      const reason = invalidField(path)
      if (reason !== undefined) return yield* Effect.fail(new InvalidField({ reason }))
    }
    const records = yield* Effect.orDie(calls.query(request.project_id, sqlFilter(request.filter)))
    const wire = yield* toWire(calls, request.project_id, records)
    const inputRefs = nonEmpty(request.filter?.input_refs)
    const outputRefs = nonEmpty(request.filter?.output_refs)
    const kept = wire.filter(
      (call) =>
        (inputRefs === undefined || holdsRef(call.inputs, inputRefs)) &&
        (outputRefs === undefined || holdsRef(call.output, outputRefs)) &&
        (query === undefined || matches(call, query.$expr))
    )
    return isDefaultOrder(sortBy) ? kept : sortCalls(kept, sortBy)
  })

const page = <A>(items: ReadonlyArray<A>, offset: number | null | undefined, limit: number | null | undefined) =>
  items.slice(offset ?? 0, limit === null || limit === undefined ? undefined : (offset ?? 0) + limit)

const LINES_PER_CHUNK = 1000

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

/** `POST /call/upsert_batch`: every item checked first, then all stored in one transaction. */
export const callUpsertBatch = ({ payload }: { readonly payload: CallCreateBatchReq }) =>
  Effect.gen(function* () {
    const calls = yield* TraceCalls.TraceCalls
    const traces = new Map<string, string>()
    const items = yield* Effect.forEach(payload.batch, (item) =>
      item.mode === "start"
        ? Effect.map(
            toStart(calls, item.req.start, traces),
            (start): TraceCalls.BatchItem => ({ mode: "start", start })
          )
        : Effect.map(toEnd(item.req.end), (end): TraceCalls.BatchItem => ({ mode: "end", end }))
    )
    yield* calls.batch(items)
    return {
      res: items.map((item) => (item.mode === "start" ? { id: item.start.id, trace_id: item.start.trace_id } : {}))
    }
  })

const decodeCall = Schema.decodeUnknown(Call)

/** `POST /call/read`: `{call: null}` when there is no such live call. */
export const callRead = ({ payload }: { readonly payload: CallReadReq }) =>
  Effect.gen(function* () {
    const calls = yield* TraceCalls.TraceCalls
    yield* checkProject(payload.project_id)
    const record = yield* Effect.orDie(calls.read(payload.project_id, payload.id))
    if (Option.isNone(record)) return { call: null }
    const [wire] = yield* toWire(calls, payload.project_id, [record.value])
    return { call: yield* Effect.orDie(decodeCall(wire)) }
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

/** `POST /calls/stream_query`: JSON lines of calls, streamed in chunks. */
export const callsStreamQuery = ({ payload }: { readonly payload: CallsQueryReq }) =>
  Effect.gen(function* () {
    const selected = page(yield* select(payload), payload.offset, payload.limit)
    const chunks = Stream.range(0, Math.ceil(selected.length / LINES_PER_CHUNK) - 1).pipe(
      Stream.map((i) =>
        selected
          .slice(i * LINES_PER_CHUNK, (i + 1) * LINES_PER_CHUNK)
          .map((call) => `${JSON.stringify(call)}\n`)
          .join("")
      ),
      Stream.encodeText
    )
    return selected.length === 0
      ? HttpServerResponse.text("", { contentType: jsonLinesContentType })
      : HttpServerResponse.stream(chunks, { contentType: jsonLinesContentType })
  })

/** `POST /calls/query_stats`: how many calls match (at most `limit`, when given). */
export const callsQueryStats = ({ payload }: { readonly payload: CallsQueryStatsReq }) =>
  Effect.map(select(payload), (selected) => ({
    count:
      payload.limit === null || payload.limit === undefined ? selected.length : Math.min(selected.length, payload.limit)
  }))
