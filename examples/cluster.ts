/**
 * Example: a training loop whose rollouts run on other processes and machines, on `@effect/cluster` (see
 * `RolloutCluster`). The loop is an ordinary `TrainingLoop.run` with one more layer; each runner registers
 * the same agent (this file's `sums`) and runs the rollouts the loop sends it, calling the same backend.
 *
 * Both roles read the backend from the environment (`Backend.hosted()`: `WANDB_API_KEY` and the
 * `EFFECT_RL_*_URL`s; the hosted service, or an `effect-rl serve` all processes reach) and the cluster's
 * storage from the command line (`postgres://...`, or `sqlite:<file>` when every process is on one machine).
 *
 * Run: `npx tsx examples/cluster.ts runner <cluster url> [host] [port]` on each runner, then
 * `npx tsx examples/cluster.ts loop <cluster url>` on the driver. Needs the cluster's optional peers
 * (`@effect/cluster`, `@effect/rpc`, `@effect/workflow`, and `@effect/sql-pg` for Postgres).
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect, Layer } from "effect"
import { Backend, Example, Policy, Reward, Rollout, RolloutAgent, TrainingLoop } from "effect-rl"
import * as RolloutCluster from "effect-rl/RolloutCluster"

interface Sum {
  readonly a: number
  readonly b: number
}

// The agent by name: the loop and every runner import this same definition.
export const sums = RolloutAgent.make({
  name: "sums",
  rollout: (sum: Sum) =>
    Effect.gen(function* () {
      const completion = yield* Rollout.chat({
        messages: [{ role: "user", content: `${sum.a}+${sum.b}=` }],
        max_completion_tokens: 3,
        structured_outputs: { regex: "[0-9]{1,2}\\." }
      })
      return (completion.choices[0]?.message.content ?? "").replace(/\.$/, "")
    }),
  reward: Reward.fromFunction<Sum, string>(({ scenario, value }) => (Number(value) === scenario.a + scenario.b ? 1 : 0))
})

// The loop: the same code as in one process; the layer sends its rollouts to the cluster's runners.
export const loop = (cluster: string) =>
  Effect.gen(function* () {
    const policy = yield* Policy.trainable({ project: "examples", name: "sums-cluster", base_model: "effect-rl/tiny" })
    return yield* TrainingLoop.run({
      policy,
      scenarios: Array.from({ length: 25 }, (_, i) => ({ a: Math.floor(i / 5), b: i % 5 })),
      rollout: sums.rollout,
      reward: sums.reward,
      groupsPerStep: 12,
      rolloutsPerGroup: 8,
      steps: 10,
      gather: { concurrency: 64 }
    })
  }).pipe(Effect.provide(RolloutCluster.layer({ cluster, agents: [sums] })))

// A runner: the same agent, its own clients to the same backend, at most 16 rollouts at once; `host` is the
// name the other machines reach it by.
export const runner = (cluster: string, host: string, port: number) =>
  Layer.launch(RolloutCluster.runner({ cluster, agents: [sums], host, port, capacity: 16 }))

if (Example.isEntryPoint(import.meta.url)) {
  const [role, cluster, host, port] = process.argv.slice(2)
  if (role === "loop" && cluster !== undefined) {
    NodeRuntime.runMain(loop(cluster).pipe(Effect.provide(Backend.hosted())))
  } else if (role === "runner" && cluster !== undefined) {
    NodeRuntime.runMain(
      runner(cluster, host ?? "localhost", Number(port ?? 34431)).pipe(Effect.provide(Backend.hosted()))
    )
  } else {
    console.error("usage: cluster.ts loop <cluster url> | cluster.ts runner <cluster url> [host] [port]")
    process.exitCode = 2
  }
}
