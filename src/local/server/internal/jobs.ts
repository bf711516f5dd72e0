/**
 * The jobs group over the store; the job worker (`worker.ts`) runs what these routes enqueue.
 *
 * - `POST /v1/preview/training-jobs` (RL) and `POST /v1/preview/sft-training-jobs` (SFT): enqueue a job for
 *   the body's `model_id` and answer its record as the published `TrainingJobResponse` has it, `{id, model_id,
 *   status: "PENDING", progress, error_message, training_start, training_end, created_at, updated_at}`, with the
 *   backend's own `kind` (`rl` or `sft`) and `step`, which the `TrainingJob` schema keeps. The SFT body is as
 *   closed as the published schema: a key it does not name is a 422 naming it (`extra_forbidden`). An unknown
 *   model is 404 `{"detail": "Model not found"}`. Idempotent: a repeat of an `Idempotency-Key` answers the first
 *   job and enqueues nothing; the same key with another body is 409.
 * - `GET /v1/preview/training-jobs/{id}`: the job's record (`status` `PENDING`, `RUNNING`, then `COMPLETED` or
 *   `FAILED`; `progress` its gradient steps done over those announced; `step` the checkpoint step it produced,
 *   once completed; `error_message` once failed); 404 `{"detail": "Training job not found"}` when unknown.
 * - `GET /v1/preview/training-jobs/{id}/events?after=&limit=&wait_ms=`: a cursor page of the job's events,
 *   oldest first. `after` is the id of the last event seen; an `after` that is not an event of this job is
 *   404 `{"detail": "Training job event not found"}` (not an empty page, so a client with a stale cursor
 *   learns of it rather than waiting forever). **Long poll (an extension):** with `wait_ms` (0 to 60000) the
 *   request is held until the job has an event after `after` or `wait_ms` has passed, then answers the page
 *   as usual (empty when the time ran out), so a client following a job learns of each event at once.
 */
import type * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { ModelId } from "../../../api/Model.js"
import type { TrainingJobEventPage } from "../../../api/TrainingApi.js"
import {
  CreateSftTrainingJob,
  CreateTrainingJob,
  type ListEventsParams,
  TrainingJob,
  type TrainingJobId
} from "../../../api/TrainingJob.js"
import { JobEvents } from "../../store/JobEvents.js"
import { type JobKind, type JobRecord, Jobs } from "../../store/Jobs.js"
import type { StoreError } from "../../store/StoreError.js"
import { encoded, idempotent, refuse } from "./idempotency.js"
import { detail } from "./responses.js"

const MODEL_NOT_FOUND = "Model not found"
const JOB_NOT_FOUND = "Training job not found"
const EVENT_NOT_FOUND = "Training job event not found"

/** A job record as the wire `TrainingJob` (its ids are UUIDs the store generated or checked). */
const toWire = (job: JobRecord): TrainingJob => ({
  ...job,
  id: job.id as TrainingJobId,
  model_id: job.model_id as ModelId
})

/** Enqueues a job of `kind` with its encoded body, through `idempotent`. */
const enqueue = <A, I>(route: string, kind: JobKind, schema: Schema.Schema<A, I>, payload: A & { model_id: string }) =>
  idempotent(
    route,
    Effect.gen(function* () {
      const request = yield* Schema.encode(schema)(payload).pipe(Effect.orDie)
      const jobs = yield* Jobs
      const job = yield* jobs
        .enqueue(payload.model_id, kind, request)
        .pipe(
          Effect.catchTag("StoreError", (e) =>
            Effect.fail(e.reason === "NotFound" ? refuse(404, MODEL_NOT_FOUND) : refuse(409, e.message))
          )
        )
      return yield* encoded(TrainingJob, toWire(job))
    })
  )

/** `POST /v1/preview/training-jobs` */
export const createTrainingJob = ({ payload }: { readonly payload: CreateTrainingJob }) =>
  enqueue("POST /v1/preview/training-jobs", "rl", CreateTrainingJob, payload)

/** `POST /v1/preview/sft-training-jobs` */
export const createSftTrainingJob = ({ payload }: { readonly payload: CreateSftTrainingJob }) =>
  enqueue("POST /v1/preview/sft-training-jobs", "sft", CreateSftTrainingJob, payload)

/** A store failure: `NotFound` 404 with `message`, `Conflict` 409; anything else is a defect. */
const failure =
  (message: string) =>
  (error: StoreError): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
    if (error.reason === "NotFound") return Effect.succeed(detail(404, message))
    if (error.reason === "Conflict") return Effect.succeed(detail(409, error.message))
    return Effect.die(error)
  }

/** `GET /v1/preview/training-jobs/{training_job_id}` */
export const getTrainingJob = ({ path }: { readonly path: { readonly training_job_id: TrainingJobId } }) =>
  Effect.flatMap(Jobs, (jobs) => jobs.get(path.training_job_id)).pipe(
    Effect.map((job): TrainingJob | HttpServerResponse.HttpServerResponse => toWire(job)),
    Effect.catchTag("StoreError", failure(JOB_NOT_FOUND))
  )

/** `GET /v1/preview/training-jobs/{training_job_id}/events`, with the `wait_ms` long poll. */
export const listTrainingJobEvents = ({
  path,
  urlParams
}: {
  readonly path: { readonly training_job_id: TrainingJobId }
  readonly urlParams: ListEventsParams
}) =>
  Effect.gen(function* () {
    const id = path.training_job_id
    yield* Effect.flatMap(Jobs, (jobs) => jobs.get(id))
    const events = yield* JobEvents
    const page = Effect.gen(function* () {
      if (urlParams.wait_ms !== undefined && urlParams.wait_ms > 0) {
        yield* events.waitForEvents(id, urlParams.after, urlParams.wait_ms)
      }
      return yield* events.list(id, { after: urlParams.after, limit: urlParams.limit })
    })
    return yield* page.pipe(
      Effect.map(
        (result): TrainingJobEventPage | HttpServerResponse.HttpServerResponse => result as TrainingJobEventPage
      ),
      Effect.catchTag("StoreError", failure(EVENT_NOT_FOUND))
    )
  }).pipe(Effect.catchTag("StoreError", failure(JOB_NOT_FOUND)))
