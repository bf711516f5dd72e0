/**
 * The local engine's speed: sampled tokens/s (one sequence at a time, and 32 decoded in lockstep), trained
 * tokens/s, and the time of one RL step on 64 short trajectories (8 groups of 8 sharing a prompt, and 64
 * distinct prompts), beside the FLOP/s of a plain typed-array matrix multiply (256^3, naive i-k-j over
 * Float32Array) measured in the same run. Engine FLOPs are counted analytically (matrix products and
 * attention; a training step is 3x the forward pass). Times are the best of several runs. Then completions on
 * the decoding scheduler, as the server runs them: tokens/s of one alone and of 64 at once, batched (the default:
 * steps shared with the decoding thread when there are two cores), batched on one thread, and with batching off,
 * side by side. Between the two: the WebAssembly kernels (the default) against the JavaScript loops they replaced
 * (`kernels: "js"`), same workloads in alternating rounds, GFLOP/s min / median / max of each, beside numpy's
 * float32 product on one core (`OPENBLAS_NUM_THREADS=1`) at the engine's shapes and row counts. The decoding
 * workloads sample each token with the bench's own sampler, the same code in both arms: probabilities by the
 * process's WebAssembly log-softmax (the JavaScript arm's logits copied into its memory first), then a walk of
 * their cumulative sum (it took a `Math.exp` per token of the vocabulary walked, about a tenth of the 32-lane
 * lockstep's time). Run: `npx tsx bench/engine.ts`.
 */
import { spawnSync } from "node:child_process"
import { loadavg } from "node:os"
import * as Effect from "effect/Effect"
import type { ChatCompletionRequest } from "../src/api/ChatCompletion.js"
import { makeAdamState } from "../src/local/engine/Optimizer.js"
import { decodeThread } from "../src/local/engine/policy/DecodeThread.js"
import { logSoftmaxInto } from "../src/local/engine/policy/Kernels.js"
import { Policy } from "../src/local/engine/policy/Policy.js"
import { DEFAULT_POLICY_CONFIG, forwardFlopsPerToken } from "../src/local/engine/policy/PolicyConfig.js"
import { heap, ptr } from "../src/local/engine/policy/Wasm.js"
import { Rng } from "../src/local/engine/Random.js"
import { completeEffect } from "../src/local/engine/Sampler.js"
import { batching } from "../src/local/engine/sampler/Batcher.js"
import { type RlGroup, trainRl } from "../src/local/engine/Trainer.js"

/**
 * The best wall time (ms) of `fn` over `runs` runs after `warmup` untimed ones: the least disturbed by other
 * processes on a shared machine (the load average is printed with the table).
 */
const time = (fn: () => void, runs: number, warmup = 2): number => {
  for (let i = 0; i < warmup; i++) fn()
  const ms: Array<number> = []
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now()
    fn()
    ms.push(performance.now() - t0)
  }
  return Math.min(...ms)
}

// --- Reference: a plain typed-array matrix multiply ---------------------------------------------------------
const N = 256
const A = new Float32Array(N * N)
const B = new Float32Array(N * N)
const C = new Float32Array(N * N)
const rng = new Rng(1)
for (let i = 0; i < N * N; i++) {
  A[i] = rng.float() - 0.5
  B[i] = rng.float() - 0.5
}
const matmul = (): void => {
  C.fill(0)
  for (let i = 0; i < N; i++) {
    for (let k = 0; k < N; k++) {
      const a = A[i * N + k]!
      for (let j = 0; j < N; j++) C[i * N + j] = C[i * N + j]! + a * B[k * N + j]!
    }
  }
}
const refFlops = (2 * N * N * N) / (time(matmul, 7) / 1000)

// --- The engine -------------------------------------------------------------------------------------------
const config = DEFAULT_POLICY_CONFIG
const policy = Policy.create(config, { seed: 1 })
const V = config.vocabSize
const d = config.dModel
const blockFlops = 2 * config.nLayers * (4 * d * d + 2 * d * config.dFf)
const attentionFlops = (context: number) => config.nLayers * 4 * d * context
const headFlops = 2 * d * V

const rows: Array<[string, string, string, number]> = []
const add = (name: string, value: string, unit: string, flops: number) => rows.push([name, value, unit, flops])
add("matmul 256^3 (naive i-k-j, Float32Array)", (refFlops / 1e9).toFixed(3), "GFLOP/s", refFlops)

