/**
 * A data directory of the local backend: owned by one process at a time, and private to its user.
 *
 * ## One server per data directory
 * {@link lock} takes an exclusive lock on `<dataDir>/effect-rl.lock`, a small SQLite database opened with
 * `locking_mode = EXCLUSIVE`, a busy timeout of 0 and an `EXCLUSIVE` transaction left open for as long as
 * the lock's scope lives. SQLite's locks are the operating system's advisory file locks (`fcntl` on Unix),
 * which the system drops when the process ends, however it ends (`kill -9` included), so a crash never leaves
 * a stale lock. A second process (or a second store in the same process) asking for the lock is refused at
 * once with a {@link DataDirError} `InUse` naming the holder, read from `<dataDir>/server.json` (its pid,
 * and its URL once {@link announce}d). The lock is taken before the database is opened, so a refused
 * server never migrates, recovers or touches anything of the running one.
 *
 * ## Private files
 * The directory is made mode 0700 and the backend's files in it 0600 (the database and its `-wal`, `-shm`
 * and `-journal` files, the lock, `server.json`, the API key; uploaded files live inside the database). An
 * existing directory or file that is open to other users is tightened (its group and other bits cleared);
 * other files a user keeps in the directory are left alone (the directory's own mode already closes them
 * to other users). SQLite creates `-wal` and `-shm` with the database file's mode, so {@link privateFile}
 * creates the database file before SQLite opens it.
 *
 * @since 0.1.0
 */
import {
  chmodSync,
  closeSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync
} from "node:fs"
import { join } from "node:path"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { DataDirError, type Owner } from "./DataDirError.js"

/** The lock file's name inside the data directory. */
export const LOCK_FILE = "effect-rl.lock"

/** The name of the file in which the holder of the lock names itself (pid and URL), as JSON. */
export const OWNER_FILE = "server.json"

/** The mode of the data directory. */
export const DIR_MODE = 0o700

/** The mode of every file the backend writes into the data directory. */
export const FILE_MODE = 0o600

/** The files of the backend made private when a data directory is prepared (see the module). */
export const PRIVATE_FILES: ReadonlyArray<string> = [
  "effect-rl.sqlite",
  "effect-rl.sqlite-wal",
  "effect-rl.sqlite-shm",
  "effect-rl.sqlite-journal",
  LOCK_FILE,
  `${LOCK_FILE}-journal`,
  OWNER_FILE,
  "api-key"
]

const messageOf = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

const inaccessible = (dataDir: string, cause: unknown) =>
  new DataDirError({
    reason: "Inaccessible",
    dataDir,
    message: `cannot use the data directory ${dataDir}: ${messageOf(cause)}`,
    cause
  })

/** Clears the group and other bits of a path's mode, when it exists and has any. */
const tighten = (path: string): void => {
  let mode: number
  try {
    mode = statSync(path).mode & 0o777
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return
    throw error
  }
  if ((mode & 0o077) !== 0) chmodSync(path, mode & 0o700)
}

/**
 * Creates the data directory (mode 0700) when missing, else clears an existing one's group and other bits,
 * and does the same for the backend's files already in it ({@link PRIVATE_FILES}).
 */
export const prepare = (dataDir: string): Effect.Effect<void, DataDirError> =>
  Effect.try({
    try: () => {
      mkdirSync(dataDir, { recursive: true, mode: DIR_MODE })
      if (!statSync(dataDir).isDirectory()) throw new Error("it is not a directory")
      tighten(dataDir)
      for (const name of PRIVATE_FILES) tighten(join(dataDir, name))
    },
    catch: (cause) => inaccessible(dataDir, cause)
  })

/** Creates a file of the data directory with mode 0600 when missing (empty), else clears its group and other bits. */
export const privateFile = (file: string, dataDir: string): Effect.Effect<void, DataDirError> =>
  Effect.try({
    try: () => {
      closeSync(openSync(file, "a", FILE_MODE))
      tighten(file)
    },
    catch: (cause) => inaccessible(dataDir, cause)
  })

