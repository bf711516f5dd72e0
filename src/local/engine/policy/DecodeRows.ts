/**
 * The decoding forward pass of the local engine's policy over a range of rows: each row is one token at one
 * position of a sequence being decoded, whose keys and values per layer live in its own cache. `Policy`'s
 * `extend`, `advanceMany` and `extendMany` run it over their rows; it takes its parameters, shape and scratch as
 * arguments, so any holder of the same bits (another thread, say) computes the same rows. A scratch made over the
 * kernels' memory (`DecodeScratch`'s `heap`) runs the WebAssembly kernels, others the JavaScript ones.
 *
 * @since 0.1.0
 */
import { attendRow } from "./Attention.js"
import { type FloatArray, Grow, GrowInt, geluRange, matmulNT, rmsNormRow } from "./Kernels.js"
import type { Layout, PolicyConfig } from "./PolicyConfig.js"
import { type Heap, ptr } from "./Wasm.js"

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
  /** The kernels' memory when this scratch lives in it (the WebAssembly kernels run), else undefined. */
  readonly heap: Heap | undefined
  /** The rows' token ids and positions (WebAssembly path). */
  readonly tokens: GrowInt
  readonly positions: GrowInt
  /** A state's cache staged into the kernels' memory when it lives elsewhere, and logits bound elsewhere. */
  readonly stage: Grow
  readonly stageOut: Grow
  /** The byte addresses of the rows' caches of one layer, and of their targets' `last` (WebAssembly path). */
  readonly caches: GrowInt
  readonly lasts: GrowInt

  /**
   * `make` makes its float buffers; `ints` its Int32 ones (by default in `heap` when there is one, else plain
   * Int32Arrays), so that an owner that gives its blocks back (`Policy.dispose`) knows them.
   */
  constructor(
    config: PolicyConfig,
    make: (n: number) => FloatArray,
    heap?: Heap | undefined,
    ints: ((n: number) => Int32Array) | undefined = heap === undefined
      ? undefined
      : (n: number) => heap.i32(n) ?? outOfMemory()
  ) {
    this.heap = heap
    const grow = () => new Grow(make)
    this.tokens = new GrowInt(ints)
    this.positions = new GrowInt(ints)
    this.caches = new GrowInt(ints)
    this.lasts = new GrowInt(ints)
    this.stage = grow()
    this.stageOut = grow()
    this.x = grow()
    this.a = grow()
    this.qkv = grow()
    this.o = grow()
    this.tmp = grow()
    this.u = grow()
    this.g = grow()
    this.attRow = make(config.nHeads * config.contextLength)
    this.descending = ints === undefined ? new Int32Array(config.contextLength) : ints(config.contextLength)
    for (let i = 0; i < config.contextLength; i++) this.descending[i] = config.contextLength - 1 - i
    this.acc = new Float64Array(config.dModel)
    this.qs = new Float64Array(config.dModel)
    this.f = grow()
  }
}

/** Thrown when the kernels' memory cannot hold a buffer a policy needs. */
export const outOfMemory = (): never => {
  throw new RangeError("the engine's WebAssembly memory is full (2 GiB)")
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
  if (S.heap !== undefined) {
    forwardRowsWasm(config, layout, P, S, S.heap, rowState, rowPos, ids, from, to)
    return
  }
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
  if (S.heap !== undefined) {
    for (let b = 0; b < B; b++) f.set(rowState[from + b]!.last, b * d)
    const inPlace = S.heap.has(out)
    const target = inPlace ? out : S.stageOut.need(B * V)
    S.heap.kernels.matmulNT(
      ptr(target, inPlace ? from * V : 0),
      V,
      ptr(f),
      d,
      ptr(P, layout.wout),
      d,
      B,
      V,
      d,
      ptr(P, layout.bout),
      0
    )
    if (!inPlace) out.set(target.subarray(0, B * V), from * V)
    return
  }
  for (let b = 0; b < B; b++) {
    const last = rowState[from + b]!.last
    for (let e = 0; e < d; e++) f[b * d + e] = last[e]!
  }
  matmulNT(out, from * V, V, f, 0, d, P, layout.wout, d, B, V, d, P, layout.bout, false)
}

