/**
 * The gateway's keys on their own (the gateway's answers to them: `Gateway.test.ts`): a rollout's own key is
 * taken, any other refused; once it ended, its own key is told so and any other still refused; the tombstones are
 * bounded, oldest dropped, and ending a rollout twice or one never issued drops none.
 */
import { describe, expect, it } from "@effect/vitest"
import { presentedKey, RolloutKeys } from "../../src/workflow/internal/rolloutKeys.js"

describe("RolloutKeys", () => {
  it("takes a rollout's own key, refuses any other; after its end, tells its own key so", () => {
    const keys = new RolloutKeys(10)
    const a = keys.issue("a")
    const b = keys.issue("b")
    expect(a).toMatch(/^sk-rollout-[A-Za-z0-9_-]{43}$/)
    expect(a).not.toBe(b)
    expect(keys.check("a", a)).toBe("Ok")
    expect(keys.check("a", b)).toBe("Refused")
    expect(keys.check("a", undefined)).toBe("Refused")
    expect(keys.check("c", a)).toBe("Refused")
    keys.end("a")
    expect(keys.check("a", a)).toBe("Ended")
    expect(keys.check("a", b)).toBe("Refused")
    expect(keys.check("a", undefined)).toBe("Refused")
    expect(keys.check("b", b)).toBe("Ok")
  })

  it("keeps at most maxEnded tombstones, the newest; ending an unknown or ended rollout drops none", () => {
    const keys = new RolloutKeys(1)
    const a = keys.issue("a")
    const b = keys.issue("b")
    keys.end("a")
    keys.end("never-issued")
    keys.end("a")
    expect(keys.check("a", a)).toBe("Ended")
    keys.end("b")
    expect(keys.check("b", b)).toBe("Ended")
    expect(keys.check("a", a)).toBe("Refused")
  })

  it("reads a Bearer key or an api-key header, nothing else", () => {
    expect(presentedKey({ authorization: "Bearer k1" })).toBe("k1")
    expect(presentedKey({ authorization: "bearer   k1  " })).toBe("k1")
    expect(presentedKey({ authorization: "Basic k1" })).toBeUndefined()
    expect(presentedKey({ authorization: "Bearer k1 k2" })).toBeUndefined()
    expect(presentedKey({ "api-key": "k2" })).toBe("k2")
    // Authorization wins, even when it holds no key.
    expect(presentedKey({ authorization: "Basic x", "api-key": "k2" })).toBeUndefined()
    // A header given twice arrives as a list: no key.
    expect(presentedKey({ "api-key": ["k2", "k3"] })).toBeUndefined()
    expect(presentedKey({})).toBeUndefined()
  })
})
