/**
 * Trajectories as the training service takes them (seed section 2.4): the messages sent as context mixed
 * with the choices sampled (the trainable assistant turns), the reward, and what else a rollout recorded.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { Choice } from "./ChatCompletion.js"
import { Message, Tool } from "./ChatMessage.js"
import { OtherKeys, optionalKey } from "./Json.js"

/** An entry of `messages_and_choices`: a plain message (context) or a choice (sampled, trainable). */
export const MessageOrChoice = Schema.Union(Choice, Message).annotations({ identifier: "MessageOrChoice" })
/** @see {@link MessageOrChoice} */
export type MessageOrChoice = typeof MessageOrChoice.Type

/** Whether an entry of `messages_and_choices` is a choice (it has `message` and `index`, not `role`). */
export const isChoice = (entry: MessageOrChoice): entry is Choice => "message" in entry && "index" in entry

/** A numeric or boolean metric value. */
export const MetricValue = Schema.Union(Schema.Finite, Schema.Boolean)
/** @see {@link MetricValue} */
export type MetricValue = typeof MetricValue.Type

/** Metrics by name. */
export const Metrics = Schema.Record({ key: Schema.String, value: MetricValue })
/** @see {@link Metrics} */
export type Metrics = typeof Metrics.Type

/** Metadata by name: scalars or null. */
export const Metadata = Schema.Record({
  key: Schema.String,
  value: Schema.NullOr(Schema.Union(Schema.Finite, Schema.String, Schema.Boolean))
})
/** @see {@link Metadata} */
export type Metadata = typeof Metadata.Type

/** Another conversation of the same rollout (for example a sub-agent's), with its own tools. */
export const History = Schema.Struct({
  messages_and_choices: Schema.Array(MessageOrChoice),
  tools: Schema.optional(Schema.NullOr(Schema.Array(Tool)))
}).annotations({ identifier: "History" })
/** @see {@link History} */
export type History = typeof History.Type

/** One rollout: its conversation, reward, and what it recorded. */
export const Trajectory = Schema.Struct({
  messages_and_choices: Schema.Array(MessageOrChoice),
  reward: Schema.Finite,
  tools: Schema.optional(Schema.NullOr(Schema.Array(Tool))),
  additional_histories: Schema.optional(Schema.Array(History)),
  initial_policy_version: Schema.optional(Schema.NullOr(Schema.Int)),
  final_policy_version: Schema.optional(Schema.NullOr(Schema.Int)),
  metrics: Schema.optional(Metrics),
  auto_metrics: Schema.optional(Metrics),
  metadata: Schema.optional(Metadata),
  logs: Schema.optional(Schema.Array(Schema.String)),
  start_time: Schema.optional(Schema.String)
}).annotations({ identifier: "Trajectory" })
/** @see {@link Trajectory} */
export type Trajectory = typeof Trajectory.Type

/** A rollout that failed, recorded in its group instead of a trajectory. */
export const RolloutException = Schema.Struct({
  type: Schema.String,
  message: Schema.String,
  traceback: Schema.optional(Schema.String)
}).annotations({ identifier: "RolloutException" })
/** @see {@link RolloutException} */
export type RolloutException = typeof RolloutException.Type

/** Trajectories of the same scenario; group-level metrics, metadata, logs and failed rollouts. */
export const TrajectoryGroup = Schema.Struct({
  trajectories: Schema.Array(Trajectory),
  metadata: Schema.optional(Metadata),
  metrics: Schema.optional(Metrics),
  logs: Schema.optional(Schema.Array(Schema.String)),
  exceptions: Schema.optional(Schema.Array(RolloutException))
}).annotations({ identifier: "TrajectoryGroup" })
/** @see {@link TrajectoryGroup} */
export type TrajectoryGroup = typeof TrajectoryGroup.Type

/** The body of the log endpoint: groups under a split (conventionally `train`, `val` or `test`). */
export const LogRequest = Schema.Struct({
  split: Schema.String,
  trajectory_groups: Schema.Array(TrajectoryGroup)
}).annotations({ identifier: "LogRequest" })
/** @see {@link LogRequest} */
export type LogRequest = typeof LogRequest.Type

/**
 * The success body of the log endpoint. The hosted service leaves it unspecified (often empty, read as
 * null); the embedded backend returns the metrics it computed, as an extension.
 */
export const LogResult = Schema.NullOr(
  Schema.Struct({ metrics: optionalKey(Schema.Record({ key: Schema.String, value: Schema.Finite })) }, OtherKeys)
).annotations({ identifier: "LogResult" })
/** @see {@link LogResult} */
export type LogResult = typeof LogResult.Type
