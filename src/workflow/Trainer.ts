/**
 * Training a {@link Policy.Trainable}: logging trajectory groups, RL and SFT jobs followed to the end, and
 * checkpoint retention.
 *
 * - {@link log}: the groups under a split through the log endpoint (the embedded backend answers the
 *   metrics it computed; the hosted service answers nothing, read as `null`).
 * - {@link train}: an RL job on the groups. Groups without trajectories are dropped (nothing is sent when
 *   none is left: {@link TrainerError} `NothingToTrain`). The job is submitted with an idempotency key, by
 *   default derived from the model, its current step and a digest of the body: on a backend that honours
 *   keys (the embedded one) a repeated submission joins the job already submitted instead of training twice.
 *   After a {@link TrainingFailed}, resubmitting the same groups at the same step joins the failed job again
 *   there: pass a fresh `idempotencyKey` to try anew.
 * - {@link trainSft} / {@link trainSftUrl}: an SFT job on conversations (written as JSONL through the
 *   {@link SftData} service) or on JSONL already at a URL; the same submission and following.
 * - {@link follow} follows a submitted job; {@link events} is its event stream; {@link resume} follows the
 *   job an earlier process recorded for the policy's step.
 * - {@link prune}: keep the latest checkpoints and the best by a metric, delete the rest.
 *
 * **Following a job.** Events come from the client's follow (long poll with `wait_ms` where the backend
 * offers it, else one poll per `pollInterval`; each page retried with backoff on transient failures;
 * duplicated pages dropped), restarted from the last event seen when a failure outlasts the client's
 * retries. A page served out of order may bring the terminal event before steps that came earlier; when
 * fewer gradient steps were seen than `training_started.num_sequences` announced, the whole event list is
 * read once more so the summary misses none. Each event is reported to `onEvent`, by default a log line
 * (`Effect.logInfo`) with the progress "gradient step k/n".
 *
 * **Never twice.** A create whose outcome is unknown on a backend that does not say it honours keys (the
 * client's `ApiError` `Ambiguous`, see `TrainingClient`) fails with {@link TrainerError} `Ambiguous`, naming
 * the model, the step and the key: the job may exist, and it is not submitted again. With a `state`
 * (a `Submissions.Location`: a directory, or any `KeyValueStore`), the submission is recorded durably so that
 * a process killed at any point never leads to a second job for the step:
 * 1. a record for the model and step is looked for first: with a job id, that job is followed (to its end)
 *    instead of submitting; with an intent only (killed between the two writes below, or after an ambiguous
 *    failure), the recorded request is sent again under its recorded key where the backend honours keys
 *    (answering the job created before, or creating the only one), else {@link TrainerError} `Ambiguous`
 *    (the service lists no jobs, so it cannot be found: once checkpoint `step + 1` exists the step is done
 *    and a run resumes after it; if it never appears, no job exists: remove the record named in the error);
 * 2. else the intent (key and request) is written, the job created, and its id written over the intent;
 * 3. a create refused outright (a 4xx, nothing created) removes the intent; `TrainingFailed` removes the
 *    record (that job trained nothing), so the step can be submitted anew: a job of this process fails the
 *    call, one an earlier process recorded (step 1) is logged and the step is submitted anew (the embedded
 *    backend fails the job it was running when its process was killed, once it starts again).
 * The store's failures are {@link TrainerError} `State`.
 *
 * **The result.** On `training_ended` the new step is the job record's `step` when the backend gives it
 * (the embedded one does), else the latest checkpoint's; the policy is moved to it (`setStep`), so rollouts
 * that follow sample from the new weights. The metrics are each numeric `gradient_step` metric averaged over
 * the steps that reported it. `training_failed` fails with {@link TrainingFailed} carrying the service's
 * message.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import {
  CreateSftTrainingJob,
  CreateTrainingJob,
  type ExperimentalConfig,
  type SftExperimentalConfig,
  type SftTrainingConfig,
  type TrainingJob,
  type TrainingJobEvent,
  TrainingJobId
} from "../api/TrainingJob.js"
import type { TrajectoryGroup } from "../api/Trajectory.js"
import { ApiError } from "../client/ApiError.js"
import { checkSftTrainingJob, TrainingClient } from "../client/TrainingClient.js"
import * as Internal from "./internal/trainer.js"
import * as Metrics from "./Metrics.js"
import type { Trainable } from "./Policy.js"
import { RELATIVE_REWARD } from "./Reward.js"
import { type Conversation, SftData, type SftDataError, toJsonl } from "./SftData.js"
import * as Submissions from "./Submissions.js"

/** A job ended with `training_failed`. */
export class TrainingFailed extends Data.TaggedError("TrainingFailed")<{
  /** The failed job. */
  readonly jobId: TrainingJobId
  /** The service's `error_message`, when it gave one. */
  readonly errorMessage: string | undefined
}> {
  override get message(): string {
    return `training job ${this.jobId} failed: ${this.errorMessage ?? "the service gave no message"}`
  }
}

