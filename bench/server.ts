/**
 * The embedded server under load: 256 concurrent streaming chat completions from one client process.
 *
 *   npx tsx bench/server.ts [--concurrency=256] [--rounds=3] [--max-tokens=32] [--warmup=1] [--singles=8]
 *                           [--timeout-ms=300000] [--whole=1] [--server-cpu-prof=<dir>]
 *
 * The server is the real `effect-rl serve` (src/cli/main.ts) in a SEPARATE process, started as
 * `node --import tsx src/cli/main.ts serve --port 0 ...` (the `tsx` binary would put a wrapper process between us
 * and the server, whose memory we would then read), on a fresh data directory with a random API key (passed in
 * `EFFECT_RL_API_KEY`, out of the process list); the bench waits for its "effect-rl serving on <url>" line and
 * stops it with SIGTERM at the end, also on error or Ctrl-C (SIGKILL if it has not exited 10 s later).
 *
 * Each request is `POST /v1/chat/completions` with model `effect-rl/tiny`, one short user message, `max_tokens`,
 * `ignore_eos: true` (so that every request samples exactly `max_tokens` tokens: equal work per request) and a
 * fixed seed (its index in the round), sent with the global `fetch` (undici) and no connection limit. Streamed
 * requests (`stream: true`, `stream_options: {include_usage: true}`) are read event by event; a request counts
 * as good only if it got a 200, a usage chunk with `completion_tokens = max_tokens`, and `[DONE]` last. Failures
 * are counted and the first few printed.
 *
 * Measured per request: time to first token (TTFT: the first chunk with non-empty `delta.content`; the role
 * chunk does not count), total latency, completion tokens. Per phase: requests/s and tokens/s (good requests
 * over the phase's wall time), p50/p99 of latency and TTFT, the server's peak RSS in the phase (the kernel's
 * VmHWM after resetting it through `/proc/<pid>/clear_refs` at the phase start; else the max of VmRSS sampled
 * every 10 ms), the server's CPU time per request (`/proc/<pid>/stat`; the figure least moved by other load on
 * the machine), and the CPU use of the server and of this client process as a share of one core over the phase
 * (a server well under 100% while requests wait means it was starved by other processes, or idle on I/O).
 * Two diagnostics of streaming: "spread" is the time from a stream's first content delta to its last (0 when
 * the whole stream arrives at once), "reads" the mean number of body reads per stream that returned data.
 *
 * Phases, after `--warmup` untimed rounds of each kind:
 *   (a) single         `--singles` streamed requests one at a time: the unloaded latency, the baseline
 *   (b) streamed x N   `--concurrency` streamed requests sent at once (the burst ends when the last one does)
 *   (c) whole x N      the same requests with `stream: false` (one JSON body each)
 * in `--rounds` rounds of (a), (b), (c), so that a change of machine load over the run hits all three alike.
 * The "vs single" column is the phase's requests/s over the single phase's (1 / its mean latency): how much
 * more the server gets done with N in flight than one at a time.
 *
 * `--server-cpu-prof=<dir>` starts the server with `--cpu-prof --cpu-prof-dir=<dir>` (written when it stops);
 * `--whole=0` leaves out (c), for a profile of the streamed path alone.
 */
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { cpus, loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { fmt, intFlag, printTable } from "./harness.js"
import { cpuSeconds, memory, resetPeak, type Server, startServer, stopServer } from "./serverProcess.js"

const concurrency = intFlag("concurrency", 256)
const rounds = intFlag("rounds", 3)
const maxTokens = intFlag("max-tokens", 32)
const warmup = intFlag("warmup", 1)
const singles = intFlag("singles", 8)
const timeoutMs = intFlag("timeout-ms", 300_000)
const withWhole = intFlag("whole", 1) === 1
const cpuProfDir = process.argv.find((a) => a.startsWith("--server-cpu-prof="))?.slice("--server-cpu-prof=".length)

const MODEL = "effect-rl/tiny"

// ---------------------------------------------------------------------------------------------------------
// the server process
// ---------------------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------------------
// one request
// ---------------------------------------------------------------------------------------------------------

interface Outcome {
  readonly ok: boolean
  readonly error?: string | undefined
  readonly latencyMs: number
  readonly ttftMs: number
  /** From the first content delta to the last one: near 0 when the whole stream arrives at once. */
  readonly spreadMs: number
  /** Body reads that returned data: 1 or 2 when the server sent the whole stream in one write. */
  readonly reads: number
  readonly tokens: number
}

interface ChunkShape {
  readonly choices?: ReadonlyArray<{ readonly delta?: { readonly content?: string | null } }>
  readonly usage?: { readonly completion_tokens?: number } | null
  readonly error?: unknown
}

const body = (seed: number, stream: boolean) =>
  JSON.stringify({
    model: MODEL,
    messages: [{ role: "user", content: "Tell me a short story about a robot learning to paint." }],
    max_tokens: maxTokens,
    ignore_eos: true,
    seed,
    ...(stream ? { stream: true, stream_options: { include_usage: true } } : {})
  })

const request = async (url: string, apiKey: string, seed: number, stream: boolean): Promise<Outcome> => {
  const start = performance.now()
  let ttft = Number.NaN
  let last = Number.NaN
  let reads = 0
  const fail = (error: string): Outcome => ({
    ok: false,
    error,
    latencyMs: performance.now() - start,
    ttftMs: ttft,
    spreadMs: Number.NaN,
    reads,
    tokens: 0
  })
  try {
    const response = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
      body: body(seed, stream),
      signal: AbortSignal.timeout(timeoutMs)
    })
    if (response.status !== 200) return fail(`status ${response.status}: ${(await response.text()).slice(0, 200)}`)
    if (!stream) {
      const json = (await response.json()) as { readonly usage?: { readonly completion_tokens?: number } }
      const tokens = json.usage?.completion_tokens ?? 0
      const latencyMs = performance.now() - start
      if (tokens !== maxTokens) return fail(`completion_tokens ${tokens}, expected ${maxTokens}`)
      return { ok: true, latencyMs, ttftMs: latencyMs, spreadMs: 0, reads: 1, tokens }
    }
    if (response.body === null) return fail("no body")
    const decoder = new TextDecoder()
    const reader = response.body.getReader()
    const failStream = (error: string): Outcome => {
      reader.cancel().catch(() => undefined)
      return fail(error)
    }
    let buffer = ""
    let tokens = -1
    let done = false
    let afterDone = false
    for (;;) {
      const read = await reader.read()
      if (read.done) break
      reads++
      buffer += decoder.decode(read.value, { stream: true })
      let end = buffer.indexOf("\n\n")
      while (end !== -1) {
        const event = buffer.slice(0, end)
        buffer = buffer.slice(end + 2)
        end = buffer.indexOf("\n\n")
        if (!event.startsWith("data: ")) return failStream(`unexpected event ${JSON.stringify(event.slice(0, 80))}`)
        const data = event.slice(6)
        if (done) afterDone = true
        if (data === "[DONE]") {
          done = true
          continue
        }
        const chunk = JSON.parse(data) as ChunkShape
        if (chunk.error !== undefined) return failStream(`error event ${data.slice(0, 200)}`)
        if ((chunk.choices ?? []).some((c) => (c.delta?.content ?? "") !== "")) {
          last = performance.now() - start
          if (Number.isNaN(ttft)) ttft = last
        }
        if (chunk.usage != null && (chunk.choices ?? []).length === 0) tokens = chunk.usage.completion_tokens ?? 0
      }
    }
    const latencyMs = performance.now() - start
    if (!done || afterDone || buffer !== "") return fail("the stream did not end with [DONE]")
    if (tokens === -1) return fail("no usage chunk")
    if (tokens !== maxTokens) return fail(`completion_tokens ${tokens}, expected ${maxTokens}`)
    return { ok: true, latencyMs, ttftMs: ttft, spreadMs: last - ttft, reads, tokens }
  } catch (error) {
    return fail(error instanceof Error ? `${error.name}: ${error.message}` : String(error))
  }
}