// Sampling: a 32-token prompt, then 32 sampled tokens (softmax at temperature 1).
const prompt = Array.from({ length: 32 }, () => 32 + rng.int(90))
// The bench's sampler (the same in every arm): the probabilities by the process's WebAssembly log-softmax (the
// logits read in place when they are in its memory, else copied there first), then the first token whose
// cumulative probability passes a uniform draw. (The JavaScript fallback where WebAssembly cannot run.)
const W = heap()
const lp = W?.f32(V) ?? new Float32Array(V)
const probs = W?.f32(V) ?? new Float32Array(V)
const staged = W?.f32(V) ?? new Float32Array(V)
const sampleFrom = (logits: Float32Array, off: number): number => {
  let u = rng.float()
  if (W === undefined) {
    logSoftmaxInto(lp, 0, logits, off, V)
    for (let v = 0; v < V; v++) probs[v] = Math.exp(lp[v]!)
  } else if (W.has(logits)) {
    W.kernels.logSoftmax(ptr(lp), ptr(probs), ptr(logits, off), V, 0)
  } else {
    staged.set(logits.subarray(off, off + V))
    W.kernels.logSoftmax(ptr(lp), ptr(probs), ptr(staged), V, 0)
  }
  for (let v = 0; v < V; v++) {
    u -= probs[v]!
    if (u < 0) return v
  }
  return V - 1
}
const decodeFlops = forwardFlopsPerToken(config, 48) // mean context of the sampled tokens
const GEN = 32
const LANES = 32
// Each run gives its decoding states back at its end, as the engine's sampler does with a finished completion's
// (`LanguageModel.release`): without, every run's states and grown caches were fresh memory (its page faults), a cost
// the server does not pay: the prompt and forks took 22-27% of a 32-lane lockstep run against 7-8% with the states
// given back, and the whole run about 1.6x as long (2026-12-02, alternating runs).
const sequentialOf = (p: Policy) => () => {
  const state = p.prefill(prompt)
  for (let i = 0; i < GEN; i++) p.advance(state, sampleFrom(p.logits(state), 0))
  p.release(state)
}
const lockstepOf = (p: Policy) => {
  const out = p.heap?.f32(LANES * V) ?? new Float32Array(LANES * V)
  const picks = new Int32Array(LANES)
  return () => {
    const root = p.prefill(prompt)
    const states = Array.from({ length: LANES }, () => p.fork(root))
    for (let i = 0; i < GEN; i++) {
      p.logitsMany(states, out)
      for (let b = 0; b < LANES; b++) picks[b] = sampleFrom(out, b * V)
      p.advanceMany(states, picks)
    }
    for (const state of states) p.release(state)
    p.release(root)
  }
}
const sequentialMs = time(sequentialOf(policy), 7)
const seqTps = GEN / (sequentialMs / 1000)
add("sampled tokens/s, 1 sequence", seqTps.toFixed(0), "tokens/s", seqTps * decodeFlops)
const batchedMs = time(lockstepOf(policy), 5)
const batTps = (LANES * GEN) / (batchedMs / 1000)
add(`sampled tokens/s, ${LANES} sequences in lockstep`, batTps.toFixed(0), "tokens/s", batTps * decodeFlops)

// Training batches: 64 trajectories of a 32-token prompt and a 16-token completion.
interface Batch {
  readonly groups: Array<RlGroup>
  readonly ids: Array<Int32Array>
  readonly mask: Array<Uint8Array>
}
const makeBatch = (groups: number, perGroup: number, promptLen: number, completionLen: number): Batch => {
  const out: Array<RlGroup> = []
  for (let g = 0; g < groups; g++) {
    const p = Array.from({ length: promptLen }, () => 32 + rng.int(90))
    out.push({
      items: Array.from({ length: perGroup }, (_, k) => {
        const ids = Int32Array.from([...p, ...Array.from({ length: completionLen }, () => 32 + rng.int(90))])
        const mask = Uint8Array.from(ids, (_, t) => (t >= promptLen ? 1 : 0))
        const logprobs = Float32Array.from(ids, () => Number.NaN)
        return { sequence: { ids, mask, logprobs }, reward: k % 2 }
      })
    })
  }
  const items = out.flatMap((g) => g.items)
  return { groups: out, ids: items.map((i) => i.sequence.ids), mask: items.map((i) => i.sequence.mask) }
}
/** Training FLOPs of a batch: 3x the forward pass over its distinct rows (prefix tree) and its logit rows. */
const trainFlopsOf = (batch: Batch): { readonly flops: number; readonly rows: number; readonly tokens: number } => {
  const seen = new Set<string>()
  const predicted = new Set<string>()
  let flops = 0
  let tokens = 0
  batch.ids.forEach((ids, s) => {
    tokens += ids.length
    let key = ""
    for (let t = 0; t < ids.length; t++) {
      key += `${ids[t]},`
      if (!seen.has(key)) {
        seen.add(key)
        flops += blockFlops + attentionFlops(t + 1)
      }
      if (t + 1 < ids.length && batch.mask[s]![t + 1] === 1 && !predicted.has(key)) {
        predicted.add(key)
        flops += headFlops
      }
    }
  })
  return { flops: 3 * flops, rows: seen.size, tokens }
}

