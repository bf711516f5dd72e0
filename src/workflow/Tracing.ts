/**
 * Tracing of training loops into the trace service: each rollout becomes a call, each of its chat
 * completions a child call, its reward feedback on the call, and each training step a parent call of its
 * rollouts (one trace per step).
 *
 * - A rollout's call (`effect-rl.rollout`): inputs the scenario, output the final messages, the value the
 *   agent code returned, the reward and the metrics; the exception when it failed or ran out of time.
 * - A chat completion's call (`effect-rl.chat`): inputs the request (model, messages, parameters), output the
 *   choice (without logprobs and token ids), `summary.usage` its tokens. A call's usage is its own plus its
 *   children's, so a rollout's summary carries the usage of its completions and a step's that of its
 *   rollouts: `usage: {<model>: {prompt_tokens, completion_tokens, total_tokens, requests}}`.
 * - The reward: feedback of type `reward` on the rollout's call (`weave:///<project>/call/<id>`) with
 *   payload `{reward, metrics}`, the reward the trainer sees (after any `scoreGroup`). The trajectory names
 *   that call in its metadata (`trace_call`, the same ref), so a logged trajectory leads to its trace.
 * - A training step's call (`effect-rl.step`, display name `step <n>`): its rollouts (and evaluation) are
 *   its descendants; output the step's metrics.
 *
 * Everything goes through a bounded queue sent in the background (`call/upsert_batch`, `feedback/create`):
 * every `flushInterval`, as soon as a batch is full, and once more when the layer's scope closes (within
 * `finalFlushTimeout`). Tracing never fails or slows a rollout: an item that finds the queue full is dropped,
 * a batch the service refuses or never gets is failed; both are counted ({@link stats}) and reported once,
 * when the layer closes, by one warning with the counts and the first error.
 *
 * {@link otlp} is another way in: the library's own Effect spans (`TrainingLoop.run`, `Gather.group`, the
 * clients' requests, ...) exported as OpenTelemetry to the trace service's `/otel/v1/traces`, where each
 * span becomes a call.
 *
 * The workflow traces only when a `Tracing` service is provided; without one (or with {@link disabled}) it
 * runs exactly as before. The trace context (the current call) flows through the fiber, not through
 * arguments: {@link call} opens a call under the current one.
 *
 * ```ts
 * const traced = Tracing.layer({ project: "my-team/tictactoe" })   // needs a TraceClient: Backend layers give one
 * program.pipe(Effect.provide(traced), Effect.provide(Backend.local()), NodeRuntime.runMain)
 * ```
 *
 * @since 0.1.0
 */
import type * as HttpClient from "@effect/platform/HttpClient"
import * as Clock from "effect/Clock"
import type { ConfigError } from "effect/ConfigError"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { callRef as callRefOf } from "../api/internal/callRef.js"
import type { JsonObject, JsonValue } from "../api/Json.js"
import { resolveOptions } from "../client/internal/config.js"
import { normalizeBaseUrl } from "../client/internal/http.js"
import { DEFAULT_URL, TraceClient, URL_ENV } from "../client/TraceClient.js"
import * as Internal from "./internal/tracing.js"

/** The op name of a rollout's call. */
export const ROLLOUT_OP = "effect-rl.rollout"
/** The op name of a chat completion's call. */
export const CHAT_OP = "effect-rl.chat"
/** The op name of a training step's call. */
export const STEP_OP = "effect-rl.step"
/** The op name of an evaluation's call (the validation rollouts of a training loop). */
export const EVALUATE_OP = "effect-rl.evaluate"
/** The feedback type of a rollout's reward. */
export const REWARD_FEEDBACK = "reward"
/**
 * The trajectory metadata key under which a traced rollout of `Gather` names its call, as a ref
 * (`weave:///<project>/call/<id>`): what the embedded backend's dashboard links a logged trajectory to its
 * trace with.
 */
export const TRACE_CALL_METADATA = "trace_call"

/** The ref of a call of `project`, as feedback names it: `weave:///<project>/call/<id>`. */
export const callRef: (project: string, id: string) => string = callRefOf

/** A traced call: its id and its trace's id. */
export interface CallRef {
  /** The call's id. */
  readonly id: string
  /** The id of the trace the call belongs to. */
  readonly traceId: string
}

