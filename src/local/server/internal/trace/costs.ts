/**
 * The costs (LLM token prices) of the trace surface over the store's `TraceFeedback`: cost/create, cost/query
 * and cost/purge. Prices are project-level.
 *
 * - Create stores one price per `llm_id` and answers `{ids: [[id, llm_id], ...]}` in the order given;
 *   `provider_id` defaults to `default`, the units to `USD`, `effective_date` to the creation time (a given one
 *   must be an ISO 8601 timestamp: 400 otherwise); `created_by` is the request's `wb_user_id` (or `local`).
 * - Query answers `{results}` of the project's prices, each with `id`, `llm_id`, `prompt_token_cost`,
 *   `completion_token_cost`, the units, `effective_date` and `provider_id`. `fields` may name those and the
 *   stored `pricing_level`, `pricing_level_id`, `created_by`, `created_at` (which the answer's shape leaves
 *   out); `query` and `sort_by` take the calls' query language over every column; another field is 400
 *   `Unknown field`. Without `sort_by`, prices come in creation order. (The hosted service's query drops the
 *   project scope when a `query` is given; this server always keeps it.)
 * - Purge takes only `$eq` or `$in` of `id` with string literals, or `$or` of `$eq`s; anything else is 400.
 */
import * as Effect from "effect/Effect"
import type { JsonObject, JsonValue } from "../../../../api/Json.js"
import type { CostCreateReq, CostPurgeReq, CostQueryReq } from "../../../../api/TraceMisc.js"
import { nowIso } from "../../../store/internal/sql.js"
import * as TraceFeedback from "../../../store/TraceFeedback.js"
import { checkFields, LOCAL_USER_ID, purgeIds, select } from "./feedback.js"
import { checkProject, instant, invalid, newId } from "./ids.js"

/** The service's reason for a cost purge query that is not id-based. */
export const INVALID_COST_PURGE = "Can only purge costs by specifying one or more cost ids"

/** The fields a cost query answers. */
const OUTPUT = [
  "id",
  "llm_id",
  "prompt_token_cost",
  "completion_token_cost",
  "prompt_token_cost_unit",
  "completion_token_cost_unit",
  "effective_date",
  "provider_id"
] as const

const COLUMNS = new Set<string>([...OUTPUT, "pricing_level", "pricing_level_id", "created_by", "created_at"])

/** `POST /cost/create` */
export const costCreate = ({ payload }: { readonly payload: CostCreateReq }) =>
  Effect.gen(function* () {
    yield* checkProject(payload.project_id)
    const createdAt = yield* nowIso
    const records: Array<TraceFeedback.CostRecord> = []
    for (const [llmId, cost] of Object.entries(payload.costs)) {
      let effective = createdAt
      if (cost.effective_date !== undefined && cost.effective_date !== null) {
        const parsed = instant(cost.effective_date)
        if (parsed === undefined) return yield* invalid(`Invalid effective_date for ${llmId}: ${cost.effective_date}`)
        effective = parsed.iso
      }
      records.push({
        project_id: payload.project_id,
        id: yield* newId,
        llm_id: llmId,
        provider_id: cost.provider_id ?? "default",
        effective_date: effective,
        prompt_token_cost: cost.prompt_token_cost,
        completion_token_cost: cost.completion_token_cost,
        prompt_token_cost_unit: cost.prompt_token_cost_unit ?? "USD",
        completion_token_cost_unit: cost.completion_token_cost_unit ?? "USD",
        created_by: payload.wb_user_id ?? LOCAL_USER_ID,
        created_at: createdAt
      })
    }
    yield* Effect.flatMap(TraceFeedback.TraceFeedback, (store) => store.createCosts(records))
    return { ids: records.map((record) => [record.id, record.llm_id] as const) }
  })

const row = (record: TraceFeedback.CostRecord): JsonObject => ({
  id: record.id,
  pricing_level: "project",
  pricing_level_id: record.project_id,
  provider_id: record.provider_id,
  llm_id: record.llm_id,
  effective_date: record.effective_date,
  prompt_token_cost: record.prompt_token_cost,
  completion_token_cost: record.completion_token_cost,
  prompt_token_cost_unit: record.prompt_token_cost_unit,
  completion_token_cost_unit: record.completion_token_cost_unit,
  created_by: record.created_by,
  created_at: record.created_at
})

/** `POST /cost/query` */
export const costQuery = ({ payload }: { readonly payload: CostQueryReq }) =>
  Effect.gen(function* () {
    yield* checkProject(payload.project_id)
    const fields = payload.fields ?? []
    yield* checkFields(fields, payload.query, payload.sort_by, COLUMNS, new Set())
    const records = yield* Effect.flatMap(TraceFeedback.TraceFeedback, (store) => store.costs(payload.project_id))
    const rows = select(records.map(row), payload.query, payload.sort_by, payload.offset, payload.limit)
    const answered = fields.length === 0 ? OUTPUT : OUTPUT.filter((field) => fields.includes(field))
    const results = rows.map((r) => {
      const out: Record<string, JsonValue> = {}
      for (const field of answered) out[field] = r[field] ?? null
      return out as {
        readonly id?: string
        readonly llm_id?: string
        readonly prompt_token_cost?: number
        readonly completion_token_cost?: number
        readonly prompt_token_cost_unit?: string
        readonly completion_token_cost_unit?: string
        readonly effective_date?: string
        readonly provider_id?: string
      }
    })
    return { results }
  })

/** `POST /cost/purge` */
export const costPurge = ({ payload }: { readonly payload: CostPurgeReq }) =>
  Effect.gen(function* () {
    yield* checkProject(payload.project_id)
    const ids = yield* purgeIds(payload.query, INVALID_COST_PURGE, true)
    yield* Effect.flatMap(TraceFeedback.TraceFeedback, (store) => store.purgeCosts(payload.project_id, ids))
    return {}
  })
