import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { Checkpoints } from "../../src/local/store/Checkpoints.js"
import { Logs } from "../../src/local/store/Logs.js"
import { Models } from "../../src/local/store/Models.js"
import { bytes, modelRequest, tempDir, withStore } from "./support.js"

describe("Logs", () => {
  it.scoped("stores groups under the split and the model's current step, with their metrics", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const groups = [
        {
          trajectories: [
            { messages_and_choices: [], reward: 1 },
            { messages_and_choices: [], reward: 0 }
          ]
        }
      ]
      const modelId = yield* withStore(dir)(
        Effect.gen(function* () {
          const logs = yield* Logs
          const { model } = yield* (yield* Models).create(modelRequest("m"), {
            initialWeights: Effect.succeed(bytes(0))
          })
          const atZero = yield* logs.record(model.id, { split: "train", trajectory_groups: groups })
          expect(atZero).toMatchObject({ split: "train", step: 0, metrics: { reward: 0.5, num_groups_trainable: 1 } })
          yield* (yield* Checkpoints).insert(model.id, { step: 1, weights: bytes(1) })
          yield* logs.record(model.id, { split: "val", trajectory_groups: groups })
          expect(Option.getOrThrow(yield* logs.groups(atZero.id))).toEqual(groups)
          expect(
            (yield* Effect.flip(logs.record(crypto.randomUUID(), { split: "x", trajectory_groups: [] }))).reason
          ).toBe("NotFound")
          return model.id
        })
      )
      const entries = yield* withStore(dir)(Effect.flatMap(Logs, (logs) => logs.list(modelId)))
      expect(entries.map((e) => [e.split, e.step])).toEqual([
        ["train", 0],
        ["val", 1]
      ])
      expect(entries[1]!.metrics.reward_std_dev).toBe(0.5)
      const val = yield* withStore(dir)(Effect.flatMap(Logs, (logs) => logs.list(modelId, "val")))
      expect(val.length).toBe(1)
    })
  )
})