/** What the tracing queue did so far. */
export interface Stats {
  /** Items (call starts and ends, feedback) queued. */
  readonly enqueued: number
  /** Items the trace service took. */
  readonly sent: number
  /** Items dropped because the queue was full (or the layer had closed). */
  readonly dropped: number
  /** Items the trace service refused or never got (after the client's retries). */
  readonly failed: number
  /** The first error, when any item failed. */
  readonly firstError: string | undefined
}

/** A call to trace: its op, display name, inputs and attributes, and how to read its output. */
export interface CallOptions<A> {
  /** The op name (e.g. {@link ROLLOUT_OP}, or a name of your own). */
  readonly op: string
  /** The name shown for the call (default: the op name). */
  readonly displayName?: string | undefined
  /** The call's inputs. */
  readonly inputs: JsonObject
  /** The call's attributes. */
  readonly attributes?: JsonObject | undefined
  /** The output recorded when the call succeeds (default: none). */
  readonly output?: ((value: A) => JsonValue) | undefined
  /**
   * The tokens the call used itself (a model call's), by model. A call's `summary.usage` is its own plus its
   * children's.
   */
  readonly usage?: ((value: A) => ReadonlyArray<readonly [model: string, usage: ModelUsage]>) | undefined
}

/** Token counts of one model, in the service's `summary.usage` form. */
export interface ModelUsage {
  /** Tokens of the prompts. */
  readonly prompt_tokens: number
  /** Tokens sampled. */
  readonly completion_tokens: number
  /** Both. */
  readonly total_tokens: number
  /** How many requests. */
  readonly requests: number
}

/** The tracing service. */
export interface Service {
  /** The project traced into (`entity/project`); empty when tracing is disabled. */
  readonly project: string
  /**
   * Runs `body` as a call under the current call (a new trace when there is none). `options` may be a function
   * that makes them, called only when tracing is on.
   */
  readonly call: <A, E, R>(
    options: CallOptions<A> | (() => CallOptions<A>),
    body: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E, R>
  /** Queues feedback of `feedbackType` with `payload` on a call. */
  readonly feedback: (call: CallRef, feedbackType: string, payload: JsonObject) => Effect.Effect<void>
  /** The queue's counters. */
  readonly stats: Effect.Effect<Stats>
}

/** The tracing service tag. */
export class Tracing extends Context.Tag("effect-rl/Tracing")<Tracing, Service>() {}

/** Options of {@link layer}. */
export interface Options {
  /** The project to trace into, as `entity/project`. */
  readonly project: string
  /** The most items the queue holds; more are dropped and counted (default 10,000). */
  readonly capacity?: number | undefined
  /** The most items sent in one `call/upsert_batch` (default 500); a full batch is sent at once. */
  readonly batchSize?: number | undefined
  /** How often the queue is sent (default 500 ms). */
  readonly flushInterval?: Duration.DurationInput | undefined
  /** The time limit of the last send when the layer's scope closes (default 10 seconds). */
  readonly finalFlushTimeout?: Duration.DurationInput | undefined
}

const noStats: Stats = { enqueued: 0, sent: 0, dropped: 0, failed: 0, firstError: undefined }

/** The service that traces nothing. */
export const disabledService: Service = {
  project: "",
  call: (_, body) => body,
  feedback: () => Effect.void,
  stats: Effect.succeed(noStats)
}

/** Tracing turned off: the workflow runs as if no tracing were provided. */
export const disabled: Layer.Layer<Tracing> = Layer.succeed(Tracing, disabledService)

const positive = (name: string, value: number): number => {
  if (!(Number.isInteger(value) && value > 0)) throw new RangeError(`${name} must be a positive integer, got ${value}`)
  return value
}

/** Builds the service in a scope: the queue and its worker start, and are flushed when the scope closes. */
export const make = (options: Options) =>
  Effect.gen(function* () {
    if (!/^[^/\s]+\/[^/\s]+$/.test(options.project)) {
      return yield* Effect.dieMessage(`Tracing: project must be "entity/project", got "${options.project}"`)
    }
    const client = yield* TraceClient
    const sink = yield* Internal.makeSink(client, {
      capacity: positive("capacity", options.capacity ?? 10_000),
      batchSize: positive("batchSize", options.batchSize ?? 500),
      flushInterval: Duration.decode(options.flushInterval ?? "500 millis"),
      finalFlushTimeout: Duration.decode(options.finalFlushTimeout ?? "10 seconds"),
      feedbackConcurrency: 4
    })
    const service: Service = {
      project: options.project,
      call: Internal.traceCall(options.project, sink.offer),
      feedback: (call, feedbackType, payload) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          sink.offer({
            _tag: "Feedback",
            request: {
              id: Internal.uuid7(now),
              project_id: options.project,
              weave_ref: callRef(options.project, call.id),
              feedback_type: feedbackType,
              payload
            }
          })
        ),
      stats: sink.stats
    }
    return service
  })

