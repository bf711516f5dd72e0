/**
 * A policy: the model a rollout talks to, bound to the service that answers its chat completions.
 *
 * - {@link base}: a base (not trainable) model by name, e.g. a judge or an opponent, answered by the
 *   inference service.
 * - {@link trainable}: a trainable model of the training service (created, or found by name with
 *   `return_existing`), addressed in chat completions as `wandb-artifact:///<entity>/<project>/<name>:step<N>`.
 *   Its *version* is the checkpoint step the next completion samples from: the latest step when the policy is
 *   made (0, the base weights, when nothing is trained yet), or a pinned step; the {@link Trainer} moves it
 *   on after each training job, so rollouts that follow sample from the new weights. Its completions go to
 *   the training host's `/v1/chat/completions`, where the reference client and the vendor's documentation
 *   sample trained checkpoints; `sampleOn: "inference"` sends them to the inference host instead.
 * - {@link make}: any chat-completions function (a test double, a proxy, another provider).
 *
 * Every completion records the version it used ({@link Policy.version}), so a trajectory knows the policy
 * that sampled it (`initial_policy_version` / `final_policy_version`). A trainable policy offers a
 * {@link Policy.snapshot} (itself held at its current step), which `Rollout.run` takes for each rollout: a
 * rollout samples from one checkpoint, the one current when it started, even while a training job moves the
 * policy on (as `TrainingLoop`'s `offPolicy` mode does).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Stream from "effect/Stream"
import type { ChatCompletion, ChatCompletionChunk, ChatCompletionRequest } from "../api/ChatCompletion.js"
import type { Model, ModelCreate } from "../api/Model.js"
import type { ApiError } from "../client/ApiError.js"
import { InferenceClient } from "../client/InferenceClient.js"
import { TrainingClient } from "../client/TrainingClient.js"

/** A chat completion request without its `model`: the policy fills it in. */
export type Request = Omit<ChatCompletionRequest, "model">

/** The model a rollout talks to. */
export interface Policy {
  /** A short name for logs and traces (the model name sent, without the step). */
  readonly name: string
  /** The trainable model behind this policy, if any. */
  readonly model: Option.Option<Model>
  /** The checkpoint step the next completion samples from; `null` for a base model. */
  readonly version: Effect.Effect<number | null>
  /** Creates a chat completion with this policy's model (the request's `model` is set from the version). */
  readonly complete: (request: Request) => Effect.Effect<ChatCompletion, ApiError>
  /**
   * Streams a chat completion with this policy's model (`stream: true`): the chunks as they are sampled. Absent:
   * the policy answers whole only, and a streamed request is answered from the whole completion.
   */
  readonly stream?: ((request: Request) => Stream.Stream<ChatCompletionChunk, ApiError>) | undefined
  /**
   * This policy held at the version it samples from now, not following the trainer any more (a trainable
   * policy offers it; `Rollout.run` takes one per rollout, so a rollout samples every turn from the checkpoint
   * it started on even when training moves the policy on meanwhile). Absent: the policy is used as it is.
   */
  readonly snapshot?: Effect.Effect<Policy> | undefined
  /**
   * The model's context, in tokens, when known: a rollout's HTTP surface takes request bodies up to what such a
   * context can hold (see `RolloutFetch.bodyLimit`). Absent: the largest the hosted service serves is assumed.
   */
  readonly contextTokens?: number | undefined
}

/** A trainable policy: a {@link Policy} whose version the trainer moves on. */
export interface Trainable extends Policy {
  /** The model of the training service. */
  readonly model: Option.Some<Model>
  /** The model record itself (`model.value`, for convenience). */
  readonly record: Model
  /** The current checkpoint step. */
  readonly step: Effect.Effect<number>
  /** Moves the policy to another checkpoint step (done by the trainer after a job). */
  readonly setStep: (step: number) => Effect.Effect<void>
  /** Whether the step is pinned ({@link TrainableOptions.step}): a pinned policy ignores `setStep`. */
  readonly pinned: boolean
}

/** The `wandb-artifact:///` name of a trained model; the latest checkpoint when `step` is left out. */
export const artifactName = (
  model: { readonly entity: string; readonly project: string; readonly name: string },
  step?: number | undefined
): string =>
  `wandb-artifact:///${model.entity}/${model.project}/${model.name}${step === undefined ? "" : `:step${step}`}`

/**
 * A policy over any chat-completions function (and, to stream, a streaming one); `version` is `null` unless
 * given. Use it for a test double or another provider.
 */
