/**
 * The threads of the trace surface: `POST /threads/stream_query` answers JSON lines of `Thread`, statistics
 * over each thread's turn calls (the live calls with a `thread_id` whose `id` is their own `turn_id`; the calls
 * nested under a turn are its implementation details and do not count).
 *
 * - `start_time` is the earliest turn's start; `last_updated` the latest of the turns' ends (a running turn
 *   counts by its start); `first_turn_id`/`last_turn_id` the turns that started first and last.
 * - `p50_turn_duration_ms`/`p99_turn_duration_ms` over the ended turns, interpolated linearly between the
 *   nearest ranks; `null` when no turn has ended.
 * - The filter keeps threads with `start_time` after `after_datetime`, `last_updated` before
 *   `before_datetime`, and the named `thread_ids`. `sort_by` takes the fields of a thread (default
 *   `last_updated desc`, then `thread_id`); `offset` and `limit` page the result.
 */
import * as Effect from "effect/Effect"
import type { JsonObject } from "../../../../api/Json.js"
import type { SortBy } from "../../../../api/TraceCall.js"
import type { ThreadsQueryReq } from "../../../../api/TraceMisc.js"
import * as TraceCalls from "../../../store/TraceCalls.js"
import { checkProject, instant, invalid } from "./ids.js"
import { jsonLinesResponse } from "./jsonLines.js"
import { page, sortCalls } from "./query.js"

const SORT_FIELDS = new Set([
  "thread_id",
  "turn_count",
  "start_time",
  "last_updated",
  "p50_turn_duration_ms",
  "p99_turn_duration_ms"
])

const DEFAULT_SORT: ReadonlyArray<SortBy> = [{ field: "last_updated", direction: "desc" }]

/** The `q`-quantile of sorted values, interpolated linearly between the nearest ranks. */
export const quantile = (sorted: ReadonlyArray<number>, q: number): number | null => {
  if (sorted.length === 0) return null
  const at = (sorted.length - 1) * q
  const low = Math.floor(at)
  const high = Math.ceil(at)
  const a = sorted[low] ?? 0
  const b = sorted[high] ?? a
  return a + (b - a) * (at - low)
}

interface Turn {
  readonly id: string
  readonly started: number
  readonly startedAt: string
  readonly ended: number | undefined
  readonly endedAt: string | undefined
}

const threadOf = (threadId: string, turns: ReadonlyArray<Turn>): JsonObject => {
  const byStart = [...turns].sort((a, b) => a.started - b.started || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  const first = byStart[0]
  const last = byStart[byStart.length - 1]
  let updated = { key: -Infinity, iso: first?.startedAt ?? "" }
  for (const turn of turns) {
    const key = turn.ended ?? turn.started
    if (key > updated.key) updated = { key, iso: turn.endedAt ?? turn.startedAt }
  }
  const durations = turns
    .flatMap((turn) => (turn.ended === undefined ? [] : [(turn.ended - turn.started) / 1000]))
    .sort((a, b) => a - b)
  return {
    thread_id: threadId,
    turn_count: turns.length,
    start_time: first?.startedAt ?? updated.iso,
    last_updated: updated.iso,
    first_turn_id: first?.id ?? null,
    last_turn_id: last?.id ?? null,
    p50_turn_duration_ms: quantile(durations, 0.5),
    p99_turn_duration_ms: quantile(durations, 0.99)
  }
}

const bound = (what: string, value: string | null | undefined) => {
  if (value === null || value === undefined) return Effect.succeed(undefined)
  const parsed = instant(value)
  return parsed === undefined ? invalid(`Invalid ${what}: ${value}`) : Effect.succeed(parsed.micros)
}

/** The threads a query selects, in order, paged. */
export const selectThreads = (request: ThreadsQueryReq) =>
  Effect.gen(function* () {
    yield* checkProject(request.project_id)
    const sortBy = request.sort_by ?? []
    const unknown = sortBy.find((key) => !SORT_FIELDS.has(key.field))
    if (unknown !== undefined) {
      return yield* invalid(`Invalid sort field for threads: ${unknown.field} (one of ${[...SORT_FIELDS].join(", ")})`)
    }
    const after = yield* bound("after_datetime", request.filter?.after_datetime)
    const before = yield* bound("before_datetime", request.filter?.before_datetime)
    const threadIds = request.filter?.thread_ids ?? undefined
    const calls = yield* TraceCalls.TraceCalls
    const records = yield* Effect.orDie(
      calls.query(request.project_id, threadIds === undefined ? {} : { thread_ids: threadIds })
    )
    const turns = new Map<string, Array<Turn>>()
    for (const record of records) {
      if (record.thread_id === null || record.turn_id !== record.id) continue
      const ended = record.ended_at === null ? undefined : instant(record.ended_at)
      const list = turns.get(record.thread_id) ?? []
      list.push({
        id: record.id,
        started: record.started_key,
        startedAt: record.started_at,
        ended: ended?.micros,
        endedAt: ended?.iso
      })
      turns.set(record.thread_id, list)
    }
    const threads = [...turns.entries()]
      .filter(([, list]) => {
        const start = Math.min(...list.map((turn) => turn.started))
        const updated = Math.max(...list.map((turn) => turn.ended ?? turn.started))
        return (after === undefined || start > after) && (before === undefined || updated < before)
      })
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([threadId, list]) => threadOf(threadId, list))
    const ordered = sortCalls(threads, sortBy.length === 0 ? DEFAULT_SORT : sortBy)
    return page(ordered, request.offset, request.limit)
  })

/** `POST /threads/stream_query` */
export const threadsStreamQuery = ({ payload }: { readonly payload: ThreadsQueryReq }) =>
  Effect.map(selectThreads(payload), jsonLinesResponse)
