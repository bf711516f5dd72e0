/**
 * Rollouts on a cluster (`RolloutCluster`): how throughput grows with runners when the environment is
 * CPU-bound, and what the cluster costs per rollout when it is not.
 *
 *   npx tsx bench/cluster.ts [--cpu-rollouts=96] [--trivial-rollouts=96] [--sequential=24] [--capacity=4]
 *   BENCH_CPU_MS=100 (CPU per rollout of the CPU-bound environment)
 *
 * Set-up, all on this machine: the embedded backend in this process (the policy is its tiny model; each
 * rollout asks for one token), a Postgres started in a temporary directory (Debian's `postgresql`; without it,
 * a SQLite file, and the figures say so), runner processes (`bench/cluster/runner.ts`, `--capacity` rollouts
 * in flight each) and this process as the driver (`Gather.groups` with the cluster layer, 64 in flight).
 *
 * Reported:
 * - the CPU-bound environment (`bench/cluster/agents.ts`: `BENCH_CPU_MS` of CPU around one completion):
 *   rollouts/s in-process, then on 1 runner and on 2 runners, and the speed-up of 2 runners over 1;
 * - the trivial environment (one completion): the latency of one rollout at a time in-process and on the
 *   cluster (the difference is the cluster's overhead per rollout: the message saved, delivered, replied to,
 *   the reply saved and read back), and rollouts/s of both at 16 in flight.
 *
 * The backend and the driver share the machine's cores with the runners, so the speed-up falls short of 2x by
 * what they use.
 */
import type { ChildProcess } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import * as Backend from "../src/Backend.js"
import * as LocalBackend from "../src/LocalBackend.js"
import * as Gather from "../src/workflow/Gather.js"
import * as Policy from "../src/workflow/Policy.js"
import * as RolloutCluster from "../src/workflow/RolloutCluster.js"
import { spawnTsx, until } from "../test/support/children.js"
import * as Pg from "../test/support/postgres.js"
import { agents, CPU_MS, cpu, trivial } from "./cluster/agents.js"
import { fmt, intFlag, printTable } from "./harness.js"

const CPU_ROLLOUTS = intFlag("cpu-rollouts", 96)
const TRIVIAL_ROLLOUTS = intFlag("trivial-rollouts", 96)
const SEQUENTIAL = intFlag("sequential", 24)
const CAPACITY = intFlag("capacity", 4)
const API_KEY = "sk-bench-cluster"

const children: Array<ChildProcess> = []

const startRunner = async (cluster: string, env: NodeJS.ProcessEnv): Promise<void> => {
  const port = await Pg.freePort()
  const runner = spawnTsx("bench/cluster/runner.ts", [cluster, String(port), String(CAPACITY)], env)
  children.push(runner.child)
  await until(
    "the runner to listen",
    () => {
      if (runner.child.exitCode !== null) throw new Error(`the runner did not start:\n${runner.output()}`)
      return /Listening on/.test(runner.output()) ? true : undefined
    },
    60_000,
    runner.output,
    50
  )
  // Let the shards settle on the new set of runners (assignments refresh every second).
  await new Promise((resolve) => setTimeout(resolve, 4_000))
}

/** A gather of `n` rollouts (groups of 8) of `agent`, timed: seconds. */
const timed = (
  policy: Policy.Policy,
  agent: typeof cpu,
  n: number,
  concurrency: number
): Effect.Effect<number, Gather.GatherError, Backend.Clients> =>
  Effect.gen(function* () {
    const started = performance.now()
    const group = Math.min(8, n)
    const gathered = yield* Gather.groups({
      policy,
      scenarios: Array.from({ length: Math.ceil(n / group) }, (_, i) => i),
      rolloutsPerGroup: group,
      rollout: agent.rollout,
      reward: agent.reward,
      concurrency,
      progress: false
    })
    const done = gathered.reduce((k, g) => k + g.rollouts.length, 0)
    if (done !== Math.ceil(n / group) * group) return yield* Effect.dieMessage(`only ${done} rollouts finished`)
    return (performance.now() - started) / 1000
  })

