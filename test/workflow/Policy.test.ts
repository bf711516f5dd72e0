/**
 * Where a trainable policy's completions go: the training host by default (where the reference client and the
 * vendor's documentation sample trained checkpoints), the inference host when asked, with its project header.
 * Two scripted services stand in for the two hosted hosts, which cannot be reached from here.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { InferenceClient } from "../../src/client/InferenceClient.js"
import { TrainingClient } from "../../src/client/TrainingClient.js"
import * as Policy from "../../src/workflow/Policy.js"
import { inference, training } from "../support/clients.js"
import * as FakeService from "../support/FakeService.js"

const hosts = Effect.gen(function* () {
  const trainingHost = yield* FakeService.make
  const inferenceHost = yield* FakeService.make
  const context = yield* Layer.build(
    Layer.mergeAll(
      Layer.effect(TrainingClient, training(trainingHost.url)),
      Layer.effect(InferenceClient, inference(inferenceHost.url, { project: "team/default" }))
    )
  )
  return { trainingHost, inferenceHost, context }
})

const chats = (host: FakeService.FakeService) => host.received.filter((r) => r.path === "/v1/chat/completions")

describe("Policy.trainable", () => {
  it.scoped("samples the latest checkpoint on the training host by default", () =>
    Effect.gen(function* () {
      const { context, inferenceHost, trainingHost } = yield* hosts
      const policy = yield* Policy.trainable({ project: "p", name: "m", base_model: "base" }).pipe(
        Effect.provide(context)
      )
      yield* policy.complete({ messages: [{ role: "user", content: "hi" }] })
      const [sent] = chats(trainingHost)
      // The fake's latest checkpoint is step 2.
      expect(sent?.json).toMatchObject({ model: "wandb-artifact:///me/p/m:step2" })
      expect(sent?.headers["openai-project"]).toBeUndefined()
      expect(chats(inferenceHost)).toHaveLength(0)
    })
  )

  it.scoped("samples on the inference host when asked, with its project header", () =>
    Effect.gen(function* () {
      const { context, inferenceHost, trainingHost } = yield* hosts
      const policy = yield* Policy.trainable(
        { project: "p", name: "m", base_model: "base" },
        { sampleOn: "inference", project: "team/rl" }
      ).pipe(Effect.provide(context))
      yield* policy.setStep(5)
      yield* policy.complete({ messages: [{ role: "user", content: "hi" }] })
      const [sent] = chats(inferenceHost)
      expect(sent?.json).toMatchObject({ model: "wandb-artifact:///me/p/m:step5" })
      expect(sent?.headers["openai-project"]).toBe("team/rl")
      expect(chats(trainingHost)).toHaveLength(0)

      // Without a project of its own, the inference client's default goes.
      const plain = yield* Policy.trainable(
        { project: "p", name: "m", base_model: "base" },
        { sampleOn: "inference" }
      ).pipe(Effect.provide(context))
      yield* plain.complete({ messages: [{ role: "user", content: "hi" }] })
      expect(chats(inferenceHost)[1]?.headers["openai-project"]).toBe("team/default")
    })
  )
})
