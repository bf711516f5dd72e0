/**
 * The embedded backend's fair scheduler (`src/internal/fairScheduler.ts`): fibers that keep working in small steps
 * give the event loop back every slice, where Effect's default scheduler runs them all in microtasks first; and a
 * fiber at the urgent priority (the server's reads) goes ahead of the queued ones.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as Scheduler from "effect/Scheduler"
import { FairScheduler, URGENT_PRIORITY } from "../../src/internal/fairScheduler.js"

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

/**
 * Runs the workload (on `scheduler`, or Effect's default) and counts the steps that finished between each two turns
 * of the event loop. `steps[0]` is the first turn's, which holds the call that started the workload: Effect runs
 * each forked fiber's first step as it is forked, before any scheduler is asked. Steps, not milliseconds: a process
 * taken off the CPU by a loaded machine stretches the gaps between turns, not the work done between them.
 */
const turns = async (scheduler: Scheduler.Scheduler | undefined) => {
  const order: Array<string> = []
  const steps: Array<number> = []
  let running = true
  const tick = () => {
    steps.push(order.length - steps.reduce((a, b) => a + b, 0))
    if (running) setImmediate(tick)
  }
  setImmediate(tick)
  const program = scheduler === undefined ? workload(order) : Effect.withScheduler(workload(order), scheduler)
  await Effect.runPromise(program)
  running = false
  // The gap that ends with the workload (the loop's first turn after it) counts too.
  await new Promise((resolve) => setImmediate(resolve))
  return { steps, order }
}

describe("FairScheduler", () => {
  it("gives the event loop a turn at least every slice while fibers keep working", async () => {
    // Without it the same workload holds the loop for (nearly) all of its 200 steps: what the scheduler is for.
    const held = await turns(undefined)
    expect(Math.max(...held.steps)).toBeGreaterThan(150)
    const fair = await turns(new FairScheduler(5))
    // After the fibers' first steps, a slice (5 ms) holds five steps of 1 ms and the one that ends past it. Counted
    // in steps, not in the gaps' milliseconds: with the machine loaded by other processes the gaps stretched to
    // 161 ms (a CI run beside two training benchmarks) while the work between turns stayed a slice's.
    expect(fair.steps[0]).toBeLessThanOrEqual(20 + 6)
    expect(Math.max(...fair.steps.slice(1))).toBeLessThanOrEqual(6)
    expect(fair.order).toHaveLength(200)
  })

  it("keeps each fiber's steps in order and runs the fibers in turn", async () => {
    const { order } = await turns(new FairScheduler(5))
    for (let f = 0; f < 20; f++) {
      const steps = order.filter((s) => s.startsWith(`${f}:`)).map((s) => Number(s.split(":")[1]))
      expect(steps).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    }
    // Round-robin: every fiber has taken its first step before any takes its third.
    const firstThird = order.findIndex((s) => s.endsWith(":2"))
    const lastFirst = Math.max(...Array.from({ length: 20 }, (_, f) => order.indexOf(`${f}:0`)))
    expect(lastFirst).toBeLessThan(firstThird)
  })

  /**
   * A probe of five hops (a request's few fiber steps) started 20 ms into the workload, at `priority`: how long it
   * took from its start to its end.
   */
  const probeBehind = (scheduler: FairScheduler, priority: number) =>
    Effect.runPromise(
      Effect.gen(function* () {
        const order: Array<string> = []
        const work = yield* Effect.fork(workload(order))
        yield* Effect.sleep(20)
        const started = performance.now()
        yield* Effect.withSchedulingPriority(
          Effect.gen(function* () {
            for (let hop = 0; hop < 5; hop++) yield* Effect.yieldNow()
          }),
          priority
        )
        const took = performance.now() - started
        yield* work.await
        return took
      }).pipe(Effect.withScheduler(scheduler))
    )

  it("runs an urgent fiber's hops ahead of the queued drains, and others behind them", async () => {
    // At the default priority each hop waits behind the twenty fibers' queued steps (~20 ms a hop).
    const queued = await probeBehind(new FairScheduler(5), 0)
    expect(queued).toBeGreaterThan(60)
    // Urgent, a hop waits at most for the step running when it came (1 ms) and a turn of the loop.
    const urgent = await probeBehind(new FairScheduler(5), URGENT_PRIORITY)
    expect(urgent).toBeLessThan(40)
  })

  it("still runs the other fibers while urgent ones keep coming", async () => {
    const scheduler = new FairScheduler(5)
    const order: Array<string> = []
    let urgentSteps = 0
    let running = true
    // An urgent fiber that never stops stepping (2 ms a step), beside the workload: the workload still ends.
    const hog = Effect.withSchedulingPriority(
      Effect.gen(function* () {
        while (running) {
          busy(2)
          urgentSteps += 1
          yield* Effect.yieldNow()
        }
      }),
      URGENT_PRIORITY
    )
    await Effect.runPromise(
      Effect.gen(function* () {
        const fiber = yield* Effect.fork(hog)
        yield* workload(order)
        running = false
        yield* fiber.await
      }).pipe(Effect.withScheduler(scheduler))
    )
    expect(order).toHaveLength(200)
    expect(urgentSteps).toBeGreaterThan(10)
  })
})
