/**
 * The local engine's policy: a small decoder-only transformer over the byte-level vocabulary, trained
 * from a seeded random initialisation, written for speed on a CPU (WebAssembly SIMD kernels).
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
 * - The kernels are WebAssembly with 128-bit SIMD (`Wasm.ts`, from `wasm/kernels.as`), over buffers in their
 *   memory: products `C = A B^T` vectorised over the inner index (the forward pass) and `C = A B` or `A^T B`
 *   vectorised over the output (the backward pass, with no transposes), attention, RMSNorm, GELU, log-softmax
 *   and Adam. Sums are float32, each output element summed in an order fixed by the shapes alone, so a token's
 *   logprob is bit-identical whether it is decoded, scored alone, or trained in a batch of other sequences.
 *   A float64 policy (the gradient check) and one made with `kernels: "js"` run the JavaScript loops of
 *   `Kernels.ts` (double sums), which the WebAssembly kernels are tested against.
 *
 * @since 0.1.0
 */
import type { DecodeState, LanguageModel } from "../LanguageModel.js"
import { Rng } from "../Random.js"
import { DecodeScratch, forwardRows, headRows, outOfMemory, rowCost } from "./DecodeRows.js"
import { decodeThread, isShared, sharedFloat32, type ThreadPolicy } from "./DecodeThread.js"
import { type FloatArray, Grow, GrowInt } from "./Kernels.js"
import { type BatchOutput, PackedBatch } from "./PackedBatch.js"
import { checkConfig, DEFAULT_POLICY_CONFIG, type Layout, layoutOf, type PolicyConfig } from "./PolicyConfig.js"
import { type Heap, heap, MIN_BLOCK, ptr } from "./Wasm.js"

/**
 * The chunks a batched decoding step is cut into when it is shared with the decoding thread: enough that a thread
 * that gets less of the CPU takes fewer, few enough that each chunk's matrix products still batch several rows.
 */
const CHUNKS_PER_STEP = 8

/** The rows of a chunk of next-token logits shared with the decoding thread (`logitsMany`). */
const HEAD_CHUNK = 8

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

/** Options of `Policy.create`. */
export interface PolicyOptions {
  /** The seed of the initialisation (default 0). */
  readonly seed?: number | undefined
  /** Hold parameters and activations in float64 (for the gradient check); default false. */
  readonly float64?: boolean | undefined
  /**
   * The kernels of a float32 policy: `"wasm"` (the default: WebAssembly SIMD, see `Wasm.ts`) or `"js"` (the
   * JavaScript reference loops of `Kernels.ts`, for comparison). A float64 policy always runs the JavaScript ones.
   */
  readonly kernels?: "wasm" | "js" | undefined
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
  /** The kernels' memory when the policy runs the WebAssembly kernels (its parameters live there), else undefined. */
  readonly heap: Heap | undefined

  private readonly layout: Layout
  private readonly make: (n: number) => FloatArray
  /** Makes a decoding state's buffers: in shared memory when the parameters are (see `DecodeThread.ts`). */
  /** A state buffer of n floats: zeros, or (`zeroed` false) whatever a reused block of the kernels' memory held. */
  private readonly makeState: (n: number, zeroed?: boolean) => FloatArray
  /** Whether decoding steps may be split with the decoding thread (float32 parameters in shared memory). */
  private readonly shared: boolean
  // decode scratch (rows of states decoded together)
  private readonly scratch: DecodeScratch
  /** The float64 policy's logits before they are rounded into a caller's Float32Array (`logitsMany`). */
  private readonly logits64: Grow
  private readonly logitsOut: Float32Array
  private readonly one: Array<PolicyState> = []
  private readonly rowStateBuf: Array<PolicyState | undefined> = []
  private readonly rowPosDecode = new GrowInt()
  private readonly rowIds = new GrowInt()
  private readonly chunkStarts = new GrowInt()
  /** Whether the last decoding step was shared with the decoding thread, and its estimated cost. */
  private sharing = false
  private stepCost = 0
  private readonly oneId = new Int32Array(1)
  // training workspace
  private readonly batch: PackedBatch
  /**
   * The views of the kernels' memory this policy made for itself (gradients, scratch, workspaces; not its
   * parameters nor decoding states), held weakly: a view a workspace outgrew is still given back when collected.
   */
  private readonly owned: Array<WeakRef<ArrayBufferView>> = []
  private disposed = false

