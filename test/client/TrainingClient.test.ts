import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { ModelId } from "../../src/api/Model.js"
import { createChatCompletionSlash } from "../../src/api/TrainingApi.js"
import { TrainingJobId } from "../../src/api/TrainingJob.js"
import { endpointCall } from "../../src/client/internal/endpoint.js"
import { version } from "../../src/internal/version.js"
import { API_KEY, training, transport } from "../support/clients.js"
import * as FakeService from "../support/FakeService.js"

const modelId = ModelId.make(FakeService.ids.model)
const jobId = TrainingJobId.make(FakeService.ids.job)

const trajectoryGroups = [
  {
    trajectories: [
      {
        messages_and_choices: [
          { role: "user" as const, content: "2+2?" },
          {
            index: 0,
            message: { role: "assistant", content: "4" },
            finish_reason: "stop",
            logprobs: { content: [{ token: "4", logprob: -0.1, bytes: [52], top_logprobs: [] }] }
          }
        ],
        reward: 1
      },
      { messages_and_choices: [{ role: "user" as const, content: "2+2?" }], reward: 0 }
    ]
  }
]

describe("TrainingClient against a server that behaves as the OpenAPI document says", () => {
  it.scoped("creates a model: POST /v1/preview/models with bearer, user agent and body", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      const model = yield* client.createModel({ project: "p", name: "m", base_model: "base", return_existing: true })
      expect(model.id).toBe(FakeService.ids.model)
      expect(model.entity).toBe("me")
      const [request] = server.received
      expect(request?.method).toBe("POST")
      expect(request?.path).toBe("/v1/preview/models")
      expect(request?.headers.authorization).toBe(`Bearer ${API_KEY}`)
      expect(request?.headers["user-agent"]).toBe(`effect-rl/${version}`)
      expect(request?.headers["content-type"]).toBe("application/json")
      expect(request?.headers["idempotency-key"]).toBeUndefined()
      expect(request?.json).toEqual({ project: "p", name: "m", base_model: "base", return_existing: true })
    })
  )

  it.scoped("pages checkpoints with after, limit and order, and streams all pages", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      const page = yield* client.listCheckpoints(modelId, { limit: 2, order: "desc" })
      expect(page.data.map((c) => c.step)).toEqual([2, 1])
      expect(page.has_more).toBe(true)
      const query = server.received[0]?.query
      expect(query?.get("limit")).toBe("2")
      expect(query?.get("order")).toBe("desc")
      expect(query?.has("after")).toBe(false)

      const all = yield* Stream.runCollect(client.checkpoints(modelId, { limit: 1 }))
      expect(Chunk.toReadonlyArray(all).map((c) => c.step)).toEqual([0, 1, 2])
      const afters = server.received.slice(1).map((r) => r.query.get("after"))
      expect(afters).toEqual([null, FakeService.ids.checkpoint(0), FakeService.ids.checkpoint(1)])

      const latest = yield* client.latestCheckpoint(modelId)
      expect(Option.map(latest, (c) => c.step)).toEqual(Option.some(2))
    })
  )

  it.scoped("submits an RL job and streams its events over pages", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      const job = yield* client.createTrainingJob(
        {
          model_id: modelId,
          trajectory_groups: trajectoryGroups,
          experimental_config: { learning_rate: 1e-5, extra: 1 }
        },
        { idempotencyKey: "step-7" }
      )
      expect(job.id).toBe(FakeService.ids.job)
      const request = server.received[0]
      expect(request?.headers["idempotency-key"]).toBe("step-7")
      expect(request?.json).toEqual({
        model_id: FakeService.ids.model,
        trajectory_groups: trajectoryGroups,
        experimental_config: { learning_rate: 1e-5, extra: 1 }
      })
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(client.trainingJobEvents(jobId, { limit: 3 })))
      expect(events.map((e) => e.type)).toEqual([
        "training_started",
        "gradient_step",
        "gradient_step",
        "training_ended"
      ])
      const started = events[0]
      expect(started?.type === "training_started" && started.data.num_sequences).toBe(2)
      const step = events[1]
      expect(step?.type === "gradient_step" && step.data.group_metric_x).toBe(1)
    })
  )
})

