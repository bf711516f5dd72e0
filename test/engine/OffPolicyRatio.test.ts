/**
 * The embedded trainer's importance ratio uses the logprobs a trajectory recorded when it was sampled, not
 * logprobs recomputed with the weights being trained: a trajectory sampled one checkpoint back (as the
 * off-policy `TrainingLoop` trains them) has `rho = exp(l_new - l_sampled) != 1`, so the correction of the
 * importance-sampling keys is real. (It already did; this says so.) With `precalculate_logprobs` the old
 * logprobs are the current weights' instead, and `rho` starts at 1.
 */
import { describe, expect, it } from "@effect/vitest"
import type { TrajectoryGroup } from "../../src/api/Trajectory.js"
import { rlGroupsOf } from "../../src/local/engine/Batches.js"
import { makeAdamState } from "../../src/local/engine/Optimizer.js"
import { Policy } from "../../src/local/engine/policy/Policy.js"
import { batchLoss, lossSettings } from "../../src/local/engine/RlLoss.js"
import { complete } from "../../src/local/engine/Sampler.js"
import { trainRl } from "../../src/local/engine/Trainer.js"

const user = { role: "user" as const, content: "Say something." }

/** Two completions sampled by `policy`, in a group with rewards 1 and 0 (their choices record logprobs). */
const sampledBy = (policy: Policy): Array<TrajectoryGroup> => {
  const choices = complete(
    policy,
    { messages: [user], n: 2, seed: 3, temperature: 1, logprobs: true, max_completion_tokens: 6 },
    { modelName: "local", now: 0, requestId: "r" }
  ).choices
  return [{ trajectories: choices.map((choice, i) => ({ messages_and_choices: [user, choice], reward: 1 - i })) }]
}

/** The loss the trainer's first step should report, computed here with the given old logprobs. */
const expectedLoss = (policy: Policy, groups: Array<TrajectoryGroup>, old: "recorded" | "fresh", ppo: boolean) => {
  const items = rlGroupsOf(groups)[0]!.items
  const sequences = items.map((item) => item.sequence)
  const masks = sequences.map((s) => Uint8Array.from(s.mask, (m, t) => (t > 0 && m === 1 ? 1 : 0)))
  const out = policy.forwardBatch(
    sequences.map((s) => s.ids),
    masks,
    { keepActivations: false }
  )
  const tokens = masks.map((m) => m.reduce((a, b) => a + b, 0))
  const total = tokens.reduce((a, b) => a + b, 0)
  // Rewards 1 and 0: advantages +-1 (scaled by the std 0.5), then divided by mean |A| w = 1.
  const advantages = [1, -1]
  return batchLoss(
    sequences.map((s, i) => ({
      newLogprobs: out.logprobs[i]!,
      oldLogprobs: old === "recorded" ? Float64Array.from(s.logprobs) : out.logprobs[i]!,
      mask: masks[i]!,
      advantage: advantages[i]!,
      weight: total / (2 * tokens[i]!)
    })),
    lossSettings({ ppo })
  ).loss
}

describe("the embedded trainer's importance ratio", () => {
  it("compares the trained weights with the logprobs the trajectory recorded (one checkpoint back)", () => {
    // Checkpoint k samples; checkpoint k + 1 (other weights) trains on what it sampled.
    const sampler = Policy.create(undefined, { seed: 1 })
    const groups = sampledBy(sampler)
    for (const ppo of [true, false]) {
      const trainee = Policy.create(undefined, { seed: 2 })
      const recorded = expectedLoss(trainee, groups, "recorded", ppo)
      const fresh = expectedLoss(trainee, groups, "fresh", ppo)
      expect(Math.abs(recorded - fresh)).toBeGreaterThan(1e-3)
      const result = trainRl(trainee, makeAdamState(trainee.parameterCount), rlGroupsOf(groups), { ppo })
      expect(result.steps[0]!.loss).toBeCloseTo(recorded, 5)
      // The KL against the sampling weights is measured too, and is far from 0 for other weights.
      expect(result.steps[0]!.kl_div).toBeGreaterThan(0.01)
    }
  })

  it("with precalculate_logprobs, the old logprobs are the trained weights' own (rho starts at 1)", () => {
    const sampler = Policy.create(undefined, { seed: 1 })
    const groups = sampledBy(sampler)
    const trainee = Policy.create(undefined, { seed: 2 })
    const fresh = expectedLoss(trainee, groups, "fresh", true)
    const result = trainRl(trainee, makeAdamState(trainee.parameterCount), rlGroupsOf(groups), {
      ppo: true,
      precalculate_logprobs: true
    })
    expect(result.steps[0]!.loss).toBeCloseTo(fresh, 5)
  })

  it("on-policy (sampled by the weights it trains), both agree: rho is 1", () => {
    const policy = Policy.create(undefined, { seed: 1 })
    const groups = sampledBy(policy)
    expect(expectedLoss(policy, groups, "recorded", true)).toBeCloseTo(expectedLoss(policy, groups, "fresh", true), 5)
  })
})
