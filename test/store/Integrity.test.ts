/**
 * The integrity check's verdicts on a sound database (what the full check compared, how long it took), a file it
 * cannot open, a database with several findings, and a check past its time limit; and the store's check at start,
 * which refuses a damaged directory naming SQLite's first three findings, and opens one whose check runs past its
 * limit (saying how to check it in full) rather than wait. Damage found in a server's files: `Damage.test.ts`.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as TestClock from "effect/TestClock"
import * as Tracer from "effect/Tracer"
import { Checkpoints } from "../../src/local/store/Checkpoints.js"
import * as Database from "../../src/local/store/Database.js"
import * as Integrity from "../../src/local/store/Integrity.js"
import { Models } from "../../src/local/store/Models.js"
import * as Store from "../../src/local/store/Store.js"

/** A data directory whose database holds `steps` checkpoints of one model: the directory, removed by the caller. */
const withCheckpoints = (steps: number) =>
  Effect.gen(function* () {
    const dataDir = mkdtempSync(join(tmpdir(), "effect-rl-integrity-"))
    yield* Effect.gen(function* () {
      const { model } = yield* Effect.flatMap(Models, (models) =>
        models.create({ entity: "e", project: "p", name: "m", base_model: "effect-rl/tiny" })
      )
      for (let step = 1; step <= steps; step++) {
        yield* Effect.flatMap(Checkpoints, (checkpoints) =>
          checkpoints.insert(model.id, { step, weights: new Uint8Array(8192).fill(step), metrics: {} })
        )
      }
    }).pipe(Effect.provide(Layer.fresh(Store.layer({ dataDir }))), Effect.scoped, Effect.orDie)
    return dataDir
  })

type Connection = {
  readonly exec: (sql: string) => void
  readonly unsafeMode: (on: boolean) => void
  readonly pragma: (pragma: string) => unknown
  readonly close: () => void
}
const Sqlite = createRequire(import.meta.url)("better-sqlite3") as new (file: string) => Connection

/**
 * A database with damage the store's own writes cannot make, one finding of SQLite's per row: a NULL in each of
 * four columns, then declared NOT NULL by editing the schema in place.
 */
const withNullsInNotNullColumns = (file: string) => {
  const db = new Sqlite(file)
  db.exec("CREATE TABLE u (a TEXT, b TEXT, c TEXT, d TEXT)")
  db.exec("INSERT INTO u VALUES (NULL, 1, 1, 1), (1, NULL, 1, 1), (1, 1, NULL, 1), (1, 1, 1, NULL)")
  db.unsafeMode(true)
  db.pragma("writable_schema = ON")
  db.exec(
    "UPDATE sqlite_schema SET sql = 'CREATE TABLE u (a TEXT NOT NULL, b TEXT NOT NULL, c TEXT NOT NULL, d TEXT NOT NULL)' WHERE name = 'u'"
  )
  db.close()
}

/** Waits until a forked fiber has started its timer (so that moving the test clock fires it). */
const timerStarted = Effect.gen(function* () {
  while (Chunk.isEmpty(yield* TestClock.sleeps())) yield* Effect.sleep(0)
})

describe("the integrity check", () => {
  it.live("a sound database: ok, the checkpoints compared (full check only), and the time it took", () =>
    Effect.gen(function* () {
      const dataDir = yield* withCheckpoints(2)
      const file = Database.filename(dataDir)
      for (const [mode, checkpoints] of [
        ["quick", 0],
        ["full", 2]
      ] as const) {
        const started = performance.now()
        const result = yield* Integrity.check(file, mode)
        const wall = (performance.now() - started) / 1000
        expect(result).toStrictEqual({ _tag: "Ok", seconds: expect.any(Number), checkpoints })
        expect(result.seconds).toBeGreaterThan(0)
        expect(result.seconds).toBeLessThanOrEqual(wall)
      }
      rmSync(dataDir, { recursive: true, force: true })
    })
  )

  it.live("a file it cannot open is damaged, saying why, within the time it took", () =>
    Effect.gen(function* () {
      const started = performance.now()
      const result = yield* Integrity.check(join(tmpdir(), "effect-rl-no-such-dir", "effect-rl.sqlite"), "quick")
      const wall = (performance.now() - started) / 1000
      expect(result).toStrictEqual({
        _tag: "Damaged",
        seconds: expect.any(Number),
        // The driver says why (here: "Cannot open database because the directory does not exist").
        problems: [expect.stringMatching(/open database/i)]
      })
      expect(result.seconds).toBeLessThanOrEqual(wall)
    })
  )

  it.live("several findings: the check lists them; the store refuses the directory naming the first three", () =>
    Effect.gen(function* () {
      const dataDir = mkdtempSync(join(tmpdir(), "effect-rl-integrity-"))
      const file = Database.filename(dataDir)
      withNullsInNotNullColumns(file)
      const findings = ["NULL value in u.a", "NULL value in u.b", "NULL value in u.c", "NULL value in u.d"]
      expect(yield* Integrity.check(file, "quick")).toMatchObject({ _tag: "Damaged", problems: findings })
      const refused = yield* Effect.flip(Store.checkAtStart(dataDir))
      expect(refused).toMatchObject({
        _tag: "DataDirError",
        reason: "Damaged",
        message: `the database ${file} is damaged (SQLite's quick_check: NULL value in u.a; NULL value in u.b; NULL value in u.c); ${Integrity.recoveryAdvice(file)}`
      })
      rmSync(dataDir, { recursive: true, force: true })
    })
  )

  it.effect("a check past its time limit is unfinished, with no verdict", () =>
    Effect.gen(function* () {
      const dataDir = yield* withCheckpoints(1)
      const fiber = yield* Effect.fork(Integrity.check(Database.filename(dataDir), "full", { timeoutMs: 250 }))
      yield* timerStarted
      yield* TestClock.adjust("250 millis")
      expect(yield* Fiber.join(fiber)).toStrictEqual({ _tag: "Unfinished", seconds: 0.25 })
      rmSync(dataDir, { recursive: true, force: true })
    })
  )

  it.effect("the store's check at start, past its limit, lets the directory open and says how to check it", () =>
    Effect.gen(function* () {
      const dataDir = yield* withCheckpoints(1)
      const warnings: Array<string> = []
      const spans: Array<string> = []
      const logger = Logger.make(({ logLevel, message }) => {
        if (logLevel._tag === "Warning") warnings.push(Array.isArray(message) ? message.join(" ") : String(message))
      })
      const base = yield* Effect.tracer
      const tracer = Tracer.make({
        span: (name, ...rest) => {
          spans.push(name)
          return base.span(name, ...rest)
        },
        context: (f, fiber) => base.context(f, fiber)
      })
      const fiber = yield* Effect.fork(
        Store.checkAtStart(dataDir).pipe(
          Effect.withTracer(tracer),
          Effect.provide(Logger.replace(Logger.defaultLogger, logger))
        )
      )
      yield* timerStarted
      yield* TestClock.adjust(Store.START_CHECK_MS)
      yield* Fiber.join(fiber)
      expect(warnings).toStrictEqual([
        `the start-up check of ${Database.filename(dataDir)} did not finish within 10 s; run effect-rl check --data-dir ${dataDir} to check it in full`
      ])
      // Traced as the store's step it is.
      expect(spans).toContain("Store.checkAtStart")
      rmSync(dataDir, { recursive: true, force: true })
    })
  )
})
