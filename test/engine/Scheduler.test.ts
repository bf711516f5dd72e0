/** The decoding scheduler (`src/local/engine/Scheduler.ts`): its tasks step in turn, round-robin. */
import { describe, expect, it } from "@effect/vitest"
import { Scheduler } from "../../src/local/engine/Scheduler.js"

describe("the decoding scheduler", () => {
  it("runs every step of its tasks, in turn", async () => {
    const scheduler = new Scheduler(10)
    const order: Array<string> = []
    const run = (name: string) =>
      new Promise<void>((resolve) => {
        let n = 0
        scheduler.add({
          step: () => {
            order.push(`${name}${n}`)
            n += 1
            if (n === 3) resolve()
            return n === 3
          },
          fail: () => undefined
        })
      })
    await Promise.all([run("a"), run("b")])
    expect(order).toEqual(["a0", "b0", "a1", "b1", "a2", "b2"])
  })
})
