/**
 * Training batches of the local engine's policy: the forward pass over whole sequences packed as a prefix tree
 * (sequences that share a prefix share its rows: every rollout of a group shares its prompt, so a group of
 * eight rollouts costs one prompt plus eight completions; each row attends to its ancestors in the tree), and
 * its backward pass into the policy's gradient buffer. Activations live in buffers that grow with the largest
 * batch seen; the hot loops allocate nothing. Over the kernels' memory (a policy that runs the WebAssembly
 * kernels) every pass runs them, the backward pass's products as `A B` and `A^T B` without transposes; otherwise
 * the JavaScript loops of `Kernels.ts` run, the backward pass transposing operands into scratch so that every
 * product uses their one kernel.
 *
 * @since 0.1.0
 */
import { attendRow } from "./Attention.js"
import {
  type FloatArray,
  Grow,
  GrowInt,
  geluBackwardRange,
  geluRangeKeep,
  matmulNT,
  rmsNormRow,
  rmsNormRowBackward,
  transpose
} from "./Kernels.js"
import type { Layout, PolicyConfig } from "./PolicyConfig.js"
import { type Heap, ptr } from "./Wasm.js"

/** What `forwardBatch` computed for each sequence. */
export interface BatchOutput {
  /** Per sequence, the logprob of each token where it was asked for, NaN elsewhere. */
  readonly logprobs: ReadonlyArray<Float64Array>
  /** Per sequence, the entropy of the distribution each asked-for token was drawn from, NaN elsewhere. */
  readonly entropies: ReadonlyArray<Float64Array>
  /** The distinct rows (tokens) the batch packed into after sharing prefixes. */
  readonly rows: number
  /** The tokens of all the sequences (before sharing). */
  readonly tokens: number
}

/** The activations of one block, for `rows` rows. */
interface LayerActs {
  readonly hIn: Grow
  readonly inv1: Grow
  readonly a1: Grow
  readonly qkv: Grow
  readonly att: Grow
  readonly o: Grow
  readonly hMid: Grow
  readonly inv2: Grow
  readonly a2: Grow
  readonly u: Grow
  readonly th: Grow
  readonly g: Grow
}

/**
 * The training workspace of one policy: `forward` over a packed batch, keeping its activations, then
 * `backward` adding the gradient of a loss of its logprobs to `grads`. `Policy.forwardBatch` and
 * `Policy.backwardBatch` are these.
 */
export class PackedBatch {
  private readonly acts: ReadonlyArray<LayerActs>
  private readonly ws: Record<
    | "hFinal"
    | "invF"
    | "f"
    | "logits"
    | "probs"
    | "dH"
    | "dTmp"
    | "dA"
    | "dQkv"
    | "dO"
    | "dU"
    | "dG"
    | "tA"
    | "tB"
    | "tW",
    Grow
  >
  private readonly rowToken: GrowInt
  private readonly rowParent = new GrowInt()
  private readonly rowPos: GrowInt
  private readonly ancOff = new GrowInt()
  private readonly ancRows: GrowInt
  private readonly logitRow: GrowInt
  private readonly entrySeq = new GrowInt()
  private readonly entryPos = new GrowInt()
  private readonly entryLogit = new GrowInt()
  private readonly entryToken = new GrowInt()
  /** The entropy of each logit row, and the scale of each row's probabilities in d(logits) (WebAssembly path). */
  private readonly entropy: Grow
  private readonly rowScale: Grow
  private readonly acc: Float64Array
  private readonly qs: Float64Array
  private readonly dQs: Float64Array
  private readonly dAtt: Float64Array
  private gSum = new Float64Array(0)
  private batchRows = 0
  private batchLogitRows = 0
  private batchEntries = 0
  private batchSeqLengths: Array<number> = []
  private batchReady = false

