/**
 * Trajectories as the training service takes them: the messages sent as context mixed
 * with the choices sampled (the trainable assistant turns), the reward, and what else a rollout recorded.
 *
 * @since 0.1.0
 */
import * as Arbitrary from "effect/Arbitrary"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { Choice, ResponseMessage, ResponseToolCall } from "./ChatCompletion.js"
import {
  AssistantMessage,
  CustomToolCall,
  DeveloperMessage,
  FunctionMessage,
  FunctionToolCall,
  Message,
  SystemMessage,
  Tool,
  ToolMessage,
  UserMessage
} from "./ChatMessage.js"
import { checked } from "./internal/checked.js"
import { entry } from "./internal/trajectoryFastPath.js"
import { JsonObject, OtherKeys, optionalKey } from "./Json.js"

/** The `finish_reason`s the training service takes on a trajectory's choice. */
export const FinishReason = Schema.Literal("stop", "length", "tool_calls", "content_filter", "function_call")
/** @see {@link FinishReason} */
export type FinishReason = typeof FinishReason.Type

/**
 * A tool call of a choice in a trajectory: a function call (as chat completions return it), or a custom tool's
 * call (`{id, type: "custom", custom: {name, input}}`, free-form input), which the published schema also takes
 * there.
 */
export const EntryToolCall = Schema.Union(ResponseToolCall, CustomToolCall).annotations({
  identifier: "EntryToolCall"
})
/** @see {@link EntryToolCall} */
export type EntryToolCall = typeof EntryToolCall.Type

/**
 * A choice as an entry of `messages_and_choices`: a chat completion's {@link Choice}, whose message's
 * `tool_calls` may also hold custom tool calls ({@link EntryToolCall}). Every `Choice` is one.
 */
export const EntryChoice = Schema.Struct({
  ...Choice.fields,
  message: Schema.Struct({
    ...ResponseMessage.fields,
    tool_calls: Schema.optional(Schema.NullOr(Schema.Array(EntryToolCall)))
  })
}).annotations({ identifier: "Choice" })
/** @see {@link EntryChoice} */
export type EntryChoice = typeof EntryChoice.Type

/**
 * A choice as the training service takes it in a trajectory: a chat completion's choice (every optional
 * field of it and of its message may be `null`, as openai-python writes unset fields) whose message is the
 * assistant's, whose tool calls (function calls, or custom tool calls as the published schema allows) carry
 * their `id`, and whose `finish_reason` is one of {@link FinishReason}. Its type is the narrower one;
 * {@link MessageOrChoice} checks entries against it.
 */
export const TrajectoryChoice = Schema.Struct({
  ...Choice.fields,
  message: Schema.Struct({
    ...ResponseMessage.fields,
    role: Schema.Literal("assistant"),
    tool_calls: Schema.optional(Schema.NullOr(Schema.Array(Schema.Union(FunctionToolCall, CustomToolCall))))
  }),
  finish_reason: FinishReason
}).annotations({ identifier: "TrajectoryChoice" })
/** @see {@link TrajectoryChoice} */
export type TrajectoryChoice = typeof TrajectoryChoice.Type

/**
 * A context message as the training service takes it in a trajectory: developer, system, user, assistant,
 * tool and function messages. Custom-role and generic (`author`) messages, which chat completions accept,
 * are not among them.
 */
export const TrajectoryMessage = Schema.Union(
  DeveloperMessage,
  SystemMessage,
  UserMessage,
  AssistantMessage,
  ToolMessage,
  FunctionMessage
).annotations({ identifier: "TrajectoryMessage" })
/** @see {@link TrajectoryMessage} */
export type TrajectoryMessage = typeof TrajectoryMessage.Type

const strictEntry = Schema.Union(TrajectoryChoice, TrajectoryMessage)

/** The roles the training service takes for a context message of a trajectory. */
export const TRAJECTORY_ROLES = ["developer", "system", "user", "assistant", "tool", "function"] as const

type Role = (typeof TRAJECTORY_ROLES)[number]
const strictMessage: Record<Role, Schema.Schema.AnyNoContext> = {
  developer: DeveloperMessage,
  system: SystemMessage,
  user: UserMessage,
  assistant: AssistantMessage,
  tool: ToolMessage,
  function: FunctionMessage
}

const finishReasons: ReadonlySet<unknown> = new Set(FinishReason.literals)

