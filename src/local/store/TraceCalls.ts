/**
 * Calls of the trace surface, stored in `trace_calls`: starts and ends upserted by `(project_id, id)`, in
 * any order (an end that arrives before its start is kept and merged when the start comes), soft deletion
 * with every descendant by `parent_id`, and the SQL-expressible part of a calls query (project, the id lists,
 * op names with prefixes, roots only). Ids, timestamps and what is derived on reads are the server's
 * business (`server/internal/trace/`); this module stores what it is given.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { Fragment } from "@effect/sql/Statement"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { JsonObject, JsonValue } from "../../api/Json.js"
import { json, orDieSql } from "./internal/sql.js"
import { corrupt, type StoreError } from "./StoreError.js"

/** A call's start, as stored. `started_key` orders calls: microseconds since the epoch. */
export interface CallStart {
  readonly project_id: string
  readonly id: string
  readonly trace_id: string
  readonly parent_id: string | null
  readonly op_name: string
  readonly display_name: string | null
  readonly thread_id: string | null
  readonly turn_id: string | null
  readonly started_at: string
  readonly started_key: number
  readonly attributes: JsonObject
  readonly inputs: JsonObject
  readonly wb_user_id: string | null
  readonly wb_run_id: string | null
  readonly wb_run_step: number | null
}

/** A call's end, as stored. `output` is `Option.none()` when the end carries none. */
export interface CallEnd {
  readonly project_id: string
  readonly id: string
  readonly ended_at: string
  readonly output: Option.Option<JsonValue>
  readonly summary: JsonObject
  readonly exception: string | null
  readonly wb_run_step_end: number | null
}

/** One item of a batch: a start or an end. */
export type BatchItem =
  | { readonly mode: "start"; readonly start: CallStart }
  | { readonly mode: "end"; readonly end: CallEnd }

/**
 * A call's start with its JSON columns as JSON text: what {@link Service.batch} stores for a {@link CallStart}
 * is `JSON.stringify` of its `attributes` and `inputs`; a caller that holds that text already passes it as it is.
 */
export interface CallStartText extends Omit<CallStart, "attributes" | "inputs"> {
  readonly attributes: string
  readonly inputs: string
}

/** A call's end with its JSON columns as JSON text (see {@link CallStartText}); `output` null when it has none. */
export interface CallEndText extends Omit<CallEnd, "output" | "summary"> {
  readonly output: string | null
  readonly summary: string
}

/** One item of a batch with its JSON columns as text: a start or an end. */
export type BatchTextItem =
  | { readonly mode: "start"; readonly start: CallStartText }
  | { readonly mode: "end"; readonly end: CallEndText }

/** A stored, started call (an end not yet arrived leaves the end fields null). */
export interface CallRecord extends CallStart {
  readonly ended_at: string | null
  readonly output: Option.Option<JsonValue>
  readonly summary: JsonObject | null
  readonly exception: string | null
  readonly wb_run_step_end: number | null
  readonly deleted_at: string | null
}

/**
 * The SQL part of a calls query; lists are ORed within a key and keys ANDed; an empty or absent list does not
 * constrain. `op_prefixes` match op names by prefix.
 */
export interface CallFilter {
  readonly op_names?: ReadonlyArray<string> | undefined
  readonly op_prefixes?: ReadonlyArray<string> | undefined
  readonly trace_ids?: ReadonlyArray<string> | undefined
  readonly call_ids?: ReadonlyArray<string> | undefined
  readonly parent_ids?: ReadonlyArray<string> | undefined
  readonly thread_ids?: ReadonlyArray<string> | undefined
  readonly turn_ids?: ReadonlyArray<string> | undefined
  readonly wb_user_ids?: ReadonlyArray<string> | undefined
  readonly wb_run_ids?: ReadonlyArray<string> | undefined
  readonly trace_roots_only?: boolean | undefined
}

/** Where a page of a calls query starts: after the call with this `started_key` and id. */
export interface PageCursor {
  readonly started_key: number
  readonly id: string
}

/** A call's place in its trace, for deriving `descendant_error`: its parent and whether it failed. */
export interface Lineage {
  readonly id: string
  readonly parent_id: string | null
  readonly failed: boolean
}