const shared = makeBatch(8, 8, 32, 16)
const sharedCost = trainFlopsOf(shared)
const fwdBwdMs = time(() => {
  policy.forwardBatch(shared.ids, shared.mask)
  policy.zeroGrads()
  policy.backwardBatch(shared.mask.map((m) => Float64Array.from(m, (x) => x * 1e-3)))
}, 5)
add(
  `trained tokens/s (forward+backward, 64 x 48 tokens -> ${sharedCost.rows} rows)`,
  (sharedCost.tokens / (fwdBwdMs / 1000)).toFixed(0),
  "tokens/s",
  sharedCost.flops / (fwdBwdMs / 1000)
)

const opt = makeAdamState(policy.parameterCount)
const stepMs = time(() => trainRl(policy, opt, shared.groups, { learning_rate: 1e-4 }), 5)
add(
  "RL step, 64 trajectories (8 groups x 8, 32 + 16 tokens)",
  stepMs.toFixed(0),
  "ms",
  sharedCost.flops / (stepMs / 1000)
)
const distinct = makeBatch(64, 1, 32, 16)
// Groups of one are skipped, so pair them up as 32 groups of two distinct prompts' rollouts, rewards 0 and 1.
const pairs: Array<RlGroup> = []
for (let i = 0; i < 64; i += 2) {
  const [a, b] = [distinct.groups[i]!.items[0]!, distinct.groups[i + 1]!.items[0]!]
  pairs.push({ items: [a, { ...b, reward: 1 - a.reward }] })
}
const distinctCost = trainFlopsOf(distinct)
const distinctMs = time(() => trainRl(policy, opt, pairs, { learning_rate: 1e-4 }), 3)
add(
  "RL step, 64 trajectories with distinct prompts (no sharing)",
  distinctMs.toFixed(0),
  "ms",
  distinctCost.flops / (distinctMs / 1000)
)

// --- Table ----------------------------------------------------------------------------------------------
const header = ["measurement", "value", "unit", "GFLOP/s", "of matmul"]
const table = [
  header,
  ...rows.map(([name, value, unit, flops]) => [
    name,
    value,
    unit,
    (flops / 1e9).toFixed(3),
    `${((100 * flops) / refFlops).toFixed(0)}%`
  ])
]
const widths = header.map((_, c) => Math.max(...table.map((r) => r[c]!.length)))
const line = (r: ReadonlyArray<string>) =>
  r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join("  ")
console.log(
  `policy: ${policy.parameterCount} parameters (d=${d}, ${config.nLayers} layers, ${config.nHeads} heads, ` +
    `ff=${config.dFf}, context ${config.contextLength}); node ${process.version}; ` +
    `load average ${loadavg()
      .map((x) => x.toFixed(2))
      .join(" ")}; best of several runs`
)
console.log(line(table[0]!))
console.log(widths.map((w) => "-".repeat(w)).join("  "))
for (const r of table.slice(1)) console.log(line(r))

