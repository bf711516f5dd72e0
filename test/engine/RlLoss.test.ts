import { describe, expect, it } from "@effect/vitest"
import type { ExperimentalConfig } from "../../src/api/TrainingJob.js"
import { Rng } from "../../src/local/engine/Random.js"
import {
  balanceAdvantages,
  batchLoss,
  entropy,
  groupAdvantages,
  klEstimate,
  type LossSettings,
  lossSettings,
  type SequenceLossInput,
  sequenceLoss,
  trajectoryWeights
} from "../../src/local/engine/RlLoss.js"

const close = (actual: ArrayLike<number>, expected: ReadonlyArray<number>, digits = 9): void => {
  expect(actual.length).toBe(expected.length)
  expected.forEach((e, i) => {
    expect(actual[i]).toBeCloseTo(e, digits)
  })
}

// A trajectory of three tokens: a context token, then two sampled ones whose ratios are 1.1 and 0.7.
const old = [Number.NaN, -1, -2]
const lNew = [0, -1 + Math.log(1.1), -2 + Math.log(0.7)]
const mask = [0, 1, 1]
const input = (advantage: number, over: Partial<SequenceLossInput> = {}): SequenceLossInput => ({
  newLogprobs: lNew,
  oldLogprobs: old,
  mask,
  advantage,
  weight: 1,
  ...over
})
const settings = (config: ExperimentalConfig): LossSettings => lossSettings(config)
const rhoBar = Math.sqrt(1.1 * 0.7) // exp(mean(log 1.1, log 0.7))

describe("advantages", () => {
  it("centres group rewards, scaled by the population std with scale_rewards", () => {
    // mean 0.5, std 0.5
    const scaled = groupAdvantages([1, 0, 0, 1], true)
    expect(scaled.trainable).toBe(true)
    expect(scaled.mean).toBe(0.5)
    expect(scaled.std).toBe(0.5)
    close(scaled.advantages, [0.5 / 0.500001, -0.5 / 0.500001, -0.5 / 0.500001, 0.5 / 0.500001], 12)
    close(groupAdvantages([1, 0, 0, 1], false).advantages, [0.5, -0.5, -0.5, 0.5])
    // mean 2, std sqrt(8/3)
    close(groupAdvantages([0, 2, 4], true).advantages, [
      -2 / (Math.sqrt(8 / 3) + 1e-6),
      0,
      2 / (Math.sqrt(8 / 3) + 1e-6)
    ])
  })

  it("gives a constant added to every reward no weight: the std is taken from the deviations", () => {
    // [0, 1, 3]: mean 4/3, deviations -4/3, -1/3, 5/3, population variance 14/9. Shifted by 1e6, the mean is
    // not a double (1000001.333...); a variance taken as mean(r^2) - mean^2 would be off by ~1e-4 there.
    const std = Math.sqrt(14 / 9)
    const shifted = groupAdvantages([1e6, 1e6 + 1, 1e6 + 3], true)
    expect(shifted.std).toBeCloseTo(std, 9)
    close(shifted.advantages, [-4 / 3 / (std + 1e-6), -1 / 3 / (std + 1e-6), 5 / 3 / (std + 1e-6)], 8)
  })

  it("an empty group has no advantages and is not trainable", () => {
    expect(groupAdvantages([], true)).toStrictEqual({ advantages: [], trainable: false, mean: 0, std: 0 })
  })

  it("skips a group whose rewards are all equal, and a group of one", () => {
    const flat = groupAdvantages([0.1, 0.1, 0.1], true)
    expect(flat.trainable).toBe(false)
    expect(flat.advantages).toEqual([0, 0, 0])
    expect(groupAdvantages([1], true).trainable).toBe(false)
  })

  it("weights each trajectory's tokens 1/n, renormalised to mean 1 over tokens", () => {
    // 6 tokens in 2 trajectories: 6 / (2 * 2) and 6 / (2 * 4).
    expect(trajectoryWeights([2, 4])).toEqual([1.5, 0.75])
    expect(trajectoryWeights([3, 0, 3])).toEqual([1, 0, 1])
  })

  it("balances advantages: b > 0 shrinks negatives, b < 0 shrinks positives, then divides by mean |A| w", () => {
    const counts = [2, 4]
    const w = [1.5, 0.75]
    // b = 0.5: [1, -0.5]; mean |A| w over tokens = (2 * 1 * 1.5 + 4 * 0.5 * 0.75) / 6 = 0.75
    close(balanceAdvantages([1, -1], counts, w, 0.5), [1 / 0.75, -0.5 / 0.75])
    // b = -0.5: [0.5, -1]; (2 * 0.5 * 1.5 + 4 * 1 * 0.75) / 6 = 0.75
    close(balanceAdvantages([1, -1], counts, w, -0.5), [0.5 / 0.75, -1 / 0.75])
    // b = 0: only the normalisation; (2 * 2 * 1.5 + 4 * 2 * 0.75) / 6 = 2
    close(balanceAdvantages([2, -2], counts, w, 0), [1, -1])
    close(balanceAdvantages([0, 0], counts, w, 0.3), [0, 0])
  })
})

