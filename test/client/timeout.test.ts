import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import * as Ref from "effect/Ref"
import * as TestClock from "effect/TestClock"
import { timeoutFail } from "../../src/client/internal/timeout.js"

const limit = (millis: number) => ({ duration: Duration.millis(millis), onTimeout: () => "timed out" as const })

describe("timeoutFail", () => {
  it.live("under the live clock: the effect's value within the limit, its failure as it is", () =>
    Effect.gen(function* () {
      expect(yield* timeoutFail(Effect.as(Effect.sleep("5 millis"), 1), limit(1000))).toBe(1)
      expect(yield* Effect.either(timeoutFail(Effect.fail("boom" as const), limit(1000)))).toEqual(Either.left("boom"))
    })
  )

  it.live(
    "under the live clock: past the limit, the effect is interrupted (its finalizer run) and the failure is onTimeout's",
    () =>
      Effect.gen(function* () {
        const finalized = yield* Ref.make(false)
        const slow = Effect.never.pipe(Effect.ensuring(Ref.set(finalized, true)))
        const result = yield* Effect.either(timeoutFail(slow, limit(20)))
        expect(result).toEqual(Either.left("timed out"))
        expect(yield* Ref.get(finalized)).toBe(true)
      })
  )

  it.live("under the live clock: interrupting the caller interrupts the effect", () =>
    Effect.gen(function* () {
      const started = yield* Deferred.make<void>()
      const finalized = yield* Deferred.make<void>()
      const slow = Deferred.succeed(started, undefined).pipe(
        Effect.zipRight(Effect.never),
        Effect.ensuring(Deferred.succeed(finalized, undefined))
      )
      const fiber = yield* Effect.fork(timeoutFail(slow, limit(60_000)))
      yield* Deferred.await(started)
      const exit = yield* Fiber.interrupt(fiber)
      expect(Exit.isInterrupted(exit)).toBe(true)
      expect(yield* Deferred.isDone(finalized)).toBe(true)
    })
  )

  it.live("under the live clock: the fiber refs the effect sets are the caller's once it succeeds", () =>
    Effect.gen(function* () {
      const ref = FiberRef.unsafeMake(0)
      yield* timeoutFail(FiberRef.set(ref, 7), limit(1000))
      expect(yield* FiberRef.get(ref)).toBe(7)
    })
  )

  it.live("under the live clock: the effect sees the caller's services and span, and runs in another fiber", () =>
    Effect.gen(function* () {
      class Greeting extends Context.Tag("test/Greeting")<Greeting, string>() {}
      const seen = yield* timeoutFail(Effect.all([Greeting, Effect.currentSpan, Effect.fiberId]), limit(1000)).pipe(
        Effect.provideService(Greeting, "hello"),
        Effect.withSpan("caller")
      )
      const [greeting, span, fiberId] = seen
      expect(greeting).toBe("hello")
      expect(span.name).toBe("caller")
      expect(fiberId).not.toEqual(yield* Effect.fiberId)
    })
  )

  it.effect("under the test clock: Effect.timeoutFail, driven by the clock", () =>
    Effect.gen(function* () {
      const fiber = yield* Effect.fork(timeoutFail(Effect.never, limit(1000)))
      yield* TestClock.adjust("999 millis")
      expect(fiber.unsafePoll()).toBe(null)
      yield* TestClock.adjust("1 millis")
      expect(yield* Effect.either(Fiber.join(fiber))).toEqual(Either.left("timed out"))
    })
  )
})
