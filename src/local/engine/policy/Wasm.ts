/**
 * The engine's WebAssembly kernels (`wasm/kernels.as`, AssemblyScript with 128-bit SIMD, built by
 * `npm run build:wasm` and shipped as `wasm/kernelsWasm.ts`) and the memory they work in.
 *
 * The kernels read and write only their module's linear memory, so everything a float32 policy computes with
 * lives there: its parameters and gradients, the optimiser's moments, its activations and scratch, and the
 * caches of its decoding states. The memory is a shared `WebAssembly.Memory`, one per process: the decoding
 * thread instantiates the same module over it (`useMemory`) and reads the parameters and writes the caches in
 * place, as it did with `SharedArrayBuffer`s. Arrays are views of it, handed out by a small allocator
 * (`Heap.f32`, `Heap.i32`): power-of-two blocks from free lists, else from a bump pointer shared by both threads
 * (an atomic slot at address 0), the memory grown as needed (a shared memory's views stay valid when it grows).
 * A block returns to its thread's free list once the view it was handed out as is collected, or at once when it
 * is given back (`Heap.release`): a decoding state's caches are, when the state is done with, since a block
 * reused is about 40x faster to write than fresh memory (its pages faulted in: `npm start`'s prefix-cache
 * copies took 857 ms into fresh blocks against 3 ms into reused ones, 7,509 against 1,189 copies).
 *
 * When the memory cannot hold more (`MAX_PAGES`), `f32` and `i32` answer `undefined` and callers fall back: a
 * decoding state's cache in an ordinary shared buffer is staged into scratch for each step (the same bits,
 * slower); a policy or training buffer that does not fit is an error.
 *
 * @since 0.1.0
 */
import { KERNELS_WASM_BASE64 } from "./wasm/kernelsWasm.js"

/** The kernels' exports (see `wasm/kernels.as`): byte addresses of the memory, strides and counts in elements. */
export interface Kernels {
  matmulNT(
    C: number,
    ldc: number,
    A: number,
    lda: number,
    B: number,
    ldb: number,
    M: number,
    N: number,
    K: number,
    bias: number,
    acc: number
  ): void
  matmulAx(
    C: number,
    ldc: number,
    A: number,
    sam: number,
    san: number,
    B: number,
    ldb: number,
    M: number,
    N: number,
    K: number,
    bias: number,
    acc: number
  ): void
  rmsNormRows(Y: number, X: number, g: number, R: number, d: number, rows: number, inv: number): void
  rmsNormRowsBackward(
    dX: number,
    dY: number,
    X: number,
    inv: number,
    g: number,
    dg: number,
    R: number,
    d: number,
    rows: number
  ): void
  gelu(out: number, th: number, u: number, n: number): void
  geluBackward(du: number, dg: number, u: number, th: number, n: number): void
  add(out: number, a: number, b: number, n: number): void
  colSum(dst: number, src: number, R: number, N: number): void
  scaleRows(dst: number, src: number, s: number, R: number, N: number): void
  embed(h: number, tok: number, pos: number, tokens: number, positions: number, R: number, d: number): void
  embedBackward(dTok: number, dPos: number, dh: number, tokens: number, positions: number, R: number, d: number): void
  logSoftmax(out: number, probs: number, logits: number, n: number, entropyOut: number): number
  logSoftmaxRows(logits: number, probs: number, entropy: number, R: number, n: number): void
  attendRow(
    q: number,
    kv: number,
    kvStride: number,
    kOff: number,
    vOff: number,
    rows: number,
    n: number,
    out: number,
    probs: number,
    H: number,
    dh: number
  ): void
  attendRows(
    qkv: number,
    caches: number,
    positions: number,
    B: number,
    desc: number,
    top: number,
    out: number,
    probs: number,
    H: number,
    dh: number
  ): void
  copy(dst: number, src: number, n: number): void
  rmsNormTo(targets: number, X: number, g: number, R: number, d: number): void
  attendRowBackward(
    dO: number,
    qkv: number,
    r: number,
    att: number,
    rows: number,
    n: number,
    dQkv: number,
    H: number,
    dh: number,
    scratch: number
  ): void
  sumSquares64(g: number, n: number): number
  adam(
    params: number,
    grads: number,
    m: number,
    v: number,
    n: number,
    clip: number,
    b1: number,
    b2: number,
    eps: number,
    decay: number,
    step: number,
    c2: number
  ): void
}

