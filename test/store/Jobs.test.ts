import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import { Checkpoints } from "../../src/local/store/Checkpoints.js"
import { JobEvents } from "../../src/local/store/JobEvents.js"
import { INTERRUPTED_MESSAGE, Jobs } from "../../src/local/store/Jobs.js"
import { Models } from "../../src/local/store/Models.js"
import { bytes, modelRequest, tempDir, withStore } from "./support.js"

const newModel = (name: string) =>
  Effect.flatMap(Models, (models) =>
    models.create(modelRequest(name), { initialWeights: Effect.succeed(bytes(0)) })
  ).pipe(Effect.map((created) => created.model.id))

const claimedId = (claimed: Option.Option<{ readonly job: { readonly id: string } }>) =>
  Option.getOrThrow(claimed).job.id

describe("Jobs", () => {
  it.scoped("claims a model's jobs in creation order, one running job per model", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* withStore(dir)(
        Effect.gen(function* () {
          const jobs = yield* Jobs
          const a = yield* newModel("a")
          const b = yield* newModel("b")
          const a1 = yield* jobs.enqueue(a, "rl", { n: 1 })
          const b1 = yield* jobs.enqueue(b, "sft", { n: 2 })
          const a2 = yield* jobs.enqueue(a, "rl", { n: 3 })
          expect(a1).toMatchObject({ status: "PENDING", kind: "rl", model_id: a, training_start: null, step: null })

          const first = Option.getOrThrow(yield* jobs.claim(a))
          expect(first.job).toMatchObject({ id: a1.id, status: "RUNNING" })
          expect(first.request).toEqual({ n: 1 })
          // Model a has a running job: nothing more to claim for it, but b's job can run.
          expect(yield* jobs.claim(a)).toEqual(Option.none())
          expect(claimedId(yield* jobs.claim())).toBe(b1.id)
          expect(yield* jobs.claim()).toEqual(Option.none())

          const done = yield* jobs.succeed(a1.id, { weights: bytes(1), metrics: { loss: 0.5 } })
          expect(done.job).toMatchObject({ status: "COMPLETED", step: 1 })
          expect(done.checkpoint).toMatchObject({ step: 1, metrics: { loss: 0.5 } })
          expect((yield* Effect.flip(jobs.succeed(a1.id, { weights: bytes(1) }))).reason).toBe("Conflict")

          expect(claimedId(yield* jobs.claim(a))).toBe(a2.id)
          const failed = yield* jobs.fail(a2.id, "diverged")
          expect(failed).toMatchObject({ status: "FAILED", error_message: "diverged" })
          expect((yield* Effect.flip(jobs.fail(a2.id, "again"))).reason).toBe("Conflict")

          const events = yield* JobEvents
          expect((yield* events.list(a1.id)).data.map((e) => [e.type, e.data])).toEqual([
            ["training_ended", { step: 1 }]
          ])
          expect((yield* events.list(a2.id)).data.map((e) => [e.type, e.data])).toEqual([
            ["training_failed", { error_message: "diverged" }]
          ])
          expect((yield* jobs.list(a)).map((j) => j.status)).toEqual(["COMPLETED", "FAILED"])
          // An ended job's request body is released (the log keeps the trajectories); a queued one's is kept.
          expect(yield* jobs.request(a1.id)).toBeNull()
          expect(yield* jobs.request(a2.id)).toBeNull()
          const a3 = yield* jobs.enqueue(a, "rl", { n: 4 })
          expect(yield* jobs.request(a3.id)).toEqual({ n: 4 })
          expect((yield* jobs.list()).length).toBe(4)
          expect((yield* Effect.flip(jobs.enqueue(crypto.randomUUID(), "rl", {}))).reason).toBe("NotFound")
          expect((yield* Effect.flip(jobs.get(crypto.randomUUID()))).reason).toBe("NotFound")
          expect(Option.getOrThrow(yield* (yield* Checkpoints).latest(a)).step).toBe(1)
        })
      )
    })
  )

  it.scoped("fails a job left running by a crash when the store reopens", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const ids = yield* withStore(dir)(
        Effect.gen(function* () {
          const jobs = yield* Jobs
          const model = yield* newModel("m")
          const ended = yield* jobs.enqueue(model, "rl", { n: 0 })
          const running = yield* jobs.enqueue(model, "rl", {})
          const queued = yield* jobs.enqueue(model, "rl", { n: 2 })
          yield* jobs.claim(model)
          yield* jobs.succeed(ended.id, { weights: bytes(1) })
          // A job that ended under an earlier version, which kept its body.
          const sql = yield* SqlClient.SqlClient
          yield* sql`UPDATE training_jobs SET request = '{"n":0}' WHERE id = ${ended.id}`
          expect(yield* jobs.request(ended.id)).toEqual({ n: 0 })
          yield* jobs.claim(model)
          yield* (yield* JobEvents).append(running.id, "training_started", { num_sequences: 1 })
          return { ended: ended.id, running: running.id, queued: queued.id }
        })
      )
      yield* withStore(dir)(
        Effect.gen(function* () {
          const jobs = yield* Jobs
          expect(yield* jobs.get(ids.running)).toMatchObject({ status: "FAILED", error_message: INTERRUPTED_MESSAGE })
          expect((yield* jobs.get(ids.queued)).status).toBe("PENDING")
          // Recovery releases the bodies of ended jobs (the one left running included), not a queued one's.
          expect(yield* jobs.request(ids.ended)).toBeNull()
          expect(yield* jobs.request(ids.running)).toBeNull()
          expect(yield* jobs.request(ids.queued)).toEqual({ n: 2 })
          const events = (yield* (yield* JobEvents).list(ids.running)).data
          expect(events.map((e) => e.type)).toEqual(["training_started", "training_failed"])
          expect(events[1]!.data).toEqual({ error_message: INTERRUPTED_MESSAGE })
          // The queued job runs next.
          expect(claimedId(yield* jobs.claim())).toBe(ids.queued)
          expect(yield* jobs.recover).toBe(1)
        })
      )
    })
  )
})

describe("Jobs.claimNext", () => {
  it.scoped("waits for a job to be enqueued, or for the model's running job to end", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* withStore(dir)(
        Effect.gen(function* () {
          const jobs = yield* Jobs
          const model = yield* newModel("m")
          const waiting = yield* Effect.fork(jobs.claimNext(60_000))
          yield* Effect.yieldNow()
          expect(waiting.unsafePoll()).toBeNull()
          const first = yield* jobs.enqueue(model, "rl", {})
          expect(claimedId(yield* Fiber.join(waiting))).toBe(first.id)

          const second = yield* jobs.enqueue(model, "rl", {})
          const blocked = yield* Effect.fork(jobs.claimNext(60_000, model))
          yield* Effect.yieldNow()
          expect(blocked.unsafePoll()).toBeNull()
          yield* jobs.succeed(first.id, { weights: bytes(1) })
          expect(claimedId(yield* Fiber.join(blocked))).toBe(second.id)

          const timedOut = yield* Effect.fork(jobs.claimNext(1_000))
          yield* TestClock.adjust("1 second")
          expect(yield* Fiber.join(timedOut)).toEqual(Option.none())
        })
      )
    })
  )
})
