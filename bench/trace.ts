/**
 * The trace store under load: 100,000 calls ingested through `call/upsert_batch`, then read back with one
 * `calls/stream_query`.
 *
 *   npx tsx bench/trace.ts [--calls=100000] [--batch=1000] [--concurrency=4] [--baseline=1] [--repeats=3]
 *                          [--server-cpu-prof=<dir>]
 *
 * The server is the real `effect-rl serve` in a separate process (see `serverProcess.ts`) on a fresh data
 * directory. The calls look like the workflow's: trees of one rollout call and 9 chat-completion children,
 * each with a few hundred bytes of inputs, attributes and an op ref. They are sent as the weave SDKs send them:
 * batches of `--batch` calls' starts, where the ends of a batch's calls travel in the NEXT batch (so every end
 * arrives after its start, in a later request), `--concurrency` batches in flight, with HTTP Basic credentials.
 * The request bodies are built before the clock starts, and the clock starts once the server, after saying it is
 * serving, has gone quiet (see `settle`): the figures are the server's ingest.
 *
 * Reported:
 * - ingest: wall time, calls/s (a call = its start and its end), the server's CPU seconds and peak RSS (the
 *   kernel's VmHWM after a reset at the phase start);
 * - query: one `calls/stream_query` of the whole project read line by line with `fetch` (each line parsed and
 *   checked: all calls present, every one ended): time to the first line, rows/s, bytes, the server's peak RSS;
 * - baseline (`--baseline=1`), in THIS process on a fresh data directory: the same calls written straight into
 *   the store (`TraceCalls.batch`, the same batch sizes, no HTTP, no validation) and read back with
 *   `TraceCalls.query` + `JSON.stringify` per row. The ratios server/baseline are what the HTTP surface, the
 *   request decoding and the derived `summary.weave` cost on top of SQLite.
 * - a second baseline, "JSON.parse + store.batch": the same run, with each batch's request body (the very string
 *   the server receives) parsed by `JSON.parse` just before its batch is stored, timed with it. Any HTTP ingest of
 *   JSON has to parse its bodies; the store alone does not, so the ratio against this line is what the server
 *   spends beyond parsing and storing (reading the body, validation, the route, the answer).
 * - `--repeats`: the ingest is run that many times, each on a fresh data directory, the server's and the store's
 *   back to back, so that a change of machine load hits both alike; the ratio is taken per repeat and its median
 *   printed with each repeat's (the query runs in the first repeat only); so is the ratio of their CPU seconds
 *   (store alone / server), which depends less on other load than wall time does.
 *
 * `--server-cpu-prof=<dir>` starts the server with `--cpu-prof --cpu-prof-dir=<dir>` (written when it stops).
 */
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { cpus, loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Store from "../src/local/store/Store.js"
import * as TraceCalls from "../src/local/store/TraceCalls.js"
import { fmt, intFlag, median, printTable } from "./harness.js"
import { cpuSeconds, memory, resetPeak, type Server, startServer, stopServer } from "./serverProcess.js"

const CALLS = intFlag("calls", 100_000)
const BATCH = intFlag("batch", 1_000)
const CONCURRENCY = Math.max(1, intFlag("concurrency", 4))
const BASELINE = intFlag("baseline", 1) !== 0
const REPEATS = Math.max(1, intFlag("repeats", 3))
const PROJECT = "bench/trace"
const CPU_PROF_DIR = process.argv.find((a) => a.startsWith("--server-cpu-prof="))?.slice("--server-cpu-prof=".length)
const TREE = 10

// ---------------------------------------------------------------------------------------------------------
// the calls
// ---------------------------------------------------------------------------------------------------------

const T0 = Date.UTC(2026, 0, 1)
const iso = (micros: number) =>
  `${new Date(Math.floor(micros / 1000)).toISOString().slice(0, -1)}${String(micros % 1000).padStart(3, "0")}Z`

const uuid = (n: number) => {
  const hex = n.toString(16).padStart(12, "0")
  return `0190a000-0000-7000-8000-${hex}`
}

interface Spec {
  readonly id: string
  readonly traceId: string
  readonly parentId: string | null
  readonly opName: string
  readonly startMicros: number
  readonly endMicros: number
  readonly inputs: Record<string, unknown>
  readonly output: unknown
  readonly summary: Record<string, unknown>
}

const spec = (i: number): Spec => {
  const root = i - (i % TREE)
  const isRoot = i === root
  const startMicros = T0 * 1000 + i * 1000
  return {
    id: uuid(i),
    traceId: uuid(1e9 + root),
    parentId: isRoot ? null : uuid(root),
    opName: `weave:///${PROJECT}/op/${isRoot ? "rollout" : "chat"}:v1digest0123456789abcdef`,
    startMicros,
    endMicros: startMicros + 750,
    inputs: isRoot
      ? { scenario: { id: `scenario-${root / TREE}`, board: "x.o.x.o..", step: root % 97 } }
      : {
          model: "effect-rl/tiny",
          messages: [
            { role: "system", content: "You play tic-tac-toe. Answer with one cell, 1-9." },
            { role: "user", content: `Board: x.o.x.o.. Move ${i % TREE}?` }
          ],
          max_tokens: 8,
          temperature: 1
        },
    output: isRoot
      ? { reward: (i % 7) / 7, messages: [{ role: "assistant", content: "5" }] }
      : { choices: [{ index: 0, message: { role: "assistant", content: "5" }, finish_reason: "stop" }] },
    summary: {
      usage: { "effect-rl/tiny": { prompt_tokens: 42, completion_tokens: 2, total_tokens: 44, requests: 1 } }
    }
  }
}

const startWire = (s: Spec) => ({
  mode: "start",
  req: {
    start: {
      project_id: PROJECT,
      id: s.id,
      trace_id: s.traceId,
      parent_id: s.parentId,
      op_name: s.opName,
      started_at: iso(s.startMicros),
      attributes: { effect_rl: { version: "0.1.0", example: "tictactoe" } },
      inputs: s.inputs
    }
  }
})

const endWire = (s: Spec) => ({
  mode: "end",
  req: { end: { project_id: PROJECT, id: s.id, ended_at: iso(s.endMicros), output: s.output, summary: s.summary } }
})

/** Batch k: the starts of calls [k*B, (k+1)*B) and the ends of batch k-1's calls; one more batch for the last ends. */
const batchBodies = (): Array<string> => {
  const batches = Math.ceil(CALLS / BATCH)
  const bodies: Array<string> = []
  for (let k = 0; k <= batches; k++) {
    const items: Array<unknown> = []
    for (let i = k * BATCH; i < Math.min(CALLS, (k + 1) * BATCH); i++) items.push(startWire(spec(i)))
    for (let i = (k - 1) * BATCH; k > 0 && i < Math.min(CALLS, k * BATCH); i++) items.push(endWire(spec(i)))
    bodies.push(JSON.stringify({ batch: items }))
  }
  return bodies
}

// ---------------------------------------------------------------------------------------------------------
// against the server
// ---------------------------------------------------------------------------------------------------------

interface Phase {
  readonly wallMs: number
  readonly serverCpu: number
  readonly peakRss: number
}

/** Runs `work` while tracking the server's CPU time and peak RSS. */
const phase = async <A>(pid: number, work: () => Promise<A>): Promise<Phase & { readonly result: A }> => {
  const byKernel = resetPeak(pid)
  let sampled = memory(pid, "VmRSS")
  const sampler = setInterval(() => {
    sampled = Math.max(sampled, memory(pid, "VmRSS"))
  }, 10)
  const cpu0 = cpuSeconds(pid)
  const start = performance.now()
  try {
    const result = await work()
    const wallMs = performance.now() - start
    return {
      result,
      wallMs,
      serverCpu: cpuSeconds(pid) - cpu0,
      peakRss: byKernel ? memory(pid, "VmHWM") : Math.max(sampled, memory(pid, "VmRSS"))
    }
  } finally {
    clearInterval(sampler)
  }
}

const ingest = async (url: string, authorization: string, bodies: ReadonlyArray<string>) => {
  // Batch k carries the ends of batch k-1, so a batch is sent only once the one before it has been answered
  // within its lane; lanes take batches in order.
  let next = 0
  const lane = async () => {
    while (next < bodies.length) {
      const body = bodies[next++]!
      const response = await fetch(`${url}/call/upsert_batch`, {
        method: "POST",
        headers: { authorization, "content-type": "application/json" },
        body
      })
      if (response.status !== 200) throw new Error(`upsert_batch: ${response.status} ${await response.text()}`)
      await response.arrayBuffer()
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, lane))
}

const streamAll = async (url: string, authorization: string) => {
  const start = performance.now()
  const response = await fetch(`${url}/calls/stream_query`, {
    method: "POST",
    headers: { authorization, "content-type": "application/json" },
    body: JSON.stringify({ project_id: PROJECT })
  })
  if (response.status !== 200 || response.body === null) throw new Error(`stream_query: ${response.status}`)
  let firstMs = Number.NaN
  let rows = 0
  let ended = 0
  let bytes = 0
  let rest = ""
  const decoder = new TextDecoder()
  for await (const chunk of response.body) {
    if (Number.isNaN(firstMs)) firstMs = performance.now() - start
    bytes += chunk.byteLength
    rest += decoder.decode(chunk, { stream: true })
    let newline = rest.indexOf("\n")
    while (newline >= 0) {
      const line = rest.slice(0, newline)
      rest = rest.slice(newline + 1)
      if (line.length > 0) {
        const call = JSON.parse(line) as { readonly ended_at?: string | null }
        rows++
        if (typeof call.ended_at === "string") ended++
      }
      newline = rest.indexOf("\n")
    }
  }
  return { rows, ended, bytes, firstMs }
}

// ---------------------------------------------------------------------------------------------------------
// the baseline: the store alone, in this process
// ---------------------------------------------------------------------------------------------------------

const storedStart = (s: Spec): TraceCalls.BatchItem => ({
  mode: "start",
  start: {
    project_id: PROJECT,
    id: s.id,
    trace_id: s.traceId,
    parent_id: s.parentId,
    op_name: s.opName,
    display_name: null,
    thread_id: null,
    turn_id: null,
    started_at: iso(s.startMicros),
    started_key: s.startMicros,
    attributes: { effect_rl: { version: "0.1.0", example: "tictactoe" } },
    inputs: s.inputs as TraceCalls.CallStart["inputs"],
    wb_user_id: null,
    wb_run_id: null,
    wb_run_step: null
  }
})

const storedEnd = (s: Spec): TraceCalls.BatchItem => ({
  mode: "end",
  end: {
    project_id: PROJECT,
    id: s.id,
    ended_at: iso(s.endMicros),
    output: Option.some(s.output as never),
    summary: s.summary as TraceCalls.CallEnd["summary"],
    exception: null,
    wb_run_step_end: null
  }
})

const baseline = (dataDir: string, withQuery: boolean, bodies: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const calls = yield* TraceCalls.TraceCalls
    const batches: Array<Array<TraceCalls.BatchItem>> = []
    for (let k = 0; k <= Math.ceil(CALLS / BATCH); k++) {
      const items: Array<TraceCalls.BatchItem> = []
      for (let i = k * BATCH; i < Math.min(CALLS, (k + 1) * BATCH); i++) items.push(storedStart(spec(i)))
      for (let i = (k - 1) * BATCH; k > 0 && i < Math.min(CALLS, k * BATCH); i++) items.push(storedEnd(spec(i)))
      batches.push(items)
    }
    // Each batch stored after its request body is parsed; the parse timed apart (wall and CPU), and kept alive
    // until its batch is stored, as a server holds it.
    let parseMs = 0
    let parseCpu = 0
    let parsedKeys = 0
    const cpu0 = process.cpuUsage()
    const t0 = performance.now()
    for (let k = 0; k < batches.length; k++) {
      const p0 = performance.now()
      const c0 = process.cpuUsage()
      const parsed = JSON.parse(bodies[k]!) as { readonly batch: ReadonlyArray<unknown> }
      const c = process.cpuUsage(c0)
      parseCpu += (c.user + c.system) / 1e6
      parseMs += performance.now() - p0
      yield* calls.batch(batches[k]!)
      parsedKeys += parsed.batch.length
    }
    const totalMs = performance.now() - t0
    const cpu = process.cpuUsage(cpu0)
    const totalCpu = (cpu.user + cpu.system) / 1e6
    if (parsedKeys !== CALLS * 2) throw new Error(`parsed ${parsedKeys} items`)
    const ingestMs = totalMs - parseMs
    const ingestCpu = totalCpu - parseCpu
    const parsing = { parseMs, parseCpu, withParseMs: totalMs, withParseCpu: totalCpu }
    if (!withQuery) return { ingestMs, ingestCpu, ...parsing, queryMs: Number.NaN, rows: 0, bytes: 0 }
    const t1 = performance.now()
    const records = yield* Effect.orDie(calls.query(PROJECT, {}))
    let bytes = 0
    for (const record of records) bytes += JSON.stringify(record).length + 1
    const queryMs = performance.now() - t1
    return { ingestMs, ingestCpu, ...parsing, queryMs, rows: records.length, bytes }
  }).pipe(Effect.provide(Store.layer({ dataDir })))