export const make = (options: {
  readonly name: string
  readonly complete: (request: ChatCompletionRequest) => Effect.Effect<ChatCompletion, ApiError>
  readonly stream?: ((request: ChatCompletionRequest) => Stream.Stream<ChatCompletionChunk, ApiError>) | undefined
  readonly version?: Effect.Effect<number | null> | undefined
  /** The model's context in tokens, when known (see {@link Policy.contextTokens}). */
  readonly contextTokens?: number | undefined
}): Policy => {
  const stream = options.stream
  return {
    name: options.name,
    ...(options.contextTokens === undefined ? {} : { contextTokens: options.contextTokens }),
    model: Option.none(),
    version: options.version ?? Effect.succeed(null),
    complete: (request) => options.complete({ ...request, model: options.name }),
    ...(stream === undefined ? {} : { stream: (request: Request) => stream({ ...request, model: options.name }) })
  }
}

/** A base model by name, answered by the inference service's chat completions. */
export const base = (
  name: string,
  options?: {
    readonly project?: string | undefined
    /** The model's context in tokens, when known (see {@link Policy.contextTokens}). */
    readonly contextTokens?: number | undefined
  }
): Effect.Effect<Policy, never, InferenceClient> =>
  Effect.map(InferenceClient, (client) =>
    make({
      name,
      contextTokens: options?.contextTokens,
      complete: (request) => client.createChatCompletion(request, { project: options?.project }),
      stream: (request) => client.streamChatCompletion(request, { project: options?.project })
    })
  )

/** Options of {@link trainable}. */
export interface TrainableOptions {
  /** Pin the policy to this checkpoint step; by default it starts at the latest and follows training. */
  readonly step?: number | undefined
  /**
   * Which host answers the policy's chat completions: `"training"` (the default), the training service's
   * `/v1/chat/completions`, where trained checkpoints are served; or `"inference"`, the inference service,
   * which serves the same `wandb-artifact:///` names too.
   */
  readonly sampleOn?: "training" | "inference" | undefined
  /**
   * With `sampleOn: "inference"`: the project (`<team>/<project>`) the completions are tracked under, sent as
   * `OpenAI-Project` (default: the inference client's own).
   */
  readonly project?: string | undefined
  /** The model's context in tokens, when known (see {@link Policy.contextTokens}). */
  readonly contextTokens?: number | undefined
}

/**
 * A trainable model: created on the training service, or the existing one of that name in the project
 * (`return_existing`), starting at its latest checkpoint step (0 when it has none yet). Completions go to
 * the training host (see {@link TrainableOptions.sampleOn}) with the model's `wandb-artifact:///...:step<N>`
 * name.
 */
export const trainable = (
  create: Omit<ModelCreate, "return_existing">,
  options: TrainableOptions = {}
): Effect.Effect<Trainable, ApiError, TrainingClient | InferenceClient> =>
  Effect.gen(function* () {
    const training = yield* TrainingClient
    const model = yield* training.createModel({ ...create, return_existing: true })
    return yield* fromModel(model, options)
  })

/** A trainable policy over a model record already in hand (see {@link trainable}). */
export const fromModel = (
  model: Model,
  options: TrainableOptions = {}
): Effect.Effect<Trainable, ApiError, TrainingClient | InferenceClient> =>
  Effect.gen(function* () {
    const training = yield* TrainingClient
    const inference = yield* InferenceClient
    const sample =
      options.sampleOn === "inference"
        ? (request: ChatCompletionRequest) => inference.createChatCompletion(request, { project: options.project })
        : training.createChatCompletion
    const sampleStream =
      options.sampleOn === "inference"
        ? (request: ChatCompletionRequest) => inference.streamChatCompletion(request, { project: options.project })
        : training.streamChatCompletion
    // No checkpoint yet (a hosted model before its first job): step 0, addressed by the latest-name.
    const latest =
      options.step ?? Option.getOrUndefined(Option.map(yield* training.latestCheckpoint(model.id), (c) => c.step))
    const current = yield* Ref.make<number | undefined>(latest)
    const pinned = options.step !== undefined
    const step = Effect.map(Ref.get(current), (s) => s ?? 0)
    /** The policy held at `at` (`undefined`: the latest checkpoint, before the first one is known). */
    const context = options.contextTokens === undefined ? {} : { contextTokens: options.contextTokens }
    const heldAt = (at: number | undefined): Policy => ({
      ...context,
      name: artifactName(model),
      model: Option.some(model),
      version: Effect.succeed(at ?? 0),
      complete: (request) => sample({ ...request, model: artifactName(model, at) }),
      stream: (request) => sampleStream({ ...request, model: artifactName(model, at) })
    })
    return {
      ...context,
      name: artifactName(model),
      model: Option.some(model) as Option.Some<Model>,
      record: model,
      version: step,
      step,
      pinned,
      setStep: (next) => (pinned ? Effect.void : Ref.set(current, next)),
      complete: (request) =>
        Effect.flatMap(Ref.get(current), (at) => sample({ ...request, model: artifactName(model, at) })),
      stream: (request) =>
        Stream.unwrap(
          Effect.map(Ref.get(current), (at) => sampleStream({ ...request, model: artifactName(model, at) }))
        ),
      snapshot: Effect.map(Ref.get(current), heldAt)
    }
  })