describe("settings", () => {
  it("defaults to CISPO (epsilon 1, epsilon_high 4); PPO defaults to 0.2 both ways", () => {
    const cispo = lossSettings({})
    expect([cispo.ppo, cispo.epsilon, cispo.epsilonHigh]).toEqual([false, 1, 4])
    expect(cispo.importanceSamplingLevel).toBe("token")
    expect(cispo.scaleRewards).toBe(true)
    const ppo = lossSettings({ ppo: true })
    expect([ppo.ppo, ppo.epsilon, ppo.epsilonHigh]).toEqual([true, 0.2, 0.2])
    expect(lossSettings({ ppo: true, epsilon: 0.1 }).epsilonHigh).toBe(0.1)
    expect(lossSettings({ ppo: true, epsilon: 0.1, epsilon_high: 0.3 }).epsilonHigh).toBe(0.3)
    expect(lossSettings({ loss_fn: "ppo" }).ppo).toBe(true)
    expect(lossSettings({ loss_fn: "cispo" }).ppo).toBe(false)
    expect(lossSettings({ ppo: false, loss_fn: "ppo" }).ppo).toBe(false)
    expect(lossSettings({ ppo: null, epsilon: null }).epsilon).toBe(1)
  })

  it("tolerates unknown keys and refuses an advantage_balance outside [-1, 1]", () => {
    const config: ExperimentalConfig = { normalize_advantages: true, some_future_knob: 3 }
    expect(lossSettings(config).ppo).toBe(false)
    expect(() => lossSettings({ advantage_balance: 1.5 })).toThrow(/advantage_balance must be in \[-1, 1\]/)
    expect(() => lossSettings({ advantage_balance: -1.5 })).toThrow(/advantage_balance must be in \[-1, 1\]/)
    expect(lossSettings({ advantage_balance: 1 }).advantageBalance).toBe(1)
    expect(lossSettings({ advantage_balance: -1 }).advantageBalance).toBe(-1)
  })

  it("refuses an importance_sampling_level it does not know", () => {
    // Past the schema (which names the four levels), as a config built in code could be.
    const config = { importance_sampling_level: "tokens" } as unknown as ExperimentalConfig
    expect(() => lossSettings(config)).toThrow(/importance_sampling_level: unknown level tokens/)
  })

  it("a knob of M, tau or U set to 0 or null is off", () => {
    const off = lossSettings({})
    expect(
      lossSettings({
        max_negative_advantage_importance_sampling_weight: 0,
        kimi_k2_tau: 0,
        truncated_importance_sampling: 0
      })
    ).toStrictEqual(off)
    expect(
      lossSettings({
        max_negative_advantage_importance_sampling_weight: null,
        kimi_k2_tau: null,
        truncated_importance_sampling: null
      })
    ).toStrictEqual(off)
  })
})

