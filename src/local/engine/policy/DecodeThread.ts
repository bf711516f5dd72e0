/**
 * The decoding thread: a `worker_threads` worker that takes a share of each batched decoding step of the local
 * policy on the machine's second core, while the calling thread runs the rest.
 *
 * A batched step (`Policy.extendMany`) runs rows of many sequences; rows of different sequences are
 * independent. The policy cuts the step's rows into chunks (whole sequences each, about an eighth of the step's
 * cost) and both threads take chunks from a shared counter until none is left, so a thread that gets less of the
 * CPU (another process, a slow wake-up) simply takes fewer; the caller then waits for the chunk the thread is
 * running, if any, and the step stays synchronous for its caller (the decoding scheduler). If the thread has not
 * woken by the time the caller ran every chunk, the step is withdrawn from it and nothing is waited for. The
 * thread reads the policy's parameters and writes the sequences' caches in place, both in `SharedArrayBuffer`s:
 * nothing is copied per step. A step is announced through a small shared control block (`Atomics.wait` /
 * `notify`); the thread learns of new models and sequences from messages it takes synchronously
 * (`receiveMessageOnPort`) when woken, and forgets them once the caller's objects are collected.
 *
 * The thread runs the same code (`forwardRows`) over the same bits, so a row's result does not depend on the
 * thread that computed it: for a policy on the WebAssembly kernels, its own instance of them over the same shared
 * memory (`Wasm.ts`), where the parameters and caches live. It starts on first use and is not waited for: until it is ready, steps run whole on
 * the calling thread. Steps are shared only while sharing measures faster than running them alone (a moving average
 * of each way's time per unit of estimated work, the other way tried every 16th step): on a machine whose second
 * core is busy with other work, the thread only costs. If it fails or does not answer within {@link ANSWER_MS},
 * the step throws (the batch's
 * completions fail with the reason) and later steps run on the calling thread alone. It does not hold the
 * process open. Off on one core, and with `decodeThread.enabled = false`.
 *
 * This module is both the thread's entry point and the caller's side.
 *
 * @since 0.1.0
 */
import { availableParallelism } from "node:os"
import { MessageChannel, type MessagePort, receiveMessageOnPort, type Worker, workerData } from "node:worker_threads"
import { startModuleThread } from "../../../internal/moduleThread.js"
import { DecodeScratch, forwardRows, headRows, outOfMemory, type RowTarget } from "./DecodeRows.js"
import { type Layout, layoutOf, type PolicyConfig } from "./PolicyConfig.js"
import { type Heap, heap, useMemory, type WasmMemory } from "./Wasm.js"

/** How long the caller waits for the thread's share of a step before giving the thread up, in milliseconds. */
export const ANSWER_MS = 30_000

// The control block: Int32 slots shared by the caller and the thread.
const REQUEST = 0 // the number of the last step announced to the thread
const DONE = 1 // the number of the last step the thread finished its share of
const ROWS = 2 // the rows of the step
const MODEL = 3 // the model of the step
const FAILED = 4 // 1 when the thread's share of the step threw (its message follows on the port)
const READY = 5 // 1 once the thread waits for steps
const CHUNKS = 6 // the chunks of the step
const NEXT = 7 // the next chunk to take (both threads add 1 to take one)
const STATE = 8 // the step's state: IDLE, POSTED (announced), TAKEN (the thread is in it), WITHDRAWN
const THREAD_ROWS = 9 // the rows the thread has run, in all
const KIND = 10 // what the step runs: FORWARD (rows of the forward pass) or HEAD (next-token logits of states)
const CONTROL_SLOTS = 12

/** A step's rows: tokens through the forward pass (`forwardRows`). */
const FORWARD = 0
/** A step's rows: states' next-token logits, row r at `r * vocabSize` of the output (`headRows`). */
const HEAD = 1

const IDLE = 0
const POSTED = 1
const TAKEN = 2
const WITHDRAWN = 3

