/**
 * The local engine's policy: a small decoder-only transformer over the byte-level vocabulary, trained
 * from a seeded random initialisation, written for speed on a CPU in plain typed-array loops.
 *
 * ## Architecture (default configuration)
 * - token embedding (261 x 48) + learned position embedding (512 x 48);
 * - 2 pre-norm blocks, each: RMSNorm, causal self-attention with 4 heads of 12 (fused q|k|v projection
 *   48 -> 144, output projection 48 -> 48, no biases), residual; RMSNorm, MLP 48 -> 192 -> 48 with
 *   tanh-GELU and biases, residual;
 * - final RMSNorm and an untied output projection 48 -> 261 with bias.
 *
 * Parameters: 12,528 token + 24,576 position embedding, 2 x 27,984 per block, 48 + 12,528 + 261 for the
 * head: 105,909 in all (one flat `Float32Array`; every tensor is a view at a fixed offset), 424 KB as
 * float32. Work per token: the matrix products touch 67,824 weights (2 x 27,648 in the blocks, 12,528 in the
 * head), so a forward pass costs about 136 kFLOP, plus attention at 2 x 192 FLOPs per token in view (about
 * 38 kFLOP with 100 tokens of context); a training step (forward and backward) costs about three times
 * that, some 0.45 MFLOP per token (the head only runs where a logprob is wanted).
 *
 * Why this shape: scalar JavaScript reaches well under 1 GFLOP/s on one core, and the issue asks for an RL
 * step on 64 short trajectories in about a second, so the model has to stay near 100k weights. Attention
 * (rather than a recurrent net) lets the policy look back at any token of the prompt with one layer (to copy
 * a word named in it), and a second layer gives it relative lookups (the token after a marker). d = 48 with
 * 4 heads keeps every matrix small enough for the L1/L2 cache.
 *
 * ## How it runs
 * - Decoding (`prefill` / `fork` / `advance` / `logits`) is incremental: a state keeps its keys and values
 *   per layer (a growable buffer), so each new token costs one row of the forward pass. Rows go through the
 *   matrix products together where they can: `prefill` and `extend` run all of a segment's tokens at once,
 *   and `advanceMany` / `logitsMany` step many states (the `n` choices of a request) in one call.
 * - Training (`forwardBatch` / `backwardBatch`) runs whole sequences at once, packed as a prefix tree:
 *   sequences that share a prefix (every rollout of a group shares its prompt) share its rows, so a group of
 *   eight rollouts costs one prompt plus eight completions. Each row attends to its ancestors in the tree.
 *   Activations live in preallocated buffers that grow with the largest batch seen; the hot loops allocate
 *   nothing.
 * - Every matrix product is one kernel (`C = A B^T`, 4 x 4 register blocks); the backward pass transposes
 *   operands into scratch so that it uses the same kernel. Each output element is summed in the same order
 *   whatever the batch, so a token's logprob is bit-identical whether it is decoded, scored alone, or
 *   trained in a batch of other sequences.
 *
 * @since 0.1.0
 */
import type { DecodeState, LanguageModel } from "./LanguageModel.js"
import type { AdamConfig, AdamState } from "./Optimizer.js"
import { Rng } from "./Random.js"
import { VOCAB_SIZE } from "./Tokenizer.js"

/** A float buffer of the policy: float32 in use, float64 for the gradient check. */
export type FloatArray = Float32Array | Float64Array

/** The shape of a policy. */
export interface PolicyConfig {
  /** The number of token ids. */
  readonly vocabSize: number
  /** The most tokens a sequence may hold (the number of learned positions). */
  readonly contextLength: number
  /** The width of the residual stream. */
  readonly dModel: number
  /** The number of transformer blocks. */
  readonly nLayers: number
  /** The number of attention heads (dividing `dModel`). */
  readonly nHeads: number
  /** The width of the MLP's hidden layer. */
  readonly dFf: number
}

/** The default shape: see the module comment. */
export const DEFAULT_POLICY_CONFIG: PolicyConfig = {
  vocabSize: VOCAB_SIZE,
  contextLength: 512,
  dModel: 48,
  nLayers: 2,
  nHeads: 4,
  dFf: 192
}

