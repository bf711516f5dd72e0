/**
 * Training jobs (surface B): the RL and SFT job requests, `experimental_config`, the job record, and the
 * events a job emits while it runs.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type * as AST from "effect/SchemaAST"
import type { ParseOptions } from "effect/SchemaAST"
import { LooseMetric, OtherKeys, optionalKey } from "./Json.js"
import { ModelId, PageLimit } from "./Model.js"
import { TrajectoryGroup } from "./Trajectory.js"

/**
 * A training job's id: a UUID. The service checks it as one in the job's paths (a 422 otherwise), so it only
 * hands out UUIDs, and the client checks it before sending.
 */
export const TrainingJobId = Schema.UUID.pipe(Schema.brand("effect-rl/TrainingJobId"))
/** @see {@link TrainingJobId} */
export type TrainingJobId = typeof TrainingJobId.Type

/**
 * A training job event's id: a non-empty string, as the reference client types it. The service makes UUIDs (the
 * embedded backend too), but only ever takes one back as the listing's `after` cursor, any string; so a page of
 * events with ids of another form is followed, not refused. (Not empty: an id is the cursor, and the key by
 * which a follow drops events it has seen.)
 */
export const TrainingJobEventId = Schema.NonEmptyString.pipe(Schema.brand("effect-rl/TrainingJobEventId"))
/** @see {@link TrainingJobEventId} */
export type TrainingJobEventId = typeof TrainingJobEventId.Type

const nullable = <A, I, R>(schema: Schema.Schema<A, I, R>) => Schema.optional(Schema.NullOr(schema))

/** A named key of an open record: absent, null or a value (never `undefined`, see {@link optionalKey}). */
const known = <A, I, R>(schema: Schema.Schema<A, I, R>) => optionalKey(Schema.NullOr(schema))

/** How importance ratios are taken: per token, per sequence, or an average of the two. */
export const ImportanceSamplingLevel = Schema.Literal("token", "sequence", "average", "geometric_average")
/** @see {@link ImportanceSamplingLevel} */
export type ImportanceSamplingLevel = typeof ImportanceSamplingLevel.Type

/**
 * `experimental_config` of an RL job (the keys of the current published document). Every key
 * is optional and nullable; keys it does not name are kept, when decoding and when encoding, since clients
 * send a superset and the service tolerates it.
 */
export const ExperimentalConfig = Schema.Struct(
  {
    advantage_balance: known(Schema.Finite),
    allow_training_without_logprobs: known(Schema.Boolean),
    epsilon: known(Schema.Finite),
    epsilon_high: known(Schema.Finite),
    importance_sampling_level: known(ImportanceSamplingLevel),
    kimi_k2_tau: known(Schema.Finite),
    kl_penalty_coef: known(Schema.Finite),
    kl_penalty_reference_step: known(Schema.Int),
    kl_penalty_source: known(Schema.Literal("current_learner", "sample")),
    kl_penalty_step_lag: known(Schema.Int),
    kl_ref_adapter_path: known(Schema.String),
    learning_rate: known(Schema.Finite),
    logprob_calculation_chunk_size: known(Schema.Int),
    loss_fn: known(Schema.Literal("cispo", "ppo")),
    mask_prob_ratio: known(Schema.Boolean),
    max_negative_advantage_importance_sampling_weight: known(Schema.Finite),
    normalize_advantages: known(Schema.Boolean),
    num_trajectories_learning_rate_multiplier_power: known(Schema.Finite),
    packed_sequence_length: known(Schema.Int),
    plot_tensors: known(Schema.Boolean),
    ppo: known(Schema.Boolean),
    precalculate_logprobs: known(Schema.Boolean),
    scale_learning_rate_by_reward_std_dev: known(Schema.Boolean),
    scale_rewards: known(Schema.Boolean),
    truncated_importance_sampling: known(Schema.Finite)
  },
  OtherKeys
).annotations({ identifier: "ExperimentalConfig" })
/** @see {@link ExperimentalConfig} */
export type ExperimentalConfig = typeof ExperimentalConfig.Type

/** The body of RL job creation: trajectory groups to train the model on, and the training knobs. */
export const CreateTrainingJob = Schema.Struct({
  model_id: ModelId,
  trajectory_groups: Schema.Array(TrajectoryGroup),
  experimental_config: nullable(ExperimentalConfig)
}).annotations({ identifier: "CreateTrainingJob" })
/** @see {@link CreateTrainingJob} */
export type CreateTrainingJob = typeof CreateTrainingJob.Type

