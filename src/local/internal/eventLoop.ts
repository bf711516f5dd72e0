/**
 * Giving the event loop a turn from CPU-bound work (training steps, token-by-token decoding), so pending I/O
 * (other requests, socket writes) runs in between.
 */
import * as Effect from "effect/Effect"

/** Gives the event loop a turn (a macrotask, so pending I/O runs), whatever the `Clock`. */
export const yieldToEventLoop: Effect.Effect<void> = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})