/** The offsets of one block's tensors in the flat parameter buffer. */
interface LayerLayout {
  readonly ln1: number
  readonly wqkv: number
  readonly wo: number
  readonly ln2: number
  readonly w1: number
  readonly b1: number
  readonly w2: number
  readonly b2: number
}

/** The offsets of every tensor in the flat parameter buffer, and its size. */
interface Layout {
  readonly tokEmb: number
  readonly posEmb: number
  readonly layers: ReadonlyArray<LayerLayout>
  readonly lnF: number
  readonly wout: number
  readonly bout: number
  readonly size: number
}

const layoutOf = (c: PolicyConfig): Layout => {
  const d = c.dModel
  let at = 0
  const take = (n: number): number => {
    const start = at
    at += n
    return start
  }
  const tokEmb = take(c.vocabSize * d)
  const posEmb = take(c.contextLength * d)
  const layers: Array<LayerLayout> = []
  for (let l = 0; l < c.nLayers; l++) {
    layers.push({
      ln1: take(d),
      wqkv: take(3 * d * d),
      wo: take(d * d),
      ln2: take(d),
      w1: take(c.dFf * d),
      b1: take(c.dFf),
      w2: take(d * c.dFf),
      b2: take(d)
    })
  }
  const lnF = take(d)
  const wout = take(c.vocabSize * d)
  const bout = take(c.vocabSize)
  return { tokEmb, posEmb, layers, lnF, wout, bout, size: at }
}

/** The named tensors of the flat parameter buffer, in order, with their offsets and sizes. */
export const parameterTensors = (
  config: PolicyConfig
): ReadonlyArray<{ readonly name: string; readonly offset: number; readonly size: number }> => {
  const L = layoutOf(config)
  const starts: Array<[string, number]> = [
    ["tokEmb", L.tokEmb],
    ["posEmb", L.posEmb]
  ]
  L.layers.forEach((l, i) => {
    for (const [k, v] of Object.entries(l)) starts.push([`layers.${i}.${k}`, v])
  })
  starts.push(["lnF", L.lnF], ["wout", L.wout], ["bout", L.bout])
  return starts.map(([name, offset], i) => ({ name, offset, size: (starts[i + 1]?.[1] ?? L.size) - offset }))
}

/** The number of parameters of a policy of this shape. */
export const parameterCount = (config: PolicyConfig): number => layoutOf(config).size

/**
 * The floating-point operations of one token's forward pass with `context` earlier tokens in view (matrix
 * products, attention scores and mixing; norms and activations are not counted). A training step costs
 * about three times this per token.
 */
export const forwardFlopsPerToken = (config: PolicyConfig, context: number): number => {
  const d = config.dModel
  const matrix = config.nLayers * (3 * d * d + d * d + 2 * d * config.dFf) + config.vocabSize * d
  return 2 * matrix + config.nLayers * 4 * d * (context + 1)
}

const checkConfig = (c: PolicyConfig): void => {
  const ints = [c.vocabSize, c.contextLength, c.dModel, c.nLayers, c.nHeads, c.dFf]
  if (!ints.every((n) => Number.isInteger(n) && n > 0)) throw new RangeError("policy config: sizes must be positive")
  if (c.dModel % c.nHeads !== 0) throw new RangeError("policy config: nHeads must divide dModel")
}

// ---------------------------------------------------------------------------------------------------------
// Kernels. Everything below works on FloatArray; in use every buffer is a Float32Array (one element type per
// call site keeps V8's code monomorphic). Sums are carried in doubles and rounded once when stored.
// ---------------------------------------------------------------------------------------------------------

/**
 * `C[m, n] = sum_k A[m, k] B[n, k] (+ bias[n])`, or `C[m, n] += ...` with `accumulate`, for m < M, n < N,
 * with row strides lda, ldb, ldc. Each C element is summed over k in order, whatever the block it falls in.
 */
