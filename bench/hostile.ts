/**
 * Hostile requests against the rollout gateway and the embedded backend, measured from outside their processes
 * (issue 35's goals; figures, not tests):
 *
 * 1. **The gateway under a hostile rollout.** A gateway in its own process (`gateway/serve.ts`) with two
 *    rollouts. One agent sends, in a loop, 30 MB bodies (declared, and chunked without a length) and 5 KB bodies
 *    nested 10,000 deep; the other, a healthy agent, sends ordinary requests one after another. Figures: the
 *    healthy requests' latency (p50/p99/max; goal p99 at most 100 ms), each hostile kind's time to its 4xx (goal
 *    at most 100 ms) and status, and the gateway's RSS before, at its peak and after (goal: within 100 MB).
 *    The same healthy requests with no hostile agent first, as the baseline.
 * 2. **The embedded backend.** The real `effect-rl serve` in its own process: `/v1/health` latency idle, then
 *    while 50 streamed responses (`POST /v1/responses`, `stream: true`, within the model's context) are started
 *    and abandoned after their first event (goal p99 at most 50 ms), after one completion that makes the model; then a 40 MB `/v1/responses` body, declared and chunked: the time to
 *    its 413 (goal at most 100 ms) and the server's RSS before and after (goal: at most 100 MB more).
 *
 *   npx tsx bench/hostile.ts [--seconds 5] [--rounds 3]
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import * as http from "node:http"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { BODY, quantile } from "./gateway/instant.js"
import { memory, resetPeak, startServer, stopServer } from "./serverProcess.js"

const flag = (name: string, fallback: number) => {
  const at = process.argv.indexOf(`--${name}`)
  return at === -1 ? fallback : Number(process.argv[at + 1])
}
const SECONDS = flag("seconds", 5)
const ROUNDS = flag("rounds", 3)

const MB = 1024 * 1024
const ms = (n: number) => `${n.toFixed(1)} ms`
const mb = (bytes: number) => `${(bytes / MB).toFixed(0)} MB`
const sleep = (millis: number) => new Promise((resolve) => setTimeout(resolve, millis))
const stats = (values: ReadonlyArray<number>) =>
  values.length === 0
    ? "none"
    : `n ${values.length}  p50 ${ms(quantile(values, 0.5))}  p99 ${ms(quantile(values, 0.99))}  max ${ms(Math.max(...values))}`

/**
 * Sends a body with `http.request` (so an early answer is seen while the body is still going out): its status
 * and the time from the first byte sent to the answer's head. `chunked`: no `Content-Length`.
 */
const send = (
  url: string,
  headers: Record<string, string>,
  body: Buffer,
  chunked: boolean
): Promise<{ readonly status: number; readonly ms: number }> =>
  new Promise((resolve, reject) => {
    const start = performance.now()
    const request = http.request(url, {
      method: "POST",
      headers: {
        ...headers,
        "content-type": "application/json",
        ...(chunked ? { "transfer-encoding": "chunked" } : { "content-length": String(body.length) })
      }
    })
    request.once("response", (response) => {
      const took = performance.now() - start
      response.resume()
      response.once("end", () => resolve({ status: response.statusCode ?? 0, ms: took }))
      response.once("error", () => resolve({ status: response.statusCode ?? 0, ms: took }))
      request.destroy()
    })
    // The server may close its side once it has answered: that is not a failure of the measurement.
    request.once("error", (error) => (request.destroyed ? undefined : reject(error)))
    const step = 1 * MB
    let at = 0
    const pump = () => {
      while (at < body.length) {
        const more = request.write(body.subarray(at, at + step))
        at += step
        if (!more) return void request.once("drain", pump)
      }
      request.end()
    }
    pump()
  })