/**
 * The trainer could not go on: `NothingToTrain` (no group with a trajectory), `NoCheckpoint` (the job ended
 * but no checkpoint step could be found), `EventsEnded` (the event stream stopped before a terminal event),
 * `Ambiguous` (a job for the step may exist, and the backend does not say it honours idempotency keys, so
 * none is submitted: see "Never twice" in the module), `State` (the record of submissions could not be read
 * or written).
 */
export class TrainerError extends Data.TaggedError("TrainerError")<{
  /** Why. */
  readonly reason: "NothingToTrain" | "NoCheckpoint" | "EventsEnded" | "Ambiguous" | "State"
  /** What happened, and for `Ambiguous` what to do. */
  readonly description: string
  /** `Ambiguous`, `State`: the model. */
  readonly modelId?: string | undefined
  /** `Ambiguous`, `State`: the checkpoint step whose job it is. */
  readonly step?: number | undefined
  /** `Ambiguous`: the `Idempotency-Key` the job was (or may have been) created under. */
  readonly idempotencyKey?: string | undefined
  /** `Ambiguous`, `State` with a `state`: where the step's record is (a file, or a key of the store). */
  readonly record?: string | undefined
  /** The client's `Ambiguous` `ApiError` (method, path, status), or the store's failure. */
  readonly cause?: unknown
}> {
  override get message(): string {
    return `${this.reason}: ${this.description}`
  }
}

/** Where a job is, reported for each of its events. */
export interface Progress {
  /** The job. */
  readonly jobId: TrainingJobId
  /** The event. */
  readonly event: TrainingJobEvent
  /** Gradient steps seen so far (this one included). */
  readonly step: number
  /** The gradient steps the job announced (`num_sequences`), once known. */
  readonly of: number | undefined
}

/** How to follow a job. */
export interface FollowOptions {
  /** Long-poll time asked of the backend per caught-up request (default 10 seconds; at most 60). */
  readonly wait?: Duration.DurationInput | undefined
  /** The pause between polls once caught up, and the base of the backoff between resumes (default 1 s). */
  readonly pollInterval?: Duration.DurationInput | undefined
  /** How many times in a row the following is resumed after a failure the client did not retry past (default 5). */
  readonly resumes?: number | undefined
  /** Called for each event; by default each event is logged with `Effect.logInfo`. */
  readonly onEvent?: ((progress: Progress) => Effect.Effect<void>) | undefined
}

/** Where submissions are recorded, for {@link resume} and the submissions themselves. */
export interface StateOptions {
  /**
   * Record each submission durably (a directory, or any `KeyValueStore`; see `Submissions` and "Never
   * twice" in the module), so a process restarted after a crash follows the job already submitted for the
   * step. Default: not recorded.
   */
  readonly state?: Submissions.Location | undefined
}

/** Options of a job submission. */
export interface SubmitOptions extends FollowOptions, StateOptions {
  /** The `Idempotency-Key` of the submission (default: derived from model, step and body, see the module). */
  readonly idempotencyKey?: string | undefined
  /**
   * Run once the job this call submits is created, before it is followed (not for a job an earlier process
   * submitted and this call resumes); e.g. to start work that should not slow the submission down.
   */
  readonly onSubmitted?: ((jobId: TrainingJobId) => Effect.Effect<void>) | undefined
}

/** Options of {@link train}. */
export interface TrainOptions extends SubmitOptions {
  /** The job's `experimental_config`. */
  readonly config?: ExperimentalConfig | null | undefined
}

