/**
 * The off-policy loop's schedule (`internal/pipeline.ts`): when each step gathers and trains, recorded in order.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Pipeline from "../../src/workflow/internal/pipeline.js"

/** Runs `steps` steps, recording each lane's moments; `signals` says whether a job reports its submission. */
const schedule = (maxStaleness: number, steps: number, signals: boolean) =>
  Effect.gen(function* () {
    const events: Array<string> = []
    yield* Pipeline.run<number, number, never, never>({
      from: 0,
      to: steps,
      maxStaleness,
      around: (_, body) => body,
      gather: (step) =>
        Effect.gen(function* () {
          events.push(`gather ${step}`)
          yield* Effect.sleep("2 millis")
          return step
        }),
      train: (step, gathered, submitted) =>
        Effect.gen(function* () {
          events.push(`submit ${step}`)
          yield* Effect.sleep("5 millis")
          if (signals) yield* submitted
          events.push(`submitted ${step}`)
          yield* Effect.sleep("20 millis")
          events.push(`trained ${step}`)
          return gathered
        }),
      accept: () => Effect.succeed(true)
    })
    return events
  })

const at = (events: ReadonlyArray<string>, event: string) => {
  const i = events.indexOf(event)
  expect(i, event).toBeGreaterThanOrEqual(0)
  return i
}

describe("Pipeline", () => {
  it.live("a step gathers once the job of the step maxStaleness back is submitted, not while it is", () =>
    Effect.gen(function* () {
      for (const maxStaleness of [1, 2]) {
        const events = yield* schedule(maxStaleness, 6, true)
        for (let k = maxStaleness; k < 6; k++) {
          expect(at(events, `gather ${k}`)).toBeGreaterThan(at(events, `submitted ${k - maxStaleness}`))
          // ...and still during that job: gathering runs ahead of training as before.
          expect(at(events, `gather ${k}`)).toBeLessThan(at(events, `trained ${k - maxStaleness}`))
        }
      }
    })
  )

  it.live("a step whose job never reports its submission holds the next gathering until it ends", () =>
    Effect.gen(function* () {
      const events = yield* schedule(1, 4, false)
      for (let k = 1; k < 4; k++) expect(at(events, `gather ${k}`)).toBeGreaterThan(at(events, `trained ${k - 1}`))
    })
  )
})