const main = Effect.gen(function* () {
  const scope = yield* Scope.make()
  const bin = Pg.binaries()
  const dir = mkdtempSync(join(tmpdir(), "effect-rl-bench-cluster-"))
  const postgres = bin === undefined ? undefined : yield* Effect.promise(() => Pg.start(bin))
  yield* Effect.addFinalizer(() =>
    Effect.sync(() => {
      for (const child of children) child.kill("SIGKILL")
      postgres?.stop()
      rmSync(dir, { recursive: true, force: true })
    })
  )
  const cluster = postgres?.database("bench") ?? `sqlite:${join(dir, "cluster.db")}`
  const backend = Context.get(
    yield* Layer.buildWithScope(LocalBackend.layer({ apiKey: Redacted.make(API_KEY) }), scope),
    LocalBackend.LocalBackend
  )
  const env = {
    ...process.env,
    WANDB_API_KEY: API_KEY,
    EFFECT_RL_TRAINING_URL: backend.url,
    EFFECT_RL_INFERENCE_URL: backend.url,
    EFFECT_RL_TRACE_URL: backend.url
  }
  Object.assign(process.env, env)
  const clients = yield* Layer.buildWithScope(Backend.hosted(), scope)
  const driver = yield* Layer.buildWithScope(RolloutCluster.layer({ cluster, agents }), scope)
  const policy = yield* Effect.provide(
    Policy.trainable({ project: "bench", name: "cluster", base_model: "effect-rl/tiny" }),
    clients
  )
  const local = <A, E>(effect: Effect.Effect<A, E, Backend.Clients>) => Effect.provide(effect, clients)
  const remote = <A, E>(effect: Effect.Effect<A, E, Backend.Clients>) =>
    Effect.provide(Effect.provide(effect, driver), clients)

  console.log(
    `cluster storage: ${postgres === undefined ? "SQLite (no Postgres binaries found)" : "Postgres"}; ` +
      `${cpus().length} cores; CPU per rollout ${CPU_MS} ms; runner capacity ${CAPACITY}`
  )

  // In-process references.
  yield* local(timed(policy, trivial, 16, 16))
  const localSequential = yield* local(timed(policy, trivial, SEQUENTIAL, 1))
  const localTrivial = yield* local(timed(policy, trivial, TRIVIAL_ROLLOUTS, 16))
  const localCpu = yield* local(timed(policy, cpu, CPU_ROLLOUTS / 2, CAPACITY))

  // One runner.
  yield* Effect.promise(() => startRunner(cluster, env))
  yield* remote(timed(policy, cpu, 16, 64))
  const oneCpu = yield* remote(timed(policy, cpu, CPU_ROLLOUTS, 64))
  yield* remote(timed(policy, trivial, 16, 16))
  const remoteSequential = yield* remote(timed(policy, trivial, SEQUENTIAL, 1))
  const remoteTrivial = yield* remote(timed(policy, trivial, TRIVIAL_ROLLOUTS, 16))

  // Two runners.
  yield* Effect.promise(() => startRunner(cluster, env))
  yield* remote(timed(policy, cpu, 16, 64))
  const twoCpu = yield* remote(timed(policy, cpu, CPU_ROLLOUTS, 64))

  const rate = (n: number, seconds: number) => fmt(n / seconds, 1)
  console.log(`\nCPU-bound environment (${CPU_MS} ms of CPU per rollout):`)
  printTable([
    ["where", "rollouts", "seconds", "rollouts/s"],
    ["in-process", String(CPU_ROLLOUTS / 2), fmt(localCpu, 2), rate(CPU_ROLLOUTS / 2, localCpu)],
    ["1 runner", String(CPU_ROLLOUTS), fmt(oneCpu, 2), rate(CPU_ROLLOUTS, oneCpu)],
    ["2 runners", String(CPU_ROLLOUTS), fmt(twoCpu, 2), rate(CPU_ROLLOUTS, twoCpu)]
  ])
  console.log(`speed-up of 2 runners over 1: ${fmt(oneCpu / twoCpu, 2)}x`)

  const perLocal = (localSequential / SEQUENTIAL) * 1000
  const perRemote = (remoteSequential / SEQUENTIAL) * 1000
  console.log("\nTrivial environment (one completion):")
  printTable([
    ["where", "ms per rollout, one at a time", `rollouts/s at 16 in flight (${TRIVIAL_ROLLOUTS})`],
    ["in-process", fmt(perLocal, 1), rate(TRIVIAL_ROLLOUTS, localTrivial)],
    ["1 runner", fmt(perRemote, 1), rate(TRIVIAL_ROLLOUTS, remoteTrivial)]
  ])
  console.log(`cluster overhead per rollout (latency): ${fmt(perRemote - perLocal, 1)} ms`)
  yield* Scope.close(scope, Exit.void)
})

Effect.runPromise(Effect.scoped(main)).then(
  () => process.exit(0),
  (error) => {
    for (const child of children) child.kill("SIGKILL")
    console.error(error)
    process.exit(1)
  }
)