/** Options of {@link trainSft} and {@link trainSftUrl}. */
export interface SftOptions extends SubmitOptions {
  /** The job's `config` (batch size, learning rate, `assistant_turns`). */
  readonly config?: SftTrainingConfig | null | undefined
  /** The job's `experimental_config`: reserved, the published schema takes no key in it (`{}` or null). */
  readonly experimentalConfig?: SftExperimentalConfig | null | undefined
}

/** A finished job. */
export interface Result {
  /** The job. */
  readonly jobId: TrainingJobId
  /** The checkpoint step it produced (the policy's step now). */
  readonly step: number
  /** Each numeric gradient-step metric, averaged over the steps that reported it. */
  readonly metrics: Record<string, number>
  /** How many gradient steps the job took. */
  readonly gradientSteps: number
}

/** A job followed by {@link resume}: the result, and the record it was found by. */
export interface Resumed extends Result {
  /** The record an earlier process wrote (its `metrics` are those of the groups the job trains on). */
  readonly submission: Submissions.Submission
}

/** Logs groups under a split (`train`, `val`, `test`, ...); retried under a key derived from the body. */
export const log = Effect.fn("Trainer.log")(function* (
  policy: Trainable,
  groups: ReadonlyArray<TrajectoryGroup>,
  split: string,
  options?: { readonly idempotencyKey?: string | undefined }
) {
  const client = yield* TrainingClient
  const body = { split, trajectory_groups: groups }
  const step = yield* policy.step
  const idempotencyKey = options?.idempotencyKey ?? Internal.defaultKey("log", policy.record.id, step, body)
  yield* Effect.annotateCurrentSpan({ model_id: policy.record.id, split, groups: groups.length })
  return yield* client.log(policy.record.id, body, { idempotencyKey })
})

/**
 * A group as it is trained on: a trajectory whose metrics carry {@link Reward.RELATIVE_REWARD} (set by
 * `Reward.groupRelative`) is submitted with that value as its reward. The groups logged keep the task's reward.
 */
const trainedOn = (group: TrajectoryGroup): TrajectoryGroup =>
  group.trajectories.some((t) => typeof t.metrics?.[RELATIVE_REWARD] === "number")
    ? {
        ...group,
        trajectories: group.trajectories.map((t) => {
          const relative = t.metrics?.[RELATIVE_REWARD]
          return typeof relative === "number" ? { ...t, reward: relative } : t
        })
      }
    : group

/**
 * Whether a group carries a training signal: two or more trajectories whose rewards, as they are trained on (a
 * trajectory's {@link Reward.RELATIVE_REWARD} when it has one), differ. A group whose rewards are all equal
 * has zero advantage everywhere: the trainer skips it.
 */
export const informative = (group: TrajectoryGroup): boolean => {
  const rewards = trainedOn(group).trajectories.map((t) => t.reward)
  return rewards.some((r) => r !== rewards[0])
}

/** What the groups' failed rollouts say, for an error: how many, and the first one's type and message. */
const failuresOf = (groups: ReadonlyArray<TrajectoryGroup>): string => {
  const failures = groups.flatMap((group) => group.exceptions ?? [])
  const first = failures[0]
  if (first === undefined) return ""
  const count = failures.length === 1 ? "1 rollout failed" : `${failures.length} rollouts failed`
  return ` (${count}; the first: ${first.type}: ${first.message})`
}

/**
 * An RL job on the groups, followed to the end; the policy moves to the new step (see the module). A
 * trajectory with the metric `relative_reward` (`Reward.groupRelative`) is trained on that value.
 */
export const train = Effect.fn("Trainer.train")(function* (
  policy: Trainable,
  groups: ReadonlyArray<TrajectoryGroup>,
  options: TrainOptions = {}
) {
  const client = yield* TrainingClient
  const kept = groups.filter((group) => group.trajectories.length > 0)
  if (kept.length === 0) {
    return yield* new TrainerError({
      reason: "NothingToTrain",
      description: `none of the ${groups.length} groups has a trajectory${failuresOf(groups)}`
    })
  }
  const body: CreateTrainingJob = {
    model_id: policy.record.id,
    trajectory_groups: kept.map(trainedOn),
    ...(options.config === undefined ? {} : { experimental_config: options.config })
  }
  const step = yield* policy.step
  const idempotencyKey = options.idempotencyKey ?? Internal.defaultKey("rl", policy.record.id, step, body)
  yield* Effect.annotateCurrentSpan({ model_id: policy.record.id, groups: kept.length, step })
  return yield* submitOnce(policy, step, {
    kind: "rl",
    idempotencyKey,
    request: Schema.encodeSync(CreateTrainingJob)(body),
    create: client.createTrainingJob(body, { idempotencyKey }),
    metrics: Metrics.compute(groups),
    options
  })
})