/** A `WebAssembly.Memory`, as far as it is used here (the compiler's `lib` does not declare the API). */
export interface WasmMemory {
  readonly buffer: ArrayBufferLike
  grow(pages: number): number
}
/** The part of the WebAssembly JavaScript API used here (and by `bench/kernels.ts`). */
export interface WasmApi {
  readonly Module: new (bytes: Uint8Array) => object
  readonly Instance: new (module: object, imports: object) => { readonly exports: object }
  readonly Memory: new (descriptor: { initial: number; maximum: number; shared: boolean }) => WasmMemory
}
const WebAssembly = (globalThis as unknown as { readonly WebAssembly: WasmApi }).WebAssembly

const PAGE = 65_536
/** The most the memory grows to: 2 GiB (the module declares it as its maximum). */
export const MAX_PAGES = 32_768
/** Where blocks start: the first 64 KiB hold the allocator's slot (the bump pointer, a Uint32 at 0). */
const HEAP_START = PAGE
/** The smallest block the allocator hands out; blocks are powers of two bytes from it up. */
export const MIN_BLOCK = 64

let compiled: object | undefined
const compile = (): object => {
  compiled ??= new WebAssembly.Module(Buffer.from(KERNELS_WASM_BASE64, "base64"))
  return compiled
}

/** The kernels' memory and this thread's instance of them, with the allocator of views into the memory. */
export class Heap {
  /** The shared memory. */
  readonly memory: WasmMemory
  /** The kernels, instantiated over `memory`. */
  readonly kernels: Kernels
  private readonly buffers = new WeakSet<ArrayBufferLike>()
  private readonly slot: Uint32Array
  private readonly free = new Map<number, Array<number>>()
  private readonly collected = new FinalizationRegistry<{ readonly at: number; readonly size: number }>(
    ({ at, size }) => {
      let list = this.free.get(size)
      if (list === undefined) {
        list = []
        this.free.set(size, list)
      }
      list.push(at)
    }
  )

  constructor(memory?: WasmMemory) {
    this.memory = memory ?? new WebAssembly.Memory({ initial: 16, maximum: MAX_PAGES, shared: true })
    const instance = new WebAssembly.Instance(compile(), { env: { memory: this.memory, log: Math.log } })
    this.kernels = instance.exports as unknown as Kernels
    this.slot = new Uint32Array(this.memory.buffer, 0, 1)
    Atomics.compareExchange(this.slot, 0, 0, HEAP_START)
  }

  /** Whether a typed array is a view of this memory (a pointer of it is `byteOffset`). */
  has(array: ArrayBufferView): boolean {
    return this.buffers.has(array.buffer)
  }

  /** Marks a view of this memory received from another thread as one (see `has`). */
  adopt(array: ArrayBufferView): void {
    if (array.buffer instanceof SharedArrayBuffer) this.buffers.add(array.buffer)
  }

  /**
   * A Float32Array of n zeros in the memory, or undefined when it cannot hold it. With `zeroed` false, a block
   * reused from the free list keeps what its last owner wrote (for a caller that writes before it reads).
   */
  f32(n: number, zeroed = true): Float32Array | undefined {
    const at = this.allocate(n * 4, zeroed)
    if (at === undefined) return undefined
    const buffer = this.current()
    const view = new Float32Array(buffer, at.at, n)
    if (at.size > 0) this.collected.register(view, at, view)
    return view
  }

