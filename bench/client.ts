/**
 * The inference client side by side with the `openai` package: client CPU per chat completion and request rate,
 * streamed and whole, one request at a time and 64 in flight, against the same trivial server.
 *
 *   npx tsx bench/client.ts [--requests=2000] [--rounds=5] [--warmup=1] [--events=22] [--paced=1] [--tsx]
 *                           [--modes=stream,fold,collect,whole]
 *                           [--only=effect-stream --cpu-prof-loops=0 [--concurrency=1]]
 *
 * The server is this file run with `--serve` in a SEPARATE process (so that its CPU is not the client's): plain
 * `node:http`, answering `POST /v1/chat/completions` with a canned completion, or with `stream: true` with
 * `--events` server-sent events in all (a role chunk, content chunks, a finish chunk and a usage chunk, then
 * `data: [DONE]`), each event its own write, a turn of the event loop between writes (`--paced=1`) as a model
 * server sends tokens, or all in one turn (`--paced=0`).
 *
 * The clients run in plain `node` (this file bundled with the library by esbuild, see `bundleAndRun`), as a
 * compiled application would; `--tsx` runs them under tsx in this process instead.
 *
 * The clients:
 *   openai     `new OpenAI({ baseURL, maxRetries: 0 })`, `chat.completions.create(...)`, a stream read with
 *              `for await` (the SDK's fetch and its own SSE decoder)
 *   effect-rl  `InferenceClient.layer(...)` over `NodeHttpClient.layerUndici` in a `ManagedRuntime`, each request
 *              run with `runPromise`: `createChatCompletion`, or `streamChatCompletion` read as below
 * The modes (the paths compared):
 *   stream   openai `for await`, the content added up; effect-rl `Stream.runFold` doing the same
 *   fold     openai the same; effect-rl `ChatStream.fold` doing the same (one pull loop: `Stream.run`'s sink
 *            pipeline costs a fixed ~130 us and ~130 KB per stream run, which `stream` includes)
 *   collect  the chunks joined into one completion: openai `chat.completions.stream(...).finalChatCompletion()`;
 *            effect-rl `ChatStream.collect`
 *   whole    `create` / `createChatCompletion`, unstreamed
 * Each streamed request checks that every chunk came (and the content adds up); a whole one checks its content.
 *
 * A round runs every (mode, concurrency) pair for both clients, `--requests` requests each, the two clients in
 * alternating order from round to round; a full GC runs before each. Measured per run: this process's CPU time
 * (user + system, `process.cpuUsage`) per request, and requests per second of wall time. The ratios
 * effect-rl / openai are taken within a round and their median (and range) over `--rounds` rounds is printed.
 *
 * `--only=<client>-<mode>` (e.g. `effect-stream`) with `--cpu-prof-loops=<n>` runs just that path n times at
 * concurrency 1 and 64 (or `--concurrency`), for `node --cpu-prof --import tsx bench/client.ts ...` (the
 * `--cpu-prof` flags are passed on to the bundled run, whose profile names the library's functions). `--trace-gc`
 * is passed on the same way (not to the server): at concurrency 64 young-generation collections are most of what
 * effect-rl's streams cost beyond openai's (with `--max-semi-space-size=64` the x64 CPU ratio measured 1.24 -> 1.06).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdirSync } from "node:fs"
import { createServer } from "node:http"
import { loadavg } from "node:os"
import { join } from "node:path"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import OpenAI from "openai"
import type { ChatCompletionChunk } from "../src/api/ChatCompletion.js"
import type { ApiError } from "../src/client/ApiError.js"
import * as ChatStream from "../src/client/ChatStream.js"
import * as InferenceClient from "../src/client/InferenceClient.js"
import { fmt, intFlag, median, printTable } from "./harness.js"

const REQUESTS = intFlag("requests", 2000)
const ROUNDS = intFlag("rounds", 5)
const WARMUP = intFlag("warmup", 1)
const EVENTS = Math.max(4, intFlag("events", 22))
const PACED = intFlag("paced", 1) !== 0
const ONLY = process.argv.find((a) => a.startsWith("--only="))?.slice("--only=".length)
const PROFILE_LOOPS = intFlag("cpu-prof-loops", 0)
const PROFILE_CONCURRENCY = intFlag("concurrency", 0)
/** The ways a request is made and read (see the header). */
const MODE_NAMES = ["stream", "fold", "collect", "whole"] as const
type Mode = (typeof MODE_NAMES)[number]
/** The modes measured (`--modes=stream` for the streamed paths only). */
const MODES = (process.argv.find((a) => a.startsWith("--modes="))?.slice("--modes=".length) ?? MODE_NAMES.join(","))
  .split(",")
  .filter((m): m is Mode => (MODE_NAMES as ReadonlyArray<string>).includes(m))
