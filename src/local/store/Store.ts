/**
 * The whole store of the local backend in one layer: the database of a data directory (migrated) and every
 * repository over it. Building it fails the jobs a crash left running (see `Jobs`).
 *
 * One store per data directory: {@link layer} takes the directory's lock (see `DataDir`) before it opens,
 * migrates or recovers anything, and fails with a `DataDirError` (`InUse`, naming the running server) when
 * another process or store holds it. The directory is mode 0700 and its files 0600.
 *
 * @since 0.1.0
 */
import { existsSync } from "node:fs"
import type * as SqlClient from "@effect/sql/SqlClient"
import type * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Checkpoints from "./Checkpoints.js"
import * as Database from "./Database.js"
import * as DataDir from "./DataDir.js"
import { DataDirError } from "./DataDirError.js"
import * as IdempotencyKeys from "./IdempotencyKeys.js"
import * as Integrity from "./Integrity.js"
import * as JobEvents from "./JobEvents.js"
import * as Jobs from "./Jobs.js"
import * as Logs from "./Logs.js"
import * as Models from "./Models.js"
import * as TraceCalls from "./TraceCalls.js"
import * as TraceFeedback from "./TraceFeedback.js"
import * as TraceObjects from "./TraceObjects.js"

/** Every service of the store. */
export type Services =
  | Models.Models
  | Checkpoints.Checkpoints
  | Jobs.Jobs
  | JobEvents.JobEvents
  | Logs.Logs
  | IdempotencyKeys.IdempotencyKeys
  | TraceCalls.TraceCalls
  | TraceObjects.TraceObjects
  | TraceFeedback.TraceFeedback

/** Options of {@link layer}. */
export interface Options extends Models.Options, Jobs.Options {
  /** The data directory; the database is `<dataDir>/effect-rl.sqlite`. */
  readonly dataDir: string
}

/**
 * The repositories over a given database layer. The repositories are built with a memo map of their own:
 * they are module-level layers, which a memo map shared with another store would hand over bound to that
 * store's database.
 */
export const layerWith = <A, E, R>(
  database: Layer.Layer<A | SqlClient.SqlClient, E, R>,
  options: Models.Options & Jobs.Options = {}
): Layer.Layer<Services | SqlClient.SqlClient | A, E, R> => {
  const events = JobEvents.layer
  const repositories = Layer.mergeAll(
    Models.layer(options),
    Checkpoints.layer,
    Jobs.layer(options).pipe(Layer.provideMerge(events)),
    Logs.layer,
    IdempotencyKeys.layer,
    TraceCalls.layer,
    TraceObjects.layer,
    TraceFeedback.layer
  )
  return Layer.fresh(repositories).pipe(Layer.provideMerge(database))
}

/** How long the start-up check of an existing database may take before the store opens without its verdict. */
export const START_CHECK_MS = 10_000

/**
 * SQLite's `quick_check` of a data directory's existing database, within {@link START_CHECK_MS}: a damaged one
 * is a `DataDirError` `Damaged` saying what and how to recover; a check past its time is logged (run
 * `effect-rl check`), not waited for.
 */
export const checkAtStart = (dataDir: string): Effect.Effect<void, DataDirError> =>
  Effect.gen(function* () {
    const file = Database.filename(dataDir)
    if (!existsSync(file)) return
    const result = yield* Integrity.check(file, "quick", { timeoutMs: START_CHECK_MS })
    if (result._tag === "Unfinished") {
      return yield* Effect.logWarning(
        `the start-up check of ${file} did not finish within ${START_CHECK_MS / 1000} s; run effect-rl check --data-dir ${dataDir} to check it in full`
      )
    }
    if (result._tag === "Damaged") {
      return yield* new DataDirError({
        reason: "Damaged",
        dataDir,
        message: `the database ${file} is damaged (SQLite's quick_check: ${result.problems.slice(0, 3).join("; ")}); ${Integrity.recoveryAdvice(file)}`
      })
    }
  }).pipe(Effect.withSpan("Store.checkAtStart"))

/**
 * The store of a data directory: its lock (held while the layer lives), SQLite's check of an existing
 * database ({@link checkAtStart}), the database and every repository. Fails with `DataDirError` `InUse` when
 * another process or store holds the directory, `Damaged` when its database fails the check.
 */
export const layer = (
  options: Options
): Layer.Layer<Services | SqlClient.SqlClient | SqliteClient.SqliteClient, DataDirError> =>
  Layer.unwrapScoped(
    DataDir.lock(options.dataDir).pipe(
      Effect.zipRight(checkAtStart(options.dataDir)),
      Effect.as(layerWith(Database.layer(options), options))
    )
  )