/** The trace calls repository. */
export interface Service {
  /** Upserts starts and ends in order, in one transaction. */
  readonly batch: (items: ReadonlyArray<BatchItem>) => Effect.Effect<void>
  /** {@link Service.batch} for items whose JSON columns are JSON text already (stored as given). */
  readonly batchText: (items: ReadonlyArray<BatchTextItem>) => Effect.Effect<void>
  /** A live (not deleted), started call. */
  readonly read: (projectId: string, id: string) => Effect.Effect<Option.Option<CallRecord>, StoreError>
  /** The live, started calls of a project matching the filter, by `started_key` then id. */
  readonly query: (projectId: string, filter: CallFilter) => Effect.Effect<ReadonlyArray<CallRecord>, StoreError>
  /**
   * One page of {@link Service.query}: at most `limit` calls, those after `after` (a call's `started_key` and
   * id) in the query's order; a caller pages through a large query without holding all of it.
   */
  readonly queryPage: (
    projectId: string,
    filter: CallFilter,
    after: PageCursor | undefined,
    limit: number
  ) => Effect.Effect<ReadonlyArray<CallRecord>, StoreError>
  /** The live, started calls of the given traces: id, parent and whether each has an exception. */
  readonly lineage: (projectId: string, traceIds: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<Lineage>>
  /** Sets a live call's display name; false when there is no such call. */
  readonly setDisplayName: (projectId: string, id: string, name: string) => Effect.Effect<boolean>
  /** Soft-deletes the live calls and every live descendant; how many were deleted. */
  readonly softDelete: (projectId: string, ids: ReadonlyArray<string>, now: string) => Effect.Effect<number>
}

/** The trace calls repository service. */
export class TraceCalls extends Context.Tag("effect-rl/local/store/TraceCalls")<TraceCalls, Service>() {}

interface Row {
  readonly project_id: string
  readonly id: string
  readonly trace_id: string
  readonly parent_id: string | null
  readonly op_name: string
  readonly display_name: string | null
  readonly thread_id: string | null
  readonly turn_id: string | null
  readonly started_at: string
  readonly started_key: number
  readonly attributes: string
  readonly inputs: string
  readonly ended_at: string | null
  readonly output: string | null
  readonly summary: string | null
  readonly exception: string | null
  readonly wb_user_id: string | null
  readonly wb_run_id: string | null
  readonly wb_run_step: number | null
  readonly wb_run_step_end: number | null
  readonly deleted_at: string | null
}

const columns =
  "project_id, id, trace_id, parent_id, op_name, display_name, thread_id, turn_id, started_at, started_key, " +
  "attributes, inputs, ended_at, output, summary, exception, wb_user_id, wb_run_id, wb_run_step, " +
  "wb_run_step_end, deleted_at"

const parse = (text: string, what: string): JsonValue => {
  try {
    return JSON.parse(text) as JsonValue
  } catch {
    throw corrupt(`the ${what} of a stored call is not JSON`)
  }
}

const parseObject = (text: string, what: string): JsonObject => {
  const value = parse(text, what)
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw corrupt(`the ${what} of a stored call is not a JSON object`)
  }
  return value as JsonObject
}

const toRecord = (row: Row): CallRecord => ({
  ...row,
  attributes: parseObject(row.attributes, "attributes"),
  inputs: parseObject(row.inputs, "inputs"),
  output: row.output === null ? Option.none() : Option.some(parse(row.output, "output")),
  summary: row.summary === null ? null : parseObject(row.summary, "summary")
})

const toRecords = (rows: ReadonlyArray<Row>): Effect.Effect<ReadonlyArray<CallRecord>, StoreError> =>
  Effect.try({
    try: () => rows.map(toRecord),
    catch: (error) => (error instanceof Error ? corrupt(error.message) : (error as StoreError))
  })

/** The most rows or list items bound in one statement (SQLite limits the number of variables). */
const CHUNK = 500

const chunks = <A>(items: ReadonlyArray<A>): ReadonlyArray<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += CHUNK) out.push(items.slice(i, i + CHUNK))
  return out
}

/** `LIKE` with `\` as the escape character: the prefix's own `%`, `_` and `\` match literally. */
const likePrefix = (prefix: string): string => `${prefix.replace(/[\\%_]/g, (c) => `\\${c}`)}%`

