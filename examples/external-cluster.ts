/**
 * Example: an agent that runs as its own process (the Python agent of `examples/agents`), trained with its
 * rollouts on a cluster's runners (see `RolloutCluster` and `ExternalAgent.rolloutAgent`): each runner starts its
 * own rollout gateway and spawns the agent processes of the rollouts it runs, so the agents' CPU is the
 * runners'. The loop is an ordinary `TrainingLoop.run` with the agent's rollout and reward.
 *
 * Both roles read the backend from the environment (`Backend.hosted()`: `WANDB_API_KEY` and the
 * `EFFECT_RL_*_URL`s; the hosted service, or an `effect-rl serve` all processes reach) and the cluster's
 * storage from the command line (`postgres://...`, or `sqlite:<file>` when every process is on one machine).
 * The agent's command runs from each runner's working directory: run them from the repository's root.
 *
 * Run: `npx tsx examples/external-cluster.ts runner <cluster url> [host] [port]` on each runner (or
 * `effect-rl runner --cluster <url> --agents examples/external-cluster.ts`), then
 * `npx tsx examples/external-cluster.ts loop <cluster url>` on the driver. Needs the cluster's optional peers.
 * Without a program, `effect-rl train-agent "<command>" --cluster <url>` does the same (docs/clusters.md).
 */
import { readFileSync } from "node:fs"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect, Layer } from "effect"
import { Backend, Example, ExternalAgent, Policy, TrainingLoop } from "effect-rl"
import * as RolloutCluster from "effect-rl/RolloutCluster"

interface Question {
  readonly question: string
  readonly expected: string
}

// The agent by name, a process of its own on the runner that runs each rollout; the loop and every runner
// import this same definition (its reward: the agent's report, its last line of output).
export const answerer = ExternalAgent.rolloutAgent<Question>({
  name: "answerer",
  agent: ExternalAgent.command("python3 examples/agents/python/agent.py"),
  timeout: "2 minutes"
})
export const agents = [answerer]

// The loop: the agent's rollout and reward; its gateway (which serves rollouts only when no cluster is provided)
// and the cluster's layer, which sends the rollouts to the runners.
export const loop = (cluster: string, scenarios: ReadonlyArray<Question>) =>
  Effect.gen(function* () {
    const policy = yield* Policy.trainable({ project: "examples", name: "answerer", base_model: "effect-rl/base-2k" })
    return yield* TrainingLoop.run({
      policy,
      scenarios,
      rollout: answerer.rollout,
      reward: answerer.reward,
      groupsPerStep: 4,
      rolloutsPerGroup: 8,
      steps: 5,
      gather: { concurrency: 32 }
    })
  }).pipe(Effect.provide(answerer.layer), Effect.provide(RolloutCluster.layer({ cluster, agents })))

// A runner: the agent's gateway built once, at most 16 agent processes at once.
export const runner = (cluster: string, host: string, port: number) =>
  Layer.launch(RolloutCluster.runner({ cluster, agents, host, port, capacity: 16 }))

if (Example.isEntryPoint(import.meta.url)) {
  const [role, cluster, host, port] = process.argv.slice(2)
  if (role === "loop" && cluster !== undefined) {
    const scenarios = readFileSync(new URL("./agents/scenarios.jsonl", import.meta.url), "utf8")
      .split("\n")
      .filter((line) => line.trim() !== "")
      .map((line) => JSON.parse(line) as Question)
    NodeRuntime.runMain(loop(cluster, scenarios).pipe(Effect.provide(Backend.hosted())))
  } else if (role === "runner" && cluster !== undefined) {
    NodeRuntime.runMain(
      runner(cluster, host ?? "localhost", Number(port ?? 34431)).pipe(Effect.provide(Backend.hosted()))
    )
  } else {
    console.error(
      "usage: external-cluster.ts loop <cluster url> | external-cluster.ts runner <cluster url> [host] [port]"
    )
    process.exitCode = 2
  }
}
