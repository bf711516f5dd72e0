/**
 * The answers of the dashboard's reads (`/v1/local/...`, see `DashboardApi`): built by the store's `Dashboard`
 * and `DashboardTraces`, sent by the server, read by the page (`ui/types.ts` takes them from here). Types only:
 * the page's bundle imports nothing else of the package.
 *
 * @since 0.1.0
 */

/** A model as stored. */
export interface ModelRow {
  readonly id: string
  readonly entity: string
  readonly project: string
  readonly name: string
  readonly base_model: string
  readonly created_at: string
}

/** A model as the projects page lists it. */
export interface ModelSummary extends ModelRow {
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

/**
 * A job as the model page lists it: the published record's fields and names (`status` one of `PENDING`,
 * `RUNNING`, `COMPLETED`, `FAILED`, `CANCELLED`), with its kind and the step it made.
 */
export interface JobSummary {
  readonly id: string
  readonly kind: string
  readonly status: string
  readonly progress: number | null
  readonly created_at: string
  readonly updated_at: string
  readonly training_start: string | null
  readonly training_end: string | null
  readonly step: number | null
  readonly error_message: string | null
}

/** Everything the model page shows. */
export interface Overview {
  readonly model: ModelSummary
  readonly logs: ReadonlyArray<LogPoint>
  /**
   * The names of the agents' own metrics in the logs, in the order they first appear: the trajectories'
   * metrics (each log entry holds their mean over its trajectories) and `group_<name>` for the groups'.
   */
  readonly agent_metrics: ReadonlyArray<string>
  /** The names of the metrics the rollouts measured of themselves in the logs (duration, completions, tokens). */
  readonly rollout_metrics: ReadonlyArray<string>
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

/** A log entry with its model's id and name, as the step page shows it. */
export interface StepLog extends LogPoint {
  readonly model_id: string
  readonly model_name: string
}

/** A page of a log entry's trajectories. */
export interface TrajectoryPage {
  readonly log: StepLog
  readonly total: number
  readonly data: ReadonlyArray<TrajectoryRow>
  /** The cursor of the next page, or null at the end. */
  readonly next_cursor: string | null
  readonly groups: ReadonlyArray<GroupSpread>
}

/** Token counts of one model. */
export interface ModelUsage {
  readonly prompt_tokens: number
  readonly completion_tokens: number
  readonly total_tokens: number
  readonly requests: number
}

/** Token counts by model. */
export type Usage = Readonly<Record<string, ModelUsage>>

/** A traced project: how many calls and traces it holds, and when its latest call started. */
export interface TraceProject {
  readonly project_id: string
  readonly calls: number
  readonly traces: number
  readonly latest_started_at: string
}

/** Feedback on a call: its type and payload (e.g. the workflow's `reward`). */
export interface CallFeedback {
  readonly id: string
  readonly feedback_type: string
  readonly payload: unknown
  readonly created_at: string
}

/** How a call ended: `running` until its end arrives. */
export type CallStatus = "success" | "error" | "running"

/** A call without its inputs and outputs, as the lists and the tree show it. */
export interface CallSummary {
  readonly id: string
  readonly trace_id: string
  readonly parent_id: string | null
  readonly op_name: string
  readonly display_name: string | null
  readonly started_at: string
  readonly ended_at: string | null
  readonly latency_ms: number | null
  readonly status: CallStatus
  readonly exception: string | null
  readonly usage: Usage | null
  readonly feedback: ReadonlyArray<CallFeedback>
}

/** A trace as the list shows it: its root call and how many calls it holds. */
export interface TraceRoot extends CallSummary {
  readonly calls: number
}

/** A page of a project's traces as answered, latest first: the next page's cursor as text. */
export interface RootPageAnswer {
  readonly data: ReadonlyArray<TraceRoot>
  readonly next_cursor: string | null
}

/** One trace's calls by start, the most `MAX_TREE` of `DashboardTraces` (5,000) (`truncated` when there are more). */
export interface TraceTree {
  readonly project_id: string
  readonly trace_id: string
  readonly calls: ReadonlyArray<CallSummary>
  readonly truncated: boolean
}

/** A call in full: its summary, attributes, inputs, output and summary as stored. */
export interface CallDetail extends CallSummary {
  readonly attributes: unknown
  readonly inputs: unknown
  readonly output: unknown
  readonly summary: unknown
}
