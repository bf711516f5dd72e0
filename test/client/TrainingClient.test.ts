import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { ModelId } from "../../src/api/Model.js"
import { TrainingJobId } from "../../src/api/TrainingJob.js"
import { version } from "../../src/internal/version.js"
import { API_KEY, training } from "../support/clients.js"
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
