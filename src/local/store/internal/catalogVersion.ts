/**
 * A count of the writes to the catalogue of models and checkpoints (a checkpoint inserted, checkpoints or a model
 * deleted), so that the server can keep what a model name resolved to for as long as the count is unchanged,
 * instead of two queries per chat completion.
 *
 * The count is bumped when such a statement has run, before its transaction commits. That is safe because the
 * store has one connection and a transaction holds it: a reader that sees the new count and queries waits for
 * the commit, and a reader that saw the old count read (or will keep) what was there before. A write that rolls
 * back only costs the readers a query. The count is per process and shared by every store in it: another
 * store's write only makes a lookup query again.
 *
 * @internal
 */
import * as Effect from "effect/Effect"

let writes = 0

/** The number of catalogue writes so far in this process. */
export const catalogVersion = (): number => writes

/** Runs a statement that writes the catalogue, counting it once it has run (whether it succeeded or not). */
export const countedWrite = <A, E, R>(statement: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.ensuring(
    statement,
    Effect.sync(() => {
      writes += 1
    })
  )