// ---------------------------------------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------------------------------------

const MB = (bytes: number) => fmt(bytes / 2 ** 20, 0)

/**
 * Waits for a server that has just said it is serving to go quiet: for a second or two after that line it still
 * works in the background (about 1.3 CPU s measured: module loading and compilation on other threads), which
 * would otherwise count as the ingest's CPU and take a core from it. Quiet is a quarter second with under 10% of
 * a core used; at most 10 s. The CPU seconds and the time it took, to print.
 */
const settle = async (pid: number): Promise<{ readonly cpu: number; readonly ms: number }> => {
  const cpu0 = cpuSeconds(pid)
  const t0 = performance.now()
  let last = cpu0
  while (performance.now() - t0 < 10_000) {
    await new Promise((resolve) => setTimeout(resolve, 250))
    const now = cpuSeconds(pid)
    if (now - last < 0.025) break
    last = now
  }
  return { cpu: cpuSeconds(pid) - cpu0, ms: performance.now() - t0 }
}

/** One server run on a fresh data directory: the ingest, and the query when asked for. */
const serverRun = async (bodies: ReadonlyArray<string>, withQuery: boolean, cpuProfDir: string | undefined) => {
  const dataDir = mkdtempSync(join(tmpdir(), "effect-rl-bench-trace-"))
  const apiKey = randomBytes(24).toString("hex")
  const authorization = `Basic ${Buffer.from(`api:${apiKey}`).toString("base64")}`
  let server: Server | undefined
  const stop = async () => {
    if (server !== undefined) await stopServer(server.child)
    server = undefined
    rmSync(dataDir, { recursive: true, force: true })
  }
  process.once("SIGINT", () => void stop().then(() => process.exit(130)))
  try {
    server = await startServer(
      dataDir,
      apiKey,
      cpuProfDir === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${cpuProfDir}`]
    )
    const warmup = await settle(server.pid)
    const idle = memory(server.pid, "VmRSS")
    const ingested = await phase(server.pid, () => ingest(server!.url, authorization, bodies))
    const queried = withQuery ? await phase(server.pid, () => streamAll(server!.url, authorization)) : undefined
    if (queried !== undefined) {
      const { rows, ended } = queried.result
      if (rows !== CALLS || ended !== CALLS) throw new Error(`stream_query answered ${rows} rows, ${ended} ended`)
    }
    return { idle, warmup, ingested, queried }
  } finally {
    await stop()
  }
}

/** One baseline run (the store alone, in this process) on a fresh data directory. */
const baselineRun = async (withQuery: boolean, bodies: ReadonlyArray<string>) => {
  const baseDir = mkdtempSync(join(tmpdir(), "effect-rl-bench-trace-base-"))
  try {
    return await Effect.runPromise(baseline(baseDir, withQuery, bodies))
  } finally {
    rmSync(baseDir, { recursive: true, force: true })
  }
}

const main = async () => {
  console.log(
    `bench/trace: ${CALLS} calls, batches of ${BATCH} (ends in the next batch), ${CONCURRENCY} in flight, ` +
      `${REPEATS} repeat(s) of server then store alone; ${cpus().length} cores, load ${loadavg()
        .map((l) => l.toFixed(1))
        .join(" ")}`
  )
  const t = performance.now()
  const bodies = batchBodies()
  const bodyBytes = bodies.reduce((n, body) => n + body.length, 0)
  console.log(
    `built ${bodies.length} request bodies (${MB(bodyBytes)} MB) in ${fmt(performance.now() - t, 0)} ms, untimed`
  )

  const ingestRates: Array<number> = []
  const baseRates: Array<number> = []
  // The second baseline: JSON.parse of each body, then its batch stored.
  const parsedRates: Array<number> = []
  const parsedCpus: Array<number> = []
  // CPU seconds of the ingest: the server process's, and this process's for the store alone.
  const ingestCpus: Array<number> = []
  const baseCpus: Array<number> = []
  let first: Awaited<ReturnType<typeof serverRun>> | undefined
  let firstBase: Awaited<ReturnType<typeof baselineRun>> | undefined
  for (let repeat = 0; repeat < REPEATS; repeat++) {
    const run = await serverRun(bodies, repeat === 0, repeat === 0 ? CPU_PROF_DIR : undefined)
    first ??= run
    ingestRates.push((CALLS / run.ingested.wallMs) * 1000)
    ingestCpus.push(run.ingested.serverCpu)
    if (BASELINE) {
      const base = await baselineRun(repeat === 0, bodies)
      firstBase ??= base
      baseRates.push((CALLS / base.ingestMs) * 1000)
      baseCpus.push(base.ingestCpu)
      parsedRates.push((CALLS / base.withParseMs) * 1000)
      parsedCpus.push(base.withParseCpu)
    }
  }
  const { idle, warmup, ingested, queried } = first!
  const { bytes, firstMs, rows } = queried!.result
  const ingestRate = median(ingestRates)
  const queryRate = (rows / queried!.wallMs) * 1000
  const table: Array<Array<string>> = [
    ["phase", "wall ms", "rate", "server CPU s", "server peak RSS MB", "vs baseline"],
    [
      "ingest (upsert_batch)",
      fmt(ingested.wallMs, 0),
      `${fmt(ingestRate, 0)} calls/s`,
      fmt(ingested.serverCpu, 1),
      MB(ingested.peakRss),
      ""
    ],
    [
      "stream_query (all)",
      fmt(queried!.wallMs, 0),
      `${fmt(queryRate, 0)} rows/s`,
      fmt(queried!.serverCpu, 1),
      MB(queried!.peakRss),
      ""
    ]
  ]
  let ingestRatio: number | undefined
  let ingestCpuRatio: number | undefined
  let parsedRatio: number | undefined
  let parsedCpuRatio: number | undefined
  if (BASELINE) {
    const base = firstBase!
    const baseIngestRate = median(baseRates)
    const baseQueryRate = (base.rows / base.queryMs) * 1000
    // The ratio of each repeat (server then store alone, back to back), and their median.
    const ratios = ingestRates.map((rate, i) => rate / baseRates[i]!)
    ingestRatio = median(ratios)
    table[1]![5] = `${fmt(ingestRatio, 2)}x`
    table[2]![5] = `${fmt(queryRate / baseQueryRate, 2)}x`
    const parsedRatios = ingestRates.map((rate, i) => rate / parsedRates[i]!)
    parsedRatio = median(parsedRatios)
    table.push(
      ["baseline: store.batch", fmt(base.ingestMs, 0), `${fmt(baseIngestRate, 0)} calls/s`, "", "", "1x"],
      [
        "baseline: JSON.parse + store.batch",
        fmt(base.withParseMs, 0),
        `${fmt(median(parsedRates), 0)} calls/s`,
        "",
        "",
        `(ingest ${fmt(parsedRatio, 2)}x)`
      ],
      ["baseline: store.query", fmt(base.queryMs, 0), `${fmt(baseQueryRate, 0)} rows/s`, "", "", "1x"]
    )
    console.log(
      `ingest per repeat (calls/s, server / store alone = ratio): ${ingestRates
        .map((rate, i) => `${fmt(rate, 0)} / ${fmt(baseRates[i]!, 0)} = ${fmt(ratios[i]!, 2)}x`)
        .join("; ")}`
    )
    // Under other load the wall rates depend on the scheduler; CPU per call does much less.
    const cpuRatios = ingestCpus.map((cpu, i) => baseCpus[i]! / cpu)
    ingestCpuRatio = median(cpuRatios)
    console.log(
      `ingest CPU per repeat (s, store alone / server = ratio): ${ingestCpus
        .map((cpu, i) => `${fmt(baseCpus[i]!, 2)} / ${fmt(cpu, 2)} = ${fmt(cpuRatios[i]!, 2)}x`)
        .join("; ")}; median ${fmt(ingestCpuRatio, 2)}x`
    )
    // Against the second baseline: JSON.parse of the same bodies, then the store.
    const parsedCpuRatios = ingestCpus.map((cpu, i) => parsedCpus[i]! / cpu)
    parsedCpuRatio = median(parsedCpuRatios)
    console.log(
      `JSON.parse of the bodies in the store-alone runs: ${fmt(base.parseMs, 0)} ms, ${fmt(base.parseCpu, 2)} CPU s ` +
        `(first repeat); ingest against JSON.parse + store (calls/s): ${ingestRates
          .map((rate, i) => `${fmt(rate, 0)} / ${fmt(parsedRates[i]!, 0)} = ${fmt(parsedRatios[i]!, 2)}x`)
          .join("; ")}; by CPU (s): ${ingestCpus
          .map((cpu, i) => `${fmt(parsedCpus[i]!, 2)} / ${fmt(cpu, 2)} = ${fmt(parsedCpuRatios[i]!, 2)}x`)
          .join("; ")}; median ${fmt(parsedCpuRatio, 2)}x`
    )
  }
  printTable(table)
  console.log(
    `rates are medians over the repeats; wall ms, CPU and RSS are the first repeat's. stream_query: first line after ` +
      `${fmt(firstMs, 0)} ms, ${MB(bytes)} MB of JSON lines; server RSS idle ${MB(idle)} MB (quiet ` +
      `${fmt(warmup.ms, 0)} ms after it said it was serving, ${fmt(warmup.cpu, 2)} CPU s, untimed); load at the end ` +
      `${loadavg()
        .map((l) => l.toFixed(1))
        .join(" ")}`
  )
  console.log(
    `summary: ${JSON.stringify({
      calls: CALLS,
      ingest_calls_per_s: Math.round(ingestRate),
      query_rows_per_s: Math.round(queryRate),
      ...(ingestRatio === undefined ? {} : { ingest_vs_store: Number(ingestRatio.toFixed(3)) }),
      ...(ingestCpuRatio === undefined ? {} : { ingest_vs_store_by_cpu: Number(ingestCpuRatio.toFixed(3)) }),
      ...(parsedRatio === undefined ? {} : { ingest_vs_parse_and_store: Number(parsedRatio.toFixed(3)) }),
      ...(parsedCpuRatio === undefined ? {} : { ingest_vs_parse_and_store_by_cpu: Number(parsedCpuRatio.toFixed(3)) }),
      ingest_peak_rss_mb: Math.round(ingested.peakRss / 2 ** 20),
      query_peak_rss_mb: Math.round(queried!.peakRss / 2 ** 20)
    })}`
  )
}

main().catch((error) => {
  console.error(error instanceof Error ? error.message : error)
  process.exit(1)
})
