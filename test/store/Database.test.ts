import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Database from "../../src/local/store/Database.js"
import { Models } from "../../src/local/store/Models.js"
import { modelRequest, tempDir, withStore } from "./support.js"

describe("Database", () => {
  it.scoped("migrates once, and reopening runs nothing", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const run = Effect.provide(Database.migrate, Database.layer({ dataDir: dir }))
      // The layer has already migrated, so a second run inside it finds nothing to do.
      expect(yield* run).toEqual([])
      const applied = yield* Effect.provide(
        Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT migration_id, name FROM effect_sql_migrations`),
        Database.layer({ dataDir: dir })
      )
      expect(applied).toEqual([
        { migration_id: 1, name: "initial" },
        { migration_id: 2, name: "files" },
        { migration_id: 3, name: "trace_calls" },
        { migration_id: 4, name: "trace_objects" },
        { migration_id: 5, name: "trace_feedback" },
        { migration_id: 6, name: "responses" },
        { migration_id: 7, name: "checkpoint_digests" },
        { migration_id: 8, name: "job_records" }
      ])
    })
  )

  it.scoped("runs with WAL, synchronous FULL and foreign keys", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const pragmas = yield* Effect.provide(
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          return {
            journal: yield* sql.unsafe("PRAGMA journal_mode"),
            synchronous: yield* sql.unsafe("PRAGMA synchronous"),
            foreignKeys: yield* sql.unsafe("PRAGMA foreign_keys")
          }
        }),
        Database.layer({ dataDir: dir })
      )
      expect(pragmas.journal).toEqual([{ journal_mode: "wal" }])
      expect(pragmas.synchronous).toEqual([{ synchronous: 2 }])
      expect(pragmas.foreignKeys).toEqual([{ foreign_keys: 1 }])
      expect(yield* Effect.provide(Database.ping, Database.layer({ dataDir: dir }))).toBe(true)
    })
  )

  it.scoped("keeps data across closing and reopening", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const created = yield* withStore(dir)(Effect.flatMap(Models, (m) => m.create(modelRequest("a"))))
      const found = yield* withStore(dir)(Effect.flatMap(Models, (m) => m.get(created.model.id)))
      expect(found).toEqual(created.model)
    })
  )

  it.effect("has an in-memory variant", () =>
    Effect.provide(
      Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT COUNT(*) AS n FROM models`),
      Database.layerMemory
    ).pipe(Effect.map((rows) => expect(rows).toEqual([{ n: 0 }])))
  )
})