/** Node's flags passed on to the bundled clients' run and not to the server: profiles and GC traces. */
const isProfileFlag = (arg: string) => ["--cpu-prof", "--heap-prof", "--trace-gc"].some((f) => arg.startsWith(f))
const MODEL = "bench/tiny"
const CONCURRENCIES = [1, 64] as const

// ---------------------------------------------------------------------------------------------------------
// the server (`--serve`), in its own process
// ---------------------------------------------------------------------------------------------------------

/** The content pieces of the streamed answer: one per content chunk. */
const pieces = Array.from({ length: EVENTS - 4 }, (_, i) => (i === 0 ? "The" : ` word${i}`))
const answer = pieces.join("")

const chunk = (created: number, choice: object, usage: object | null = null) =>
  `data: ${JSON.stringify({
    id: "chatcmpl-bench",
    object: "chat.completion.chunk",
    created,
    model: MODEL,
    choices: [choice],
    usage
  })}\n\n`

const events = (): Array<string> => {
  const created = Math.floor(Date.now() / 1000)
  return [
    chunk(created, { index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }),
    ...pieces.map((content) => chunk(created, { index: 0, delta: { content }, logprobs: null, finish_reason: null })),
    chunk(created, { index: 0, delta: {}, logprobs: null, finish_reason: "stop" }),
    `data: ${JSON.stringify({
      id: "chatcmpl-bench",
      object: "chat.completion.chunk",
      created,
      model: MODEL,
      choices: [],
      usage: { prompt_tokens: 12, completion_tokens: pieces.length, total_tokens: 12 + pieces.length }
    })}\n\n`,
    "data: [DONE]\n\n"
  ]
}

const whole = () =>
  JSON.stringify({
    id: "chatcmpl-bench",
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: MODEL,
    choices: [{ index: 0, message: { role: "assistant", content: answer }, logprobs: null, finish_reason: "stop" }],
    usage: { prompt_tokens: 12, completion_tokens: pieces.length, total_tokens: 12 + pieces.length }
  })

const serve = () => {
  const server = createServer((req, res) => {
    let body = ""
    req.setEncoding("utf8")
    req.on("data", (piece: string) => {
      body += piece
    })
    req.on("end", () => {
      if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
        res.writeHead(404, { "content-type": "application/json" }).end('{"error":{"message":"not found"}}')
        return
      }
      const stream = (JSON.parse(body) as { readonly stream?: boolean }).stream === true
      if (!stream) {
        res.writeHead(200, { "content-type": "application/json" }).end(whole())
        return
      }
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
      const all = events()
      if (!PACED) {
        for (const event of all) res.write(event)
        res.end()
        return
      }
      let i = 0
      const next = () => {
        if (i === all.length) return void res.end()
        res.write(all[i++])
        setImmediate(next)
      }
      next()
    })
  })
  let connections = 0
  server.on("connection", () => {
    connections++
  })
  process.on("SIGTERM", () => {
    console.error(`server: ${connections} connections`)
    process.exit(0)
  })
  server.keepAliveTimeout = 60_000
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    if (address !== null && typeof address === "object") console.log(`serving on http://127.0.0.1:${address.port}`)
  })
}

const startServer = (): Promise<{ readonly child: ChildProcess; readonly url: string }> =>
  new Promise((resolve, reject) => {
    const args = [...process.execArgv, new URL(import.meta.url).pathname, "--serve", ...process.argv.slice(2)]
    const child = spawn(
      process.execPath,
      args.filter((a) => !isProfileFlag(a)),
      {
        stdio: ["ignore", "pipe", "inherit"]
      }
    )
    let out = ""
    child.stdout!.on("data", (piece) => {
      out += piece
      const match = /serving on (http:\/\/\S+)/.exec(out)
      if (match) resolve({ child, url: match[1]! })
    })
    child.once("exit", (code) => reject(new Error(`the server exited with ${code}: ${out}`)))
  })

// ---------------------------------------------------------------------------------------------------------
// the clients
// ---------------------------------------------------------------------------------------------------------

setFlagsFromString("--expose-gc")
const collect = runInNewContext("gc") as () => void

/** One request of a client: resolves once the answer is read in full and checked. */
type Request = (mode: Mode) => Promise<void>

const messages = [{ role: "user" as const, content: "Say something." }]

const checkContent = (content: string, chunks: number) => {
  if (content !== answer) throw new Error(`unexpected content after ${chunks} chunks: ${content.slice(0, 80)}`)
}

