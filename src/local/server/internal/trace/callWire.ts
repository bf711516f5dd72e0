/**
 * A stored call as the trace surface answers it, shared by the calls endpoints (`calls.ts`) and the call refs of
 * `refs/read_batch` (`refs.ts`). Reads add the derived `summary.weave = {status, latency_ms, trace_name}`:
 * `error` with an exception, `running` without an end, `descendant_error` when a live descendant has an exception
 * (or the client's `summary.status_counts.error` is positive), else `success`; `latency_ms` from start to end;
 * `trace_name` the display name, else the op's name (the `<name>` of an op ref).
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { JsonObject, JsonValue } from "../../../../api/Json.js"
import type * as TraceCalls from "../../../store/TraceCalls.js"
import { instant } from "./ids.js"

/** The `<name>` of an op ref `weave:///<entity>/<project>/op/<name>:<digest>`; any other op name as it is. */
export const opShortName = (opName: string): string => {
  const match = /^weave:\/\/\/[^/]+\/[^/]+\/op\/([^:/]+)(?::[^/]*)?$/.exec(opName)
  return match?.[1] ?? opName
}

const errorCount = (summary: JsonObject | null): number => {
  const counts = summary?.status_counts
  if (counts === null || counts === undefined || typeof counts !== "object" || Array.isArray(counts)) return 0
  const error = (counts as JsonObject).error
  return typeof error === "number" ? error : 0
}

/** The calls as answered, with `summary.weave` derived (see the module header), in the order given. */
export const callsWire = (
  calls: TraceCalls.Service,
  projectId: string,
  records: ReadonlyArray<TraceCalls.CallRecord>
) =>
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

const jsonBytes = (value: JsonValue): number => Buffer.byteLength(JSON.stringify(value), "utf8")

/**
 * The bytes a call's stored JSON takes (its attributes, inputs, output and summary as stored), answered as
 * `storage_size_bytes`; a trace root's `total_storage_size_bytes` is the sum over its trace.
 */
export const storageSize = (record: TraceCalls.CallRecord): number =>
  jsonBytes(record.attributes) +
  jsonBytes(record.inputs) +
  (Option.isSome(record.output) ? jsonBytes(record.output.value) : 0) +
  (record.summary === null ? 0 : jsonBytes(record.summary))
