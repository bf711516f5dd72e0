/**
 * The shapes the page reads: the `/v1/local/...` answers, as the server declares them
 * (`src/local/store/DashboardShapes.ts`), and the parts of a stored trajectory and a job event it shows.
 */

export type {
  CallDetail,
  CallFeedback,
  CallSummary,
  CheckpointPoint,
  GradientPoint,
  GroupSpread,
  JobSummary,
  LogPoint,
  ModelSummary,
  ModelUsage,
  Overview,
  StepLog,
  TraceProject,
  TraceRoot,
  TraceTree,
  TrajectoryPage,
  TrajectoryRow
} from "../src/local/store/DashboardShapes.js"

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
