/**
 * The RL loss of the training service (the formulas its `experimental_config` keys control), as pure
 * functions: group advantages, token weights, `advantage_balance`, the
 * importance ratio at the four `importance_sampling_level`s, the PPO and CISPO losses with their clip bounds,
 * `max_negative_advantage_importance_sampling_weight`, `mask_prob_ratio`, `kimi_k2_tau`, and the gradient of
 * the loss with respect to the new logprobs (which the policy's backward pass takes from there).
 *
 * Where those formulas are silent, the reference trainer's behaviour is followed and said so: the loss is CISPO
 * unless `ppo` (or `loss_fn: "ppo"`) asks for PPO; `scale_rewards` defaults to true; the normalisation
 * `A <- A / mean(|A| w)` is applied whatever `advantage_balance` is (0 included); a set
 * `truncated_importance_sampling` U scales each token's loss by the detached `min(exp(l_old - l_orig), U)`
 * (or `min(rho, U)` when the old logprobs were not recomputed).
 *
 * @since 0.1.0
 */
import type { ExperimentalConfig } from "../../api/TrainingJob.js"

/** How the importance ratio is taken. */
export type ImportanceSamplingLevel = "token" | "sequence" | "average" | "geometric_average"

/** The loss knobs of `experimental_config`, resolved with their defaults. */
export interface LossSettings {
  /** PPO (true) or the CISPO form (false). */
  readonly ppo: boolean
  /** The lower clip bound is `1 - epsilon`. */
  readonly epsilon: number
  /** The upper clip bound is `1 + epsilonHigh`. */
  readonly epsilonHigh: number
  /** How the importance ratio is taken. */
  readonly importanceSamplingLevel: ImportanceSamplingLevel
  /** `rho <- min(rho, M)` when set. */
  readonly maxNegativeAdvantageIsWeight: number | undefined
  /** `rho <- rho * 1[1 - epsilon < rho < 1 + epsilonHigh]`. */
  readonly maskProbRatio: boolean
  /** `A <- A - tau * stopgrad(l_new - l_old)` when set. */
  readonly kimiK2Tau: number | undefined
  /** Scale each token's loss by a detached truncated ratio (see the module comment) when set. */
  readonly truncatedImportanceSampling: number | undefined
  /** Divide group advantages by the group's standard deviation (+ 1e-6). */
  readonly scaleRewards: boolean
  /** `advantage_balance`, in [-1, 1]. */
  readonly advantageBalance: number
}

const levels: ReadonlyArray<string> = ["token", "sequence", "average", "geometric_average"]

const positive = (x: number | null | undefined): number | undefined =>
  x !== null && x !== undefined && x !== 0 ? x : undefined

/**
 * Resolve `experimental_config` into loss settings. `ppo` wins over `loss_fn`; with neither the loss is CISPO.
 * Clip defaults: PPO epsilon = 0.2, epsilon_high = epsilon; CISPO epsilon = 1, epsilon_high = 4. Keys it does not
 * use are ignored.
 */
export const lossSettings = (config?: ExperimentalConfig | null): LossSettings => {
  const c = config ?? {}
  const ppo = c.ppo ?? c.loss_fn === "ppo"
  const epsilon = c.epsilon ?? (ppo ? 0.2 : 1)
  const epsilonHigh = c.epsilon_high ?? (ppo ? epsilon : 4)
  const level = c.importance_sampling_level ?? "token"
  if (!levels.includes(level)) throw new RangeError(`importance_sampling_level: unknown level ${String(level)}`)
  const advantageBalance = c.advantage_balance ?? 0
  if (!(advantageBalance >= -1 && advantageBalance <= 1)) {
    throw new RangeError(`advantage_balance must be in [-1, 1], got ${advantageBalance}`)
  }
  return {
    ppo,
    epsilon,
    epsilonHigh,
    importanceSamplingLevel: level,
    maxNegativeAdvantageIsWeight: positive(c.max_negative_advantage_importance_sampling_weight),
    maskProbRatio: c.mask_prob_ratio ?? false,
    kimiK2Tau: positive(c.kimi_k2_tau),
    truncatedImportanceSampling: positive(c.truncated_importance_sampling),
    scaleRewards: c.scale_rewards ?? true,
    advantageBalance
  }
}

/** A group's advantages. */
export interface GroupAdvantages {
  /** One per trajectory (all zero when not trainable). */
  readonly advantages: ReadonlyArray<number>
  /** Whether the rewards differ (a group of equal rewards teaches nothing and is skipped). */
  readonly trainable: boolean
  /** The mean reward. */
  readonly mean: number
  /** The population standard deviation of the rewards. */
  readonly std: number
}