/** An SFT job on JSONL already at `url` (hosted: an artifact URI), followed to the end like {@link train}. */
export const trainSftUrl = Effect.fn("Trainer.trainSftUrl")(function* (
  policy: Trainable,
  url: string,
  options: SftOptions = {}
) {
  const client = yield* TrainingClient
  const body: CreateSftTrainingJob = {
    model_id: policy.record.id,
    training_data_url: url,
    ...(options.config === undefined ? {} : { config: options.config }),
    ...(options.experimentalConfig === undefined ? {} : { experimental_config: options.experimentalConfig })
  }
  // A body the service would refuse (a key its closed schema does not take) fails here, typed, before anything.
  yield* checkSftTrainingJob(body)
  const step = yield* policy.step
  const idempotencyKey = options.idempotencyKey ?? Internal.defaultKey("sft", policy.record.id, step, body)
  yield* Effect.annotateCurrentSpan({ model_id: policy.record.id, step })
  return yield* submitOnce(policy, step, {
    kind: "sft",
    idempotencyKey,
    request: Schema.encodeSync(CreateSftTrainingJob)(body),
    create: client.createSftTrainingJob(body, { idempotencyKey }),
    metrics: undefined,
    options
  })
})

/** A job about to be submitted. */
interface Submit {
  readonly kind: "rl" | "sft"
  readonly idempotencyKey: string
  /** The body, encoded for the wire (kept in the intent). */
  readonly request: unknown
  readonly create: Effect.Effect<TrainingJob, ApiError>
  readonly metrics: Metrics.Metrics | undefined
  readonly options: SubmitOptions
}

/** Whether a failed create provably created nothing: refused outright (a 4xx other than 408), or never sent. */
const refused = (error: ApiError): boolean =>
  error.reason === "InvalidRequest" ||
  (error.status !== undefined && error.status >= 400 && error.status < 500 && error.status !== 408)

/** The store's failure as `TrainerError` `State`. */
const stateError =
  (location: Submissions.Location, modelId: string, step: number) =>
  (cause: { readonly message: string }): TrainerError =>
    new TrainerError({
      reason: "State",
      description: `the record of step ${step} of model ${modelId} (${Submissions.describe(location, modelId, step)}) could not be used: ${cause.message}`,
      modelId,
      step,
      record: Submissions.describe(location, modelId, step),
      cause
    })

/** A create whose outcome is unknown, as `TrainerError` `Ambiguous`. */
const ambiguousCreate = (
  policy: Trainable,
  step: number,
  idempotencyKey: string,
  location: Submissions.Location | undefined,
  cause: ApiError | undefined
): TrainerError => {
  const modelId = policy.record.id
  const record = location === undefined ? undefined : Submissions.describe(location, modelId, step)
  const what =
    cause === undefined
      ? `an earlier run may have created the training job of step ${step} of model ${modelId} (its intent is recorded, not its job id)`
      : `the creation of the training job of step ${step} of model ${modelId} has an unknown outcome: ${cause.message}`
  return new TrainerError({
    reason: "Ambiguous",
    description:
      `${what}; the backend does not say it honours Idempotency-Key (${idempotencyKey}), so no job is submitted ` +
      `again. If the job exists, checkpoint ${step + 1} appears when it ends and a run resumes after it; if none ` +
      `appears, no job was created` +
      (record === undefined ? ": submit again." : `: remove the record ${record} and run again.`),
    modelId,
    step,
    idempotencyKey,
    record,
    cause
  })
}

/** The client's `Ambiguous` failure of a create as {@link TrainerError} `Ambiguous`; others as they are. */
const orAmbiguous =
  (policy: Trainable, step: number, idempotencyKey: string, location: Submissions.Location | undefined) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E | TrainerError, R> =>
    Effect.catchIf(
      self,
      (error): error is E & ApiError => error instanceof ApiError && error.reason === "Ambiguous",
      (error) => Effect.fail(ambiguousCreate(policy, step, idempotencyKey, location, error))
    )

