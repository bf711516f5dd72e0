/**
 * The WebAssembly kernels (`wasm/kernels.as`) against the JavaScript loops of `Kernels.ts` and `Attention.ts`
 * (double sums) on random shapes and values (property tests): every product, attention, RMSNorm, GELU and
 * log-softmax within a float32 bound (stated per kernel below), and Adam bit for bit. Each element of a product
 * gets the same bits whatever the rows computed with it. A float32 policy on them computes the gradient of the
 * float64 policy (the gradient check's) within 1e-3 of its norm. And the embedded build is the source's.
 */
import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import { describe, expect, it } from "@effect/vitest"
import * as fc from "effect/FastCheck"
import { adamStep, makeAdamState } from "../../src/local/engine/Optimizer.js"
import { attendRowGeneric } from "../../src/local/engine/policy/Attention.js"
import {
  geluBackwardRange,
  geluRangeKeep,
  logSoftmaxIntoJs,
  matmulNT,
  rmsNormRow,
  rmsNormRowBackward
} from "../../src/local/engine/policy/Kernels.js"
import { Policy } from "../../src/local/engine/policy/Policy.js"
import { heap, ptr } from "../../src/local/engine/policy/Wasm.js"
import { KERNELS_SOURCE_SHA256, KERNELS_WASM_BASE64 } from "../../src/local/engine/policy/wasm/kernelsWasm.js"
import { Rng } from "../../src/local/engine/Random.js"

const W = heap()!
const k = W.kernels
/** The unit roundoff of float32. */
const U = 2 ** -24

/** A Float32Array in the kernels' memory with values uniform in (-scale, scale), seeded. */
const random = (n: number, rng: Rng, scale = 1): Float32Array => {
  const a = W.f32(n)!
  for (let i = 0; i < n; i++) a[i] = (rng.float() * 2 - 1) * scale
  return a
}

const runs = { numRuns: 60 }

