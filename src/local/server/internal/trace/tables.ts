/**
 * The tables of the trace surface over the store's `TraceObjects`: table/create, table/update, table/query,
 * table/query_stream and table/query_stats.
 *
 * - A row's digest is `Digest.ofValue` of the row read from the request's raw JSON text (so floats hash as
 *   Python hashes them); a table's digest is `Digest.ofTable` of its row digests, in order.
 * - Updates apply in order: `append`, `pop` (index in range), `insert` (0 ≤ index ≤ length); an index out of
 *   range is 400. `updated_row_digests` are the digests of the rows appended or inserted.
 * - Queries answer rows in table order with `original_index`; `filter.row_digests` keeps the rows with those
 *   digests; `sort_by` takes `val.<path>` (or `original_index`) fields; then `offset` and `limit`.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Digest from "../../../../api/Digest.js"
import type { JsonValue } from "../../../../api/Json.js"
import type { SortBy } from "../../../../api/TraceCall.js"
import { NotFound } from "../../../../api/TraceError.js"
import {
  type TableCreateReq,
  type TableQueryReq,
  type TableQueryStatsReq,
  TableRow,
  type TableUpdateReq
} from "../../../../api/TraceObject.js"
import * as TraceObjects from "../../../store/TraceObjects.js"
import { checkProject, invalid } from "./ids.js"
import { jsonLinesResponse } from "./jsonLines.js"
import { item, jsonOf, member, rawBody } from "./objects.js"
import { page } from "./query.js"

const toRow = (value: Digest.Canonical): TraceObjects.RowRecord => ({
  digest: Digest.ofValue(value),
  val: Digest.dumps(value)
})

/** `POST /table/create` */
export const tableCreate = ({ payload }: { readonly payload: TableCreateReq }) =>
  Effect.gen(function* () {
    const store = yield* TraceObjects.TraceObjects
    yield* checkProject(payload.table.project_id)
    const raw = member(member(yield* rawBody, "table"), "rows")
    const rows = payload.table.rows.map((_, i) => toRow(item(raw, i) ?? null))
    const rowDigests = rows.map((row) => row.digest)
    const digest = Digest.ofTable(rowDigests)
    yield* store.putTable(payload.table.project_id, digest, rows, rowDigests)
    return { digest, row_digests: rowDigests }
  })

const tableNotFound = (digest: string) => new NotFound({ reason: `Table ${digest} not found` })

const rowDigestsOf = (projectId: string, digest: string) =>
  Effect.flatMap(TraceObjects.TraceObjects, (store) => store.tableRowDigests(projectId, digest)).pipe(
    Effect.flatMap(Option.match({ onNone: () => Effect.fail(tableNotFound(digest)), onSome: Effect.succeed }))
  )

/** `POST /table/update` */
export const tableUpdate = ({ payload }: { readonly payload: TableUpdateReq }) =>
  Effect.gen(function* () {
    const store = yield* TraceObjects.TraceObjects
    yield* checkProject(payload.project_id)
    const digests = [...(yield* rowDigestsOf(payload.project_id, payload.base_digest))]
    const raw = member(yield* rawBody, "updates")
    const added: Array<TraceObjects.RowRecord> = []
    for (const [i, update] of payload.updates.entries()) {
      if ("append" in update) {
        const row = toRow(member(member(item(raw, i), "append"), "row") ?? null)
        added.push(row)
        digests.push(row.digest)
      } else if ("pop" in update) {
        const index = update.pop.index
        if (index < 0 || index >= digests.length) return yield* invalid(`Pop index ${index} out of range`)
        digests.splice(index, 1)
      } else {
        const index = update.insert.index
        if (index < 0 || index > digests.length) return yield* invalid(`Insert index ${index} out of range`)
        const row = toRow(member(member(item(raw, i), "insert"), "row") ?? null)
        added.push(row)
        digests.splice(index, 0, row.digest)
      }
    }
    const digest = Digest.ofTable(digests)
    yield* store.putTable(payload.project_id, digest, added, digests)
    return { digest, updated_row_digests: added.map((row) => row.digest) }
  })

const pathOf = (value: JsonValue | undefined, path: ReadonlyArray<string>): JsonValue | undefined => {
  let current = value
  for (const key of path) {
    if (current === null || current === undefined || typeof current !== "object") return undefined
    current = Array.isArray(current)
      ? (current as ReadonlyArray<JsonValue>)[Number(key)]
      : (current as { readonly [key: string]: JsonValue })[key]
  }
  return current
}

const rank = (value: JsonValue | undefined): number =>
  value === undefined || value === null ? 0 : typeof value === "number" ? 1 : typeof value === "string" ? 2 : 3

const compareValues = (a: JsonValue | undefined, b: JsonValue | undefined): number => {
  if (rank(a) !== rank(b)) return rank(a) - rank(b)
  if (typeof a === "number" && typeof b === "number") return a - b
  const x = typeof a === "string" ? a : JSON.stringify(a ?? null)
  const y = typeof b === "string" ? b : JSON.stringify(b ?? null)
  return x < y ? -1 : x > y ? 1 : 0
}

const sortKey = (row: TableRow, field: string): JsonValue | undefined => {
  if (field === "original_index") return row.original_index ?? null
  if (field === "digest") return row.digest
  const path = field.split(".")
  return pathOf(row.val, path[0] === "val" ? path.slice(1) : path)
}

const sortRows = (rows: ReadonlyArray<TableRow>, sortBy: ReadonlyArray<SortBy>) =>
  [...rows].sort((a, b) => {
    for (const key of sortBy) {
      const order = compareValues(sortKey(a, key.field), sortKey(b, key.field))
      if (order !== 0) return key.direction === "asc" ? order : -order
    }
    return 0
  })

/** The rows a query selects, in order, after offset and limit. */
const select = (payload: TableQueryReq) =>
  Effect.gen(function* () {
    const store = yield* TraceObjects.TraceObjects
    yield* checkProject(payload.project_id)
    const digests = yield* rowDigestsOf(payload.project_id, payload.digest)
    const vals = yield* store.rows(payload.project_id, digests)
    const wanted = payload.filter?.row_digests
    const keep = wanted === null || wanted === undefined ? undefined : new Set(wanted)
    const rows = digests.flatMap((digest, index) => {
      const val = vals.get(digest)
      if (val === undefined || (keep !== undefined && !keep.has(digest))) return []
      return [new TableRow({ digest, val: jsonOf(val), original_index: index })]
    })
    const sortBy = payload.sort_by ?? []
    const sorted = sortBy.length === 0 ? rows : sortRows(rows, sortBy)
    return page(sorted, payload.offset, payload.limit)
  })

/** `POST /table/query` */
export const tableQuery = ({ payload }: { readonly payload: TableQueryReq }) =>
  Effect.map(select(payload), (rows) => ({ rows }))

/** `POST /table/query_stream`: the rows as JSON lines. */
export const tableQueryStream = ({ payload }: { readonly payload: TableQueryReq }) =>
  Effect.map(select(payload), (rows) =>
    jsonLinesResponse(rows.map((row) => ({ digest: row.digest, val: row.val, original_index: row.original_index })))
  )

/** `POST /table/query_stats`: the number of rows. */
export const tableQueryStats = ({ payload }: { readonly payload: TableQueryStatsReq }) =>
  Effect.gen(function* () {
    yield* checkProject(payload.project_id)
    const digests = yield* rowDigestsOf(payload.project_id, payload.digest)
    return { count: digests.length }
  })
