/**
 * Gather's scheduling overhead: 10,000 rollouts at concurrency 512 against a local endpoint that answers each
 * chat completion after a fixed 50 ms. The wall time is compared with the ideal (rollouts / concurrency x
 * latency, what a perfect scheduler with a free client would take); the aim is within 1.2x.
 *
 *   npx tsx bench/gather.ts [--rollouts=10000] [--concurrency=512] [--latency-ms=50] [--group=8] [--rounds=3]
 *                           [--warmup-rollouts=2000] [--baselines=1]
 *
 * The endpoint is a plain `node:http` server in this same process, answering `POST /v1/chat/completions` with a
 * valid chat completion (one choice with logprobs and token ids, usage) `--latency-ms` after the request body
 * has arrived. The rollouts take the library's full path: `Gather.groups` over `--rollouts / --group` scenarios
 * of `--group` rollouts, each `Rollout.chat` through `Policy.base` and the real `InferenceClient` (undici,
 * request encoding, Schema decoding of the response), recorded into a trajectory and given a reward.
 *
 * Reported per measured round (after one warm-up round): the wall time, the ideal, their ratio, rollouts/s, and
 * the peak RSS of this process during the round (the kernel's VmHWM after resetting it through
 * `/proc/self/clear_refs`; else the max of RSS sampled every 10 ms). Client and server share the process (and
 * its CPU): the peak RSS includes the server's sockets and buffers.
 */
import { readFileSync, writeFileSync } from "node:fs"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { loadavg } from "node:os"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { ChatCompletion } from "../src/api/ChatCompletion.js"
import * as InferenceClient from "../src/client/InferenceClient.js"
import * as Gather from "../src/workflow/Gather.js"
import * as Policy from "../src/workflow/Policy.js"
import * as Rollout from "../src/workflow/Rollout.js"
import { intFlag } from "./harness.js"

const ROLLOUTS = intFlag("rollouts", 10_000)
const CONCURRENCY = intFlag("concurrency", 512)
const LATENCY_MS = intFlag("latency-ms", 50)
const GROUP = intFlag("group", 8)
const ROUNDS = intFlag("rounds", 3)
const WARMUP = intFlag("warmup-rollouts", 2_000)
const BASELINES = intFlag("baselines", 1) !== 0

// --- The endpoint -------------------------------------------------------------------------------------------

let served = 0

const answer = (id: number): string =>
  JSON.stringify({
    id: `chatcmpl-${id}`,
    object: "chat.completion",
    created: 1_700_000_000,
    model: "bench/model",
    choices: [
      {
        index: 0,
        message: { role: "assistant", content: "four" },
        logprobs: {
          content: [
            { token: "fo", logprob: -0.25, bytes: [102, 111], top_logprobs: [] },
            { token: "ur", logprob: -0.5, bytes: [117, 114], top_logprobs: [] }
          ]
        },
        finish_reason: "stop",
        token_ids: [1012, 333]
      }
    ],
    usage: { prompt_tokens: 12, completion_tokens: 2, total_tokens: 14 }
  })

const serve = (): Promise<{ readonly server: Server; readonly url: string }> =>
  new Promise((resolve) => {
    const server = createServer((req, res) => {
      req.on("data", () => {})
      req.on("end", () => {
        setTimeout(() => {
          const body = answer(served++)
          res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
          res.end(body)
        }, LATENCY_MS)
      })
    })
    server.keepAliveTimeout = 30_000
    server.listen(0, "127.0.0.1", () =>
      resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })
    )
  })

// --- Memory -------------------------------------------------------------------------------------------------

const status = (field: "VmRSS" | "VmHWM"): number => {
  try {
    const line = readFileSync("/proc/self/status", "utf8")
      .split("\n")
      .find((l) => l.startsWith(`${field}:`))
    return line === undefined ? Number.NaN : Number(line.split(/\s+/)[1]) * 1024
  } catch {
    return Number.NaN
  }
}

