/**
 * A complete minimal training loop: a one-turn agent, a reward function, and `TrainingLoop.run` on the
 * embedded backend. The policy learns to answer "yes"; expect the mean reward to climb from 0.58-0.71 (the
 * untrained policy picks nearly at random) to 0.93-0.97 over the last three of the five steps, in about 2 s of
 * training (measured over 4 runs on a 2-core machine). It trains the random-init `effect-rl/tiny` on purpose, to
 * show a policy learning from chance: the pretrained `effect-rl/base-2k` (`effect-rl train minimal --base-model
 * effect-rl/base-2k`, RL at its default learning rate 1e-3) starts at a mean reward of 0.33-0.50 and reaches
 * 0.92-0.96 after one step, 1.00 after two (two runs).
 *
 * Run: `npx tsx examples/minimal.ts`. For the hosted service, swap `Backend.local()` for `Backend.hosted()`
 * and the base model for one it trains.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect } from "effect"
import { Backend, Example, Policy, Reward, Rollout, TrainingLoop } from "effect-rl"

// The agent: one chat completion, constrained to two answers. Rollout.chat records it in the trajectory.
const rollout = (question: string) =>
  Effect.gen(function* () {
    const completion = yield* Rollout.chat({
      messages: [{ role: "user", content: question }],
      structured_outputs: { choice: ["yes", "no"] },
      max_completion_tokens: 4
    })
    return completion.choices[0]?.message.content ?? ""
  })

// The reward: 1 for "yes".
const reward = Reward.fromFunction<string, string>(({ value }) => (value === "yes" ? 1 : 0))

// The loop: each step samples 3 scenarios x 8 rollouts, scores them, and trains a new checkpoint on them.
const train = (policy: Policy.Trainable, steps = 5) =>
  TrainingLoop.run({
    policy,
    scenarios: ["Shall we?", "Ready?", "Is it on?"],
    rollout,
    reward,
    groupsPerStep: 3,
    rolloutsPerGroup: 8,
    steps
  })

const program = Effect.gen(function* () {
  const policy = yield* Policy.trainable({ project: "minimal", name: "yes-agent", base_model: "effect-rl/tiny" })
  const summary = yield* train(policy)
  yield* Console.log(summary.steps.map((step) => step.train.reward?.toFixed(2)).join(" -> "))
})

// Run when this file is the program (`npx tsx minimal.ts`), not when another module imports it.
if (Example.isEntryPoint(import.meta.url)) program.pipe(Effect.provide(Backend.local()), NodeRuntime.runMain)

/** The same loop as `effect-rl train minimal` runs it (its report, `--steps`, a model of its own). */
export const example: Example.Example = {
  name: "minimal",
  description:
    'The README\'s loop: a one-turn agent learns to answer "yes" (reward 1) rather than "no" (0).\n' +
    "Expect the mean reward to climb from 0.58-0.71 to 0.93-0.97 over the last three of the five steps.",
  train: (options) =>
    Effect.gen(function* () {
      const policy = yield* Policy.trainable({
        project: "examples",
        name: Example.modelNameOf("minimal", options),
        base_model: Example.baseModelOf(options)
      })
      return { summary: yield* train(policy, options.steps), policy }
    })
}
