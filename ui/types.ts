/** The shapes of the server's `/v1/local/...` reads (see `src/local/store/Dashboard.ts`). */

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

export interface LogPoint {
  readonly id: string
  readonly split: string
  readonly step: number
  readonly metrics: Readonly<Record<string, number>>
  readonly created_at: string
}

export interface GradientPoint {
  readonly job_id: string
  readonly index: number
  readonly metrics: Readonly<Record<string, number>>
}

export interface CheckpointPoint {
  readonly step: number
  readonly deleted: boolean
  readonly metrics: Readonly<Record<string, number>>
  readonly created_at: string | null
}

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

export interface Overview {
  readonly model: ModelSummary
  readonly logs: ReadonlyArray<LogPoint>
  readonly gradient_steps: ReadonlyArray<GradientPoint>
  readonly checkpoints: ReadonlyArray<CheckpointPoint>
  readonly jobs: ReadonlyArray<JobSummary>
}

export interface TrajectoryRow {
  readonly group: number
  readonly index: number
  readonly reward: number
  readonly metrics: Readonly<Record<string, unknown>>
  readonly turns: number
  readonly tool_calls: number
  readonly preview: string
}

export interface GroupSpread {
  readonly group: number
  readonly size: number
  readonly mean: number
  readonly min: number
  readonly max: number
  readonly std: number
}

export interface TrajectoryPage {
  readonly log: LogPoint & { readonly model_id: string }
  readonly total: number
  readonly data: ReadonlyArray<TrajectoryRow>
  readonly next_cursor: string | null
  readonly groups: ReadonlyArray<GroupSpread>
}

export interface TokenLogprob {
  readonly token: string
  readonly logprob: number
}

export interface ToolCall {
  readonly id?: string
  readonly function?: { readonly name?: string; readonly arguments?: string }
}

export interface Message {
  readonly role?: string
  readonly content?: unknown
  readonly name?: string
  readonly tool_calls?: ReadonlyArray<ToolCall> | null
  readonly tool_call_id?: string
}

export interface Choice {
  readonly message: Message
  readonly finish_reason?: string
  readonly logprobs?: { readonly content?: ReadonlyArray<TokenLogprob> | null } | null
}

export interface Trajectory {
  readonly messages_and_choices?: ReadonlyArray<Message | Choice>
  readonly reward?: number
  readonly metrics?: Readonly<Record<string, unknown>>
  readonly metadata?: Readonly<Record<string, unknown>>
  readonly logs?: ReadonlyArray<string>
}

export interface JobEvent {
  readonly id: string
  readonly type: string
  readonly data: Readonly<Record<string, unknown>>
}

export interface ModelUsage {
  readonly prompt_tokens: number
  readonly completion_tokens: number
  readonly total_tokens: number
  readonly requests: number
}

export interface CallFeedback {
  readonly id: string
  readonly feedback_type: string
  readonly payload: unknown
  readonly created_at: string
}

/** A call without inputs and outputs (see `src/local/store/DashboardTraces.ts`). */
export interface CallSummary {
  readonly id: string
  readonly trace_id: string
  readonly parent_id: string | null
  readonly op_name: string
  readonly display_name: string | null
  readonly started_at: string
  readonly ended_at: string | null
  readonly latency_ms: number | null
  readonly status: "success" | "error" | "running"
  readonly exception: string | null
  readonly usage: Readonly<Record<string, ModelUsage>> | null
  readonly feedback: ReadonlyArray<CallFeedback>
}

export interface TraceRoot extends CallSummary {
  readonly calls: number
}

export interface TraceProject {
  readonly project_id: string
  readonly calls: number
  readonly traces: number
  readonly latest_started_at: string
}

export interface TraceTree {
  readonly project_id: string
  readonly trace_id: string
  readonly calls: ReadonlyArray<CallSummary>
  readonly truncated: boolean
}

export interface CallDetail extends CallSummary {
  readonly attributes: unknown
  readonly inputs: unknown
  readonly output: unknown
  readonly summary: unknown
}