/** Writes a file of the data directory whole (a temporary file renamed into place), mode 0600. */
const writePrivate = (file: string, text: string): void => {
  const temp = `${file}.${process.pid}.tmp`
  try {
    writeFileSync(temp, text, { mode: FILE_MODE })
    chmodSync(temp, FILE_MODE)
    renameSync(temp, file)
  } finally {
    rmSync(temp, { force: true })
  }
}

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    // EPERM: it exists, under another user.
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** The live process named in `<dataDir>/server.json`, if the file is there, well-formed and its pid alive. */
export const readOwner = (dataDir: string): Owner | undefined => {
  try {
    const json: unknown = JSON.parse(readFileSync(join(dataDir, OWNER_FILE), "utf8"))
    if (typeof json !== "object" || json === null) return undefined
    const { pid, url } = json as { readonly pid?: unknown; readonly url?: unknown }
    if (typeof pid !== "number" || !Number.isInteger(pid) || pid <= 0 || !isAlive(pid)) return undefined
    return typeof url === "string" ? { pid, url } : { pid }
  } catch {
    return undefined
  }
}

/** The sentence of a data directory held by another process. */
export const inUseMessage = (dataDir: string, owner: Owner | undefined): string => {
  const holder =
    owner === undefined
      ? "another process"
      : `another effect-rl server (pid ${owner.pid}, ${owner.url === undefined ? "starting" : `serving on ${owner.url}`})`
  return `the data directory ${dataDir} is in use by ${holder}: stop it first, or use another data directory`
}

const isBusy = (error: unknown): boolean => {
  for (let cause = error; typeof cause === "object" && cause !== null; cause = (cause as { cause?: unknown }).cause) {
    const code = (cause as { code?: unknown }).code
    if (code === "SQLITE_BUSY" || code === "SQLITE_LOCKED") return true
  }
  return false
}

/**
 * Takes the data directory for the current scope: prepares it (see {@link prepare}), takes the exclusive lock
 * on its lock file and writes `server.json` with this process's pid. Fails with `InUse`, at once, when another
 * process or store holds it. The lock and `server.json` are released when the scope closes, and the lock by
 * the operating system if the process dies first.
 */
export const lock = (dataDir: string): Effect.Effect<void, DataDirError, Scope.Scope> =>
  Effect.gen(function* () {
    yield* prepare(dataDir)
    const file = join(dataDir, LOCK_FILE)
    yield* privateFile(file, dataDir)
    // Rollback journal (no WAL): an EXCLUSIVE transaction then excludes every other connection, readers too.
    const context = yield* Layer.build(Layer.orDie(SqliteClient.layer({ filename: file, disableWAL: true })))
    const sql = Context.get(context, SqliteClient.SqliteClient)
    yield* Effect.gen(function* () {
      yield* sql.unsafe("PRAGMA busy_timeout = 0")
      yield* sql.unsafe("PRAGMA locking_mode = EXCLUSIVE")
      // No journal file: the lock database is never written.
      yield* sql.unsafe("PRAGMA journal_mode = MEMORY")
      yield* sql.unsafe("BEGIN EXCLUSIVE")
    }).pipe(
      Effect.mapError((error) => {
        if (!isBusy(error)) return inaccessible(dataDir, error)
        const owner = readOwner(dataDir)
        return new DataDirError({ reason: "InUse", dataDir, message: inUseMessage(dataDir, owner), owner })
      })
    )
    const owner = join(dataDir, OWNER_FILE)
    yield* Effect.try({
      try: () => writePrivate(owner, `${JSON.stringify({ pid: process.pid })}\n`),
      catch: (cause) => inaccessible(dataDir, cause)
    })
    // Runs before the lock's connection closes (finalizers run in reverse): the file never outlives the lock.
    yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(owner, { force: true })))
  }).pipe(Effect.withSpan("DataDir.lock", { attributes: { dataDir } }))

/**
 * Records the URL of the server holding the data directory in `server.json` (for the message a second server
 * gets); call it once listening, while holding the lock.
 */
export const announce = (dataDir: string, url: string): Effect.Effect<void, DataDirError> =>
  Effect.try({
    try: () => writePrivate(join(dataDir, OWNER_FILE), `${JSON.stringify({ pid: process.pid, url })}\n`),
    catch: (cause) => inaccessible(dataDir, cause)
  })
