/**
 * Why a data directory cannot be used by this process, told apart by `reason`.
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"

/** The server that holds a data directory, as it announced itself in the directory's `server.json`. */
export interface Owner {
  /** Its process id. */
  readonly pid: number
  /** Its base URL, once it listens. */
  readonly url?: string | undefined
}

/**
 * Why a data directory cannot be used:
 * - `InUse`: another process (another `effect-rl serve`, or a `LocalBackend` in another program) holds it;
 * - `Inaccessible`: it cannot be created, locked or made private (permissions, a file where a directory
 *   should be);
 * - `Damaged`: its database failed SQLite's check at start (the message says what is damaged and how to
 *   recover).
 */
export type DataDirErrorReason = "InUse" | "Inaccessible" | "Damaged"

/** A data directory that this process cannot use. */
export class DataDirError extends Data.TaggedError("DataDirError")<{
  /** Why. */
  readonly reason: DataDirErrorReason
  /** The data directory. */
  readonly dataDir: string
  /** A sentence for the user: what holds the directory or what failed, and what to do. */
  readonly message: string
  /** The server that holds the directory, when `InUse` and it announced itself. */
  readonly owner?: Owner | undefined
  /** The underlying failure, if any. */
  readonly cause?: unknown
}> {}
