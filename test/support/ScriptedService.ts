/**
 * A scripted training service in memory, on Effect's `Clock`: chat completions take a scripted time and are
 * answered by the checkpoint their model name asks for; a training job trains for a scripted time after the
 * job before it ends (one at a time, as on the service), then its checkpoint exists. It stands in for the
 * hosted service (which cannot be reached from here) wherever latencies matter: under the test clock a loop of
 * minute-long rollouts and jobs runs in milliseconds, and `bench/loop.ts` runs it on the real clock.
 *
 * It records every job (the step it trained from, when it was submitted, started and ended, the versions its
 * trajectories were sampled with) and every completion (the checkpoint that answered it, and when).
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { ChatCompletion, type ChatCompletionRequest } from "../../src/api/ChatCompletion.js"
import { Checkpoint, CheckpointId, DeleteCheckpointsResult, Model, ModelId } from "../../src/api/Model.js"
import {
  type CreateTrainingJob,
  TrainingJobId as JobId,
  TrainingJob,
  TrainingJobEvent,
  type TrainingJobId
} from "../../src/api/TrainingJob.js"
import { ApiError } from "../../src/client/ApiError.js"
import { InferenceClient } from "../../src/client/InferenceClient.js"
import { TrainingClient } from "../../src/client/TrainingClient.js"

/** The latencies of the service. */
export interface Script {
  /** How long the `n`-th chat completion (from 0) takes. */
  readonly completion: (n: number, request: ChatCompletionRequest) => Duration.DurationInput
  /** How long a training job trains (once the job before it has ended). */
  readonly train: Duration.DurationInput
}

/** A job the service received. */
export interface Job {
  readonly id: TrainingJobId
  /** The checkpoint it trains from (it makes `from + 1`). */
  readonly from: number
  readonly submittedAt: number
  readonly startedAt: number
  readonly endsAt: number
  readonly body: CreateTrainingJob
}

/** A completion the service answered. */
export interface Completion {
  /** The checkpoint that answered it. */
  readonly step: number
  readonly startedAt: number
  readonly endedAt: number
}

/** The running service: its layer and what it saw. */
export interface Scripted {
  /** Both clients (the inference one answers nothing: policies sample on the training host). */
  readonly layer: Layer.Layer<TrainingClient | InferenceClient>
  readonly jobs: Array<Job>
  readonly completions: Array<Completion>
  /** Steps deleted by retention. */
  readonly deleted: Set<number>
}

const uuid = (group: string, n: number) => `00000000-0000-4000-${group}-${n.toString().padStart(12, "0")}`

const MODEL_ID = ModelId.make("00000000-0000-4000-8000-000000000001")

const model = new Model({ id: MODEL_ID, entity: "me", project: "scripted", name: "policy", base_model: "base" })

const answer = Schema.decodeUnknownSync(ChatCompletion)
const event = Schema.decodeUnknownSync(TrainingJobEvent)
/** A job record with the published fields a script does not set (times fixed: nothing reads them). */
const job = (fields: Readonly<Record<string, unknown>>) =>
  Schema.decodeUnknownSync(TrainingJob)({
    model_id: "00000000-0000-4000-8000-000000000001",
    status: "PENDING",
    progress: null,
    error_message: null,
    training_start: null,
    training_end: null,
    created_at: "2026-01-01T00:00:00Z",
    updated_at: "2026-01-01T00:00:00Z",
    ...fields
  })

const notFound = (path: string, description: string) =>
  new ApiError({ reason: "NotFound", method: "POST", path, status: 404, description, retryable: false })

const unscripted = (what: string) => Effect.dieMessage(`the scripted service does not answer ${what}`)