  /** An Int32Array of n zeros in the memory, or undefined when it cannot hold it (`zeroed`: as for `f32`). */
  i32(n: number, zeroed = true): Int32Array | undefined {
    const at = this.allocate(n * 4, zeroed)
    if (at === undefined) return undefined
    const view = new Int32Array(this.current(), at.at, n)
    if (at.size > 0) this.collected.register(view, at, view)
    return view
  }

  /**
   * Gives a view's block back to this thread's free list now, for the next allocation of its size, rather than
   * once the view is collected. The caller must not use the view again (the block's next owner writes it). A view
   * this thread's `f32`/`i32` did not hand out, or one given back already, is left alone.
   */
  release(view: ArrayBufferView): void {
    if (!this.has(view) || !this.collected.unregister(view)) return
    let size = MIN_BLOCK
    while (size < view.byteLength) size *= 2
    let list = this.free.get(size)
    if (list === undefined) {
      list = []
      this.free.set(size, list)
    }
    list.push(view.byteOffset)
  }

  /** The bytes of the memory in use or on free lists (the bump pointer). */
  get used(): number {
    return Atomics.load(this.slot, 0)
  }

  private current(): SharedArrayBuffer {
    const buffer = this.memory.buffer as unknown as SharedArrayBuffer
    this.buffers.add(buffer)
    return buffer
  }

  private allocate(bytes: number, zeroed = true): { readonly at: number; readonly size: number } | undefined {
    if (bytes === 0) return { at: HEAP_START, size: 0 }
    let size = MIN_BLOCK
    while (size < bytes) size *= 2
    const reused = this.free.get(size)?.pop()
    if (reused !== undefined) {
      // Eight bytes at a time: on shared memory `fill` of a Uint8Array ran at 2.5 GB/s here, of a Float64Array at
      // 9.8 (blocks are powers of two from 64 bytes, at multiples of 64: aligned).
      if (zeroed) new Float64Array(this.current(), reused, size / 8).fill(0)
      return { at: reused, size }
    }
    // The pointer never passes the end of the largest memory (2^31 bytes, which an Int32 could not hold): a full
    // memory answers undefined, where adding unchecked wrapped past 2^31 and handed out negative addresses.
    let at = Atomics.load(this.slot, 0)
    for (;;) {
      if (at + size > MAX_PAGES * PAGE) return undefined
      const seen = Atomics.compareExchange(this.slot, 0, at, at + size)
      if (seen === at) break
      at = seen
    }
    const end = at + size
    while (this.memory.buffer.byteLength < end) {
      const pages = Math.ceil((end - this.memory.buffer.byteLength) / PAGE)
      try {
        this.memory.grow(Math.max(pages, Math.min(256, MAX_PAGES - this.memory.buffer.byteLength / PAGE)))
      } catch {
        if (this.memory.buffer.byteLength >= end) break
        return undefined
      }
    }
    return { at, size }
  }
}

let current: Heap | undefined
let failed = false

/**
 * This thread's heap, made on first use (undefined if WebAssembly with SIMD and shared memory cannot run here,
 * in which case the engine runs its JavaScript kernels).
 */
export const heap = (): Heap | undefined => {
  if (current === undefined && !failed) {
    try {
      current = new Heap()
    } catch {
      failed = true
    }
  }
  return current
}

/** Makes this thread's heap over another thread's memory (the decoding thread, before any use). */
export const useMemory = (memory: WasmMemory): Heap => {
  current = new Heap(memory)
  return current
}

/**
 * A Float32Array of n zeros in the heap when it has room, else in an ordinary shared buffer. With `zeroed` false, a
 * block reused in the heap keeps what its last owner wrote (for a caller that writes all of it first).
 */
export const engineFloat32 = (n: number, zeroed = true): Float32Array =>
  heap()?.f32(n, zeroed) ?? new Float32Array(new SharedArrayBuffer(n * 4))

/** The byte address of element `offset` of a view of the heap. */
export const ptr = (array: ArrayBufferView, offset = 0): number => array.byteOffset + offset * 4
