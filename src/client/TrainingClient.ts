/**
 * The client of the training service (surface B): a method for every endpoint of its published API, plus the
 * trainable base models, as Effects and Streams failing with `ApiError`.
 *
 * GET and DELETE calls, chat completions and a model create with `return_existing` (an upsert) are retried
 * on 408, 409, 429, >= 500, transport failures and time-outs.
 *
 * **Creates never run twice.** The POSTs that create or log (RL and SFT job create, log, a model create
 * without `return_existing`) send the caller's idempotency key as `Idempotency-Key`. Whether a backend
 * honours it is learned from its responses: the embedded backend says so on every response
 * (`x-idempotency-keys: honoured`, `TrainingApi.IDEMPOTENCY_KEYS_HEADER`); the first create asks
 * `GET /v1/health` when nothing has been heard yet. The option `honoursIdempotencyKeys` overrides what is
 * learned. Where keys are honoured, a create with a key is retried like a GET (the backend answers a repeat
 * with the first job). Elsewhere (the hosted service says nothing), and for any create without a key, it is
 * retried only when the request provably was not acted on (the connection was never made, a 429, a 503 with
 * `retry-after` or `x-should-retry: true`); a failure that leaves the outcome unknown (a time-out or a reset
 * after sending, a 5xx such as a gateway's 502, 504 or 524, a success whose body broke) is an `ApiError`
 * with reason `Ambiguous`, carrying the method, path and key: the job may exist, and a blind repeat could
 * train the same step twice.
 *
 * @since 0.1.0
 */
import type * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientTag from "@effect/platform/HttpClient"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import type * as ConfigError from "effect/ConfigError"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type { ChatCompletion, ChatCompletionChunk, ChatCompletionRequest } from "../api/ChatCompletion.js"
import type { Health, SystemCheck } from "../api/Health.js"
import type {
  Checkpoint,
  CheckpointPage,
  DeleteCheckpointsResult,
  DeleteModelResult,
  ListCheckpointsParams,
  Model,
  ModelCreate,
  ModelId,
  Order
} from "../api/Model.js"
import * as Api from "../api/TrainingApi.js"
import { IDEMPOTENCY_KEYS_HEADER, IDEMPOTENCY_KEYS_HONOURED } from "../api/TrainingApi.js"
import type {
  CreateSftTrainingJob,
  CreateTrainingJob,
  ListEventsParams,
  TrainingJobEvent,
  TrainingJobId
} from "../api/TrainingJob.js"
import * as TrainingJob from "../api/TrainingJob.js"
import type { LogRequest, LogResult } from "../api/Trajectory.js"
import { ApiError } from "./ApiError.js"
import * as Chat from "./internal/chat.js"
import { resolveOptions } from "./internal/config.js"
import { endpointCall } from "./internal/endpoint.js"
import { type ClientOptions, invalidRequest, makeTransport, type RetryMode } from "./internal/http.js"

/**
 * The hosted training service, as its published OpenAPI document's `servers` entry names it (the service's
 * documentation has users create their key in a Forge account; it is still read from `WANDB_API_KEY`).
 */
export const DEFAULT_URL = "https://forge.coreweave.com/api/training"

/**
 * The training service's earlier host, the default before {@link DEFAULT_URL}. Still reachable: set
 * `EFFECT_RL_TRAINING_URL` to it, or pass it as the layer's `baseUrl`.
 */
export const PREVIOUS_URL = "https://api.training.wandb.ai"

/** The env name of the training service's base URL. */
export const URL_ENV = "EFFECT_RL_TRAINING_URL"

/** Options of the training client. */
export interface Options extends ClientOptions {
  /**
   * Whether the backend honours `Idempotency-Key` (answers a repeated key with the first response). Default:
   * learned from its `x-idempotency-keys` header (see the module); `true` or `false` decides it here.
   */
  readonly honoursIdempotencyKeys?: boolean | undefined
}

