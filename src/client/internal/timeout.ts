/**
 * A time limit that costs one fiber under the live clock. `Effect.timeoutFail` races the effect against a sleeping
 * fiber (two fibers forked, ~30-55 us a call measured); every call of a client has one, so here the effect runs in
 * one fiber and a timer of the live clock (a `setTimeout`, which is what its `sleep` is) interrupts it. Under any
 * other clock (a test's `TestClock`) it is `Effect.timeoutFail` itself, so tests drive it as before.
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import * as Runtime from "effect/Runtime"

/** The class of the live `Clock`, whose `sleep` is a `setTimeout`. */
export const LiveClock: unknown = Clock.make().constructor

/** Whether a clock is the live one (not a test's). */
export const isLiveClock = (clock: Clock.Clock): boolean => clock.constructor === LiveClock

/** The longest delay a `setTimeout` keeps (a longer one is left to `Effect.timeoutFail`). */
const MAX_TIMER_MILLIS = 2 ** 31 - 1

/**
 * `Effect.timeoutFail(self, options)`, with one fiber under the live clock: `self` runs in a fiber of its own,
 * forked from the caller's runtime (`Runtime.runFork`: started at once, where `Effect.fork` schedules the start and
 * tracks the child, and `Fiber.await` waits on it; ~80 -> ~53 us a call measured over a call of one turn), a timer
 * interrupts it at `duration`, and the interruption it ends with is then the `onTimeout` failure (awaited, so
 * `self`'s finalizers have run, as `Effect.timeoutFail` awaits them). `self` ending first wins, as it does there;
 * an interruption of the caller interrupts `self` and waits for it; `self`'s fiber refs are inherited when it
 * succeeds.
 */
export const timeoutFail = <A, E, R, E1>(
  self: Effect.Effect<A, E, R>,
  options: { readonly duration: Duration.Duration; readonly onTimeout: () => E1 }
): Effect.Effect<A, E | E1, R> => {
  const millis = Duration.toMillis(options.duration)
  if (!(millis >= 0 && millis <= MAX_TIMER_MILLIS)) return Effect.timeoutFail(self, options)
  return Effect.clockWith((clock) =>
    !isLiveClock(clock)
      ? Effect.timeoutFail(self, options)
      : Effect.flatMap(Effect.runtime<R>(), (runtime) =>
          Effect.async<A, E | E1>((resume) => {
            const fiber = Runtime.runFork(runtime)(self)
            let timedOut = false
            const timer = setTimeout(() => {
              timedOut = true
              fiber.unsafeInterruptAsFork(FiberId.none)
            }, millis)
            fiber.addObserver((exit) => {
              clearTimeout(timer)
              resume(
                Exit.isSuccess(exit)
                  ? Effect.as(Fiber.inheritAll(fiber), exit.value)
                  : timedOut && Cause.isInterruptedOnly(exit.cause)
                    ? Effect.fail(options.onTimeout())
                    : exit
              )
            })
            return Effect.suspend(() => {
              clearTimeout(timer)
              return Fiber.interrupt(fiber)
            })
          })
        )
  )
}