/**
 * Tracing into `options.project` through the `TraceClient` (the `Backend` layers provide one). The queue is
 * sent once more, and a warning logged if anything was lost, when the layer's scope closes.
 */
export const layer = (options: Options): Layer.Layer<Tracing, never, TraceClient> =>
  Layer.scoped(Tracing, make(options))

/** The provided tracing service, else the disabled one. */
export const service: Effect.Effect<Service> = Effect.map(Effect.serviceOption(Tracing), (option) =>
  Option.getOrElse(option, () => disabledService)
)

/**
 * Runs `body` as a traced call under the current one; without tracing, just runs `body`. `options` may be a
 * function that makes them, called only when tracing is on.
 */
export const call = <A, E, R>(
  options: CallOptions<A> | (() => CallOptions<A>),
  body: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> => Effect.flatMap(service, (tracing) => tracing.call(options, body))

/** The call the running code is inside of, when it is traced. */
export const currentCall: Effect.Effect<Option.Option<CallRef>> = Effect.map(
  FiberRef.get(Internal.currentCall),
  (handle) => (handle === undefined ? Option.none() : Option.some({ id: handle.id, traceId: handle.traceId }))
)

/** Queues feedback on a call; without tracing, does nothing. */
export const feedback = (call: CallRef, feedbackType: string, payload: JsonObject): Effect.Effect<void> =>
  Effect.flatMap(service, (tracing) => tracing.feedback(call, feedbackType, payload))

/** The tracing queue's counters. */
export const stats: Effect.Effect<Stats, never, Tracing> = Effect.flatMap(Tracing, (tracing) => tracing.stats)

/** Options of {@link otlp}. */
export interface OtlpOptions {
  /** The project the spans go to, as `entity/project`. */
  readonly project: string
  /** The trace service's base URL (default: `EFFECT_RL_TRACE_URL`, else the hosted service). */
  readonly url?: string | URL | undefined
  /** The API key (default: `WANDB_API_KEY`), sent as `Authorization: Bearer <key>`. */
  readonly apiKey?: Redacted.Redacted | undefined
  /** How often spans are sent (default 5 seconds; the rest when the layer closes). */
  readonly exportInterval?: Duration.DurationInput | undefined
  /** The `service.name` of the spans' resource (default `effect-rl`). */
  readonly serviceName?: string | undefined
}

/**
 * The Effect spans of the program exported as OTLP (protobuf) to the trace service's `/otel/v1/traces`, into
 * `options.project` (the resource attributes `wandb.entity` and `wandb.project`, and the `project_id`
 * header). Use it beside, or instead of, {@link layer}; a failed export is logged at debug level and never
 * fails the program.
 */
export const otlp = (options: OtlpOptions): Layer.Layer<never, ConfigError, HttpClient.HttpClient> =>
  Layer.unwrapEffect(
    Effect.gen(function* () {
      const [entity, project] = options.project.split("/")
      if (entity === undefined || project === undefined || !/^[^/\s]+\/[^/\s]+$/.test(options.project)) {
        return yield* Effect.dieMessage(`Tracing.otlp: project must be "entity/project", got "${options.project}"`)
      }
      const { apiKey, baseUrl } = yield* resolveOptions(
        { apiKey: options.apiKey, baseUrl: options.url },
        URL_ENV,
        DEFAULT_URL
      )
      // Loaded here, not with the module: a program that does not export spans never loads the OTLP encoder.
      const [OtlpTracer, OtlpSerialization] = yield* Effect.promise(() =>
        Promise.all([import("@effect/opentelemetry/OtlpTracer"), import("@effect/opentelemetry/OtlpSerialization")])
      )
      return OtlpTracer.layer({
        url: `${normalizeBaseUrl(baseUrl)}/otel/v1/traces`,
        resource: {
          serviceName: options.serviceName ?? "effect-rl",
          attributes: { "wandb.entity": entity, "wandb.project": project }
        },
        headers: {
          project_id: options.project,
          ...(apiKey === undefined ? {} : { authorization: `Bearer ${Redacted.value(apiKey)}` })
        },
        ...(options.exportInterval === undefined ? {} : { exportInterval: options.exportInterval })
      }).pipe(Layer.provide(OtlpSerialization.layerProtobuf))
    })
  )