  constructor(
    private readonly config: PolicyConfig,
    private readonly layout: Layout,
    private readonly params: FloatArray,
    private readonly grads: FloatArray,
    make: (n: number) => FloatArray,
    private readonly checkLength: (n: number) => void,
    private readonly heap?: Heap | undefined,
    ints?: ((n: number) => Int32Array) | undefined
  ) {
    this.rowToken = new GrowInt(ints)
    this.rowPos = new GrowInt(ints)
    this.ancRows = new GrowInt(ints)
    this.logitRow = new GrowInt(ints)
    this.entropy = new Grow(make)
    this.rowScale = new Grow(make)
    const d = config.dModel
    this.acc = new Float64Array(d)
    this.qs = new Float64Array(d)
    this.dQs = new Float64Array(d)
    const grow = () => new Grow(make)
    this.acts = Array.from({ length: config.nLayers }, () => ({
      hIn: grow(),
      inv1: grow(),
      a1: grow(),
      qkv: grow(),
      att: grow(),
      o: grow(),
      hMid: grow(),
      inv2: grow(),
      a2: grow(),
      u: grow(),
      th: grow(),
      g: grow()
    }))
    this.ws = {
      hFinal: grow(),
      invF: grow(),
      f: grow(),
      logits: grow(),
      probs: grow(),
      dH: grow(),
      dTmp: grow(),
      dA: grow(),
      dQkv: grow(),
      dO: grow(),
      dU: grow(),
      dG: grow(),
      tA: grow(),
      tB: grow(),
      tW: grow()
    }
    this.dAtt = new Float64Array(config.nHeads * config.contextLength)
  }

