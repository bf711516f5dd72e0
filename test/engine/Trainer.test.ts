import { describe, expect, it } from "@effect/vitest"
import type { TrainingSequence } from "../../src/local/engine/LanguageModel.js"
import { makeAdamState } from "../../src/local/engine/Optimizer.js"
import { Policy } from "../../src/local/engine/policy/Policy.js"
import type { PolicyConfig } from "../../src/local/engine/policy/PolicyConfig.js"
import { Rng } from "../../src/local/engine/Random.js"
import { DEFAULT_RL_LEARNING_RATE, type RlGroup, trainRl, trainSft } from "../../src/local/engine/Trainer.js"

const config: PolicyConfig = { vocabSize: 20, contextLength: 32, dModel: 16, nLayers: 2, nHeads: 2, dFf: 32 }

const bitsEqual = (a: ArrayLike<number>, b: ArrayLike<number>): boolean => {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return false
  return true
}

/** A prompt of context tokens and a completion of sampled tokens with the policy's logprobs (or NaN). */
const trajectory = (
  policy: Policy,
  prompt: Array<number>,
  completion: Array<number>,
  recorded = true
): TrainingSequence => {
  const ids = Int32Array.from([...prompt, ...completion])
  const mask = Uint8Array.from(ids, (_, t) => (t >= prompt.length ? 1 : 0))
  const lp = policy.scoreTokens(ids, 0)
  const logprobs = Float32Array.from(ids, (_, t) => (t >= prompt.length && recorded ? lp[t]! : Number.NaN))
  return { ids, mask, logprobs }
}

const groupsFor = (policy: Policy, seed: number, recorded = true): Array<RlGroup> => {
  const rng = new Rng(seed)
  return [0, 1, 2].map((g) => ({
    items: [0, 1, 2, 3].map((k) => ({
      sequence: trajectory(
        policy,
        [1, 2, 3 + g],
        Array.from({ length: 2 + k }, () => rng.int(config.vocabSize)),
        recorded
      ),
      reward: (k + g) % 3 === 0 ? 1 : 0
    }))
  }))
}