/** Starts measuring the peak RSS; the returned function stops and gives it (bytes). */
const peakRss = (): (() => number) => {
  let byKernel = false
  try {
    writeFileSync("/proc/self/clear_refs", "5")
    byKernel = Number.isFinite(status("VmHWM"))
  } catch {
    byKernel = false
  }
  let sampled = process.memoryUsage.rss()
  const timer = setInterval(() => {
    sampled = Math.max(sampled, process.memoryUsage.rss())
  }, 10).unref()
  return () => {
    clearInterval(timer)
    return byKernel ? status("VmHWM") : Math.max(sampled, process.memoryUsage.rss())
  }
}

// --- The gather ---------------------------------------------------------------------------------------------

const gather = (policy: Policy.Policy, rollouts: number) =>
  Gather.groups({
    policy,
    scenarios: Array.from({ length: Math.ceil(rollouts / GROUP) }, (_, i) => i),
    rolloutsPerGroup: GROUP,
    rollout: (scenario, i) =>
      Effect.map(
        Rollout.chat({ messages: [{ role: "user", content: `What is 2 + 2? (${scenario}.${i})` }] }),
        (completion) => completion.choices[0]?.message.content ?? ""
      ),
    reward: ({ value }) => Effect.succeed(value === "four" ? 1 : 0),
    concurrency: CONCURRENCY,
    progress: false
  })

/** The same requests without Gather: the client alone (Effect.forEach at the same concurrency). */
const clientOnly = (client: InferenceClient.Service, rollouts: number) =>
  Effect.forEach(
    Array.from({ length: rollouts }, (_, i) => i),
    (i) =>
      client.createChatCompletion({
        model: "bench/model",
        messages: [{ role: "user", content: `What is 2 + 2? (${i})` }],
        logprobs: true,
        return_token_ids: true
      }),
    { concurrency: CONCURRENCY, discard: true }
  )

/** The same requests with the global `fetch` (undici) and `JSON.parse`: no Effect at all. */
const fetchOnly = async (url: string, rollouts: number): Promise<void> => {
  let next = 0
  const worker = async () => {
    while (next < rollouts) {
      const i = next++
      const response = await fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: "Bearer bench-key" },
        body: JSON.stringify({
          model: "bench/model",
          messages: [{ role: "user", content: `What is 2 + 2? (${i})` }],
          logprobs: true,
          return_token_ids: true
        })
      })
      JSON.parse(await response.text())
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, worker))
}

/** A policy answering at once, in memory: what Gather and Rollout cost per rollout without any HTTP. */
const instant = (): Policy.Policy => {
  const completion = Schema.decodeUnknownSync(ChatCompletion)(JSON.parse(answer(0)))
  return Policy.make({ name: "bench/instant", complete: () => Effect.succeed(completion) })
}

interface Round {
  readonly wallMs: number
  readonly peakRss: number
}

const timed = <E, R>(run: Effect.Effect<void, E, R>) =>
  Effect.gen(function* () {
    const stop = peakRss()
    const start = performance.now()
    yield* run
    const wallMs = performance.now() - start
    return { wallMs, peakRss: stop() } satisfies Round
  })

const round = (policy: Policy.Policy, rollouts: number) =>
  timed(
    Effect.flatMap(gather(policy, rollouts), (groups) => {
      const trajectories = groups.flatMap((g) => g.group.trajectories)
      const good = trajectories.filter((t) => t.reward === 1 && t.messages_and_choices.length === 2).length
      return good === rollouts ? Effect.void : Effect.dieMessage(`only ${good} of ${rollouts} rollouts are good`)
    })
  )

const MB = (bytes: number) => (bytes / 2 ** 20).toFixed(0)

