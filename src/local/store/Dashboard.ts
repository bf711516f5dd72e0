/**
 * The read side of the dashboard (`/v1/local/...`, see `DashboardApi`): what the pages show, read straight
 * from the store's tables in few queries. Nothing here writes.
 *
 * - {@link models}: every model with its latest step, last rewards and latest job.
 * - {@link overview}: one model's logged steps (the metrics the log endpoint stored), gradient steps (the
 *   jobs' `gradient_step` events), checkpoints (with those retention deleted) and jobs.
 * - {@link trajectoryPage}: one log entry's trajectories as a bounded page, sorted, with the groups' spread.
 * - {@link trajectory}: one trajectory in full.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { orDieSql } from "./internal/sql.js"
import { notFound, type StoreError } from "./StoreError.js"

/** A model as the projects page lists it. */
export interface ModelSummary {
  readonly id: string
  readonly entity: string
  readonly project: string
  readonly name: string
  readonly base_model: string
  readonly created_at: string
  readonly latest_step: number | null
  readonly last_reward: number | null
  readonly last_val_reward: number | null
  readonly job_status: string | null
  readonly jobs: number
}

/** A log entry: its split and step and the metrics stored with it. */
export interface LogPoint {
  readonly id: string
  readonly split: string
  readonly step: number
  readonly metrics: Readonly<Record<string, number>>
  readonly created_at: string
}

/** A `gradient_step` event of one of the model's jobs, numbered within its job. */
export interface GradientPoint {
  readonly job_id: string
  readonly index: number
  readonly metrics: Readonly<Record<string, number>>
}

/** A checkpoint step; `deleted` when a job made it and it is gone (deleted by retention). */
export interface CheckpointPoint {
  readonly step: number
  readonly deleted: boolean
  readonly metrics: Readonly<Record<string, number>>
  readonly created_at: string | null
}

/** A job as the model page lists it. */
export interface JobSummary {
  readonly id: string
  readonly kind: string
  readonly status: string
  readonly created_at: string
  readonly started_at: string | null
  readonly finished_at: string | null
  readonly step: number | null
  readonly error_message: string | null
}

/** Everything the model page shows. */
export interface Overview {
  readonly model: ModelSummary
  readonly logs: ReadonlyArray<LogPoint>
  readonly gradient_steps: ReadonlyArray<GradientPoint>
  readonly checkpoints: ReadonlyArray<CheckpointPoint>
  readonly jobs: ReadonlyArray<JobSummary>
}

/** A trajectory's place and numbers, without its messages. */
export interface TrajectoryRow {
  readonly group: number
  readonly index: number
  readonly reward: number
  readonly metrics: Readonly<Record<string, unknown>>
  readonly turns: number
  readonly tool_calls: number
  /** The start of the last assistant text, for a glance. */
  readonly preview: string
}

/** A group's reward spread. */
export interface GroupSpread {
  readonly group: number
  readonly size: number
  readonly mean: number
  readonly min: number
  readonly max: number
  readonly std: number
}

/** The order of a trajectory page. */
export type Sort = "reward_desc" | "reward_asc" | "position"

/** A page of a log entry's trajectories. */
export interface TrajectoryPage {
  readonly log: LogPoint & { readonly model_id: string }
  readonly total: number
  readonly data: ReadonlyArray<TrajectoryRow>
  /** The offset of the next page, or null at the end. */
  readonly next_offset: number | null
  readonly groups: ReadonlyArray<GroupSpread>
}

const parse = (text: string | null): unknown => {
  if (text === null) return null
  try {
    return JSON.parse(text)
  } catch {
    return null
  }
}

const numbers = (value: unknown): Record<string, number> => {
  const out: Record<string, number> = {}
  if (typeof value !== "object" || value === null) return out
  for (const [key, v] of Object.entries(value)) if (typeof v === "number" && Number.isFinite(v)) out[key] = v
  return out
}

interface ModelRow {
  readonly id: string
  readonly entity: string
  readonly project: string
  readonly name: string
  readonly base_model: string
  readonly created_at: string
}

