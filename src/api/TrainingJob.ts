/**
 * Training jobs (surface B): the RL and SFT job requests, `experimental_config`, the job record, and the
 * events a job emits while it runs.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { JsonObject, LooseMetric, OtherKeys, optionalKey } from "./Json.js"
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

/** `config` of an SFT job. Unknown keys are kept. */
export const SftTrainingConfig = Schema.Struct(
  {
    batch_size: known(Schema.Union(Schema.Int, Schema.Literal("auto"))),
    learning_rate: known(Schema.Union(Schema.Finite, Schema.Array(Schema.Finite))),
    metric_logging: known(JsonObject),
    assistant_turns: optionalKey(Schema.Literal("all", "last"))
  },
  OtherKeys
).annotations({ identifier: "SftTrainingConfig" })
/** @see {@link SftTrainingConfig} */
export type SftTrainingConfig = typeof SftTrainingConfig.Type

/**
 * The body of SFT job creation. `training_data_url` points at JSONL, one `{messages, tools?}` per line
 * (hosted: a `wandb-artifact:///entity/project/name:version` URI).
 */
export const CreateSftTrainingJob = Schema.Struct({
  model_id: ModelId,
  training_data_url: Schema.String,
  config: nullable(SftTrainingConfig),
  experimental_config: nullable(JsonObject)
}).annotations({ identifier: "CreateSftTrainingJob" })
/** @see {@link CreateSftTrainingJob} */
export type CreateSftTrainingJob = typeof CreateSftTrainingJob.Type

/**
 * A training job. The published schema has only `id`; the other fields are what backends add (the embedded
 * one fills them all) and are optional. Keys not named here are kept.
 */
export const TrainingJob = Schema.Struct(
  {
    id: TrainingJobId,
    status: optionalKey(Schema.String),
    model_id: optionalKey(Schema.String),
    kind: optionalKey(Schema.String),
    created_at: known(Schema.String),
    started_at: known(Schema.String),
    finished_at: known(Schema.String),
    step: known(Schema.Int),
    error_message: known(Schema.String)
  },
  OtherKeys
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
