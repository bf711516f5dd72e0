/**
 * Fast decoders of the trace surface's hottest request, `call/upsert_batch` (thousands of starts and ends per
 * body): each builds the value its schema in ../TraceCall.ts gives (keys in the schema's order, keys it does not
 * name dropped; open records with their named keys first, then the others in the order given) in one pass, and
 * declines (`undefined`) on anything it is not sure of, which then goes to the schema (see `withFastDecode`).
 * Mirrors `CallStartInsert`, `CallEndInsert`, `SummaryInsert`, `LLMUsage`, `CallBatchStart`, `CallBatchEnd` and
 * `CallCreateBatchReq`: keep them in step (a property test compares the two).
 *
 * @internal
 */
import {
  has,
  isJsonObject,
  isJsonValue,
  isNullableInt,
  isNullableString,
  isRecord,
  optional,
  type Record_
} from "./fastPath.js"

const isNullableBoolean = (u: unknown) => u === null || u === undefined || typeof u === "boolean"
const isNullableJsonObject = (u: unknown) => u === null || u === undefined || isJsonObject(u)

/** An open record with its named keys first (in this order), then the others as given. */
const openRecord = (from: Record_, named: ReadonlyArray<string>, values?: Record_): Record_ => {
  const out: Record_ = {}
  for (const key of named)
    if (has(from, key)) out[key] = values !== undefined && has(values, key) ? values[key] : from[key]
  for (const key in from) if (!has(out, key)) out[key] = from[key]
  return out
}

/** The keys `LLMUsage` names, in its order (a decoded usage has them first, in this order). */
export const LLM_USAGE_KEYS = [
  "prompt_tokens",
  "input_tokens",
  "completion_tokens",
  "output_tokens",
  "requests",
  "total_tokens",
  "cache_creation_input_tokens",
  "cache_read_input_tokens"
] as const

/** An `LLMUsage` (its values already known to be JSON), or undefined. */
const llmUsage = (u: unknown): Record_ | undefined => {
  if (!isRecord(u)) return undefined
  for (const key of LLM_USAGE_KEYS) if (has(u, key) && !isNullableInt(u[key])) return undefined
  return openRecord(u, LLM_USAGE_KEYS)
}

/** A `SummaryInsert`, or undefined. */
const summaryInsert = (u: unknown): Record_ | undefined => {
  if (!isJsonObject(u)) return undefined
  const summary = u as Record_
  const values: Record_ = {}
  if (has(summary, "usage")) {
    const usage = summary.usage
    if (!isRecord(usage)) return undefined
    const decoded: Record_ = {}
    for (const model in usage) {
      const one = llmUsage(usage[model])
      if (one === undefined) return undefined
      decoded[model] = one
    }
    values.usage = decoded
  }
  if (has(summary, "status_counts")) {
    const counts = summary.status_counts
    if (!isRecord(counts)) return undefined
    for (const key in counts) if (!Number.isSafeInteger(counts[key])) return undefined
    values.status_counts = { ...counts }
  }
  return openRecord(summary, ["usage", "status_counts"], values)
}

/** A `CallStartInsert`, or undefined. */
export const callStartInsert = (u: unknown): Record_ | undefined => {
  if (
    !isRecord(u) ||
    typeof u.project_id !== "string" ||
    typeof u.op_name !== "string" ||
    typeof u.started_at !== "string" ||
    !isJsonObject(u.attributes) ||
    !isJsonObject(u.inputs)
  ) {
    return undefined
  }
  const out: Record_ = { project_id: u.project_id }
  if (!optional(u, out, "id", isNullableString)) return undefined
  out.op_name = u.op_name
  for (const key of ["display_name", "trace_id", "parent_id", "thread_id", "turn_id"]) {
    if (!optional(u, out, key, isNullableString)) return undefined
  }
  out.started_at = u.started_at
  out.attributes = u.attributes
  out.inputs = u.inputs
  if (
    !optional(u, out, "otel_dump", isNullableJsonObject) ||
    !optional(u, out, "wb_user_id", isNullableString) ||
    !optional(u, out, "wb_run_id", isNullableString) ||
    !optional(u, out, "wb_run_step", isNullableInt)
  ) {
    return undefined
  }
  return out
}

/** A `CallEndInsert`, or undefined. */
export const callEndInsert = (u: unknown): Record_ | undefined => {
  if (!isRecord(u) || typeof u.project_id !== "string" || typeof u.id !== "string" || typeof u.ended_at !== "string") {
    return undefined
  }
  const out: Record_ = { project_id: u.project_id, id: u.id }
  if (!optional(u, out, "trace_id", isNullableString) || !optional(u, out, "is_eval", isNullableBoolean)) {
    return undefined
  }
  out.ended_at = u.ended_at
  if (
    !optional(u, out, "started_at", isNullableString) ||
    !optional(u, out, "exception", isNullableString) ||
    !optional(u, out, "output", (o) => o === undefined || isJsonValue(o))
  ) {
    return undefined
  }
  const summary = summaryInsert(u.summary)
  if (summary === undefined) return undefined
  out.summary = summary
  if (!optional(u, out, "wb_run_step_end", isNullableInt)) return undefined
  return out
}

/** A `CallCreateBatchReq` (`{batch: [{mode: "start", req: {start}} | {mode: "end", req: {end}}]}`), or undefined. */
export const callCreateBatchReq = (u: unknown): Record_ | undefined => {
  if (!isRecord(u) || !Array.isArray(u.batch)) return undefined
  const items = u.batch
  const batch: Array<Record_> = new Array(items.length)
  for (let i = 0; i < items.length; i++) {
    const item = items[i]
    if (!isRecord(item) || !isRecord(item.req)) return undefined
    if (item.mode === "start") {
      const start = callStartInsert(item.req.start)
      if (start === undefined) return undefined
      batch[i] = { mode: "start", req: { start } }
    } else if (item.mode === "end") {
      const end = callEndInsert(item.req.end)
      if (end === undefined) return undefined
      batch[i] = { mode: "end", req: { end } }
    } else {
      return undefined
    }
  }
  return { batch }
}
