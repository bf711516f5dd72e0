import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import { jsonDepth, nestsDeeper } from "../../src/local/server/internal/admit.js"

/** A value nested `depth` deep, arrays and objects alternating, with `leaf` innermost. */
const nested = (depth: number, leaf: unknown): unknown => {
  let value = leaf
  for (let i = 0; i < depth; i++) value = i % 2 === 0 ? [value] : { k: value }
  return value
}

describe("admit: the depth of a parsed body", () => {
  it("nestsDeeper tells what jsonDepth tells of the value's text, for any JSON value and limit", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.jsonValue({ maxDepth: 6 }), FastCheck.nat({ max: 8 }), (value, limit) => {
        expect(nestsDeeper(value, limit)).toBe(jsonDepth(JSON.stringify(value), limit) > limit)
      }),
      { numRuns: 2000 }
    )
  })

  it("empty arrays and objects count as a level; around the server's limit", () => {
    for (const depth of [0, 1, 2, 511, 512, 513, 3_000]) {
      for (const leaf of [1, [], {}, "[[[{"]) {
        const value = nested(depth, leaf)
        expect(nestsDeeper(value, 512)).toBe(jsonDepth(JSON.stringify(value), 512) > 512)
      }
    }
  })
})
