/**
 * Writing and combining reward functions (the section on rewards of docs/training-loop.md is this file).
 * Nothing runs here: these are the definitions, type-checked by `npm test`.
 */
import { Effect } from "effect"
import { Policy, Reward } from "effect-rl"

/** A scenario: a sum to compute. */
interface Sum {
  readonly a: number
  readonly b: number
}

// A reward function maps a finished rollout (its scenario, its trajectory, what the agent returned) to a
// number, or to a number with metrics. A plain function will do:
const correct = Reward.fromFunction<Sum, string>(({ scenario, value }) =>
  Number(value) === scenario.a + scenario.b ? 1 : 0
)

// Or any Effect (call a checker service, run tests, read a file), with metrics beside the reward:
const close: Reward.Reward<Sum, string> = ({ scenario, value }) =>
  Effect.sync(() => {
    const error = Math.abs(Number(value) - (scenario.a + scenario.b))
    return { reward: Number.isFinite(error) ? 1 / (1 + error) : 0, metrics: { abs_error: error } }
  })

// Combinators: a weighted sum (each part recorded as a metric), a penalty when the output is malformed, a clamp.
export const sumReward = Reward.clamp(
  Reward.formatPenalty(
    Reward.weighted({ name: "correct", reward: correct, weight: 0.8 }, { name: "close", reward: close, weight: 0.2 }),
    { check: ({ value }) => /^\d+$/.test(value), penalty: 0.5 }
  ),
  { min: 0, max: 1 }
)

// Group scorers see a whole group at once. Group-relative: trained on each reward relative to its group
// (ranks here), while the reward reported stays the task's.
export const relative = Reward.groupRelative({ mode: "rank" })

// An LLM judge: every trajectory of a group scored in one call to any chat-completions model, against a
// rubric; the rewards the rollouts had are kept as the metric `original_reward`.
export const judged = Effect.map(Policy.base("effect-rl/tiny"), (judge) =>
  Reward.judge({ policy: judge, rubric: "Score 1 for a correct, concise answer; 0 for a wrong one." })
)
