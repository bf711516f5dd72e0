/**
 * The rollout gateway as agents in their own processes see it (issue 35's goals; figures, not tests):
 *
 * 1. **Added latency at scale.** 256 rollouts, each with its own endpoint on one gateway, an instant policy;
 *    their agents run in `--workers` child processes (not on the gateway's event loop), all at once, each
 *    sending `--requests` chat completions one after another. The baseline is the same workers against a plain
 *    `node:http` server in this process that answers the same completion at once: what the gateway adds is the
 *    difference (goal: p99 at most 50 ms, median at most 2 ms). Rounds alternate baseline and gateway. Figures
 *    for every request, and for the steady state (each agent's third request on): the first two of a burst of
 *    256 agents starting together wait on the load generator's own client (`fetch`'s connection pool), as much
 *    against the plain server as through the gateway.
 * 2. **Time to first token, streamed.** The embedded backend (`effect-rl serve`, in a process of its own, as the
 *    hosted service is: its decoding does not share this event loop with the relay) samples 256 tokens; the policy's
 *    own streamed request (the `openai` SDK straight at the backend) against a rollout's agent streaming the same
 *    request through the gateway (the same SDK, in this process): the time to the first content chunk, and how
 *    the chunks spread over the completion (goal: within 1.2x of the policy's own, chunks spread).
 *
 * Run: `npm run bench:gateway-agents [-- --workers 4 --requests 10 --rounds 3 --ttft 20]`.
 */
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import OpenAI from "openai"
import * as Backend from "../src/Backend.js"
import * as Policy from "../src/workflow/Policy.js"
import * as Rollout from "../src/workflow/Rollout.js"
import * as RolloutGateway from "../src/workflow/RolloutGateway.js"
import { BODY, COMPLETION, instant, quantile } from "./gateway/instant.js"
import { startServer, stopServer } from "./serverProcess.js"

const flag = (name: string, fallback: number) => {
  const at = process.argv.indexOf(`--${name}`)
  return at === -1 ? fallback : Number(process.argv[at + 1])
}
const AGENTS = flag("agents", 256)
const WORKERS = flag("workers", 4)
const REQUESTS = flag("requests", 10)
const ROUNDS = flag("rounds", 3)
const TTFT_RUNS = flag("ttft", 20)

const ms = (n: number) => `${n.toFixed(2)} ms`
const row = (name: string, values: ReadonlyArray<number>) =>
  `  ${name.padEnd(16)} p50 ${ms(quantile(values, 0.5)).padStart(10)}  p99 ${ms(quantile(values, 0.99)).padStart(10)}  max ${ms(Math.max(...values)).padStart(10)}`

/** A request's latency, with its place in its agent's sequence. */
type Latency = readonly [index: number, ms: number]

/** Runs the agents over `WORKERS` processes against `targets`; every request's latency. */
const agents = (targets: ReadonlyArray<{ readonly url: string; readonly key: string }>) =>
  Effect.promise(async () => {
    const shares = Array.from({ length: WORKERS }, (_, w) => targets.filter((_, i) => i % WORKERS === w))
    const results = await Promise.all(
      shares.map(
        (share) =>
          new Promise<ReadonlyArray<Latency>>((resolve, reject) => {
            const child = spawn(process.execPath, [new URL("./gateway/agents.mjs", import.meta.url).pathname], {
              stdio: ["pipe", "pipe", "inherit"]
            })
            let out = ""
            child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
              out += chunk
            })
            child.once("exit", (code) =>
              code === 0
                ? resolve(JSON.parse(out) as ReadonlyArray<Latency>)
                : reject(new Error(`worker exited ${code}`))
            )
            child.stdin.end(JSON.stringify({ targets: share, requests: REQUESTS, body: BODY }))
          })
      )
    )
    return results.flat()
  })