  private constructor(config: PolicyConfig, float64: boolean, params: FloatArray) {
    checkConfig(config)
    this.config = config
    this.vocabSize = config.vocabSize
    this.contextLength = config.contextLength
    this.float64 = float64
    this.layout = layoutOf(config)
    const W = heap()
    this.heap = !float64 && W?.has(params) ? W : undefined
    const H = this.heap
    // Workspaces (scratch, activations, logits) are written before they are read, each pass zeroing what it
    // accumulates into: a block reused in the kernels' memory is handed out as its last owner left it, where zeroing
    // it took about 190 ms of the training thread in `npm start`. The gradients start at zero.
    this.make =
      H !== undefined
        ? (n) => this.own(H.f32(n, false) ?? outOfMemory())
        : float64
          ? (n) => new Float64Array(n)
          : (n) => new Float32Array(n)
    if (params.length !== this.layout.size) throw new RangeError("policy: parameter buffer has the wrong size")
    this.params = params
    this.grads = H !== undefined ? this.own(H.f32(this.layout.size) ?? outOfMemory()) : this.make(this.layout.size)
    this.shared = !float64 && isShared(params)
    this.makeState =
      H !== undefined
        ? (n, zeroed) => H.f32(n, zeroed) ?? sharedFloat32(n)
        : this.shared
          ? (n) => sharedFloat32(n)
          : (n) => this.make(n)
    const ints = H !== undefined ? (n: number) => this.own(H.i32(n, false) ?? outOfMemory()) : undefined
    this.scratch = new DecodeScratch(config, this.make, H, ints)
    this.logitsOut =
      H !== undefined ? this.own(H.f32(config.vocabSize) ?? outOfMemory()) : new Float32Array(config.vocabSize)
    this.logits64 = new Grow(this.make)
    this.batch = new PackedBatch(
      config,
      this.layout,
      params,
      this.grads,
      this.make,
      (n) => this.checkLength(n),
      H,
      ints
    )
  }

  /** A freshly initialised policy (seeded; the same seed gives the same bits). */
  static create(config: PolicyConfig = DEFAULT_POLICY_CONFIG, options: PolicyOptions = {}): Policy {
    const float64 = options.float64 ?? false
    const layout = layoutOf(config)
    const inHeap = !float64 && options.kernels !== "js" ? heap()?.f32(layout.size) : undefined
    const params = float64 ? new Float64Array(layout.size) : (inHeap ?? sharedFloat32(layout.size))
    const policy = new Policy(config, float64, params)
    policy.initialise(options.seed ?? 0)
    return policy
  }

