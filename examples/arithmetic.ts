/**
 * Example: a single-turn verifiable task with a reward built from combinators. Each scenario is a small sum
 * (`3+4=`); the policy answers with a number and a period (`7.`) in one completion, constrained by
 * `structured_outputs: {regex: "[0-9]{1,2}\\."}` so every answer parses; the period is how
 * the model says where its answer ends (after one digit or two).
 *
 * What it shows: a one-turn rollout with `Rollout.chat`, and a reward composed with `Reward.weighted` (exact
 * answer, weight 1, plus partial credit for being close, weight 0.5) under `Reward.formatPenalty` (an answer
 * written with a leading zero, like `07`, loses 0.25). Each part is recorded as a metric of the trajectory
 * (`correct`, `close`, `format_error`), so each step's metrics show which part moves.
 *
 * What to expect on the embedded backend (a 2-core machine; measured over 4 runs): the loop takes 12-15 s; the
 * untrained policy writes random one- and two-digit numbers (first step's mean reward 0.01-0.05); it soon
 * learns to answer with one digit in the range of the sums, and the mean reward of the last three steps is
 * 0.40-0.44. Learning every sum exactly takes a
 * bigger model or many more steps; the `correct` metric (in the logged metrics) shows how far it got.
 *
 * Its rollouts can run on a cluster's runners (see `RolloutCluster`): the example names its agent
 * (`RolloutAgent`), the runners register it (`effect-rl runner --cluster <url>` knows the examples' agents) and
 * the loop, unchanged, sends them its rollouts (`effect-rl train arithmetic --cluster <url>`).
 *
 * Run: `effect-rl train arithmetic [--steps n]`, or `npx tsx examples/arithmetic.ts [--steps n]`.
 */
import { Effect } from "effect"
import { Example, Policy, Reward, Rollout, RolloutAgent, TrainingLoop } from "effect-rl"

/** A scenario: a sum of two small operands. */
export interface Problem {
  readonly a: number
  readonly b: number
}

/** Every sum of operands 0 to 4: 25 problems, answers 0 to 8. */
export const problems: ReadonlyArray<Problem> = Array.from({ length: 25 }, (_, i) => ({
  a: Math.floor(i / 5),
  b: i % 5
}))

/** The prompt of a problem. */
export const question = (problem: Problem): string => `${problem.a}+${problem.b}=`

/** One rollout: ask the sum; the answer is one or two digits and a period, returned without the period. */
export const solve = (problem: Problem) =>
  Effect.gen(function* () {
    const completion = yield* Rollout.chat({
      messages: [{ role: "user", content: question(problem) }],
      max_completion_tokens: 3,
      structured_outputs: { regex: "[0-9]{1,2}\\." }
    })
    return (completion.choices[0]?.message.content ?? "").replace(/\.$/, "")
  })

type Part = Reward.Reward<Problem, string>

/** 1 for the exact sum, else 0. */
const correct: Part = Reward.fromFunction(({ scenario, value }) => (Number(value) === scenario.a + scenario.b ? 1 : 0))

/** Partial credit: 1 for the exact sum, down to 0 at four or more away. */
const close: Part = Reward.fromFunction(({ scenario, value }) =>
  Math.max(0, 1 - Math.abs(Number(value) - (scenario.a + scenario.b)) / 4)
)

/** Exact answer (weight 1) plus closeness (weight 0.5), minus 0.25 for a leading zero. */
export const reward: Part = Reward.formatPenalty(
  Reward.weighted({ name: "correct", reward: correct, weight: 1 }, { name: "close", reward: close, weight: 0.5 }),
  { check: ({ value }) => /^(0|[1-9][0-9]?)$/.test(value), penalty: 0.25 }
)

/** The agent by name, for runners on other machines: the rollout and the reward above. */
export const agent = RolloutAgent.make({ name: "arithmetic", rollout: solve, reward })

/** The example: 12 steps of 12 problems x 8 rollouts, the 25 problems evaluated at the start and the end. */
export const example: Example.Example = {
  name: "arithmetic",
  description:
    "A single-turn task: answer small sums (`3+4=`) with a number; reward = exact (1) + closeness (0.5),\n" +
    "minus 0.25 for a leading zero. Expect the mean reward to rise from 0.01-0.05 to 0.40-0.44 in twelve steps.",
  agents: [agent],
  train: (options) =>
    Effect.gen(function* () {
      const policy = yield* Policy.trainable({
        project: "examples",
        name: Example.modelNameOf("arithmetic", options),
        base_model: Example.baseModelOf(options)
      })
      const steps = options.steps ?? 12
      const summary = yield* TrainingLoop.run({
        policy,
        scenarios: problems,
        validation: problems,
        rollout: agent.rollout,
        reward: agent.reward,
        groupsPerStep: 12,
        rolloutsPerGroup: 8,
        steps,
        evalEvery: steps
      })
      return { summary, policy }
    })
}

Example.main(example, import.meta.url)