const summarize = (sql: SqlClient.SqlClient, model: ModelRow) =>
  Effect.gen(function* () {
    const [latest] = yield* sql<{ readonly step: number | null }>`SELECT MAX(step) AS step FROM checkpoints
      WHERE model_id = ${model.id}`
    const lastOf = (split: string) =>
      Effect.map(
        sql<{ readonly metrics: string }>`SELECT metrics FROM logs WHERE model_id = ${model.id} AND split = ${split}
          ORDER BY step DESC, rowid DESC LIMIT 1`,
        (rows) => numbers(parse(rows[0]?.metrics ?? null)).reward ?? null
      )
    const jobs = yield* sql<{ readonly status: string; readonly n: number }>`SELECT
      (SELECT status FROM training_jobs WHERE model_id = ${model.id} ORDER BY seq DESC LIMIT 1) AS status,
      (SELECT COUNT(*) FROM training_jobs WHERE model_id = ${model.id}) AS n`
    const summary: ModelSummary = {
      ...model,
      latest_step: latest?.step ?? null,
      last_reward: yield* lastOf("train"),
      last_val_reward: yield* lastOf("val"),
      job_status: jobs[0]?.status ?? null,
      jobs: jobs[0]?.n ?? 0
    }
    return summary
  })

const MODEL_COLUMNS = "id, entity, project, name, base_model, created_at"

/** Every model (newest first) with its latest step, last train and val rewards and latest job's status. */
export const models: Effect.Effect<ReadonlyArray<ModelSummary>, never, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const rows =
    yield* sql<ModelRow>`SELECT ${sql.literal(MODEL_COLUMNS)} FROM models ORDER BY created_at DESC, rowid DESC`
  return yield* Effect.forEach(rows, (row) => summarize(sql, row))
}).pipe(orDieSql, Effect.withSpan("Dashboard.models"))

const requireModel = (sql: SqlClient.SqlClient, modelId: string) =>
  Effect.flatMap(
    sql<ModelRow>`SELECT ${sql.literal(MODEL_COLUMNS)} FROM models WHERE id = ${modelId}`,
    (rows): Effect.Effect<ModelRow, StoreError> =>
      rows[0] === undefined ? Effect.fail(notFound(`model ${modelId} not found`)) : Effect.succeed(rows[0])
  )

/** One model's page: its logged steps, gradient steps, checkpoints and jobs, oldest first; `NotFound` without it. */
export const overview = (modelId: string): Effect.Effect<Overview, StoreError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const model = yield* summarize(sql, yield* requireModel(sql, modelId))
    const logs = yield* sql<{
      readonly id: string
      readonly split: string
      readonly step: number
      readonly metrics: string
      readonly created_at: string
    }>`SELECT id, split, step, metrics, created_at FROM logs WHERE model_id = ${modelId} ORDER BY step, rowid`
    const jobs = yield* sql<JobSummary>`SELECT id, kind, status, created_at, started_at, finished_at, step,
      error_message FROM training_jobs WHERE model_id = ${modelId} ORDER BY seq`
    const events = yield* sql<{ readonly job_id: string; readonly data: string }>`SELECT e.job_id, e.data
      FROM job_events e JOIN training_jobs j ON j.id = e.job_id
      WHERE j.model_id = ${modelId} AND e.type = 'gradient_step' ORDER BY j.seq, e.seq`
    const checkpoints = yield* sql<{
      readonly step: number
      readonly metrics: string
      readonly created_at: string
    }>`SELECT step, metrics, created_at FROM checkpoints WHERE model_id = ${modelId} ORDER BY step`
    const kept = new Set(checkpoints.map((c) => c.step))
    const made = new Set(jobs.flatMap((job) => (job.status === "succeeded" && job.step !== null ? [job.step] : [])))
    const deleted: Array<CheckpointPoint> = [...made]
      .filter((step) => !kept.has(step))
      .map((step) => ({ step, deleted: true, metrics: {}, created_at: null }))
    const counters = new Map<string, number>()
    return {
      model,
      logs: logs.map((log) => ({ ...log, metrics: numbers(parse(log.metrics)) })),
      gradient_steps: events.map((event) => {
        const index = counters.get(event.job_id) ?? 0
        counters.set(event.job_id, index + 1)
        return { job_id: event.job_id, index, metrics: numbers(parse(event.data)) }
      }),
      checkpoints: [
        ...checkpoints.map((c) => ({
          step: c.step,
          deleted: false,
          metrics: numbers(parse(c.metrics)),
          created_at: c.created_at
        })),
        ...deleted
      ].sort((a, b) => a.step - b.step),
      jobs
    }
  }).pipe(orDieSql, Effect.withSpan("Dashboard.overview"))

interface Stored {
  readonly trajectories?: ReadonlyArray<{
    readonly reward?: number
    readonly metrics?: Record<string, unknown>
    readonly messages_and_choices?: ReadonlyArray<unknown>
  }>
}