/** The gateway in its own process, with `rollouts` endpoints. */
const startGateway = (rollouts: number) =>
  new Promise<{
    readonly child: ChildProcess
    readonly pid: number
    readonly endpoints: ReadonlyArray<{ readonly baseUrl: string; readonly apiKey: string }>
  }>((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", new URL("./gateway/serve.ts", import.meta.url).pathname, "--rollouts", String(rollouts)],
      { stdio: ["pipe", "pipe", "inherit"] }
    )
    let out = ""
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      out += chunk
      const line = out.split("\n")[0]
      if (out.includes("\n") && line !== undefined) {
        const parsed = JSON.parse(line) as { pid: number; endpoints: Array<{ baseUrl: string; apiKey: string }> }
        resolve({ child, pid: parsed.pid, endpoints: parsed.endpoints })
      }
    })
    child.once("exit", (code) => reject(new Error(`the gateway exited with ${code}`)))
  })

/** Healthy requests one after another for `seconds`: each one's latency. */
const healthy = async (endpoint: { readonly baseUrl: string; readonly apiKey: string }, seconds: number) => {
  const times: Array<number> = []
  const until = performance.now() + seconds * 1000
  const headers = { authorization: `Bearer ${endpoint.apiKey}`, "content-type": "application/json" }
  while (performance.now() < until) {
    const start = performance.now()
    const response = await fetch(`${endpoint.baseUrl}/chat/completions`, { method: "POST", headers, body: BODY })
    await response.arrayBuffer()
    if (response.status !== 200) throw new Error(`a healthy request got ${response.status}`)
    times.push(performance.now() - start)
  }
  return times
}

/** A body of `bytes` (one user message of that many characters). */
const large = (bytes: number) =>
  Buffer.from(JSON.stringify({ model: "m", messages: [{ role: "user", content: "x".repeat(bytes) }] }))

/** A body of about 5 KB whose `messages` nest `depth` deep. */
const deep = (depth: number) => Buffer.from(`{"model":"m","messages":${"[".repeat(depth)}${"]".repeat(depth)}}`)

const gatewayPart = async () => {
  console.log(`\n1. the gateway (its own process), a healthy rollout beside a hostile one, ${SECONDS} s a phase`)
  const gateway = await startGateway(2)
  try {
    const [good, bad] = gateway.endpoints as [(typeof gateway.endpoints)[0], (typeof gateway.endpoints)[0]]
    await healthy(good, 1) // warm-up
    const baseline = await healthy(good, SECONDS)
    console.log(`  healthy alone        ${stats(baseline)}`)
    const before = memory(gateway.pid, "VmRSS")
    resetPeak(gateway.pid)
    const thirty = large(30 * MB)
    const nested = deep(10_000)
    const hostile: Record<string, Array<number>> = { "30 MB declared": [], "30 MB chunked": [], "nested 10,000": [] }
    const statuses = new Set<string>()
    let running = true
    const headers = { authorization: `Bearer ${bad.apiKey}` }
    const url = `${bad.baseUrl}/chat/completions`
    const attack = (async () => {
      while (running) {
        for (const [name, body, chunked] of [
          ["30 MB declared", thirty, false],
          ["30 MB chunked", thirty, true],
          ["nested 10,000", nested, false]
        ] as const) {
          const answer = await send(url, headers, body, chunked)
          hostile[name]!.push(answer.ms)
          statuses.add(`${name}: ${answer.status}`)
        }
      }
    })()
    const during = await healthy(good, SECONDS)
    running = false
    await attack
    const peak = memory(gateway.pid, "VmHWM")
    await sleep(2_000)
    const after = memory(gateway.pid, "VmRSS")
    console.log(`  healthy beside it    ${stats(during)}  (goal p99 <= 100 ms)`)
    for (const [name, times] of Object.entries(hostile))
      console.log(`  ${name.padEnd(20)} ${stats(times)}  (goal <= 100 ms)`)
    console.log(`  hostile statuses     ${[...statuses].sort().join(", ")}`)
    console.log(
      `  gateway RSS          before ${mb(before)}, peak ${mb(peak)} (+${mb(peak - before)}), 2 s after ${mb(after)} (+${mb(after - before)}; goal <= 100 MB)`
    )
  } finally {
    gateway.child.stdin!.end()
    gateway.child.kill()
  }
}

