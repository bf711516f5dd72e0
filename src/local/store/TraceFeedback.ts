/**
 * Feedback and LLM token prices (costs) of the trace surface, stored in `trace_feedback` and `trace_costs`:
 *
 * - feedback rows are kept in creation order; a row is one `(project_id, id)`, and storing an id again
 *   replaces the row (as the service's replacing table does); purges delete rows by id;
 * - costs are project-level prices of one `llm_id`, kept in creation order and purged by id.
 *
 * Validation and the wire forms are the server's business (`server/internal/trace/feedback.ts`, `costs.ts`);
 * this module stores what it is given. It also decorates calls as the service's `include_feedback` and
 * `include_costs` do (see {@link decorateCalls}).
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { callRef } from "../../api/internal/callRef.js"
import type { JsonObject, JsonValue } from "../../api/Json.js"

/** A feedback row as stored; `payload` and `extra` (the scorer and span fields) are JSON text. */
export interface FeedbackRecord {
  readonly project_id: string
  readonly id: string
  readonly weave_ref: string
  readonly wb_user_id: string
  readonly creator: string | null
  readonly created_at: string
  readonly feedback_type: string
  readonly payload: string
  readonly annotation_ref: string | null
  readonly runnable_ref: string | null
  readonly call_ref: string | null
  readonly trigger_ref: string | null
  readonly queue_id: string | null
  readonly extra: string
}

/** A project-level price of one LLM, as stored. */
export interface CostRecord {
  readonly project_id: string
  readonly id: string
  readonly llm_id: string
  readonly provider_id: string
  readonly effective_date: string
  readonly prompt_token_cost: number
  readonly completion_token_cost: number
  readonly prompt_token_cost_unit: string
  readonly completion_token_cost_unit: string
  readonly created_by: string
  readonly created_at: string
}

/** The trace feedback and costs repository. */
export interface Service {
  /** Stores a feedback row (replacing a row with its id), after deleting the `replacing` id if given. */
  readonly createFeedback: (record: FeedbackRecord, replacing?: string | undefined) => Effect.Effect<void>
  /** Every feedback row of a project, in creation order. */
  readonly feedback: (projectId: string) => Effect.Effect<ReadonlyArray<FeedbackRecord>>
  /** The feedback rows of a project on the given refs, in creation order. */
  readonly feedbackOn: (projectId: string, refs: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<FeedbackRecord>>
  /** Deletes the feedback rows with the given ids; how many. */
  readonly purgeFeedback: (projectId: string, ids: ReadonlyArray<string>) => Effect.Effect<number>
  /** Stores prices. */
  readonly createCosts: (records: ReadonlyArray<CostRecord>) => Effect.Effect<void>
  /** Every price of a project, in creation order. */
  readonly costs: (projectId: string) => Effect.Effect<ReadonlyArray<CostRecord>>
  /** The prices of a project for the given LLMs, in creation order. */
  readonly costsOf: (projectId: string, llmIds: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<CostRecord>>
  /** Deletes the prices with the given ids; how many. */
  readonly purgeCosts: (projectId: string, ids: ReadonlyArray<string>) => Effect.Effect<number>
}

/** The trace feedback and costs repository service. */
export class TraceFeedback extends Context.Tag("effect-rl/local/store/TraceFeedback")<TraceFeedback, Service>() {}

const feedbackColumns =
  "project_id, id, weave_ref, wb_user_id, creator, created_at, feedback_type, payload, annotation_ref, " +
  "runnable_ref, call_ref, trigger_ref, queue_id, extra"

const costColumns =
  "project_id, id, llm_id, provider_id, effective_date, prompt_token_cost, completion_token_cost, " +
  "prompt_token_cost_unit, completion_token_cost_unit, created_by, created_at"

/** The most list items bound in one statement (SQLite limits the number of variables). */
const CHUNK = 500

const chunks = <A>(items: ReadonlyArray<A>): ReadonlyArray<ReadonlyArray<A>> => {
  const unique = [...new Set(items)]
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < unique.length; i += CHUNK) out.push(unique.slice(i, i + CHUNK))
  return out
}

/** Builds the repository over the `SqlClient`. SQL failures are defects (see `StoreError`). */
export const make: Effect.Effect<Service, never, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient

  const createFeedback = (record: FeedbackRecord, replacing?: string | undefined) =>
    Effect.gen(function* () {
      if (replacing !== undefined) {
        yield* sql`DELETE FROM trace_feedback WHERE project_id = ${record.project_id} AND id = ${replacing}`
      }
      yield* sql`DELETE FROM trace_feedback WHERE project_id = ${record.project_id} AND id = ${record.id}`
      yield* sql`INSERT INTO trace_feedback ${sql.insert({ ...record })}`
    }).pipe(sql.withTransaction, Effect.orDie, Effect.withSpan("TraceFeedback.createFeedback"))

  const feedback = (projectId: string) =>
    sql<FeedbackRecord>`SELECT ${sql.literal(feedbackColumns)} FROM trace_feedback
      WHERE project_id = ${projectId} ORDER BY seq`.pipe(Effect.orDie)