describe("the loss at each importance-sampling level", () => {
  it("token: rho_t", () => {
    const ppo = sequenceLoss(input(1), settings({ ppo: true }))
    close(ppo.ratios, [0, 1.1, 0.7])
    // t1 inside the bounds: -1.1, grad -rho = -1.1; t2 below 0.8 with A > 0: the unclipped 0.7 is smaller.
    close(ppo.perToken, [0, -1.1, -0.7])
    close(ppo.grad, [0, -1.1, -0.7])
    expect(ppo.loss).toBeCloseTo(-1.8, 12)
    expect(ppo.tokens).toBe(2)
  })

  it("sequence: rho_bar = exp(mean(l_new - l_old)) for every token", () => {
    const o = sequenceLoss(input(1), settings({ ppo: true, importance_sampling_level: "sequence" }))
    close(o.ratios, [0, rhoBar, rhoBar])
    close(o.perToken, [0, -rhoBar, -rhoBar])
    // d rho_bar / d l_s = rho_bar / 2 for each s, through both tokens: -rho_bar each.
    close(o.grad, [0, -rhoBar, -rhoBar])
  })

  it("average: (rho_t + rho_bar) / 2", () => {
    const o = sequenceLoss(input(1), settings({ ppo: true, importance_sampling_level: "average" }))
    const r1 = (1.1 + rhoBar) / 2
    const r2 = (0.7 + rhoBar) / 2 // 0.7887: below 0.8, unclipped branch
    close(o.ratios, [0, r1, r2])
    close(o.perToken, [0, -r1, -r2])
    // d r_t / d l_s = (delta_ts rho_t + rho_bar / 2) / 2
    close(o.grad, [0, -(1.1 / 2 + rhoBar / 2), -(0.7 / 2 + rhoBar / 2)])
  })

  it("geometric_average: sqrt(rho_t * rho_bar)", () => {
    const o = sequenceLoss(
      input(1),
      settings({ ppo: true, epsilon: 0.5, importance_sampling_level: "geometric_average" })
    )
    const r1 = Math.sqrt(1.1 * rhoBar)
    const r2 = Math.sqrt(0.7 * rhoBar)
    close(o.ratios, [0, r1, r2])
    close(o.perToken, [0, -r1, -r2])
    // d r_t / d l_s = r_t (delta_ts + 1/2) / 2
    close(o.grad, [0, -(r1 * 0.75 + r2 * 0.25), -(r1 * 0.25 + r2 * 0.75)])
  })
})

