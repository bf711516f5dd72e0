/**
 * Causal attention of one row of the local engine's policy over the rows in view (its own cache when decoding,
 * its ancestors in a packed training batch). `attendRow` takes the unrolled path for heads of 12 (the shapes the
 * engine ships) and the generic loops otherwise; both sum every score over the head's elements in order and
 * every output element over the rows in view in order, so they give the same bits.
 *
 * @since 0.1.0
 */
import type { FloatArray } from "./Kernels.js"

/**
 * Causal attention of one row over `n` earlier rows (itself first, then its ancestors, nearest first):
 * row `kvRows[kvRowsOff + i]` of `kv` holds its key at `kOff` and its value at `vOff`. Writes the mixed
 * values to `out` and the attention weights (head-major, n per head) to `probs`. Any head width; `acc` and `qs`
 * (d doubles each) are scratch.
 */
export const attendRowGeneric = (
  q: FloatArray,
  qOff: number,
  kv: FloatArray,
  kvStride: number,
  kOff: number,
  vOff: number,
  kvRows: Int32Array,
  kvRowsOff: number,
  n: number,
  out: FloatArray,
  outOff: number,
  probs: FloatArray,
  probsOff: number,
  nHeads: number,
  dh: number,
  acc: Float64Array,
  qs: Float64Array
): void => {
  const scale = 1 / Math.sqrt(dh)
  const d = nHeads * dh
  for (let e = 0; e < d; e++) qs[e] = q[qOff + e]!
  // Scores, one pass over the rows in view (every head of a row at once).
  for (let i = 0; i < n; i++) {
    const base = kvRows[kvRowsOff + i]! * kvStride + kOff
    for (let h = 0; h < nHeads; h++) {
      const o = h * dh
      let s = 0
      for (let e = o; e < o + dh; e++) s += qs[e]! * kv[base + e]!
      probs[probsOff + h * n + i] = s * scale
    }
  }
  // Softmax per head.
  for (let h = 0; h < nHeads; h++) {
    const p = probsOff + h * n
    let max = Number.NEGATIVE_INFINITY
    for (let i = 0; i < n; i++) if (probs[p + i]! > max) max = probs[p + i]!
    let sum = 0
    for (let i = 0; i < n; i++) {
      const w = Math.exp(probs[p + i]! - max)
      probs[p + i] = w
      sum += w
    }
    const inv = 1 / sum
    for (let i = 0; i < n; i++) probs[p + i] = probs[p + i]! * inv
  }
  // Values, one pass over the rows in view.
  for (let e = 0; e < d; e++) acc[e] = 0
  for (let i = 0; i < n; i++) {
    const base = kvRows[kvRowsOff + i]! * kvStride + vOff
    for (let h = 0; h < nHeads; h++) {
      const a = probs[probsOff + h * n + i]!
      const o = h * dh
      for (let e = o; e < o + dh; e++) acc[e] = acc[e]! + a * kv[base + e]!
    }
  }
  for (let e = 0; e < d; e++) out[outOff + e] = acc[e]!
}