const MARK = "effect-rl/decode-thread"

type ToThread =
  | {
      readonly type: "model"
      readonly id: number
      readonly config: PolicyConfig
      readonly params: Float32Array
      readonly wasm: boolean
    }
  | {
      readonly type: "state"
      readonly id: number
      readonly kv: ReadonlyArray<Float32Array>
      readonly last: Float32Array
      /** Which of `kv`, then `last`, are views of the kernels' memory. */
      readonly inHeap: ReadonlyArray<boolean>
    }
  | { readonly type: "rows"; readonly buffer: SharedArrayBuffer }
  | { readonly type: "out"; readonly out: Float32Array; readonly inHeap: boolean }
  | { readonly type: "forget"; readonly models: ReadonlyArray<number>; readonly states: ReadonlyArray<number> }

interface ThreadData {
  readonly mark: typeof MARK
  readonly control: SharedArrayBuffer
  readonly port: MessagePort
  /** The kernels' memory (`Wasm.ts`), which the thread's instance of them shares. */
  readonly memory: WasmMemory | undefined
}

/** Whether a float buffer lives in shared memory (the thread can read and write it in place). */
export const isShared = (array: ArrayBufferView): boolean => array.buffer instanceof SharedArrayBuffer

/** A Float32Array of `n` zeros in shared memory. */
export const sharedFloat32 = (n: number): Float32Array => new Float32Array(new SharedArrayBuffer(n * 4))

// ---------------------------------------------------------------------------------------------------------
// The thread's side
// ---------------------------------------------------------------------------------------------------------

interface ThreadModel {
  readonly config: PolicyConfig
  readonly layout: Layout
  readonly params: Float32Array
  readonly scratch: DecodeScratch
}

const serve = (data: ThreadData): void => {
  const control = new Int32Array(data.control)
  const port = data.port
  const W: Heap | undefined = data.memory === undefined ? undefined : useMemory(data.memory)
  const models = new Map<number, ThreadModel>()
  const states = new Map<number, RowTarget>()
  let rows: Int32Array<ArrayBufferLike> = new Int32Array(0)
  const rowState: Array<RowTarget | undefined> = []
  let rowPos = new Int32Array(0)
  let ids = new Int32Array(0)
  let out: Float32Array<ArrayBufferLike> = new Float32Array(0)
  const apply = (message: ToThread): void => {
    switch (message.type) {
      case "model": {
        const wasm = message.wasm && W !== undefined ? W : undefined
        if (wasm !== undefined) wasm.adopt(message.params)
        models.set(message.id, {
          config: message.config,
          layout: layoutOf(message.config),
          params: message.params,
          scratch:
            wasm === undefined
              ? new DecodeScratch(message.config, (n) => new Float32Array(n))
              : new DecodeScratch(message.config, (n) => wasm.f32(n) ?? outOfMemory(), wasm)
        })
        return
      }
      case "state":
        if (W !== undefined) {
          message.kv.forEach((kv, i) => {
            if (message.inHeap[i] === true) W.adopt(kv)
          })
          if (message.inHeap[message.kv.length] === true) W.adopt(message.last)
        }
        states.set(message.id, { kv: message.kv, last: message.last })
        return
      case "rows":
        rows = new Int32Array(message.buffer)
        return
      case "out":
        if (message.inHeap) W?.adopt(message.out)
        out = message.out
        return
      case "forget":
        for (const id of message.models) models.delete(id)
        for (const id of message.states) states.delete(id)
        return
    }
  }
  const run = (n: number, chunks: number): void => {
    const model = models.get(Atomics.load(control, MODEL))
    if (model === undefined) throw new Error("a step of a model the thread was not given")
    if (rowPos.length < n) {
      rowPos = new Int32Array(n * 2)
      ids = new Int32Array(n * 2)
    }
    // Chunk c is rows starts[c] .. starts[c + 1] - 1; the starts follow the rows' triples.
    const starts = 3 * n
    const head = Atomics.load(control, KIND) === HEAD
    for (;;) {
      const c = Atomics.add(control, NEXT, 1)
      if (c >= chunks) return
      const from = rows[starts + c]!
      const to = rows[starts + c + 1]!
      for (let r = from; r < to; r++) {
        const target = states.get(rows[3 * r]!)
        if (target === undefined) throw new Error("a step of a sequence the thread was not given")
        rowState[r] = target
        rowPos[r] = rows[3 * r + 1]!
        ids[r] = rows[3 * r + 2]!
      }
      if (head) headRows(model.config, model.layout, model.params, model.scratch, rowState, out, from, to)
      else forwardRows(model.config, model.layout, model.params, model.scratch, rowState, rowPos, ids, from, to)
      rowState.fill(undefined, from, to)
      Atomics.add(control, THREAD_ROWS, to - from)
    }
  }
  Atomics.store(control, READY, 1)
  let seen = 0
  for (;;) {
    Atomics.wait(control, REQUEST, seen)
    seen = Atomics.load(control, REQUEST)
    // A step the caller finished alone (withdrawn) is left; once taken, the step cannot change under the thread.
    if (Atomics.compareExchange(control, STATE, POSTED, TAKEN) !== POSTED) continue
    const step = Atomics.load(control, REQUEST)
    seen = step
    for (let m = receiveMessageOnPort(port); m !== undefined; m = receiveMessageOnPort(port)) {
      apply(m.message as ToThread)
    }
    try {
      run(Atomics.load(control, ROWS), Atomics.load(control, CHUNKS))
      Atomics.store(control, FAILED, 0)
    } catch (error) {
      // The chunks left are taken here so that the caller does not run them over a half-written step.
      Atomics.store(control, NEXT, Atomics.load(control, CHUNKS))
      Atomics.store(control, FAILED, 1)
      port.postMessage(error instanceof Error ? error.message : String(error))
    }
    Atomics.store(control, DONE, step)
    Atomics.notify(control, DONE)
  }
}