describe("trainRl", () => {
  it("reports the step metrics and the job's reward statistics; skips groups of equal rewards", () => {
    const policy = Policy.create(config, { seed: 1 })
    const opt = makeAdamState(policy.parameterCount)
    const a = trajectory(policy, [1, 2], [5, 6])
    const b = trajectory(policy, [1, 2], [7])
    const groups: Array<RlGroup> = [
      {
        items: [
          { sequence: a, reward: 1 },
          { sequence: b, reward: 0 }
        ]
      },
      {
        items: [
          { sequence: a, reward: 1 },
          { sequence: b, reward: 1 }
        ],
        exceptions: 1
      }
    ]
    const before = Float32Array.from(policy.params)
    const result = trainRl(policy, opt, groups, { learning_rate: 1e-3 })
    expect(result.groupsTrainable).toBe(1)
    expect(result.groupsSkipped).toBe(1)
    expect(result.steps.length).toBe(1)
    const step = result.steps[0]!
    expect(step.reward).toBe(0.75)
    expect(step.reward_std_dev).toBe(0.25) // (0.5 + 0) / 2
    expect(step.exception_rate).toBe(0.2) // 1 / (4 + 1)
    expect(step.num_trajectories).toBe(2)
    expect(step.num_trainable_tokens).toBe(3)
    expect(step.learning_rate).toBe(1e-3)
    expect(step.num_groups).toBe(2)
    expect(step.num_groups_trainable).toBe(1)
    expect(step.num_groups_skipped).toBe(1)
    for (const v of Object.values(step)) expect(Number.isFinite(v)).toBe(true)
    expect(step.grad_norm).toBeGreaterThan(0)
    expect(step.entropy).toBeGreaterThan(0)
    expect(step.kl_div).toBeCloseTo(0, 6) // on-policy: the recorded logprobs are the current ones
    expect(step.tokens_per_second).toBeGreaterThan(0)
    // On-policy CISPO: advantages +-1 after normalisation, token weights 3 / (2 * 2) and 3 / (2 * 1).
    const la = a.logprobs[2]! + a.logprobs[3]!
    const lb = b.logprobs[2]!
    expect(step.loss).toBeCloseTo(-(0.75 * la - 1.5 * lb) / (3 + 1e-6), 5)
    expect(bitsEqual(policy.params, before)).toBe(false)
  })

  it("does nothing when no group is trainable", () => {
    const policy = Policy.create(config, { seed: 1 })
    const opt = makeAdamState(policy.parameterCount)
    const before = Float32Array.from(policy.params)
    const s = trajectory(policy, [1], [2, 3])
    const result = trainRl(
      policy,
      opt,
      [
        {
          items: [
            { sequence: s, reward: 0.5 },
            { sequence: s, reward: 0.5 }
          ]
        }
      ],
      {}
    )
    expect(result.steps).toEqual([])
    expect(result.groupsSkipped).toBe(1)
    expect(result.reward).toBe(0.5)
    expect(bitsEqual(policy.params, before)).toBe(true)
    expect(opt.step).toBe(0)
  })

  it("takes one gradient step per mini-batch, and the default learning rate without one in the config", () => {
    const policy = Policy.create(config, { seed: 1 })
    const opt = makeAdamState(policy.parameterCount)
    const seen: Array<number> = []
    const result = trainRl(
      policy,
      opt,
      groupsFor(policy, 1),
      { unknown_knob: true },
      {
        batchSize: 5,
        onStep: (_, i) => seen.push(i)
      }
    )
    expect(result.steps.map((s) => s.num_trajectories)).toEqual([5, 5, 2])
    expect(seen).toEqual([0, 1, 2])
    expect(result.steps[0]!.learning_rate).toBe(DEFAULT_RL_LEARNING_RATE)
    expect(opt.step).toBe(3)
    const byTokens = trainRl(policy, makeAdamState(policy.parameterCount), groupsFor(policy, 1), {
      packed_sequence_length: 20
    })
    expect(byTokens.steps.length).toBeGreaterThan(1)
    expect(trainRl(policy, opt, groupsFor(policy, 1), {}, { learningRateScale: 10 }).steps[0]!.learning_rate).toBe(
      10 * DEFAULT_RL_LEARNING_RATE
    )
  })

  it("precalculate_logprobs recomputes the old logprobs before the first update", () => {
    // Recorded logprobs that are wrong (as if sampled by another policy): with precalculate_logprobs the
    // update is the one on-policy data would give, bit for bit.
    const a = Policy.create(config, { seed: 4 })
    const b = Policy.create(config, { seed: 4 })
    const good = groupsFor(a, 2)
    const bad = good.map((g) => ({
      items: g.items.map((item) => ({
        reward: item.reward,
        sequence: { ...item.sequence, logprobs: item.sequence.logprobs.map((v) => (Number.isNaN(v) ? v : v - 3)) }
      }))
    }))
    const ppo = { ppo: true, learning_rate: 1e-2 }
    const ra = trainRl(a, makeAdamState(a.parameterCount), good, ppo, { batchSize: 4 })
    const rb = trainRl(
      b,
      makeAdamState(b.parameterCount),
      bad,
      { ...ppo, precalculate_logprobs: true },
      { batchSize: 4 }
    )
    expect(bitsEqual(a.params, b.params)).toBe(true)
    expect(rb.steps.map((s) => s.loss)).toEqual(ra.steps.map((s) => s.loss))
    // The KL is measured against the recorded (sampling) logprobs.
    expect(rb.steps[0]!.kl_div).toBeGreaterThan(1)
    // Without it the stale logprobs make ratios of e^3, clipped by PPO: a different update.
    const c = Policy.create(config, { seed: 4 })
    trainRl(c, makeAdamState(c.parameterCount), bad, ppo, { batchSize: 4 })
    expect(bitsEqual(a.params, c.params)).toBe(false)
  })

  it("gives the same bits twice from the same weights, state and data", () => {
    const run = () => {
      const policy = Policy.create(config, { seed: 9 })
      const opt = makeAdamState(policy.parameterCount)
      const steps = []
      for (let i = 0; i < 3; i++) {
        const r = trainRl(policy, opt, groupsFor(policy, 10 + i), { importance_sampling_level: "average" })
        steps.push(...r.steps.map(({ tokens_per_second: _, ...rest }) => rest))
      }
      return { params: policy.params, m: opt.m, steps }
    }
    const x = run()
    const y = run()
    expect(bitsEqual(x.params, y.params)).toBe(true)
    expect(bitsEqual(x.m, y.m)).toBe(true)
    expect(x.steps).toEqual(y.steps)
  })

  it("trains with missing logprobs (NaN: treated as on-policy)", () => {
    const policy = Policy.create(config, { seed: 1 })
    const r = trainRl(policy, makeAdamState(policy.parameterCount), groupsFor(policy, 3, false), { ppo: true })
    expect(r.steps.length).toBe(1)
    expect(r.steps[0]!.kl_div).toBe(0)
    expect(Number.isFinite(r.steps[0]!.loss)).toBe(true)
  })
})

describe("trainSft", () => {
  const data = (policy: Policy): Array<TrainingSequence> =>
    [
      [1, 2, 5, 6, 7],
      [1, 3, 8, 9, 10],
      [1, 4, 11, 12, 13],
      [1, 2, 5, 6, 7]
    ].map((s) => trajectory(policy, s.slice(0, 2), s.slice(2), false))

  it("lowers the cross-entropy of the masked tokens", () => {
    const policy = Policy.create(config, { seed: 2 })
    const opt = makeAdamState(policy.parameterCount)
    const first = trainSft(policy, opt, data(policy), { batchSize: 4, learningRate: 1e-2 })
    let last = first
    for (let epoch = 0; epoch < 30; epoch++)
      last = trainSft(policy, opt, data(policy), { batchSize: 4, learningRate: 1e-2 })
    expect(first[0]!.num_trainable_tokens).toBe(12)
    expect(first[0]!.loss).toBeGreaterThan(2)
    expect(last[0]!.loss).toBeLessThan(0.5)
  })

  it("takes the learning rate per step from a list (the last repeats) and batches by size or automatically", () => {
    const policy = Policy.create(config, { seed: 2 })
    const steps = trainSft(policy, makeAdamState(policy.parameterCount), data(policy), {
      batchSize: 1,
      learningRate: [1e-3, 2e-3]
    })
    expect(steps.map((s) => s.learning_rate)).toEqual([1e-3, 2e-3, 2e-3, 2e-3])
    expect(steps.map((s) => s.num_trajectories)).toEqual([1, 1, 1, 1])
    const auto = trainSft(policy, makeAdamState(policy.parameterCount), data(policy), { batchSize: "auto" })
    expect(auto.length).toBe(1)
    expect(() => trainSft(policy, makeAdamState(policy.parameterCount), data(policy), { batchSize: 0 })).toThrow(
      /batch_size/
    )
  })
})
