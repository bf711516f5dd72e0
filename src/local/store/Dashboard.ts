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
import { COMPUTED, MEASURED } from "../../api/internal/metrics.js"
import type {
  CheckpointPoint,
  GroupSpread,
  JobSummary,
  ModelRow,
  ModelSummary,
  Overview,
  Sort,
  StepLog,
  TrajectoryPage,
  TrajectoryRow
} from "./DashboardShapes.js"
import { finiteMetrics } from "./internal/rows.js"
import { orDieSql, parseJson } from "./internal/sql.js"
import { notFound, type StoreError } from "./StoreError.js"

/** A page of a log entry's trajectories as the store reads it, with the next page's offset (the server's cursor). */
export interface OffsetPage extends Omit<TrajectoryPage, "next_cursor"> {
  /** The offset of the next page, or null at the end. */
  readonly next_offset: number | null
}

/** The finite numbers of a stored JSON object (a metrics column); none when it is not one. */
const metricsOf = (text: string | null): Record<string, number> => {
  const value = parseJson(text)
  return finiteMetrics(typeof value === "object" && value !== null ? (value as Record<string, unknown>) : undefined)
}

/**
 * Models with what the projects page shows of each, in one query (newest first): the latest checkpoint step,
 * the metrics of the last `train` and `val` log entries, the latest job's status and the number of jobs.
 */
const summaries = (sql: SqlClient.SqlClient, modelId?: string) =>
  Effect.map(
    sql<
      ModelRow & {
        readonly latest_step: number | null
        readonly last_train: string | null
        readonly last_val: string | null
        readonly job_status: string | null
        readonly jobs: number
      }
    >`SELECT m.id, m.entity, m.project, m.name, m.base_model, m.created_at,
      (SELECT MAX(step) FROM checkpoints c WHERE c.model_id = m.id) AS latest_step,
      (SELECT metrics FROM logs l WHERE l.model_id = m.id AND l.split = 'train'
        ORDER BY l.step DESC, l.rowid DESC LIMIT 1) AS last_train,
      (SELECT metrics FROM logs l WHERE l.model_id = m.id AND l.split = 'val'
        ORDER BY l.step DESC, l.rowid DESC LIMIT 1) AS last_val,
      (SELECT status FROM training_jobs j WHERE j.model_id = m.id ORDER BY j.seq DESC LIMIT 1) AS job_status,
      (SELECT COUNT(*) FROM training_jobs j WHERE j.model_id = m.id) AS jobs
      FROM models m ${modelId === undefined ? sql`` : sql`WHERE m.id = ${modelId}`}
      ORDER BY m.created_at DESC, m.rowid DESC`,
    (rows) =>
      rows.map(
        ({ last_train, last_val, ...row }): ModelSummary => ({
          ...row,
          last_reward: metricsOf(last_train).reward ?? null,
          last_val_reward: metricsOf(last_val).reward ?? null
        })
      )
  )

/** Every model (newest first) with its latest step, last train and val rewards and latest job's status. */
export const models: Effect.Effect<ReadonlyArray<ModelSummary>, never, SqlClient.SqlClient> = Effect.flatMap(
  SqlClient.SqlClient,
  (sql) => summaries(sql)
).pipe(orDieSql, Effect.withSpan("Dashboard.models"))

/** One model's page: its logged steps, gradient steps, checkpoints and jobs, oldest first; `NotFound` without it. */
export const overview = (modelId: string): Effect.Effect<Overview, StoreError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const [model] = yield* summaries(sql, modelId)
    if (model === undefined) return yield* Effect.fail(notFound(`model ${modelId} not found`))
    const logs = yield* sql<{
      readonly id: string
      readonly split: string
      readonly step: number
      readonly metrics: string
      readonly created_at: string
    }>`SELECT id, split, step, metrics, created_at FROM logs WHERE model_id = ${modelId} ORDER BY step, rowid`
    const jobs = yield* sql<JobSummary>`SELECT id, kind, status, progress, created_at, updated_at, training_start,
      training_end, step, error_message FROM training_jobs WHERE model_id = ${modelId} ORDER BY seq`
    const events = yield* sql<{ readonly job_id: string; readonly data: string }>`SELECT e.job_id, e.data
      FROM job_events e JOIN training_jobs j ON j.id = e.job_id
      WHERE j.model_id = ${modelId} AND e.type = 'gradient_step' ORDER BY j.seq, e.seq`
    const checkpoints = yield* sql<{
      readonly step: number
      readonly metrics: string
      readonly created_at: string
    }>`SELECT step, metrics, created_at FROM checkpoints WHERE model_id = ${modelId} ORDER BY step`
    const kept = new Set(checkpoints.map((c) => c.step))
    const made = new Set(jobs.flatMap((job) => (job.status === "COMPLETED" && job.step !== null ? [job.step] : [])))
    const deleted: Array<CheckpointPoint> = [...made]
      .filter((step) => !kept.has(step))
      .map((step) => ({ step, deleted: true, metrics: {}, created_at: null }))
    const counters = new Map<string, number>()
    const points = logs.map((log) => ({ ...log, metrics: metricsOf(log.metrics) }))
    const names = [...new Set(points.flatMap((log) => Object.keys(log.metrics)))]
    return {
      model,
      logs: points,
      agent_metrics: names.filter((name) => !COMPUTED.has(name) && !MEASURED.has(name)),
      rollout_metrics: names.filter((name) => MEASURED.has(name)),
      gradient_steps: events.map((event) => {
        const index = counters.get(event.job_id) ?? 0
        counters.set(event.job_id, index + 1)
        return { job_id: event.job_id, index, metrics: metricsOf(event.data) }
      }),
      checkpoints: [
        ...checkpoints.map((c) => ({
          step: c.step,
          deleted: false,
          metrics: metricsOf(c.metrics),
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
      readonly model_name: string
      readonly split: string
      readonly step: number
      readonly metrics: string
      readonly created_at: string
      readonly trajectory_groups: string
    }>`SELECT l.id, l.model_id, m.name AS model_name, l.split, l.step, l.metrics, l.created_at, l.trajectory_groups
      FROM logs l JOIN models m ON m.id = l.model_id WHERE l.id = ${logId}`,
    (rows) => {
      const row = rows[0]
      if (row === undefined) return Effect.fail(notFound(`log entry ${logId} not found`))
      const groups = parseJson(row.trajectory_groups)
      const log: StepLog = {
        id: row.id,
        model_id: row.model_id,
        model_name: row.model_name,
        split: row.split,
        step: row.step,
        metrics: metricsOf(row.metrics),
        created_at: row.created_at
      }
      return Effect.succeed({
        log,
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
): Effect.Effect<OffsetPage, StoreError, SqlClient.SqlClient> =>
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
): Effect.Effect<{ readonly log: OffsetPage["log"]; readonly trajectory: unknown }, StoreError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const { groups, log } = yield* readLog(sql, logId)
    const found = groups[group]?.trajectories?.[index]
    if (found === undefined) {
      return yield* Effect.fail(notFound(`log entry ${logId} has no trajectory ${index} in group ${group}`))
    }
    return { log, trajectory: found }
  }).pipe(orDieSql, Effect.withSpan("Dashboard.trajectory"))
