import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { Model } from "../../src/api/Model.js"
import { Checkpoints } from "../../src/local/store/Checkpoints.js"
import { Jobs } from "../../src/local/store/Jobs.js"
import { Logs } from "../../src/local/store/Logs.js"
import { DEFAULT_ENTITY, Models } from "../../src/local/store/Models.js"
import { bytes, modelRequest, tempDir, withStore } from "./support.js"

describe("Models", () => {
  it.scoped("creates a model under the default entity, unique per project, with return_existing", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* withStore(dir)(
        Effect.gen(function* () {
          const models = yield* Models
          const first = yield* models.create(modelRequest("m"))
          expect(first.created).toBe(true)
          expect(first.model.entity).toBe(DEFAULT_ENTITY)
          expect(first.model.run_id).toBeNull()
          // A stored model encodes as the wire `Model` (its creation time left out).
          expect(Schema.encodeSync(Model)(first.model)).toEqual({
            id: first.model.id,
            entity: "local",
            project: "proj",
            name: "m",
            base_model: "tiny",
            run_id: null
          })

          const again = yield* models.create(modelRequest("m", { return_existing: true }))
          expect(again.created).toBe(false)
          expect(again.model).toEqual(first.model)

          const conflict = yield* Effect.flip(models.create(modelRequest("m")))
          expect(conflict.reason).toBe("Conflict")

          // The same name in another project or entity is another model.
          const other = yield* models.create({ ...modelRequest("m"), project: "other" })
          const entity = yield* models.create({ ...modelRequest("m"), entity: "team" })
          expect(new Set([first.model.id, other.model.id, entity.model.id]).size).toBe(3)

          expect(Option.getOrThrow(yield* models.find(null, "proj", "m")).id).toBe(first.model.id)
          expect(Option.getOrThrow(yield* models.find("team", "proj", "m")).id).toBe(entity.model.id)
          expect(yield* models.find(undefined, "proj", "nope")).toEqual(Option.none())
          expect((yield* models.list).length).toBe(3)
          expect((yield* Effect.flip(models.get(crypto.randomUUID()))).reason).toBe("NotFound")
        })
      )
    })
  )

  it.scoped("stores step 0 with a new model, atomically", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* withStore(dir)(
        Effect.gen(function* () {
          const models = yield* Models
          const checkpoints = yield* Checkpoints
          const created = yield* models.create(modelRequest("m"), { initialWeights: Effect.succeed(bytes(1, 2, 3)) })
          expect(Option.getOrThrow(created.initialCheckpoint).step).toBe(0)
          expect(yield* checkpoints.weights(created.model.id, 0)).toEqual(Buffer.from([1, 2, 3]))

          // An existing model does not compute or store initial weights again.
          const again = yield* models.create(modelRequest("m", { return_existing: true }), {
            initialWeights: Effect.die("must not run")
          })
          expect(again.initialCheckpoint).toEqual(Option.none())

          // Weights that fail leave no model behind.
          const failed = yield* Effect.flip(
            models.create(modelRequest("broken"), { initialWeights: Effect.fail("engine down" as const) })
          )
          expect(failed).toBe("engine down")
          expect(yield* models.find(null, "proj", "broken")).toEqual(Option.none())
        })
      )
    })
  )

  it.scoped("deletes a model with its checkpoints, jobs and logs, counting the checkpoints", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* withStore(dir)(
        Effect.gen(function* () {
          const models = yield* Models
          const checkpoints = yield* Checkpoints
          const { model } = yield* models.create(modelRequest("m"), { initialWeights: Effect.succeed(bytes(0)) })
          yield* checkpoints.insert(model.id, { step: 1, weights: bytes(1) })
          yield* checkpoints.insert(model.id, { step: 2, weights: bytes(2) })
          yield* (yield* Jobs).enqueue(model.id, "rl", { model_id: model.id })
          yield* (yield* Logs).record(model.id, { split: "train", trajectory_groups: [] })

          const result = yield* models.remove(model.id)
          expect(result).toMatchObject({ model_id: model.id, deleted_checkpoints: 3, deleted_run: false })
          const sql = yield* SqlClient.SqlClient
          for (const table of ["checkpoints", "training_jobs", "logs"]) {
            expect(yield* sql`SELECT COUNT(*) AS n FROM ${sql(table)}`).toEqual([{ n: 0 }])
          }
          expect((yield* Effect.flip(models.remove(model.id))).reason).toBe("NotFound")
        })
      )
    })
  )
})