/**
 * Whether an {@link EntryChoice} is a {@link TrajectoryChoice}, checked without allocating (mirrors `choiceOf`).
 * Encoding asks it before the value's shape is checked, so it takes any value without throwing (false: ask
 * `choiceOf`).
 */
const takesChoice = (choice: EntryChoice): boolean => {
  const message: unknown = choice.message
  if (!finishReasons.has(choice.finish_reason) || typeof message !== "object" || message === null) return false
  const { role, tool_calls: calls } = message as { readonly role?: unknown; readonly tool_calls?: unknown }
  return (
    role === "assistant" &&
    (calls == null ||
      (Array.isArray(calls) &&
        calls.every(
          (call: unknown) =>
            typeof call === "object" && call !== null && typeof (call as { id?: unknown }).id === "string"
        )))
  )
}

const optionalString = (u: unknown): boolean => u === undefined || typeof u === "string"

/**
 * Whether a message (as the chat-completions schemas decoded it) is one of {@link TrajectoryMessage}, for the
 * common shapes only (string content, no tool calls): `false` means "ask the schema", never "refused".
 */
const takesMessage = (message: Message): boolean => {
  const m = message as Readonly<Record<string, unknown>>
  switch (m.role) {
    case "system":
    case "user":
    case "developer":
      return typeof m.content === "string" && optionalString(m.name)
    case "tool":
      return typeof m.content === "string" && typeof m.tool_call_id === "string"
    case "assistant":
      return (
        (m.content === null || optionalString(m.content)) &&
        optionalString(m.name) &&
        m.tool_calls === undefined &&
        m.function_call == null &&
        m.audio == null &&
        (m.refusal === null || optionalString(m.refusal))
      )
    default:
      return false
  }
}

/** What {@link TrajectoryChoice} asks of a value that is a `Choice` already. */
const choiceOf = ParseResult.validateEither(
  Schema.Struct({
    finish_reason: FinishReason,
    message: Schema.Struct({
      role: Schema.Literal("assistant"),
      tool_calls: Schema.optional(Schema.NullOr(Schema.Array(Schema.Struct({ id: Schema.String }))))
    })
  })
)
const roleOf = ParseResult.validateEither(Schema.Struct({ role: Schema.Literal(...TRAJECTORY_ROLES) }))

const issueOf = <A>(result: Either.Either<A, ParseResult.ParseIssue>): ParseResult.ParseIssue | undefined =>
  Either.isLeft(result) ? result.left : undefined

/**
 * What the training service would refuse of a chat-completions message or choice as an entry of
 * `messages_and_choices`, as a parse issue at the field (a `finish_reason` or role it does not take, a message
 * that does not fit its role's schema), or `undefined` when it takes the entry.
 */
export const entryIssue = (entry: EntryChoice | Message): ParseResult.ParseIssue | undefined => {
  // Only what TrajectoryChoice adds to a Choice (which the entry already is) is checked, not its logprobs again;
  // the schema runs only to describe a choice the plain checks refuse.
  if ("message" in entry && "index" in entry) return takesChoice(entry) ? undefined : issueOf(choiceOf(entry))
  if (takesMessage(entry)) return undefined
  const role = issueOf(roleOf(entry))
  if (role !== undefined) return role
  return issueOf(ParseResult.validateEither(strictMessage[(entry as { readonly role: Role }).role])(entry))
}

const EntryUnion = Schema.Union(EntryChoice, Message)

/**
 * An entry of `messages_and_choices`: a plain message (context) or a choice (sampled, trainable). Typed as
 * any chat-completions message or choice ({@link EntryChoice}: custom tool calls included), so a completion's
 * choice goes in as it came; decoding and encoding check it as the training service does
 * ({@link TrajectoryChoice}, {@link TrajectoryMessage}), so a role or a `finish_reason` it would refuse fails
 * here, naming the field.
 */
export const MessageOrChoice: Schema.Schema<EntryChoice | Message, typeof EntryUnion.Encoded> = checked(
  EntryUnion,
  entryIssue,
  {
    identifier: "MessageOrChoice",
    // The union in one pass (`internal/trajectoryFastPath.ts`): an entry crosses it three times an RL step.
    fast: entry,
    // Values drawn for property tests come from the strict schemas (the chat-completions ones would nearly all fail).
    arbitrary: () => Arbitrary.makeLazy(strictEntry) as Arbitrary.LazyArbitrary<EntryChoice | Message>
  }
)
/** @see {@link MessageOrChoice} */
export type MessageOrChoice = typeof MessageOrChoice.Type