if ((workerData as Partial<ThreadData> | null)?.mark === MARK) serve(workerData as ThreadData)

// ---------------------------------------------------------------------------------------------------------
// The caller's side
// ---------------------------------------------------------------------------------------------------------

/** What the caller gives the thread of a policy: its shape and parameters (in shared memory). */
export interface ThreadPolicy {
  readonly config: PolicyConfig
  readonly params: Float32Array
  /** The kernels' memory when the policy runs the WebAssembly kernels (its parameters live there). */
  readonly heap?: Heap | undefined
}

/** The decoding thread as its caller sees it (see the module comment). */
export class DecodeThread {
  /** The steps shared, those the thread took part in, and their rows in all. */
  readonly stats = { steps: 0, shared: 0, rows: 0 }
  /**
   * Whether each step waits for the thread to take its first chunk before this thread runs one (so that the
   * thread runs some of every step): for tests. Otherwise a step the thread has not woken for is run here alone.
   */
  waitForThread = false
  /** Whether every step is shared, whatever was measured (for `bench/share.ts`: the shared way at every size). */
  alwaysShare = false
  private readonly control = new Int32Array(new SharedArrayBuffer(CONTROL_SLOTS * 4))
  private readonly port: MessagePort
  private readonly worker: Worker
  private rows: Int32Array<SharedArrayBuffer> = new Int32Array(new SharedArrayBuffer(0))
  private step = 0
  private current = 0
  private out: Float32Array | null = null
  private broken: string | null = null
  private nextId = 1
  private readonly models = new WeakMap<ThreadPolicy, number>()
  private readonly states = new WeakMap<RowTarget, { readonly id: number; kv0: unknown }>()
  private forgotten = { models: [] as Array<number>, states: [] as Array<number> }
  private readonly collected = new FinalizationRegistry<{ readonly kind: "models" | "states"; readonly id: number }>(
    ({ kind, id }) => {
      this.forgotten[kind].push(id)
    }
  )