/** Submits a step's job at most once (see "Never twice" in the module) and follows it. */
const submitOnce = (policy: Trainable, step: number, submit: Submit) =>
  Effect.gen(function* () {
    const location = submit.options.state
    const modelId = policy.record.id
    if (location === undefined) {
      const job = yield* submit.create.pipe(orAmbiguous(policy, step, submit.idempotencyKey, undefined))
      if (submit.options.onSubmitted !== undefined) yield* submit.options.onSubmitted(job.id)
      return yield* follow(policy, job.id, submit.options)
    }
    const recorded = yield* resumeRecorded(policy, step, location, submit.options)
    if (Option.isSome(recorded)) return resultOf(recorded.value)
    const asState = stateError(location, modelId, step)
    const intent = new Submissions.Submission({
      modelId,
      step,
      kind: submit.kind,
      idempotencyKey: submit.idempotencyKey,
      request: submit.request,
      ...(submit.metrics === undefined ? {} : { metrics: submit.metrics }),
      submittedAt: new Date(yield* Clock.currentTimeMillis).toISOString()
    })
    yield* Submissions.put(location, intent).pipe(Effect.mapError(asState))
    const client = yield* TrainingClient
    const job = yield* submit.create.pipe(
      Effect.tapError((error) =>
        Effect.gen(function* () {
          // Nothing was created: the intent goes, so the step can be submitted anew. On a backend that does not
          // honour keys every failure of unknown outcome is `Ambiguous`, so any other one created nothing either.
          const honoured = yield* client.honoursIdempotencyKeys
          if (refused(error) || (!honoured && error.reason !== "Ambiguous")) {
            yield* Submissions.remove(location, modelId, step).pipe(Effect.ignore)
          }
        })
      ),
      orAmbiguous(policy, step, submit.idempotencyKey, location)
    )
    const submitted = new Submissions.Submission({ ...intent, jobId: job.id, request: undefined })
    yield* Submissions.put(location, submitted).pipe(Effect.mapError(asState))
    if (submit.options.onSubmitted !== undefined) yield* submit.options.onSubmitted(job.id)
    return resultOf(yield* followRecorded(policy, location, submitted, job.id, submit.options))
  })

/** A resumed job's result without its record. */
const resultOf = ({ submission: _, ...result }: Resumed): Result => result

/** Follows a recorded job; a `TrainingFailed` removes the record (that job trained nothing). */
const followRecorded = (
  policy: Trainable,
  location: Submissions.Location,
  submission: Submissions.Submission,
  jobId: TrainingJobId,
  options: FollowOptions
) =>
  follow(policy, jobId, options).pipe(
    Effect.tapErrorTag("TrainingFailed", () =>
      Submissions.remove(location, submission.modelId, submission.step).pipe(Effect.ignore)
    ),
    Effect.map((result): Resumed => ({ ...result, submission }))
  )

/**
 * The job recorded for a step, followed to its end, if there is a record: with a job id, that job; with an
 * intent only, the recorded request sent again under its key where the backend honours keys, else
 * `TrainerError` `Ambiguous`. A recorded job that failed (`TrainingFailed`: e.g. the embedded backend, stopped
 * with the process that ran it, fails the job it was running when it starts again) trained nothing: its record
 * is removed and the answer is `None`, so the step is done anew, as if nothing had been recorded.
 */
const resumeRecorded = (policy: Trainable, step: number, location: Submissions.Location, options: FollowOptions) =>
  followEarlier(policy, step, location, options).pipe(
    Effect.catchTag("TrainingFailed", (failed) =>
      Effect.as(
        Effect.logWarning(
          `step ${step}: ${failed.message} (submitted for it by an earlier run); it trained nothing, so the step is done anew`
        ),
        Option.none<Resumed>()
      )
    )
  )