describe("PPO and CISPO clipping", () => {
  it("PPO: the pessimistic branch; outside the bounds only the unclipped branch has a gradient", () => {
    const s = settings({ ppo: true })
    // A < 0: t1 (1.1, inside): 1.1, grad +1.1; t2 (0.7): -min(-0.7, -0.8) = 0.8 through the clip: no gradient.
    const neg = sequenceLoss(input(-1), s)
    close(neg.perToken, [0, 1.1, 0.8])
    close(neg.grad, [0, 1.1, 0])
    // A ratio of 1.5: with A > 0 clipped at 1.2 (no gradient); with A < 0 unclipped (grad -A rho = 1.5).
    const high = { newLogprobs: [0, -1 + Math.log(1.5)], oldLogprobs: [Number.NaN, -1], mask: [0, 1], weight: 1 }
    const up = sequenceLoss({ ...high, advantage: 1 }, s)
    close(up.perToken, [0, -1.2])
    close(up.grad, [0, 0])
    const down = sequenceLoss({ ...high, advantage: -1 }, s)
    close(down.perToken, [0, 1.5])
    close(down.grad, [0, 1.5])
    // epsilon_high widens the upper bound only.
    const wide = sequenceLoss({ ...high, advantage: 1 }, settings({ ppo: true, epsilon_high: 0.6 }))
    close(wide.perToken, [0, -1.5])
    close(wide.grad, [0, -1.5])
  })

  it("PPO: a ratio on a clip bound keeps its gradient (a ratio of exactly 1, epsilon or epsilon_high 0)", () => {
    // Missing old logprobs: rho = 1, on the lower bound with epsilon 0, on the upper one with epsilon_high 0.
    // min(rho A, clip(rho) A) has both branches' derivative -A there (clamp passes its gradient at a bound).
    const onPolicy = input(1, { oldLogprobs: [Number.NaN, Number.NaN, Number.NaN] })
    for (const config of [
      { ppo: true, epsilon: 0, epsilon_high: 0.2 },
      { ppo: true, epsilon: 0.2, epsilon_high: 0 }
    ]) {
      const o = sequenceLoss(onPolicy, settings(config))
      close(o.perToken, [0, -1, -1])
      close(o.grad, [0, -1, -1])
    }
  })

  it("CISPO: -stopgrad(clip(rho, 1 - eps, 1 + eps_high)) * A * l_new", () => {
    const o = sequenceLoss(input(2), settings({}))
    // clip(1.1, 0, 5) = 1.1, clip(0.7, 0, 5) = 0.7
    close(o.perToken, [0, -1.1 * 2 * lNew[1]!, -0.7 * 2 * lNew[2]!])
    close(o.grad, [0, -1.1 * 2, -0.7 * 2])
    // A ratio of 6 is clipped to 5; with epsilon 0.2 (CISPO), 0.7 is raised to 0.8.
    const big = { newLogprobs: [0, -1 + Math.log(6)], oldLogprobs: [Number.NaN, -1], mask: [0, 1], weight: 1 }
    close(sequenceLoss({ ...big, advantage: 1 }, settings({ ppo: false })).grad, [0, -5])
    close(sequenceLoss(input(1), settings({ loss_fn: "cispo", epsilon: 0.2 })).grad, [0, -1.1, -0.8])
  })
})