const backendPart = async () => {
  console.log("\n2. the embedded backend (`effect-rl serve`, its own process)")
  const dir = mkdtempSync(join(tmpdir(), "effect-rl-bench-hostile-"))
  const key = `bench-${crypto.randomUUID()}`
  const server = await startServer(dir, key)
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
  const probe = async (count: number) => {
    const times: Array<number> = []
    for (let i = 0; i < count; i++) {
      const start = performance.now()
      const reply = await fetch(`${server.url}/v1/health`, { headers })
      await reply.arrayBuffer()
      times.push(performance.now() - start)
      await sleep(10)
    }
    return times
  }
  try {
    console.log(`  /v1/health idle                    ${stats(await probe(100))}`)
    // The model is made on its first use, which the first round would otherwise measure: one completion first,
    // timed on its own (100 ms here).
    const first = performance.now()
    const warm = await fetch(`${server.url}/v1/responses`, {
      method: "POST",
      headers,
      body: JSON.stringify({ model: "effect-rl/tiny", input: "warm", max_output_tokens: 4 })
    })
    await warm.arrayBuffer()
    console.log(`  the model's first completion       ${ms(performance.now() - first)} (status ${warm.status})`)
    for (let round = 0; round < ROUNDS; round++) {
      // Fifty streamed responses, each abandoned once its first event came; health probed meanwhile and after.
      const abandon = Array.from({ length: 50 }, async (_, i) => {
        const controller = new AbortController()
        const response = await fetch(`${server.url}/v1/responses`, {
          method: "POST",
          headers,
          signal: controller.signal,
          // Within the model's 512-token context: a request past it is refused with a 400, not streamed.
          body: JSON.stringify({ model: "effect-rl/tiny", input: `go ${i}`, max_output_tokens: 400, stream: true })
        })
        if (!response.ok || !(response.headers.get("content-type") ?? "").includes("text/event-stream")) {
          throw new Error(`a streamed response was answered ${response.status}: ${await response.text()}`)
        }
        const reader = response.body!.getReader()
        await reader.read()
        controller.abort()
      })
      const probed = probe(100)
      for (const settled of await Promise.allSettled(abandon)) {
        if (settled.status === "rejected") throw settled.reason
      }
      console.log(`  /v1/health, 50 streams abandoned   ${stats(await probed)}  (goal p99 <= 50 ms)`)
    }
    const before = memory(server.pid, "VmRSS")
    resetPeak(server.pid)
    const forty = large(40 * MB)
    for (const chunked of [false, true]) {
      const times: Array<number> = []
      const statuses = new Set<number>()
      for (let round = 0; round < ROUNDS; round++) {
        const answer = await send(`${server.url}/v1/responses`, { authorization: `Bearer ${key}` }, forty, chunked)
        times.push(answer.ms)
        statuses.add(answer.status)
      }
      console.log(
        `  40 MB /v1/responses ${chunked ? "chunked " : "declared"}     ${stats(times)}  status ${[...statuses].join(", ")}  (goal <= 100 ms)`
      )
    }
    const peak = memory(server.pid, "VmHWM")
    await sleep(2_000)
    const after = memory(server.pid, "VmRSS")
    console.log(
      `  server RSS          before ${mb(before)}, peak ${mb(peak)} (+${mb(peak - before)}), 2 s after ${mb(after)} (+${mb(after - before)}; goal <= 100 MB)`
    )
  } finally {
    await stopServer(server.child)
    rmSync(dir, { recursive: true, force: true })
  }
}

console.log(`hostile requests (node ${process.version}, load average ${loadavg()[0]!.toFixed(2)})`)
await gatewayPart()
await backendPart()
console.log(`\nload average at the end ${loadavg()[0]!.toFixed(2)}`)
