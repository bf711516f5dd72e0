import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as LocalBackend from "../../src/LocalBackend.js"
import { Logs } from "../../src/local/store/Logs.js"
import { Models } from "../../src/local/store/Models.js"
import { training } from "../support/clients.js"
import { withStore } from "./store.js"
import { auth, Backend, call } from "./support.js"

const base = "effect-rl/tiny"
const client = Effect.flatMap(LocalBackend.LocalBackend, ({ url }) => training(url))

const post = (path: string, key: string, body: unknown) =>
  call(path, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json", "idempotency-key": key },
    body: JSON.stringify(body)
  })

const group = {
  trajectories: [
    { messages_and_choices: [{ role: "user", content: "hi" }], reward: 1 },
    { messages_and_choices: [{ role: "user", content: "hi" }], reward: 0 }
  ]
}

describe("idempotency", () => {
  it.layer(Backend)("on the real server", (it) => {
    it.effect("model create: the same key twice gives the first response and one model; another body is 409", () =>
      Effect.gen(function* () {
        const body = { project: "idem", name: "m1", base_model: base }
        const first = yield* post("/v1/preview/models", "key-model-1", body)
        const second = yield* post("/v1/preview/models", "key-model-1", body)
        expect(first.status).toBe(200)
        expect(second.status).toBe(200)
        expect(second.text).toBe(first.text)
        const models = yield* withStore(Effect.flatMap(Models, (m) => m.list))
        expect(models.filter((m) => m.project === "idem" && m.name === "m1")).toHaveLength(1)
        const other = yield* post("/v1/preview/models", "key-model-1", { ...body, name: "m2" })
        expect(other.status).toBe(409)
        expect(other.json).toEqual({ detail: expect.stringContaining("different request body") })
        expect((yield* withStore(Effect.flatMap(Models, (m) => m.list))).some((m) => m.name === "m2")).toBe(false)
      })
    )

    it.scoped("log: the same key twice stores one row; the repo's client sends the key unchanged", () =>
      Effect.gen(function* () {
        const c = yield* client
        const model = yield* c.createModel({ project: "idem", name: "log", base_model: base })
        const request = { split: "train", trajectory_groups: [group] }
        const a = yield* c.log(model.id, request, { idempotencyKey: "key-log-1" })
        const b = yield* c.log(model.id, request, { idempotencyKey: "key-log-1" })
        expect(b).toEqual(a)
        const rows = yield* withStore(Effect.flatMap(Logs, (logs) => logs.list(model.id)))
        expect(rows).toHaveLength(1)
        const other = yield* post(`/v1/preview/models/${model.id}/log`, "key-log-1", { ...request, split: "val" })
        expect(other.status).toBe(409)
        yield* c.log(model.id, request)
        expect(yield* withStore(Effect.flatMap(Logs, (logs) => logs.list(model.id)))).toHaveLength(2)
      })
    )

    it.effect("a refusal is not remembered: a corrected retry with the same key succeeds", () =>
      Effect.gen(function* () {
        const bad = yield* post("/v1/preview/models", "key-refused", { project: "idem", name: "r", base_model: "x" })
        expect(bad.status).toBe(404)
        const good = yield* post("/v1/preview/models", "key-refused", { project: "idem", name: "r", base_model: base })
        expect(good.status).toBe(200)
      })
    )
  })
})