describe("TrainingClient: every other endpoint of seed 4.2", () => {
  it.scoped("deletes a model and checkpoints (DELETE with a JSON body)", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      const deleted = yield* client.deleteModel(modelId)
      expect(deleted).toMatchObject({ model_id: FakeService.ids.model, deleted_checkpoints: 2, deleted_run: true })
      expect(server.received[0]).toMatchObject({
        method: "DELETE",
        path: `/v1/preview/models/${FakeService.ids.model}`
      })

      const result = yield* client.deleteCheckpoints(modelId, [1, 2, 7])
      expect(result.deleted_count).toBe(2)
      expect(result.not_found_steps).toEqual([7])
      const request = server.received[1]
      expect(request).toMatchObject({
        method: "DELETE",
        path: `/v1/preview/models/${FakeService.ids.model}/checkpoints`
      })
      expect(request?.json).toEqual({ steps: [1, 2, 7] })
      expect(request?.headers["content-type"]).toBe("application/json")
    })
  )

  it.scoped("logs groups under a split; an empty success body reads as null", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      const result = yield* client.log(modelId, { split: "val", trajectory_groups: trajectoryGroups })
      expect(result).toBeNull()
      const request = server.received[0]
      expect(request?.path).toBe(`/v1/preview/models/${FakeService.ids.model}/log`)
      expect(request?.json).toEqual({ split: "val", trajectory_groups: trajectoryGroups })

      server.route("POST", "/v1/preview/models/:id/log", () => ({ json: { metrics: { reward: 0.5 }, groups: 1 } }))
      const withMetrics = yield* client.log(modelId, { split: "train", trajectory_groups: [] }, { idempotencyKey: "k" })
      expect(withMetrics).toEqual({ metrics: { reward: 0.5 }, groups: 1 })
      expect(server.received[1]?.headers["idempotency-key"]).toBe("k")
    })
  )

  it.scoped("submits an SFT job, reads a job and one page of its events", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      const body = {
        model_id: modelId,
        training_data_url: "file:///tmp/data.jsonl",
        config: { batch_size: "auto" as const, learning_rate: [1e-4, 1e-5], assistant_turns: "last" as const }
      }
      const job = yield* client.createSftTrainingJob(body)
      expect(job.id).toBe(FakeService.ids.job)
      expect(server.received[0]).toMatchObject({ method: "POST", path: "/v1/preview/sft-training-jobs", json: body })

      server.route("GET", "/v1/preview/training-jobs/:id", (r) => ({
        json: {
          ...FakeService.jobRecord(r.path.split("/")[4]!),
          status: "RUNNING",
          kind: "rl",
          step: null,
          queue_position: 3
        }
      }))
      const read = yield* client.getTrainingJob(jobId)
      expect(read).toEqual({
        ...FakeService.jobRecord(FakeService.ids.job),
        status: "RUNNING",
        kind: "rl",
        step: null,
        queue_position: 3
      })
      expect(server.received[1]?.path).toBe(`/v1/preview/training-jobs/${FakeService.ids.job}`)

      const page = yield* client.listTrainingJobEvents(jobId, { after: FakeService.ids.event(1), limit: 1 })
      expect(page.data.map((e) => e.id)).toEqual([FakeService.ids.event(2)])
      expect(page.has_more).toBe(true)
      const query = server.received[2]?.query
      expect(query?.get("after")).toBe(FakeService.ids.event(1))
      expect(query?.get("limit")).toBe("1")
    })
  )

  it.scoped("health, system check and base models", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      expect(yield* client.health).toEqual({ status: "ok" })
      const check = yield* client.systemCheck
      expect(check.api).toBe(true)
      expect(check.gpu_queue?.duration).toBe(0.02)
      expect(yield* client.listBaseModels).toEqual(["Qwen/Qwen3-0.6B", "OpenPipe/Qwen3-14B-Instruct"])
      expect(server.received.map((r) => `${r.method} ${r.path}`)).toEqual([
        "GET /v1/health",
        "GET /v1/system-check",
        "GET /v1/preview/base-models"
      ])
    })
  )

  it.scoped("creates a chat completion with logprobs; the trailing-slash path is the same operation", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      const request = {
        model: "base",
        messages: [{ role: "user" as const, content: "hi" }],
        logprobs: true,
        top_logprobs: 2,
        seed: 7,
        vllm_xargs: { a: 1, b: ["x", 2] }
      }
      const completion = yield* client.createChatCompletion(request)
      expect(completion.choices[0]?.logprobs?.content?.[0]?.token).toBe("hello")
      expect(completion.usage.total_tokens).toBe(4)
      expect(server.received[0]).toMatchObject({ method: "POST", path: "/v1/chat/completions" })
      expect(server.received[0]?.json).toEqual({ ...request, stream: false })

      // The trailing-slash endpoint, called through the same derivation the client uses.
      const raw = yield* transport(server.url)
      const slash = yield* endpointCall(createChatCompletionSlash).run(raw, { payload: request, retry: true })
      expect(slash.choices[0]?.message.content).toBe("hello")
      expect(server.received[1]?.path).toBe("/v1/chat/completions/")
    })
  )
})

