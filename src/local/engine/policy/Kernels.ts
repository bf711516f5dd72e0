/**
 * The reference kernels of the local engine's policy, in plain typed-array loops (a float32 policy runs the
 * WebAssembly twins of `Wasm.ts`; these run the float64 policy of the gradient check, a policy made with
 * `kernels: "js"`, and the tests that hold the WebAssembly kernels to them): the one matrix product
 * (`C = A B^T`, 4 x 4 register blocks), RMSNorm and tanh-GELU with their backward passes, log-softmax, and the
 * growable scratch buffers the forward and backward passes reuse (attention is `Attention.ts`).
 *
 * Everything works on `FloatArray`; in use every buffer is a Float32Array (one element type per call site keeps
 * V8's code monomorphic). Sums are carried in doubles and rounded once when stored, and each output element is
 * summed in the same order whatever the batch, so results do not depend on which rows are computed together.
 *
 * @since 0.1.0
 */

import { type Heap, heap, ptr } from "./Wasm.js"

/** A float buffer of the policy: float32 in use, float64 for the gradient check. */
export type FloatArray = Float32Array | Float64Array

/**
 * `C[m, n] = sum_k A[m, k] B[n, k] (+ bias[n])`, or `C[m, n] += ...` with `accumulate`, for m < M, n < N,
 * with row strides lda, ldb, ldc. Each C element is summed over k in order, whatever the block it falls in.
 */
