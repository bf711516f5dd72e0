/**
 * What a chat completion costs the program that embeds the backend, over the loopback network against in-process
 * (`LocalBackend`'s `fetch`, which `Backend.local`'s clients use): this process's CPU (user + system, client and
 * server both run here) per request and requests a second, for a short completion like `npm start`'s moves (a
 * two-token answer to a short prompt, seeded), one request at a time and 32 in flight.
 *
 *   npx tsx bench/inProcess.ts [--requests=600] [--rounds=5] [--only=in-process|network]
 *
 * `--only` runs one way alone (no ratio), for a profile of it: `node --cpu-prof --import tsx bench/inProcess.ts ...`.
 *
 * One embedded backend; each round runs both ways (network first in even rounds, in-process first in odd ones),
 * a full GC before each when `--expose-gc` is on. The ratio in-process / network is taken within a round; the
 * table gives each way's median over the rounds and the median (and range) of the ratios. A first round, not
 * counted, warms both paths up (JIT, the prefix cache).
 */
import { availableParallelism, loadavg } from "node:os"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
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
const clientOver = (http: Layer.Layer<import("@effect/platform/HttpClient").HttpClient>) =>
  ManagedRuntime.make(InferenceClient.layer({ baseUrl: backend.url, apiKey: backend.apiKey }).pipe(Layer.provide(http)))

const ways = {
  network: clientOver(NodeHttpClient.layerUndici),
  "in-process": clientOver(
    FetchHttpClient.layer.pipe(Layer.provide(Layer.succeed(FetchHttpClient.Fetch, backend.fetch)))
  )
} as const
type Way = keyof typeof ways

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

/** CPU microseconds a request and requests a second of `count` requests made `inFlight` at a time. */
const run = async (way: Way, inFlight: number, count: number) => {
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
const rows: Array<Array<string>> = [
  ["in flight", "network us CPU/req", "in-process us CPU/req", "ratio (range)", "network req/s", "in-process req/s"]
]
for (const inFlight of [1, 32]) {
  const seen: Record<Way, Array<{ cpuUs: number; perSecond: number }>> = { network: [], "in-process": [] }
  const ratios: Array<number> = []
  for (let round = -1; round < rounds; round++) {
    const order: ReadonlyArray<Way> =
      only === "network" || only === "in-process"
        ? [only]
        : round % 2 === 0
          ? ["network", "in-process"]
          : ["in-process", "network"]
    const got: Partial<Record<Way, { cpuUs: number; perSecond: number }>> = {}
    for (const way of order) got[way] = await run(way, inFlight, requests)
    if (round < 0) continue
    if (got.network !== undefined) seen.network.push(got.network)
    if (got["in-process"] !== undefined) seen["in-process"].push(got["in-process"])
    if (got.network !== undefined && got["in-process"] !== undefined) {
      ratios.push(got["in-process"].cpuUs / got.network.cpuUs)
    }
  }
  const med = (way: Way, key: "cpuUs" | "perSecond") =>
    seen[way].length === 0 ? Number.NaN : median(seen[way].map((m) => m[key]))
  rows.push([
    String(inFlight),
    fmt(med("network", "cpuUs"), 0),
    fmt(med("in-process", "cpuUs"), 0),
    ratios.length === 0
      ? "-"
      : `${fmt(median(ratios), 2)} (${fmt(Math.min(...ratios), 2)}-${fmt(Math.max(...ratios), 2)})`,
    fmt(med("network", "perSecond"), 0),
    fmt(med("in-process", "perSecond"), 0)
  ])
}
printTable(rows)
await Promise.all(Object.values(ways).map((runtime) => runtime.dispose()))
await backendRuntime.dispose()