/** {@link resumeRecorded} without its handling of a failed job. */
const followEarlier = (policy: Trainable, step: number, location: Submissions.Location, options: FollowOptions) =>
  Effect.gen(function* () {
    const modelId = policy.record.id
    const asState = stateError(location, modelId, step)
    const found = yield* Submissions.get(location, modelId, step).pipe(Effect.mapError(asState))
    if (Option.isNone(found)) return Option.none<Resumed>()
    const submission = found.value
    if (submission.jobId !== undefined) {
      yield* Effect.logInfo(
        `step ${step}: following training job ${submission.jobId}, submitted for it by an earlier run`
      )
      const jobId = TrainingJobId.make(submission.jobId)
      return Option.some(yield* followRecorded(policy, location, submission, jobId, options))
    }
    const client = yield* TrainingClient
    if (!(yield* client.honoursIdempotencyKeys)) {
      return yield* ambiguousCreate(policy, step, submission.idempotencyKey, location, undefined)
    }
    yield* Effect.logInfo(
      `step ${step}: asking again for the ${submission.kind} job an earlier run may have created (Idempotency-Key ${submission.idempotencyKey})`
    )
    const options_ = { idempotencyKey: submission.idempotencyKey }
    const create =
      submission.kind === "rl"
        ? Effect.flatMap(Schema.decodeUnknown(CreateTrainingJob)(submission.request), (body) =>
            client.createTrainingJob(body, options_)
          )
        : Effect.flatMap(Schema.decodeUnknown(CreateSftTrainingJob)(submission.request), (body) =>
            client.createSftTrainingJob(body, options_)
          )
    const job = yield* create.pipe(
      Effect.catchTag("ParseError", asState),
      orAmbiguous(policy, step, submission.idempotencyKey, location)
    )
    const submitted = new Submissions.Submission({ ...submission, jobId: job.id, request: undefined })
    yield* Submissions.put(location, submitted).pipe(Effect.mapError(asState))
    return Option.some(yield* followRecorded(policy, location, submitted, job.id, options))
  })

/**
 * Follows the job an earlier process recorded for the policy's current step in `state` (see "Never twice" in
 * the module), to its end, moving the policy to the step it made; `None` when nothing is recorded for the
 * step (then nothing was submitted for it, and it can be).
 */
export const resume = Effect.fn("Trainer.resume")(function* (
  policy: Trainable,
  options: FollowOptions & { readonly state: Submissions.Location }
) {
  const step = yield* policy.step
  yield* Effect.annotateCurrentSpan({ model_id: policy.record.id, step })
  return yield* resumeRecorded(policy, step, options.state, options)
})

/**
 * An SFT job on conversations: their JSONL is stored through {@link SftData} (e.g. `SftData.directory` for
 * the embedded backend), then trained on like {@link trainSftUrl}.
 */
export const trainSft = (
  policy: Trainable,
  conversations: ReadonlyArray<Conversation>,
  options: SftOptions = {}
): Effect.Effect<Result, ApiError | TrainingFailed | TrainerError | SftDataError, TrainingClient | SftData> =>
  Effect.gen(function* () {
    if (conversations.length === 0) {
      return yield* new TrainerError({ reason: "NothingToTrain", description: "no conversation to train on" })
    }
    const data = yield* SftData
    const url = yield* data.upload(yield* toJsonl(conversations))
    return yield* trainSftUrl(policy, url, options)
  }).pipe(Effect.withSpan("Trainer.trainSft", { attributes: { conversations: conversations.length } }))

/** A job's events, each once, until the terminal one (see "Following a job" in the module). */
export const events = (
  jobId: TrainingJobId,
  options: FollowOptions & { readonly after?: string | undefined } = {}
): Stream.Stream<TrainingJobEvent, ApiError, TrainingClient> =>
  Stream.unwrap(
    Effect.map(TrainingClient, (client) =>
      Internal.followEvents(client, jobId, {
        after: options.after,
        wait: Internal.durationOr(options.wait, "10 seconds"),
        pollInterval: Internal.durationOr(options.pollInterval, "1 second"),
        resumes: options.resumes ?? 5
      })
    )
  )

/** The default progress report: a log line per event. */
const logProgress = ({ event, jobId, of, step }: Progress): Effect.Effect<void> => {
  switch (event.type) {
    case "training_started":
      return Effect.logInfo(`training job ${jobId} started: ${event.data.num_sequences ?? "?"} gradient steps`)
    case "gradient_step": {
      const loss = event.data.loss ?? event.data.policy_loss
      return Effect.logInfo(
        `training job ${jobId}: gradient step ${step}/${of ?? "?"}${loss == null ? "" : ` loss ${loss.toPrecision(4)}`}`
      )
    }
    case "training_ended":
      return Effect.logInfo(`training job ${jobId} ended after ${step} gradient steps`)
    case "training_failed":
      return Effect.logInfo(`training job ${jobId} failed: ${event.data.error_message ?? "no message"}`)
    case "unknown":
      return Effect.logDebug(`training job ${jobId}: an event of type ${event.event_type}, passed by`)
  }
}

