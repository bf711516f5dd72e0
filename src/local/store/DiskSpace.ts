/**
 * A full disk, told apart from other failures: SQLite's `SQLITE_FULL` ("database or disk is full") from any
 * statement, and `ENOSPC` from any file write, wherever they sit in a failure's chain of causes. The server
 * answers a write refused for want of space with 507 (see the middleware), a job fails with
 * {@link fullMessage}, and nothing already written is lost: SQLite rolls the statement back, and writes
 * succeed again once space is freed.
 *
 * @since 0.1.0
 */
import { statfsSync } from "node:fs"

const causeOf = (error: unknown): unknown =>
  typeof error === "object" && error !== null && "cause" in error
    ? (error as { readonly cause: unknown }).cause
    : undefined

const isFull = (error: unknown): boolean => {
  if (typeof error !== "object" || error === null) return false
  const code = (error as { readonly code?: unknown }).code
  if (code === "SQLITE_FULL" || code === "ENOSPC") return true
  const message = (error as { readonly message?: unknown }).message
  return typeof message === "string" && /database or disk is full|ENOSPC|no space left on device/i.test(message)
}

/** Whether a failure (or any failure in its chain of causes) is a write refused for want of space. */
export const isDiskFull = (error: unknown): boolean => {
  let current: unknown = error
  for (let depth = 0; depth < 8 && current !== undefined; depth++) {
    if (isFull(current)) return true
    current = causeOf(current)
  }
  return false
}

/** The bytes free for this process on the filesystem holding `path`, when the system says. */
export const freeBytes = (path: string): number | undefined => {
  try {
    const stats = statfsSync(path)
    return Number(stats.bavail) * Number(stats.bsize)
  } catch {
    return undefined
  }
}

/** A byte count for people: `512 KB`, `3.2 MB`, `1.5 GB`. */
export const formatBytes = (bytes: number): string => {
  if (bytes < 1024 * 1024) return `${Math.round(bytes / 1024)} KB`
  if (bytes < 1024 * 1024 * 1024) return `${(bytes / (1024 * 1024)).toFixed(1)} MB`
  return `${(bytes / (1024 * 1024 * 1024)).toFixed(1)} GB`
}

/**
 * What a write refused for want of space says: the data directory, the space left on its disk, and what to
 * free. Without a data directory (a store in memory) it says the disk.
 */
export const fullMessage = (dataDir: string | undefined): string => {
  if (dataDir === undefined) return "the disk is full: free space on it, then try again"
  const free = freeBytes(dataDir)
  return `the disk holding the data directory ${dataDir} is full (${free === undefined ? "unknown" : formatBytes(free)} free): free space on it (delete old models or checkpoints, or move the data directory to a larger disk), then try again; nothing already stored was lost`
}
