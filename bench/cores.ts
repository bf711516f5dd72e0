/**
 * Whether a second thread makes the local engine's decoding faster on this machine: the most it could give,
 * measured without any coordination cost. The main thread and a worker each decode their own 32 sequences
 * (the same seeded policy, each its own copy: nothing shared, nothing waited for), first the main thread alone,
 * then both at once; the figure is the rows both decode per second together against one alone. Beside it the
 * same for a loop of dependent floating-point adds (bound by the latency of one add, not by the core's
 * throughput), which two hardware threads on one core also run at twice the rate: it tells two cores that
 * really compute side by side from two that share one core's arithmetic and caches.
 *
 *   npx tsx bench/cores.ts [--rounds=5]
 *
 * A splitting of decoding steps across threads (tried: rows of different sequences to a worker over shared
 * memory, bit for bit the same results) can only reach the engine's figure here, less its coordination.
 */
import { availableParallelism, loadavg } from "node:os"
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads"
import { Policy } from "../src/local/engine/policy/Policy.js"
import { DEFAULT_POLICY_CONFIG } from "../src/local/engine/policy/PolicyConfig.js"

type Kind = "engine" | "latency"

/** Decodes 32 sequences of 100 prompt tokens for `steps` batched steps; returns the rows per second. */
const engine = (steps: number): number => {
  const policy = Policy.create(DEFAULT_POLICY_CONFIG, { seed: 2 })
  const states = Array.from({ length: 32 }, (_, i) =>
    policy.prefill(Array.from({ length: 100 }, (_, t) => (t * 7 + i) % 250))
  )
  const ids = states.map((_, i) => [i % 200])
  policy.extendMany(states, ids)
  const started = performance.now()
  for (let k = 0; k < steps; k++) policy.extendMany(states, ids)
  return (32 * steps) / ((performance.now() - started) / 1000)
}

/** A chain of dependent adds; returns millions of adds per second. */
const latency = (adds: number): number => {
  let x = 1.000001
  let s = 0
  const started = performance.now()
  for (let i = 0; i < adds; i++) {
    s += x * 1.0000001
    x = x * 0.9999999 + 1e-9
  }
  const seconds = (performance.now() - started) / 1000
  return s === -1 ? 0 : adds / seconds / 1e6
}

const work = (kind: Kind): number => (kind === "engine" ? engine(150) : latency(1e8))

if (!isMainThread && parentPort !== null) {
  const port = parentPort
  port.on("message", (kind: Kind) => port.postMessage(work(kind)))
  port.postMessage(workerData)
} else {
  const arg = process.argv.find((a) => a.startsWith("--rounds="))
  const rounds = arg === undefined ? 5 : Number(arg.slice("--rounds=".length))
  const self = new URL(import.meta.url)
  const worker = self.pathname.endsWith(".ts")
    ? new Worker(
        `import("tsx/esm/api").then((tsx) => { tsx.register(); return import(${JSON.stringify(self.href)}) })`,
        { eval: true, workerData: "ready" }
      )
    : new Worker(self, { workerData: "ready" })
  await new Promise((resolve) => worker.once("message", resolve))
  const answer = () => new Promise<number>((resolve) => worker.once("message", resolve))
  const figures = (kind: Kind) => {
    const alone: Array<number> = []
    const together: Array<number> = []
    return { kind, alone, together }
  }
  const results = [figures("engine"), figures("latency")]
  // Interleaved rounds (alone, then both), so that other load on the machine falls on both alike.
  for (let round = 0; round < rounds; round++) {
    for (const r of results) {
      r.alone.push(work(r.kind))
      const other = answer()
      worker.postMessage(r.kind)
      const mine = work(r.kind)
      r.together.push(mine + (await other))
    }
  }
  await worker.terminate()
  const best = (xs: ReadonlyArray<number>) => Math.max(...xs)
  console.log(
    `${availableParallelism()} CPUs; node ${process.version}; load average ${loadavg()
      .map((x) => x.toFixed(2))
      .join(" ")}; best of ${rounds} interleaved rounds`
  )
  for (const r of results) {
    const unit = r.kind === "engine" ? "decoded rows/s (32 sequences, batched steps)" : "M dependent adds/s"
    const one = best(r.alone)
    const two = best(r.together)
    console.log(
      `${r.kind.padEnd(8)} one thread ${one.toFixed(0).padStart(8)}, two threads ${two.toFixed(0).padStart(8)} ${unit}: ${(two / one).toFixed(2)}x`
    )
  }
}
