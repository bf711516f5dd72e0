/**
 * Checking a data directory's database for damage, off the event loop: SQLite's own `PRAGMA quick_check`
 * (every page and record readable, in O(size)) or `PRAGMA integrity_check` (also every index against its
 * table), and, in the full check, every checkpoint's weights against the digest written with them.
 *
 * The check runs in a worker thread on a read-only connection of its own, so a server may keep serving while
 * it runs (WAL readers do not block writers), and a time limit ends it cleanly: a start-up check on a large
 * file that runs past its limit is reported as unfinished, not as damage. What it reports, when damaged, is
 * what SQLite says (its first lines) and how to recover.
 *
 * @since 0.1.0
 */
import { createRequire } from "node:module"
import { Worker } from "node:worker_threads"
import * as Effect from "effect/Effect"

/** How thorough a check is: `quick` (`quick_check`), or `full` (`integrity_check` and every checkpoint's digest). */
export type Mode = "quick" | "full"

/** What a check found. */
export type Result =
  /** Nothing damaged. */
  | { readonly _tag: "Ok"; readonly seconds: number; readonly checkpoints: number }
  /** Damage: SQLite's first findings, or the checkpoints whose weights do not match their digest. */
  | { readonly _tag: "Damaged"; readonly seconds: number; readonly problems: ReadonlyArray<string> }
  /** The check ran past its time limit (no verdict). */
  | { readonly _tag: "Unfinished"; readonly seconds: number }

/** The most findings of SQLite's checks reported. */
const MAX_PROBLEMS = 10

/** The worker: opens the file read-only, runs the check, posts what it found. CommonJS (an `eval` worker). */
const WORKER = `
const { parentPort, workerData } = require("node:worker_threads")
const { createHash } = require("node:crypto")
const Database = require(workerData.driver)
let db
try {
  db = new Database(workerData.file, { readonly: true, fileMustExist: true })
  const pragma = workerData.mode === "full" ? "integrity_check" : "quick_check"
  const rows = db.pragma(pragma + "(" + workerData.max + ")", { simple: false }).map((row) => String(Object.values(row)[0]))
  const problems = rows.length === 1 && rows[0] === "ok" ? [] : rows
  let checkpoints = 0
  if (workerData.mode === "full" && problems.length === 0) {
    const statement = db.prepare(
      "SELECT c.step AS step, c.weights AS weights, c.digest AS digest, m.entity || '/' || m.project || '/' || m.name AS name " +
        "FROM checkpoints c JOIN models m ON m.id = c.model_id ORDER BY m.entity, m.project, m.name, c.step"
    )
    for (const row of statement.iterate()) {
      checkpoints++
      const digest = createHash("sha256").update(row.weights).digest("hex")
      if (digest !== row.digest) problems.push("checkpoint step " + row.step + " of model " + row.name + ": its weights do not match their digest")
    }
  }
  parentPort.postMessage({ problems, checkpoints })
} catch (error) {
  parentPort.postMessage({ problems: [String(error && error.message ? error.message : error)], checkpoints: 0 })
} finally {
  if (db) db.close()
}
`

const driver = createRequire(import.meta.url).resolve("better-sqlite3")

const run = (file: string, mode: Mode): Effect.Effect<Result> =>
  Effect.async<Result>((resume) => {
    const started = performance.now()
    const seconds = () => (performance.now() - started) / 1000
    const worker = new Worker(WORKER, { eval: true, workerData: { file, mode, driver, max: MAX_PROBLEMS } })
    worker.once("message", (message: { readonly problems: ReadonlyArray<string>; readonly checkpoints: number }) => {
      void worker.terminate()
      resume(
        Effect.succeed(
          message.problems.length === 0
            ? { _tag: "Ok", seconds: seconds(), checkpoints: message.checkpoints }
            : { _tag: "Damaged", seconds: seconds(), problems: message.problems }
        )
      )
    })
    worker.once("error", (error) =>
      resume(Effect.succeed({ _tag: "Damaged", seconds: seconds(), problems: [error.message] }))
    )
    // Interrupted (the time limit): the worker, and its read of the file, end here.
    return Effect.sync(() => void worker.terminate())
  })

/**
 * Checks a database file (see the module) within `timeoutMs` (default: no limit). Never fails: a file that
 * cannot be opened or read is `Damaged`, with why.
 */
export const check = (
  file: string,
  mode: Mode,
  options: { readonly timeoutMs?: number | undefined } = {}
): Effect.Effect<Result> =>
  options.timeoutMs === undefined
    ? run(file, mode)
    : Effect.timeoutTo(run(file, mode), {
        duration: options.timeoutMs,
        onSuccess: (result): Result => result,
        onTimeout: (): Result => ({ _tag: "Unfinished", seconds: options.timeoutMs! / 1000 })
      })

/** How to recover a damaged database: restore a backup, or let SQLite recover what it can. */
export const recoveryAdvice = (file: string): string =>
  `restore a backup of the data directory (effect-rl backup writes one), or recover what SQLite can read: sqlite3 ${file} .recover | sqlite3 recovered.sqlite, then move recovered.sqlite in its place`