const openaiRequest = (url: string): Request => {
  const client = new OpenAI({ apiKey: "bench", baseURL: `${url}/v1`, maxRetries: 0 })
  return async (mode) => {
    if (mode === "whole") {
      const completion = await client.chat.completions.create({ model: MODEL, messages })
      return checkContent(completion.choices[0]?.message.content ?? "", 1)
    }
    if (mode === "collect") {
      let chunks = 0
      const completion = await client.chat.completions
        .stream({ model: MODEL, messages })
        .on("chunk", () => chunks++)
        .finalChatCompletion()
      if (chunks !== EVENTS - 1) throw new Error(`openai: ${chunks} chunks`)
      return checkContent(completion.choices[0]?.message.content ?? "", chunks)
    }
    const stream = await client.chat.completions.create({ model: MODEL, messages, stream: true })
    let content = ""
    let chunks = 0
    for await (const part of stream) {
      chunks++
      content += part.choices[0]?.delta.content ?? ""
    }
    if (chunks !== EVENTS - 1) throw new Error(`openai: ${chunks} chunks`)
    checkContent(content, chunks)
  }
}

const effectRequest = (url: string) => {
  const runtime = ManagedRuntime.make(
    InferenceClient.layer({ baseUrl: url, apiKey: Redacted.make("bench") }).pipe(
      Layer.provide(NodeHttpClient.layerUndici)
    )
  )
  const request = { model: MODEL, messages }
  type Read = { readonly content: string; readonly chunks: number }
  const add = (state: Read, part: ChatCompletionChunk): Read => ({
    content: state.content + (part.choices[0]?.delta.content ?? ""),
    chunks: state.chunks + 1
  })
  const empty: Read = { content: "", chunks: 0 }
  const streams: Record<"stream" | "fold", Effect.Effect<Read, ApiError, InferenceClient.InferenceClient>> = {
    stream: Effect.flatMap(InferenceClient.InferenceClient, (client) =>
      Stream.runFold(client.streamChatCompletion(request), empty, add)
    ),
    fold: Effect.flatMap(InferenceClient.InferenceClient, (client) =>
      ChatStream.fold(client.streamChatCompletion(request), empty, add)
    )
  }
  const collected = Effect.flatMap(InferenceClient.InferenceClient, (client) =>
    Effect.suspend(() => {
      let chunks = 0
      return Effect.map(
        ChatStream.collect(client.streamChatCompletion(request), { onChunk: () => chunks++ }),
        (completion) => ({ completion, chunks })
      )
    })
  )
  const completed = Effect.flatMap(InferenceClient.InferenceClient, (client) => client.createChatCompletion(request))
  const run: Request = async (mode) => {
    if (mode === "whole") {
      const completion = await runtime.runPromise(completed)
      return checkContent(completion.choices[0]?.message.content ?? "", 1)
    }
    if (mode === "collect") {
      const { completion, chunks } = await runtime.runPromise(collected)
      if (chunks !== EVENTS - 1) throw new Error(`effect-rl: ${chunks} chunks`)
      return checkContent(completion.choices[0]?.message.content ?? "", chunks)
    }
    const read = await runtime.runPromise(streams[mode])
    if (read.chunks !== EVENTS - 1) throw new Error(`effect-rl: ${read.chunks} chunks`)
    checkContent(read.content, read.chunks)
  }
  return { run, dispose: () => runtime.dispose() }
}

/** `count` requests, `concurrency` at a time; this process's CPU microseconds and the wall milliseconds. */
const runMany = async (request: Request, mode: Mode, concurrency: number, count: number) => {
  collect()
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  let started = 0
  const lane = async () => {
    while (started < count) {
      started++
      await request(mode)
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, lane))
  const wallMs = performance.now() - t0
  const cpu = process.cpuUsage(cpu0)
  return { cpuMicros: cpu.user + cpu.system, wallMs }
}

// ---------------------------------------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------------------------------------

interface Sample {
  readonly cpuPerRequest: number
  readonly rate: number
}

