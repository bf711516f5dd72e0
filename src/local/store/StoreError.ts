/**
 * The one error of the local backend's SQLite store, told apart by `reason`. SQL failures are not part of it:
 * they are defects (the database file is broken or gone), mapped once in the store's internals.
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"

/**
 * Why a store operation failed:
 * - `NotFound`: the model, checkpoint, job or event named does not exist;
 * - `Conflict`: the write contradicts what is stored (a model name taken, a step that exists, a job not in
 *   the state the transition needs, an idempotency key reused with a different body);
 * - `Corrupt`: a stored row does not decode (written by something else, or damaged).
 */
export type StoreErrorReason = "NotFound" | "Conflict" | "Corrupt"

/** A store operation that failed for an expected reason. */
export class StoreError extends Data.TaggedError("StoreError")<{
  /** Why it failed. */
  readonly reason: StoreErrorReason
  /** A message for the caller, naming what was not found or in conflict. */
  readonly message: string
}> {}

/** A `NotFound` error. */
export const notFound = (message: string): StoreError => new StoreError({ reason: "NotFound", message })

/** A `Conflict` error. */
export const conflict = (message: string): StoreError => new StoreError({ reason: "Conflict", message })

/** A `Corrupt` error. */
export const corrupt = (message: string): StoreError => new StoreError({ reason: "Corrupt", message })