/** `forwardRows` on the WebAssembly kernels (see `wasm/kernels.as`): every buffer but a state's in their memory. */
const forwardRowsWasm = (
  config: PolicyConfig,
  layout: Layout,
  P: FloatArray,
  S: DecodeScratch,
  W: Heap,
  rowState: ReadonlyArray<RowTarget | undefined>,
  rowPos: Int32Array,
  ids: ArrayLike<number>,
  from: number,
  to: number
): void => {
  const k = W.kernels
  const B = to - from
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
  const tokens = S.tokens.need(B)
  const positions = S.positions.need(B)
  for (let b = 0; b < B; b++) {
    tokens[b] = ids[from + b]!
    positions[b] = rowPos[from + b]!
  }
  k.embed(ptr(x), ptr(P, L.tokEmb), ptr(P, L.posEmb), ptr(tokens), ptr(positions), B, d)
  const top = config.contextLength - 1
  const caches = S.caches.need(B)
  for (let l = 0; l < config.nLayers; l++) {
    const w = L.layers[l]!
    k.rmsNormRows(ptr(a), ptr(x), ptr(P, w.ln1), B, d, 0, 0)
    k.matmulNT(ptr(qkv), 3 * d, ptr(a), d, ptr(P, w.wqkv), d, B, 3 * d, d, 0, 0)
    // Every row's cache in the kernels' memory (as a policy on them makes it): one call for the layer's rows.
    let inHeap = true
    for (let b = 0; b < B && inHeap; b++) {
      const kv = rowState[from + b]!.kv[l]!
      if (W.has(kv)) caches[b] = kv.byteOffset
      else inHeap = false
    }
    if (inHeap) {
      k.attendRows(ptr(qkv), ptr(caches), ptr(positions), B, ptr(S.descending), top, ptr(o), ptr(S.attRow), H, dh)
    } else {
      attendStaged(S, W, rowState, rowPos, qkv, o, l, from, B, d, H, dh, top)
    }
    k.matmulNT(ptr(tmp), d, ptr(o), d, ptr(P, w.wo), d, B, d, d, 0, 0)
    k.add(ptr(x), ptr(x), ptr(tmp), B * d)
    k.rmsNormRows(ptr(a), ptr(x), ptr(P, w.ln2), B, d, 0, 0)
    k.matmulNT(ptr(u), F, ptr(a), d, ptr(P, w.w1), d, B, F, d, ptr(P, w.b1), 0)
    k.gelu(ptr(g), 0, ptr(u), B * F)
    k.matmulNT(ptr(tmp), d, ptr(g), F, ptr(P, w.w2), F, B, d, F, ptr(P, w.b2), 0)
    k.add(ptr(x), ptr(x), ptr(tmp), B * d)
  }
  const lasts = S.lasts.need(B)
  let inHeap = true
  for (let b = 0; b < B && inHeap; b++) {
    const last = rowState[from + b]!.last
    if (W.has(last)) lasts[b] = last.byteOffset
    else inHeap = false
  }
  if (inHeap) {
    k.rmsNormTo(ptr(lasts), ptr(x), ptr(P, L.lnF), B, d)
    return
  }
  for (let b = 0; b < B; b++) {
    const last = rowState[from + b]!.last
    if (W.has(last)) k.rmsNormRows(ptr(last), ptr(x, b * d), ptr(P, L.lnF), 1, d, 0, 0)
    else {
      k.rmsNormRows(ptr(a), ptr(x, b * d), ptr(P, L.lnF), 1, d, 0, 0)
      last.set(a.subarray(0, d))
    }
  }
}

/**
 * The attention of a layer's rows when a cache lives outside the kernels' memory (it was full): row by row, each
 * cache staged into scratch for the step.
 */
const attendStaged = (
  S: DecodeScratch,
  W: Heap,
  rowState: ReadonlyArray<RowTarget | undefined>,
  rowPos: Int32Array,
  qkv: FloatArray,
  o: FloatArray,
  l: number,
  from: number,
  B: number,
  d: number,
  H: number,
  dh: number,
  top: number
): void => {
  const k = W.kernels
  for (let b = 0; b < B; b++) {
    const kv = rowState[from + b]!.kv[l]!
    const pos = rowPos[from + b]!
    kv.set(qkv.subarray(b * 3 * d + d, (b + 1) * 3 * d), pos * 2 * d)
    let cache = kv
    if (!W.has(kv)) {
      cache = S.stage.need((pos + 1) * 2 * d)
      cache.set(kv.subarray(0, (pos + 1) * 2 * d))
    }
    // Rows pos, pos - 1, ..., 0: a window of the descending index array.
    k.attendRow(
      ptr(qkv, b * 3 * d),
      ptr(cache),
      2 * d,
      0,
      d,
      ptr(S.descending, top - pos),
      pos + 1,
      ptr(o, b * d),
      ptr(S.attRow),
      H,
      dh
    )
  }
}