/** `A_i = r_i - mean`, divided by `std + 1e-6` with `scaleRewards`; a group of equal rewards is not trainable. */
export const groupAdvantages = (rewards: ReadonlyArray<number>, scaleRewards: boolean): GroupAdvantages => {
  const n = rewards.length
  if (n === 0) return { advantages: [], trainable: false, mean: 0, std: 0 }
  let sum = 0
  for (const r of rewards) sum += r
  const mean = sum / n
  let ss = 0
  for (const r of rewards) ss += (r - mean) * (r - mean)
  const std = Math.sqrt(ss / n)
  const trainable = rewards.some((r) => r !== rewards[0])
  if (!trainable) return { advantages: rewards.map(() => 0), trainable, mean, std }
  const advantages = rewards.map((r) => (scaleRewards ? (r - mean) / (std + 1e-6) : r - mean))
  return { advantages, trainable, mean, std }
}

/**
 * Per trajectory, the weight its assistant tokens share: `1 / n_i`, renormalised so that the mean weight over
 * all assistant tokens is 1 (that is `N / (K n_i)` for N tokens in K trajectories); 0 for a trajectory with
 * no assistant token.
 */
export const trajectoryWeights = (assistantTokens: ReadonlyArray<number>): Array<number> => {
  let total = 0
  let k = 0
  for (const n of assistantTokens) {
    if (n > 0) {
      total += n
      k++
    }
  }
  return assistantTokens.map((n) => (n > 0 ? total / (k * n) : 0))
}

/**
 * `advantage_balance` b: negative advantages scaled by `1 - b` when b > 0, positive ones by `1 + b` when
 * b < 0; then every advantage divided by the mean over assistant tokens of `|A| w` (left as is when that
 * mean is 0).
 */
export const balanceAdvantages = (
  advantages: ReadonlyArray<number>,
  assistantTokens: ReadonlyArray<number>,
  weights: ReadonlyArray<number>,
  balance: number
): Array<number> => {
  const scaled = advantages.map((a) =>
    balance > 0 && a < 0 ? a * (1 - balance) : balance < 0 && a > 0 ? a * (1 + balance) : a
  )
  let num = 0
  let tokens = 0
  scaled.forEach((a, i) => {
    const n = assistantTokens[i]!
    num += n * Math.abs(a) * weights[i]!
    tokens += n
  })
  const mean = tokens > 0 ? num / tokens : 0
  return mean > 0 ? scaled.map((a) => a / mean) : scaled
}

/** One trajectory's inputs to the loss. */
export interface SequenceLossInput {
  /** The current policy's logprob of each token (read where `mask` is 1). */
  readonly newLogprobs: ArrayLike<number>
  /** The logprob of each token under the policy that sampled it; NaN where unknown. */
  readonly oldLogprobs: ArrayLike<number>
  /** With `precalculate_logprobs`, the logprobs recorded at sampling (for truncated importance sampling). */
  readonly originalLogprobs?: ArrayLike<number> | undefined
  /** 1 for an assistant (trainable) token. */
  readonly mask: ArrayLike<number>
  /** The trajectory's advantage. */
  readonly advantage: number
  /** The trajectory's token weight. */
  readonly weight: number
}

/** One trajectory's loss terms. */
export interface SequenceLossOutput {
  /** `sum_t L_t w m_t` (divide by the batch's `sum m + 1e-6` for the total). */
  readonly loss: number
  /** The assistant tokens (`sum m_t`). */
  readonly tokens: number
  /** Per token: `L_t` (unweighted; 0 where mask is 0). */
  readonly perToken: Float64Array
  /** Per token: the ratio that entered the loss (after M and the mask; 0 where mask is 0). */
  readonly ratios: Float64Array
  /** Per token: `d loss / d l_new_t` of the weighted sum `loss`. */
  readonly grad: Float64Array
}

