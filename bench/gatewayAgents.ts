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
 *    request through the gateway: the time to the first content chunk, and how the chunks spread over the
 *    completion (goal: within 1.2x of the policy's own, chunks spread). The SDK runs in a child process of its own
 *    (`gateway/streamer.mjs`, a new client a request), for both: an agent is a process of its own, and an SDK on
 *    the gateway's event loop would share its CPU with the relay. Beside them, the policy's own request as the
 *    rollout sends it upstream (log-probabilities, token ids and usage asked for, which the trace records), and
 *    two floors (`gateway/relays.ts`): a raw `node:http` relay and a bare `@effect/platform` relay, what one hop
 *    costs at the least and what the platform's own streaming costs. Every path is warmed first (`--ttft-warm`
 *    short completions each), so the relay's code is compiled, as a gateway's is after its first steps.
 *
 * 3. **CPU per request.** What a request costs this process's CPU, the client's included (one keep-alive
 *    `node:http` client, requests one after another), in alternating rounds: a raw `node:http` server answering
 *    the completion, a bare `@effect/platform` app on `NodeHttpServer` reading the JSON body and answering the
 *    same, and the gateway with the instant policy (rollouts of 10 requests each, as the agents send). CPU time,
 *    not wall time, so a loaded machine changes the figures less; it says what a burst of 256 requests costs at
 *    the least (256 x the cost).
 *
 * Run: `npm run bench:gateway-agents [-- --workers 4 --requests 10 --rounds 3 --ttft 20 --ttft-warm 300]` (`--ttft-only`,
 * `--cpu-only`, `--scale-only`).
 */
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Backend from "../src/Backend.js"
import * as Policy from "../src/workflow/Policy.js"
import * as Rollout from "../src/workflow/Rollout.js"
import * as RolloutGateway from "../src/workflow/RolloutGateway.js"
import { BODY, COMPLETION, instant, quantile } from "./gateway/instant.js"
import { platformRelay, rawRelay } from "./gateway/relays.js"
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
const TTFT_WARM = flag("ttft-warm", 300)
const CPU_ROUNDS = flag("cpu-rounds", 5)

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