/** A scripted service (see the module). */
export const make = (script: Script): Scripted => {
  const jobs: Array<Job> = []
  const completions: Array<Completion> = []
  const deleted = new Set<number>()
  const byKey = new Map<string, Job>()
  const trainMillis = Duration.toMillis(Duration.decode(script.train))
  /** Checkpoint step -> when it exists (step 0, the base weights, always). */
  const available = new Map<number, number>([[0, Number.NEGATIVE_INFINITY]])
  const existing = (now: number) =>
    [...available]
      .filter(([step, at]) => at <= now && !deleted.has(step))
      .map(([step]) => step)
      .sort((a, b) => a - b)
  const checkpoint = (step: number) =>
    new Checkpoint({ id: CheckpointId.make(uuid("8000", 100 + step)), step, metrics: {} })
  const eventsOf = (j: Job, now: number) => [
    event({ id: uuid("a000", j.from * 10), type: "training_started", data: { num_sequences: 1 } }),
    ...(now >= j.endsAt
      ? [
          event({ id: uuid("a000", j.from * 10 + 1), type: "gradient_step", data: { loss: 0.5, num_trajectories: 1 } }),
          event({ id: uuid("a000", j.from * 10 + 2), type: "training_ended", data: {} })
        ]
      : [])
  ]
  const jobOf = (id: TrainingJobId) => jobs.find((j) => j.id === id)

  const training: TrainingClient["Type"] = {
    createModel: () => Effect.succeed(model),
    deleteModel: () => unscripted("deleteModel"),
    listCheckpoints: () => unscripted("listCheckpoints"),
    checkpoints: () =>
      Stream.unwrap(Effect.map(Clock.currentTimeMillis, (now) => Stream.fromIterable(existing(now).map(checkpoint)))),
    latestCheckpoint: () =>
      Effect.map(Clock.currentTimeMillis, (now) =>
        Option.fromNullable(existing(now).at(-1)).pipe(Option.map(checkpoint))
      ),
    deleteCheckpoints: (_, steps) =>
      Effect.sync(() => {
        for (const step of steps) deleted.add(step)
        return new DeleteCheckpointsResult({ deleted_count: steps.length, not_found_steps: [] })
      }),
    log: () => Effect.succeed(null),
    createTrainingJob: (body, options) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const key = options?.idempotencyKey
        const known = key === undefined ? undefined : byKey.get(key)
        if (known !== undefined) return job({ id: known.id })
        const last = jobs.at(-1)
        const from = last === undefined ? Math.max(...available.keys()) : last.from + 1
        const startedAt = Math.max(now, last?.endsAt ?? now)
        const created: Job = {
          id: JobId.make(uuid("9000", jobs.length)),
          from,
          submittedAt: now,
          startedAt,
          endsAt: startedAt + trainMillis,
          body
        }
        jobs.push(created)
        if (key !== undefined) byKey.set(key, created)
        available.set(from + 1, created.endsAt)
        return job({ id: created.id })
      }),
    createSftTrainingJob: () => unscripted("createSftTrainingJob"),
    getTrainingJob: (id) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const j = jobOf(id)
        return job({
          id,
          status: j !== undefined && now >= j.endsAt ? "COMPLETED" : "RUNNING",
          step: (j?.from ?? 0) + 1
        })
      }),
    listTrainingJobEvents: () => unscripted("listTrainingJobEvents"),
    trainingJobEvents: (id) =>
      Stream.unwrap(
        Effect.map(Clock.currentTimeMillis, (now) => {
          const j = jobOf(id)
          return Stream.fromIterable(j === undefined ? [] : eventsOf(j, now))
        })
      ),
    followTrainingJobEvents: (id) =>
      Stream.unwrap(
        Effect.gen(function* () {
          const j = jobOf(id)
          if (j === undefined) return Stream.empty
          const now = yield* Clock.currentTimeMillis
          if (j.endsAt > now) yield* Effect.sleep(Duration.millis(j.endsAt - now))
          return Stream.fromIterable(eventsOf(j, yield* Clock.currentTimeMillis))
        })
      ),
    honoursIdempotencyKeys: Effect.succeed(true),
    health: unscripted("health"),
    systemCheck: unscripted("systemCheck"),
    listBaseModels: unscripted("listBaseModels"),
    createChatCompletion: (request) =>
      Effect.gen(function* () {
        const n = completions.length
        const startedAt = yield* Clock.currentTimeMillis
        const match = /:step(\d+)$/.exec(request.model ?? "")
        const step = match === null ? (existing(startedAt).at(-1) ?? 0) : Number(match[1])
        if (!existing(startedAt).includes(step)) {
          return yield* notFound("/v1/chat/completions", `checkpoint ${step} does not exist`)
        }
        completions.push({ step, startedAt, endedAt: Number.NaN })
        yield* Effect.sleep(script.completion(n, request))
        const endedAt = yield* Clock.currentTimeMillis
        completions[n] = { step, startedAt, endedAt }
        // The checkpoint must still exist when it answers (retention must not delete it under a rollout).
        if (deleted.has(step)) return yield* notFound("/v1/chat/completions", `checkpoint ${step} was deleted`)
        return answer({
          id: `chatcmpl-${n}`,
          object: "chat.completion",
          created: 1,
          model: request.model,
          choices: [
            {
              index: 0,
              // The answer names the checkpoint that gave it, so a trajectory shows what sampled each turn.
              message: { role: "assistant", content: `step${step}` },
              logprobs: { content: [{ token: "a", logprob: -0.7, bytes: [97], top_logprobs: [] }] },
              finish_reason: "stop"
            }
          ],
          usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 }
        })
      }),
    streamChatCompletion: () => Stream.die("the scripted service does not stream")
  }
  const layer = Layer.mergeAll(
    Layer.succeed(TrainingClient, training),
    // Never called: trainable policies sample on the training host.
    Layer.succeed(InferenceClient, {} as InferenceClient["Type"])
  )
  return { layer, jobs, completions, deleted }
}