// ---------------------------------------------------------------------------------------------------------
// phases
// ---------------------------------------------------------------------------------------------------------

interface Phase {
  readonly name: string
  readonly outcomes: Array<Outcome>
  wallMs: number
  serverCpu: number
  clientCpu: number
  peakRss: number
}

const newPhase = (name: string): Phase => ({ name, outcomes: [], wallMs: 0, serverCpu: 0, clientCpu: 0, peakRss: 0 })

/** The server's peak RSS over the whole run: VmHWM is read before each reset of it. */
let runPeak = 0

/** Runs `work` as part of `phase`, adding its wall time, both CPU times and the server's peak RSS. */
const within = async (phase: Phase, pid: number, work: () => Promise<Array<Outcome>>): Promise<void> => {
  runPeak = Math.max(runPeak, memory(pid, "VmHWM"))
  const byKernel = resetPeak(pid)
  let sampled = memory(pid, "VmRSS")
  const sampler = setInterval(() => {
    sampled = Math.max(sampled, memory(pid, "VmRSS"))
  }, 10)
  const server0 = cpuSeconds(pid)
  const client0 = process.cpuUsage()
  const start = performance.now()
  try {
    phase.outcomes.push(...(await work()))
  } finally {
    phase.wallMs += performance.now() - start
    clearInterval(sampler)
  }
  const client = process.cpuUsage(client0)
  phase.clientCpu += (client.user + client.system) / 1e6
  phase.serverCpu += cpuSeconds(pid) - server0
  phase.peakRss = Math.max(phase.peakRss, byKernel ? memory(pid, "VmHWM") : Math.max(sampled, memory(pid, "VmRSS")))
}

