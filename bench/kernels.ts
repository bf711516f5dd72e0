/**
 * The WebAssembly kernels alone, at the engine's shapes, and a change to them against what it replaces: compiles
 * `wasm/kernels.as` as it is now and, with `--against`, another version of it (a file, or `git:<rev>` for the file
 * at a revision; default `git:HEAD`), runs the same calls on both, says whether every output has the same bits, and
 * times each call in alternating rounds (median of five rounds, each the best of five runs).
 *
 * The workloads: the matrix products of a training step (1,280 packed rows: forward `A B^T`, the backward's
 * products of the output gradient by the weights and by the inputs) and of a decoding step of 32 sequences, in
 * GFLOP/s; attention of one row over n rows in view (the engine's 4 heads of 12), forward and backward, in ns a
 * row in view. Bits first: a change that means to keep them (the engine's batched decoding equals unbatched, a
 * checkpoint decodes the same) shows `same bits` on every line; one that changes them is a change of numerics
 * (`docs/development.md`, `bench:kernels`).
 *
 * Run: `npm run bench:kernels [-- --against git:HEAD~1 | --against /path/to/kernels.as] [--heads 4 --head-width 12]`.
 */
import { execFileSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { loadavg } from "node:os"
import { compileKernels } from "../scripts/build-wasm.mjs"
import type { Kernels, WasmApi } from "../src/local/engine/policy/Wasm.js"

const flag = (name: string): string | undefined => {
  const at = process.argv.indexOf(`--${name}`)
  return at === -1 ? undefined : process.argv[at + 1]
}
const root = new URL("../", import.meta.url)
const against = flag("against") ?? "git:HEAD"
const H = Number(flag("heads") ?? 4)
const DH = Number(flag("head-width") ?? 12)
const D = H * DH

const sourceOf = (spec: string): string =>
  spec.startsWith("git:")
    ? execFileSync("git", ["show", `${spec.slice(4)}:wasm/kernels.as`], { cwd: root, encoding: "utf8" })
    : readFileSync(spec, "utf8")

/** A module instantiated over a memory of its own, with views of it. */
interface Instance {
  readonly k: Kernels
  readonly f32: Float32Array
  readonly i32: Int32Array
}
const Wasm = (globalThis as unknown as { readonly WebAssembly: WasmApi }).WebAssembly
const instantiate = async (text: string): Promise<Instance> => {
  const binary = await compileKernels(text)
  const memory = new Wasm.Memory({ initial: 2_000, maximum: 32_768, shared: true })
  const instance = new Wasm.Instance(new Wasm.Module(binary), { env: { memory, log: Math.log } })
  return {
    k: instance.exports as Kernels,
    f32: new Float32Array(memory.buffer),
    i32: new Int32Array(memory.buffer)
  }
}

// Regions of the memory (byte addresses): inputs filled alike in both modules, outputs compared.
const MB = 1 << 20
const IN = 1 * MB
const IN2 = 17 * MB
const OUT = 33 * MB
const ROWS = 49 * MB
const SCRATCH = 50 * MB
const ROWS_IN_VIEW = 1_024

/** A workload: what to fill, the call, the output's extent, and its size (flops, or rows in view). */
interface Workload {
  readonly name: string
  readonly unit: "GFLOP/s" | "ns/row"
  readonly size: number
  readonly outFloats: number
  readonly prepare: (m: Instance) => void
  readonly run: (m: Instance) => void
}

const fill = (m: Instance) => {
  for (let i = 0; i < 4 * MB; i++) m.f32[IN / 4 + i] = Math.sin(i * 0.37) * 0.5
  for (let i = 0; i < 4 * MB; i++) m.f32[IN2 / 4 + i] = Math.cos(i * 0.11) * 0.5
}
const clearOut = (m: Instance, floats: number) => m.f32.fill(0, OUT / 4, OUT / 4 + floats)

/** `C[M, N] = A[M, K] B[N, K]^T`. */
const nt = (name: string, M: number, N: number, K: number): Workload => ({
  name,
  unit: "GFLOP/s",
  size: 2 * M * N * K,
  outFloats: M * N,
  prepare: (m) => clearOut(m, M * N),
  run: (m) => m.k.matmulNT(OUT, N, IN, K, IN2, K, M, N, K, 0, 0)
})
/** `C[M, N] = A(M, K) B[K, N]`, A read as stored (`transposed`: stored K x M, as the weights' gradient reads it). */
const ax = (name: string, M: number, N: number, K: number, transposed: boolean): Workload => ({
  name,
  unit: "GFLOP/s",
  size: 2 * M * N * K,
  outFloats: M * N,
  prepare: (m) => clearOut(m, M * N),
  run: (m) =>
    transposed
      ? m.k.matmulAx(OUT, N, IN, 1, M, IN2, N, M, N, K, 0, 0)
      : m.k.matmulAx(OUT, N, IN, K, 1, IN2, N, M, N, K, 0, 0)
})
const viewRows = (m: Instance, n: number) => {
  for (let i = 0; i < n; i++) m.i32[ROWS / 4 + i] = (i * 7) % ROWS_IN_VIEW
}
/** One row's attention over n rows in view (keys at D, values at 2D of rows of 3D floats). */
const attend = (n: number): Workload => ({
  name: `attention, ${n} rows in view`,
  unit: "ns/row",
  size: n,
  outFloats: D + H * n,
  prepare: (m) => viewRows(m, n),
  // Output at OUT (D floats), weights right after it.
  run: (m) => m.k.attendRow(IN2, IN, 3 * D, D, 2 * D, ROWS, n, OUT, OUT + 4 * D, H, DH)
})
/** Its backward: adds to the gradients of the rows in view (at OUT, rows of 3D floats), reset before each call. */
const attendBackward = (n: number): Workload => ({
  name: `attention backward, ${n} rows`,
  unit: "ns/row",
  size: n,
  outFloats: 3 * D * ROWS_IN_VIEW,
  prepare: (m) => {
    viewRows(m, n)
    clearOut(m, 3 * D * ROWS_IN_VIEW)
    // The weights at SCRATCH, each head's summing to 1 (as attendRow leaves them); the kernel's own scratch after.
    for (let i = 0; i < H * n; i++) m.f32[SCRATCH / 4 + i] = 1 / n
  },
  run: (m) => m.k.attendRowBackward(IN2, IN, 5, SCRATCH, ROWS, n, OUT, H, DH, SCRATCH + 4 * H * n)
})

const R = 1_280
const V = 259
const workloads: ReadonlyArray<Workload> = [
  nt(`forward q,k,v (${R} x ${3 * D} x ${D})`, R, 3 * D, D),
  nt(`forward MLP up (${R} x ${4 * D} x ${D})`, R, 4 * D, D),
  nt(`forward MLP down (${R} x ${D} x ${4 * D})`, R, D, 4 * D),
  nt(`forward head (1024 x ${V} x ${D})`, 1_024, V, D),
  ax(`backward dX of q,k,v (${R} x ${D} x ${3 * D})`, R, D, 3 * D, false),
  ax(`backward dW of q,k,v (${3 * D} x ${D} x ${R})`, 3 * D, D, R, true),
  ax(`backward dW of MLP down (${D} x ${4 * D} x ${R})`, D, 4 * D, R, true),
  nt(`decoding q,k,v (32 x ${3 * D} x ${D})`, 32, 3 * D, D),
  nt(`decoding head (32 x ${V} x ${D})`, 32, V, D),
  attend(33),
  attend(130),
  attend(300),
  attendBackward(33),
  attendBackward(130)
]

/** The best time of five runs of `reps` calls, in ms a call. */
const best = (m: Instance, w: Workload, reps: number): number => {
  let min = Number.POSITIVE_INFINITY
  for (let run = 0; run < 5; run++) {
    w.prepare(m)
    const start = performance.now()
    for (let i = 0; i < reps; i++) w.run(m)
    min = Math.min(min, (performance.now() - start) / reps)
  }
  return min
}
const figure = (w: Workload, ms: number) => (w.unit === "GFLOP/s" ? w.size / ms / 1e6 : (ms * 1e6) / w.size)
const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const [now, before] = await Promise.all([
  instantiate(readFileSync(new URL("wasm/kernels.as", root), "utf8")),
  instantiate(sourceOf(against))
])
fill(now)
fill(before)
console.log(
  `WebAssembly kernels: wasm/kernels.as now (A) against ${against} (B); ${H} heads of ${DH}; node ${process.version}, load ${loadavg()[0]!.toFixed(2)}`
)
const rows: Array<string> = []
for (const w of workloads) {
  w.prepare(now)
  w.prepare(before)
  w.run(now)
  w.run(before)
  let differ = 0
  for (let i = OUT / 4; i < OUT / 4 + w.outFloats; i++) if (!Object.is(now.f32[i], before.f32[i])) differ++
  const reps = Math.max(3, Math.round((w.unit === "GFLOP/s" ? 2e8 / w.size : 2e6 / w.size) / 4))
  const a: Array<number> = []
  const b: Array<number> = []
  for (let round = 0; round < 5; round++) {
    a.push(figure(w, best(now, w, reps)))
    b.push(figure(w, best(before, w, reps)))
  }
  const [ma, mb] = [median(a), median(b)]
  // Higher is better for GFLOP/s, lower for ns a row: the ratio says how many times as fast A is.
  const speed = w.unit === "GFLOP/s" ? ma / mb : mb / ma
  rows.push(
    `  ${w.name.padEnd(42)} A ${ma.toFixed(1).padStart(6)}  B ${mb.toFixed(1).padStart(6)} ${w.unit.padEnd(7)}  A ${speed.toFixed(2)}x B  ${differ === 0 ? "same bits" : `${differ} of ${w.outFloats} outputs differ`}`
  )
  console.log(rows[rows.length - 1])
}