describe("TrainingClient.followTrainingJobEvents", () => {
  const started = { id: FakeService.ids.event(0), type: "training_started", data: { num_sequences: 1 } }
  const step = { id: FakeService.ids.event(1), type: "gradient_step", data: { loss: 1 } }
  const ended = { id: FakeService.ids.event(2), type: "training_ended", data: {} }
  const page = (data: ReadonlyArray<{ readonly id: string }>, has_more = false) => ({
    json: { object: "list", data, first_id: data[0]?.id ?? "", last_id: data.at(-1)?.id ?? "", has_more }
  })

  it.scopedLive("follows a job until it ends, each event once, asking for the long poll on every request", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      // The job's history as successive polls see it: a repeated page (a backend ignoring `after`) included.
      const replies = [page([started]), page([]), page([started, step]), page([ended])]
      server.route("GET", "/v1/preview/training-jobs/:id/events", (_, n) => replies[Math.min(n, replies.length - 1)]!)
      const events = yield* Stream.runCollect(
        client.followTrainingJobEvents(jobId, { pollInterval: "10 millis", wait: "2 seconds" })
      )
      expect(Chunk.toReadonlyArray(events).map((e) => e.id)).toEqual([started.id, step.id, ended.id])
      const queries = server.received.map((r) => [r.query.get("after"), r.query.get("wait_ms")])
      // Even the first request asks for the long poll: a backend holds it only when nothing is new yet.
      expect(queries).toEqual([
        [null, "2000"],
        [started.id, "2000"],
        [started.id, "2000"],
        [step.id, "2000"]
      ])
    })
  )

  it.scopedLive("stops at training_failed and reads pages back to back while has_more", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      const failed = { id: FakeService.ids.event(3), type: "training_failed", data: { error_message: "OOM" } }
      const replies = [page([started], true), page([failed]), page([ended])]
      server.route("GET", "/v1/preview/training-jobs/:id/events", (_, n) => replies[n]!)
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(client.followTrainingJobEvents(jobId)))
      expect(events.map((e) => e.type)).toEqual(["training_started", "training_failed"])
      const last = events[1]
      expect(last?.type === "training_failed" && last.data.error_message).toBe("OOM")
      expect(server.received.length).toBe(2)
    })
  )

  it.scopedLive("a page that says has_more but brings nothing new is asked again only after a pause", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      // A service that ignores `after` and always says there is more, until the job ends.
      const replies = [page([started], true), page([started], true), page([], true), page([started, ended], true)]
      server.route("GET", "/v1/preview/training-jobs/:id/events", (_, n) => replies[Math.min(n, 3)]!)
      const times: Array<number> = []
      const startedAt = Date.now()
      const events = yield* Stream.runCollect(
        client
          .followTrainingJobEvents(jobId, { pollInterval: "150 millis" })
          .pipe(Stream.tap(() => Effect.sync(() => times.push(Date.now() - startedAt))))
      )
      expect(Chunk.toReadonlyArray(events).map((e) => e.type)).toEqual(["training_started", "training_ended"])
      expect(server.received).toHaveLength(4)
      // Two pages with nothing new, each followed by a pause: the end comes no sooner than two intervals.
      expect(times[1]).toBeGreaterThanOrEqual(300)
    })
  )

  it.scopedLive("an event of an unknown type is passed on and does not end the follow", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      const other = { id: FakeService.ids.event(5), type: "training_paused", data: { reason: "preempted" } }
      server.route("GET", "/v1/preview/training-jobs/:id/events", () => page([started, other, ended]))
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(client.followTrainingJobEvents(jobId)))
      expect(events.map((e) => e.type)).toEqual(["training_started", "unknown", "training_ended"])
      const passed = events[1]
      expect(passed?.type === "unknown" && passed.event_type).toBe("training_paused")
      expect(passed?.data).toEqual({ reason: "preempted" })
    })
  )

  it.scopedLive("follows a job whose event ids are not UUIDs (the reference client types them as strings)", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      // A service whose event ids are its own cursors, answering `after` as a cursor, the job still running.
      const history = [
        { id: "evt_0001", type: "training_started", data: { num_sequences: 2 } },
        { id: "evt_0002", type: "gradient_step", data: { loss: 0.5 } },
        { id: "1718031234567-0", type: "gradient_step", data: { loss: 0.25 } },
        { id: "done", type: "training_ended", data: {} }
      ]
      server.route("GET", "/v1/preview/training-jobs/:id/events", (request, n) => {
        const known = history.slice(0, Math.min(history.length, 1 + n))
        const after = request.query.get("after")
        const start = after === null ? 0 : known.findIndex((e) => e.id === after) + 1
        const data = known.slice(start, start + 2)
        return page(data, start + 2 < known.length)
      })
      const events = Chunk.toReadonlyArray(
        yield* Stream.runCollect(client.followTrainingJobEvents(jobId, { pollInterval: "10 millis" }))
      )
      expect(events.map((e) => [e.id, e.type])).toEqual(history.map((e) => [e.id, e.type]))
      // Each request went on from the last id seen.
      const afters = server.received.map((r) => r.query.get("after"))
      expect(afters[0]).toBeNull()
      expect(new Set(afters.slice(1))).toEqual(new Set(["evt_0001", "evt_0002", "1718031234567-0"]))
    })
  )

  it.scoped("a known event whose data breaks its schema still fails, naming the field", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      const bad = { id: FakeService.ids.event(1), type: "gradient_step", data: { loss: "high" } }
      server.route("GET", "/v1/preview/training-jobs/:id/events", () => page([bad]))
      const error = yield* Effect.flip(client.listTrainingJobEvents(jobId))
      expect(error.reason).toBe("Decode")
      expect(error.message).toContain("loss")
    })
  )
})

describe("TrainingClient.checkpoints against a service that leaves last_id empty", () => {
  it.scoped("pages on from the last item's id", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      const all = [0, 1, 2, 3, 4].map((step) => ({
        id: FakeService.ids.checkpoint(step),
        step,
        metrics: step === 2 ? { reward: null, loss: "Infinity" } : { reward: step }
      }))
      server.route("GET", "/v1/preview/models/:id/checkpoints", (r) => {
        const after = r.query.get("after")
        const start = after === null ? 0 : all.findIndex((c) => c.id === after) + 1
        const data = all.slice(start, start + 2)
        return { json: { object: "list", data, has_more: start + 2 < all.length } }
      })
      const steps = Chunk.toReadonlyArray(yield* Stream.runCollect(client.checkpoints(modelId, { limit: 2 })))
      expect(steps.map((c) => c.step)).toEqual([0, 1, 2, 3, 4])
      // Metrics the service could not compute are left out.
      expect(steps[2]?.metrics).toEqual({})
      expect(steps[4]?.metrics).toEqual({ reward: 4 })
      expect(server.received.map((r) => r.query.get("after"))).toEqual([
        null,
        FakeService.ids.checkpoint(1),
        FakeService.ids.checkpoint(3)
      ])
    })
  )
})