describe("ratio and advantage modifiers", () => {
  it("max_negative_advantage_importance_sampling_weight: rho <- min(rho, M)", () => {
    const o = sequenceLoss(input(1), settings({ ppo: true, max_negative_advantage_importance_sampling_weight: 1 }))
    close(o.ratios, [0, 1, 0.7])
    close(o.perToken, [0, -1, -0.7])
    close(o.grad, [0, 0, -0.7])
    const cispo = sequenceLoss(input(-1), settings({ max_negative_advantage_importance_sampling_weight: 0.9 }))
    close(cispo.grad, [0, 0.9, 0.7])
  })

  it("max_negative_advantage_importance_sampling_weight: a ratio equal to M keeps its gradient", () => {
    // On-policy tokens (old logprobs missing: rho = 1) under M = 1: min(rho, M) passes the gradient at rho = M.
    const o = sequenceLoss(
      input(1, { oldLogprobs: [Number.NaN, Number.NaN, Number.NaN] }),
      settings({ ppo: true, max_negative_advantage_importance_sampling_weight: 1 })
    )
    close(o.ratios, [0, 1, 1])
    close(o.grad, [0, -1, -1])
  })

  it("mask_prob_ratio: the interval is open; a ratio on a bound is masked", () => {
    const onPolicy = input(1, { oldLogprobs: [Number.NaN, Number.NaN, Number.NaN] })
    for (const config of [
      { ppo: true, mask_prob_ratio: true, epsilon: 0, epsilon_high: 0.2 },
      { ppo: true, mask_prob_ratio: true, epsilon: 0.2, epsilon_high: 0 }
    ]) {
      const o = sequenceLoss(onPolicy, settings(config))
      close(o.ratios, [0, 0, 0])
      close(o.perToken, [0, 0, 0])
      close(o.grad, [0, 0, 0])
    }
  })

  it("mask_prob_ratio: tokens whose ratio leaves (1 - eps, 1 + eps_high) are zeroed", () => {
    const o = sequenceLoss(input(1), settings({ ppo: true, mask_prob_ratio: true }))
    close(o.ratios, [0, 1.1, 0])
    close(o.perToken, [0, -1.1, 0])
    close(o.grad, [0, -1.1, 0])
    // CISPO with eps 0.2, eps_high 0.05: both ratios leave (0.8, 1.05); clip(0) = 0.8 still scales l_new.
    const c = sequenceLoss(input(1), settings({ epsilon: 0.2, epsilon_high: 0.05, mask_prob_ratio: true }))
    close(c.ratios, [0, 0, 0])
    close(c.grad, [0, -0.8, -0.8])
  })

  it("kimi_k2_tau: A <- A - tau * stopgrad(l_new - l_old)", () => {
    const tau = 0.5
    const o = sequenceLoss(input(1), settings({ ppo: true, kimi_k2_tau: tau }))
    const a1 = 1 - tau * Math.log(1.1)
    const a2 = 1 - tau * Math.log(0.7)
    close(o.perToken, [0, -1.1 * a1, -0.7 * a2])
    close(o.grad, [0, -1.1 * a1, -0.7 * a2])
  })

  it("a missing old logprob is the detached new one: ratio 1, gradient -A (PPO) or -A (CISPO)", () => {
    const missing = input(0.5, { oldLogprobs: [Number.NaN, Number.NaN, Number.NaN] })
    const ppo = sequenceLoss(missing, settings({ ppo: true }))
    close(ppo.ratios, [0, 1, 1])
    close(ppo.grad, [0, -0.5, -0.5])
    close(sequenceLoss(missing, settings({})).grad, [0, -0.5, -0.5])
  })

  it("weights scale a trajectory; the total divides by the assistant tokens (+ 1e-6)", () => {
    const two = batchLoss([input(1, { weight: 2 }), input(-1, { weight: 0.5 })], settings({ ppo: true }))
    // (2 * (-1.1 - 0.7) + 0.5 * (1.1 + 0.8)) / (4 + 1e-6)
    expect(two.loss).toBeCloseTo((2 * -1.8 + 0.5 * 1.9) / (4 + 1e-6), 12)
    expect(two.tokens).toBe(4)
    close(two.grads[0]!, [0, (2 * -1.1) / (4 + 1e-6), (2 * -0.7) / (4 + 1e-6)])
    close(two.grads[1]!, [0, (0.5 * 1.1) / (4 + 1e-6), 0])
  })

  it("truncated_importance_sampling scales each token by the detached min(exp(l_old - l_orig), U)", () => {
    const original = [Number.NaN, -1 - Math.log(3), -2 + Math.log(2)]
    const o = sequenceLoss(
      input(1, { originalLogprobs: original }),
      settings({ ppo: true, truncated_importance_sampling: 2 })
    )
    // factors: min(3, 2) = 2 and min(0.5, 2) = 0.5
    close(o.perToken, [0, -1.1 * 2, -0.7 * 0.5])
    close(o.grad, [0, -1.1 * 2, -0.7 * 0.5])
  })
})