/** A plain server answering the completion at once: what the workers' requests cost without a gateway. */
const baseline = Effect.acquireRelease(
  Effect.promise(
    () =>
      new Promise<http.Server>((resolve) => {
        const answer = JSON.stringify(COMPLETION)
        const server = http.createServer((req, res) => {
          req.resume()
          req.once("end", () => res.writeHead(200, { "content-type": "application/json" }).end(answer))
        })
        server.keepAliveTimeout = 5_000
        server.listen(0, "127.0.0.1", () => resolve(server))
      })
  ),
  (server) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
)

const scale = Effect.gen(function* () {
  const server = yield* baseline
  const plainUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/chat/completions`
  // The rollouts stay open while the rounds run; each gives its endpoint and waits to be released.
  const release = yield* Deferred.make<void>()
  const endpoints: Array<{ readonly url: string; readonly key: string }> = []
  const ready = yield* Deferred.make<void>()
  const fiber = yield* Effect.fork(
    Effect.forEach(
      Array.from({ length: AGENTS }, (_, i) => i),
      () =>
        Rollout.run(
          instant,
          RolloutGateway.withEndpoint((endpoint) =>
            Effect.gen(function* () {
              endpoints.push({ url: `${endpoint.baseUrl}/chat/completions`, key: Redacted.value(endpoint.apiKey) })
              if (endpoints.length === AGENTS) yield* Deferred.succeed(ready, undefined)
              yield* Deferred.await(release)
            })
          )
        ),
      { concurrency: "unbounded", discard: true }
    )
  )
  yield* Deferred.await(ready)
  const plain = endpoints.map(({ key }) => ({ url: plainUrl, key }))
  // Warm-up: connections, code paths.
  yield* agents(plain)
  yield* agents(endpoints)
  const direct: Array<Latency> = []
  const through: Array<Latency> = []
  for (let round = 0; round < ROUNDS; round++) {
    direct.push(...(yield* agents(plain)))
    through.push(...(yield* agents(endpoints)))
  }
  yield* Deferred.succeed(release, undefined)
  yield* Fiber.join(fiber)
  console.log(
    `\n${AGENTS} agents at once in ${WORKERS} processes, ${REQUESTS} requests each, ${ROUNDS} rounds (${through.length} requests a side):`
  )
  const all = (xs: ReadonlyArray<Latency>) => xs.map(([, ms]) => ms)
  const steady = (xs: ReadonlyArray<Latency>) => xs.filter(([index]) => index >= 2).map(([, ms]) => ms)
  for (const [name, pick] of [
    ["every request", all],
    ["steady (3rd on)", steady]
  ] as const) {
    const [plain, gateway] = [pick(direct), pick(through)]
    console.log(` ${name}:`)
    console.log(row("plain server", plain))
    console.log(row("through gateway", gateway))
    console.log(
      `  added            p50 ${ms(quantile(gateway, 0.5) - quantile(plain, 0.5)).padStart(10)}  p99 ${ms(quantile(gateway, 0.99) - quantile(plain, 0.99)).padStart(10)}  (goal: p50 <= 2 ms, p99 <= 50 ms)`
    )
  }
})

/** A streamed request's time from `start` to its first content chunk, and the spread of its chunks, in ms. */
const timing = async (start: number, chunks: AsyncIterable<{ readonly content: boolean }>) => {
  const arrivals: Array<number> = []
  for await (const chunk of chunks) if (chunk.content) arrivals.push(performance.now() - start)
  return { first: arrivals[0] ?? Number.NaN, last: arrivals.at(-1) ?? Number.NaN, count: arrivals.length }
}

/** The embedded backend in a process of its own, for the life of the scope: its URL and key. */
const backendProcess = Effect.acquireRelease(
  Effect.promise(async () => {
    const dir = mkdtempSync(join(tmpdir(), "effect-rl-bench-ttft-"))
    const key = `bench-${crypto.randomUUID()}`
    return { dir, key, server: await startServer(dir, key) }
  }),
  ({ dir, server }) =>
    Effect.promise(async () => {
      await stopServer(server.child)
      rmSync(dir, { recursive: true, force: true })
    })
)

const ttft = Effect.gen(function* () {
  const { key, server } = yield* backendProcess
  // Built in the bench's scope: the policy's client lives as long as the runs.
  const clients = yield* Layer.build(
    Backend.hosted({
      training: { baseUrl: server.url, apiKey: Redacted.make(key) },
      inference: { baseUrl: server.url, apiKey: Redacted.make(key) },
      trace: { baseUrl: server.url, apiKey: Redacted.make(key) }
    })
  )
  const policy = yield* Effect.provide(
    Policy.trainable({ project: "bench", name: "ttft", base_model: "effect-rl/base-2k" }),
    clients
  )
  const direct = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: key })
  /** The time to the first content chunk of an SDK's streamed completion, and the chunks' spread. */
  const streamed = async (openai: OpenAI, model: string) => {
    const start = performance.now()
    const stream = await openai.chat.completions.create({ model, stream: true, ...request } as never)
    return timing(
      start,
      (async function* () {
        for await (const chunk of stream as unknown as AsyncIterable<OpenAI.ChatCompletionChunk>) {
          yield { content: (chunk.choices[0]?.delta.content ?? "") !== "" }
        }
      })()
    )
  }
  const request = {
    messages: [{ role: "user" as const, content: "Tell me a story." }],
    max_tokens: 256,
    ignore_eos: true,
    temperature: 1
  }
  const own: Array<{ first: number; last: number; count: number }> = []
  const gateway: Array<{ first: number; last: number; count: number }> = []
  for (let run = -2; run < TTFT_RUNS; run++) {
    // The same SDK, the same request: straight at the backend (the policy's own), then through a rollout.
    const mine = yield* Effect.promise(() => streamed(direct, policy.name))
    const theirs = yield* Rollout.run(
      policy,
      RolloutGateway.withEndpoint((endpoint) =>
        Effect.promise(() =>
          streamed(new OpenAI({ baseURL: endpoint.baseUrl, apiKey: Redacted.value(endpoint.apiKey) }), "policy")
        )
      )
    )
    if (run >= 0) {
      own.push(mine)
      gateway.push(theirs.value)
    }
  }
  const firsts = (xs: ReadonlyArray<{ first: number }>) => xs.map((x) => x.first)
  console.log(
    `\ntime to first token, streamed, 256 tokens of effect-rl/base-2k on the embedded backend (${TTFT_RUNS} each):`
  )
  console.log(row("policy's own", firsts(own)))
  console.log(row("through gateway", firsts(gateway)))
  console.log(
    `  ratio p50 ${(quantile(firsts(gateway), 0.5) / quantile(firsts(own), 0.5)).toFixed(2)}x  p99 ${(quantile(firsts(gateway), 0.99) / quantile(firsts(own), 0.99)).toFixed(2)}x  (goal: within 1.2x)`
  )
  const spread = (xs: ReadonlyArray<{ first: number; last: number; count: number }>) =>
    `content chunks ${quantile(
      xs.map((x) => x.count),
      0.5
    )} (p50), first-to-last ${ms(
      quantile(
        xs.map((x) => x.last - x.first),
        0.5
      )
    )} of a ${ms(
      quantile(
        xs.map((x) => x.last),
        0.5
      )
    )} completion`
  console.log(`  policy's own     ${spread(own)}`)
  console.log(`  through gateway  ${spread(gateway)}`)
})

const program = Effect.gen(function* () {
  console.log(`rollout gateway, agents in processes (node ${process.version}, load ${loadavg()[0]!.toFixed(2)})`)
  if (!process.argv.includes("--ttft-only")) yield* scale
  yield* ttft
}).pipe(Effect.scoped, Effect.provide(RolloutGateway.layer()))

Effect.runPromise(program).catch((error) => {
  console.error(error)
  process.exitCode = 1
})
