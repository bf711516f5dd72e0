/**
 * A data directory written by the previous release (migrations 1 to 7: jobs `queued`, `running`, `succeeded`,
 * `failed`, with `started_at` and `finished_at`) opens with this one and answers job records in the published
 * shape (migration 8): its store's records, and the server's answers through the real client, which requires
 * the nine fields of `TrainingJobResponse`. Its events are kept (the migration rebuilds `job_events` with the
 * jobs' table), and new jobs are numbered after the old ones.
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import type { ModelId } from "../../src/api/Model.js"
import type { TrainingJobId } from "../../src/api/TrainingJob.js"
import * as LocalBackend from "../../src/LocalBackend.js"
import { overview } from "../../src/local/store/Dashboard.js"
import { filename, MIGRATIONS_TABLE } from "../../src/local/store/Database.js"
import { migrations } from "../../src/local/store/internal/migrations.js"
import { JobEvents } from "../../src/local/store/JobEvents.js"
import { INTERRUPTED_MESSAGE, Jobs } from "../../src/local/store/Jobs.js"
import { backendWith } from "../server/support.js"
import { training } from "../support/clients.js"
import { tempDir, withStore } from "./support.js"

const MODEL = "3f1c9a52-7d2e-4b8a-9c61-0e5f4d3b2a19"
const ids = {
  succeeded: "8b0e6c1d-2f4a-4e7b-a3c5-9d1f0b2e4c6a",
  failed: "9c1f7d2e-3a5b-4f8c-b4d6-0e2a1c3f5d7b",
  running: "a2d8e4f1-4b6c-4a9d-85e7-1f3b2d4a6c8e",
  queued: "b3e9f5a2-5c7d-4bae-96f8-2a4c3e5b7d9f"
}
const T = (n: number) => `2026-03-01T00:00:0${n}.000Z`

/** The previous release's migrations: every one before the job records'. */
const previous = Object.fromEntries(Object.entries(migrations).filter(([name]) => !name.startsWith("8_")))

/**
 * Writes `dir`'s database as the previous release left it: a model, a job in each of the four old statuses
 * (the succeeded one with its step and events), optionally without the queued one.
 */
const writePrevious = (dir: string, options: { readonly queued: boolean }) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql.unsafe("PRAGMA foreign_keys = ON")
    yield* Migrator.make({})({ loader: Migrator.fromRecord(previous), table: MIGRATIONS_TABLE })
    yield* sql`INSERT INTO models (id, entity, project, name, base_model, run_id, created_at)
      VALUES (${MODEL}, 'local', 'old', 'agent', 'effect-rl/tiny', NULL, ${T(0)})`
    const job = (id: string, status: string, started: string | null, finished: string | null, step: number | null) =>
      sql`INSERT INTO training_jobs (id, model_id, kind, status, request, created_at, started_at, finished_at, step,
        error_message) VALUES (${id}, ${MODEL}, 'rl', ${status}, ${status === "queued" || status === "running" ? '{"n":1}' : "null"},
        ${T(1)}, ${started}, ${finished}, ${step}, ${status === "failed" ? "diverged" : null})`
    yield* job(ids.succeeded, "succeeded", T(2), T(3), 1)
    yield* job(ids.failed, "failed", T(4), T(5), null)
    yield* job(ids.running, "running", T(6), null, null)
    if (options.queued) yield* job(ids.queued, "queued", null, null, null)
    const event = (seq: number, type: string, data: string) =>
      sql`INSERT INTO job_events (id, job_id, seq, type, data, created_at)
        VALUES (${crypto.randomUUID()}, ${ids.succeeded}, ${seq}, ${type}, ${data}, ${T(2)})`
    yield* event(1, "training_started", '{"num_sequences":1}')
    yield* event(2, "gradient_step", '{"loss":0.5}')
    yield* event(3, "training_ended", '{"step":1}')
  }).pipe(Effect.provide(SqliteClient.layer({ filename: filename(dir) })))

describe("a data directory of the previous release", () => {
  it.scoped("its store opens with its jobs in the published shape, their events kept", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* writePrevious(dir, { queued: true })
      yield* withStore(dir)(
        Effect.gen(function* () {
          const jobs = yield* Jobs
          expect(yield* jobs.get(ids.succeeded)).toEqual({
            id: ids.succeeded,
            model_id: MODEL,
            kind: "rl",
            status: "COMPLETED",
            progress: 1,
            error_message: null,
            training_start: T(2),
            training_end: T(3),
            created_at: T(1),
            updated_at: T(3),
            step: 1
          })
          expect(yield* jobs.get(ids.failed)).toMatchObject({
            status: "FAILED",
            progress: null,
            error_message: "diverged",
            training_start: T(4),
            training_end: T(5),
            updated_at: T(5)
          })
          // The job the previous server left running is failed by recovery, as before, in the new names.
          const recovered = yield* jobs.get(ids.running)
          expect(recovered).toMatchObject({
            status: "FAILED",
            error_message: INTERRUPTED_MESSAGE,
            training_start: T(6)
          })
          expect(recovered.training_end).toEqual(expect.any(String))
          expect(recovered.updated_at).toBe(recovered.training_end)
          expect(yield* jobs.get(ids.queued)).toMatchObject({
            status: "PENDING",
            progress: null,
            training_start: null,
            updated_at: T(1)
          })
          const events = yield* JobEvents
          expect((yield* events.list(ids.succeeded)).data.map((e) => e.type)).toEqual([
            "training_started",
            "gradient_step",
            "training_ended"
          ])
          expect((yield* events.list(ids.running)).data.map((e) => e.type)).toEqual(["training_failed"])
          // The pending job is claimed as any other, and a new job comes after the old ones.
          const claimed = yield* jobs.claim()
          expect(Option.map(claimed, (c) => [c.job.id, c.job.status, c.request])).toEqual(
            Option.some([ids.queued, "RUNNING", { n: 1 }])
          )
          const next = yield* jobs.enqueue(MODEL, "sft", {})
          expect((yield* jobs.list(MODEL)).map((j) => j.id)).toEqual([
            ids.succeeded,
            ids.failed,
            ids.running,
            ids.queued,
            next.id
          ])
          const shown = yield* overview(MODEL)
          expect(shown.jobs.map((j) => j.status)).toEqual(["COMPLETED", "FAILED", "FAILED", "RUNNING", "PENDING"])
          expect(shown.checkpoints).toEqual([{ step: 1, deleted: true, metrics: {}, created_at: null }])
        })
      )
    })
  )

  it.scoped("the server on it answers the published job record, which the client decodes", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* writePrevious(dir, { queued: false })
      const backend = Context.get(yield* Layer.build(backendWith({ dataDir: dir })), LocalBackend.LocalBackend)
      const client = yield* training(backend.url)
      const done = yield* client.getTrainingJob(ids.succeeded as TrainingJobId)
      expect(done).toMatchObject({
        id: ids.succeeded,
        model_id: MODEL as ModelId,
        status: "COMPLETED",
        progress: 1,
        training_start: T(2),
        training_end: T(3),
        updated_at: T(3),
        step: 1
      })
      expect((yield* client.getTrainingJob(ids.failed as TrainingJobId)).status).toBe("FAILED")
      const events = yield* Stream.runCollect(client.trainingJobEvents(ids.succeeded as TrainingJobId))
      expect([...events].map((e) => e.type)).toEqual(["training_started", "gradient_step", "training_ended"])
    })
  )
})
