import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/TestClock"
import { JobEvents } from "../../src/local/store/JobEvents.js"
import { Jobs } from "../../src/local/store/Jobs.js"
import { Models } from "../../src/local/store/Models.js"
import { modelRequest, tempDir, withStore } from "./support.js"

const newJob = Effect.gen(function* () {
  const { model } = yield* (yield* Models).create(modelRequest("m"))
  return (yield* (yield* Jobs).enqueue(model.id, "rl", {})).id
})

describe("JobEvents", () => {
  it.scoped("pages a job's events in order with after, limit and has_more", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* withStore(dir)(
        Effect.gen(function* () {
          const job = yield* newJob
          const events = yield* JobEvents
          yield* events.append(job, "training_started", { num_sequences: 3 })
          for (let step = 0; step < 3; step++) yield* events.append(job, "gradient_step", { loss: step })
          yield* events.append(job, "training_ended")

          const first = yield* events.list(job, { limit: 2 })
          expect(first.data.map((e) => e.type)).toEqual(["training_started", "gradient_step"])
          expect(first.data[0]!.data).toEqual({ num_sequences: 3 })
          expect(first.has_more).toBe(true)
          const second = yield* events.list(job, { after: first.last_id, limit: 2 })
          expect(second.data.map((e) => e.data)).toEqual([{ loss: 1 }, { loss: 2 }])
          const third = yield* events.list(job, { after: second.last_id })
          expect(third.data.map((e) => e.type)).toEqual(["training_ended"])
          expect(third.has_more).toBe(false)
          expect((yield* events.list(job, { after: third.last_id })).data).toEqual([])
          expect((yield* Effect.flip(events.list(job, { after: crypto.randomUUID() }))).reason).toBe("NotFound")
          expect((yield* Effect.flip(events.append(crypto.randomUUID(), "training_ended"))).reason).toBe("NotFound")
        })
      )
    })
  )

  it.scoped("appendAll writes events in order after those before, moves progress once and wakes waiters", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* withStore(dir)(
        Effect.gen(function* () {
          const job = yield* newJob
          const events = yield* JobEvents
          const jobs = yield* Jobs
          yield* events.append(job, "training_started", { num_sequences: 4 })
          const waiting = yield* Effect.fork(events.waitForEvents(job, (yield* events.list(job)).last_id, 60_000))
          yield* Effect.yieldNow()
          const steps = [0, 1, 2].map((loss) => ({ type: "gradient_step" as const, data: { loss } }))
          const appended = yield* events.appendAll(job, steps)
          expect(yield* Fiber.join(waiting)).toBe(true)
          expect(appended.map((event) => event.data)).toEqual([{ loss: 0 }, { loss: 1 }, { loss: 2 }])
          const listed = (yield* events.list(job)).data
          expect(listed.map((event) => event.id)).toEqual([listed[0]!.id, ...appended.map((event) => event.id)])
          expect((yield* jobs.get(job)).progress).toBe(0.75)
          yield* events.appendAll(job, [{ type: "gradient_step", data: { loss: 3 } }])
          expect((yield* jobs.get(job)).progress).toBe(1)
          // A missing job: nothing written.
          const missing = yield* Effect.flip(events.appendAll(crypto.randomUUID(), steps))
          expect(missing.reason).toBe("NotFound")
          expect((yield* events.list(job)).data).toHaveLength(5)
        })
      )
    })
  )

  it.scoped("waitForEvents returns as soon as an event is appended", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* withStore(dir)(
        Effect.gen(function* () {
          const job = yield* newJob
          const events = yield* JobEvents
          const first = yield* events.append(job, "training_started", {})
          // An event exists already: no wait.
          expect(yield* events.waitForEvents(job, undefined, 60_000)).toBe(true)

          const waiting = yield* Effect.fork(events.waitForEvents(job, first.id, 60_000))
          yield* Effect.yieldNow()
          expect(waiting.unsafePoll()).toBeNull()
          yield* events.append(job, "gradient_step", { loss: 1 })
          // No clock adjustment: the append itself wakes the waiter.
          expect(yield* Fiber.join(waiting)).toBe(true)

          // Failing a job (a wider transaction) wakes waiters too.
          const last = (yield* events.list(job)).last_id
          const waitingForEnd = yield* Effect.fork(events.waitForEvents(job, last, 60_000))
          yield* Effect.yieldNow()
          yield* (yield* Jobs).fail(job, "stop")
          expect(yield* Fiber.join(waitingForEnd)).toBe(true)
        })
      )
    })
  )

  it.scoped("waitForEvents times out on the clock when nothing comes", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* withStore(dir)(
        Effect.gen(function* () {
          const job = yield* newJob
          const events = yield* JobEvents
          const first = yield* events.append(job, "training_started", {})
          const waiting = yield* Effect.fork(events.waitForEvents(job, first.id, 5_000))
          yield* TestClock.adjust("4 seconds")
          expect(waiting.unsafePoll()).toBeNull()
          // An event of another job does not end the wait.
          const other = yield* (yield* Jobs).enqueue((yield* (yield* Jobs).get(job)).model_id, "rl", {})
          yield* events.append(other.id, "training_started", {})
          yield* TestClock.adjust("500 millis")
          expect(waiting.unsafePoll()).toBeNull()
          yield* TestClock.adjust("1 second")
          expect(yield* Fiber.join(waiting)).toBe(false)
          expect(yield* events.waitForEvents(job, first.id, 0)).toBe(false)
        })
      )
    })
  )
})