const burst = (url: string, apiKey: string, stream: boolean) =>
  Promise.all(Array.from({ length: concurrency }, (_, i) => request(url, apiKey, i, stream)))

const sequential = async (url: string, apiKey: string, n: number): Promise<Array<Outcome>> => {
  const out: Array<Outcome> = []
  for (let i = 0; i < n; i++) out.push(await request(url, apiKey, i, true))
  return out
}

const quantile = (values: ReadonlyArray<number>, q: number): number => {
  const sorted = values.filter((v) => !Number.isNaN(v)).sort((a, b) => a - b)
  if (sorted.length === 0) return Number.NaN
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!
}

const load = (averages: ReadonlyArray<number>) => averages.map((x) => x.toFixed(2)).join(" ")

const MB = (bytes: number) => fmt(bytes / 2 ** 20, 0)

const main = async (): Promise<void> => {
  const dataDir = mkdtempSync(join(tmpdir(), "effect-rl-bench-server-"))
  const apiKey = `sk-bench-${randomBytes(12).toString("hex")}`
  let server: Server | undefined
  const onSignal = () => {
    const stopped = server === undefined ? Promise.resolve() : stopServer(server.child)
    stopped.then(() => {
      rmSync(dataDir, { recursive: true, force: true })
      process.exit(130)
    })
  }
  process.once("SIGINT", onSignal)
  process.once("SIGTERM", onSignal)
  const loadBefore = loadavg()
  try {
    server = await startServer(
      dataDir,
      apiKey,
      cpuProfDir === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${cpuProfDir}`]
    )
    const { pid, url } = server
    const idleRss = memory(pid, "VmRSS")

    // Warm-up: JIT, the policy's first load, the connection pool (kept alive between rounds).
    for (let i = 0; i < warmup; i++) {
      await sequential(url, apiKey, 4)
      await burst(url, apiKey, true)
      if (withWhole) await burst(url, apiKey, false)
    }
    const afterWarmupRss = memory(pid, "VmRSS")

    const single = newPhase("single (1 in flight)")
    const streamed = newPhase(`streamed x ${concurrency}`)
    const whole = newPhase(`whole x ${concurrency}`)
    for (let r = 0; r < rounds; r++) {
      await within(single, pid, () => sequential(url, apiKey, singles))
      await within(streamed, pid, () => burst(url, apiKey, true))
      if (withWhole) await within(whole, pid, () => burst(url, apiKey, false))
    }

    const phases = withWhole ? [single, streamed, whole] : [single, streamed]
    const goodOf = (p: Phase) => p.outcomes.filter((o) => o.ok)
    const singleMean = goodOf(single).reduce((s, o) => s + o.latencyMs, 0) / Math.max(1, goodOf(single).length)
    const rows = phases.map((p) => {
      const good = goodOf(p)
      const seconds = p.wallMs / 1000
      const rps = good.length / seconds
      const tokens = good.reduce((s, o) => s + o.tokens, 0)
      const streaming = p !== whole
      return [
        p.name,
        `${good.length}/${p.outcomes.length}`,
        fmt(rps, 1),
        fmt(tokens / seconds, 0),
        fmt(
          quantile(
            good.map((o) => o.latencyMs),
            0.5
          ),
          0
        ),
        fmt(
          quantile(
            good.map((o) => o.latencyMs),
            0.99
          ),
          0
        ),
        streaming
          ? fmt(
              quantile(
                good.map((o) => o.ttftMs),
                0.5
              ),
              0
            )
          : "-",
        streaming
          ? fmt(
              quantile(
                good.map((o) => o.ttftMs),
                0.99
              ),
              0
            )
          : "-",
        streaming
          ? fmt(
              quantile(
                good.map((o) => o.spreadMs),
                0.5
              ),
              1
            )
          : "-",
        streaming ? fmt(good.reduce((s, o) => s + o.reads, 0) / Math.max(1, good.length), 1) : "-",
        MB(p.peakRss),
        fmt((1000 * p.serverCpu) / Math.max(1, p.outcomes.length), 1),
        `${fmt((100 * p.serverCpu) / seconds, 0)}%`,
        `${fmt((100 * p.clientCpu) / seconds, 0)}%`,
        `${fmt(rps / (1000 / singleMean), 2)}x`
      ]
    })

    console.log(
      `effect-rl serve (${MODEL}, ${maxTokens} tokens per request, ignore_eos); node ${process.version}; ` +
        `${cpus().length} CPUs; load average ${load(loadBefore)} before, ${load(loadavg())} after; ` +
        `${rounds} rounds of ${concurrency} concurrent, ${warmup} warm-up`
    )
    console.log(
      `server RSS: ${MB(idleRss)} MB idle after start, ${MB(afterWarmupRss)} MB after warm-up, ` +
        `${MB(memory(pid, "VmRSS"))} MB at the end; peak over the whole run (VmHWM) ${MB(Math.max(runPeak, memory(pid, "VmHWM")))} MB`
    )
    printTable([
      [
        "phase",
        "ok",
        "req/s",
        "tok/s",
        "p50 ms",
        "p99 ms",
        "TTFT p50",
        "TTFT p99",
        "spread p50",
        "reads",
        "peak RSS MB",
        "server CPU ms/req",
        "server CPU",
        "client CPU",
        "vs single"
      ],
      ...rows
    ])
    const failures = phases.flatMap((p) => p.outcomes.filter((o) => !o.ok).map((o) => `${p.name}: ${o.error}`))
    if (failures.length > 0) {
      console.log(`\n${failures.length} failed requests; the first ones:`)
      for (const f of failures.slice(0, 10)) console.log(`  ${f}`)
      process.exitCode = 1
    }
  } finally {
    if (server !== undefined) {
      await stopServer(server.child)
      const err = server.stderr().trim()
      if (err !== "") console.log(`\nserver stderr:\n${err.slice(0, 2000)}`)
    }
    process.off("SIGINT", onSignal)
    process.off("SIGTERM", onSignal)
    rmSync(dataDir, { recursive: true, force: true })
  }
}

await main()