export const matmulNT = (
  C: FloatArray,
  cOff: number,
  ldc: number,
  A: FloatArray,
  aOff: number,
  lda: number,
  B: FloatArray,
  bOff: number,
  ldb: number,
  M: number,
  N: number,
  K: number,
  bias: FloatArray | null,
  biasOff: number,
  accumulate: boolean
): void => {
  let m = 0
  for (; m + 4 <= M; m += 4) {
    const a0 = aOff + m * lda
    const a1 = a0 + lda
    const a2 = a1 + lda
    const a3 = a2 + lda
    const c0 = cOff + m * ldc
    const c1 = c0 + ldc
    const c2 = c1 + ldc
    const c3 = c2 + ldc
    let n = 0
    for (; n + 4 <= N; n += 4) {
      const b0 = bOff + n * ldb
      const b1 = b0 + ldb
      const b2 = b1 + ldb
      const b3 = b2 + ldb
      let s00 = 0
      let s01 = 0
      let s02 = 0
      let s03 = 0
      let s10 = 0
      let s11 = 0
      let s12 = 0
      let s13 = 0
      let s20 = 0
      let s21 = 0
      let s22 = 0
      let s23 = 0
      let s30 = 0
      let s31 = 0
      let s32 = 0
      let s33 = 0
      for (let k = 0; k < K; k++) {
        const w0 = B[b0 + k]!
        const w1 = B[b1 + k]!
        const w2 = B[b2 + k]!
        const w3 = B[b3 + k]!
        let x = A[a0 + k]!
        s00 += x * w0
        s01 += x * w1
        s02 += x * w2
        s03 += x * w3
        x = A[a1 + k]!
        s10 += x * w0
        s11 += x * w1
        s12 += x * w2
        s13 += x * w3
        x = A[a2 + k]!
        s20 += x * w0
        s21 += x * w1
        s22 += x * w2
        s23 += x * w3
        x = A[a3 + k]!
        s30 += x * w0
        s31 += x * w1
        s32 += x * w2
        s33 += x * w3
      }
      if (accumulate) {
        C[c0 + n] = C[c0 + n]! + s00
        C[c0 + n + 1] = C[c0 + n + 1]! + s01
        C[c0 + n + 2] = C[c0 + n + 2]! + s02
        C[c0 + n + 3] = C[c0 + n + 3]! + s03
        C[c1 + n] = C[c1 + n]! + s10
        C[c1 + n + 1] = C[c1 + n + 1]! + s11
        C[c1 + n + 2] = C[c1 + n + 2]! + s12
        C[c1 + n + 3] = C[c1 + n + 3]! + s13
        C[c2 + n] = C[c2 + n]! + s20
        C[c2 + n + 1] = C[c2 + n + 1]! + s21
        C[c2 + n + 2] = C[c2 + n + 2]! + s22
        C[c2 + n + 3] = C[c2 + n + 3]! + s23
        C[c3 + n] = C[c3 + n]! + s30
        C[c3 + n + 1] = C[c3 + n + 1]! + s31
        C[c3 + n + 2] = C[c3 + n + 2]! + s32
        C[c3 + n + 3] = C[c3 + n + 3]! + s33
      } else if (bias !== null) {
        const q0 = bias[biasOff + n]!
        const q1 = bias[biasOff + n + 1]!
        const q2 = bias[biasOff + n + 2]!
        const q3 = bias[biasOff + n + 3]!
        C[c0 + n] = s00 + q0
        C[c0 + n + 1] = s01 + q1
        C[c0 + n + 2] = s02 + q2
        C[c0 + n + 3] = s03 + q3
        C[c1 + n] = s10 + q0
        C[c1 + n + 1] = s11 + q1
        C[c1 + n + 2] = s12 + q2
        C[c1 + n + 3] = s13 + q3
        C[c2 + n] = s20 + q0
        C[c2 + n + 1] = s21 + q1
        C[c2 + n + 2] = s22 + q2
        C[c2 + n + 3] = s23 + q3
        C[c3 + n] = s30 + q0
        C[c3 + n + 1] = s31 + q1
        C[c3 + n + 2] = s32 + q2
        C[c3 + n + 3] = s33 + q3
      } else {
        C[c0 + n] = s00
        C[c0 + n + 1] = s01
        C[c0 + n + 2] = s02
        C[c0 + n + 3] = s03
        C[c1 + n] = s10
        C[c1 + n + 1] = s11
        C[c1 + n + 2] = s12
        C[c1 + n + 3] = s13
        C[c2 + n] = s20
        C[c2 + n + 1] = s21
        C[c2 + n + 2] = s22
        C[c2 + n + 3] = s23
        C[c3 + n] = s30
        C[c3 + n + 1] = s31
        C[c3 + n + 2] = s32
        C[c3 + n + 3] = s33
      }
    }
    for (; n < N; n++) {
      const b0 = bOff + n * ldb
      let s0 = 0
      let s1 = 0
      let s2 = 0
      let s3 = 0
      for (let k = 0; k < K; k++) {
        const w = B[b0 + k]!
        s0 += A[a0 + k]! * w
        s1 += A[a1 + k]! * w
        s2 += A[a2 + k]! * w
        s3 += A[a3 + k]! * w
      }
      if (accumulate) {
        C[c0 + n] = C[c0 + n]! + s0
        C[c1 + n] = C[c1 + n]! + s1
        C[c2 + n] = C[c2 + n]! + s2
        C[c3 + n] = C[c3 + n]! + s3
      } else {
        const q = bias === null ? 0 : bias[biasOff + n]!
        C[c0 + n] = bias === null ? s0 : s0 + q
        C[c1 + n] = bias === null ? s1 : s1 + q
        C[c2 + n] = bias === null ? s2 : s2 + q
        C[c3 + n] = bias === null ? s3 : s3 + q
      }
    }
  }
  for (; m < M; m++) {
    const a0 = aOff + m * lda
    const c0 = cOff + m * ldc
    let n = 0
    for (; n + 4 <= N; n += 4) {
      const b0 = bOff + n * ldb
      const b1 = b0 + ldb
      const b2 = b1 + ldb
      const b3 = b2 + ldb
      let s0 = 0
      let s1 = 0
      let s2 = 0
      let s3 = 0
      for (let k = 0; k < K; k++) {
        const x = A[a0 + k]!
        s0 += x * B[b0 + k]!
        s1 += x * B[b1 + k]!
        s2 += x * B[b2 + k]!
        s3 += x * B[b3 + k]!
      }
      if (accumulate) {
        C[c0 + n] = C[c0 + n]! + s0
        C[c0 + n + 1] = C[c0 + n + 1]! + s1
        C[c0 + n + 2] = C[c0 + n + 2]! + s2
        C[c0 + n + 3] = C[c0 + n + 3]! + s3
      } else if (bias !== null) {
        C[c0 + n] = s0 + bias[biasOff + n]!
        C[c0 + n + 1] = s1 + bias[biasOff + n + 1]!
        C[c0 + n + 2] = s2 + bias[biasOff + n + 2]!
        C[c0 + n + 3] = s3 + bias[biasOff + n + 3]!
      } else {
        C[c0 + n] = s0
        C[c0 + n + 1] = s1
        C[c0 + n + 2] = s2
        C[c0 + n + 3] = s3
      }
    }
    for (; n < N; n++) {
      const b0 = bOff + n * ldb
      let s = 0
      for (let k = 0; k < K; k++) s += A[a0 + k]! * B[b0 + k]!
      if (accumulate) C[c0 + n] = C[c0 + n]! + s
      else C[c0 + n] = bias === null ? s : s + bias[biasOff + n]!
    }
  }
}