/** Whether an entry of `messages_and_choices` is a choice (it has `message` and `index`, not `role`). */
export const isChoice = (entry: MessageOrChoice): entry is EntryChoice => "message" in entry && "index" in entry

/** A numeric or boolean metric value. */
export const MetricValue = Schema.Union(Schema.Finite, Schema.Boolean)
/** @see {@link MetricValue} */
export type MetricValue = typeof MetricValue.Type

/** Metrics by name. */
export const Metrics = Schema.Record({ key: Schema.String, value: MetricValue })
/** @see {@link Metrics} */
export type Metrics = typeof Metrics.Type

/** Metadata by name, as a rollout records it: scalars or null. */
export const Metadata = Schema.Record({
  key: Schema.String,
  value: Schema.NullOr(Schema.Union(Schema.Finite, Schema.String, Schema.Boolean))
})
/** @see {@link Metadata} */
export type Metadata = typeof Metadata.Type

/**
 * The `metadata` of a trajectory or a group as the service takes it: any JSON object (a rollout records
 * {@link Metadata}, scalars, which is one).
 */
export const AnyMetadata: Schema.Schema<JsonObject> = JsonObject
/** @see {@link AnyMetadata} */
export type AnyMetadata = JsonObject

/**
 * Exchanges a rollout held in other APIs than chat completions (the Responses API, for one), by API: a JSON
 * object the service keeps with the trajectory but does not train on (it trains on `messages_and_choices`).
 */
export const Exchanges: Schema.Schema<JsonObject> = JsonObject
/** @see {@link Exchanges} */
export type Exchanges = JsonObject

/** Another conversation of the same rollout (for example a sub-agent's), with its own tools. */
export const History = Schema.Struct({
  messages_and_choices: Schema.Array(MessageOrChoice),
  tools: Schema.optional(Schema.NullOr(Schema.Array(Tool)))
}).annotations({ identifier: "History" })
/** @see {@link History} */
export type History = typeof History.Type

/**
 * One rollout: its conversation, reward, and what it recorded. As in the published schema, a body may leave
 * out `messages_and_choices` (empty) and `reward` (0.0: a client that drops defaults omits a zero reward);
 * `exchanges` holds what the rollout exchanged in other APIs ({@link Exchanges}); `metadata` is any JSON object.
 * Keys not named here are accepted and dropped when decoding (the published schema takes extra fields);
 * `auto_metrics` is no longer in the published schema, which takes it as such an extra field.
 */
export const Trajectory = Schema.Struct({
  messages_and_choices: Schema.optionalWith(Schema.Array(MessageOrChoice), { default: () => [] }),
  reward: Schema.optionalWith(Schema.Finite, { default: () => 0 }),
  tools: Schema.optional(Schema.NullOr(Schema.Array(Tool))),
  additional_histories: Schema.optional(Schema.Array(History)),
  initial_policy_version: Schema.optional(Schema.NullOr(Schema.Int)),
  final_policy_version: Schema.optional(Schema.NullOr(Schema.Int)),
  metrics: Schema.optional(Metrics),
  auto_metrics: Schema.optional(Metrics),
  metadata: Schema.optional(AnyMetadata),
  logs: Schema.optional(Schema.Array(Schema.String)),
  start_time: Schema.optional(Schema.String),
  exchanges: Schema.optional(Exchanges)
}).annotations({ identifier: "Trajectory" })
/** @see {@link Trajectory} */
export type Trajectory = typeof Trajectory.Type

/**
 * A rollout that failed, recorded in its group instead of a trajectory. The published schema requires all three
 * fields, so `traceback` is always there: `""` when there is none (a body decoded without one gets `""`; one
 * encoded always carries it).
 */
export const RolloutException = Schema.Struct({
  type: Schema.String,
  message: Schema.String,
  traceback: Schema.optionalWith(Schema.String, { default: () => "" })
}).annotations({ identifier: "RolloutException" })
/** @see {@link RolloutException} */
export type RolloutException = typeof RolloutException.Type

/** Trajectories of the same scenario; group-level metrics, metadata, logs and failed rollouts. */
export const TrajectoryGroup = Schema.Struct({
  trajectories: Schema.Array(Trajectory),
  metadata: Schema.optional(AnyMetadata),
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
