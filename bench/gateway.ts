/**
 * The rollout gateway's cost: the latency it adds to a chat completion (an agent's HTTP request on loopback,
 * through the gateway's listener, key check and routing, to the rollout's handler and back) against calling the
 * same rollout's handler directly in-process; then 256 agents, each with its own rollout and endpoint, sending
 * requests at once through one gateway. The policy answers at once (`Policy.make`), so what is measured is the
 * gateway and the rollout's recording, not a model. Goal: at most 2 ms added per request (median) on loopback.
 *
 * Run: `npm run bench:gateway` (or `npx tsx bench/gateway.ts`).
 */
import { loadavg } from "node:os"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import type { ChatCompletion } from "../src/api/ChatCompletion.js"
import * as Rollout from "../src/workflow/Rollout.js"
import * as RolloutFetch from "../src/workflow/RolloutFetch.js"
import * as RolloutGateway from "../src/workflow/RolloutGateway.js"
import { BODY, instant, quantile } from "./gateway/instant.js"
import { median } from "./harness.js"

const policy = instant
const body = BODY

const ms = (n: number) => `${n.toFixed(3)} ms`

const check = async (response: Response) => {
  if (response.status !== 200) throw new Error(`status ${response.status}: ${await response.text()}`)
  const completion = (await response.json()) as ChatCompletion
  if (completion.choices[0]?.message.content !== "yes") throw new Error("unexpected completion")
}

/** Per-request latency, direct and through the gateway, interleaved in the same rollouts. */
const latency = (rollouts: number, perRollout: number) =>
  Effect.gen(function* () {
    const direct: Array<number> = []
    const gateway: Array<number> = []
    for (let r = 0; r < rollouts; r++) {
      yield* Rollout.run(
        policy,
        RolloutGateway.withEndpoint((endpoint) =>
          Effect.gen(function* () {
            const handler = yield* RolloutFetch.handler()
            const url = `${endpoint.baseUrl}/chat/completions`
            const headers = {
              authorization: `Bearer ${Redacted.value(endpoint.apiKey)}`,
              "content-type": "application/json"
            }
            yield* Effect.promise(async () => {
              for (let i = 0; i < perRollout; i++) {
                let start = performance.now()
                await check(await handler(new Request(url, { method: "POST", headers, body })))
                direct.push(performance.now() - start)
                start = performance.now()
                await check(await fetch(url, { method: "POST", headers, body }))
                gateway.push(performance.now() - start)
              }
            })
          })
        )
      )
    }
    return { direct, gateway }
  })

/** `agents` rollouts at once, each sending `requests` requests one after another, through the gateway or not. */
const concurrent = (agents: number, requests: number, through: "gateway" | "direct") =>
  Effect.gen(function* () {
    const latencies: Array<number> = []
    const start = performance.now()
    yield* Effect.forEach(
      Array.from({ length: agents }, (_, i) => i),
      () =>
        Rollout.run(
          policy,
          RolloutGateway.withEndpoint((endpoint) =>
            Effect.gen(function* () {
              const handler = yield* RolloutFetch.handler()
              const url = `${endpoint.baseUrl}/chat/completions`
              const headers = {
                authorization: `Bearer ${Redacted.value(endpoint.apiKey)}`,
                "content-type": "application/json"
              }
              yield* Effect.promise(async () => {
                for (let i = 0; i < requests; i++) {
                  const t = performance.now()
                  const init = { method: "POST", headers, body }
                  await check(await (through === "gateway" ? fetch(url, init) : handler(new Request(url, init))))
                  latencies.push(performance.now() - t)
                }
              })
            })
          )
        ),
      { concurrency: "unbounded", discard: true }
    )
    const seconds = (performance.now() - start) / 1000
    return { seconds, latencies, rate: (agents * requests) / seconds }
  })

const program = Effect.gen(function* () {
  console.log(`rollout gateway bench (node ${process.version}, load ${loadavg()[0]!.toFixed(2)})`)
  yield* latency(10, 20) // warm-up
  const { direct, gateway } = yield* latency(100, 20)
  const added = gateway.map((g, i) => g - direct[i]!)
  console.log(`\nper request, sequential (${direct.length} each, interleaved):`)
  console.log(`  direct handler   median ${ms(median(direct))}  p99 ${ms(quantile(direct, 0.99))}`)
  console.log(`  through gateway  median ${ms(median(gateway))}  p99 ${ms(quantile(gateway, 0.99))}`)
  console.log(
    `  added by gateway median ${ms(median(added))}  p99 ${ms(quantile(added, 0.99))}  (goal: median <= 2 ms; ratio ${(median(gateway) / median(direct)).toFixed(1)}x)`
  )
  const AGENTS = 256
  const REQUESTS = 10
  // Warm-up at full size: the first requests of a process open its connections and compile the code paths.
  yield* concurrent(AGENTS, 2, "gateway")
  yield* concurrent(AGENTS, 2, "direct")
  const viaDirect = yield* concurrent(AGENTS, REQUESTS, "direct")
  const viaGateway = yield* concurrent(AGENTS, REQUESTS, "gateway")
  console.log(`\n${AGENTS} agents at once, ${REQUESTS} requests each, one gateway:`)
  for (const [name, run] of [
    ["direct handler ", viaDirect],
    ["through gateway", viaGateway]
  ] as const) {
    console.log(
      `  ${name}  ${run.seconds.toFixed(2)} s  ${Math.round(run.rate)} req/s  latency median ${ms(median(run.latencies))}  p99 ${ms(quantile(run.latencies, 0.99))}`
    )
  }
  console.log(`  throughput ratio (gateway / direct) ${(viaGateway.rate / viaDirect.rate).toFixed(2)}`)
}).pipe(Effect.provide(RolloutGateway.layer()))

Effect.runPromise(program).catch((error) => {
  console.error(error)
  process.exitCode = 1
})