  /**
   * The forward pass over a batch of whole sequences, packed as a prefix tree. `want[s][t] = 1` asks for
   * the logprob of token t of sequence s (t >= 1). Keeps the activations for `backward` unless
   * `keepActivations` is false; the next `forward` replaces them.
   */
  forward(
    sequences: ReadonlyArray<ArrayLike<number>>,
    want: ReadonlyArray<ArrayLike<number>>,
    options: { readonly keepActivations?: boolean | undefined } = {}
  ): BatchOutput {
    const c = this.config
    const d = c.dModel
    const F = c.dFf
    const V = c.vocabSize
    const H = c.nHeads
    const dh = d / H
    const P = this.params
    const L = this.layout
    this.batchReady = false

    // 1. Pack the sequences into a prefix tree: one row per distinct (parent row, token).
    let tokens = 0
    for (const s of sequences) {
      this.checkLength(s.length)
      tokens += s.length
    }
    const rowToken = this.rowToken.need(tokens)
    const rowParent = this.rowParent.need(tokens)
    const rowPos = this.rowPos.need(tokens)
    const children = new Map<number, number>()
    const rowOf: Array<Int32Array> = []
    let R = 0
    for (const s of sequences) {
      const rows = new Int32Array(s.length)
      let parent = -1
      for (let t = 0; t < s.length; t++) {
        const id = s[t]!
        if (!Number.isInteger(id) || id < 0 || id >= V) throw new RangeError(`token id ${id} out of range`)
        const key = (parent + 1) * V + id
        let row = children.get(key)
        if (row === undefined) {
          row = R++
          children.set(key, row)
          rowToken[row] = id
          rowParent[row] = parent
          rowPos[row] = t
        }
        rows[t] = row
        parent = row
      }
      rowOf.push(rows)
    }
    // Ancestor lists (self first), shared by every layer and the backward pass.
    const ancOff = this.ancOff.need(R + 1)
    let total = 0
    for (let r = 0; r < R; r++) {
      ancOff[r] = total
      total += rowPos[r]! + 1
    }
    ancOff[R] = total
    const ancRows = this.ancRows.need(total)
    for (let r = 0; r < R; r++) {
      let j = r
      let i = ancOff[r]!
      while (j >= 0) {
        ancRows[i++] = j
        j = rowParent[j]!
      }
    }
    // The rows whose next-token distribution is needed, and the entries (sequence, t) reading them.
    const logitRow = this.logitRow.need(R)
    const logitIndex = new Int32Array(R).fill(-1)
    let NL = 0
    // At most `tokens` entries: (sequence, position) of each asked-for token, the logit row it reads, the token.
    const entrySeq = this.entrySeq.need(tokens)
    const entryPos = this.entryPos.need(tokens)
    const entryLogit = this.entryLogit.need(tokens)
    const entryToken = this.entryToken.need(tokens)
    let NE = 0
    for (let s = 0; s < sequences.length; s++) {
      const w = want[s]!
      const seq = sequences[s]!
      for (let t = 1; t < seq.length; t++) {
        if (w[t] !== 1) continue
        const pred = rowOf[s]![t - 1]!
        if (logitIndex[pred] === -1) {
          logitIndex[pred] = NL
          logitRow[NL++] = pred
        }
        entrySeq[NE] = s
        entryPos[NE] = t
        entryLogit[NE] = logitIndex[pred]!
        entryToken[NE] = seq[t]!
        NE++
      }
    }

    if (this.heap !== undefined) {
      const entropyOf = this.forwardWasm(this.heap, R, NL, total)
      return this.finishForward(sequences, entropyOf, R, NL, NE, tokens, options)
    }

    // 2. Embeddings.
    let h = this.acts.length > 0 ? this.acts[0]!.hIn.need(R * d) : this.ws.hFinal.need(R * d)
    for (let r = 0; r < R; r++) {
      const te = L.tokEmb + rowToken[r]! * d
      const pe = L.posEmb + rowPos[r]! * d
      for (let e = 0; e < d; e++) h[r * d + e] = P[te + e]! + P[pe + e]!
    }

    // 3. Blocks.
    for (let l = 0; l < c.nLayers; l++) {
      const w = L.layers[l]!
      const A = this.acts[l]!
      const inv1 = A.inv1.need(R)
      const a1 = A.a1.need(R * d)
      for (let r = 0; r < R; r++) inv1[r] = rmsNormRow(a1, r * d, h, r * d, P, w.ln1, d)
      const qkv = A.qkv.need(R * 3 * d)
      matmulNT(qkv, 0, 3 * d, a1, 0, d, P, w.wqkv, d, R, 3 * d, d, null, 0, false)
      const att = A.att.need(total * H)
      const o = A.o.need(R * d)
      for (let r = 0; r < R; r++) {
        const n = rowPos[r]! + 1
        attendRow(
          qkv,
          r * 3 * d,
          qkv,
          3 * d,
          d,
          2 * d,
          ancRows,
          ancOff[r]!,
          n,
          o,
          r * d,
          att,
          ancOff[r]! * H,
          H,
          dh,
          this.acc,
          this.qs
        )
      }
      const hMid = A.hMid.need(R * d)
      matmulNT(hMid, 0, d, o, 0, d, P, w.wo, d, R, d, d, null, 0, false)
      for (let i = 0; i < R * d; i++) hMid[i] = h[i]! + hMid[i]!
      const inv2 = A.inv2.need(R)
      const a2 = A.a2.need(R * d)
      for (let r = 0; r < R; r++) inv2[r] = rmsNormRow(a2, r * d, hMid, r * d, P, w.ln2, d)
      const u = A.u.need(R * F)
      matmulNT(u, 0, F, a2, 0, d, P, w.w1, d, R, F, d, P, w.b1, false)
      const g = A.g.need(R * F)
      geluRangeKeep(g, A.th.need(R * F), u, 0, R * F)
      const next = l + 1 < c.nLayers ? this.acts[l + 1]!.hIn.need(R * d) : this.ws.hFinal.need(R * d)
      matmulNT(next, 0, d, g, 0, F, P, w.w2, F, R, d, F, P, w.b2, false)
      for (let i = 0; i < R * d; i++) next[i] = hMid[i]! + next[i]!
      h = next
    }

    // 4. Head, on the rows whose distribution is needed.
    const invF = this.ws.invF.need(NL)
    const f = this.ws.f.need(NL * d)
    for (let i = 0; i < NL; i++) invF[i] = rmsNormRow(f, i * d, h, logitRow[i]! * d, P, L.lnF, d)
    const logits = this.ws.logits.need(NL * V)
    matmulNT(logits, 0, V, f, 0, d, P, L.wout, d, NL, V, d, P, L.bout, false)
    const probs = this.ws.probs.need(NL * V)
    const entropyOf = new Float64Array(NL)
    for (let i = 0; i < NL; i++) {
      // In place: logits -> logprobs (the same operations as logSoftmaxInto); probs kept for the backward pass.
      const o = i * V
      let max = Number.NEGATIVE_INFINITY
      for (let v = 0; v < V; v++) if (logits[o + v]! > max) max = logits[o + v]!
      let sum = 0
      for (let v = 0; v < V; v++) {
        const e = Math.exp(logits[o + v]! - max)
        probs[o + v] = e
        sum += e
      }
      const lse = max + Math.log(sum)
      const inv = 1 / sum
      let ent = 0
      for (let v = 0; v < V; v++) {
        const lp = logits[o + v]! - lse
        logits[o + v] = lp
        const p = probs[o + v]! * inv
        probs[o + v] = p
        ent -= p * lp
      }
      entropyOf[i] = ent
    }
    return this.finishForward(sequences, entropyOf, R, NL, NE, tokens, options)
  }