const main = async () => {
  const server = await startServer()
  const effect = effectRequest(server.url)
  const clients: Record<"openai" | "effect-rl", Request> = {
    openai: openaiRequest(server.url),
    "effect-rl": effect.run
  }
  try {
    if (ONLY !== undefined && PROFILE_LOOPS > 0) {
      const [name, mode] = ONLY.startsWith("effect") ? ["effect-rl", ONLY.slice(7)] : ["openai", ONLY.slice(7)]
      const client = clients[name as keyof typeof clients]
      for (let i = 0; i < PROFILE_LOOPS; i++) {
        for (const concurrency of PROFILE_CONCURRENCY === 0 ? CONCURRENCIES : [PROFILE_CONCURRENCY]) {
          await runMany(client, mode as Mode, concurrency, REQUESTS)
        }
      }
      console.log(`profiled ${ONLY} ${PROFILE_LOOPS} x ${REQUESTS} requests at concurrency 1 and 64`)
      return
    }
    const load0 = loadavg()
    console.log(
      `bench/client: ${REQUESTS} requests per run, ${ROUNDS} rounds (+${WARMUP} warm-up), ${EVENTS} events per stream` +
        ` (${PACED ? "a turn between writes" : "written at once"}); load ${load0.map((l) => l.toFixed(1)).join(" ")}`
    )
    const keys = MODES.flatMap((mode) =>
      CONCURRENCIES.map((concurrency) => ({ mode, concurrency, key: `${mode} x${concurrency}` }))
    )
    const samples = new Map<string, Array<Sample>>()
    const ratios = new Map<string, Array<{ readonly cpu: number; readonly rate: number }>>()
    for (let round = 0; round < WARMUP + ROUNDS; round++) {
      const order = round % 2 === 0 ? (["openai", "effect-rl"] as const) : (["effect-rl", "openai"] as const)
      for (const { mode, concurrency, key } of keys) {
        const inRound: Partial<Record<string, Sample>> = {}
        for (const name of order) {
          const { cpuMicros, wallMs } = await runMany(clients[name], mode, concurrency, REQUESTS)
          const sample = { cpuPerRequest: cpuMicros / REQUESTS, rate: (REQUESTS / wallMs) * 1000 }
          inRound[name] = sample
          if (round >= WARMUP) samples.set(`${name} ${key}`, [...(samples.get(`${name} ${key}`) ?? []), sample])
        }
        if (round >= WARMUP) {
          const e = inRound["effect-rl"]!
          const o = inRound.openai!
          ratios.set(key, [
            ...(ratios.get(key) ?? []),
            { cpu: e.cpuPerRequest / o.cpuPerRequest, rate: e.rate / o.rate }
          ])
        }
      }
    }
    const range = (values: ReadonlyArray<number>) => `${fmt(Math.min(...values), 2)}-${fmt(Math.max(...values), 2)}`
    const rows: Array<Array<string>> = [
      [
        "path",
        "openai CPU us/req",
        "effect-rl CPU us/req",
        "CPU ratio",
        "range",
        "openai req/s",
        "effect-rl req/s",
        "rate ratio",
        "range"
      ]
    ]
    const summary: Record<string, { readonly cpu_ratio: number; readonly rate_ratio: number }> = {}
    for (const { key } of keys) {
      const o = samples.get(`openai ${key}`)!
      const e = samples.get(`effect-rl ${key}`)!
      const r = ratios.get(key)!
      const cpu = median(r.map((x) => x.cpu))
      const rate = median(r.map((x) => x.rate))
      summary[key] = { cpu_ratio: Number(cpu.toFixed(3)), rate_ratio: Number(rate.toFixed(3)) }
      rows.push([
        key,
        fmt(median(o.map((s) => s.cpuPerRequest)), 0),
        fmt(median(e.map((s) => s.cpuPerRequest)), 0),
        `${fmt(cpu, 2)}x`,
        range(r.map((x) => x.cpu)),
        fmt(median(o.map((s) => s.rate)), 0),
        fmt(median(e.map((s) => s.rate)), 0),
        `${fmt(rate, 2)}x`,
        range(r.map((x) => x.rate))
      ])
    }
    printTable(rows)
    console.log(
      `load at the end ${loadavg()
        .map((l) => l.toFixed(1))
        .join(" ")}`
    )
    console.log(`summary: ${JSON.stringify(summary)}`)
  } finally {
    await effect.dispose()
    server.child.kill()
  }
}

/**
 * The bench itself runs as plain JavaScript: this file (with the library's sources) bundled by esbuild and run by
 * `node` without tsx, as a user's compiled application runs. Under tsx, source maps are on for the whole
 * process, and Node formats the stack of every error a stream is destroyed with (`streams/destroy` reads
 * `err.stack`; the platform aborts each finished request), through the source maps: a cost no user pays, and
 * that fell on effect-rl's side only. `--tsx` runs in this process instead, to see that cost.
 */
const bundleAndRun = async () => {
  const { build } = await import("esbuild")
  const root = new URL("../", import.meta.url).pathname
  // Inside the repository, so that the bundle's bare imports (effect, openai, ...) resolve to node_modules.
  const dir = join(root, "node_modules", ".cache", "effect-rl-bench")
  mkdirSync(dir, { recursive: true })
  const outfile = join(dir, "client.mjs")
  await build({
    entryPoints: [new URL(import.meta.url).pathname],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    outfile,
    logLevel: "warning"
  })
  const profile = process.execArgv.filter(isProfileFlag)
  const child = spawn(process.execPath, [...profile, outfile, "--run", ...process.argv.slice(2)], { stdio: "inherit" })
  const code = await new Promise<number>((resolve) => child.once("exit", (c) => resolve(c ?? 1)))
  process.exit(code)
}

if (process.argv.includes("--serve")) serve()
else if (process.argv.includes("--run") || process.argv.includes("--tsx"))
  main().catch((error) => {
    console.error(error instanceof Error ? (error.stack ?? error.message) : error)
    process.exit(1)
  })
else void bundleAndRun()