  constructor() {
    const channel = new MessageChannel()
    this.port = channel.port1
    const data: ThreadData = {
      mark: MARK,
      control: this.control.buffer as SharedArrayBuffer,
      port: channel.port2,
      memory: heap()?.memory
    }
    this.worker = start(data, [channel.port2])
    this.worker.unref()
    this.worker.on("error", (error) => this.giveUp(`the decoding thread failed: ${error.message}`))
    this.worker.on("exit", (code) => this.giveUp(`the decoding thread exited with code ${code}`))
  }

  /**
   * Per size of step (its estimated cost, in powers of two) and per way of running it (alone on the calling thread,
   * or shared), a moving average of its wall time per unit of cost, and the decisions taken at that size: what
   * {@link worthSharing} compares. By size because sharing has a fixed cost (waking the thread, waiting for its
   * last chunk): `bench/share.ts` measured a step of 2 sequences at 50 tokens of context 14 us alone and 37 shared,
   * one of 48 at 300 tokens 1,149 us alone and 789 shared. One average over all sizes mixed the two, and a server's
   * many small steps turned sharing off for its large ones too.
   */
  private readonly sizes = new Map<number, { alone: number; shared: number; decisions: number }>()

  private sizeOf(cost: number): { alone: number; shared: number; decisions: number } {
    const key = Math.max(0, Math.floor(Math.log2(Math.max(1, cost))))
    let size = this.sizes.get(key)
    if (size === undefined) {
      size = { alone: Number.NaN, shared: Number.NaN, decisions: 0 }
      this.sizes.set(key, size)
    }
    return size
  }

  /** The moving averages (ms per unit of cost) of each way, for steps of about `cost` (NaN: not measured yet). */
  ratesOf(cost: number): { readonly alone: number; readonly shared: number } {
    const { alone, shared } = this.sizeOf(cost)
    return { alone, shared }
  }

  /**
   * Whether to share the next step, of estimated `cost`: the way measured faster so far for steps of its size, and
   * on every 16th step of that size the other way (so that a change, such as another process taking the second
   * core or leaving it, is seen). `waitForThread` (tests) always shares.
   */
  worthSharing(cost: number): boolean {
    if (this.waitForThread || this.alwaysShare) return true
    const size = this.sizeOf(cost)
    size.decisions += 1
    const { alone, shared } = size
    if (Number.isNaN(shared)) return true
    if (Number.isNaN(alone)) return false
    const faster = shared < alone
    return size.decisions % 16 === 0 ? !faster : faster
  }

  /** Records a step's wall time (`ms`) and estimated cost, run alone or shared (see {@link worthSharing}). */
  record(way: "alone" | "shared", cost: number, ms: number): void {
    if (cost <= 0) return
    const size = this.sizeOf(cost)
    const rate = ms / cost
    const old = size[way]
    size[way] = Number.isNaN(old) ? rate : old + 0.1 * (rate - old)
  }

  /** Whether the thread takes shares of steps now (started, and not given up). */
  get ready(): boolean {
    return this.broken === null && Atomics.load(this.control, READY) === 1
  }

