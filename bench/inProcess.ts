/**
 * What a chat completion costs the program that embeds the backend, three ways: over the loopback network
 * (`network`: undici, as a separate program's client), through `LocalBackend`'s in-process `fetch` (`fetch`: Web
 * `Request` and `Response` objects, no socket), and through its `httpClient` (`client`: light requests and
 * responses, what `Backend.local`'s clients use). Measured: this process's CPU (user + system, client and server
 * both run here) per request and requests a second, for a short completion like `npm start`'s moves (a two-token
 * answer to a short prompt, seeded), one request at a time and 32 in flight.
 *
 *   npx tsx bench/inProcess.ts [--requests=600] [--rounds=5] [--only=network|fetch|client]
 *
 * `--only` runs one way alone (no ratio), for a profile of it: `node --cpu-prof --import tsx bench/inProcess.ts ...`.
 *
 * One embedded backend; each round runs every way (their order rotating from round to round), a full GC before
 * each when `--expose-gc` is on. The ratio of each way's CPU to the network's is taken within a round; the table
 * gives each way's median over the rounds and the median (and range) of its ratios. A first round, not counted,
 * warms every path up (JIT, the prefix cache).
 */
import { availableParallelism, loadavg } from "node:os"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as InferenceClient from "../src/client/InferenceClient.js"
import * as LocalBackend from "../src/LocalBackend.js"
import { BASE_MODEL } from "../src/local/server/internal/inference.js"
import { fmt, intFlag, median, printTable } from "./harness.js"

const requests = intFlag("requests", 600)
const rounds = intFlag("rounds", 5)
const only = process.argv.find((arg) => arg.startsWith("--only="))?.slice("--only=".length)

const backendRuntime = ManagedRuntime.make(LocalBackend.layer())
const backend = await backendRuntime.runPromise(LocalBackend.LocalBackend)

/** The inference client over `http`. */
const clientOver = (http: Layer.Layer<HttpClient.HttpClient>) =>
  ManagedRuntime.make(InferenceClient.layer({ baseUrl: backend.url, apiKey: backend.apiKey }).pipe(Layer.provide(http)))

const ways = {
  network: clientOver(NodeHttpClient.layerUndici),
  fetch: clientOver(FetchHttpClient.layer.pipe(Layer.provide(Layer.succeed(FetchHttpClient.Fetch, backend.fetch)))),
  client: clientOver(Layer.succeed(HttpClient.HttpClient, backend.httpClient))
} as const
type Way = keyof typeof ways
const all = Object.keys(ways) as ReadonlyArray<Way>
const chosen = all.filter((way) => only === undefined || way === only)
if (chosen.length === 0) throw new Error(`--only: one of ${all.join(", ")}`)

/** A move's prompt: a few turns of a game, different per request (so each is its own prompt). */
const ask = (i: number) => ({
  model: BASE_MODEL,
  messages: [
    { role: "system" as const, content: "You play tic-tac-toe. Answer with the cell, 1 to 9." },
    { role: "user" as const, content: `Board: x.o ... ..${i % 10}. Your move.` }
  ],
  seed: i,
  max_tokens: 2
})

interface Run {
  readonly cpuUs: number
  readonly perSecond: number
}

/** CPU microseconds a request and requests a second of `count` requests made `inFlight` at a time. */
const run = async (way: Way, inFlight: number, count: number): Promise<Run> => {
  const runtime = ways[way]
  const one = (i: number) =>
    runtime.runPromise(Effect.flatMap(InferenceClient.InferenceClient, (client) => client.createChatCompletion(ask(i))))
  ;(globalThis as { gc?: () => void }).gc?.()
  const cpu = process.cpuUsage()
  const started = performance.now()
  let next = 0
  const lane = async () => {
    while (next < count) await one(next++)
  }
  await Promise.all(Array.from({ length: inFlight }, lane))
  const seconds = (performance.now() - started) / 1000
  const used = process.cpuUsage(cpu)
  return { cpuUs: (used.user + used.system) / count, perSecond: count / seconds }
}

console.log(
  `${availableParallelism()} cores, load ${loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")}; ${requests} requests a run, ${rounds} rounds (+1 warm-up)`
)
const rows: Array<Array<string>> = [["in flight", "way", "us CPU/req", "CPU vs network (range)", "req/s"]]
for (const inFlight of [1, 32]) {
  const seen = new Map<Way, Array<Run>>(chosen.map((way) => [way, []]))
  const ratios = new Map<Way, Array<number>>(chosen.map((way) => [way, []]))
  for (let round = -1; round < rounds; round++) {
    const shift = ((round % chosen.length) + chosen.length) % chosen.length
    const order = [...chosen.slice(shift), ...chosen.slice(0, shift)]
    const got = new Map<Way, Run>()
    for (const way of order) got.set(way, await run(way, inFlight, requests))
    if (round < 0) continue
    for (const [way, measured] of got) {
      seen.get(way)!.push(measured)
      const network = got.get("network")
      if (network !== undefined) ratios.get(way)!.push(measured.cpuUs / network.cpuUs)
    }
  }
  for (const way of chosen) {
    const runs = seen.get(way)!
    const own = ratios.get(way)!
    rows.push([
      String(inFlight),
      way,
      fmt(median(runs.map((r) => r.cpuUs)), 0),
      own.length === 0 || way === "network"
        ? "-"
        : `${fmt(median(own), 2)} (${fmt(Math.min(...own), 2)}-${fmt(Math.max(...own), 2)})`,
      fmt(median(runs.map((r) => r.perSecond)), 0)
    ])
  }
}
printTable(rows)
await Promise.all(Object.values(ways).map((runtime) => runtime.dispose()))
await backendRuntime.dispose()
