/**
 * The decoding forward pass of the local engine's policy over a range of rows: each row is one token at one
 * position of a sequence being decoded, whose keys and values per layer live in its own cache. `Policy`'s
 * `extend`, `advanceMany` and `extendMany` run it over their rows; it takes its parameters, shape and scratch as
 * arguments, so any holder of the same bits (another thread, say) computes the same rows.
 *
 * @since 0.1.0
 */
import { attendRow } from "./Attention.js"
import { type FloatArray, Grow, geluRange, matmulNT, rmsNormRow } from "./Kernels.js"
import type { Layout, PolicyConfig } from "./PolicyConfig.js"

/** What a decoding row reads and writes of its sequence: its caches (per layer) and its last hidden state. */
export interface RowTarget {
  /** Per layer, rows of `[key | value]` (2 x dModel) for every position. */
  readonly kv: ReadonlyArray<FloatArray>
  /** The final-normed hidden state of the sequence's last token. */
  readonly last: FloatArray
}

/** The scratch buffers of the decoding forward pass (one set per policy). */
export class DecodeScratch {
  readonly x: Grow
  readonly a: Grow
  readonly qkv: Grow
  readonly o: Grow
  readonly tmp: Grow
  readonly u: Grow
  readonly g: Grow
  readonly attRow: FloatArray
  readonly descending: Int32Array
  readonly acc: Float64Array
  readonly qs: Float64Array
  /** The final hidden states of the rows whose logits are computed (`headRows`). */
  readonly f: Grow

  constructor(config: PolicyConfig, make: (n: number) => FloatArray) {
    const grow = () => new Grow(make)
    this.x = grow()
    this.a = grow()
    this.qkv = grow()
    this.o = grow()
    this.tmp = grow()
    this.u = grow()
    this.g = grow()
    this.attRow = make(config.nHeads * config.contextLength)
    this.descending = new Int32Array(config.contextLength)
    for (let i = 0; i < config.contextLength; i++) this.descending[i] = config.contextLength - 1 - i
    this.acc = new Float64Array(config.dModel)
    this.qs = new Float64Array(config.dModel)
    this.f = grow()
  }
}

/**
 * The forward pass of rows `from .. to - 1`: row r is token `ids[r]` (checked by the caller) at position
 * `rowPos[r]` of `rowState[r]`, whose cache holds every earlier position or gets it from an earlier row of this
 * range (the rows of one sequence are consecutive and in order). Writes each row's keys and values into its
 * cache and its final hidden state into the target's `last`.
 */
export const forwardRows = (
  config: PolicyConfig,
  layout: Layout,
  P: FloatArray,
  S: DecodeScratch,
  rowState: ReadonlyArray<RowTarget | undefined>,
  rowPos: Int32Array,
  ids: ArrayLike<number>,
  from: number,
  to: number
): void => {
  const B = to - from
  if (B <= 0) return
  const d = config.dModel
  const F = config.dFf
  const H = config.nHeads
  const dh = d / H
  const L = layout
  const x = S.x.need(B * d)
  const a = S.a.need(B * d)
  const qkv = S.qkv.need(B * 3 * d)
  const o = S.o.need(B * d)
  const tmp = S.tmp.need(B * d)
  const u = S.u.need(B * F)
  const g = S.g.need(B * F)
  for (let b = 0; b < B; b++) {
    const te = L.tokEmb + ids[from + b]! * d
    const pe = L.posEmb + rowPos[from + b]! * d
    for (let e = 0; e < d; e++) x[b * d + e] = P[te + e]! + P[pe + e]!
  }
  const desc = S.descending
  const top = config.contextLength - 1
  for (let l = 0; l < config.nLayers; l++) {
    const w = L.layers[l]!
    for (let b = 0; b < B; b++) rmsNormRow(a, b * d, x, b * d, P, w.ln1, d)
    matmulNT(qkv, 0, 3 * d, a, 0, d, P, w.wqkv, d, B, 3 * d, d, null, 0, false)
    for (let b = 0; b < B; b++) {
      const kv = rowState[from + b]!.kv[l]!
      const base = rowPos[from + b]! * 2 * d
      for (let e = 0; e < 2 * d; e++) kv[base + e] = qkv[b * 3 * d + d + e]!
    }
    for (let b = 0; b < B; b++) {
      const pos = rowPos[from + b]!
      // Rows pos, pos - 1, ..., 0: a window of the descending index array.
      attendRow(
        qkv,
        b * 3 * d,
        rowState[from + b]!.kv[l]!,
        2 * d,
        0,
        d,
        desc,
        top - pos,
        pos + 1,
        o,
        b * d,
        S.attRow,
        0,
        H,
        dh,
        S.acc,
        S.qs
      )
    }
    matmulNT(tmp, 0, d, o, 0, d, P, w.wo, d, B, d, d, null, 0, false)
    for (let i = 0; i < B * d; i++) x[i] = x[i]! + tmp[i]!
    for (let b = 0; b < B; b++) rmsNormRow(a, b * d, x, b * d, P, w.ln2, d)
    matmulNT(u, 0, F, a, 0, d, P, w.w1, d, B, F, d, P, w.b1, false)
    geluRange(g, u, 0, B * F)
    matmulNT(tmp, 0, d, g, 0, F, P, w.w2, F, B, d, F, P, w.b2, false)
    for (let i = 0; i < B * d; i++) x[i] = x[i]! + tmp[i]!
  }
  for (let b = 0; b < B; b++) rmsNormRow(rowState[from + b]!.last, 0, x, b * d, P, L.lnF, d)
}

/**
 * The estimated cost of a decoding row at position `pos`, in multiply-adds: the matrix products touch every
 * block weight once, attention reads `pos + 1` cached keys and values per layer.
 */
export const rowCost = (config: PolicyConfig, pos: number): number =>
  config.nLayers * (4 * config.dModel * config.dModel + 2 * config.dModel * config.dFf + 2 * config.dModel * (pos + 1))

/**
 * The next-token logits of rows `from .. to - 1`: row r's, from `rowState[r].last` (a state holding at least one
 * token), written to `out` at `r * vocabSize`. Each logit is summed in the same order whatever the rows computed
 * together.
 */
export const headRows = (
  config: PolicyConfig,
  layout: Layout,
  P: FloatArray,
  S: DecodeScratch,
  rowState: ReadonlyArray<RowTarget | undefined>,
  out: FloatArray,
  from: number,
  to: number
): void => {
  const B = to - from
  if (B <= 0) return
  const d = config.dModel
  const V = config.vocabSize
  const f = S.f.need(B * d)
  for (let b = 0; b < B; b++) {
    const last = rowState[from + b]!.last
    for (let e = 0; e < d; e++) f[b * d + e] = last[e]!
  }
  matmulNT(out, from * V, V, f, 0, d, P, layout.wout, d, B, V, d, P, layout.bout, false)
}
