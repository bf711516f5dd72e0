/**
 * The local backend's SQLite database: one file, `<dataDir>/effect-rl.sqlite`, through `@effect/sql-sqlite-node`
 * (better-sqlite3, one connection shared by the process).
 *
 * ## Durability
 * The journal is in WAL mode with `synchronous = FULL`: a transaction is on disk when its `COMMIT` returns, so
 * a response the server sends after a store write survives `kill -9` and power loss. Every multi-row write of
 * the store runs in one transaction, so nothing is ever visible half-written.
 *
 * ## A transaction SQLite cancelled
 * On some errors (`SQLITE_FULL` among them) SQLite may roll the whole transaction back itself; the `ROLLBACK`
 * that `@effect/sql` then runs fails ("no transaction is active"), and that failure replaced the statement's, so a
 * full disk was answered 500 instead of 507. The client's `withTransaction` keeps the statement's failure there.
 *
 * ## Migrations
 * Run by `@effect/sql`'s `Migrator` from an in-code list when the layer is built, recorded in the
 * `effect_sql_migrations` table; reopening a migrated database runs nothing.
 *
 * @since 0.1.0
 */
import { join } from "node:path"
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as DataDir from "./DataDir.js"
import type { DataDirError } from "./DataDirError.js"
import { migrations } from "./internal/migrations.js"

/** The database file's name inside the data directory. */
export const FILE_NAME = "effect-rl.sqlite"

/** The table `Migrator` records applied migrations in. */
export const MIGRATIONS_TABLE = "effect_sql_migrations"

/** The database file of a data directory. */
export const filename = (dataDir: string): string => join(dataDir, FILE_NAME)

/**
 * Sets the connection's pragmas (`synchronous = FULL`, foreign keys, a busy timeout) and runs the pending
 * migrations, returning the ones it ran as `[id, name]`.
 */
export const migrate: Effect.Effect<
  ReadonlyArray<readonly [id: number, name: string]>,
  never,
  SqlClient.SqlClient
> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe("PRAGMA synchronous = FULL")
  yield* sql.unsafe("PRAGMA foreign_keys = ON")
  yield* sql.unsafe("PRAGMA busy_timeout = 5000")
  return yield* Migrator.make({})({ loader: Migrator.fromRecord(migrations), table: MIGRATIONS_TABLE })
}).pipe(Effect.orDie, Effect.withSpan("Database.migrate"))

/** A real query for health checks: succeeds with true when the database answers. */
export const ping: Effect.Effect<boolean, never, SqlClient.SqlClient> = Effect.flatMap(
  SqlClient.SqlClient,
  (sql) => sql`SELECT 1 AS ok`
).pipe(
  Effect.as(true),
  Effect.catchAllCause(() => Effect.succeed(false))
)

/** Whether a cause is a `ROLLBACK` refused for want of a transaction (SQLite rolled it back itself). */
const isRollbackRefused = (cause: Cause.Cause<unknown>): boolean =>
  /cannot rollback - no transaction is active|no such savepoint/.test(
    String((Option.getOrUndefined(Cause.dieOption(cause)) as { readonly cause?: unknown } | undefined)?.cause)
  )

/**
 * Makes the client's `withTransaction` fail with the body's failure where SQLite cancelled the transaction itself
 * (see the module: "A transaction SQLite cancelled"), rather than with the refused `ROLLBACK`.
 */
const keepFailureOnCancelledTransaction = (sql: SqlClient.SqlClient): void => {
  const withTransaction = sql.withTransaction
  const keeping = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
    Effect.suspend(() => {
      let failed: Cause.Cause<E> | undefined
      return withTransaction(
        Effect.tapErrorCause(effect, (cause) =>
          Effect.sync(() => {
            failed = cause
          })
        )
      ).pipe(
        Effect.catchAllCause((cause) =>
          Effect.failCause(failed !== undefined && isRollbackRefused(cause) ? failed : cause)
        )
      )
    })
  ;(sql as { withTransaction: typeof keeping }).withTransaction = keeping
}

/** Options of {@link layerFile}. */
export interface FileOptions {
  /** The database file; created, with its migrations, when missing. */
  readonly filename: string
}

/** The database in a given file (WAL, `synchronous = FULL`, foreign keys on), migrated. */
export const layerFile = (options: FileOptions): Layer.Layer<SqlClient.SqlClient | SqliteClient.SqliteClient> =>
  Layer.effectDiscard(migrate).pipe(
    Layer.provideMerge(
      SqliteClient.layer({ filename: options.filename }).pipe(
        Layer.tap((context) =>
          Effect.sync(() => keepFailureOnCancelledTransaction(Context.get(context, SqlClient.SqlClient)))
        )
      )
    ),
    Layer.orDie
  )

/** Options of {@link layer}. */
export interface Options {
  /**
   * The data directory; created (mode 0700) when missing, else made private (see `DataDir`). The database is
   * `<dataDir>/effect-rl.sqlite`, mode 0600.
   */
  readonly dataDir: string
}

/**
 * The database of a data directory, migrated. It takes no lock: what the server runs on is `Store.layer`,
 * which holds the directory's lock first; this alone is a second connection (e.g. a test reading what a
 * running server stored).
 */
export const layer = (options: Options): Layer.Layer<SqlClient.SqlClient | SqliteClient.SqliteClient, DataDirError> =>
  Layer.unwrapEffect(
    Effect.gen(function* () {
      yield* DataDir.prepare(options.dataDir)
      // SQLite gives the -wal and -shm files the database file's mode: create it 0600 before SQLite opens it.
      yield* DataDir.privateFile(filename(options.dataDir), options.dataDir)
      return layerFile({ filename: filename(options.dataDir) })
    })
  )

/** An in-memory database, migrated (no durability; for tests that need no file). */
export const layerMemory: Layer.Layer<SqlClient.SqlClient | SqliteClient.SqliteClient> = layerFile({
  filename: ":memory:"
})
