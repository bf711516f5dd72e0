/**
 * A consistent copy of a data directory's database, taken while a server may be using it: SQLite's
 * `VACUUM INTO` on a read-only connection of its own reads one snapshot (a WAL read transaction), so the copy
 * holds every transaction committed before it began and nothing of one after, never a torn state (which
 * copying the files of a live WAL database can give). The copy is compact (a vacuumed database, no WAL) and
 * mode 0600; it is written to a temporary file beside the target and renamed into place, so a failed backup
 * leaves no partial file. A data directory whose `effect-rl.sqlite` is such a copy serves as the original did
 * (a job that was running when the copy was taken is failed at start, as after a crash).
 *
 * @since 0.1.0
 */
import { chmodSync, existsSync, renameSync, rmSync, statSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, resolve } from "node:path"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import { filename } from "./Database.js"
import { fullMessage, isDiskFull } from "./DiskSpace.js"

/** A backup that could not be written: the data directory has no database, or the copy failed (why). */
export class BackupError extends Data.TaggedError("BackupError")<{
  /** `NoDatabase`: nothing to back up; `Exists`: the target is there already; `Failed`: the copy failed. */
  readonly reason: "NoDatabase" | "Exists" | "Failed"
  /** A sentence for the user. */
  readonly message: string
}> {}

/** What a backup wrote. */
export interface Written {
  /** The backup file (absolute). */
  readonly file: string
  /** Its size in bytes. */
  readonly bytes: number
  /** How long it took, in seconds. */
  readonly seconds: number
}

type Statement = { run: (...params: ReadonlyArray<unknown>) => unknown }
type Connection = { prepare: (sql: string) => Statement; close: () => void }
type Driver = new (file: string, options: { readonly readonly: boolean; readonly fileMustExist: boolean }) => Connection

const Sqlite = createRequire(import.meta.url)("better-sqlite3") as Driver

/**
 * Writes a consistent copy of `dataDir`'s database to `file` (see the module). Fails with `Exists` rather than
 * overwrite a file.
 */
export const write = (dataDir: string, file: string): Effect.Effect<Written, BackupError> =>
  Effect.try({
    try: () => {
      const started = performance.now()
      const source = filename(dataDir)
      const target = resolve(file)
      if (!existsSync(source)) {
        throw new BackupError({ reason: "NoDatabase", message: `${dataDir} holds no database (${source}) to back up` })
      }
      if (existsSync(target)) {
        throw new BackupError({ reason: "Exists", message: `${target} exists: back up to a new file` })
      }
      const partial = `${target}.partial-${process.pid}`
      const db = new Sqlite(source, { readonly: true, fileMustExist: true })
      try {
        db.prepare("VACUUM INTO ?").run(partial)
      } catch (error) {
        rmSync(partial, { force: true })
        const why = isDiskFull(error)
          ? fullMessage(dirname(target))
          : error instanceof Error
            ? error.message
            : String(error)
        throw new BackupError({ reason: "Failed", message: `the backup of ${source} to ${target} failed: ${why}` })
      } finally {
        db.close()
      }
      chmodSync(partial, 0o600)
      renameSync(partial, target)
      return { file: target, bytes: statSync(target).size, seconds: (performance.now() - started) / 1000 }
    },
    catch: (error) =>
      error instanceof BackupError
        ? error
        : new BackupError({
            reason: "Failed",
            message: `the backup failed: ${error instanceof Error ? error.message : String(error)}`
          })
  }).pipe(Effect.withSpan("Backup.write"))
