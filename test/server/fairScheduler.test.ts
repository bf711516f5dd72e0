/**
 * The servers' fair scheduler (`src/internal/fairScheduler.ts`): fibers that keep working in small steps give the
 * event loop back every slice, where Effect's default scheduler runs them all in microtasks first.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as Scheduler from "effect/Scheduler"
import { FairScheduler } from "../../src/internal/fairScheduler.js"

const busy = (ms: number) => {
  const end = performance.now() + ms
  while (performance.now() < end) {
    // spin: a step of CPU-bound work
  }
}

/** 20 fibers, each 10 steps of 1 ms with a yield between: 200 ms of work. The order the steps finished in. */
const workload = (order: Array<string>) =>
  Effect.forEach(
    Array.from({ length: 20 }, (_, f) => f),
    (f) =>
      Effect.gen(function* () {
        for (let step = 0; step < 10; step++) {
          busy(1)
          order.push(`${f}:${step}`)
          yield* Effect.yieldNow()
        }
      }),
    { concurrency: "unbounded", discard: true }
  )

/** Runs the workload (on `scheduler`, or Effect's default) and the longest gap between turns of the event loop. */
const longestGap = async (scheduler: Scheduler.Scheduler | undefined) => {
  const order: Array<string> = []
  let longest = 0
  let last = performance.now()
  let running = true
  const tick = () => {
    const now = performance.now()
    longest = Math.max(longest, now - last)
    last = now
    if (running) setImmediate(tick)
  }
  setImmediate(tick)
  const program = scheduler === undefined ? workload(order) : Effect.withScheduler(workload(order), scheduler)
  await Effect.runPromise(program)
  running = false
  // The gap that ends with the workload (the loop's first turn after it) counts too.
  await new Promise((resolve) => setImmediate(resolve))
  return { longest, order }
}

describe("FairScheduler", () => {
  it("gives the event loop a turn at least every slice while fibers keep working", async () => {
    // Without it the same workload holds the loop for (nearly) all of its 200 ms: what the scheduler is for.
    const held = await longestGap(undefined)
    expect(held.longest).toBeGreaterThan(150)
    const fair = await longestGap(new FairScheduler(5))
    // A slice (5 ms) plus the step that ends past it (1 ms), with room for a loaded machine.
    expect(fair.longest).toBeLessThan(40)
    expect(fair.order).toHaveLength(200)
  })

  it("keeps each fiber's steps in order and runs the fibers in turn", async () => {
    const { order } = await longestGap(new FairScheduler(5))
    for (let f = 0; f < 20; f++) {
      const steps = order.filter((s) => s.startsWith(`${f}:`)).map((s) => Number(s.split(":")[1]))
      expect(steps).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    }
    // Round-robin: every fiber has taken its first step before any takes its third.
    const firstThird = order.findIndex((s) => s.endsWith(":2"))
    const lastFirst = Math.max(...Array.from({ length: 20 }, (_, f) => order.indexOf(`${f}:0`)))
    expect(lastFirst).toBeLessThan(firstThird)
  })
})