  const feedbackOn = (projectId: string, refs: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      const found: Array<FeedbackRecord & { readonly seq: number }> = []
      for (const part of chunks(refs)) {
        found.push(
          ...(yield* sql<FeedbackRecord & { readonly seq: number }>`SELECT seq, ${sql.literal(feedbackColumns)}
            FROM trace_feedback WHERE project_id = ${projectId} AND ${sql.in("weave_ref", part)}`)
        )
      }
      return found.sort((a, b) => a.seq - b.seq).map(({ seq: _, ...record }) => record) as ReadonlyArray<FeedbackRecord>
    }).pipe(Effect.orDie)

  const purgeFeedback = (projectId: string, ids: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      let deleted = 0
      for (const part of chunks(ids)) {
        const rows = yield* sql<{ seq: number }>`DELETE FROM trace_feedback
          WHERE project_id = ${projectId} AND ${sql.in("id", part)} RETURNING seq`
        deleted += rows.length
      }
      return deleted
    }).pipe(sql.withTransaction, Effect.orDie, Effect.withSpan("TraceFeedback.purgeFeedback"))

  const createCosts = (records: ReadonlyArray<CostRecord>) =>
    Effect.gen(function* () {
      for (let i = 0; i < records.length; i += 50) {
        yield* sql`INSERT INTO trace_costs ${sql.insert(records.slice(i, i + 50).map((record) => ({ ...record })))}`
      }
    }).pipe(sql.withTransaction, Effect.orDie, Effect.withSpan("TraceFeedback.createCosts"))

  const costs = (projectId: string) =>
    sql<CostRecord>`SELECT ${sql.literal(costColumns)} FROM trace_costs
      WHERE project_id = ${projectId} ORDER BY seq`.pipe(Effect.orDie)

  const costsOf = (projectId: string, llmIds: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      const found: Array<CostRecord & { readonly seq: number }> = []
      for (const part of chunks(llmIds)) {
        found.push(
          ...(yield* sql<CostRecord & { readonly seq: number }>`SELECT seq, ${sql.literal(costColumns)}
            FROM trace_costs WHERE project_id = ${projectId} AND ${sql.in("llm_id", part)}`)
        )
      }
      return found.sort((a, b) => a.seq - b.seq).map(({ seq: _, ...record }) => record) as ReadonlyArray<CostRecord>
    }).pipe(Effect.orDie)

  const purgeCosts = (projectId: string, ids: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      let deleted = 0
      for (const part of chunks(ids)) {
        const rows = yield* sql<{ seq: number }>`DELETE FROM trace_costs
          WHERE project_id = ${projectId} AND ${sql.in("id", part)} RETURNING seq`
        deleted += rows.length
      }
      return deleted
    }).pipe(sql.withTransaction, Effect.orDie, Effect.withSpan("TraceFeedback.purgeCosts"))

  return {
    createFeedback,
    feedback,
    feedbackOn,
    purgeFeedback,
    createCosts,
    costs,
    costsOf,
    purgeCosts
  } satisfies Service
})

/** The repository as a layer over the `SqlClient`. */
export const layer: Layer.Layer<TraceFeedback, never, SqlClient.SqlClient> = Layer.effect(TraceFeedback, make)

// ---------------------------------------------------------------------------------------------------------------
// Calls with their feedback and costs
// ---------------------------------------------------------------------------------------------------------------

/** The fields of a feedback row that `include_feedback` attaches to a call, as the service selects them. */
const CALL_FEEDBACK_FIELDS = [
  "feedback_type",
  "weave_ref",
  "payload",
  "creator",
  "created_at",
  "wb_user_id",
  "runnable_ref",
  "call_ref",
  "trigger_ref",
  "annotation_ref"
] as const

/** A stored feedback row with the fields a call carries (`payload` as JSON). */
const callFeedback = (record: FeedbackRecord): JsonObject => {
  const out: Record<string, JsonValue> = {}
  for (const field of CALL_FEEDBACK_FIELDS) {
    out[field] = field === "payload" ? (JSON.parse(record.payload) as JsonValue) : record[field]
  }
  return out
}

const asObject = (value: JsonValue | undefined): JsonObject | undefined =>
  value !== null && value !== undefined && typeof value === "object" && !Array.isArray(value)
    ? (value as JsonObject)
    : undefined

/** An integer count of a usage entry (missing or not a number is 0), as the service extracts it. */
const count = (usage: JsonObject, key: string): number => {
  const value = usage[key]
  return typeof value === "number" && Number.isFinite(value) ? Math.trunc(value) : 0
}

const millis = (iso: string): number => {
  const ms = Date.parse(iso)
  return Number.isFinite(ms) ? ms : Number.NEGATIVE_INFINITY
}

/**
 * The price that applies to a call started at `startedAt`: among the prices in effect then (effective date not
 * after the start) the one with the latest effective date, else the latest price of all (ties to the newest).
 */