// --- WebAssembly kernels against the JavaScript ones, and against numpy/OpenBLAS on one core -------------------
// The same three workloads on a policy running the WebAssembly kernels (the default) and one running the
// JavaScript loops they replaced (`kernels: "js"`), same seed, in alternating rounds so that load on the shared
// machine falls on both alike: GFLOP/s of each round, min / median / max, and the ratio of the medians.
const ROUNDS = 5
const jsPolicy = Policy.create(config, { seed: 1, kernels: "js" })
const trainOf = (p: Policy) => () => {
  p.forwardBatch(shared.ids, shared.mask)
  p.zeroGrads()
  p.backwardBatch(shared.mask.map((m) => Float64Array.from(m, (x) => x * 1e-3)))
}
const workloads = [
  { name: "decoding, 1 sequence", flops: GEN * decodeFlops, of: sequentialOf, runs: 5 },
  { name: `decoding, ${LANES} in lockstep`, flops: LANES * GEN * decodeFlops, of: lockstepOf, runs: 3 },
  { name: `training (forward+backward, ${sharedCost.rows} rows)`, flops: sharedCost.flops, of: trainOf, runs: 3 }
]
const rates = workloads.map(() => ({ wasm: [] as Array<number>, js: [] as Array<number> }))
for (let round = 0; round < ROUNDS; round++) {
  workloads.forEach((w, i) => {
    rates[i]!.wasm.push(w.flops / (time(w.of(policy), w.runs, 1) / 1000) / 1e9)
    rates[i]!.js.push(w.flops / (time(w.of(jsPolicy), w.runs, 1) / 1000) / 1e9)
  })
}
const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const spread = (xs: ReadonlyArray<number>) =>
  `${Math.min(...xs).toFixed(2)} / ${median(xs).toFixed(2)} / ${Math.max(...xs).toFixed(2)}`

// numpy's float32 product on one core at the engine's shapes (each block's four products and the head, as
// `A B^T` with the engine's row counts): what one core of this machine does, the ceiling to quote.
const numpyScript = `
import json, sys, time
import numpy as np
d, F, V, layers = ${d}, ${config.dFf}, ${V}, ${config.nLayers}
shapes = [(3 * d, d), (d, d), (F, d), (d, F)] * layers + [(V, d)]
out = {}
rng = np.random.default_rng(0)
for rows in json.loads(sys.argv[1]):
    mats = [(rng.standard_normal((rows, k), dtype=np.float32), rng.standard_normal((n, k), dtype=np.float32)) for n, k in shapes]
    flops = sum(2 * rows * n * k for n, k in shapes)
    best = []
    for r in range(7):
        reps = max(1, int(2e7 // flops))
        t = time.perf_counter()
        for _ in range(reps):
            for a, b in mats:
                a @ b.T
        best.append(flops * reps / (time.perf_counter() - t) / 1e9)
    best.sort()
    out[rows] = [best[0], best[3], best[-1]]
print(json.dumps(out))
`
const numpyRows = [1, LANES, Math.round(sharedCost.rows)]
const numpyEnv: Record<string, string | undefined> = { ...process.env, OPENBLAS_NUM_THREADS: "1" }
delete numpyEnv.OPENBLAS_CORETYPE
delete numpyEnv.OPENBLAS_L2_SIZE
const numpy = spawnSync("python3", ["-c", numpyScript, JSON.stringify(numpyRows)], { env: numpyEnv, encoding: "utf8" })
const numpyRates: Record<string, [number, number, number]> | undefined =
  numpy.status === 0 ? JSON.parse(numpy.stdout) : undefined
console.log("")
console.log(
  `WebAssembly SIMD kernels against the JavaScript ones (same process, ${ROUNDS} alternating rounds, each the best of a few runs; ` +
    `GFLOP/s min / median / max; load average ${loadavg()[0]!.toFixed(2)}: on a shared machine the figures are noisy):`
)
workloads.forEach((w, i) => {
  const r = rates[i]!
  const rows = [1, LANES, Math.round(sharedCost.rows)][i]!
  const np = numpyRates?.[String(rows)]
  console.log(
    `  ${w.name.padEnd(44)} wasm ${spread(r.wasm).padStart(20)}   js ${spread(r.js).padStart(18)}   ` +
      `wasm/js ${(median(r.wasm) / median(r.js)).toFixed(1)}x   ` +
      (np === undefined
        ? "numpy: not run"
        : `numpy 1 core, ${rows} rows: ${np.map((x) => x.toFixed(1)).join(" / ")} (wasm median ${((100 * median(r.wasm)) / np[1]).toFixed(0)}%)`)
  )
})
if (numpyRates === undefined) console.log(`  (numpy not available: ${numpy.error?.message ?? numpy.stderr.trim()})`)

