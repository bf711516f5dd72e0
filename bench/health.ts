/**
 * How long `/v1/health` waits on a busy embedded server: its latency (p50, p99, max) idle (the baseline), then
 * with 64 chat completions in flight, whole and streamed, then with 16 long prompts (`--prompt` tokens each, all different, on the
 * 2,048-token model: each runs its prompt a chunk at a time), then with 64 completions and an RL job training
 * at once; then the sampled tokens/s of one completion and of 64 at once, side by side.
 *
 *   npx tsx bench/health.ts [--probes=200] [--tokens=300] [--prompt=1500]
 *
 * The server is the real `effect-rl serve` in a separate process (`serverProcess.ts`). Probes are sent one at
 * a time, 10 ms apart, while the load runs; each phase's load is sized to outlast its probes. The figures
 * include this client's own event loop, which is idle apart from the probes and the load's sockets.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { startServer, stopServer } from "./serverProcess.js"

const arg = (name: string, fallback: number) => {
  const hit = process.argv.find((a) => a.startsWith(`--${name}=`))
  return hit === undefined ? fallback : Number(hit.slice(name.length + 3))
}
const PROBES = arg("probes", 200)
const TOKENS = arg("tokens", 300)
const PROMPT = arg("prompt", 1500)

const dir = mkdtempSync(join(tmpdir(), "effect-rl-bench-health-"))
const key = `bench-${crypto.randomUUID()}`
const server = await startServer(dir, key)
const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
const post = (path: string, body: unknown) =>
  fetch(`${server.url}${path}`, { method: "POST", headers, body: JSON.stringify(body) }).then(async (r) => {
    const json = (await r.json()) as unknown
    if (!r.ok) throw new Error(`${path}: ${r.status} ${JSON.stringify(json)}`)
    return json
  })
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const probe = async (until: () => boolean) => {
  const times: Array<number> = []
  while (times.length < PROBES && until()) {
    const t0 = performance.now()
    const reply = await fetch(`${server.url}/v1/health`, { headers })
    await reply.arrayBuffer()
    times.push(performance.now() - t0)
    await sleep(10)
  }
  times.sort((a, b) => a - b)
  const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))]!
  return { n: times.length, p50: at(0.5), p99: at(0.99), max: times.at(-1)! }
}

const completions = () =>
  Array.from({ length: 64 }, (_, i) =>
    post("/v1/chat/completions", {
      model: "effect-rl/tiny",
      messages: [{ role: "user", content: "go" }],
      max_tokens: TOKENS,
      ignore_eos: true,
      seed: i
    })
  )

/** Sixty-four streamed completions, each read to its end (`data: [DONE]`). */
const streamedCompletions = () =>
  Array.from({ length: 64 }, (_, i) =>
    fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers,
      body: JSON.stringify({
        model: "effect-rl/tiny",
        messages: [{ role: "user", content: "go" }],
        max_tokens: TOKENS,
        ignore_eos: true,
        seed: i,
        stream: true
      })
    }).then(async (r) => {
      const text = await r.text()
      if (!r.ok || !text.includes("data: [DONE]")) throw new Error(`stream: ${r.status} ${text.slice(0, 200)}`)
      return text
    })
  )

/** Sampled tokens per second of `count` completions of `TOKENS` tokens at once, over the server's API. */
const throughput = async (count: number) => {
  const t0 = performance.now()
  await Promise.all(
    Array.from({ length: count }, (_, i) =>
      post("/v1/chat/completions", {
        model: "effect-rl/tiny",
        messages: [{ role: "user", content: "go" }],
        max_tokens: TOKENS,
        ignore_eos: true,
        seed: 1000 + i
      })
    )
  )
  return (count * TOKENS) / ((performance.now() - t0) / 1000)
}

/** Sixteen prompts of about `--prompt` tokens, each different from its first byte (no shared prefix). */
const longPrompts = () =>
  Array.from({ length: 16 }, (_, i) =>
    post("/v1/chat/completions", {
      model: "effect-rl/tiny-2k",
      messages: [{ role: "user", content: `${i} `.padEnd(PROMPT - 20, "abcdefgh ") }],
      max_tokens: 8,
      seed: i
    })
  )

const show = (name: string, r: Awaited<ReturnType<typeof probe>>, base?: Awaited<ReturnType<typeof probe>>) =>
  console.log(
    `${name.padEnd(40)} ${String(r.n).padStart(4)} probes: p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms, max ${r.max.toFixed(1)} ms${base === undefined ? "" : ` (p99 ${(r.p99 / base.p99).toFixed(1)}x idle)`}`
  )

/** Probes while 64 completions run (from 100 ms after they start until they end), then waits for them. */
const underLoad = async (requests: () => ReadonlyArray<Promise<unknown>> = completions) => {
  let busy = true
  const load = Promise.all(requests()).finally(() => {
    busy = false
  })
  // A failure surfaces at `await load`, inside the caller's try (the server is stopped whatever happens).
  load.catch(() => undefined)
  await sleep(100)
  const probed = await probe(() => busy)
  await load
  return probed
}

try {
  console.log(`load average ${loadavg()[0]!.toFixed(2)}`)
  const idle = await probe(() => true)
  show("idle (baseline)", idle)

  show("64 completions in flight", await underLoad(), idle)
  show("64 streamed completions in flight", await underLoad(streamedCompletions), idle)
  show(`16 prompts of ${PROMPT} tokens in flight`, await underLoad(longPrompts), idle)

  // A large RL job: 64 choices of 200 tokens in 8 groups, then the same 64 completions while it trains.
  const model = (await post("/v1/preview/models", {
    project: "bench",
    name: "health",
    base_model: "effect-rl/tiny"
  })) as {
    id: string
  }
  const sampled = (await post("/v1/chat/completions", {
    model: "effect-rl/tiny",
    messages: [{ role: "user", content: "go" }],
    n: 64,
    max_tokens: 200,
    ignore_eos: true,
    logprobs: true
  })) as { choices: ReadonlyArray<unknown> }
  const groups = Array.from({ length: 8 }, (_, g) => ({
    trajectories: Array.from({ length: 8 }, (_, i) => ({
      messages_and_choices: [{ role: "user", content: "go" }, sampled.choices[g * 8 + i]],
      reward: i % 2
    }))
  }))
  await post("/v1/preview/training-jobs", { model_id: model.id, trajectory_groups: groups })
  show("64 completions and an RL job training", await underLoad(), idle)

  // Throughput over the API, side by side: one completion alone, then 64 at once (each twice, the better kept).
  const one = Math.max(await throughput(1), await throughput(1))
  const many = Math.max(await throughput(64), await throughput(64))
  console.log(
    `sampled tokens/s over the API: 1 completion ${one.toFixed(0)}, 64 concurrent ${many.toFixed(0)} (${(many / one).toFixed(2)}x); load average ${loadavg()[0]!.toFixed(2)}`
  )
} finally {
  await stopServer(server.child)
  rmSync(dir, { recursive: true, force: true })
}