const main = Effect.gen(function* () {
  const { server, url } = yield* Effect.promise(serve)
  yield* Effect.addFinalizer(() =>
    Effect.async<void>((resume) => {
      server.closeAllConnections()
      server.close(() => resume(Effect.void))
    })
  )
  // The client's layer (and its undici dispatcher) lives for the rest of this scope.
  const context = yield* Layer.build(
    InferenceClient.layer({ apiKey: Redacted.make("bench-key"), baseUrl: url }).pipe(
      Layer.provide(NodeHttpClient.layerUndici)
    )
  )
  const policy = yield* Policy.base("bench/model").pipe(Effect.provide(context))
  const client = Context.get(context, InferenceClient.InferenceClient)
  const rollouts = Math.ceil(ROLLOUTS / GROUP) * GROUP
  const ideal = (rollouts / CONCURRENCY) * LATENCY_MS
  console.log(
    `gather: ${rollouts} rollouts (${rollouts / GROUP} groups of ${GROUP}) at concurrency ${CONCURRENCY}, ` +
      `endpoint latency ${LATENCY_MS} ms; ideal ${ideal.toFixed(0)} ms; node ${process.version}, ` +
      `load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(" ")}`
  )
  const warm = yield* round(policy, Math.ceil(WARMUP / GROUP) * GROUP)
  console.log(`warm-up (${WARMUP} rollouts): ${warm.wallMs.toFixed(0)} ms`)
  const rounds: Array<Round> = []
  for (let r = 0; r < ROUNDS; r++) {
    const result = yield* round(policy, rollouts)
    rounds.push(result)
    console.log(
      `round ${r + 1}: wall ${result.wallMs.toFixed(0)} ms, ideal ${ideal.toFixed(0)} ms, ratio ` +
        `${(result.wallMs / ideal).toFixed(3)}x, ${((rollouts / result.wallMs) * 1000).toFixed(0)} rollouts/s, ` +
        `peak RSS ${MB(result.peakRss)} MB`
    )
  }
  const line = (name: string, result: Round) =>
    console.log(
      `${name}: wall ${result.wallMs.toFixed(0)} ms, ratio ${(result.wallMs / ideal).toFixed(3)}x, ` +
        `${((rollouts / result.wallMs) * 1000).toFixed(0)} requests/s, peak RSS ${MB(result.peakRss)} MB`
    )
  if (BASELINES) {
    const inMemory = instant()
    yield* gather(inMemory, Math.ceil(WARMUP / GROUP) * GROUP)
    const own = yield* timed(Effect.asVoid(gather(inMemory, rollouts)))
    console.log(
      `Gather + Rollout alone (an in-memory policy, no HTTP): ${own.wallMs.toFixed(0)} ms, ` +
        `${((own.wallMs / rollouts) * 1000).toFixed(1)} µs per rollout`
    )
    yield* Effect.promise(() => fetchOnly(url, Math.ceil(WARMUP / GROUP) * GROUP))
    line("baseline, fetch + JSON.parse alone", yield* timed(Effect.promise(() => fetchOnly(url, rollouts))))
    yield* clientOnly(client, Math.ceil(WARMUP / GROUP) * GROUP)
    line("baseline, InferenceClient alone", yield* timed(clientOnly(client, rollouts)))
  }
  const best = rounds.reduce((a, b) => (b.wallMs < a.wallMs ? b : a))
  const sorted = rounds.map((r) => r.wallMs).sort((a, b) => a - b)
  const median = sorted[sorted.length >> 1]!
  console.log(
    `\nbest wall ${best.wallMs.toFixed(0)} ms (ratio ${(best.wallMs / ideal).toFixed(3)}x), median ` +
      `${median.toFixed(0)} ms (ratio ${(median / ideal).toFixed(3)}x), aim <= 1.2x; peak RSS ` +
      `${MB(Math.max(...rounds.map((r) => r.peakRss)))} MB; ${served} requests served`
  )
})

Effect.runPromise(Effect.scoped(main)).catch((error) => {
  console.error(error)
  process.exitCode = 1
})