/** The agent's process: one streamed request at a time, its timing (see `gateway/streamer.mjs`). */
const streamer = Effect.acquireRelease(
  Effect.sync(() => {
    const child = spawn(process.execPath, [new URL("./gateway/streamer.mjs", import.meta.url).pathname], {
      stdio: ["pipe", "pipe", "inherit"]
    })
    const replies = createInterface({ input: child.stdout })[Symbol.asyncIterator]()
    return {
      child,
      /** Streams `request` to `model` at `baseUrl` from the child: ms to the first and last content chunk. */
      stream: (baseUrl: string, apiKey: string, model: string, request: object) =>
        Effect.promise(async () => {
          child.stdin.write(`${JSON.stringify({ baseUrl, apiKey, model, request })}\n`)
          const reply = await replies.next()
          if (reply.done === true) throw new Error("the agent process ended")
          return JSON.parse(reply.value as string) as { first: number; last: number; count: number }
        })
    }
  }),
  ({ child }) => Effect.sync(() => child.kill())
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
  const agent = yield* streamer
  const raw = yield* rawRelay(server.url)
  const bare = yield* platformRelay(server.url)
  const request = {
    messages: [{ role: "user" as const, content: "Tell me a story." }],
    max_tokens: 256,
    ignore_eos: true,
    temperature: 1
  }
  // What a rollout asks of the policy beside the agent's request (Rollout.chatStream).
  const upstream = { ...request, logprobs: true, return_token_ids: true, stream_options: { include_usage: true } }
  type Timing = { first: number; last: number; count: number }
  /** One request of `body` by every path: the policy's own, as relayed, the two floors, through a rollout. */
  const each = (body: typeof request) =>
    Effect.gen(function* () {
      const mine = yield* agent.stream(`${server.url}/v1`, key, policy.name, body)
      const sent = yield* agent.stream(`${server.url}/v1`, key, policy.name, {
        ...upstream,
        max_tokens: body.max_tokens
      })
      const relayed = yield* agent.stream(raw, key, policy.name, body)
      const platform = yield* agent.stream(bare, key, policy.name, body)
      const theirs = yield* Rollout.run(
        policy,
        RolloutGateway.withEndpoint((endpoint) =>
          agent.stream(endpoint.baseUrl, Redacted.value(endpoint.apiKey), "policy", body)
        )
      )
      return { mine, sent, relayed, platform, theirs: theirs.value }
    })
  // Warm-up, short completions by every path: a gateway in training has answered thousands of requests, its
  // code compiled by the JIT; after two requests it is interpreted (request to upstream call 5.7 ms after two,
  // 2.3 after 400, measured by hand with marks at each stage).
  for (let run = 0; run < TTFT_WARM; run++) yield* each({ ...request, max_tokens: 2 })
  const own: Array<Timing> = []
  const asSent: Array<Timing> = []
  const rawRelayed: Array<Timing> = []
  const platformRelayed: Array<Timing> = []
  const gateway: Array<Timing> = []
  for (let run = 0; run < TTFT_RUNS; run++) {
    const { mine, sent, relayed, platform, theirs } = yield* each(request)
    own.push(mine)
    asSent.push(sent)
    rawRelayed.push(relayed)
    platformRelayed.push(platform)
    gateway.push(theirs)
  }
  const firsts = (xs: ReadonlyArray<{ first: number }>) => xs.map((x) => x.first)
  console.log(
    `\ntime to first token, streamed, 256 tokens of effect-rl/base-2k on the embedded backend, the agent in its own process (${TTFT_RUNS} each):`
  )
  console.log(row("policy's own", firsts(own)))
  console.log(row("own, as relayed", firsts(asSent)))
  console.log(row("raw node relay", firsts(rawRelayed)))
  console.log(row("platform relay", firsts(platformRelayed)))
  console.log(row("through gateway", firsts(gateway)))
  const ratio = (xs: ReadonlyArray<Timing>, q: number) =>
    `${(quantile(firsts(xs), q) / quantile(firsts(own), q)).toFixed(2)}x`
  for (const [name, xs] of [
    ["raw node relay", rawRelayed],
    ["platform relay", platformRelayed],
    ["through gateway", gateway]
  ] as const) {
    console.log(`  ${name.padEnd(16)} ratio to own p50 ${ratio(xs, 0.5)}  p99 ${ratio(xs, 0.99)}`)
  }
  const over = (xs: ReadonlyArray<Timing>) =>
    `${(quantile(firsts(gateway), 0.5) / quantile(firsts(xs), 0.5)).toFixed(2)}x`
  console.log(
    `  through gateway  p50 ${over(rawRelayed)} the raw relay's, ${over(platformRelayed)} the platform relay's (goal as written: within 1.2x of own)`
  )
  const spread = (xs: ReadonlyArray<Timing>) =>
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

/** One request after another over one keep-alive connection: what each costs this process's CPU, in us. */
const cpuPerRequest = (url: string, key: string, count: number) =>
  Effect.promise(async () => {
    const target = new URL(url)
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
    const send = () =>
      new Promise<void>((resolve, reject) => {
        const request = http.request(
          {
            host: target.hostname,
            port: target.port,
            path: target.pathname,
            method: "POST",
            agent,
            headers: {
              authorization: `Bearer ${key}`,
              "content-type": "application/json",
              "content-length": Buffer.byteLength(BODY)
            }
          },
          (response) => {
            response.resume()
            response.once("end", () =>
              response.statusCode === 200 ? resolve() : reject(new Error(`status ${response.statusCode}`))
            )
          }
        )
        request.once("error", reject)
        request.end(BODY)
      })
    const start = process.cpuUsage()
    for (let i = 0; i < count; i++) await send()
    const used = process.cpuUsage(start)
    agent.destroy()
    return (used.user + used.system) / count
  })

/** A bare `@effect/platform` app on `NodeHttpServer`: the JSON body read, the completion answered. */
const bareApp = Effect.gen(function* () {
  const context = yield* Layer.build(
    Layer.provideMerge(
      HttpServer.serve(
        Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
          Effect.as(Effect.orDie(request.json), HttpServerResponse.unsafeJson(COMPLETION))
        )
      ),
      NodeHttpServer.layer(() => http.createServer(), { port: 0, host: "127.0.0.1" })
    )
  )
  const address = Context.get(context, HttpServer.HttpServer).address
  return `http://127.0.0.1:${address._tag === "TcpAddress" ? address.port : 0}/v1/chat/completions`
})

