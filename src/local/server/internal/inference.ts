/**
 * Chat completions and the model list over the local engine and the store.
 *
 * Models served:
 * - each base model by name (e.g. `effect-rl/tiny`), at its initial weights (see `baseModels.ts`);
 * - each checkpoint of each trained model as `wandb-artifact:///<entity>/<project>/<name>:step<N>`, and the
 *   latest checkpoint of a model without `:step<N>`. Its weights are loaded with `loadCheckpoint` and kept in a
 *   small LRU by checkpoint id (`policyCache.ts`), so a request does not reload them.
 *
 * - `POST /v1/chat/completions` (and the trailing-slash path): a whole `ChatCompletion`, or with
 *   `stream: true` server-sent events `data: <chunk>\n\n` ending with `data: [DONE]\n\n`; an error after the
 *   stream began is sent as `data: {"error": {...}}` before `[DONE]`.
 * - A request the engine refuses: 400 `{error: {message, type: "BadRequestError", param, code: 400}}`; an
 *   unknown model (or step): 404 in that shape (`NotFoundError`); a request that would take the sampling
 *   work queued over the server's bound (`sampling.ts`): 429 (`RateLimitError`) with `retry-after`.
 * - Decoding runs on the process's decoding scheduler (`engine/Scheduler.ts`; `runRounds`, or a chunk at a
 *   time when streamed): completions take turns, at most 10 ms of decoding per turn of the event loop, so
 *   other requests are answered meanwhile however many completions are in flight.
 * - `GET /v1/models`: `{object: "list", data: [{id, object: "model", created, owned_by, root, parent,
 *   max_model_len}]}`: the base models (owned by `effect-rl`), then every checkpoint, `root` its base model,
 *   `owned_by` its entity, `created` its creation time.
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import type { ChatCompletionChunk, ChatCompletionRequest } from "../../../api/ChatCompletion.js"
import type { InferenceModel } from "../../../api/InferenceModel.js"
import { EngineError, errorBody } from "../../engine/EngineError.js"
import { loadCheckpoint } from "../../engine/policy/Checkpoint.js"
import type { Policy } from "../../engine/policy/Policy.js"
import { type Prepared, prepare, runRounds } from "../../engine/Sampler.js"
import { decoding, type Task } from "../../engine/Scheduler.js"
import { Checkpoints, catalogVersion } from "../../store/Checkpoints.js"
import { Models } from "../../store/Models.js"
import { BASE_MODEL, baseModelNames, basePolicy } from "./baseModels.js"
import { type PolicyCache, promptStatesOf } from "./policyCache.js"
import { openAi } from "./responses.js"
import { RETRY_AFTER_SECONDS, type SamplingBudget } from "./sampling.js"

export {
  /** The base model every fresh backend serves. */
  BASE_MODEL
}

const started = Math.floor(Date.now() / 1000)

/** The inference name of a model's checkpoint. */
export const artifactName = (entity: string, project: string, name: string, step: number): string =>
  `wandb-artifact:///${entity}/${project}/${name}:step${step}`

const ARTIFACT = /^wandb-artifact:\/\/\/([^/]+)\/([^/]+)\/([^/]+?)(?::step(\d+))?$/

const seconds = (iso: string) => Math.floor(Date.parse(iso) / 1000)

const contextLength = (root: string) => (basePolicy(root) ?? basePolicy(BASE_MODEL))?.contextLength ?? null

/** The model list of `GET /v1/models`: the base models, then every checkpoint of every model. */
export const listModels = Effect.gen(function* () {
  const models = yield* Effect.flatMap(Models, (m) => m.list)
  const checkpoints = yield* Effect.flatMap(Checkpoints, (c) => c.all)
  const byId = new Map(models.map((m) => [m.id as string, m]))
  const base = baseModelNames.map(
    (id): InferenceModel => ({
      id,
      object: "model",
      created: started,
      owned_by: "effect-rl",
      root: id,
      parent: null,
      max_model_len: contextLength(id)
    })
  )
  const trained = checkpoints.flatMap((checkpoint): Array<InferenceModel> => {
    const model = byId.get(checkpoint.model_id)
    if (model === undefined) return []
    return [
      {
        id: artifactName(model.entity, model.project, model.name, checkpoint.step),
        object: "model",
        created: seconds(checkpoint.created_at),
        owned_by: model.entity,
        root: model.base_model,
        parent: null,
        max_model_len: contextLength(model.base_model)
      }
    ]
  })
  return { object: "list" as const, data: [...base, ...trained] }
}).pipe(Effect.orDie)