/** Options of a call that creates or logs. */
export interface WriteOptions {
  /**
   * A key naming this operation: sent as `Idempotency-Key`, it lets the service answer a repeat with the
   * first response, and it lets the client retry the call. Without it the call is sent once.
   */
  readonly idempotencyKey?: string | undefined
}

/** The options of the streams over all pages. */
export interface PageOptions {
  /** Start after this item id. */
  readonly after?: string | undefined
  /** Items per page (1 to 100). */
  readonly limit?: number | undefined
}

/** How to follow a job's events. */
export interface FollowOptions {
  /** Start after this event id. */
  readonly after?: string | undefined
  /** The pause between polls once caught up (default 1 second). */
  readonly pollInterval?: Duration.DurationInput | undefined
  /** Ask the backend to hold each caught-up request this long for a new event (long poll). */
  readonly wait?: Duration.DurationInput | undefined
}

/** The training client's methods. */
export interface Service {
  /** `POST /v1/preview/models`: create a model (or, with `return_existing`, get the one of that name). */
  readonly createModel: (body: ModelCreate, options?: WriteOptions) => Effect.Effect<Model, ApiError>
  /** `DELETE /v1/preview/models/{model_id}`: delete a model with its checkpoints. */
  readonly deleteModel: (modelId: ModelId) => Effect.Effect<DeleteModelResult, ApiError>
  /** `GET /v1/preview/models/{model_id}/checkpoints`: one page of checkpoints. */
  readonly listCheckpoints: (
    modelId: ModelId,
    params?: ListCheckpointsParams
  ) => Effect.Effect<CheckpointPage, ApiError>
  /** Every checkpoint, page after page (`after` cursor), in `order` of step. */
  readonly checkpoints: (
    modelId: ModelId,
    options?: PageOptions & { readonly order?: Order | undefined }
  ) => Stream.Stream<Checkpoint, ApiError>
  /** The latest checkpoint (`limit=1&order=desc`), if any. */
  readonly latestCheckpoint: (modelId: ModelId) => Effect.Effect<Option.Option<Checkpoint>, ApiError>
  /** `DELETE /v1/preview/models/{model_id}/checkpoints`: delete checkpoints by step. */
  readonly deleteCheckpoints: (
    modelId: ModelId,
    steps: ReadonlyArray<number>
  ) => Effect.Effect<DeleteCheckpointsResult, ApiError>
  /** `POST /v1/preview/models/{model_id}/log`: store trajectory groups under a split. */
  readonly log: (modelId: ModelId, body: LogRequest, options?: WriteOptions) => Effect.Effect<LogResult, ApiError>
  /** `POST /v1/preview/training-jobs`: submit an RL training job. */
  readonly createTrainingJob: (
    body: CreateTrainingJob,
    options?: WriteOptions
  ) => Effect.Effect<TrainingJob.TrainingJob, ApiError>
  /** `POST /v1/preview/sft-training-jobs`: submit an SFT training job. */
  readonly createSftTrainingJob: (
    body: CreateSftTrainingJob,
    options?: WriteOptions
  ) => Effect.Effect<TrainingJob.TrainingJob, ApiError>
  /** `GET /v1/preview/training-jobs/{training_job_id}` */
  readonly getTrainingJob: (id: TrainingJobId) => Effect.Effect<TrainingJob.TrainingJob, ApiError>
  /** `GET /v1/preview/training-jobs/{training_job_id}/events`: one page of events. */
  readonly listTrainingJobEvents: (
    id: TrainingJobId,
    params?: ListEventsParams
  ) => Effect.Effect<Api.TrainingJobEventPage, ApiError>
  /** The job's events so far, page after page; it ends where the service has no more (it does not wait). */
  readonly trainingJobEvents: (id: TrainingJobId, options?: PageOptions) => Stream.Stream<TrainingJobEvent, ApiError>
  /**
   * Follow a job: its events as they happen, each once, until `training_ended` or `training_failed` (the
   * last element). Pages are read back to back while `has_more`; when caught up it polls every
   * `pollInterval`, or, with `wait`, asks the backend to hold the request until an event comes (the
   * embedded backend's `wait_ms`; a backend that ignores it is still polled no faster than `pollInterval`).
   */
  readonly followTrainingJobEvents: (
    id: TrainingJobId,
    options?: FollowOptions
  ) => Stream.Stream<TrainingJobEvent, ApiError>
  /**
   * Whether the backend honours `Idempotency-Key` (see the module): the option when given, else `true` once
   * any response said `x-idempotency-keys: honoured`; when nothing has been heard yet, `GET /v1/health` is
   * asked once (a failure of it reads as `false`, and it is asked again next time).
   */
  readonly honoursIdempotencyKeys: Effect.Effect<boolean>
  /** `GET /v1/health` */
  readonly health: Effect.Effect<Health, ApiError>
  /** `GET /v1/system-check` (a failing check is a 503, so a `ServerError`). */
  readonly systemCheck: Effect.Effect<SystemCheck, ApiError>
  /** `GET /v1/preview/base-models`: the trainable base models (newer deployments). */
  readonly listBaseModels: Effect.Effect<ReadonlyArray<string>, ApiError>
  /** `POST /v1/chat/completions` */
  readonly createChatCompletion: (request: ChatCompletionRequest) => Effect.Effect<ChatCompletion, ApiError>
  /** `POST /v1/chat/completions` with `stream: true`: the chunks as they come. */
  readonly streamChatCompletion: (request: ChatCompletionRequest) => Stream.Stream<ChatCompletionChunk, ApiError>
}