  /** Resolves once the thread is ready (true), or false if it was given up first or does not start in 30 s. */
  async whenReady(): Promise<boolean> {
    const until = performance.now() + 30_000
    while (!this.ready && this.broken === null && performance.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
    return this.ready
  }

  /**
   * Runs a step of `policy` (see `forwardRows`; the rows' targets and the parameters in shared memory) over its
   * `chunks` (chunk c is rows `starts[c] .. starts[c + 1] - 1`, whole sequences each), this thread and the
   * decoding thread each taking chunks until none is left. `run(from, to)` runs a chunk on this thread. Returns
   * when every chunk has run; throws if the thread failed on its chunks or did not answer.
   */
  share(
    policy: ThreadPolicy,
    rowState: ReadonlyArray<RowTarget | undefined>,
    rowPos: Int32Array,
    ids: ArrayLike<number>,
    starts: Int32Array,
    chunks: number,
    run: (from: number, to: number) => void
  ): void {
    this.shareKind(FORWARD, policy, rowState, rowPos, ids, null, starts, chunks, run)
  }

  /**
   * As {@link share}, for the next-token logits of states (`headRows`): row r's into `out` (in shared memory)
   * at `r * vocabSize`.
   */
  shareHead(
    policy: ThreadPolicy,
    rowState: ReadonlyArray<RowTarget | undefined>,
    out: Float32Array,
    starts: Int32Array,
    chunks: number,
    run: (from: number, to: number) => void
  ): void {
    this.shareKind(HEAD, policy, rowState, null, null, out, starts, chunks, run)
  }

  private shareKind(
    kind: typeof FORWARD | typeof HEAD,
    policy: ThreadPolicy,
    rowState: ReadonlyArray<RowTarget | undefined>,
    rowPos: Int32Array | null,
    ids: ArrayLike<number> | null,
    out: Float32Array | null,
    starts: Int32Array,
    chunks: number,
    run: (from: number, to: number) => void
  ): void {
    const n = starts[chunks]!
    if (out !== null && out !== this.out) {
      this.out = out
      this.post({ type: "out", out, inHeap: heap()?.has(out) === true })
    }
    Atomics.store(this.control, KIND, kind)
    this.announce(policy, rowState, rowPos, ids, starts, chunks)
    const control = this.control
    if (this.waitForThread) {
      // Until the thread has taken the first chunk.
      const until = performance.now() + ANSWER_MS
      while (Atomics.load(control, NEXT) === 0 && performance.now() < until) Atomics.wait(control, NEXT, 0, 1)
    }
    try {
      for (;;) {
        const c = Atomics.add(control, NEXT, 1)
        if (c >= chunks) break
        run(starts[c]!, starts[c + 1]!)
      }
    } catch (error) {
      // Left to the thread: none (so that it stops after its chunk); then the step ends as below.
      Atomics.store(control, NEXT, chunks)
      this.settle()
      throw error
    }
    const taken = this.settle()
    this.stats.steps += 1
    if (taken) this.stats.shared += 1
    this.stats.rows += n
  }

  /** Writes the step's rows and chunks where the thread reads them, tells it of new models and sequences. */
  private announce(
    policy: ThreadPolicy,
    rowState: ReadonlyArray<RowTarget | undefined>,
    rowPos: Int32Array | null,
    ids: ArrayLike<number> | null,
    starts: Int32Array,
    chunks: number
  ): void {
    const n = starts[chunks]!
    if (this.forgotten.models.length + this.forgotten.states.length > 0) {
      this.post({ type: "forget", models: this.forgotten.models, states: this.forgotten.states })
      this.forgotten = { models: [], states: [] }
    }
    let model = this.models.get(policy)
    if (model === undefined) {
      model = this.nextId++
      this.models.set(policy, model)
      this.collected.register(policy, { kind: "models", id: model })
      this.post({
        type: "model",
        id: model,
        config: policy.config,
        params: policy.params,
        wasm: policy.heap !== undefined && policy.heap === heap()
      })
    }
    const size = 3 * n + chunks + 1
    if (this.rows.length < size) {
      this.rows = new Int32Array(new SharedArrayBuffer(Math.max(size, 2 * this.rows.length) * 4))
      this.post({ type: "rows", buffer: this.rows.buffer })
    }
    const rows = this.rows
    let previous: RowTarget | undefined
    for (let r = 0; r < n; r++) {
      const target = rowState[r]!
      if (target !== previous) {
        previous = target
        let known = this.states.get(target)
        if (known === undefined) {
          known = { id: this.nextId++, kv0: undefined }
          this.states.set(target, known)
          this.collected.register(target, { kind: "states", id: known.id })
        }
        // A state's caches are replaced when it grows: the thread is given the new ones.
        if (known.kv0 !== target.kv[0]) {
          known.kv0 = target.kv[0]
          this.post({
            type: "state",
            id: known.id,
            kv: target.kv as ReadonlyArray<Float32Array>,
            last: target.last as Float32Array,
            inHeap: [...target.kv, target.last].map((a) => heap()?.has(a) === true)
          })
        }
        this.current = known.id
      }
      rows[3 * r] = this.current
      rows[3 * r + 1] = rowPos === null ? 0 : rowPos[r]!
      rows[3 * r + 2] = ids === null ? 0 : ids[r]!
    }
    for (let c = 0; c <= chunks; c++) rows[3 * n + c] = starts[c]!
    const control = this.control
    Atomics.store(control, ROWS, n)
    Atomics.store(control, CHUNKS, chunks)
    Atomics.store(control, MODEL, model)
    Atomics.store(control, NEXT, 0)
    // The step's number before its state: a thread that takes the step (POSTED -> TAKEN) then reads the number
    // it answers with. The other way round, a thread that woke late could take this step while still reading the
    // number of the one before (withdrawn), answer with that, and leave the caller waiting for an answer that
    // never came (seen under heavy load: "did not answer within 30 s").
    this.step += 1
    Atomics.store(control, REQUEST, this.step)
    Atomics.store(control, STATE, POSTED)
    Atomics.notify(control, REQUEST)
  }

  /**
   * Ends the step: withdraws it if the thread has not taken it, else waits for the thread's last chunk.
   * Returns whether the thread took part.
   */
  private settle(): boolean {
    const control = this.control
    if (Atomics.compareExchange(control, STATE, POSTED, WITHDRAWN) === POSTED) return false
    const until = performance.now() + ANSWER_MS
    for (;;) {
      const done = Atomics.load(control, DONE)
      if (done === this.step) break
      const left = until - performance.now()
      if (left <= 0 || this.broken !== null) {
        const reason = this.broken ?? `the decoding thread did not answer within ${ANSWER_MS / 1000} s`
        this.giveUp(reason)
        throw new Error(reason)
      }
      Atomics.wait(control, DONE, done, Math.min(left, 1000))
    }
    Atomics.store(control, STATE, IDLE)
    if (Atomics.load(control, FAILED) === 1) {
      const message = receiveMessageOnPort(this.port)?.message
      const reason = `the decoding thread failed: ${typeof message === "string" ? message : "no reason given"}`
      this.giveUp(reason)
      throw new Error(reason)
    }
    return true
  }

  /** The rows the thread has run, in all. */
  get threadRows(): number {
    return Atomics.load(this.control, THREAD_ROWS)
  }

  /** Stops the thread (later steps run on the calling thread). */
  close(): Promise<number> {
    this.giveUp("the decoding thread was closed")
    return this.worker.terminate()
  }

  private post(message: ToThread): void {
    this.port.postMessage(message)
  }

  private giveUp(reason: string): void {
    if (this.broken !== null) return
    this.broken = reason
    void this.worker.terminate()
  }
}

/** Starts the thread on this module (see `startModuleThread`). */
const start = (data: ThreadData, transfer: ReadonlyArray<MessagePort>): Worker =>
  startModuleThread(import.meta.url, { workerData: data, transferList: [...transfer] })

let current: DecodeThread | undefined

/** The process's decoding thread setting and accessor. */
export const decodeThread = {
  /** Whether batched steps may use the decoding thread (default: when the machine has two cores or more). */
  enabled: availableParallelism() >= 2,
  /** The thread, started on first call when enabled (it takes shares of steps once `ready`). */
  get(): DecodeThread | undefined {
    if (!decodeThread.enabled) return undefined
    if (current === undefined) current = new DecodeThread()
    return current
  }
}