  /** The logprobs and entropies asked for, from the head's logprobs (in `logits`); keeps the batch's shape. */
  private finishForward(
    sequences: ReadonlyArray<ArrayLike<number>>,
    entropyOf: ArrayLike<number>,
    R: number,
    NL: number,
    NE: number,
    tokens: number,
    options: { readonly keepActivations?: boolean | undefined }
  ): BatchOutput {
    const V = this.config.vocabSize
    const logits = this.ws.logits.buf
    const entrySeq = this.entrySeq.buf
    const entryPos = this.entryPos.buf
    const entryLogit = this.entryLogit.buf
    const entryToken = this.entryToken.buf
    const logprobs = sequences.map((s) => new Float64Array(s.length).fill(Number.NaN))
    const entropies = sequences.map((s) => new Float64Array(s.length).fill(Number.NaN))
    for (let i = 0; i < NE; i++) {
      logprobs[entrySeq[i]!]![entryPos[i]!] = logits[entryLogit[i]! * V + entryToken[i]!]!
      entropies[entrySeq[i]!]![entryPos[i]!] = entropyOf[entryLogit[i]!]!
    }
    this.batchRows = R
    this.batchLogitRows = NL
    this.batchEntries = NE
    this.batchSeqLengths = sequences.map((s) => s.length)
    this.batchReady = options.keepActivations ?? true
    return { logprobs, entropies, rows: R, tokens }
  }