/** A checkpoint whose weights do not match their digest: sampling it is refused, naming it. */
export class DamagedCheckpoint extends Data.TaggedError("DamagedCheckpoint")<{ readonly message: string }> {}

/**
 * The policy a chat completion's `model` names, if any (trained checkpoints through the cache); a
 * {@link DamagedCheckpoint} when the checkpoint's weights do not match their digest.
 */
export const resolvePolicy = (
  name: string,
  cache: PolicyCache
): Effect.Effect<Option.Option<Policy>, DamagedCheckpoint, Models | Checkpoints> =>
  Effect.gen(function* () {
    const base = basePolicy(name)
    if (base !== undefined) return Option.some(base)
    const match = ARTIFACT.exec(name)
    if (match === null) return Option.none()
    // Read before the queries: a write after them makes the entry kept below stale at once.
    const version = catalogVersion()
    const known = cache.resolved(name, version)
    if (known !== undefined) return Option.some(known)
    const [, entity, project, modelName, step] = match
    const model = yield* Effect.flatMap(Models, (m) => m.find(entity, project ?? "", modelName ?? ""))
    if (Option.isNone(model)) return Option.none()
    const checkpoints = yield* Checkpoints
    const checkpoint =
      step === undefined
        ? yield* checkpoints.latest(model.value.id)
        : yield* Effect.option(checkpoints.get(model.value.id, Number(step)))
    if (Option.isNone(checkpoint)) return Option.none()
    const { id, step: at } = checkpoint.value
    const cached = cache.get(id)
    if (cached !== undefined) {
      cache.setResolved(name, version, id)
      return Option.some(cached)
    }
    const weights = yield* checkpoints.weights(model.value.id, at)
    const policy = loadCheckpoint(weights).policy
    cache.set(id, policy)
    cache.setResolved(name, version, id)
    return Option.some(policy)
  }).pipe(
    Effect.catchTag("StoreError", (error) =>
      error.reason === "NotFound"
        ? Effect.succeedNone
        : error.reason === "Corrupt"
          ? Effect.fail(new DamagedCheckpoint({ message: error.message }))
          : Effect.die(error)
    )
  )

const engineError = (error: EngineError) => HttpServerResponse.unsafeJson(errorBody(error), { status: 400 })

const sse = (data: string) => `data: ${data}\n\n`

const streamErrorEvent = (error: unknown) => {
  if (error instanceof EngineError) return sse(JSON.stringify(errorBody(error)))
  return sse(
    JSON.stringify({ error: { message: "Internal Server Error", type: "InternalServerError", param: null, code: 500 } })
  )
}

/**
 * The chunks of a completion as a stream, pulled one by one on the decoding scheduler (`Scheduler.ts`), so
 * decoding happens as the client reads and in turn with the other completions in flight: the event loop gets a
 * turn between chunks (Node writes to the socket only once the microtask queue drains, so without it a whole
 * completion would leave in one write, the first token as late as the last). A throw while decoding fails the
 * stream with what was thrown.
 */
export const chunkStream = (
  chunks: Generator<ChatCompletionChunk | undefined>
): Stream.Stream<ChatCompletionChunk, unknown> =>
  Stream.repeatEffectOption(
    Effect.async<ChatCompletionChunk, Option.Option<unknown>>((resume) => {
      const task: Task = {
        step: () => {
          const next = chunks.next()
          // A pause (the prompt still running): the task keeps its place for a later step.
          if (next.done === true) resume(Effect.fail(Option.none()))
          else if (next.value === undefined) return false
          else resume(Effect.succeed(next.value))
          return true
        },
        fail: (error) => resume(Effect.fail(Option.some(error)))
      }
      decoding.add(task)
      return Effect.sync(() => decoding.remove(task))
    })
  )