/** Follows a submitted job to its end and moves the policy to the step it produced (see the module). */
export const follow = Effect.fn("Trainer.follow")(function* (
  policy: Trainable,
  jobId: TrainingJobId,
  options: FollowOptions = {}
) {
  const client = yield* TrainingClient
  yield* Effect.annotateCurrentSpan({ training_job_id: jobId })
  const report = options.onEvent ?? logProgress
  const tally = Internal.emptyTally()
  const take = (event: TrainingJobEvent) =>
    Internal.count(tally, event)
      ? report({ jobId, event, step: tally.gradientSteps, of: tally.numSequences ?? undefined })
      : Effect.void
  const last = yield* events(jobId, options).pipe(
    Stream.tap(take),
    Stream.runLast,
    Effect.map(Option.filter((event) => event.type === "training_ended" || event.type === "training_failed"))
  )
  if (Option.isNone(last)) {
    return yield* new TrainerError({
      reason: "EventsEnded",
      description: `the events of job ${jobId} ended without training_ended or training_failed`
    })
  }
  if (last.value.type === "training_failed") {
    return yield* new TrainingFailed({ jobId, errorMessage: last.value.data.error_message ?? undefined })
  }
  if (Internal.incomplete(tally)) {
    // Out-of-order pages may have brought the end before some steps: read the whole list once more.
    yield* client.trainingJobEvents(jobId, { limit: 100 }).pipe(
      Stream.filter((event) => event.type === "training_started" || event.type === "gradient_step"),
      Stream.runForEach(take)
    )
  }
  const record = yield* client.getTrainingJob(jobId)
  const step =
    record.step ?? Option.getOrUndefined(Option.map(yield* client.latestCheckpoint(policy.record.id), (c) => c.step))
  if (step === undefined) {
    return yield* new TrainerError({
      reason: "NoCheckpoint",
      description: `job ${jobId} ended but model ${policy.record.id} has no checkpoint`
    })
  }
  yield* policy.setStep(step)
  return { jobId, step, metrics: Internal.averages(tally), gradientSteps: tally.gradientSteps } satisfies Result
})

/** Options of {@link prune}. */
export interface PruneOptions {
  /** How many of the latest checkpoints to keep (default 1). */
  readonly keepLatest?: number | undefined
  /** Also keep the best checkpoint by this metric of its `metrics` (the later one on a tie). */
  readonly best?: { readonly metric: string; readonly direction: "max" | "min" } | undefined
  /** Also keep these steps (e.g. the checkpoint whose rollouts scored best, which a training loop knows). */
  readonly keep?: Iterable<number> | undefined
  /** Delete only checkpoints of this step or later (default: any step). */
  readonly since?: number | undefined
}

/**
 * Checkpoint retention: keeps the latest `keepLatest` checkpoints, the best by `best.metric`, the steps of
 * `keep`, those before `since`, and the step the policy uses now; deletes the others. Answers the steps
 * deleted, in ascending order.
 */
export const prune = Effect.fn("Trainer.prune")(function* (policy: Trainable, options: PruneOptions = {}) {
  const client = yield* TrainingClient
  const checkpoints = yield* Stream.runCollect(client.checkpoints(policy.record.id, { limit: 100, order: "asc" }))
  const keep = Internal.retained([...checkpoints], {
    keepLatest: options.keepLatest ?? 1,
    best: options.best,
    current: yield* policy.step
  })
  for (const step of options.keep ?? []) keep.add(step)
  const since = options.since ?? Number.NEGATIVE_INFINITY
  const doomed = [...checkpoints]
    .map((c) => c.step)
    .filter((step) => step >= since && !keep.has(step))
    .sort((a, b) => a - b)
  yield* Effect.annotateCurrentSpan({ model_id: policy.record.id, kept: keep.size, deleting: doomed.length })
  if (doomed.length === 0) return []
  const result = yield* client.deleteCheckpoints(policy.record.id, doomed)
  const missing = new Set(result.not_found_steps)
  return doomed.filter((step) => !missing.has(step))
})
