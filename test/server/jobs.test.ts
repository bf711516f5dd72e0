/**
 * The jobs endpoints on the real server: create (idempotent), get, events paging, unknown model and job.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as TestServices from "effect/TestServices"
import type { ModelId } from "../../src/api/Model.js"
import type { TrainingJobId } from "../../src/api/TrainingJob.js"
import * as LocalBackend from "../../src/LocalBackend.js"
import { Jobs } from "../../src/local/store/Jobs.js"
import { training } from "../support/clients.js"
import { withStore } from "./store.js"
import { auth, Backend, call, send } from "./support.js"

const base = "effect-rl/tiny"
const client = Effect.flatMap(LocalBackend.LocalBackend, ({ url }) => training(url))

const post = (path: string, key: string, body: unknown) =>
  call(path, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json", "idempotency-key": key },
    body: JSON.stringify(body)
  })

/** A job body whose only group has equal rewards: nothing to train, so it ends at once. */
const flatJob = (modelId: string) => ({
  model_id: modelId as ModelId,
  trajectory_groups: [
    {
      trajectories: [
        { messages_and_choices: [{ role: "user" as const, content: "hi" }], reward: 1 },
        { messages_and_choices: [{ role: "user" as const, content: "hi" }], reward: 1 }
      ]
    }
  ]
})

const MISSING = "00000000-0000-4000-8000-000000000000"

describe("jobs endpoints", () => {
  it.layer(Backend)("on the real server", (it) => {
    it.scoped("the same Idempotency-Key twice gives one job; another body is 409", () =>
      Effect.gen(function* () {
        const c = yield* client
        const model = yield* c.createModel({ project: "jobs", name: "idem", base_model: base })
        const body = flatJob(model.id)
        const first = yield* post("/v1/preview/training-jobs", "job-key-1", body)
        const second = yield* post("/v1/preview/training-jobs", "job-key-1", body)
        expect(first.status).toBe(200)
        expect(second.status).toBe(200)
        expect(second.text).toBe(first.text)
        expect(first.json).toMatchObject({ status: "PENDING", model_id: model.id, kind: "rl" })
        const jobs = yield* withStore(Effect.flatMap(Jobs, (j) => j.list(model.id)))
        expect(jobs.map((job) => job.id)).toEqual([(first.json as { id: string }).id])
        const other = yield* post("/v1/preview/training-jobs", "job-key-1", { ...body, trajectory_groups: [] })
        expect(other.status).toBe(409)

        const viaClient = yield* c.createTrainingJob(body, { idempotencyKey: "job-key-2" })
        const again = yield* c.createTrainingJob(body, { idempotencyKey: "job-key-2" })
        expect(again.id).toBe(viaClient.id)
        expect(yield* withStore(Effect.flatMap(Jobs, (j) => j.list(model.id)))).toHaveLength(2)
      })
    )

    it.effect("an unknown model is 404 on both create routes; an unknown job is 404", () =>
      Effect.gen(function* () {
        const rl = yield* send("POST", "/v1/preview/training-jobs", flatJob(MISSING))
        expect(rl.status).toBe(404)
        expect(rl.json).toEqual({ detail: "Model not found" })
        const sft = yield* send("POST", "/v1/preview/sft-training-jobs", {
          model_id: MISSING,
          training_data_url: "file:///nowhere.jsonl"
        })
        expect(sft.status).toBe(404)
        expect(sft.json).toEqual({ detail: "Model not found" })
        const job = yield* send("GET", `/v1/preview/training-jobs/${MISSING}`)
        expect(job.status).toBe(404)
        expect(job.json).toEqual({ detail: "Training job not found" })
        const events = yield* send("GET", `/v1/preview/training-jobs/${MISSING}/events`)
        expect(events.status).toBe(404)
      })
    )

    it.scoped("get a job; its events page with after/limit; an unknown after is 404", () =>
      Effect.gen(function* () {
        const c = yield* client
        const model = yield* c.createModel({ project: "jobs", name: "paging", base_model: base })
        const job = yield* c.createTrainingJob(flatJob(model.id))
        const all = yield* c
          .followTrainingJobEvents(job.id, { wait: "5 seconds" })
          .pipe(Stream.runCollect, Effect.timeout("20 seconds"))
        const events = Array.from(all)
        expect(events.map((e) => e.type)).toEqual(["training_started", "training_ended"])

        const first = yield* c.listTrainingJobEvents(job.id, { limit: 1 })
        expect(first.data.map((e) => e.id)).toEqual([events[0]?.id])
        expect(first.has_more).toBe(true)
        const rest = yield* c.listTrainingJobEvents(job.id, { after: first.last_id, limit: 1 })
        expect(rest.data.map((e) => e.id)).toEqual([events[1]?.id])
        expect(rest.has_more).toBe(false)
        // (No `wait_ms` here: `it.layer` runs the server on the TestClock, so a long poll would never time out.)
        const empty = yield* c.listTrainingJobEvents(job.id, { after: rest.last_id })
        expect(empty.data).toEqual([])

        const stale = yield* send("GET", `/v1/preview/training-jobs/${job.id}/events?after=${MISSING}`)
        expect(stale.status).toBe(404)
        expect(stale.json).toEqual({ detail: "Training job event not found" })

        const got = yield* c.getTrainingJob(job.id as TrainingJobId)
        expect(got).toMatchObject({ id: job.id, status: "COMPLETED", model_id: model.id, kind: "rl", step: 1 })
        expect(typeof got.created_at).toBe("string")
        expect(typeof got.training_end).toBe("string")
      }).pipe(TestServices.provideLive)
    )
  })

  it.live("wait_ms (on a live clock): an empty page after the wait; an event ends the wait at once", () =>
    Effect.gen(function* () {
      const c = yield* client
      const model = yield* c.createModel({ project: "jobs", name: "poll", base_model: base })
      const job = yield* c.createTrainingJob(flatJob(model.id))
      const id = job.id as TrainingJobId
      const asked = Date.now()
      const first = yield* c.listTrainingJobEvents(id, { wait_ms: 10_000 })
      expect(first.data.length).toBeGreaterThan(0)
      expect(Date.now() - asked).toBeLessThan(5_000)
      const all = yield* c.followTrainingJobEvents(id, { wait: "5 seconds" }).pipe(Stream.runCollect)
      const last = Array.from(all).at(-1)
      expect(last?.type).toBe("training_ended")
      const start = Date.now()
      const empty = yield* c.listTrainingJobEvents(id, { after: last?.id, wait_ms: 300 })
      expect(empty.data).toEqual([])
      expect(Date.now() - start).toBeGreaterThanOrEqual(250)
    }).pipe(Effect.scoped, Effect.provide(Backend))
  )
})