/** The SSE body of a stream of chunks (see {@link chunkStream}), an error event and `[DONE]` at the end. */
export const eventStream = (chunks: Generator<ChatCompletionChunk | undefined>) =>
  chunkStream(chunks).pipe(
    Stream.map((chunk) => sse(JSON.stringify(chunk))),
    Stream.catchAll((error) =>
      Stream.fromEffect(
        Effect.as(
          error instanceof EngineError ? Effect.void : Effect.logError("chat completion stream failed", error),
          streamErrorEvent(error)
        )
      )
    ),
    Stream.concat(Stream.make(sse("[DONE]"))),
    Stream.encodeText
  )

/** The 429 of a full sampling queue, in the OpenAI shape, with `retry-after`. */
const busy = (budget: SamplingBudget, tokens: number) =>
  HttpServerResponse.setHeader(
    openAi(429, "RateLimitError", budget.refusal(tokens)),
    "retry-after",
    String(RETRY_AFTER_SECONDS)
  )

/** A completion admitted: the model it names and its planned decoding, its tokens reserved under the budget. */
export interface Admitted extends Prepared {
  /** The model name the request gave (or the base model). */
  readonly name: string
}

/**
 * Checks a chat-completions request and admits it under the budget (for as long as the request's scope, its
 * response being written): the admitted completion, or the answer refusing it (404 for an unknown model, 400
 * for a request the engine refuses, 429 when the queue is full, 500 naming a damaged checkpoint).
 */
export const admit = (
  cache: PolicyCache,
  budget: SamplingBudget,
  payload: ChatCompletionRequest,
  refused: (error: EngineError) => HttpServerResponse.HttpServerResponse = engineError
) =>
  Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    const name = payload.model ?? BASE_MODEL
    const resolved = yield* Effect.either(resolvePolicy(name, cache))
    if (Either.isLeft(resolved)) return Either.left(openAi(500, "InternalServerError", resolved.left.message))
    if (Option.isNone(resolved.right)) {
      return Either.left(openAi(404, "NotFoundError", `The model \`${name}\` does not exist.`))
    }
    const policy = resolved.right.value
    const requestId = request.headers["x-request-id"]
    const options = {
      modelName: name,
      limits: budget.limits,
      promptStates: promptStatesOf(policy),
      ...(requestId === undefined ? {} : { requestId })
    }
    const prepared = yield* Effect.try({
      try: () => prepare(policy, payload, options),
      catch: (error) => error
    }).pipe(Effect.either)
    if (prepared._tag === "Left") {
      if (prepared.left instanceof EngineError) return Either.left(refused(prepared.left))
      return yield* Effect.die(prepared.left)
    }
    if (!(yield* budget.reserve(prepared.right.tokens))) return Either.left(busy(budget, prepared.right.tokens))
    const admitted: Admitted = { ...prepared.right, name }
    return Either.right(admitted)
  })

/**
 * `POST /v1/chat/completions` over a policy cache and the sampling budget: a completion, or its stream of
 * chunks, from the engine. The request is checked first (a 400 before any decoding), then admitted under the
 * budget (a 429 when the queue is full) for as long as its response is being written.
 */
export const createChatCompletion =
  (cache: PolicyCache, budget: SamplingBudget) =>
  ({ payload }: { readonly payload: ChatCompletionRequest }) =>
    Effect.gen(function* () {
      const admitted = yield* admit(cache, budget, payload)
      if (Either.isLeft(admitted)) return admitted.left
      if (payload.stream !== true) return yield* runRounds(admitted.right.rounds())
      return HttpServerResponse.stream(eventStream(admitted.right.stream()), {
        contentType: "text/event-stream",
        headers: { "cache-control": "no-cache" }
      })
    })