/** The training client service. */
export class TrainingClient extends Context.Tag("effect-rl/TrainingClient")<TrainingClient, Service>() {}

const calls = {
  createModel: endpointCall(Api.createModel),
  deleteModel: endpointCall(Api.deleteModel),
  listCheckpoints: endpointCall(Api.listCheckpoints),
  deleteCheckpoints: endpointCall(Api.deleteCheckpoints),
  log: endpointCall(Api.log),
  createTrainingJob: endpointCall(Api.createTrainingJob),
  createSftTrainingJob: endpointCall(Api.createSftTrainingJob),
  getTrainingJob: endpointCall(Api.getTrainingJob),
  listTrainingJobEvents: endpointCall(Api.listTrainingJobEvents),
  health: endpointCall(Api.health),
  systemCheck: endpointCall(Api.systemCheck),
  listBaseModels: endpointCall(Api.listBaseModels)
}

/** How a call that creates or logs is sent: its retry mode and its key. */
interface WriteMode {
  readonly retry: RetryMode
  readonly headers?: Readonly<Record<string, string>> | undefined
}

/** The mode of a model create with `return_existing`: an upsert, retried anywhere. */
const upsert = (options: WriteOptions | undefined): WriteMode =>
  options?.idempotencyKey === undefined
    ? { retry: true }
    : { retry: true, headers: { "Idempotency-Key": options.idempotencyKey } }

/** Whether a response says its backend honours `Idempotency-Key`. */
const saysHonoured = (response: HttpClientResponse.HttpClientResponse): boolean =>
  response.headers[IDEMPOTENCY_KEYS_HEADER]?.trim().toLowerCase() === IDEMPOTENCY_KEYS_HONOURED