// --- Completions on the decoding scheduler: one alone, and 64 at once, batched and not --------------------
// What the server does with chat completions in flight (`runRounds` on the process's decoding scheduler). With
// batching (the default) the 64 decode in shared steps, one forward pass per step over all their rows; without
// it, each takes its own steps in turn. Each completion: a short prompt, 200 sampled tokens (ignore_eos). Beside
// tokens/s (wall, and per CPU second: this process's own work, less sensitive to other load on the machine), the
// gaps between 1 ms timers while they run: how long other work on the event loop (a `/v1/health` probe) waits.
const TOKENS = 200
const completion = (seed: number): ChatCompletionRequest => ({
  messages: [{ role: "user", content: `question ${seed}` }],
  max_tokens: TOKENS,
  ignore_eos: true,
  seed
})
const served = Policy.create(config, { seed: 2 })
interface Run {
  readonly wall: number
  readonly cpu: number
  readonly gapP99: number
}
const threads = decodeThread.enabled
const onScheduler = async (count: number, batched: boolean, threaded = threads): Promise<Run> => {
  batching.enabled = batched
  decodeThread.enabled = threaded
  const gaps: Array<number> = []
  let last = performance.now()
  let running = true
  const tick = () => {
    const now = performance.now()
    gaps.push(now - last)
    last = now
    if (running) setTimeout(tick, 1)
  }
  setTimeout(tick, 1)
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  await Effect.runPromise(
    Effect.all(
      Array.from({ length: count }, (_, i) => completeEffect(served, completion(i), { modelName: "bench" })),
      { concurrency: "unbounded" }
    )
  )
  const seconds = (performance.now() - t0) / 1000
  const cpu = process.cpuUsage(cpu0)
  running = false
  batching.enabled = true
  decodeThread.enabled = threads
  gaps.sort((a, b) => a - b)
  return {
    wall: (count * TOKENS) / seconds,
    cpu: (count * TOKENS) / ((cpu.user + cpu.system) / 1e6),
    gapP99: gaps[Math.floor(0.99 * (gaps.length - 1))] ?? 0
  }
}
/** Runs the three configurations in turn, `rounds` times (so that load on the machine falls on all alike). */
const results = {
  one: [] as Array<Run>,
  many: [] as Array<Run>,
  manyAlone: [] as Array<Run>,
  manyOff: [] as Array<Run>
}
// The decoding thread (on by default with two cores) is started and warmed first.
await decodeThread.get()?.whenReady()
await onScheduler(8, true)
await onScheduler(64, true)
for (let r = 0; r < 3; r++) {
  results.one.push(await onScheduler(1, true))
  results.many.push(await onScheduler(64, true))
  results.manyAlone.push(await onScheduler(64, true, false))
  results.manyOff.push(await onScheduler(64, false, false))
}
const top = (runs: Array<Run>): Run => ({
  wall: Math.max(...runs.map((x) => x.wall)),
  cpu: Math.max(...runs.map((x) => x.cpu)),
  gapP99: Math.min(...runs.map((x) => x.gapP99))
})
const [one, many, manyAlone, manyOff] = [
  top(results.one),
  top(results.many),
  top(results.manyAlone),
  top(results.manyOff)
]
const show = (name: string, x: Run) =>
  console.log(
    `  ${name.padEnd(30)} ${x.wall.toFixed(0).padStart(6)} tokens/s (${(x.wall / one.wall).toFixed(2)}x one)  ` +
      `${x.cpu.toFixed(0).padStart(6)} tokens/CPU-s (${(x.cpu / one.cpu).toFixed(2)}x)  timer gap p99 ${x.gapP99.toFixed(1)} ms`
  )
console.log("")
console.log(
  `completions on the decoding scheduler (${TOKENS} tokens each; best of 3 interleaved runs; load average ${loadavg()[0]!.toFixed(2)}):`
)
show("1 completion", one)
show(`64 concurrent, batched${decodeThread.enabled ? " (2 threads)" : ""}`, many)
show("64 concurrent, batched, 1 thread", manyAlone)
show("64 concurrent, batching off", manyOff)
console.log(
  `  batched / batching off at 64: ${(many.wall / manyOff.wall).toFixed(2)}x tokens/s, ${(many.cpu / manyOff.cpu).toFixed(2)}x tokens/CPU-s`
)