/**
 * Parse options that refuse keys a schema does not name (an `Unexpected` issue at the key, answered by the
 * embedded backend as pydantic's `extra_forbidden`), in both directions: the published SFT schemas declare
 * `additionalProperties: false`, so a key they do not name is a 422 on the service.
 */
const closed = { parseOptions: { onExcessProperty: "error", errors: "all" } } as const

/**
 * `config.metric_logging` of an SFT job: whether the service logs metrics while it trains and, optionally, the
 * training step at which it does (a positive integer). No other key.
 */
export const SftMetricLogging = Schema.Struct({
  enabled: Schema.optional(Schema.Boolean),
  target_training_step: Schema.optional(Schema.NullOr(Schema.Int.pipe(Schema.positive())))
}).annotations({ identifier: "SftMetricLogging", ...closed })
/** @see {@link SftMetricLogging} */
export type SftMetricLogging = typeof SftMetricLogging.Type

/**
 * `config` of an SFT job, as the published schema closes it: `batch_size` 1 to 32 or `"auto"`, `learning_rate`
 * one number or one per epoch, which `assistant_turns` train (`all`, the default, or `last`), `metric_logging`.
 * A key it does not name is refused (encoding fails before the request is sent, naming the key).
 */
export const SftTrainingConfig = Schema.Struct({
  batch_size: Schema.optional(
    Schema.NullOr(Schema.Union(Schema.Int.pipe(Schema.between(1, 32)), Schema.Literal("auto")))
  ),
  learning_rate: Schema.optional(Schema.NullOr(Schema.Union(Schema.Finite, Schema.Array(Schema.Finite)))),
  assistant_turns: Schema.optional(Schema.Literal("all", "last")),
  metric_logging: Schema.optional(Schema.NullOr(SftMetricLogging))
}).annotations({ identifier: "SftTrainingConfig", ...closed })
/** @see {@link SftTrainingConfig} */
export type SftTrainingConfig = typeof SftTrainingConfig.Type

/** An object (a dictionary): what a value that is not one fails against, as any object schema's would. */
const OBJECT = Schema.Struct({}).ast

/** An empty object, or an `Unexpected` issue at each of its keys (what `onExcessProperty: "error"` reports). */
const noKey = (
  u: unknown,
  _: ParseOptions,
  ast: AST.Declaration
): Effect.Effect<{ readonly [key: string]: never }, ParseResult.ParseIssue> => {
  if (typeof u !== "object" || u === null || Array.isArray(u)) return ParseResult.fail(new ParseResult.Type(OBJECT, u))
  const at = (key: string) =>
    new ParseResult.Pointer(key, u, new ParseResult.Unexpected((u as Record<string, unknown>)[key], "takes no key"))
  const [first, ...rest] = Object.keys(u)
  if (first === undefined) return ParseResult.succeed({})
  return ParseResult.fail(new ParseResult.Composite(ast, u, [at(first), ...rest.map(at)]))
}

/**
 * `experimental_config` of an SFT job: reserved; the published schema accepts no key in it, so only `{}` (or
 * `null`, or leaving it out) is sent.
 */
export const SftExperimentalConfig: Schema.Schema<{ readonly [key: string]: never }> = Schema.declare(
  [],
  {
    decode: () => noKey,
    encode: () => noKey
  },
  { identifier: "SftExperimentalConfig", arbitrary: () => (fc) => fc.constant({}) }
)
/** @see {@link SftExperimentalConfig} */
export type SftExperimentalConfig = typeof SftExperimentalConfig.Type

/**
 * The body of SFT job creation. `training_data_url` points at JSONL, one `{messages, tools?}` per line
 * (hosted: a `wandb-artifact:///entity/project/name:version` URI). Closed, as the published schema is: a key
 * it does not name, here, in `config` or in `experimental_config`, fails (the client's `InvalidRequest`
 * naming the key, before sending; the embedded backend's 422 naming it).
 */
export const CreateSftTrainingJob = Schema.Struct({
  model_id: ModelId,
  training_data_url: Schema.String,
  config: nullable(SftTrainingConfig),
  experimental_config: nullable(SftExperimentalConfig)
}).annotations({ identifier: "CreateSftTrainingJob", ...closed })
/** @see {@link CreateSftTrainingJob} */
export type CreateSftTrainingJob = typeof CreateSftTrainingJob.Type

const SFT_KEYS: ReadonlyArray<string> = Object.keys(CreateSftTrainingJob.fields)
const SFT_CONFIG_KEYS: ReadonlyArray<string> = Object.keys(SftTrainingConfig.fields)
const SFT_METRIC_LOGGING_KEYS: ReadonlyArray<string> = Object.keys(SftMetricLogging.fields)

