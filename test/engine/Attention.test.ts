/**
 * The attention kernel's unrolled path (heads of 12, the engine's shapes) gives the generic loops' bits, for
 * decoding's layout (a cache of [key | value] rows, nearest first) and training's (packed q | k | v rows, in view
 * through an ancestor list), whatever the row count.
 */
import { describe, expect, it } from "@effect/vitest"
import { attendRow, attendRowGeneric } from "../../src/local/engine/policy/Attention.js"
import { Rng } from "../../src/local/engine/Random.js"

describe("attention", () => {
  it("the unrolled path for heads of 12 equals the generic loops bit for bit", () => {
    const rng = new Rng(5)
    const H = 4
    const dh = 12
    const d = H * dh
    for (const n of [1, 2, 7, 64, 300]) {
      for (const layout of ["decode", "train"] as const) {
        // decode: kv rows of [k | v] (stride 2d, k at 0, v at d); train: rows of [q | k | v] (stride 3d).
        const stride = layout === "decode" ? 2 * d : 3 * d
        const kOff = layout === "decode" ? 0 : d
        const rows = n + 5
        const kv = Float32Array.from({ length: rows * stride }, () => (rng.float() - 0.5) * 4)
        const q = Float32Array.from({ length: 3 * d }, () => (rng.float() - 0.5) * 4)
        const view = Int32Array.from({ length: n + 3 }, (_, i) => (i * 7 + 3) % rows)
        const outA = new Float32Array(d + 2)
        const outB = new Float32Array(d + 2)
        const probsA = new Float32Array(H * n + 1)
        const probsB = new Float32Array(H * n + 1)
        const acc = new Float64Array(d)
        const qs = new Float64Array(d)
        attendRow(q, 1, kv, stride, kOff, kOff + d, view, 2, n, outA, 2, probsA, 1, H, dh, acc, qs)
        attendRowGeneric(q, 1, kv, stride, kOff, kOff + d, view, 2, n, outB, 2, probsB, 1, H, dh, acc, qs)
        expect(Array.from(outA)).toEqual(Array.from(outB))
        expect(Array.from(probsA)).toEqual(Array.from(probsB))
        expect(outA.some((v) => v !== 0)).toBe(true)
      }
    }
  })
})