/** Builds the repository over the `SqlClient`. */
export const make: Effect.Effect<Service, never, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient

  // A start sets only the start's columns and an end only the end's, so starts and ends commute: a batch is
  // stored as multi-row upserts of its starts, then of its ends, each in the batch's order. The rows carry their
  // JSON columns as text.
  const upsertStarts = (rows: ReadonlyArray<Record<string, unknown>>) =>
    sql`INSERT INTO trace_calls ${sql.insert(rows)} ON CONFLICT (project_id, id) DO UPDATE SET has_start = 1,
      trace_id = excluded.trace_id, parent_id = excluded.parent_id, op_name = excluded.op_name,
      display_name = excluded.display_name, thread_id = excluded.thread_id, turn_id = excluded.turn_id,
      started_at = excluded.started_at, started_key = excluded.started_key, attributes = excluded.attributes,
      inputs = excluded.inputs, wb_user_id = excluded.wb_user_id, wb_run_id = excluded.wb_run_id,
      wb_run_step = excluded.wb_run_step`

  const upsertEnds = (rows: ReadonlyArray<Record<string, unknown>>) =>
    sql`INSERT INTO trace_calls ${sql.insert(rows)} ON CONFLICT (project_id, id) DO UPDATE SET
      ended_at = excluded.ended_at, output = excluded.output, summary = excluded.summary,
      exception = excluded.exception, wb_run_step_end = excluded.wb_run_step_end`

  const startRow = (start: CallStartText) => ({
    project_id: start.project_id,
    id: start.id,
    trace_id: start.trace_id,
    parent_id: start.parent_id,
    op_name: start.op_name,
    display_name: start.display_name,
    thread_id: start.thread_id,
    turn_id: start.turn_id,
    started_at: start.started_at,
    started_key: start.started_key,
    attributes: start.attributes,
    inputs: start.inputs,
    wb_user_id: start.wb_user_id,
    wb_run_id: start.wb_run_id,
    wb_run_step: start.wb_run_step,
    has_start: 1
  })

  const endRow = (end: CallEndText) => ({
    project_id: end.project_id,
    id: end.id,
    has_start: 0,
    ended_at: end.ended_at,
    output: end.output,
    summary: end.summary,
    exception: end.exception,
    wb_run_step_end: end.wb_run_step_end
  })

  /** The rows of a batch's starts and of its ends, in order, stored in one transaction. */
  const store = (starts: ReadonlyArray<Record<string, unknown>>, ends: ReadonlyArray<Record<string, unknown>>) =>
    Effect.gen(function* () {
      for (const part of chunks(starts)) yield* upsertStarts(part)
      for (const part of chunks(ends)) yield* upsertEnds(part)
    }).pipe(sql.withTransaction, Effect.orDie, Effect.withSpan("TraceCalls.batch"))

  const batch = (items: ReadonlyArray<BatchItem>) =>
    Effect.suspend(() => {
      const starts: Array<Record<string, unknown>> = []
      const ends: Array<Record<string, unknown>> = []
      for (const item of items) {
        if (item.mode === "start") {
          const start = item.start
          starts.push({ ...start, has_start: 1, attributes: json(start.attributes), inputs: json(start.inputs) })
        } else {
          const end = item.end
          ends.push({
            project_id: end.project_id,
            id: end.id,
            has_start: 0,
            ended_at: end.ended_at,
            output: Option.match(end.output, { onNone: () => null, onSome: json }),
            summary: json(end.summary),
            exception: end.exception,
            wb_run_step_end: end.wb_run_step_end
          })
        }
      }
      return store(starts, ends)
    })

  const batchText = (items: ReadonlyArray<BatchTextItem>) =>
    Effect.suspend(() => {
      const starts: Array<Record<string, unknown>> = []
      const ends: Array<Record<string, unknown>> = []
      for (const item of items) {
        if (item.mode === "start") starts.push(startRow(item.start))
        else ends.push(endRow(item.end))
      }
      return store(starts, ends)
    })

  const read = (projectId: string, id: string) =>
    sql<Row>`SELECT ${sql.literal(columns)} FROM trace_calls
      WHERE project_id = ${projectId} AND id = ${id} AND has_start = 1 AND deleted_at IS NULL`.pipe(
      Effect.flatMap(toRecords),
      Effect.map((records) => Option.fromNullable(records[0])),
      orDieSql
    )

  const filterClauses = (filter: CallFilter): Array<Fragment> => {
    const clauses: Array<Fragment> = []
    const list = (column: string, values: ReadonlyArray<string> | undefined) => {
      if (values !== undefined && values.length > 0) clauses.push(sql.in(column, values))
    }
    const exact = filter.op_names ?? []
    const prefixes = filter.op_prefixes ?? []
    if (exact.length > 0 || prefixes.length > 0) {
      clauses.push(
        sql.or([
          ...(exact.length > 0 ? [sql.in("op_name", exact)] : []),
          ...prefixes.map((prefix) => sql`op_name LIKE ${likePrefix(prefix)} ESCAPE '\\'`)
        ])
      )
    }
    list("trace_id", filter.trace_ids)
    list("id", filter.call_ids)
    list("parent_id", filter.parent_ids)
    list("thread_id", filter.thread_ids)
    list("turn_id", filter.turn_ids)
    list("wb_user_id", filter.wb_user_ids)
    list("wb_run_id", filter.wb_run_ids)
    if (filter.trace_roots_only === true) clauses.push(sql`parent_id IS NULL`)
    return clauses
  }

  const query = (projectId: string, filter: CallFilter) =>
    sql<Row>`SELECT ${sql.literal(columns)} FROM trace_calls
      WHERE ${sql.and([
        sql`project_id = ${projectId}`,
        sql`has_start = 1`,
        sql`deleted_at IS NULL`,
        ...filterClauses(filter)
      ])}
      ORDER BY started_key, id`.pipe(Effect.flatMap(toRecords), orDieSql, Effect.withSpan("TraceCalls.query"))

  const queryPage = (projectId: string, filter: CallFilter, after: PageCursor | undefined, limit: number) =>
    sql<Row>`SELECT ${sql.literal(columns)} FROM trace_calls
      WHERE ${sql.and([
        sql`project_id = ${projectId}`,
        sql`has_start = 1`,
        sql`deleted_at IS NULL`,
        ...(after === undefined
          ? []
          : [sql`(started_key > ${after.started_key} OR (started_key = ${after.started_key} AND id > ${after.id}))`]),
        ...filterClauses(filter)
      ])}
      ORDER BY started_key, id LIMIT ${limit}`.pipe(
      Effect.flatMap(toRecords),
      orDieSql,
      Effect.withSpan("TraceCalls.queryPage")
    )

  const lineage = (projectId: string, traceIds: ReadonlyArray<string>) =>
    Effect.forEach(
      chunks([...new Set(traceIds)]),
      (ids) =>
        sql<{ readonly id: string; readonly parent_id: string | null; readonly failed: number }>`
          SELECT id, parent_id, exception IS NOT NULL AS failed FROM trace_calls
          WHERE project_id = ${projectId} AND ${sql.in("trace_id", ids)} AND has_start = 1
            AND deleted_at IS NULL`,
      { concurrency: 1 }
    ).pipe(
      Effect.map((parts) => parts.flat().map((row) => ({ ...row, failed: row.failed !== 0 }))),
      Effect.orDie
    )

  const setDisplayName = (projectId: string, id: string, name: string) =>
    sql<{ readonly id: string }>`UPDATE trace_calls SET display_name = ${name}
      WHERE project_id = ${projectId} AND id = ${id} AND has_start = 1 AND deleted_at IS NULL
      RETURNING id`.pipe(
      Effect.map((rows) => rows.length > 0),
      Effect.orDie
    )

  const softDelete = (projectId: string, ids: ReadonlyArray<string>, now: string) =>
    Effect.forEach(
      chunks([...new Set(ids)]),
      (part) =>
        sql<{ readonly id: string }>`WITH RECURSIVE doomed(id) AS (
            SELECT id FROM trace_calls WHERE project_id = ${projectId} AND ${sql.in("id", part)}
            UNION
            SELECT c.id FROM trace_calls c JOIN doomed d ON c.parent_id = d.id WHERE c.project_id = ${projectId}
          )
          UPDATE trace_calls SET deleted_at = ${now}
          WHERE project_id = ${projectId} AND deleted_at IS NULL AND id IN (SELECT id FROM doomed)
          RETURNING id`,
      { concurrency: 1 }
    ).pipe(
      Effect.map((parts) => parts.reduce((n, rows) => n + rows.length, 0)),
      sql.withTransaction,
      Effect.orDie,
      Effect.withSpan("TraceCalls.softDelete")
    )

  return { batch, batchText, read, query, queryPage, lineage, setDisplayName, softDelete }
})

/** The trace calls repository layer. */
export const layer: Layer.Layer<TraceCalls, never, SqlClient.SqlClient> = Layer.effect(TraceCalls, make)
