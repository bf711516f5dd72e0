/**
 * The schedule of `TrainingLoop`'s off-policy mode: each step is a fiber that gathers, then trains, and the
 * steps overlap under two gates.
 *
 * - **Gathering** of step `k` starts once step `k - 1` has gathered (one gather at a time, in step order) and
 *   checkpoint `k - maxStaleness` exists (step `k - maxStaleness - 1` was taken): so no trajectory of step `k`
 *   starts on weights more than `maxStaleness` checkpoints behind checkpoint `k`, the weights its job trains.
 * - **Training** of step `k` starts once step `k - 1` was taken (its job ended, checkpoint `k` exists, and the
 *   loop decided to go on): jobs run one at a time, in step order, as on the service.
 * - Gathering of step `k` also waits until step `k - maxStaleness`, whose training may start at the same moment,
 *   has submitted its job (or ended): submitting is a short burst of work on the same event loop as the
 *   rollouts, and behind a gather's burst of requests the log and submission took ~0.45 s a step (measured in
 *   `npm start`) while the trainer sat idle.
 *
 * The loop takes the steps' results in order ({@link Lanes.accept}); when it says stop, or fails, or is
 * interrupted, every step still running (gathering ahead, or waiting at a gate) is interrupted. A step that
 * fails fails the loop when its turn comes (the step before it still finishes its job).
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"

/** What a pipelined loop runs, step by step. */
export interface Lanes<G, A, E, R> {
  /** The first step. */
  readonly from: number
  /** The step budget: steps `from` to `to - 1` run. */
  readonly to: number
  /** The most checkpoints gathering may run ahead of training (at least 1). */
  readonly maxStaleness: number
  /** Gathers step `k` (checkpoint `k - maxStaleness` exists; the policy may move on meanwhile). */
  readonly gather: (step: number) => Effect.Effect<G, E, R>
  /**
   * Trains step `k` on what it gathered (checkpoint `k` exists, no job runs); runs `submitted` once its job is
   * submitted, which lets the gathering waiting for it start (else that waits for the step's end).
   */
  readonly train: (step: number, gathered: G, submitted: Effect.Effect<void>) => Effect.Effect<A, E, R>
  /** Wraps a step's whole run, gathering and training (e.g. a traced call). */
  readonly around: (step: number, body: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Takes a step's result, in step order: `true` to go on, `false` to stop. */
  readonly accept: (step: number, result: A) => Effect.Effect<boolean, E, R>
}

/** Runs the steps overlapped (see the module). */
export const run = <G, A, E, R>(lanes: Lanes<G, A, E, R>): Effect.Effect<void, E, R> =>
  Effect.scoped(
    Effect.gen(function* () {
      const { from, maxStaleness } = lanes
      const n = Math.max(0, lanes.to - from)
      const gathered = yield* Effect.forEach(Array.from({ length: n }), () => Deferred.make<void>())
      const taken = yield* Effect.forEach(Array.from({ length: n }), () => Deferred.make<boolean>())
      const submitted = yield* Effect.forEach(Array.from({ length: n }), () => Deferred.make<void>())
      /** Waits for step `i` to be taken; before the first step, nothing to wait for; after a stop, forever. */
      const afterTaken = (i: number) =>
        i < 0 ? Effect.void : Effect.flatMap(Deferred.await(taken[i]!), (goOn) => (goOn ? Effect.void : Effect.never))
      const step = (i: number) =>
        lanes.around(
          from + i,
          Effect.gen(function* () {
            if (i > 0) yield* Deferred.await(gathered[i - 1]!)
            yield* afterTaken(i - maxStaleness - 1)
            if (i - maxStaleness >= 0) yield* Deferred.await(submitted[i - maxStaleness]!)
            const what = yield* lanes.gather(from + i)
            yield* Deferred.succeed(gathered[i]!, undefined)
            yield* afterTaken(i - 1)
            const done = Deferred.succeed(submitted[i]!, undefined)
            return yield* Effect.ensuring(lanes.train(from + i, what, Effect.asVoid(done)), done)
          })
        )
      const fibers: Array<Fiber.Fiber<A, E>> = []
      for (let i = 0; i < n; i++) {
        // The steps that may start before step i is taken: up to i + maxStaleness (i + maxStaleness + 1 waits).
        while (fibers.length < Math.min(n, i + maxStaleness + 2)) {
          fibers.push(yield* Effect.forkScoped(step(fibers.length)))
        }
        const result = yield* Fiber.join(fibers[i]!)
        const goOn = yield* lanes.accept(from + i, result)
        yield* Deferred.succeed(taken[i]!, goOn)
        if (!goOn) return
      }
    })
  )