/** Build the client over the platform `HttpClient`, with options given in full (no env read). */
export const make = (options: Options & { readonly baseUrl: string | URL }) =>
  Effect.gen(function* () {
    // What the backend said of idempotency keys: `true` once any response said they are honoured (one
    // backend behind one base URL, so it sticks); `false` once asked and not told; `undefined` before.
    let heard: boolean | undefined = options.honoursIdempotencyKeys
    const learn = (response: HttpClientResponse.HttpClientResponse) =>
      Effect.sync(() => {
        if (options.honoursIdempotencyKeys === undefined && saysHonoured(response)) heard = true
      })
    const transport = makeTransport(HttpClientTag.tap(yield* HttpClientTag.HttpClient, learn), options)

    const health = calls.health.run(transport, { retry: true }).pipe(Effect.withSpan("TrainingClient.health"))
    const honoursIdempotencyKeys: Effect.Effect<boolean> = Effect.suspend(() =>
      heard !== undefined
        ? Effect.succeed(heard)
        : health.pipe(
            Effect.map(() => {
              heard = heard ?? false
              return heard
            }),
            Effect.orElseSucceed(() => false)
          )
    )

    /**
     * The headers and retry mode of a call that creates or logs: retried like a GET only under a key the
     * backend honours (asked when a failure comes); else only when provably unsent (failures of unknown
     * outcome `Ambiguous`).
     */
    const write = (options: WriteOptions | undefined): WriteMode =>
      options?.idempotencyKey === undefined
        ? { retry: "unsent" }
        : { retry: { keyHonoured: honoursIdempotencyKeys }, headers: { "Idempotency-Key": options.idempotencyKey } }

    const listCheckpoints = (modelId: ModelId, params?: ListCheckpointsParams) =>
      calls.listCheckpoints
        .run(transport, { path: { model_id: modelId }, urlParams: params ?? {}, retry: true })
        .pipe(Effect.withSpan("TrainingClient.listCheckpoints", { attributes: { model_id: modelId } }))

    const listTrainingJobEvents = (id: TrainingJobId, params?: ListEventsParams) =>
      calls.listTrainingJobEvents
        .run(transport, { path: { training_job_id: id }, urlParams: params ?? {}, retry: true })
        .pipe(Effect.withSpan("TrainingClient.listTrainingJobEvents", { attributes: { training_job_id: id } }))

    const service: Service = {
      createModel: (body, options) =>
        // With `return_existing` a repeat answers the same model: safe to retry anywhere.
        calls.createModel
          .run(transport, { payload: body, ...(body.return_existing === true ? upsert(options) : write(options)) })
          .pipe(
            Effect.withSpan("TrainingClient.createModel", { attributes: { project: body.project, name: body.name } })
          ),
      deleteModel: (modelId) =>
        calls.deleteModel
          .run(transport, { path: { model_id: modelId }, retry: true })
          .pipe(Effect.withSpan("TrainingClient.deleteModel", { attributes: { model_id: modelId } })),
      listCheckpoints,
      checkpoints: (modelId, options) =>
        pages(
          (after) =>
            listCheckpoints(modelId, {
              ...(after === undefined ? {} : { after }),
              ...(options?.limit === undefined ? {} : { limit: options.limit }),
              ...(options?.order === undefined ? {} : { order: options.order })
            }),
          options?.after
        ),
      latestCheckpoint: (modelId) =>
        Effect.map(listCheckpoints(modelId, { limit: 1, order: "desc" }), (page) => Option.fromNullable(page.data[0])),
      deleteCheckpoints: (modelId, steps) =>
        calls.deleteCheckpoints
          .run(transport, { path: { model_id: modelId }, payload: { steps }, retry: true })
          .pipe(Effect.withSpan("TrainingClient.deleteCheckpoints", { attributes: { model_id: modelId } })),
      log: (modelId, body, options) =>
        calls.log.run(transport, { path: { model_id: modelId }, payload: body, ...write(options) }).pipe(
          Effect.withSpan("TrainingClient.log", {
            attributes: { model_id: modelId, split: body.split, groups: body.trajectory_groups.length }
          })
        ),
      createTrainingJob: (body, options) =>
        calls.createTrainingJob.run(transport, { payload: body, ...write(options) }).pipe(
          Effect.withSpan("TrainingClient.createTrainingJob", {
            attributes: { model_id: body.model_id, groups: body.trajectory_groups.length }
          })
        ),
      createSftTrainingJob: (body, options) =>
        Effect.zipRight(
          checkSftTrainingJob(body),
          calls.createSftTrainingJob.run(transport, { payload: body, ...write(options) })
        ).pipe(Effect.withSpan("TrainingClient.createSftTrainingJob", { attributes: { model_id: body.model_id } })),
      getTrainingJob: (id) =>
        calls.getTrainingJob
          .run(transport, { path: { training_job_id: id }, retry: true })
          .pipe(Effect.withSpan("TrainingClient.getTrainingJob", { attributes: { training_job_id: id } })),
      listTrainingJobEvents,
      trainingJobEvents: (id, options) =>
        pages(
          (after) =>
            listTrainingJobEvents(id, {
              ...(after === undefined ? {} : { after }),
              ...(options?.limit === undefined ? {} : { limit: options.limit })
            }),
          options?.after
        ),
      followTrainingJobEvents: (id, options) => follow((params) => listTrainingJobEvents(id, params), options),
      honoursIdempotencyKeys,
      health,
      systemCheck: calls.systemCheck
        .run(transport, { retry: true })
        .pipe(Effect.withSpan("TrainingClient.systemCheck")),
      listBaseModels: calls.listBaseModels
        .run(transport, { retry: true })
        .pipe(Effect.withSpan("TrainingClient.listBaseModels")),
      createChatCompletion: (request) =>
        Chat.create(transport, request).pipe(
          // No stack trace: it would name this line, not the caller's, at a cost of about 0.4% of `npm start`.
          Effect.withSpan("TrainingClient.createChatCompletion", {
            attributes: { model: request.model ?? "" },
            captureStackTrace: false
          })
        ),
      streamChatCompletion: (request) => Chat.stream(transport, request)
    }
    return service
  })