const isRecord = (u: unknown): u is Readonly<Record<string, unknown>> =>
  typeof u === "object" && u !== null && !Array.isArray(u)

const extra = (
  value: unknown,
  known: ReadonlyArray<string>,
  at: ReadonlyArray<string>
): Array<ReadonlyArray<string>> =>
  isRecord(value) ? Object.keys(value).flatMap((key) => (known.includes(key) ? [] : [[...at, key]])) : []

/**
 * The keys of an SFT job body that the published schema does not take, each as its path (`["config", "epochs"]`,
 * `["experimental_config", "seed"]`): what the service would refuse with a 422 `extra_forbidden`, found before
 * sending. Empty when there is none.
 */
export const sftExtraKeys = (body: unknown): ReadonlyArray<ReadonlyArray<string>> => {
  if (!isRecord(body)) return []
  const config = body.config
  return [
    ...extra(body, SFT_KEYS, []),
    ...extra(config, SFT_CONFIG_KEYS, ["config"]),
    ...(isRecord(config) ? extra(config.metric_logging, SFT_METRIC_LOGGING_KEYS, ["config", "metric_logging"]) : []),
    ...extra(body.experimental_config, [], ["experimental_config"])
  ]
}

/** A training job's status, as the published `TrainingJobStatus` names them. */
export const TrainingJobStatus = Schema.Literal("PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED")
/** @see {@link TrainingJobStatus} */
export type TrainingJobStatus = typeof TrainingJobStatus.Type

/** The statuses this package knows (the published `TrainingJobStatus`). */
export const KNOWN_STATUSES: ReadonlyArray<TrainingJobStatus> = TrainingJobStatus.literals

const isKnownStatus = (status: string): status is TrainingJobStatus =>
  (KNOWN_STATUSES as ReadonlyArray<string>).includes(status)

/** Whether a job's status is final: `COMPLETED`, `FAILED` or `CANCELLED`. */
export const isFinished = (status: TrainingJobStatus | "UNKNOWN"): boolean =>
  status === "COMPLETED" || status === "FAILED" || status === "CANCELLED"

const jobFields = {
  id: TrainingJobId,
  model_id: ModelId,
  progress: Schema.NullOr(Schema.Finite),
  error_message: Schema.NullOr(Schema.String),
  training_start: Schema.NullOr(Schema.String),
  training_end: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  updated_at: Schema.String,
  kind: optionalKey(Schema.String),
  step: known(Schema.Int)
}

/**
 * A training job, as the published `TrainingJobResponse` has it: nine fields, all present (`progress`,
 * `error_message` and the `training_*` times may be null; times are ISO 8601 strings, kept as sent), and what a
 * backend adds (the embedded one: `kind`, `rl` or `sft`, and `step`, the checkpoint step a completed job made).
 * Keys not named here are kept.
 *
 * `status` is one of {@link TrainingJobStatus}, or `"UNKNOWN"` for a status a newer service added, whose name is
 * kept in `unknown_status` (encoding puts it back), as an event of an unknown type is kept: code that switches
 * on `status` still narrows the known ones.
 */
export const TrainingJob = Schema.transform(
  Schema.Struct({ ...jobFields, status: Schema.String }, OtherKeys),
  Schema.Union(
    Schema.Struct({ ...jobFields, status: TrainingJobStatus }, OtherKeys),
    Schema.Struct(
      {
        ...jobFields,
        status: Schema.Literal("UNKNOWN"),
        unknown_status: Schema.String.pipe(Schema.filter((status) => !isKnownStatus(status)))
      },
      OtherKeys
    )
  ),
  {
    strict: false,
    decode: ({ status, ...rest }) =>
      isKnownStatus(status) ? { ...rest, status } : { ...rest, status: "UNKNOWN", unknown_status: status },
    encode: ({ status, unknown_status, ...rest }) => ({
      ...rest,
      status: status === "UNKNOWN" ? unknown_status : status
    })
  }
).annotations({ identifier: "TrainingJob" })
/** @see {@link TrainingJob} */
export type TrainingJob = typeof TrainingJob.Type

/** The kinds of training job events. */
export const TrainingJobEventType = Schema.Literal(
  "training_started",
  "gradient_step",
  "training_ended",
  "training_failed"
)
/** @see {@link TrainingJobEventType} */
export type TrainingJobEventType = typeof TrainingJobEventType.Type

const event = <Type extends TrainingJobEventType, A, I>(type: Type, data: Schema.Schema<A, I>) =>
  Schema.Struct({ id: TrainingJobEventId, type: Schema.Literal(type), data }).annotations({
    identifier: `TrainingJobEvent.${type}`
  })