/** `attendRowGeneric` for heads of 12: q in registers, each head's outputs summed in registers; the same bits. */
const attendRow12 = (
  q: FloatArray,
  qOff: number,
  kv: FloatArray,
  kvStride: number,
  kOff: number,
  vOff: number,
  kvRows: Int32Array,
  kvRowsOff: number,
  n: number,
  out: FloatArray,
  outOff: number,
  probs: FloatArray,
  probsOff: number,
  nHeads: number
): void => {
  const scale = 1 / Math.sqrt(12)
  for (let h = 0; h < nHeads; h++) {
    const o = h * 12
    const qb = qOff + o
    // Read as doubles, as the generic path's `qs` holds them.
    const q0 = q[qb]!
    const q1 = q[qb + 1]!
    const q2 = q[qb + 2]!
    const q3 = q[qb + 3]!
    const q4 = q[qb + 4]!
    const q5 = q[qb + 5]!
    const q6 = q[qb + 6]!
    const q7 = q[qb + 7]!
    const q8 = q[qb + 8]!
    const q9 = q[qb + 9]!
    const q10 = q[qb + 10]!
    const q11 = q[qb + 11]!
    const p = probsOff + h * n
    for (let i = 0; i < n; i++) {
      const b = kvRows[kvRowsOff + i]! * kvStride + kOff + o
      let s = 0 + q0 * kv[b]!
      s += q1 * kv[b + 1]!
      s += q2 * kv[b + 2]!
      s += q3 * kv[b + 3]!
      s += q4 * kv[b + 4]!
      s += q5 * kv[b + 5]!
      s += q6 * kv[b + 6]!
      s += q7 * kv[b + 7]!
      s += q8 * kv[b + 8]!
      s += q9 * kv[b + 9]!
      s += q10 * kv[b + 10]!
      s += q11 * kv[b + 11]!
      probs[p + i] = s * scale
    }
    let max = Number.NEGATIVE_INFINITY
    for (let i = 0; i < n; i++) if (probs[p + i]! > max) max = probs[p + i]!
    let sum = 0
    for (let i = 0; i < n; i++) {
      const w = Math.exp(probs[p + i]! - max)
      probs[p + i] = w
      sum += w
    }
    const inv = 1 / sum
    for (let i = 0; i < n; i++) probs[p + i] = probs[p + i]! * inv
    let a0 = 0
    let a1 = 0
    let a2 = 0
    let a3 = 0
    let a4 = 0
    let a5 = 0
    let a6 = 0
    let a7 = 0
    let a8 = 0
    let a9 = 0
    let a10 = 0
    let a11 = 0
    for (let i = 0; i < n; i++) {
      const a = probs[p + i]!
      const b = kvRows[kvRowsOff + i]! * kvStride + vOff + o
      a0 += a * kv[b]!
      a1 += a * kv[b + 1]!
      a2 += a * kv[b + 2]!
      a3 += a * kv[b + 3]!
      a4 += a * kv[b + 4]!
      a5 += a * kv[b + 5]!
      a6 += a * kv[b + 6]!
      a7 += a * kv[b + 7]!
      a8 += a * kv[b + 8]!
      a9 += a * kv[b + 9]!
      a10 += a * kv[b + 10]!
      a11 += a * kv[b + 11]!
    }
    const ob = outOff + o
    out[ob] = a0
    out[ob + 1] = a1
    out[ob + 2] = a2
    out[ob + 3] = a3
    out[ob + 4] = a4
    out[ob + 5] = a5
    out[ob + 6] = a6
    out[ob + 7] = a7
    out[ob + 8] = a8
    out[ob + 9] = a9
    out[ob + 10] = a10
    out[ob + 11] = a11
  }
}

/**
 * Causal attention of one row over `n` earlier rows, as `attendRowGeneric` (which see), by its unrolled twin
 * for heads of 12.
 */
export const attendRow = (
  q: FloatArray,
  qOff: number,
  kv: FloatArray,
  kvStride: number,
  kOff: number,
  vOff: number,
  kvRows: Int32Array,
  kvRowsOff: number,
  n: number,
  out: FloatArray,
  outOff: number,
  probs: FloatArray,
  probsOff: number,
  nHeads: number,
  dh: number,
  acc: Float64Array,
  qs: Float64Array
): void => {
  if (dh === 12)
    attendRow12(q, qOff, kv, kvStride, kOff, vOff, kvRows, kvRowsOff, n, out, outOff, probs, probsOff, nHeads)
  else
    attendRowGeneric(
      q,
      qOff,
      kv,
      kvStride,
      kOff,
      vOff,
      kvRows,
      kvRowsOff,
      n,
      out,
      outOff,
      probs,
      probsOff,
      nHeads,
      dh,
      acc,
      qs
    )
}