const cpu = Effect.gen(function* () {
  const server = yield* baseline
  const plainUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/chat/completions`
  const bareUrl = yield* bareApp
  /** 20 rollouts of the instant policy, 10 requests each through the gateway: CPU per request. */
  const gatewayRound = Effect.gen(function* () {
    let total = 0
    for (let r = 0; r < 20; r++) {
      total += yield* Rollout.run(
        instant,
        RolloutGateway.withEndpoint((endpoint) =>
          cpuPerRequest(`${endpoint.baseUrl}/chat/completions`, Redacted.value(endpoint.apiKey), 10)
        )
      ).pipe(Effect.map((finished) => finished.value))
    }
    return total / 20
  })
  const rows = { raw: [] as Array<number>, bare: [] as Array<number>, gateway: [] as Array<number> }
  for (let round = -1; round < CPU_ROUNDS; round++) {
    const raw = yield* cpuPerRequest(plainUrl, "none", 200)
    const bare = yield* cpuPerRequest(bareUrl, "none", 200)
    const gateway = yield* gatewayRound
    if (round >= 0) {
      rows.raw.push(raw)
      rows.bare.push(bare)
      rows.gateway.push(gateway)
    }
  }
  const us = (xs: ReadonlyArray<number>) =>
    `${Math.min(...xs).toFixed(0)} / ${quantile(xs, 0.5).toFixed(0)} / ${Math.max(...xs).toFixed(0)} us`
  console.log(
    `\nCPU per request, this process (client included), min / median / max of ${CPU_ROUNDS} rounds, load ${loadavg()[0]!.toFixed(2)}:`
  )
  console.log(`  raw node:http server           ${us(rows.raw)}`)
  console.log(
    `  bare @effect/platform app       ${us(rows.bare)}  (${(quantile(rows.bare, 0.5) / quantile(rows.raw, 0.5)).toFixed(1)}x raw)`
  )
  console.log(
    `  through the gateway             ${us(rows.gateway)}  (${(quantile(rows.gateway, 0.5) / quantile(rows.raw, 0.5)).toFixed(1)}x raw)`
  )
  console.log(
    `  a burst of ${AGENTS} requests costs at least ${((AGENTS * quantile(rows.gateway, 0.5)) / 1000).toFixed(0)} ms of CPU through the gateway, ${((AGENTS * quantile(rows.bare, 0.5)) / 1000).toFixed(0)} ms on the bare platform app, ${((AGENTS * quantile(rows.raw, 0.5)) / 1000).toFixed(0)} ms raw`
  )
})

const program = Effect.gen(function* () {
  console.log(`rollout gateway, agents in processes (node ${process.version}, load ${loadavg()[0]!.toFixed(2)})`)
  const only = ["ttft", "cpu", "scale"].find((part) => process.argv.includes(`--${part}-only`))
  if (only === undefined || only === "scale") yield* scale
  if (only === undefined || only === "cpu") yield* cpu
  if (only === undefined || only === "ttft") yield* ttft
}).pipe(Effect.scoped, Effect.provide(RolloutGateway.layer()))

Effect.runPromise(program).catch((error) => {
  console.error(error)
  process.exitCode = 1
})
