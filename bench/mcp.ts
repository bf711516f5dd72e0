/**
 * What a tool call costs through an MCP server: the `mcp` example's server (`examples/mcp/server.mjs`, the SDK's
 * server in its own process over stdio) against the same function in-process, each called through its agent tool
 * as the tool loop calls it (arguments decoded, the handler run, the result rendered). Calls one after another
 * (what a rollout waiting on its call sees), then 16 at once on the one server (a step's rollouts sharing it), and
 * the time to start a server, initialize and list its tools (what `perRollout` adds to each rollout).
 * Goal: at most 2 ms median added per call. Run: `npm run bench:mcp` (`npx tsx bench/mcp.ts [calls]`).
 */
import { loadavg } from "node:os"
import { fileURLToPath } from "node:url"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as McpTools from "../src/workflow/McpTools.js"
import * as Tools from "../src/workflow/Tools.js"

const SERVER = fileURLToPath(new URL("../examples/mcp/server.mjs", import.meta.url))
const CALLS = Number(process.argv[2] ?? 2000)
const CITIES = ["Oslo", "Paris", "Lima", "Cairo"] as const

const quantiles = (samples: ReadonlyArray<number>) => {
  const sorted = [...samples].sort((a, b) => a - b)
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
  return { median: at(0.5), p90: at(0.9), p99: at(0.99), min: sorted[0]! }
}
const ms = (x: number) => `${x.toFixed(3)} ms`

/** Times `calls` calls of a tool's decode, handler and render, one after another (after 200 of warm-up). */
const sequential = (tool: Tools.Any, calls: number) =>
  Effect.gen(function* () {
    const times: Array<number> = []
    for (let i = 0; i < calls + 200; i++) {
      const started = performance.now()
      const args = yield* tool.decode(`{"city":"${CITIES[i % CITIES.length]}"}`)
      tool.render(yield* tool.handler(args))
      if (i >= 200) times.push(performance.now() - started)
    }
    return quantiles(times)
  })

/** Calls per second with 16 calls in flight at a time. */
const concurrent = (tool: Tools.Any, calls: number) =>
  Effect.gen(function* () {
    const started = performance.now()
    yield* Effect.forEach(
      Array.from({ length: calls }, (_, i) => i),
      (i) =>
        Effect.flatMap(tool.decode(`{"city":"${CITIES[i % CITIES.length]}"}`), (args) =>
          Effect.map(tool.handler(args), tool.render)
        ),
      { concurrency: 16, discard: true }
    )
    return (calls / (performance.now() - started)) * 1000
  })

const program = Effect.gen(function* () {
  const world: Record<string, string> = { Oslo: "sunny", Paris: "rainy", Lima: "windy", Cairo: "foggy" }
  const local = Tools.make("weather", {
    description: "Weather in a city",
    parameters: Schema.Struct({ city: Schema.Literal(...CITIES) }),
    handler: ({ city }) => Effect.succeed(world[city]!)
  })
  const starts: Array<number> = []
  for (let i = 0; i < 10; i++) {
    const started = performance.now()
    yield* Effect.scoped(McpTools.connect({ command: [process.execPath, SERVER] }))
    starts.push(performance.now() - started)
  }
  const server = yield* McpTools.connect({ command: [process.execPath, SERVER] })
  const remote = server.agentTools.find((tool) => tool.name === "weather")!
  const inProcess = yield* sequential(local, CALLS)
  const throughMcp = yield* sequential(remote, CALLS)
  const localRate = yield* concurrent(local, CALLS)
  const mcpRate = yield* concurrent(remote, CALLS)
  console.log(`bench:mcp: ${CALLS} calls each, node ${process.version}, load ${loadavg()[0]!.toFixed(2)}`)
  console.log(
    `in-process   one at a time: median ${ms(inProcess.median)}, p90 ${ms(inProcess.p90)}, p99 ${ms(inProcess.p99)}; ` +
      `16 in flight: ${localRate.toFixed(0)} calls/s`
  )
  console.log(
    `MCP (stdio)  one at a time: median ${ms(throughMcp.median)}, p90 ${ms(throughMcp.p90)}, p99 ${ms(throughMcp.p99)}; ` +
      `16 in flight: ${mcpRate.toFixed(0)} calls/s`
  )
  const added = throughMcp.median - inProcess.median
  console.log(`added by MCP: ${ms(added)} median per call (goal <= 2 ms: ${added <= 2 ? "met" : "NOT met"})`)
  const start = quantiles(starts)
  console.log(
    `a server started, initialized and listed (perRollout's cost per rollout): median ${ms(start.median)}, ` +
      `min ${ms(start.min)} (10 starts)`
  )
}).pipe(Effect.scoped)

// Tools.Any leaves its handler's context open (any); both tools here need none.
Effect.runPromise(program as Effect.Effect<void, unknown>).catch((error) => {
  console.error(error)
  process.exitCode = 1
})