/** `dst[j * rows + i] = src[srcOff + i * ld + j]` for i < rows, j < cols: a transposed copy. */
export const transpose = (
  dst: FloatArray,
  src: FloatArray,
  srcOff: number,
  ld: number,
  rows: number,
  cols: number
): void => {
  for (let i = 0; i < rows; i++) {
    const s = srcOff + i * ld
    for (let j = 0; j < cols; j++) dst[j * rows + i] = src[s + j]!
  }
}

/** The epsilon under the root of RMSNorm. */
export const RMS_EPS = 1e-5

/** `y = g * x / rms(x)` for one row; returns 1 / rms(x). */
export const rmsNormRow = (
  y: FloatArray,
  yOff: number,
  x: FloatArray,
  xOff: number,
  g: FloatArray,
  gOff: number,
  d: number
): number => {
  let ss = 0
  for (let e = 0; e < d; e++) {
    const v = x[xOff + e]!
    ss += v * v
  }
  const inv = 1 / Math.sqrt(ss / d + RMS_EPS)
  for (let e = 0; e < d; e++) y[yOff + e] = x[xOff + e]! * inv * g[gOff + e]!
  return inv
}

/** The backward pass of `rmsNormRow`: `dx += ...`, `dg += ...`. */
export const rmsNormRowBackward = (
  dx: FloatArray,
  dxOff: number,
  dy: FloatArray,
  dyOff: number,
  x: FloatArray,
  xOff: number,
  inv: number,
  g: FloatArray,
  gOff: number,
  dg: FloatArray,
  d: number
): void => {
  let dot = 0
  for (let e = 0; e < d; e++) {
    const xhat = x[xOff + e]! * inv
    const dxhat = dy[dyOff + e]! * g[gOff + e]!
    dg[gOff + e] = dg[gOff + e]! + dy[dyOff + e]! * xhat
    dot += dxhat * xhat
  }
  dot /= d
  for (let e = 0; e < d; e++) {
    const xhat = x[xOff + e]! * inv
    dx[dxOff + e] = dx[dxOff + e]! + inv * (dy[dyOff + e]! * g[gOff + e]! - xhat * dot)
  }
}

/** sqrt(2 / pi), the constant of the tanh form of GELU. */
export const GELU_C = Math.sqrt(2 / Math.PI)

/** tanh through one exp (a third faster than Math.tanh in V8; absolute error ~1e-16). */
export const tanh = (z: number): number => 1 - 2 / (Math.exp(2 * z) + 1)

/** `out = gelu(u)` (tanh form) over n elements. */
export const geluRange = (out: FloatArray, u: FloatArray, off: number, n: number): void => {
  for (let i = off; i < off + n; i++) {
    const x = u[i]!
    out[i] = 0.5 * x * (1 + tanh(GELU_C * (x + 0.044715 * x * x * x)))
  }
}