  /**
   * The backward pass of the last `forwardBatch`: given d(loss)/d(logprob) for every asked-for token (same

   */
  backward(dLogprobs: ReadonlyArray<ArrayLike<number>>): void {
    if (!this.batchReady) throw new Error("backwardBatch: no forwardBatch with kept activations to differentiate")
    if (dLogprobs.length !== this.batchSeqLengths.length) throw new RangeError("backwardBatch: wrong batch size")
    const c = this.config
    const d = c.dModel
    const F = c.dFf
    const V = c.vocabSize
    const H = c.nHeads
    const dh = d / H
    const P = this.params
    const G = this.grads
    const L = this.layout
    const R = this.batchRows
    const NL = this.batchLogitRows
    const NE = this.batchEntries
    const entrySeq = this.entrySeq.buf
    const entryPos = this.entryPos.buf
    const entryLogit = this.entryLogit.buf
    const entryToken = this.entryToken.buf
    const logitRow = this.logitRow.buf
    const rowPos = this.rowPos.buf
    const rowToken = this.rowToken.buf
    const ancOff = this.ancOff.buf
    const ancRows = this.ancRows.buf
    const ws = this.ws
    if (this.heap !== undefined) {
      this.backwardWasm(this.heap, dLogprobs)
      return
    }

    // 1. d(loss)/d(logits) = sum over entries e of g_e (onehot(token_e) - p), where logits hold logprobs.
    const probs = ws.probs.buf
    if (this.gSum.length < NL) this.gSum = new Float64Array(Math.ceil(NL * 1.5))
    const gSum = this.gSum
    gSum.fill(0, 0, NL)
    for (let i = 0; i < NE; i++) {
      const g = dLogprobs[entrySeq[i]!]![entryPos[i]!]!
      if (g !== 0) gSum[entryLogit[i]!] = gSum[entryLogit[i]!]! + g
    }
    const dLogits = ws.dTmp.need(NL * V)
    for (let i = 0; i < NL; i++) {
      const s = gSum[i]!
      for (let v = 0; v < V; v++) dLogits[i * V + v] = -s * probs[i * V + v]!
    }
    for (let i = 0; i < NE; i++) {
      const g = dLogprobs[entrySeq[i]!]![entryPos[i]!]!
      if (g !== 0) dLogits[entryLogit[i]! * V + entryToken[i]!] = dLogits[entryLogit[i]! * V + entryToken[i]!]! + g
    }
    // Head: dWout += dLogits^T f, dbout += sum, df = dLogits Wout.
    const f = ws.f.buf
    const tA = ws.tA.need(Math.max(V, 3 * d, F) * Math.max(NL, R))
    const tB = ws.tB.need(Math.max(d, F) * Math.max(NL, R))
    transpose(tA, dLogits, 0, V, NL, V)
    transpose(tB, f, 0, d, NL, d)
    matmulNT(G, L.wout, d, tA, 0, NL, tB, 0, NL, V, d, NL, null, 0, true)
    for (let i = 0; i < NL; i++) for (let v = 0; v < V; v++) G[L.bout + v] = G[L.bout + v]! + dLogits[i * V + v]!
    const tW = ws.tW.need(Math.max(V * d, 3 * d * d, F * d))
    transpose(tW, P, L.wout, d, V, d)
    const dF = ws.dA.need(Math.max(NL, R) * Math.max(d, F))
    matmulNT(dF, 0, d, dLogits, 0, V, tW, 0, V, NL, d, V, null, 0, false)
    const dH = ws.dH.need(R * d)
    dH.fill(0, 0, R * d)
    const hFinal = ws.hFinal.buf
    const invF = ws.invF.buf
    for (let i = 0; i < NL; i++) {
      const r = logitRow[i]!
      rmsNormRowBackward(dH, r * d, dF, i * d, hFinal, r * d, invF[i]!, P, L.lnF, G, d)
    }

    // 2. Blocks, last to first. dH holds d(loss)/d(block output).
    for (let l = c.nLayers - 1; l >= 0; l--) {
      const w = L.layers[l]!
      const A = this.acts[l]!
      // MLP: out = hMid + W2 gelu(W1 a2 + b1) + b2.
      const g = A.g.buf
      const u = A.u.buf
      transpose(tA, dH, 0, d, R, d)
      transpose(tB, g, 0, F, R, F)
      matmulNT(G, w.w2, F, tA, 0, R, tB, 0, R, d, F, R, null, 0, true)
      for (let r = 0; r < R; r++) for (let e = 0; e < d; e++) G[w.b2 + e] = G[w.b2 + e]! + dH[r * d + e]!
      transpose(tW, P, w.w2, F, d, F)
      const dG = ws.dG.need(R * F)
      matmulNT(dG, 0, F, dH, 0, d, tW, 0, d, R, F, d, null, 0, false)
      const dU = ws.dU.need(R * F)
      geluBackwardRange(dU, dG, u, A.th.buf, 0, R * F)
      const a2 = A.a2.buf
      transpose(tA, dU, 0, F, R, F)
      transpose(tB, a2, 0, d, R, d)
      matmulNT(G, w.w1, d, tA, 0, R, tB, 0, R, F, d, R, null, 0, true)
      for (let r = 0; r < R; r++) for (let e = 0; e < F; e++) G[w.b1 + e] = G[w.b1 + e]! + dU[r * F + e]!
      transpose(tW, P, w.w1, d, F, d)
      const dA = ws.dA.need(R * d)
      matmulNT(dA, 0, d, dU, 0, F, tW, 0, F, R, d, F, null, 0, false)
      // dH (residual) + norm2 backward -> d(hMid), in place in dH.
      const hMid = A.hMid.buf
      const inv2 = A.inv2.buf
      for (let r = 0; r < R; r++) rmsNormRowBackward(dH, r * d, dA, r * d, hMid, r * d, inv2[r]!, P, w.ln2, G, d)
      // Attention output: hMid = hIn + Wo o.
      const o = A.o.buf
      transpose(tA, dH, 0, d, R, d)
      transpose(tB, o, 0, d, R, d)
      matmulNT(G, w.wo, d, tA, 0, R, tB, 0, R, d, d, R, null, 0, true)
      transpose(tW, P, w.wo, d, d, d)
      const dO = ws.dO.need(R * d)
      matmulNT(dO, 0, d, dH, 0, d, tW, 0, d, R, d, d, null, 0, false)
      // Attention.
      const qkv = A.qkv.buf
      const att = A.att.buf
      const dQkv = ws.dQkv.need(R * 3 * d)
      dQkv.fill(0, 0, R * 3 * d)
      const scale = 1 / Math.sqrt(dh)
      const dAtt = this.dAtt
      const dOs = this.acc
      const qs = this.qs
      const dQs = this.dQs
      for (let r = 0; r < R; r++) {
        const n = rowPos[r]! + 1
        const aOff = ancOff[r]!
        const p0 = aOff * H
        const qb = r * 3 * d
        // dO, q and the running dQ of the row, in double scratch.
        for (let e = 0; e < d; e++) {
          dOs[e] = dO[r * d + e]!
          qs[e] = qkv[qb + e]!
          dQs[e] = 0
        }
        // dA = dO . v per head and row in view; dV += a dO.
        for (let i = 0; i < n; i++) {
          const vb = ancRows[aOff + i]! * 3 * d + 2 * d
          for (let hh = 0; hh < H; hh++) {
            const a = att[p0 + hh * n + i]!
            const o = hh * dh
            let s = 0
            for (let e = o; e < o + dh; e++) {
              s += dOs[e]! * qkv[vb + e]!
              dQkv[vb + e] = dQkv[vb + e]! + a * dOs[e]!
            }
            dAtt[hh * n + i] = s
          }
        }
        // Softmax backward: dS = a (dA - sum a dA), folded with the score scale.
        for (let hh = 0; hh < H; hh++) {
          let dot = 0
          for (let i = 0; i < n; i++) dot += att[p0 + hh * n + i]! * dAtt[hh * n + i]!
          for (let i = 0; i < n; i++) dAtt[hh * n + i] = att[p0 + hh * n + i]! * (dAtt[hh * n + i]! - dot) * scale
        }
        // dQ += dS k, dK += dS q.
        for (let i = 0; i < n; i++) {
          const kb = ancRows[aOff + i]! * 3 * d + d
          for (let hh = 0; hh < H; hh++) {
            const ds = dAtt[hh * n + i]!
            const o = hh * dh
            for (let e = o; e < o + dh; e++) {
              dQs[e] = dQs[e]! + ds * qkv[kb + e]!
              dQkv[kb + e] = dQkv[kb + e]! + ds * qs[e]!
            }
          }
        }
        for (let e = 0; e < d; e++) dQkv[qb + e] = dQkv[qb + e]! + dQs[e]!
      }
      const a1 = A.a1.buf
      transpose(tA, dQkv, 0, 3 * d, R, 3 * d)
      transpose(tB, a1, 0, d, R, d)
      matmulNT(G, w.wqkv, d, tA, 0, R, tB, 0, R, 3 * d, d, R, null, 0, true)
      transpose(tW, P, w.wqkv, d, 3 * d, d)
      matmulNT(dA, 0, d, dQkv, 0, 3 * d, tW, 0, 3 * d, R, d, 3 * d, null, 0, false)
      const hIn = A.hIn.buf
      const inv1 = A.inv1.buf
      for (let r = 0; r < R; r++) rmsNormRowBackward(dH, r * d, dA, r * d, hIn, r * d, inv1[r]!, P, w.ln1, G, d)
    }

    // 3. Embeddings.
    for (let r = 0; r < R; r++) {
      const te = L.tokEmb + rowToken[r]! * d
      const pe = L.posEmb + rowPos[r]! * d
      for (let e = 0; e < d; e++) {
        const v = dH[r * d + e]!
        G[te + e] = G[te + e]! + v
        G[pe + e] = G[pe + e]! + v
      }
    }
  }