/** The loss of one trajectory and its gradient with respect to the new logprobs. */
export const sequenceLoss = (input: SequenceLossInput, s: LossSettings): SequenceLossOutput => {
  const { newLogprobs, oldLogprobs, originalLogprobs, mask, advantage, weight } = input
  const T = mask.length
  const perToken = new Float64Array(T)
  const ratios = new Float64Array(T)
  const grad = new Float64Array(T)
  // d_t = l_new - l_old, with a missing l_old replaced by the detached l_new (d = 0, d d / d l_new = 1).
  const diff = new Float64Array(T)
  let n = 0
  let sumDiff = 0
  for (let t = 0; t < T; t++) {
    if (mask[t] !== 1) continue
    const old = oldLogprobs[t]!
    diff[t] = Number.isNaN(old) ? 0 : newLogprobs[t]! - old
    sumDiff += diff[t]!
    n++
  }
  if (n === 0) return { loss: 0, tokens: 0, perToken, ratios, grad }
  const rhoBar = Math.exp(sumDiff / n)
  const lo = 1 - s.epsilon
  const hi = 1 + s.epsilonHigh
  // u_t: d(L_t phi_t)/d rho_t through the ratio (PPO), with rho_t's derivative alpha_t (own token) and
  // beta_t / n (every token, through the sequence ratio).
  let shared = 0
  const own = new Float64Array(T)
  let loss = 0
  for (let t = 0; t < T; t++) {
    if (mask[t] !== 1) continue
    const rhoTok = Math.exp(diff[t]!)
    let rho: number
    let alpha: number
    let beta: number
    switch (s.importanceSamplingLevel) {
      case "token":
        rho = rhoTok
        alpha = rhoTok
        beta = 0
        break
      case "sequence":
        rho = rhoBar
        alpha = 0
        beta = rhoBar
        break
      case "average":
        rho = (rhoTok + rhoBar) / 2
        alpha = rhoTok / 2
        beta = rhoBar / 2
        break
      case "geometric_average":
        rho = Math.sqrt(rhoTok) * Math.sqrt(rhoBar)
        alpha = rho / 2
        beta = rho / 2
        break
    }
    let gate = 1
    const M = s.maxNegativeAdvantageIsWeight
    if (M !== undefined && rho > M) {
      rho = M
      gate = 0
    }
    if (s.maskProbRatio && !(rho > lo && rho < hi)) {
      rho = 0
      gate = 0
    }
    const a = s.kimiK2Tau === undefined ? advantage : advantage - s.kimiK2Tau * diff[t]!
    const clipped = Math.max(lo, Math.min(rho, hi))
    let phi = 1
    const U = s.truncatedImportanceSampling
    if (U !== undefined) {
      if (originalLogprobs !== undefined) {
        const oldRaw = oldLogprobs[t]!
        const origRaw = originalLogprobs[t]!
        const oldV = Number.isNaN(oldRaw) ? newLogprobs[t]! : oldRaw
        const origV = Number.isNaN(origRaw) ? newLogprobs[t]! : origRaw
        phi = Math.min(Math.exp(oldV - origV), U)
      } else phi = Math.min(rho, U)
    }
    ratios[t] = rho
    let lt: number
    if (s.ppo) {
      const unclipped = rho * a
      const clip = clipped * a
      lt = -Math.min(unclipped, clip)
      // Inside the bounds both branches agree; outside, only the unclipped branch has a gradient.
      const dRho = (rho >= lo && rho <= hi) || unclipped < clip ? -a : 0
      const u = dRho * phi * gate
      own[t] = u * alpha
      shared += u * beta
    } else {
      lt = -clipped * a * newLogprobs[t]!
      own[t] = -clipped * a * phi
    }
    perToken[t] = lt * phi
    loss += lt * phi * weight
  }
  for (let t = 0; t < T; t++) {
    if (mask[t] !== 1) continue
    grad[t] = weight * (own[t]! + shared / n)
  }
  return { loss, tokens: n, perToken, ratios, grad }
}

/** The total loss of a batch: `sum_t L_t w_t m_t / (sum_t m_t + 1e-6)`, and its gradient per trajectory. */
export const batchLoss = (
  inputs: ReadonlyArray<SequenceLossInput>,
  settings: LossSettings
): { readonly loss: number; readonly tokens: number; readonly grads: ReadonlyArray<Float64Array> } => {
  const outs = inputs.map((input) => sequenceLoss(input, settings))
  let sum = 0
  let tokens = 0
  for (const o of outs) {
    sum += o.loss
    tokens += o.tokens
  }
  const scale = 1 / (tokens + 1e-6)
  return { loss: sum * scale, tokens, grads: outs.map((o) => o.grad.map((g) => g * scale)) }
}

/** The entropy of a distribution given by its logprobs: `-sum p log p`. */
export const entropy = (logprobs: ArrayLike<number>): number => {
  let h = 0
  for (let i = 0; i < logprobs.length; i++) {
    const lp = logprobs[i]!
    if (lp > Number.NEGATIVE_INFINITY) h -= Math.exp(lp) * lp
  }
  return h
}

/** The KL estimate against a reference policy, per token: `exp(l_ref - l_new) - (l_ref - l_new) - 1`. */
export const klEstimate = (refLogprob: number, newLogprob: number): number => {
  const x = refLogprob - newLogprob
  return Math.exp(x) - x - 1
}