const matmulNT = (
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
const transpose = (dst: FloatArray, src: FloatArray, srcOff: number, ld: number, rows: number, cols: number): void => {
  for (let i = 0; i < rows; i++) {
    const s = srcOff + i * ld
    for (let j = 0; j < cols; j++) dst[j * rows + i] = src[s + j]!
  }
}

const RMS_EPS = 1e-5

/** `y = g * x / rms(x)` for one row; returns 1 / rms(x). */
const rmsNormRow = (
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
const rmsNormRowBackward = (
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

const GELU_C = Math.sqrt(2 / Math.PI)

/** tanh through one exp (a third faster than Math.tanh in V8; absolute error ~1e-16). */
const tanh = (z: number): number => 1 - 2 / (Math.exp(2 * z) + 1)

/** `out = gelu(u)` (tanh form) over n elements. */
const geluRange = (out: FloatArray, u: FloatArray, off: number, n: number): void => {
  for (let i = off; i < off + n; i++) {
    const x = u[i]!
    out[i] = 0.5 * x * (1 + tanh(GELU_C * (x + 0.044715 * x * x * x)))
  }
}

/** `out = gelu(u)` over n elements, keeping the tanh of each in `th` for the backward pass. */
const geluRangeKeep = (out: FloatArray, th: FloatArray, u: FloatArray, off: number, n: number): void => {
  for (let i = off; i < off + n; i++) {
    const x = u[i]!
    const t = tanh(GELU_C * (x + 0.044715 * x * x * x))
    th[i] = t
    out[i] = 0.5 * x * (1 + t)
  }
}

/** `du = dg * gelu'(u)` over n elements, given the tanh kept by `geluRangeKeep`. */
const geluBackwardRange = (
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
 * Causal attention of one row over `n` earlier rows (itself first, then its ancestors, nearest first):
 * row `kvRows[kvRowsOff + i]` of `kv` holds its key at `kOff` and its value at `vOff`. Writes the mixed
 * values to `out` and the attention weights (head-major, n per head) to `probs`.
 */
const attendRow = (
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

/**
 * Write `log softmax(logits)` into `out` (both of length n at the given offsets) and return the log of the
 * normaliser. Shared by the trainer and the sampler so that their logprobs agree bit for bit.
 */
export const logSoftmaxInto = (
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

// ---------------------------------------------------------------------------------------------------------
// Decoding state
// ---------------------------------------------------------------------------------------------------------

/** A sequence being decoded: its keys and values per layer, and the final hidden state of its last token. */
export class PolicyState implements DecodeState {
  /** The tokens consumed so far. */
  length: number
  /** Per layer, `capacity` rows of `[key | value]` (2 x dModel). */
  kv: Array<FloatArray>
  /** The rows allocated in `kv`. */
  capacity: number
  /** The final-normed hidden state of the last token (what the output head reads). */
  readonly last: FloatArray
  constructor(length: number, kv: Array<FloatArray>, capacity: number, last: FloatArray) {
    this.length = length
    this.kv = kv
    this.capacity = capacity
    this.last = last
  }
}

// ---------------------------------------------------------------------------------------------------------
// Training batches
// ---------------------------------------------------------------------------------------------------------

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

/** A growable buffer of the policy's float type. */
class Grow {
  buf: FloatArray
  constructor(private readonly make: (n: number) => FloatArray) {
    this.buf = make(0)
  }
  need(n: number): FloatArray {
    if (this.buf.length < n) this.buf = this.make(Math.max(n, Math.ceil(this.buf.length * 1.5)))
    return this.buf
  }
}

/** A growable Int32Array. */
class GrowInt {
  buf = new Int32Array(0)
  need(n: number): Int32Array {
    if (this.buf.length < n) this.buf = new Int32Array(Math.max(n, Math.ceil(this.buf.length * 1.5)))
    return this.buf
  }
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

/** Options of `Policy.create`. */
export interface PolicyOptions {
  /** The seed of the initialisation (default 0). */
  readonly seed?: number | undefined
  /** Hold parameters and activations in float64 (for the gradient check); default false. */
  readonly float64?: boolean | undefined
}

/** The policy: a small causal transformer, decodable step by step and trainable on batches of sequences. */
export class Policy implements LanguageModel<PolicyState> {
  /** The shape. */
  readonly config: PolicyConfig
  /** The number of token ids. */
  readonly vocabSize: number
  /** The most tokens a sequence may hold. */
  readonly contextLength: number
  /** Every parameter, in one buffer. */
  readonly params: FloatArray
  /** The gradient of every parameter (same layout), accumulated by `backwardBatch`. */
  readonly grads: FloatArray
  /** Whether the buffers are float64. */
  readonly float64: boolean

  private readonly layout: Layout
  private readonly make: (n: number) => FloatArray
  // decode scratch (rows of states decoded together)
  private readonly decode: Record<"x" | "a" | "qkv" | "o" | "tmp" | "u" | "g" | "f" | "logits", Grow>
  private readonly attRow: FloatArray
  private readonly descending: Int32Array
  private readonly acc: Float64Array
  private readonly qs: Float64Array
  private readonly dQs: Float64Array
  private readonly logitsOut: Float32Array
  private readonly one: Array<PolicyState> = []
  private readonly rowStateBuf: Array<PolicyState | undefined> = []
  private readonly rowPosDecode = new GrowInt()
  private readonly oneId = new Int32Array(1)
  // batch workspace
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
  private readonly rowToken = new GrowInt()
  private readonly rowParent = new GrowInt()
  private readonly rowPos = new GrowInt()
  private readonly ancOff = new GrowInt()
  private readonly ancRows = new GrowInt()
  private readonly logitRow = new GrowInt()
  private readonly entrySeq = new GrowInt()
  private readonly entryPos = new GrowInt()
  private readonly entryLogit = new GrowInt()
  private readonly entryToken = new GrowInt()
  private readonly dAtt: Float64Array
  private gSum = new Float64Array(0)
  private batchRows = 0
  private batchLogitRows = 0
  private batchEntries = 0
  private batchSeqLengths: Array<number> = []
  private batchReady = false

  private constructor(config: PolicyConfig, float64: boolean, params: FloatArray) {
    checkConfig(config)
    this.config = config
    this.vocabSize = config.vocabSize
    this.contextLength = config.contextLength
    this.float64 = float64
    this.layout = layoutOf(config)
    this.make = float64 ? (n) => new Float64Array(n) : (n) => new Float32Array(n)
    if (params.length !== this.layout.size) throw new RangeError("policy: parameter buffer has the wrong size")
    this.params = params
    this.grads = this.make(this.layout.size)
    const d = config.dModel
    this.attRow = this.make(config.nHeads * config.contextLength)
    this.descending = new Int32Array(config.contextLength)
    for (let i = 0; i < config.contextLength; i++) this.descending[i] = config.contextLength - 1 - i
    this.acc = new Float64Array(d)
    this.qs = new Float64Array(d)
    this.dQs = new Float64Array(d)
    this.logitsOut = new Float32Array(config.vocabSize)
    const grow = () => new Grow(this.make)
    this.decode = {
      x: grow(),
      a: grow(),
      qkv: grow(),
      o: grow(),
      tmp: grow(),
      u: grow(),
      g: grow(),
      f: grow(),
      logits: grow()
    }
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

  /** A freshly initialised policy (seeded; the same seed gives the same bits). */
  static create(config: PolicyConfig = DEFAULT_POLICY_CONFIG, options: PolicyOptions = {}): Policy {
    const float64 = options.float64 ?? false
    const layout = layoutOf(config)
    const params = float64 ? new Float64Array(layout.size) : new Float32Array(layout.size)
    const policy = new Policy(config, float64, params)
    policy.initialise(options.seed ?? 0)
    return policy
  }

  /** A policy over existing parameters (taken, not copied). */
  static fromParameters(config: PolicyConfig, params: FloatArray): Policy {
    return new Policy(config, params instanceof Float64Array, params)
  }

  /** The number of parameters. */
  get parameterCount(): number {
    return this.layout.size
  }

  private initialise(seed: number): void {
    const rng = new Rng(seed)
    const c = this.config
    const d = c.dModel
    const p = this.params
    const fill = (off: number, n: number, std: number) => {
      for (let i = 0; i < n; i++) p[off + i] = rng.normal() * std
    }
    const ones = (off: number, n: number) => p.fill(1, off, off + n)
    const L = this.layout
    const residualStd = 1 / Math.sqrt(d) / Math.sqrt(2 * c.nLayers)
    fill(L.tokEmb, c.vocabSize * d, 0.5)
    fill(L.posEmb, c.contextLength * d, 0.5)
    for (const l of L.layers) {
      ones(l.ln1, d)
      fill(l.wqkv, 3 * d * d, 1 / Math.sqrt(d))
      fill(l.wo, d * d, residualStd)
      ones(l.ln2, d)
      fill(l.w1, c.dFf * d, 1 / Math.sqrt(d))
      // b1 stays zero
      fill(l.w2, d * c.dFf, 1 / Math.sqrt(c.dFf) / Math.sqrt(2 * c.nLayers))
      // b2 stays zero
    }
    ones(L.lnF, d)
    fill(L.wout, c.vocabSize * d, 0.5 / Math.sqrt(d))
    // bout stays zero
  }

  // -------------------------------------------------------------------------------------------------------
  // Decoding
  // -------------------------------------------------------------------------------------------------------

  /** Consume a prompt (at least one token); `logits(state)` is then the next token's distribution. */
  readonly prefill = (ids: ArrayLike<number>): PolicyState => {
    if (ids.length === 0) throw new RangeError("prefill: the prompt must hold at least one token")
    this.checkLength(ids.length)
    let capacity = 16
    while (capacity < ids.length + 16) capacity *= 2
    capacity = Math.min(capacity, this.contextLength)
    const d = this.config.dModel
    const kv = Array.from({ length: this.config.nLayers }, () => this.make(capacity * 2 * d))
    const state = new PolicyState(0, kv, capacity, this.make(d))
    this.extend(state, ids)
    return state
  }

  /** A copy of a state (for several completions of one prompt). */
  readonly fork = (state: PolicyState): PolicyState => {
    const row = 2 * this.config.dModel
    const capacity = Math.min(this.contextLength, Math.max(16, state.length + 16))
    const kv = state.kv.map((src) => {
      const dst = this.make(capacity * row)
      dst.set(src.subarray(0, state.length * row))
      return dst
    })
    const last = this.make(this.config.dModel)
    last.set(state.last)
    return new PolicyState(state.length, kv, capacity, last)
  }

  /** Consume one more token. */
  readonly advance = (state: PolicyState, id: number): void => {
    this.oneId[0] = id
    this.extend(state, this.oneId)
  }

  /**
   * Consume several tokens at once (all rows of the forward pass together): the same state, bit for bit, as
   * advancing token by token, in a fraction of the time.
   */
  readonly extend = (state: PolicyState, ids: ArrayLike<number>): void => {
    const n = ids.length
    if (n === 0) return
    this.checkLength(state.length + n)
    while (state.capacity < state.length + n) this.growState(state)
    const rowState = this.rowStates(n)
    const rowPos = this.rowPosDecode.need(n)
    for (let i = 0; i < n; i++) {
      rowState[i] = state
      rowPos[i] = state.length + i
    }
    this.forwardRows(rowState, rowPos, ids, n)
    state.length += n
    rowState.fill(undefined, 0, n)
  }

  /**
   * Consume one more token in each of `count` states at once (`ids[i]` into `states[i]`, distinct states): a
   * batched `advance`, with the same results bit for bit, faster per token.
   */
  readonly advanceMany = (
    states: ReadonlyArray<PolicyState>,
    ids: ArrayLike<number>,
    count: number = states.length
  ): void => {
    const rowState = this.rowStates(count)
    const rowPos = this.rowPosDecode.need(count)
    for (let b = 0; b < count; b++) {
      const s = states[b]!
      this.checkLength(s.length + 1)
      if (s.capacity < s.length + 1) this.growState(s)
      rowState[b] = s
      rowPos[b] = s.length
    }
    this.forwardRows(rowState, rowPos, ids, count)
    for (let b = 0; b < count; b++) states[b]!.length += 1
    rowState.fill(undefined, 0, count)
  }

  /** The next-token logits after the state's tokens (written into `out`, or a reused buffer). */
  readonly logits = (state: PolicyState, out?: Float32Array): Float32Array => {
    this.one[0] = state
    const o = this.logitsMany(this.one, out ?? this.logitsOut, 1)
    this.one.pop()
    return o
  }

  /**
   * The next-token logits of `count` states at once, row i (at `i * vocabSize`) of `out` for `states[i]`; the
   * same bits as `logits` for each.
   */
  readonly logitsMany = (
    states: ReadonlyArray<PolicyState>,
    out: Float32Array,
    count: number = states.length
  ): Float32Array => {
    const d = this.config.dModel
    const V = this.vocabSize
    if (out.length < count * V) throw new RangeError("logitsMany: the output buffer is too small")
    const f = this.decode.f.need(count * d)
    for (let b = 0; b < count; b++) {
      const s = states[b]!
      if (s.length === 0) throw new RangeError("logits: the state holds no token")
      for (let e = 0; e < d; e++) f[b * d + e] = s.last[e]!
    }
    if (this.float64) {
      const t = this.decode.logits.need(count * V)
      matmulNT(t, 0, V, f, 0, d, this.params, this.layout.wout, d, count, V, d, this.params, this.layout.bout, false)
      for (let i = 0; i < count * V; i++) out[i] = t[i]!
    } else {
      matmulNT(out, 0, V, f, 0, d, this.params, this.layout.wout, d, count, V, d, this.params, this.layout.bout, false)
    }
    return out
  }

  /** The log-probability of each `ids[t]` given `ids[0 .. t-1]`, for t from `from` (NaN for t = 0). */
  readonly scoreTokens = (ids: ArrayLike<number>, from: number): Float32Array => {
    const want = new Uint8Array(ids.length)
    for (let t = Math.max(1, from); t < ids.length; t++) want[t] = 1
    const out = this.forwardBatch([ids], [want], { keepActivations: false })
    return Float32Array.from(out.logprobs[0]!.subarray(Math.max(0, from)))
  }

  private checkLength(n: number): void {
    if (n > this.contextLength) {
      throw new RangeError(
        `This model's maximum context length is ${this.contextLength} tokens; the sequence would hold ${n} tokens`
      )
    }
  }

  private rowStates(n: number): Array<PolicyState | undefined> {
    while (this.rowStateBuf.length < n) this.rowStateBuf.push(undefined)
    return this.rowStateBuf
  }

  /**
   * The forward pass of B decoding rows: row b is token `ids[b]` at position `rowPos[b]` of `rowState[b]`
   * (whose cache holds every earlier position, or gets it from an earlier row of this call). Writes each row's
   * keys and values into its state's cache and its final hidden state into the state's `last`.
   */
  private forwardRows(
    rowState: ReadonlyArray<PolicyState | undefined>,
    rowPos: Int32Array,
    ids: ArrayLike<number>,
    B: number
  ): void {
    const c = this.config
    const d = c.dModel
    const F = c.dFf
    const H = c.nHeads
    const dh = d / H
    const P = this.params
    const L = this.layout
    const D = this.decode
    const x = D.x.need(B * d)
    const a = D.a.need(B * d)
    const qkv = D.qkv.need(B * 3 * d)
    const o = D.o.need(B * d)
    const tmp = D.tmp.need(B * d)
    const u = D.u.need(B * F)
    const g = D.g.need(B * F)
    for (let b = 0; b < B; b++) {
      const id = ids[b]!
      if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize) throw new RangeError(`token id ${id} out of range`)
      const te = L.tokEmb + id * d
      const pe = L.posEmb + rowPos[b]! * d
      for (let e = 0; e < d; e++) x[b * d + e] = P[te + e]! + P[pe + e]!
    }
    const desc = this.descending
    const top = this.contextLength - 1
    for (let l = 0; l < c.nLayers; l++) {
      const w = L.layers[l]!
      for (let b = 0; b < B; b++) rmsNormRow(a, b * d, x, b * d, P, w.ln1, d)
      matmulNT(qkv, 0, 3 * d, a, 0, d, P, w.wqkv, d, B, 3 * d, d, null, 0, false)
      for (let b = 0; b < B; b++) {
        const kv = rowState[b]!.kv[l]!
        const base = rowPos[b]! * 2 * d
        for (let e = 0; e < 2 * d; e++) kv[base + e] = qkv[b * 3 * d + d + e]!
      }
      for (let b = 0; b < B; b++) {
        const pos = rowPos[b]!
        // Rows pos, pos - 1, ..., 0: a window of the descending index array.
        attendRow(
          qkv,
          b * 3 * d,
          rowState[b]!.kv[l]!,
          2 * d,
          0,
          d,
          desc,
          top - pos,
          pos + 1,
          o,
          b * d,
          this.attRow,
          0,
          H,
          dh,
          this.acc,
          this.qs
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
    for (let b = 0; b < B; b++) rmsNormRow(rowState[b]!.last, 0, x, b * d, P, L.lnF, d)
  }

  private growState(state: PolicyState): void {
    const row = 2 * this.config.dModel
    const capacity = Math.min(this.contextLength, Math.max(16, state.capacity * 2))
    state.kv = state.kv.map((src) => {
      const dst = this.make(capacity * row)
      dst.set(src.subarray(0, state.length * row))
      return dst
    })
    state.capacity = capacity
  }

  // -------------------------------------------------------------------------------------------------------
  // Training
  // -------------------------------------------------------------------------------------------------------

  /** Set every gradient to zero. */
  zeroGrads(): void {
    this.grads.fill(0)
  }

  /**
   * The forward pass over a batch of whole sequences, packed as a prefix tree. `want[s][t] = 1` asks for
   * the logprob of token t of sequence s (t >= 1). Keeps the activations for `backwardBatch` unless
   * `keepActivations` is false; the next `forwardBatch` (or `scoreTokens`) replaces them.
   */
  forwardBatch(
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
   * shape as its `logprobs`; other entries ignored), add d(loss)/d(parameter) to `grads`.
   */
  backwardBatch(dLogprobs: ReadonlyArray<ArrayLike<number>>): void {
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
}

// ---------------------------------------------------------------------------------------------------------
// Checkpoints
// ---------------------------------------------------------------------------------------------------------

const MAGIC = [0x45, 0x52, 0x4c, 0x50] // "ERLP"

/** The version of the checkpoint format written by `saveCheckpoint`. */
export const CHECKPOINT_VERSION = 1

/** A checkpoint that cannot be read: not one of ours, of another version, truncated or inconsistent. */
export class CheckpointFormatError extends Error {
  override readonly name = "CheckpointFormatError"
}

/** What a checkpoint's JSON header records. */
interface CheckpointHeader {
  readonly format: "effect-rl/policy"
  readonly version: number
  readonly dtype: "float32" | "float64"
  readonly config: PolicyConfig
  readonly parameterCount: number
  readonly optimizer: { readonly step: number; readonly config: AdamConfig } | null
}

const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1

const bytesOf = (a: FloatArray): Uint8Array => new Uint8Array(a.buffer, a.byteOffset, a.byteLength)

/**
 * The policy's parameters, and the optimiser's state when given, as bytes: "ERLP", the format version and
 * the length of a JSON header (u32 little-endian each), the header (shape, float type, optimiser step and
 * hyperparameters), then the raw little-endian floats of the parameters and of both moments. Bit-exact.
 */
export const saveCheckpoint = (policy: Policy, optimizer?: AdamState): Uint8Array => {
  if (!littleEndian) throw new CheckpointFormatError("checkpoints are written on little-endian machines only")
  const n = policy.parameterCount
  if (optimizer !== undefined && (optimizer.m.length !== n || optimizer.v.length !== n)) {
    throw new CheckpointFormatError("the optimiser state does not match the policy's parameters")
  }
  if (optimizer !== undefined && optimizer.m instanceof Float64Array !== policy.float64) {
    throw new CheckpointFormatError("the optimiser state's float type differs from the policy's")
  }
  const header: CheckpointHeader = {
    format: "effect-rl/policy",
    version: CHECKPOINT_VERSION,
    dtype: policy.float64 ? "float64" : "float32",
    config: { ...policy.config },
    parameterCount: n,
    optimizer: optimizer === undefined ? null : { step: optimizer.step, config: { ...optimizer.config } }
  }
  let json = new TextEncoder().encode(JSON.stringify(header))
  const pad = (8 - ((12 + json.length) % 8)) % 8
  if (pad > 0) json = new TextEncoder().encode(JSON.stringify(header) + " ".repeat(pad))
  const arrays = optimizer === undefined ? [policy.params] : [policy.params, optimizer.m, optimizer.v]
  const out = new Uint8Array(12 + json.length + arrays.reduce((s, a) => s + a.byteLength, 0))
  const view = new DataView(out.buffer)
  out.set(MAGIC, 0)
  view.setUint32(4, CHECKPOINT_VERSION, true)
  view.setUint32(8, json.length, true)
  out.set(json, 12)
  let at = 12 + json.length
  for (const a of arrays) {
    out.set(bytesOf(a), at)
    at += a.byteLength
  }
  return out
}

/** Read a checkpoint written by `saveCheckpoint`: the policy, and the optimiser state if it was saved. */
export const loadCheckpoint = (bytes: Uint8Array): { readonly policy: Policy; readonly optimizer?: AdamState } => {
  if (!littleEndian) throw new CheckpointFormatError("checkpoints are read on little-endian machines only")
  if (bytes.length < 12 || MAGIC.some((b, i) => bytes[i] !== b)) {
    throw new CheckpointFormatError("not an effect-rl policy checkpoint (the bytes do not start with ERLP)")
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const version = view.getUint32(4, true)
  if (version !== CHECKPOINT_VERSION) {
    throw new CheckpointFormatError(
      `unsupported checkpoint version ${version} (this engine reads ${CHECKPOINT_VERSION})`
    )
  }
  const jsonLength = view.getUint32(8, true)
  if (12 + jsonLength > bytes.length) throw new CheckpointFormatError("truncated checkpoint: the header is cut short")
  let header: CheckpointHeader
  try {
    header = JSON.parse(new TextDecoder().decode(bytes.subarray(12, 12 + jsonLength))) as CheckpointHeader
  } catch {
    throw new CheckpointFormatError("corrupt checkpoint: the header is not JSON")
  }
  if (header.format !== "effect-rl/policy" || (header.dtype !== "float32" && header.dtype !== "float64")) {
    throw new CheckpointFormatError("corrupt checkpoint: unknown format or float type in the header")
  }
  try {
    checkConfig(header.config)
  } catch (e) {
    throw new CheckpointFormatError(`corrupt checkpoint: ${(e as Error).message}`)
  }
  const n = parameterCount(header.config)
  if (n !== header.parameterCount) throw new CheckpointFormatError("corrupt checkpoint: parameter count mismatch")
  const float64 = header.dtype === "float64"
  const width = float64 ? 8 : 4
  const arrays = header.optimizer === null ? 1 : 3
  const expected = 12 + jsonLength + arrays * n * width
  if (bytes.length !== expected) {
    throw new CheckpointFormatError(`corrupt checkpoint: ${bytes.length} bytes where the header implies ${expected}`)
  }
  const read = (k: number): FloatArray => {
    const a = float64 ? new Float64Array(n) : new Float32Array(n)
    const start = 12 + jsonLength + k * n * width
    bytesOf(a).set(bytes.subarray(start, start + n * width))
    return a
  }
  const policy = Policy.fromParameters(header.config, read(0))
  if (header.optimizer === null) return { policy }
  const optimizer: AdamState = {
    config: header.optimizer.config,
    m: read(1),
    v: read(2),
    step: header.optimizer.step
  }
  return { policy, optimizer }
}