  /**
   * The forward pass's layers and head on the WebAssembly kernels, over the packed rows (`forward` packed them);
   * returns the entropy of each logit row.
   */
  private forwardWasm(W: Heap, R: number, NL: number, total: number): Float32Array {
    const k = W.kernels
    const c = this.config
    const d = c.dModel
    const F = c.dFf
    const V = c.vocabSize
    const H = c.nHeads
    const dh = d / H
    const P = this.params
    const L = this.layout
    const rowPos = this.rowPos.buf
    const ancOff = this.ancOff.buf
    const ancRows = this.ancRows.buf
    let h = this.acts.length > 0 ? this.acts[0]!.hIn.need(R * d) : this.ws.hFinal.need(R * d)
    k.embed(ptr(h), ptr(P, L.tokEmb), ptr(P, L.posEmb), ptr(this.rowToken.buf), ptr(rowPos), R, d)
    for (let l = 0; l < c.nLayers; l++) {
      const w = L.layers[l]!
      const A = this.acts[l]!
      const inv1 = A.inv1.need(R)
      const a1 = A.a1.need(R * d)
      k.rmsNormRows(ptr(a1), ptr(h), ptr(P, w.ln1), R, d, 0, ptr(inv1))
      const qkv = A.qkv.need(R * 3 * d)
      k.matmulNT(ptr(qkv), 3 * d, ptr(a1), d, ptr(P, w.wqkv), d, R, 3 * d, d, 0, 0)
      const att = A.att.need(total * H)
      const o = A.o.need(R * d)
      for (let r = 0; r < R; r++) {
        const at = ancOff[r]!
        k.attendRow(
          ptr(qkv, r * 3 * d),
          ptr(qkv),
          3 * d,
          d,
          2 * d,
          ptr(ancRows, at),
          rowPos[r]! + 1,
          ptr(o, r * d),
          ptr(att, at * H),
          H,
          dh
        )
      }
      const hMid = A.hMid.need(R * d)
      k.matmulNT(ptr(hMid), d, ptr(o), d, ptr(P, w.wo), d, R, d, d, 0, 0)
      k.add(ptr(hMid), ptr(h), ptr(hMid), R * d)
      const inv2 = A.inv2.need(R)
      const a2 = A.a2.need(R * d)
      k.rmsNormRows(ptr(a2), ptr(hMid), ptr(P, w.ln2), R, d, 0, ptr(inv2))
      const u = A.u.need(R * F)
      k.matmulNT(ptr(u), F, ptr(a2), d, ptr(P, w.w1), d, R, F, d, ptr(P, w.b1), 0)
      const g = A.g.need(R * F)
      k.gelu(ptr(g), ptr(A.th.need(R * F)), ptr(u), R * F)
      const next = l + 1 < c.nLayers ? this.acts[l + 1]!.hIn.need(R * d) : this.ws.hFinal.need(R * d)
      k.matmulNT(ptr(next), d, ptr(g), F, ptr(P, w.w2), F, R, d, F, ptr(P, w.b2), 0)
      k.add(ptr(next), ptr(hMid), ptr(next), R * d)
      h = next
    }
    const invF = this.ws.invF.need(NL)
    const f = this.ws.f.need(NL * d)
    k.rmsNormRows(ptr(f), ptr(h), ptr(P, L.lnF), NL, d, ptr(this.logitRow.buf), ptr(invF))
    const logits = this.ws.logits.need(NL * V)
    k.matmulNT(ptr(logits), V, ptr(f), d, ptr(P, L.wout), d, NL, V, d, ptr(P, L.bout), 0)
    const probs = this.ws.probs.need(NL * V)
    const entropy = this.entropy.need(NL) as Float32Array
    k.logSoftmaxRows(ptr(logits), ptr(probs), ptr(entropy), NL, V)
    return entropy
  }