/** `out = gelu(u)` over n elements, keeping the tanh of each in `th` for the backward pass. */
export const geluRangeKeep = (out: FloatArray, th: FloatArray, u: FloatArray, off: number, n: number): void => {
  for (let i = off; i < off + n; i++) {
    const x = u[i]!
    const t = tanh(GELU_C * (x + 0.044715 * x * x * x))
    th[i] = t
    out[i] = 0.5 * x * (1 + t)
  }
}

/** `du = dg * gelu'(u)` over n elements, given the tanh kept by `geluRangeKeep`. */
export const geluBackwardRange = (
  du: FloatArray,
  dg: FloatArray,
  u: FloatArray,
  th: FloatArray,
  off: number,
  n: number
): void => {
  for (let i = off; i < off + n; i++) {
    const x = u[i]!
    const t = th[i]!
    const dt = (1 - t * t) * GELU_C * (1 + 3 * 0.044715 * x * x)
    du[i] = dg[i]! * (0.5 * (1 + t) + 0.5 * x * dt)
  }
}

/**
 * Write `log softmax(logits)` into `out` (both of length n at the given offsets) and return the log of the
 * normaliser: into a Float32Array by the WebAssembly kernel that the training head runs (`logSoftmax` of
 * `wasm/kernels.as`), so that a logprob computed from decoded logits agrees bit for bit with the one training
 * scores; into a Float64Array (or where WebAssembly cannot run) by `logSoftmaxIntoJs`.
 */
export const logSoftmaxInto = (
  out: FloatArray,
  outOff: number,
  logits: ArrayLike<number>,
  logitsOff: number,
  n: number
): number => {
  const W = out instanceof Float32Array ? heap() : undefined
  if (W === undefined) return logSoftmaxIntoJs(out, outOff, logits, logitsOff, n)
  let stage = softmaxStage.get(W)
  if (stage === undefined) {
    stage = new Grow((k) => W.f32(k) ?? new Float32Array(k))
    softmaxStage.set(W, stage)
  }
  const buf = stage.need(n)
  if (!W.has(buf)) return logSoftmaxIntoJs(out, outOff, logits, logitsOff, n)
  for (let i = 0; i < n; i++) buf[i] = logits[logitsOff + i]!
  const lse = W.kernels.logSoftmax(ptr(buf), 0, ptr(buf), n, 0)
  out.set(buf.subarray(0, n), outOff)
  return lse
}

const softmaxStage = new WeakMap<Heap, Grow>()

/** `logSoftmaxInto` in plain loops, sums in doubles: the reference. */
export const logSoftmaxIntoJs = (
  out: FloatArray,
  outOff: number,
  logits: ArrayLike<number>,
  logitsOff: number,
  n: number
): number => {
  let max = Number.NEGATIVE_INFINITY
  for (let i = 0; i < n; i++) {
    const v = logits[logitsOff + i]!
    if (v > max) max = v
  }
  let sum = 0
  for (let i = 0; i < n; i++) sum += Math.exp(logits[logitsOff + i]! - max)
  const lse = max + Math.log(sum)
  for (let i = 0; i < n; i++) out[outOff + i] = logits[logitsOff + i]! - lse
  return lse
}

/** A growable buffer of the policy's float type. */
export class Grow {
  buf: FloatArray
  constructor(private readonly make: (n: number) => FloatArray) {
    this.buf = make(0)
  }
  need(n: number): FloatArray {
    if (this.buf.length < n) this.buf = this.make(Math.max(n, Math.ceil(this.buf.length * 1.5)))
    return this.buf
  }
}

/** A growable Int32Array (made by `make`: in the kernels' memory for a policy that runs them). */
export class GrowInt {
  buf: Int32Array
  constructor(private readonly make: (n: number) => Int32Array = (n) => new Int32Array(n)) {
    this.buf = make(0)
  }
  need(n: number): Int32Array {
    if (this.buf.length < n) this.buf = this.make(Math.max(n, Math.ceil(this.buf.length * 1.5)))
    return this.buf
  }
}