/**
 * Checks an SFT job body as the service would, without sending it: a key the published schema does not take
 * (it is closed: `config`'s unknown keys, any key of `experimental_config`) fails with an `InvalidRequest` whose
 * `detail` names each key as the service's 422 would (`extra_forbidden`), and so does a value it refuses
 * (`batch_size` past 32, say). Typed callers cannot write such a body; this catches one built from untyped data
 * (a config file, a cast). `createSftTrainingJob` runs it before sending.
 */
export const checkSftTrainingJob = (body: CreateSftTrainingJob): Effect.Effect<void, ApiError> => {
  const call = { method: "POST" as const, path: Api.createSftTrainingJob.path }
  const extra = TrainingJob.sftExtraKeys(body)
  if (extra.length === 0) {
    return Schema.encodeUnknown(TrainingJob.CreateSftTrainingJob)(body).pipe(
      Effect.mapError((error) => invalidRequest(call, "body", error)),
      Effect.asVoid
    )
  }
  const detail = extra.map((path) => ({
    loc: ["body", ...path],
    msg: "Extra inputs are not permitted",
    type: "extra_forbidden"
  }))
  const keys = extra.map((path) => path.join(".")).join(", ")
  return Effect.fail(
    new ApiError({
      reason: "InvalidRequest",
      ...call,
      description: `the service takes no key ${keys} in an SFT job (its schema is closed); the request was not sent`,
      detail,
      retryable: false
    })
  )
}

/**
 * The cursor after a page: its `last_id`, or, when the service left that at its published default `""`, the
 * id of the page's last item; `undefined` for an empty page that names none.
 */
const cursorAfter = (page: {
  readonly data: ReadonlyArray<{ readonly id: string }>
  readonly last_id: string
}): string | undefined => (page.last_id !== "" ? page.last_id : page.data.at(-1)?.id)

/**
 * All items of a cursor-paged listing: each page is read with `after` set to the previous page's cursor
 * (see {@link cursorAfter}), until `has_more` is false. A page that comes back empty ends the listing even
 * with `has_more` (asking again with the same cursor would get the same page).
 */
