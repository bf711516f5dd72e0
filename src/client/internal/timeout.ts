/**
 * A time limit that costs one fiber under the live clock. `Effect.timeoutFail` races the effect against a sleeping
 * fiber (two fibers forked, ~30-55 us a call measured); every call of a client has one, so here the effect is
 * forked once and a timer of the live clock (a `setTimeout`, which is what its `sleep` is) interrupts it. Under any
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

/** The class of the live `Clock`, whose `sleep` is a `setTimeout`. */
export const LiveClock: unknown = Clock.make().constructor

/** Whether a clock is the live one (not a test's). */
export const isLiveClock = (clock: Clock.Clock): boolean => clock.constructor === LiveClock

/** The longest delay a `setTimeout` keeps (a longer one is left to `Effect.timeoutFail`). */
const MAX_TIMER_MILLIS = 2 ** 31 - 1

/**
 * `Effect.timeoutFail(self, options)`, with one fiber under the live clock: `self` runs in a child fiber, a timer
 * interrupts it at `duration`, and the interruption it ends with is then the `onTimeout` failure (awaited, so
 * `self`'s finalizers have run, as `Effect.timeoutFail` awaits them). `self` ending first wins, as it does there;
 * an interruption of the caller interrupts `self`; `self`'s fiber refs are inherited when it succeeds.
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
      : Effect.uninterruptibleMask((restore) =>
          Effect.flatMap(Effect.fork(restore(self)), (fiber) =>
            Effect.fiberIdWith((parent) => {
              let timedOut = false
              const timer = setTimeout(() => {
                timedOut = true
                fiber.unsafeInterruptAsFork(parent)
              }, millis)
              return Effect.flatMap(
                Effect.onInterrupt(restore(Fiber.await(fiber)), () => {
                  clearTimeout(timer)
                  return Fiber.interrupt(fiber)
                }),
                (exit): Effect.Effect<A, E | E1> => {
                  clearTimeout(timer)
                  if (Exit.isSuccess(exit)) return Effect.as(Fiber.inheritAll(fiber), exit.value)
                  return timedOut && Cause.isInterruptedOnly(exit.cause) ? Effect.fail(options.onTimeout()) : exit
                }
              )
            })
          )
        )
  )
}