describe("truncated importance sampling and empty trajectories", () => {
  it("truncated_importance_sampling without recomputed old logprobs scales by the detached min(rho, U)", () => {
    const o = sequenceLoss(input(1), settings({ ppo: true, truncated_importance_sampling: 1 }))
    // factors: min(1.1, 1) = 1 and min(0.7, 1) = 0.7
    close(o.perToken, [0, -1.1, -0.7 * 0.7])
    close(o.grad, [0, -1.1, -0.7 * 0.7])
    expect(o.loss).toBeCloseTo(-1.1 - 0.49, 12)
  })

  it("truncated_importance_sampling scales CISPO's loss and gradient too", () => {
    const original = [Number.NaN, -1 - Math.log(3), -2 + Math.log(2)]
    const o = sequenceLoss(
      input(2, { originalLogprobs: original, weight: 0.5 }),
      settings({ truncated_importance_sampling: 2 })
    )
    // factors 2 and 0.5; CISPO's clip(1.1, 0, 5) = 1.1 and clip(0.7, 0, 5) = 0.7
    const l1 = -1.1 * 2 * lNew[1]! * 2
    const l2 = -0.7 * 2 * lNew[2]! * 0.5
    close(o.perToken, [0, l1, l2])
    expect(o.loss).toBeCloseTo(0.5 * (l1 + l2), 12)
    close(o.grad, [0, 0.5 * -1.1 * 2 * 2, 0.5 * -0.7 * 2 * 0.5])
  })

  it("a trajectory without assistant tokens adds nothing to the batch", () => {
    const none: SequenceLossInput = {
      newLogprobs: [-1, -2],
      oldLogprobs: [-1.5, -2],
      mask: [0, 0],
      advantage: 1,
      weight: 1
    }
    const o = sequenceLoss(none, settings({ ppo: true }))
    expect([o.loss, o.tokens]).toEqual([0, 0])
    close(o.grad, [0, 0])
    const both = batchLoss([input(1), none], settings({ ppo: true }))
    expect(both.tokens).toBe(2)
    expect(both.loss).toBeCloseTo(-1.8 / (2 + 1e-6), 12)
    close(both.grads[1]!, [0, 0])
  })
})

describe("the gradient of every mode", () => {
  // Only where nothing is detached: PPO without kimi_k2_tau (CISPO's ratio and tau's shift are stopgrad, and
  // are checked by hand above).
  it("matches finite differences of the PPO loss at every level", () => {
    const rng = new Rng(9)
    const configs: ReadonlyArray<ExperimentalConfig> = [
      { ppo: true },
      { ppo: true, importance_sampling_level: "sequence" },
      { ppo: true, importance_sampling_level: "average" },
      { ppo: true, importance_sampling_level: "geometric_average", epsilon: 0.5 },
      { ppo: true, max_negative_advantage_importance_sampling_weight: 1.05, mask_prob_ratio: true, epsilon: 0.4 },
      { loss_fn: "ppo", importance_sampling_level: "average", epsilon: 0.1, epsilon_high: 0.05 }
    ]
    for (const config of configs) {
      for (const advantage of [1.3, -0.7]) {
        const T = 6
        const oldLp = Array.from({ length: T }, (_, t) => (t === 2 ? Number.NaN : -1 - rng.float()))
        const newLp = oldLp.map((o) => (Number.isNaN(o) ? -1.5 : o + (rng.float() - 0.5) * 0.6))
        const m = [0, 1, 1, 0, 1, 1]
        const s = settings(config)
        const base = { oldLogprobs: oldLp, mask: m, advantage, weight: 0.8 }
        const g = sequenceLoss({ ...base, newLogprobs: newLp }, s).grad
        for (let t = 0; t < T; t++) {
          const eps = 1e-6
          // The missing old logprob is the new one detached: held at the base point's value.
          const fixedOld = oldLp.map((o, i) => (Number.isNaN(o) ? newLp[i]! : o))
          const at = (delta: number): number =>
            sequenceLoss(
              { ...base, oldLogprobs: fixedOld, newLogprobs: newLp.map((v, i) => (i === t ? v + delta : v)) },
              s
            ).loss
          const fd = (at(eps) - at(-eps)) / (2 * eps)
          expect(g[t], `${JSON.stringify(config)} A=${advantage} t=${t}`).toBeCloseTo(fd, 5)
        }
      }
    }
  })
})

describe("entropy and KL", () => {
  it("entropy of a uniform distribution over four is log 4; KL estimate exp(x) - x - 1", () => {
    expect(entropy([Math.log(0.25), Math.log(0.25), Math.log(0.25), Math.log(0.25)])).toBeCloseTo(Math.log(4), 12)
    expect(entropy([0, Number.NEGATIVE_INFINITY])).toBe(0)
    expect(klEstimate(-1, -1)).toBe(0)
    expect(klEstimate(-1, -1.5)).toBeCloseTo(Math.exp(0.5) - 0.5 - 1, 12)
  })
})