const pages = <A extends { readonly id: string }>(
  page: (
    after: string | undefined
  ) => Effect.Effect<
    { readonly data: ReadonlyArray<A>; readonly last_id: string; readonly has_more: boolean },
    ApiError
  >,
  after: string | undefined
): Stream.Stream<A, ApiError> =>
  Stream.paginateChunkEffect(after, (cursor) =>
    Effect.map(page(cursor), (p) => {
      const next = cursorAfter(p)
      return [
        Chunk.fromIterable(p.data),
        p.has_more && p.data.length > 0 && next !== undefined ? Option.some(next) : Option.none()
      ]
    })
  )

/**
 * Follow a job's events until a terminal one: back to back while `has_more` brings new events, and one poll
 * per `pollInterval` (less the time a long-poll request already waited) whenever a page brings nothing new,
 * even one that says `has_more`. Events already seen are dropped, so a page served twice does not repeat
 * them; events of an unknown type are passed on and never end the follow.
 */
const follow = (
  page: (params: ListEventsParams) => Effect.Effect<Api.TrainingJobEventPage, ApiError>,
  options: FollowOptions | undefined
): Stream.Stream<TrainingJobEvent, ApiError> => {
  const pollInterval = Duration.decode(options?.pollInterval ?? Duration.seconds(1))
  const wait = options?.wait === undefined ? undefined : Duration.decode(options.wait)
  const waitMs = wait === undefined ? undefined : Math.min(60_000, Math.round(Duration.toMillis(wait)))
  return Stream.suspend(() => {
    const seen = new Set<string>()
    let after = options?.after
    const step = Effect.gen(function* () {
      const params: ListEventsParams = {
        ...(after === undefined ? {} : { after }),
        limit: 100,
        // A backend with the long poll holds the request only when nothing is new, so asking every time
        // costs nothing while paging; one without it ignores the parameter and the pause below applies.
        ...(waitMs !== undefined ? { wait_ms: waitMs } : {})
      }
      const started = yield* Clock.currentTimeMillis
      const result = yield* page(params)
      const fresh = result.data.filter((event) => !seen.has(event.id))
      for (const event of fresh) seen.add(event.id)
      after = cursorAfter(result) ?? after
      if (fresh.length === 0) {
        const elapsed = (yield* Clock.currentTimeMillis) - started
        const pause = Duration.toMillis(pollInterval) - elapsed
        if (pause > 0) yield* Effect.sleep(Duration.millis(pause))
      }
      return Chunk.fromIterable(fresh)
    })
    return Stream.repeatEffectChunk(step).pipe(Stream.takeUntil(TrainingJob.isTerminal))
  })
}

/** The client as a layer, with options given in full; `baseUrl` defaults to the hosted service ({@link DEFAULT_URL}). */
export const layer = (options: Options = {}): Layer.Layer<TrainingClient, never, HttpClient.HttpClient> =>
  Layer.effect(TrainingClient, make({ ...options, baseUrl: options.baseUrl ?? DEFAULT_URL }))

/**
 * The base URL a client built by {@link layerConfig} with these options calls: the option, else
 * `EFFECT_RL_TRAINING_URL`, else {@link DEFAULT_URL} (what `effect-rl health` prints it asked).
 */
export const configuredUrl = (options: Options = {}): Effect.Effect<string, ConfigError.ConfigError> =>
  Effect.map(resolveOptions(options, URL_ENV, DEFAULT_URL), ({ baseUrl }) => baseUrl.toString())

/**
 * The client as a layer reading the environment: `WANDB_API_KEY` (as a `Redacted`) and
 * `EFFECT_RL_TRAINING_URL`, each used only where `options` leaves it out; the URL defaults to
 * {@link DEFAULT_URL} (the old host, {@link PREVIOUS_URL}, through either).
 */
export const layerConfig = (
  options: Options = {}
): Layer.Layer<TrainingClient, ConfigError.ConfigError, HttpClient.HttpClient> =>
  Layer.effect(TrainingClient, Effect.flatMap(resolveOptions(options, URL_ENV, DEFAULT_URL), make))