const priceAt = (prices: ReadonlyArray<CostRecord>, startedAt: number): CostRecord | undefined => {
  let best: CostRecord | undefined
  let bestKey: readonly [number, number] = [2, Number.NEGATIVE_INFINITY]
  for (const price of prices) {
    const effective = millis(price.effective_date)
    const key: readonly [number, number] = [effective <= startedAt ? 0 : 1, effective]
    if (best === undefined || key[0] < bestKey[0] || (key[0] === bestKey[0] && key[1] >= bestKey[1])) {
      best = price
      bestKey = key
    }
  }
  return best
}

/** The `summary.weave.costs` of a call (undefined when no LLM of its usage has a price). */
const costsOf = (call: JsonObject, prices: ReadonlyArray<CostRecord>): JsonObject | undefined => {
  const usage = asObject(asObject(call.summary)?.usage)
  if (usage === undefined) return undefined
  const startedAt = typeof call.started_at === "string" ? millis(call.started_at) : Number.NEGATIVE_INFINITY
  const out: Record<string, JsonValue> = {}
  for (const [llmId, value] of Object.entries(usage)) {
    const entry = asObject(value)
    const price = priceAt(
      prices.filter((p) => p.llm_id === llmId),
      startedAt
    )
    if (entry === undefined || price === undefined) continue
    const promptTokens = count(entry, "prompt_tokens") + count(entry, "input_tokens")
    const completionTokens = count(entry, "completion_tokens") + count(entry, "output_tokens")
    out[llmId] = {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      requests: count(entry, "requests"),
      total_tokens: count(entry, "total_tokens"),
      prompt_token_cost: price.prompt_token_cost,
      completion_token_cost: price.completion_token_cost,
      prompt_tokens_total_cost: promptTokens * price.prompt_token_cost,
      completion_tokens_total_cost: completionTokens * price.completion_token_cost,
      prompt_token_cost_unit: price.prompt_token_cost_unit,
      completion_token_cost_unit: price.completion_token_cost_unit,
      effective_date: price.effective_date,
      provider_id: price.provider_id,
      pricing_level: "project",
      pricing_level_id: price.project_id,
      created_by: price.created_by,
      created_at: price.created_at
    }
  }
  return Object.keys(out).length === 0 ? undefined : out
}

/** What {@link decorateCalls} attaches. */
export interface DecorateOptions {
  /** `include_feedback`: `summary.weave.feedback`, the call's feedback rows (an empty list when none). */
  readonly feedback?: boolean | undefined
  /** `include_costs`: `summary.weave.costs`, priced usage by LLM id (absent when no LLM has a price). */
  readonly costs?: boolean | undefined
}

/**
 * Calls (as answered, with `id`, `started_at` and `summary`) of one project with what `include_feedback` and
 * `include_costs` add to `summary.weave`:
 *
 * - `feedback`: the feedback rows whose `weave_ref` is `weave:///<project_id>/call/<id>`, in creation order, with
 *   the fields `feedback_type`, `weave_ref`, `payload`, `creator`, `created_at`, `wb_user_id`, `runnable_ref`,
 *   `call_ref`, `trigger_ref`, `annotation_ref`;
 * - `costs`: for each LLM id of `summary.usage` that has a price in the project, its counts (`prompt_tokens`
 *   adds `input_tokens`, `completion_tokens` adds `output_tokens`; `requests`, `total_tokens`), the price
 *   (the latest in effect at `started_at`, else the latest), the totals `prompt_tokens_total_cost` and
 *   `completion_tokens_total_cost`, the units, `effective_date`, `provider_id`, `pricing_level` (`project`),
 *   `pricing_level_id`, `created_by` and `created_at`.
 */
export const decorateCalls = (
  projectId: string,
  calls: ReadonlyArray<JsonObject>,
  options: DecorateOptions
): Effect.Effect<ReadonlyArray<JsonObject>, never, TraceFeedback> =>
  Effect.gen(function* () {
    if (calls.length === 0 || (options.feedback !== true && options.costs !== true)) return calls
    const store = yield* TraceFeedback
    const refOf = (call: JsonObject) => callRef(projectId, String(call.id))
    const byRef = new Map<string, Array<JsonObject>>()
    if (options.feedback === true) {
      for (const record of yield* store.feedbackOn(projectId, calls.map(refOf))) {
        const list = byRef.get(record.weave_ref) ?? []
        list.push(callFeedback(record))
        byRef.set(record.weave_ref, list)
      }
    }
    const llmIds = new Set<string>()
    if (options.costs === true) {
      for (const call of calls)
        for (const key of Object.keys(asObject(asObject(call.summary)?.usage) ?? {})) llmIds.add(key)
    }
    const prices = llmIds.size === 0 ? [] : yield* store.costsOf(projectId, [...llmIds])
    return calls.map((call) => {
      const summary = asObject(call.summary) ?? {}
      const weave: Record<string, JsonValue> = { ...asObject(summary.weave) }
      if (options.feedback === true) weave.feedback = byRef.get(refOf(call)) ?? []
      if (options.costs === true) {
        const costs = costsOf(call, prices)
        if (costs !== undefined) weave.costs = costs
      }
      return { ...call, summary: { ...summary, weave } }
    })
  })
