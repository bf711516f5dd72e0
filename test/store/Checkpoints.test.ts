import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { Checkpoints } from "../../src/local/store/Checkpoints.js"
import { Models } from "../../src/local/store/Models.js"
import { bytes, modelRequest, tempDir, withStore } from "./support.js"

/** A model with checkpoints at steps 0..n-1 (metrics `{loss: step}`). */
const modelWithSteps = (n: number) =>
  Effect.gen(function* () {
    const { model } = yield* (yield* Models).create(modelRequest("m"))
    const checkpoints = yield* Checkpoints
    for (let step = 0; step < n; step++) {
      yield* checkpoints.insert(model.id, { step, weights: bytes(step), metrics: { loss: step, nope: null } })
    }
    return model.id
  })

describe("Checkpoints", () => {
  it.scoped("pages ascending and descending with after, limit and has_more", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* withStore(dir)(
        Effect.gen(function* () {
          const id = yield* modelWithSteps(5)
          const checkpoints = yield* Checkpoints

          const first = yield* checkpoints.list(id, { limit: 2 })
          expect(first.object).toBe("list")
          expect(first.data.map((c) => c.step)).toEqual([0, 1])
          expect(first.data[0]).toMatchObject({ step: 0, metrics: { loss: 0 } })
          expect(first.has_more).toBe(true)
          expect(first.first_id).toBe(first.data[0]!.id)
          expect(first.last_id).toBe(first.data[1]!.id)

          const second = yield* checkpoints.list(id, { limit: 2, after: first.last_id })
          expect(second.data.map((c) => c.step)).toEqual([2, 3])
          const third = yield* checkpoints.list(id, { limit: 2, after: second.last_id })
          expect(third.data.map((c) => c.step)).toEqual([4])
          expect(third.has_more).toBe(false)

          const latest = yield* checkpoints.list(id, { limit: 1, order: "desc" })
          expect(latest.data.map((c) => c.step)).toEqual([4])
          expect(latest.has_more).toBe(true)
          const rest = yield* checkpoints.list(id, { order: "desc", after: latest.last_id })
          expect(rest.data.map((c) => c.step)).toEqual([3, 2, 1, 0])
          expect(rest.has_more).toBe(false)

          const empty = yield* checkpoints.list(id, { after: third.last_id })
          expect(empty).toEqual({ object: "list", data: [], first_id: "", last_id: "", has_more: false })

          expect((yield* Effect.flip(checkpoints.list(id, { after: crypto.randomUUID() }))).reason).toBe("NotFound")
          expect((yield* Effect.flip(checkpoints.list(crypto.randomUUID()))).reason).toBe("NotFound")
          expect(Option.getOrThrow(yield* checkpoints.latest(id)).step).toBe(4)
          expect((yield* checkpoints.get(id, 3)).metrics).toEqual({ loss: 3 })
          expect(yield* checkpoints.weights(id, 3)).toEqual(Buffer.from([3]))
          expect((yield* checkpoints.all).length).toBe(5)
        })
      )
    })
  )

  it.scoped("refuses a step twice and leaves nothing of a failed transaction", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* withStore(dir)(
        Effect.gen(function* () {
          const id = yield* modelWithSteps(1)
          const checkpoints = yield* Checkpoints
          expect((yield* Effect.flip(checkpoints.insert(id, { step: 0, weights: bytes(9) }))).reason).toBe("Conflict")
          expect(yield* checkpoints.weights(id, 0)).toEqual(Buffer.from([0]))

          const sql = yield* SqlClient.SqlClient
          const failed = yield* checkpoints
            .insert(id, { step: 1, weights: new Uint8Array(1024) })
            .pipe(Effect.zipRight(Effect.fail("crash after the insert" as const)), sql.withTransaction, Effect.flip)
          expect(failed).toBe("crash after the insert")
          expect((yield* Effect.flip(checkpoints.get(id, 1))).reason).toBe("NotFound")
          expect(Option.getOrThrow(yield* checkpoints.latest(id)).step).toBe(0)
        })
      )
    })
  )

  it.scoped("deletes by steps, reporting the steps not found", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* withStore(dir)(
        Effect.gen(function* () {
          const id = yield* modelWithSteps(4)
          const checkpoints = yield* Checkpoints
          const result = yield* checkpoints.remove(id, [1, 3, 7, 3])
          expect(result).toMatchObject({ deleted_count: 2, not_found_steps: [7] })
          expect((yield* checkpoints.list(id)).data.map((c) => c.step)).toEqual([0, 2])
          expect(yield* checkpoints.remove(id, [])).toMatchObject({ deleted_count: 0, not_found_steps: [] })
        })
      )
      // Still so after reopening.
      const steps = yield* withStore(dir)(
        Effect.gen(function* () {
          const models = yield* Models
          const model = Option.getOrThrow(yield* models.find(null, "proj", "m"))
          return (yield* (yield* Checkpoints).list(model.id)).data.map((c) => c.step)
        })
      )
      expect(steps).toEqual([0, 2])
    })
  )
})

describe("Checkpoints, damaged rows", () => {
  it.scoped("reports a row that does not decode as Corrupt", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* withStore(dir)(
        Effect.gen(function* () {
          const id = yield* modelWithSteps(1)
          const sql = yield* SqlClient.SqlClient
          yield* sql`UPDATE checkpoints SET metrics = 'not json' WHERE model_id = ${id}`
          const error = yield* Effect.flip((yield* Checkpoints).list(id))
          expect(error.reason).toBe("Corrupt")
        })
      )
    })
  )
})