/** The job started: `num_sequences` is the expected number of gradient steps. */
export const TrainingStarted = event("training_started", Schema.Struct({ num_sequences: known(Schema.Int) }, OtherKeys))
/** @see {@link TrainingStarted} */
export type TrainingStarted = typeof TrainingStarted.Type

/** A gradient-step metric: a number, or null when the service could not compute it. */
const metric = optionalKey(LooseMetric)

/** One gradient step's metrics (flat numbers; `group_metric_*` and others kept). */
export const GradientStep = event(
  "gradient_step",
  Schema.Struct(
    {
      loss: metric,
      policy_loss: metric,
      entropy: metric,
      kl_div: metric,
      grad_norm: metric,
      learning_rate: metric,
      reward: metric,
      reward_std_dev: metric,
      exception_rate: metric,
      num_trajectories: metric,
      num_trainable_tokens: metric,
      tokens_per_second: metric
    },
    OtherKeys
  )
)
/** @see {@link GradientStep} */
export type GradientStep = typeof GradientStep.Type

/** The job finished; a new checkpoint exists. */
export const TrainingEnded = event("training_ended", Schema.Struct({}, OtherKeys))
/** @see {@link TrainingEnded} */
export type TrainingEnded = typeof TrainingEnded.Type

/** The job failed, with the service's message when it gave one. */
export const TrainingFailed = event(
  "training_failed",
  Schema.Struct({ error_message: known(Schema.String) }, OtherKeys)
)
/** @see {@link TrainingFailed} */
export type TrainingFailed = typeof TrainingFailed.Type

/** The event types this package knows (the published `TrainingJobEventType`). */
export const KNOWN_EVENT_TYPES: ReadonlyArray<TrainingJobEventType> = TrainingJobEventType.literals

const isKnownType = (type: string): boolean => (KNOWN_EVENT_TYPES as ReadonlyArray<string>).includes(type)

/**
 * An event of a type this package does not know (one a newer service added). On the wire it is
 * `{id, type, data}` like any event; decoded, its `type` is `"unknown"` and the service's type is kept in
 * `event_type` (encoding puts it back), so code that switches on `type` still narrows the known events and
 * can pass this one by. Followers ignore it; it never ends a job.
 */
export const UnknownEvent = Schema.transform(
  // `type` checked last, so that a malformed event's first issue is the field that is wrong.
  Schema.Struct({
    id: TrainingJobEventId,
    data: Schema.Struct({}, OtherKeys),
    type: Schema.String.pipe(
      Schema.filter((type) => !isKnownType(type) || `${type} is a known event type: its data must fit its schema`)
    )
  }),
  Schema.Struct({
    id: Schema.typeSchema(TrainingJobEventId),
    type: Schema.Literal("unknown"),
    event_type: Schema.String.pipe(Schema.filter((type) => !isKnownType(type))),
    data: Schema.Struct({}, OtherKeys)
  }),
  {
    strict: true,
    decode: ({ data, id, type }) => ({ id, type: "unknown" as const, event_type: type, data }),
    encode: ({ data, event_type, id }) => ({ id, type: event_type, data })
  }
).annotations({ identifier: "TrainingJobEvent.unknown" })
/** @see {@link UnknownEvent} */
export type UnknownEvent = typeof UnknownEvent.Type

/**
 * A training job event, told apart by `type`: one of the four known events, or an {@link UnknownEvent}
 * (the published schema's event type is an enum a newer service may extend; an event of another type is
 * passed on rather than failing the page).
 */
export const TrainingJobEvent = Schema.Union(
  TrainingStarted,
  GradientStep,
  TrainingEnded,
  TrainingFailed,
  UnknownEvent
).annotations({
  identifier: "TrainingJobEvent"
})
/** @see {@link TrainingJobEvent} */
export type TrainingJobEvent = typeof TrainingJobEvent.Type

/** Whether an event ends its job. */
export const isTerminal = (event: TrainingJobEvent): event is TrainingEnded | TrainingFailed =>
  event.type === "training_ended" || event.type === "training_failed"

/**
 * The query of the event listing: `after` is the last event id seen. `wait_ms` asks a backend that supports
 * it (the embedded one) to hold the request until an event after `after` exists or the time is up.
 */
export const ListEventsParams = Schema.Struct({
  after: Schema.optional(Schema.String),
  limit: Schema.optional(PageLimit),
  wait_ms: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.between(0, 60_000)))
}).annotations({ identifier: "ListEventsParams" })
/** @see {@link ListEventsParams} */
export type ListEventsParams = typeof ListEventsParams.Type
