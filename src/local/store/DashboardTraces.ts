/**
 * The read side of the dashboard's traces pages (`/v1/local/trace/...`, see `DashboardApi`): the traced
 * projects, a project's traces (root calls, latest first, a bounded page at a time), one trace as its calls
 * (without their inputs and outputs), and one call in full, each with the feedback on it. Read straight from
 * `trace_calls` and `trace_feedback`; nothing here writes.
 *
 * A call's `usage` is its own `summary.usage` when it records one (a chat completion's, or a parent whose
 * tracer added up its children's, as the workflow's does), else, in a trace, the sum of its children's.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { callRef } from "../../api/internal/callRef.js"
import type {
  CallDetail,
  CallFeedback,
  CallSummary,
  ModelUsage,
  TraceProject,
  TraceRoot,
  TraceTree,
  Usage
} from "./DashboardShapes.js"
import { orDieSql, parseJson } from "./internal/sql.js"
import { notFound, type StoreError } from "./StoreError.js"

/** Where a page of traces starts: after (older than) the root with this `started_key` and id. */
export interface RootCursor {
  readonly started_key: number
  readonly id: string
}

/** A page of a project's traces, latest first. */
export interface RootPage {
  readonly data: ReadonlyArray<TraceRoot>
  readonly next: RootCursor | null
}

/** The most calls of one trace answered at once. */
export const MAX_TREE = 5000

/** The most projects listed. */
export const MAX_PROJECTS = 200

const LIVE = "has_start = 1 AND deleted_at IS NULL"
const SUMMARY_COLUMNS =
  "id, trace_id, parent_id, op_name, display_name, started_at, started_key, ended_at, exception, summary"

/** A stored call as the summaries read it. */
interface SummaryRow
  extends Pick<
    CallSummary,
    "id" | "trace_id" | "parent_id" | "op_name" | "display_name" | "started_at" | "ended_at" | "exception"
  > {
  readonly started_key: number
  readonly summary: string | null
}

const count = (value: unknown): number => (typeof value === "number" && Number.isFinite(value) ? value : 0)

/** The `usage` of a stored summary, or null when it records none. */
const usageOf = (summary: unknown): Usage | null => {
  const usage = (summary as { readonly usage?: unknown } | null)?.usage
  if (typeof usage !== "object" || usage === null || Array.isArray(usage)) return null
  const out: Record<string, ModelUsage> = {}
  for (const [model, value] of Object.entries(usage)) {
    const v = (typeof value === "object" && value !== null ? value : {}) as Record<string, unknown>
    out[model] = {
      prompt_tokens: count(v.prompt_tokens ?? v.input_tokens),
      completion_tokens: count(v.completion_tokens ?? v.output_tokens),
      total_tokens: count(v.total_tokens),
      requests: count(v.requests)
    }
  }
  return Object.keys(out).length === 0 ? null : out
}

/** Two usages added up. */
export const addUsage = (a: Usage | null, b: Usage | null): Usage | null => {
  if (a === null) return b
  if (b === null) return a
  const out: Record<string, ModelUsage> = { ...a }
  for (const [model, u] of Object.entries(b)) {
    const s = out[model]
    out[model] =
      s === undefined
        ? u
        : {
            prompt_tokens: s.prompt_tokens + u.prompt_tokens,
            completion_tokens: s.completion_tokens + u.completion_tokens,
            total_tokens: s.total_tokens + u.total_tokens,
            requests: s.requests + u.requests
          }
  }
  return out
}

const summarize = (row: SummaryRow, feedback: ReadonlyArray<CallFeedback>): CallSummary => {
  const latency = row.ended_at === null ? null : Date.parse(row.ended_at) - Date.parse(row.started_at)
  return {
    id: row.id,
    trace_id: row.trace_id,
    parent_id: row.parent_id,
    op_name: row.op_name,
    display_name: row.display_name,
    started_at: row.started_at,
    ended_at: row.ended_at,
    latency_ms: latency === null || Number.isNaN(latency) ? null : latency,
    status: row.exception !== null ? "error" : row.ended_at === null ? "running" : "success",
    exception: row.exception,
    usage: usageOf(parseJson(row.summary)),
    feedback
  }
}

const CHUNK = 500

/** The feedback on the given calls, by call id, in creation order. */
const feedbackOn = (sql: SqlClient.SqlClient, projectId: string, ids: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const byCall = new Map<string, Array<CallFeedback>>()
    const prefix = callRef(projectId, "")
    for (let i = 0; i < ids.length; i += CHUNK) {
      const refs = ids.slice(i, i + CHUNK).map((id) => callRef(projectId, id))
      const rows = yield* sql<{
        readonly id: string
        readonly weave_ref: string
        readonly feedback_type: string
        readonly payload: string
        readonly created_at: string
      }>`SELECT id, weave_ref, feedback_type, payload, created_at FROM trace_feedback
        WHERE project_id = ${projectId} AND ${sql.in("weave_ref", refs)} ORDER BY created_at, rowid`
      for (const row of rows) {
        const id = row.weave_ref.slice(prefix.length)
        const list = byCall.get(id) ?? []
        list.push({
          id: row.id,
          feedback_type: row.feedback_type,
          payload: parseJson(row.payload),
          created_at: row.created_at
        })
        byCall.set(id, list)
      }
    }
    return byCall
  })

