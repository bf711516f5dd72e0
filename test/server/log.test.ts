import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as LocalBackend from "../../src/LocalBackend.js"
import { Logs } from "../../src/local/store/Logs.js"
import { training } from "../support/clients.js"
import { withStore } from "./store.js"
import { Backend, send } from "./support.js"

const base = "effect-rl/tiny"
const client = Effect.flatMap(LocalBackend.LocalBackend, ({ url }) => training(url))

const turn = (reward: number, metrics: Record<string, number | boolean> = {}) => ({
  messages_and_choices: [{ role: "user" as const, content: "2+2?" }],
  reward,
  metrics
})

/** Two groups: rewards [1, 0] (std 0.5, trainable) and [1, 1, 1] (std 0); one exception. */
const groups = [
  { trajectories: [turn(1, { correct: true }), turn(0, { correct: false })], metrics: { difficulty: 2 } },
  {
    trajectories: [turn(1, { correct: true, len: 3 }), turn(1, { len: 5 }), turn(1)],
    exceptions: [{ type: "ValueError", message: "boom", traceback: "" }]
  }
]

describe("log", () => {
  it.layer(Backend)("on the real server", (it) => {
    it.scoped("stores the groups and returns the metrics, computed as by hand", () =>
      Effect.gen(function* () {
        const c = yield* client
        const model = yield* c.createModel({ project: "p", name: "log", base_model: base })
        const result = yield* c.log(model.id, { split: "train", trajectory_groups: groups })
        expect(result?.metrics).toEqual({
          reward: 4 / 5,
          reward_std_dev: (0.5 + 0) / 2,
          exception_rate: 1 / 6,
          correct: 2 / 3,
          len: 4,
          group_difficulty: 2,
          num_scenarios: 2,
          num_trajectories: 5,
          num_groups_submitted: 2,
          num_groups_trainable: 1
        })
        yield* c.log(model.id, { split: "val", trajectory_groups: [groups[0]!] })
        const rows = yield* withStore(Effect.flatMap(Logs, (logs) => logs.list(model.id)))
        expect(rows.map((r) => [r.split, r.step])).toEqual([
          ["train", 0],
          ["val", 0]
        ])
        expect(rows[0]?.metrics).toEqual(result?.metrics)
      })
    )

    it.effect("an unknown model is 404 Model not found", () =>
      Effect.gen(function* () {
        const reply = yield* send("POST", "/v1/preview/models/00000000-0000-4000-8000-000000000000/log", {
          split: "train",
          trajectory_groups: groups
        })
        expect(reply.status).toBe(404)
        expect(reply.json).toEqual({ detail: "Model not found" })
      })
    )
  })
})