const entries = (trajectory: { readonly messages_and_choices?: ReadonlyArray<unknown> }) =>
  (trajectory.messages_and_choices ?? []).map((entry) => {
    const record = (typeof entry === "object" && entry !== null ? entry : {}) as Record<string, unknown>
    return (typeof record.message === "object" && record.message !== null ? record.message : record) as Record<
      string,
      unknown
    >
  })

const rowOf = (trajectory: NonNullable<Stored["trajectories"]>[number], group: number, index: number) => {
  const messages = entries(trajectory)
  const assistant = messages.filter((m) => m.role === "assistant")
  const lastText = [...assistant].reverse().find((m) => typeof m.content === "string" && m.content !== "")
  const row: TrajectoryRow = {
    group,
    index,
    reward: typeof trajectory.reward === "number" ? trajectory.reward : 0,
    metrics: trajectory.metrics ?? {},
    turns: assistant.length,
    tool_calls: assistant.reduce((n, m) => n + (Array.isArray(m.tool_calls) ? m.tool_calls.length : 0), 0),
    preview: typeof lastText?.content === "string" ? lastText.content.slice(0, 160) : ""
  }
  return row
}

const spread = (group: number, rewards: ReadonlyArray<number>): GroupSpread => {
  const size = rewards.length
  const mean = size === 0 ? 0 : rewards.reduce((a, b) => a + b, 0) / size
  const variance = size === 0 ? 0 : rewards.reduce((s, r) => s + (r - mean) ** 2, 0) / size
  return {
    group,
    size,
    mean,
    min: size === 0 ? 0 : Math.min(...rewards),
    max: size === 0 ? 0 : Math.max(...rewards),
    std: Math.sqrt(variance)
  }
}

const readLog = (sql: SqlClient.SqlClient, logId: string) =>
  Effect.flatMap(
    sql<{
      readonly id: string
      readonly model_id: string
      readonly split: string
      readonly step: number
      readonly metrics: string
      readonly created_at: string
      readonly trajectory_groups: string
    }>`SELECT id, model_id, split, step, metrics, created_at, trajectory_groups FROM logs WHERE id = ${logId}`,
    (rows) => {
      const row = rows[0]
      if (row === undefined) return Effect.fail(notFound(`log entry ${logId} not found`))
      const groups = parse(row.trajectory_groups)
      return Effect.succeed({
        log: {
          id: row.id,
          model_id: row.model_id,
          split: row.split,
          step: row.step,
          metrics: numbers(parse(row.metrics)),
          created_at: row.created_at
        },
        groups: (Array.isArray(groups) ? groups : []) as ReadonlyArray<Stored>
      })
    }
  )

/** What a page of trajectories is asked with. */
export interface PageOptions {
  readonly offset: number
  readonly limit: number
  readonly sort: Sort
}

/** A page of a log entry's trajectories (at most `limit`), with every group's spread; `NotFound` without it. */
export const trajectoryPage = (
  logId: string,
  options: PageOptions
): Effect.Effect<TrajectoryPage, StoreError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const { groups, log } = yield* readLog(sql, logId)
    const rows = groups.flatMap((group, g) => (group.trajectories ?? []).map((t, i) => rowOf(t, g, i)))
    if (options.sort === "reward_desc") rows.sort((a, b) => b.reward - a.reward)
    if (options.sort === "reward_asc") rows.sort((a, b) => a.reward - b.reward)
    const end = options.offset + options.limit
    return {
      log,
      total: rows.length,
      data: rows.slice(options.offset, end),
      next_offset: end < rows.length ? end : null,
      groups: groups.map((group, g) =>
        spread(
          g,
          (group.trajectories ?? []).map((t) => t.reward ?? 0)
        )
      )
    }
  }).pipe(orDieSql, Effect.withSpan("Dashboard.trajectoryPage"))

/** One trajectory of a log entry as stored; `NotFound` naming what is missing. */
export const trajectory = (
  logId: string,
  group: number,
  index: number
): Effect.Effect<
  { readonly log: TrajectoryPage["log"]; readonly trajectory: unknown },
  StoreError,
  SqlClient.SqlClient
> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const { groups, log } = yield* readLog(sql, logId)
    const found = groups[group]?.trajectories?.[index]
    if (found === undefined) {
      return yield* Effect.fail(notFound(`log entry ${logId} has no trajectory ${index} in group ${group}`))
    }
    return { log, trajectory: found }
  }).pipe(orDieSql, Effect.withSpan("Dashboard.trajectory"))