  /** `backward` on the WebAssembly kernels (see `forwardWasm`). */
  private backwardWasm(W: Heap, dLogprobs: ReadonlyArray<ArrayLike<number>>): void {
    const k = W.kernels
    const c = this.config
    const d = c.dModel
    const F = c.dFf
    const V = c.vocabSize
    const H = c.nHeads
    const dh = d / H
    const P = this.params
    const G = this.grads
    const L = this.layout
    const R = this.batchRows
    const NL = this.batchLogitRows
    const NE = this.batchEntries
    const entrySeq = this.entrySeq.buf
    const entryPos = this.entryPos.buf
    const entryLogit = this.entryLogit.buf
    const entryToken = this.entryToken.buf
    const rowPos = this.rowPos.buf
    const ancOff = this.ancOff.buf
    const ancRows = this.ancRows.buf
    const ws = this.ws

    // 1. d(loss)/d(logits) = sum over entries e of g_e (onehot(token_e) - p), where logits hold logprobs.
    if (this.gSum.length < NL) this.gSum = new Float64Array(Math.ceil(NL * 1.5))
    const gSum = this.gSum
    gSum.fill(0, 0, NL)
    for (let i = 0; i < NE; i++) {
      const g = dLogprobs[entrySeq[i]!]![entryPos[i]!]!
      if (g !== 0) gSum[entryLogit[i]!] = gSum[entryLogit[i]!]! + g
    }
    const scale = this.rowScale.need(NL)
    for (let i = 0; i < NL; i++) scale[i] = -gSum[i]!
    const dLogits = ws.dTmp.need(NL * V)
    k.scaleRows(ptr(dLogits), ptr(ws.probs.buf), ptr(scale), NL, V)
    for (let i = 0; i < NE; i++) {
      const g = dLogprobs[entrySeq[i]!]![entryPos[i]!]!
      if (g !== 0) dLogits[entryLogit[i]! * V + entryToken[i]!] = dLogits[entryLogit[i]! * V + entryToken[i]!]! + g
    }
    // Head: dWout += dLogits^T f, dbout += sum, df = dLogits Wout.
    const f = ws.f.buf
    k.matmulAx(ptr(G, L.wout), d, ptr(dLogits), 1, V, ptr(f), d, V, d, NL, 0, 1)
    k.colSum(ptr(G, L.bout), ptr(dLogits), NL, V)
    const dF = ws.dA.need(Math.max(NL, R) * Math.max(d, F))
    k.matmulAx(ptr(dF), d, ptr(dLogits), V, 1, ptr(P, L.wout), d, NL, d, V, 0, 0)
    const dH = ws.dH.need(R * d)
    dH.fill(0, 0, R * d)
    k.rmsNormRowsBackward(
      ptr(dH),
      ptr(dF),
      ptr(ws.hFinal.buf),
      ptr(ws.invF.buf),
      ptr(P, L.lnF),
      ptr(G, L.lnF),
      NL,
      d,
      ptr(this.logitRow.buf)
    )

    // 2. Blocks, last to first. dH holds d(loss)/d(block output).
    const scratch = ws.tA.need(H * c.contextLength + d)
    for (let l = c.nLayers - 1; l >= 0; l--) {
      const w = L.layers[l]!
      const A = this.acts[l]!
      // MLP: out = hMid + W2 gelu(W1 a2 + b1) + b2.
      k.matmulAx(ptr(G, w.w2), F, ptr(dH), 1, d, ptr(A.g.buf), F, d, F, R, 0, 1)
      k.colSum(ptr(G, w.b2), ptr(dH), R, d)
      const dG = ws.dG.need(R * F)
      k.matmulAx(ptr(dG), F, ptr(dH), d, 1, ptr(P, w.w2), F, R, F, d, 0, 0)
      const dU = ws.dU.need(R * F)
      k.geluBackward(ptr(dU), ptr(dG), ptr(A.u.buf), ptr(A.th.buf), R * F)
      k.matmulAx(ptr(G, w.w1), d, ptr(dU), 1, F, ptr(A.a2.buf), d, F, d, R, 0, 1)
      k.colSum(ptr(G, w.b1), ptr(dU), R, F)
      const dA = ws.dA.need(R * d)
      k.matmulAx(ptr(dA), d, ptr(dU), F, 1, ptr(P, w.w1), d, R, d, F, 0, 0)
      // dH (residual) + norm2 backward -> d(hMid), in place in dH.
      k.rmsNormRowsBackward(ptr(dH), ptr(dA), ptr(A.hMid.buf), ptr(A.inv2.buf), ptr(P, w.ln2), ptr(G, w.ln2), R, d, 0)
      // Attention output: hMid = hIn + Wo o.
      k.matmulAx(ptr(G, w.wo), d, ptr(dH), 1, d, ptr(A.o.buf), d, d, d, R, 0, 1)
      const dO = ws.dO.need(R * d)
      k.matmulAx(ptr(dO), d, ptr(dH), d, 1, ptr(P, w.wo), d, R, d, d, 0, 0)
      // Attention.
      const dQkv = ws.dQkv.need(R * 3 * d)
      dQkv.fill(0, 0, R * 3 * d)
      const qkv = A.qkv.buf
      const att = A.att.buf
      for (let r = 0; r < R; r++) {
        const at = ancOff[r]!
        k.attendRowBackward(
          ptr(dO, r * d),
          ptr(qkv),
          r,
          ptr(att, at * H),
          ptr(ancRows, at),
          rowPos[r]! + 1,
          ptr(dQkv),
          H,
          dh,
          ptr(scratch)
        )
      }
      k.matmulAx(ptr(G, w.wqkv), d, ptr(dQkv), 1, 3 * d, ptr(A.a1.buf), d, 3 * d, d, R, 0, 1)
      k.matmulAx(ptr(dA), d, ptr(dQkv), 3 * d, 1, ptr(P, w.wqkv), d, R, d, 3 * d, 0, 0)
      k.rmsNormRowsBackward(ptr(dH), ptr(dA), ptr(A.hIn.buf), ptr(A.inv1.buf), ptr(P, w.ln1), ptr(G, w.ln1), R, d, 0)
    }

    // 3. Embeddings.
    k.embedBackward(ptr(G, L.tokEmb), ptr(G, L.posEmb), ptr(dH), ptr(this.rowToken.buf), ptr(rowPos), R, d)
  }
}