/** Every traced project (at most {@link MAX_PROJECTS}), the latest active first. */
export const projects: Effect.Effect<ReadonlyArray<TraceProject>, never, SqlClient.SqlClient> = Effect.gen(
  function* () {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<TraceProject>`SELECT project_id, COUNT(*) AS calls,
      SUM(CASE WHEN parent_id IS NULL THEN 1 ELSE 0 END) AS traces, MAX(started_at) AS latest_started_at
      FROM trace_calls WHERE ${sql.literal(LIVE)} GROUP BY project_id
      ORDER BY latest_started_at DESC LIMIT ${MAX_PROJECTS}`
  }
).pipe(orDieSql, Effect.withSpan("DashboardTraces.projects"))

/** A page of a project's traces (root calls), latest first: at most `limit`, older than `after`. */
export const roots = (
  projectId: string,
  options: { readonly limit: number; readonly after: RootCursor | undefined }
): Effect.Effect<RootPage, never, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const after = options.after
    const rows = yield* sql<SummaryRow>`SELECT ${sql.literal(SUMMARY_COLUMNS)} FROM trace_calls
      WHERE project_id = ${projectId} AND parent_id IS NULL AND ${sql.literal(LIVE)}
      ${
        after === undefined
          ? sql``
          : sql`AND (started_key < ${after.started_key} OR (started_key = ${after.started_key} AND id < ${after.id}))`
      }
      ORDER BY started_key DESC, id DESC LIMIT ${options.limit + 1}`
    const page = rows.slice(0, options.limit)
    const counts = new Map<string, number>()
    if (page.length > 0) {
      const traceIds = page.map((row) => row.trace_id)
      const found = yield* sql<{ readonly trace_id: string; readonly n: number }>`SELECT trace_id, COUNT(*) AS n
        FROM trace_calls WHERE project_id = ${projectId} AND ${sql.in("trace_id", traceIds)}
        AND ${sql.literal(LIVE)} GROUP BY trace_id`
      for (const row of found) counts.set(row.trace_id, row.n)
    }
    const feedback = yield* feedbackOn(
      sql,
      projectId,
      page.map((row) => row.id)
    )
    const last = page[page.length - 1]
    return {
      data: page.map((row) => ({
        ...summarize(row, feedback.get(row.id) ?? []),
        calls: counts.get(row.trace_id) ?? 1
      })),
      next: rows.length > options.limit && last !== undefined ? { started_key: last.started_key, id: last.id } : null
    }
  }).pipe(orDieSql, Effect.withSpan("DashboardTraces.roots"))

const requireCall = (sql: SqlClient.SqlClient, projectId: string, id: string) =>
  Effect.flatMap(
    sql<
      SummaryRow & {
        readonly attributes: string
        readonly inputs: string
        readonly output: string | null
      }
    >`SELECT ${sql.literal(SUMMARY_COLUMNS)}, attributes, inputs, output FROM trace_calls
      WHERE project_id = ${projectId} AND id = ${id} AND ${sql.literal(LIVE)}`,
    (rows) =>
      rows[0] === undefined
        ? Effect.fail(notFound(`call ${id} not found in project ${projectId}`))
        : Effect.succeed(rows[0])
  )

/**
 * The trace that holds the call `id`: its calls by start (at most {@link MAX_TREE}), each with its usage
 * (its own, else its children's added up) and feedback; `NotFound` naming the call when there is none.
 */
export const tree = (projectId: string, id: string): Effect.Effect<TraceTree, StoreError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const call = yield* requireCall(sql, projectId, id)
    const rows = yield* sql<SummaryRow>`SELECT ${sql.literal(SUMMARY_COLUMNS)} FROM trace_calls
      WHERE project_id = ${projectId} AND trace_id = ${call.trace_id} AND ${sql.literal(LIVE)}
      ORDER BY started_key, id LIMIT ${MAX_TREE + 1}`
    const kept = rows.slice(0, MAX_TREE)
    const feedback = yield* feedbackOn(
      sql,
      projectId,
      kept.map((row) => row.id)
    )
    const calls = kept.map((row) => summarize(row, feedback.get(row.id) ?? []))
    // A call without usage of its own gets its children's: children start after their parents, so going
    // backwards adds each call's (final) usage into its parent's.
    const usage = new Map(calls.map((c) => [c.id, c.usage]))
    const own = new Set(calls.filter((c) => c.usage !== null).map((c) => c.id))
    for (let i = calls.length - 1; i >= 0; i--) {
      const c = calls[i]!
      if (c.parent_id === null || own.has(c.parent_id) || !usage.has(c.parent_id)) continue
      usage.set(c.parent_id, addUsage(usage.get(c.parent_id) ?? null, usage.get(c.id) ?? null))
    }
    return {
      project_id: projectId,
      trace_id: call.trace_id,
      calls: calls.map((c) => ({ ...c, usage: usage.get(c.id) ?? null })),
      truncated: rows.length > MAX_TREE
    }
  }).pipe(orDieSql, Effect.withSpan("DashboardTraces.tree"))

/** One call in full, with the feedback on it; `NotFound` naming it when there is none. */
export const call = (projectId: string, id: string): Effect.Effect<CallDetail, StoreError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const row = yield* requireCall(sql, projectId, id)
    const feedback = yield* feedbackOn(sql, projectId, [id])
    return {
      ...summarize(row, feedback.get(id) ?? []),
      attributes: parseJson(row.attributes),
      inputs: parseJson(row.inputs),
      output: parseJson(row.output),
      summary: parseJson(row.summary)
    }
  }).pipe(orDieSql, Effect.withSpan("DashboardTraces.call"))
