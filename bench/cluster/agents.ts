/**
 * The agents of `bench/cluster.ts`, registered by its runners (`runner.ts`) and used by its driver:
 * - `cpu`: an environment that burns a fixed amount of CPU around its one completion (`BENCH_CPU_MS`, default
 *   100 ms per rollout: half before the completion, half after), like a simulator stepping between turns;
 * - `trivial`: one completion and nothing else (what the cluster's overhead is measured against).
 */
import * as Effect from "effect/Effect"
import * as Rollout from "../../src/workflow/Rollout.js"
import * as RolloutAgent from "../../src/workflow/RolloutAgent.js"

/** Burns `ms` of CPU on this thread. */
const burn = (ms: number) =>
  Effect.sync(() => {
    const end = performance.now() + ms
    let x = 0
    while (performance.now() < end) x += Math.sqrt(x + 1)
    return x
  })

const complete = Effect.map(
  Rollout.chat({ messages: [{ role: "user", content: "1+1=" }], max_completion_tokens: 1 }),
  (completion) => completion.choices[0]?.message.content ?? ""
)

/** CPU per rollout, in milliseconds. */
export const CPU_MS = Number(process.env.BENCH_CPU_MS ?? 100)

/** The CPU-bound environment. */
export const cpu = RolloutAgent.make({
  name: "bench-cpu",
  rollout: (_: number) =>
    Effect.gen(function* () {
      yield* burn(CPU_MS / 2)
      const answer = yield* complete
      yield* burn(CPU_MS / 2)
      return answer
    }),
  reward: () => Effect.succeed(1)
})

/** The trivial environment. */
export const trivial = RolloutAgent.make({
  name: "bench-trivial",
  rollout: (_: number) => complete,
  reward: () => Effect.succeed(1)
})

/** Both. */
export const agents = [cpu, trivial]
