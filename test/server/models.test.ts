import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as HttpClient from "@effect/platform/HttpClient"
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import type { ModelId } from "../../src/api/Model.js"
import * as LocalBackend from "../../src/LocalBackend.js"
import { API_KEY, training } from "../support/clients.js"
import { Backend, send } from "./support.js"

const base = "effect-rl/tiny"
/** Every base model the backend serves, in order. */
const bases = [base, "effect-rl/tiny-2k", "effect-rl/base-2k", "effect-rl/base-wide-2k"]
const UNKNOWN = "00000000-0000-4000-8000-000000000000"

const client = Effect.flatMap(LocalBackend.LocalBackend, ({ url }) => training(url))

describe("models", () => {
  it.layer(Backend)("on the real server", (it) => {
    it.scoped("create with return_existing gives the same model; without it a taken name is 409", () =>
      Effect.gen(function* () {
        const c = yield* client
        const first = yield* c.createModel({ project: "p", name: "a", base_model: base, entity: null })
        expect(first).toMatchObject({ entity: "local", project: "p", name: "a", base_model: base })
        const again = yield* c.createModel({ project: "p", name: "a", base_model: base, return_existing: true })
        expect(again.id).toBe(first.id)
        const conflict = yield* Effect.flip(c.createModel({ project: "p", name: "a", base_model: base }))
        expect(conflict.status).toBe(409)
        expect(conflict.reason).toBe("Conflict")
        // Final, so not retried even when a key makes the create retryable: one attempt, at once.
        let attempts = 0
        const counted = yield* Effect.flatMap(LocalBackend.LocalBackend, ({ url }) =>
          training(url, {
            transformClient: (http) =>
              http.pipe(
                HttpClient.tapRequest(() =>
                  Effect.sync(() => {
                    attempts++
                  })
                )
              )
          })
        )
        const keyed = yield* Effect.flip(
          counted.createModel({ project: "p", name: "a", base_model: base }, { idempotencyKey: "taken-name" })
        )
        expect([keyed.reason, keyed.retryable, attempts]).toEqual(["Conflict", false, 1])
        const raw = yield* send("POST", "/v1/preview/models", { project: "p", name: "a", base_model: base })
        expect(raw.status).toBe(409)
        expect(raw.json).toEqual({ detail: expect.stringContaining("already exists") })
      })
    )

    it.effect("an unknown base model is 404 with a clear detail; base-models lists the served ones", () =>
      Effect.gen(function* () {
        const reply = yield* send("POST", "/v1/preview/models", { project: "p", name: "b", base_model: "gpt-99" })
        expect(reply.status).toBe(404)
        expect(reply.json).toEqual({
          detail: "Base model `gpt-99` not found; see GET /v1/preview/base-models"
        })
        const list = yield* send("GET", "/v1/preview/base-models")
        expect(list.status).toBe(200)
        expect(list.json).toEqual(bases)
      })
    )

    it.scoped("checkpoints: step 0 is listed; pages with after/limit/order; delete counts", () =>
      Effect.gen(function* () {
        const c = yield* client
        expect(yield* c.listBaseModels).toEqual(bases)
        const model = yield* c.createModel({ project: "p", name: "ckpt", base_model: base })
        const page = yield* c.listCheckpoints(model.id)
        expect(page.data.map((x) => x.step)).toEqual([0])
        expect(page).toMatchObject({ object: "list", has_more: false, first_id: page.data[0]?.id })
        expect(page.data[0]?.metrics).toEqual({})
        expect(Option.map(yield* c.latestCheckpoint(model.id), (x) => x.step)).toEqual(Option.some(0))
        const all = yield* Stream.runCollect(c.checkpoints(model.id, { limit: 1, order: "desc" }))
        expect(Chunk.toReadonlyArray(all).map((x) => x.step)).toEqual([0])
        const after = yield* c.listCheckpoints(model.id, { after: page.last_id, limit: 1 })
        expect(after).toMatchObject({ data: [], has_more: false })
        const unknownCursor = yield* send("GET", `/v1/preview/models/${model.id}/checkpoints?after=nope`)
        expect(unknownCursor.status).toBe(404)
        const deleted = yield* c.deleteCheckpoints(model.id, [0, 5])
        expect(deleted).toMatchObject({ deleted_count: 1, not_found_steps: [5] })
        expect((yield* c.listCheckpoints(model.id)).data).toEqual([])
      })
    )

    it.scoped("a model's name stops answering completions once its checkpoint or the model is deleted", () =>
      Effect.gen(function* () {
        // The server keeps what a name resolved to between completions: a deletion must end that at once.
        const c = yield* client
        const complete = (model: string) =>
          Effect.map(
            send("POST", "/v1/chat/completions", {
              model,
              messages: [{ role: "user", content: "hi" }],
              max_completion_tokens: 1
            }),
            (response) => response.status
          )
        const model = yield* c.createModel({ project: "p", name: "served", base_model: base })
        const step0 = "wandb-artifact:///local/p/served:step0"
        const latest = "wandb-artifact:///local/p/served"
        expect([yield* complete(step0), yield* complete(step0), yield* complete(latest)]).toEqual([200, 200, 200])
        yield* c.deleteCheckpoints(model.id, [0])
        expect([yield* complete(step0), yield* complete(latest)]).toEqual([404, 404])
        const again = yield* c.createModel({ project: "p", name: "served2", base_model: base })
        const name2 = "wandb-artifact:///local/p/served2:step0"
        expect(yield* complete(name2)).toBe(200)
        yield* c.deleteModel(again.id)
        expect(yield* complete(name2)).toBe(404)
        yield* c.createModel({ project: "p", name: "served2", base_model: base })
        expect(yield* complete(name2)).toBe(200)
      })
    )

    it.scoped("delete a model: counts its checkpoints, then 404 everywhere", () =>
      Effect.gen(function* () {
        const c = yield* client
        const model = yield* c.createModel({ project: "p", name: "gone", base_model: base })
        const result = yield* c.deleteModel(model.id)
        expect(result).toMatchObject({ model_id: model.id, deleted_checkpoints: 1, deleted_run: false })
        const again = yield* send("DELETE", `/v1/preview/models/${model.id}`)
        expect(again.status).toBe(404)
        expect(again.json).toEqual({ detail: "Model not found" })
        const error = yield* Effect.flip(c.listCheckpoints(model.id))
        expect(error.status).toBe(404)
        const del = yield* send("DELETE", `/v1/preview/models/${UNKNOWN}/checkpoints`, { steps: [0] })
        expect(del.status).toBe(404)
        expect(del.json).toEqual({ detail: "Model not found" })
        const name = yield* c.createModel({ project: "p", name: "gone", base_model: base })
        expect(name.id).not.toBe(model.id)
      })
    )
  })

  it.live("data persists across a restart on the same data dir", () =>
    Effect.gen(function* () {
      const dataDir = mkdtempSync(join(tmpdir(), "effect-rl-models-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dataDir, { recursive: true, force: true })))
      const backend = LocalBackend.layer({ dataDir, apiKey: Redacted.make(API_KEY) })
      const run = <A, E>(body: (c: Effect.Effect.Success<typeof client>) => Effect.Effect<A, E>) =>
        Effect.scoped(Effect.flatMap(client, body)).pipe(Effect.provide(Layer.fresh(backend)))
      const created = yield* run((c) => c.createModel({ project: "p", name: "kept", base_model: base }))
      const id: ModelId = created.id
      const after = yield* run((c) =>
        Effect.zip(
          c.createModel({ project: "p", name: "kept", base_model: base, return_existing: true }),
          c.listCheckpoints(id)
        )
      )
      expect(after[0].id).toBe(id)
      expect(after[1].data.map((x) => x.step)).toEqual([0])
    }).pipe(Effect.scoped)
  )
})