describe("the WebAssembly kernels", () => {
  it("run where the policy's buffers live", () => {
    const policy = Policy.create()
    expect(policy.heap).toBe(W)
    expect(W.has(policy.params)).toBe(true)
    expect(Policy.create(undefined, { kernels: "js" }).heap).toBeUndefined()
    expect(Policy.create(undefined, { float64: true }).heap).toBeUndefined()
  })

  it("matmulNT: A B^T (+ bias, or accumulated) within (K + 2) u sum |a b| of the double sum", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 9 }),
        fc.integer({ min: 1, max: 23 }),
        fc.integer({ min: 1, max: 70 }),
        fc.constantFrom("store", "bias", "acc"),
        fc.integer(),
        (M, N, K, mode, seed) => {
          const rng = new Rng(seed)
          const lda = K + (seed & 3)
          const A = random(M * lda, rng)
          const B = random(N * K, rng)
          const bias = random(N, rng)
          const C = random(M * N, rng)
          const C0 = Float32Array.from(C)
          const ref = Float32Array.from(C)
          k.matmulNT(
            ptr(C),
            N,
            ptr(A),
            lda,
            ptr(B),
            K,
            M,
            N,
            K,
            mode === "bias" ? ptr(bias) : 0,
            mode === "acc" ? 1 : 0
          )
          matmulNT(ref, 0, N, A, 0, lda, B, 0, K, M, N, K, mode === "bias" ? bias : null, 0, mode === "acc")
          for (let m = 0; m < M; m++) {
            for (let n = 0; n < N; n++) {
              let mag = mode === "store" ? 0 : Math.abs(mode === "bias" ? bias[n]! : C0[m * N + n]!)
              for (let q = 0; q < K; q++) mag += Math.abs(A[m * lda + q]! * B[n * K + q]!)
              expect(Math.abs(C[m * N + n]! - ref[m * N + n]!)).toBeLessThanOrEqual((K + 2) * U * mag + 1e-30)
            }
          }
        }
      ),
      runs
    )
  })

  it("matmulNT: each element has the same bits whether its row is computed alone or with others", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 11 }),
        fc.integer({ min: 1, max: 30 }),
        fc.integer({ min: 1, max: 50 }),
        fc.integer(),
        (M, N, K, seed) => {
          const rng = new Rng(seed)
          const A = random(M * K, rng)
          const B = random(N * K, rng)
          const bias = random(N, rng)
          const all = W.f32(M * N)!
          const one = W.f32(M * N)!
          k.matmulNT(ptr(all), N, ptr(A), K, ptr(B), K, M, N, K, ptr(bias), 0)
          for (let m = 0; m < M; m++) k.matmulNT(ptr(one, m * N), N, ptr(A, m * K), K, ptr(B), K, 1, N, K, ptr(bias), 0)
          // And columns alone: the last column by itself, past the blocks of four.
          const col = W.f32(M)!
          k.matmulNT(ptr(col), 1, ptr(A), K, ptr(B, (N - 1) * K), K, M, 1, K, ptr(bias, N - 1), 0)
          expect(Buffer.from(one.buffer, one.byteOffset, one.byteLength)).toEqual(
            Buffer.from(all.buffer, all.byteOffset, all.byteLength)
          )
          for (let m = 0; m < M; m++) expect(Object.is(col[m], all[m * N + N - 1])).toBe(true)
        }
      ),
      runs
    )
  })

  it("matmulAx: A B and A^T B (+ bias, or accumulated) within (K + 2) u sum |a b| of the double sum", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 13 }),
        fc.integer({ min: 1, max: 27 }),
        fc.integer({ min: 1, max: 40 }),
        fc.boolean(),
        fc.constantFrom("store", "bias", "acc"),
        fc.integer(),
        (M, N, K, transposed, mode, seed) => {
          const rng = new Rng(seed)
          const A = random(M * K, rng)
          // A(m, n) at m sam + n san: row-major M x K, or the transpose of a K x M matrix.
          const [sam, san] = transposed ? [1, M] : [K, 1]
          const B = random(K * N, rng)
          const bias = random(N, rng)
          const C = random(M * N, rng)
          const C0 = Float32Array.from(C)
          k.matmulAx(
            ptr(C),
            N,
            ptr(A),
            sam,
            san,
            ptr(B),
            N,
            M,
            N,
            K,
            mode === "bias" ? ptr(bias) : 0,
            mode === "acc" ? 1 : 0
          )
          for (let m = 0; m < M; m++) {
            for (let j = 0; j < N; j++) {
              let s = mode === "acc" ? C0[m * N + j]! : mode === "bias" ? bias[j]! : 0
              let mag = Math.abs(s)
              for (let n = 0; n < K; n++) {
                const t = A[m * sam + n * san]! * B[n * N + j]!
                s += t
                mag += Math.abs(t)
              }
              expect(Math.abs(C[m * N + j]! - s)).toBeLessThanOrEqual((K + 2) * U * mag + 1e-30)
            }
          }
        }
      ),
      runs
    )
  })

  it("attendRow: outputs within 1e-5 and weights within 1e-5 of the generic loops, any head width", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 1, max: 14 }),
        fc.integer({ min: 1, max: 60 }),
        fc.integer(),
        (H, dh, n, seed) => {
          const rng = new Rng(seed)
          const d = H * dh
          const rows = n + 3
          const kv = random(rows * 3 * d, rng, 2)
          const view = W.i32(n)!
          for (let i = 0; i < n; i++) view[i] = (i * 7 + 3) % rows
          const out = W.f32(d)!
          const probs = W.f32(H * n)!
          k.attendRow(ptr(kv), ptr(kv), 3 * d, d, 2 * d, ptr(view), n, ptr(out), ptr(probs), H, dh)
          const outJ = new Float32Array(d)
          const probsJ = new Float32Array(H * n)
          attendRowGeneric(
            kv,
            0,
            kv,
            3 * d,
            d,
            2 * d,
            view,
            0,
            n,
            outJ,
            0,
            probsJ,
            0,
            H,
            dh,
            new Float64Array(d),
            new Float64Array(d)
          )
          for (let i = 0; i < H * n; i++) expect(Math.abs(probs[i]! - probsJ[i]!)).toBeLessThanOrEqual(1e-5)
          for (let e = 0; e < d; e++) expect(Math.abs(out[e]! - outJ[e]!)).toBeLessThanOrEqual(1e-5)
        }
      ),
      // The engine's heads (12 wide, in pairs: paths of their own) every run, whatever the draw.
      {
        ...runs,
        examples: [
          [4, 12, 33, 1],
          [2, 12, 5, 2],
          [4, 12, 60, 3]
        ]
      }
    )
  })

  it("RMSNorm and its backward pass, GELU and its backward pass, log-softmax: within 1e-5 of the loops", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 70 }), fc.integer(), (R, d, seed) => {
        const rng = new Rng(seed)
        const close = (a: ArrayLike<number>, b: ArrayLike<number>, tol: number) => {
          for (let i = 0; i < b.length; i++) expect(Math.abs(a[i]! - b[i]!)).toBeLessThanOrEqual(tol)
        }
        const X = random(R * d, rng, 3)
        const g = random(d, rng)
        const Y = W.f32(R * d)!
        const inv = W.f32(R)!
        k.rmsNormRows(ptr(Y), ptr(X), ptr(g), R, d, 0, ptr(inv))
        const Yj = new Float32Array(R * d)
        const invJ = Array.from({ length: R }, (_, r) => rmsNormRow(Yj, r * d, X, r * d, g, 0, d))
        close(Y, Yj, 1e-5)
        close(inv, invJ, 1e-5)
        const dY = random(R * d, rng)
        const dX = W.f32(R * d)!
        const dg = W.f32(d)!
        k.rmsNormRowsBackward(ptr(dX), ptr(dY), ptr(X), ptr(inv), ptr(g), ptr(dg), R, d, 0)
        const dXj = new Float32Array(R * d)
        const dgJ = new Float32Array(d)
        for (let r = 0; r < R; r++) rmsNormRowBackward(dXj, r * d, dY, r * d, X, r * d, inv[r]!, g, 0, dgJ, d)
        close(dX, dXj, 1e-5)
        close(dg, dgJ, 1e-5)
        const u = random(R * d, rng, 6)
        const out = W.f32(R * d)!
        const th = W.f32(R * d)!
        k.gelu(ptr(out), ptr(th), ptr(u), R * d)
        const outJ = new Float32Array(R * d)
        const thJ = new Float32Array(R * d)
        geluRangeKeep(outJ, thJ, u, 0, R * d)
        close(out, outJ, 1e-5)
        close(th, thJ, 1e-5)
        const du = W.f32(R * d)!
        k.geluBackward(ptr(du), ptr(dY), ptr(u), ptr(th), R * d)
        const duJ = new Float32Array(R * d)
        geluBackwardRange(duJ, dY, u, thJ, 0, R * d)
        close(du, duJ, 1e-5)
        const logits = random(d, rng, 8)
        const lp = W.f32(d)!
        const lse = k.logSoftmax(ptr(lp), 0, ptr(logits), d, 0)
        const lpJ = new Float32Array(d)
        expect(Math.abs(lse - logSoftmaxIntoJs(lpJ, 0, logits, 0, d))).toBeLessThanOrEqual(1e-5)
        close(lp, lpJ, 1e-5)
      }),
      runs
    )
  })

  it("Adam: the same bits as the JavaScript loop, clipped or not", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 300 }), fc.integer(), fc.boolean(), (n, seed, clip) => {
        const rng = new Rng(seed)
        const params = random(n, rng)
        const grads = random(n, rng, clip ? 10 : 1e-3)
        const wasm = makeAdamState(n, { weightDecay: 0.01 })
        expect(W.has(wasm.m)).toBe(true)
        const js = { ...makeAdamState(n, { weightDecay: 0.01 }), m: new Float32Array(n), v: new Float32Array(n) }
        const pJs = Float32Array.from(params)
        const gJs = Float32Array.from(grads)
        for (let step = 0; step < 3; step++) {
          const a = adamStep(params, grads, wasm, 1e-2)
          const b = adamStep(pJs, gJs, js, 1e-2)
          expect(a).toEqual(b)
        }
        expect(Buffer.from(params.buffer, params.byteOffset, params.byteLength)).toEqual(Buffer.from(pJs.buffer))
        expect(Buffer.from(wasm.v.buffer, wasm.v.byteOffset, wasm.v.byteLength)).toEqual(Buffer.from(js.v.buffer))
      }),
      { numRuns: 30 }
    )
  })

  // Heads of any width (3 of 8), and the engine's own (4 of 12), which the attention kernels take by paths of their own.
  it.each([
    { heads: "3 of 8", dModel: 24, nHeads: 3 },
    { heads: "4 of 12", dModel: 48, nHeads: 4 }
  ])(
    "a float32 policy on them computes the float64 policy's gradient within 1e-3 of its norm, heads $heads",
    ({ dModel, nHeads }) => {
      const config = { vocabSize: 40, contextLength: 24, dModel, nLayers: 2, nHeads, dFf: 40 }
      const exact = Policy.create(config, { seed: 3, float64: true })
      const fast = Policy.create(config, { seed: 3 })
      fast.params.set(exact.params)
      const rng = new Rng(9)
      const prompt = Array.from({ length: 6 }, () => rng.int(40))
      const sequences = Array.from({ length: 5 }, () => [...prompt, ...Array.from({ length: 9 }, () => rng.int(40))])
      const want = sequences.map((s) => s.map((_, t) => (t >= 6 ? 1 : 0)))
      const d = sequences.map((s) => s.map(() => rng.float() - 0.5))
      for (const p of [exact, fast]) {
        p.zeroGrads()
        p.forwardBatch(sequences, want)
        p.backwardBatch(d)
      }
      let diff = 0
      let norm = 0
      for (let i = 0; i < exact.grads.length; i++) {
        diff += (fast.grads[i]! - exact.grads[i]!) ** 2
        norm += exact.grads[i]! ** 2
      }
      expect(norm).toBeGreaterThan(0)
      expect(Math.sqrt(diff)).toBeLessThan(1e-3 * Math.sqrt(norm))
    }
  )

  it("Heap.release: a block given back is the next of its size, zeroed unless asked otherwise, and only once", () => {
    const a = W.f32(3000)!
    a.fill(7)
    W.release(a)
    const b = W.f32(3000)!
    expect(b.byteOffset).toBe(a.byteOffset)
    expect(b.every((x) => x === 0)).toBe(true)
    b.fill(5)
    W.release(b)
    const c = W.f32(2900, false)!
    expect(c.byteOffset).toBe(a.byteOffset)
    expect(c[0]).toBe(5)
    // Given back twice (a's block is c's now): the second time is ignored, so c's block is not handed out again.
    W.release(a)
    W.release(b)
    const d = W.f32(3000)!
    expect(d.byteOffset).not.toBe(c.byteOffset)
    // A view that is not of the heap is left alone.
    W.release(new Float32Array(8))
    W.release(c)
    W.release(d)
  })

  it("a released decoding state is emptied, and its caches' blocks are the next fork's", () => {
    const policy = Policy.create(undefined, { seed: 5 })
    expect(policy.heap).toBe(W)
    const state = policy.prefill([1, 2, 3, 4, 5])
    const logits = Array.from(policy.logits(state, new Float32Array(policy.vocabSize)))
    const copy = policy.fork(state)
    const blocks = copy.kv.map((kv) => kv.byteOffset)
    policy.release(copy)
    expect(copy.kv).toEqual([])
    expect(copy.length).toBe(0)
    const again = policy.fork(state)
    expect(new Set(again.kv.map((kv) => kv.byteOffset))).toEqual(new Set(blocks))
    expect(Array.from(policy.logits(again, new Float32Array(policy.vocabSize)))).toEqual(logits)
  })

  it("are the build of their source (npm run build:wasm after editing wasm/kernels.as)", () => {
    const source = readFileSync(new URL("../../wasm/kernels.as", import.meta.url))
    expect(createHash("sha256").update(source).digest("hex")).toBe(KERNELS_SOURCE_SHA256)
    const shipped = readFileSync(new URL("../../src/local/engine/policy/wasm/kernels.wasm", import.meta.url))
    expect(Buffer.from(KERNELS_WASM_BASE64, "base64").equals(shipped)).toBe(true)
  })
})