  /**
   * A policy over existing parameters (taken, not copied): it runs the WebAssembly kernels when they are a view of
   * the kernels' memory (as `Checkpoint.loadCheckpoint` makes them), the JavaScript ones otherwise.
   */
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
    const state = this.emptyState(ids.length)
    this.extend(state, ids)
    return state
  }

  /**
   * A state that holds no token yet, with room for `expected` tokens (it grows past them as needed): `extend`
   * then consumes a prompt into it, as `prefill` does.
   */
  readonly emptyState = (expected: number): PolicyState => {
    this.checkLive()
    let capacity = 16
    while (capacity < expected + 16) capacity *= 2
    capacity = this.fit(capacity)
    const d = this.config.dModel
    const kv = Array.from({ length: this.config.nLayers }, () => this.makeState(capacity * 2 * d))
    return new PolicyState(0, kv, capacity, this.makeState(d))
  }

  /** A copy of a state (for several completions of one prompt). */
  readonly fork = (state: PolicyState): PolicyState => this.copyOf(state, 16)

  /**
   * A copy of a state with no room kept to grow (its caches in the smallest blocks that hold them), for a copy that
   * is only read and forked, never extended: a prompt cache's (half the memory of a `fork` of a short prompt).
   */
  readonly snapshot = (state: PolicyState): PolicyState => this.copyOf(state, 0)

  private copyOf(state: PolicyState, room: number): PolicyState {
    this.checkLive()
    const row = 2 * this.config.dModel
    const capacity = this.fit(Math.max(room === 0 ? 1 : 16, state.length + room))
    const kv = state.kv.map((src) => this.copied(src, capacity * row, state.length * row))
    const last = this.makeState(this.config.dModel)
    last.set(state.last)
    return new PolicyState(state.length, kv, capacity, last)
  }

  /**
   * A new state holding the first `length` tokens of `state` (its caches' first rows copied), to be extended by
   * at least one token before its logits are read: the hidden state after an earlier token than the last is not
   * kept, so the copy's is NaN until an `extend` writes it. Extended by the rest of a prompt, it is the state of a
   * prefill of the whole prompt, bit for bit (each row depends only on its token, its position and the rows before).
   */
  readonly forkPrefix = (state: PolicyState, length: number): PolicyState => {
    if (!Number.isInteger(length) || length < 1 || length > state.length) {
      throw new RangeError(`forkPrefix: a length from 1 to the state's ${state.length} tokens, got ${length}`)
    }
    const row = 2 * this.config.dModel
    const capacity = this.fit(Math.max(16, length + 16))
    const kv = state.kv.map((src) => this.copied(src, capacity * row, length * row))
    const last = this.makeState(this.config.dModel, false)
    last.fill(Number.NaN)
    return new PolicyState(length, kv, capacity, last)
  }

  /**
   * Gives a state's caches back to the kernels' memory at once (see `Heap.release`); the state is emptied (no
   * cache, length 0), so a use after it fails rather than reading another state's rows.
   */
  readonly release = (state: PolicyState): void => {
    const H = this.heap
    if (H === undefined) return
    for (const kv of state.kv) H.release(kv)
    H.release(state.last)
    state.kv = []
    state.length = 0
    state.capacity = 0
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
    this.checkLive()
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
    this.checkLive()
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

  /**
   * Consume tokens in each of `count` distinct states at once (`ids[i]`, one token or several, into `states[i]`)
   * in one forward pass: one matrix product per layer over all the rows, attention per state over its own
   * cache. Each state ends as `extend` (or `advance` token by token) would leave it, bit for bit.
   */
  readonly extendMany = (
    states: ReadonlyArray<PolicyState>,
    ids: ReadonlyArray<ArrayLike<number>>,
    count: number = states.length
  ): void => {
    this.checkLive()
    let rows = 0
    for (let b = 0; b < count; b++) {
      const s = states[b]!
      const n = ids[b]!.length
      this.checkLength(s.length + n)
      while (s.capacity < s.length + n) this.growState(s)
      rows += n
    }
    if (rows === 0) return
    const rowState = this.rowStates(rows)
    const rowPos = this.rowPosDecode.need(rows)
    const flat = this.rowIds.need(rows)
    let r = 0
    for (let b = 0; b < count; b++) {
      const s = states[b]!
      const piece = ids[b]!
      for (let i = 0; i < piece.length; i++) {
        rowState[r] = s
        rowPos[r] = s.length + i
        flat[r++] = piece[i]!
      }
    }
    this.forwardRows(rowState, rowPos, flat, rows)
    for (let b = 0; b < count; b++) states[b]!.length += ids[b]!.length
    rowState.fill(undefined, 0, rows)
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
    this.checkLive()
    const V = this.vocabSize
    if (out.length < count * V) throw new RangeError("logitsMany: the output buffer is too small")
    for (let b = 0; b < count; b++) {
      if (states[b]!.length === 0) throw new RangeError("logits: the state holds no token")
    }
    if (this.float64) {
      const t = this.logits64.need(count * V)
      headRows(this.config, this.layout, this.params, this.scratch, states, t, 0, count)
      for (let i = 0; i < count * V; i++) out[i] = t[i]!
      return out
    }
    // Rows of several states into an output in shared memory: shared with the decoding thread when it is ready
    // and the step these logits follow was shared (sharing measured faster), or a test asks for it.
    const thread = this.shared && count >= 2 * HEAD_CHUNK && isShared(out) ? decodeThread.get() : undefined
    if (thread === undefined || !thread.ready || !(this.sharing || thread.waitForThread)) {
      headRows(this.config, this.layout, this.params, this.scratch, states, out, 0, count)
      return out
    }
    const chunks = Math.ceil(count / HEAD_CHUNK)
    const starts = this.chunkStarts.need(chunks + 1)
    for (let c = 0; c < chunks; c++) starts[c] = c * HEAD_CHUNK
    starts[chunks] = count
    thread.shareHead(this as ThreadPolicy, states, out, starts, chunks, (from, to) =>
      headRows(this.config, this.layout, this.params, this.scratch, states, out, from, to)
    )
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
   * (whose cache holds every earlier position, or gets it from an earlier row of this call; a state's rows are
   * consecutive). Writes each row's keys and values into its state's cache and its final hidden state into the
   * state's `last`. Rows of two or more states are shared with the decoding thread when it is ready.
   */
  private forwardRows(
    rowState: ReadonlyArray<PolicyState | undefined>,
    rowPos: Int32Array,
    ids: ArrayLike<number>,
    B: number
  ): void {
    for (let b = 0; b < B; b++) {
      const id = ids[b]!
      if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize) throw new RangeError(`token id ${id} out of range`)
    }
    const thread = this.shared && B > 1 && rowState[0] !== rowState[B - 1] ? decodeThread.get() : undefined
    const chunks = thread?.ready === true ? this.chunksOf(rowState, rowPos, B) : 1
    if (thread === undefined || chunks < 2) {
      this.sharing = false
      forwardRows(this.config, this.layout, this.params, this.scratch, rowState, rowPos, ids, 0, B)
      return
    }
    // Shared or not as measured faster (see `DecodeThread.worthSharing`); the step's logits follow suit.
    this.sharing = thread.worthSharing(this.stepCost)
    const started = performance.now()
    if (this.sharing) {
      thread.share(this as ThreadPolicy, rowState, rowPos, ids, this.chunkStarts.buf, chunks, (from, to) =>
        forwardRows(this.config, this.layout, this.params, this.scratch, rowState, rowPos, ids, from, to)
      )
    } else {
      forwardRows(this.config, this.layout, this.params, this.scratch, rowState, rowPos, ids, 0, B)
    }
    thread.record(this.sharing ? "shared" : "alone", this.stepCost, performance.now() - started)
  }

  /**
   * Cuts B rows into chunks of whole states, each about {@link CHUNKS_PER_STEP}-th of the estimated cost (at least
   * one state): chunk c is rows `chunkStarts[c] .. chunkStarts[c + 1] - 1`. Returns the number of chunks.
   */
  private chunksOf(rowState: ReadonlyArray<PolicyState | undefined>, rowPos: Int32Array, B: number): number {
    let total = 0
    for (let b = 0; b < B; b++) total += rowCost(this.config, rowPos[b]!)
    this.stepCost = total
    const target = total / CHUNKS_PER_STEP
    const starts = this.chunkStarts.need(B + 1)
    let chunks = 0
    let cost = 0
    starts[0] = 0
    for (let b = 0; b < B; b++) {
      if (b > 0 && rowState[b] !== rowState[b - 1] && cost >= target) {
        starts[++chunks] = b
        cost = 0
      }
      cost += rowCost(this.config, rowPos[b]!)
    }
    starts[++chunks] = B
    return chunks
  }

  /**
   * The capacity of a state's caches that must hold `rows` rows: in the kernels' memory, as many as the block they
   * get holds (blocks are powers of two bytes, so the rows past `rows` cost nothing and put off the copy of growing);
   * at most the context length.
   */
  private fit(rows: number): number {
    if (this.heap === undefined) return Math.min(this.contextLength, rows)
    const row = 2 * this.config.dModel * 4
    let block = MIN_BLOCK
    while (block < rows * row) block *= 2
    return Math.min(this.contextLength, Math.floor(block / row))
  }

  /**
   * A new state buffer of `size` floats holding the first `n` of `src`: copied by the kernels when both are in
   * their memory (a typed array's `set` between views of shared memory copies word by word).
   */
  private copied(src: FloatArray, size: number, n: number): FloatArray {
    const H = this.heap
    // Not zeroed: the first n are copied here, and a state's rows past its length are written before they are
    // read (attention reads rows up to the state's length). Zeroing reused blocks was a fifth of this.
    const dst = this.makeState(size, false)
    if (H?.has(dst) && H.has(src)) H.kernels.copy(ptr(dst), ptr(src), n)
    else dst.set(src.subarray(0, n))
    return dst
  }

  private growState(state: PolicyState): void {
    const row = 2 * this.config.dModel
    const capacity = this.fit(Math.max(16, state.capacity * 2))
    const old = state.kv
    state.kv = old.map((src) => this.copied(src, capacity * row, state.length * row))
    state.capacity = capacity
    // The old caches are this state's alone (a fork copies): their blocks go back now.
    const H = this.heap
    if (H !== undefined) for (const kv of old) H.release(kv)
  }

  private own<T extends ArrayBufferView>(view: T): T {
    this.owned.push(new WeakRef(view))
    return view
  }

  /**
   * Gives the policy's blocks of the kernels' memory back at once (see `Heap.release`): its parameters, gradients,
   * scratch and training workspaces, for the next policy of this thread to reuse. Without it they go back only
   * when the garbage collector finds them, which on a thread that allocates little JavaScript (the training
   * thread) is rarely: each job's policy took fresh memory. The policy must not be used after (its training and
   * decoding entry points throw); its decoding states are given back by `release` as before. Idempotent.
   */
  dispose(): void {
    if (this.disposed) return
    this.disposed = true
    const H = this.heap
    if (H === undefined) return
    for (const ref of this.owned) {
      const view = ref.deref()
      if (view !== undefined) H.release(view)
    }
    this.owned.length = 0
    H.release(this.params)
  }

  private checkLive(): void {
    if (this.disposed) throw new RangeError("policy: used after dispose()")
  }

  // -------------------------------------------------------------------------------------------------------
  // Training
  // -------------------------------------------------------------------------------------------------------

  /** Set every gradient to zero. */
  zeroGrads(): void {
    this.checkLive()
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
    this.checkLive()
    return this.batch.forward(sequences, want, options)
  }

  /**
   * The backward pass of the last `forwardBatch`: given d(loss)/d(logprob) for every asked-for token (same
   * shape as its `logprobs`; other entries ignored), add d(loss)/d(parameter) to `grads`.
   */
  backwardBatch(dLogprobs: ReadonlyArray<ArrayLike<number>>): void {
    this.checkLive()
    this.batch.backward(dLogprobs)
  }
}
