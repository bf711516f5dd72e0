/**
 * Training the local policy: RL on trajectory groups (the training service's loss, see `RlLoss`) and SFT
 * (cross-entropy on the tokens to learn), each step a forward and backward pass of the policy over a packed
 * batch and an AdamW update.
 *
 * ## Gradient steps
 * One gradient step per mini-batch of trajectories. The trainable trajectories (those of groups whose rewards
 * differ) are taken in order and cut into mini-batches of `batchSize` trajectories when it is given, else of
 * at most `packed_sequence_length` tokens (default 16,384, counted before prefix sharing); a small job (the
 * usual: a few groups of short rollouts) is therefore one gradient step. Advantages, token weights and the
 * `advantage_balance` normalisation are computed over the whole job, as the reference trainer does over its
 * packed tensors; the loss of a step is normalised by that step's assistant tokens.
 *
 * ## Learning rate
 * `learning_rate` is used as given. Without it the caller's `defaultLearningRate` applies, else
 * `DEFAULT_RL_LEARNING_RATE` (3e-3 with Adam for this ~100k-parameter model from random weights; SFT's is
 * `DEFAULT_SFT_LEARNING_RATE`, 1e-3). The local backend passes the default of the job's model's base model
 * (`baseModels.ts`): the engine's for the random-init models, which must learn everything; 1e-3 for RL from the
 * pretrained `effect-rl/base-2k`, where 3e-3 unlearns what pretraining taught (a shop agent that must copy a
 * tool's result: right 0.29 -> 0.00 in 20 steps at 3e-3; a mean reward of 0.8 within 20 steps at 1e-3). The hosted
 * service's customary 5e-6 is tuned for a LoRA on a 14B model and barely moves this one: a client that sends it
 * trains, but slowly. A caller that wants hosted configurations to learn here can pass `learningRateScale` (e.g.
 * 600 maps 5e-6 to 3e-3; it multiplies a default too); the reported `learning_rate` is the one applied.
 *
 * ## Config keys
 * Honoured: every published key (`learning_rate`, `ppo`, `epsilon`, `epsilon_high`, `importance_sampling_level`,
 * `scale_rewards`, `advantage_balance`, `mask_prob_ratio`, `max_negative_advantage_importance_sampling_weight`,
 * `kimi_k2_tau`, `precalculate_logprobs`) and, from the clients' superset, `loss_fn`,
 * `truncated_importance_sampling` and `packed_sequence_length`. Other keys (`kl_penalty_*`,
 * `normalize_advantages`, `allow_training_without_logprobs`, ...) are accepted and have no effect.
 *
 * ## Determinism
 * Nothing here reads a clock or a random source except `tokens_per_second` (the injectable `clock`): the same
 * weights, optimiser state and inputs give the same bits.
 *
 * @since 0.1.0
 */
import type { ExperimentalConfig } from "../../api/TrainingJob.js"
import type { TrainingSequence } from "./LanguageModel.js"
import { type AdamState, adamStep } from "./Optimizer.js"
import type { Policy } from "./policy/Policy.js"
import {
  balanceAdvantages,
  groupAdvantages,
  klEstimate,
  type LossSettings,
  lossSettings,
  type SequenceLossInput,
  sequenceLoss,
  trajectoryWeights
} from "./RlLoss.js"

/**
 * The learning rate of RL steps when neither the config nor the caller gives one (Adam on the ~100k-parameter
 * policy from random weights; see "Learning rate").
 */
export const DEFAULT_RL_LEARNING_RATE = 3e-3

/** The learning rate of SFT steps when none is given. */
export const DEFAULT_SFT_LEARNING_RATE = 1e-3

/** Tokens per gradient step (before prefix sharing) when neither a batch size nor `packed_sequence_length` is given. */
export const DEFAULT_MAX_BATCH_TOKENS = 16_384

/** Tokens per SFT step with `batch_size: "auto"`. */
export const AUTO_SFT_BATCH_TOKENS = 4096

/** One trajectory of a group: its tokens (mask 1 on sampled tokens, with their recorded logprobs) and reward. */
export interface RlItem {
  /** The tokens. */
  readonly sequence: TrainingSequence
  /** The rollout's other conversations (`additional_histories`), trained with the same advantage. */
  readonly additional?: ReadonlyArray<TrainingSequence> | undefined
  /** The reward. */
  readonly reward: number
}

/** An item's sequences: its conversation, then its additional histories. */
const sequencesOf = (item: RlItem): ReadonlyArray<TrainingSequence> =>
  item.additional === undefined ? [item.sequence] : [item.sequence, ...item.additional]

/** A trajectory group: rollouts of one scenario, and how many rollouts failed. */
export interface RlGroup {
  /** The trajectories. */
  readonly items: ReadonlyArray<RlItem>
  /** Rollouts that raised instead of producing a trajectory. */
  readonly exceptions?: number | undefined
}

/** Options of `trainRl` beyond `experimental_config`. */
export interface RlOptions {
  /** Trajectories per gradient step (default: by tokens, see the module comment). */
  readonly batchSize?: number | undefined
  /** Tokens per gradient step when no batch size is given (default `packed_sequence_length` or 16,384). */
  readonly maxBatchTokens?: number | undefined
  /** The learning rate when the config gives none (default `DEFAULT_RL_LEARNING_RATE`; locally, the base model's). */
  readonly defaultLearningRate?: number | undefined
  /** Multiplies the learning rate (default 1); see the module comment. */
  readonly learningRateScale?: number | undefined
  /** Milliseconds, for `tokens_per_second` only (default `performance.now`). */
  readonly clock?: (() => number) | undefined
  /** Called after each gradient step. */
  readonly onStep?: ((metrics: RlStepMetrics, index: number) => void) | undefined
}

/** The metrics of one RL gradient step (names as the `gradient_step` event's data). */
export interface RlStepMetrics {
  /** The loss of the step. */
  readonly loss: number
  /** The mean (weighted) entropy of the next-token distribution at the step's assistant tokens. */
  readonly entropy: number
  /** The mean (weighted) KL estimate of the current policy against the sampling policy (recorded logprobs). */
  readonly kl_div: number
  /** The gradient's global norm before clipping. */
  readonly grad_norm: number
  /** The learning rate applied. */
  readonly learning_rate: number
  /** The mean reward over every trajectory of the job. */
  readonly reward: number
  /** The mean over groups (of more than one trajectory) of the within-group population std of rewards. */
  readonly reward_std_dev: number
  /** Exceptions / (trajectories + exceptions), over the job. */
  readonly exception_rate: number
  /** The trajectories in this step. */
  readonly num_trajectories: number
  /** The assistant tokens in this step. */
  readonly num_trainable_tokens: number
  /** Tokens (before prefix sharing) processed per second in this step. */
  readonly tokens_per_second: number
  /** The groups of the job. */
  readonly num_groups: number
  /** The groups with differing rewards (trained on). */
  readonly num_groups_trainable: number
  /** The groups skipped for equal rewards. */
  readonly num_groups_skipped: number
}

/** What `trainRl` did. */
export interface RlResult {
  /** One entry per gradient step (none when no group was trainable). */
  readonly steps: ReadonlyArray<RlStepMetrics>
  /** The mean reward over every trajectory. */
  readonly reward: number
  /** See `RlStepMetrics.reward_std_dev`. */
  readonly rewardStdDev: number
  /** See `RlStepMetrics.exception_rate`. */
  readonly exceptionRate: number
  /** The trajectories of the job. */
  readonly numTrajectories: number
  /** The groups with differing rewards. */
  readonly groupsTrainable: number
  /** The groups skipped for equal rewards. */
  readonly groupsSkipped: number
}

/** A trajectory prepared for training. */
interface Prepared {
  /** The trajectory it belongs to (its conversation and its additional histories share one). */
  readonly trajectory: number
  readonly ids: Int32Array
  /** The mask with position 0 cleared (a first token has no prediction to train). */
  readonly mask: Uint8Array
  readonly sampled: Float32Array
  readonly tokens: number
  advantage: number
  weight: number
  old: Float64Array
  original: Float32Array | undefined
}

const trainableMask = (s: TrainingSequence): Uint8Array => {
  const mask = new Uint8Array(s.ids.length)
  for (let t = 1; t < s.ids.length; t++) mask[t] = s.mask[t] === 1 ? 1 : 0
  return mask
}

const countOnes = (mask: Uint8Array): number => {
  let n = 0
  for (let t = 0; t < mask.length; t++) n += mask[t]!
  return n
}

/** Cut items into consecutive chunks of `size` items, or of at most `maxTokens` tokens (at least one item each). */
const chunk = <A>(
  items: ReadonlyArray<A>,
  size: number | undefined,
  maxTokens: number,
  tokensOf: (a: A) => number
): Array<Array<A>> => {
  const out: Array<Array<A>> = []
  let current: Array<A> = []
  let tokens = 0
  for (const item of items) {
    const n = tokensOf(item)
    const full = size !== undefined ? current.length >= size : current.length > 0 && tokens + n > maxTokens
    if (full) {
      out.push(current)
      current = []
      tokens = 0
    }
    current.push(item)
    tokens += n
  }
  if (current.length > 0) out.push(current)
  return out
}

/** Whether a sequence has a token to learn (position 0 has no prediction, so it never is one). */
export const hasTrainableTokens = (s: TrainingSequence): boolean => {
  for (let t = 1; t < s.mask.length; t++) if (s.mask[t] === 1) return true
  return false
}

/** The tokens per RL gradient step: `packed_sequence_length`, else the option, else the default. */
const maxBatchTokensOf = (config: ExperimentalConfig | null | undefined, options: RlOptions): number =>
  config?.packed_sequence_length ?? options.maxBatchTokens ?? DEFAULT_MAX_BATCH_TOKENS

/**
 * The number of gradient steps `trainRl` takes on these groups with this config and options (what a job's
 * `training_started.num_sequences` announces): the learnable trajectories of the groups whose rewards
 * differ, cut into batches as `trainRl` cuts them.
 */
export const rlStepCount = (
  groups: ReadonlyArray<RlGroup>,
  config?: ExperimentalConfig | null,
  options: RlOptions = {}
): number => {
  const { scaleRewards } = lossSettings(config)
  const lengths: Array<number> = []
  for (const group of groups) {
    if (
      !groupAdvantages(
        group.items.map((item) => item.reward),
        scaleRewards
      ).trainable
    )
      continue
    for (const item of group.items) {
      for (const sequence of sequencesOf(item)) if (hasTrainableTokens(sequence)) lengths.push(sequence.ids.length)
    }
  }
  return chunk(lengths, options.batchSize, maxBatchTokensOf(config, options), (n) => n).length
}

/**
 * The batches `trainSft` makes of these sequences: those with a token to learn, in order, `batchSize` per
 * batch, or by `AUTO_SFT_BATCH_TOKENS` tokens with `"auto"`.
 */
export const sftBatches = <S extends TrainingSequence>(
  sequences: ReadonlyArray<S>,
  batchSize: number | "auto"
): Array<Array<S>> =>
  chunk(
    sequences.filter(hasTrainableTokens),
    batchSize === "auto" ? undefined : batchSize,
    AUTO_SFT_BATCH_TOKENS,
    (s) => s.ids.length
  )

const now = (): number => performance.now()

/**
 * RL on trajectory groups, with the knobs of `experimental_config` (unknown keys ignored). Updates the policy's
 * parameters and the optimiser state in place.
 */
export const trainRl = (
  policy: Policy,
  optimizer: AdamState,
  groups: ReadonlyArray<RlGroup>,
  config?: ExperimentalConfig | null,
  options: RlOptions = {}
): RlResult => {
  const settings = lossSettings(config)
  const clock = options.clock ?? now
  const learningRate =
    (config?.learning_rate ?? options.defaultLearningRate ?? DEFAULT_RL_LEARNING_RATE) *
    (options.learningRateScale ?? 1)
  if (options.batchSize !== undefined && !(Number.isInteger(options.batchSize) && options.batchSize > 0)) {
    throw new RangeError(`batch size must be a positive integer, got ${options.batchSize}`)
  }

  // Job-level metrics, over every group.
  let rewardSum = 0
  let numTrajectories = 0
  let exceptions = 0
  let stdSum = 0
  let stdGroups = 0
  let groupsTrainable = 0
  let groupsSkipped = 0
  const prepared: Array<Prepared> = []
  for (const group of groups) {
    const rewards = group.items.map((item) => item.reward)
    for (const r of rewards) {
      if (!Number.isFinite(r)) throw new RangeError(`a trajectory's reward is not a finite number: ${r}`)
      rewardSum += r
    }
    numTrajectories += rewards.length
    exceptions += group.exceptions ?? 0
    const adv = groupAdvantages(rewards, settings.scaleRewards)
    if (rewards.length > 1) {
      stdSum += adv.std
      stdGroups++
    }
    if (!adv.trainable) {
      groupsSkipped++
      continue
    }
    groupsTrainable++
    group.items.forEach((item, i) => {
      for (const s of sequencesOf(item)) {
        if (s.mask.length !== s.ids.length || s.logprobs.length !== s.ids.length) {
          throw new RangeError("a training sequence's ids, mask and logprobs differ in length")
        }
        const mask = trainableMask(s)
        const tokens = countOnes(mask)
        if (tokens === 0) continue
        prepared.push({
          trajectory: numTrajectories - rewards.length + i,
          ids: s.ids,
          mask,
          sampled: s.logprobs,
          tokens,
          advantage: adv.advantages[i]!,
          weight: 0,
          old: Float64Array.from(s.logprobs),
          original: undefined
        })
      }
    })
  }
  const reward = numTrajectories > 0 ? rewardSum / numTrajectories : 0
  const rewardStdDev = stdGroups > 0 ? stdSum / stdGroups : 0
  const exceptionRate = numTrajectories + exceptions > 0 ? exceptions / (numTrajectories + exceptions) : 0
  const summary = {
    reward,
    rewardStdDev,
    exceptionRate,
    numTrajectories,
    groupsTrainable,
    groupsSkipped
  }
  if (prepared.length === 0) return { steps: [], ...summary }

  // Token weights and advantage balance, over the job.
  const counts = prepared.map((p) => p.tokens)
  const weights = trajectoryWeights(counts)
  const balanced = balanceAdvantages(
    prepared.map((p) => p.advantage),
    counts,
    weights,
    settings.advantageBalance
  )
  prepared.forEach((p, i) => {
    p.weight = weights[i]!
    p.advantage = balanced[i]!
  })

  const batches = chunk(prepared, options.batchSize, maxBatchTokensOf(config, options), (p) => p.ids.length)

  // precalculate_logprobs: the old logprobs are the current policy's, the sampled ones become the originals.
  if (config?.precalculate_logprobs === true) {
    for (const batch of batches) {
      const out = policy.forwardBatch(
        batch.map((p) => p.ids),
        batch.map((p) => p.mask),
        { keepActivations: false }
      )
      batch.forEach((p, i) => {
        p.original = p.sampled
        p.old = out.logprobs[i]!.slice()
      })
    }
  }

  const steps: Array<RlStepMetrics> = []
  for (const batch of batches) {
    const start = clock()
    const step = rlStep(policy, optimizer, batch, settings, learningRate)
    const seconds = (clock() - start) / 1000
    let tokens = 0
    for (const p of batch) tokens += p.ids.length
    const metrics: RlStepMetrics = {
      ...step,
      reward,
      reward_std_dev: rewardStdDev,
      exception_rate: exceptionRate,
      num_trajectories: new Set(batch.map((item) => item.trajectory)).size,
      tokens_per_second: seconds > 0 ? tokens / seconds : 0,
      num_groups: groups.length,
      num_groups_trainable: groupsTrainable,
      num_groups_skipped: groupsSkipped
    }
    steps.push(metrics)
    options.onStep?.(metrics, steps.length - 1)
  }
  return { steps, ...summary }
}

/** One RL gradient step on a mini-batch. */
const rlStep = (
  policy: Policy,
  optimizer: AdamState,
  batch: ReadonlyArray<Prepared>,
  settings: LossSettings,
  learningRate: number
): Pick<RlStepMetrics, "loss" | "entropy" | "kl_div" | "grad_norm" | "learning_rate" | "num_trainable_tokens"> => {
  const out = policy.forwardBatch(
    batch.map((p) => p.ids),
    batch.map((p) => p.mask)
  )
  let lossSum = 0
  let tokens = 0
  let entropySum = 0
  let klSum = 0
  const grads: Array<Float64Array> = []
  batch.forEach((p, i) => {
    const lNew = out.logprobs[i]!
    const ent = out.entropies[i]!
    const input: SequenceLossInput = {
      newLogprobs: lNew,
      oldLogprobs: p.old,
      originalLogprobs: p.original,
      mask: p.mask,
      advantage: p.advantage,
      weight: p.weight
    }
    const o = sequenceLoss(input, settings)
    lossSum += o.loss
    tokens += o.tokens
    for (let t = 0; t < p.mask.length; t++) {
      if (p.mask[t] !== 1) continue
      entropySum += ent[t]! * p.weight
      const ref = p.sampled[t]!
      if (!Number.isNaN(ref)) klSum += klEstimate(ref, lNew[t]!) * p.weight
    }
    grads.push(o.grad)
  })
  const norm = 1 / (tokens + 1e-6)
  for (const g of grads) for (let t = 0; t < g.length; t++) g[t] = g[t]! * norm
  policy.zeroGrads()
  policy.backwardBatch(grads)
  const { gradNorm } = adamStep(policy.params, policy.grads, optimizer, learningRate)
  return {
    loss: lossSum * norm,
    entropy: entropySum * norm,
    kl_div: klSum * norm,
    grad_norm: gradNorm,
    learning_rate: learningRate,
    num_trainable_tokens: tokens
  }
}

/** Options of `trainSft`. */
export interface SftOptions {
  /** Sequences per step, or `"auto"` (as many as fit in `AUTO_SFT_BATCH_TOKENS` tokens); default `"auto"`. */
  readonly batchSize?: number | "auto" | undefined
  /** One learning rate, or one per step (the last repeats); default `DEFAULT_SFT_LEARNING_RATE`. */
  readonly learningRate?: number | ReadonlyArray<number> | undefined
  /** Milliseconds, for `tokens_per_second` only (default `performance.now`). */
  readonly clock?: (() => number) | undefined
  /** Called after each gradient step. */
  readonly onStep?: ((metrics: SftStepMetrics, index: number) => void) | undefined
}

/** The metrics of one SFT gradient step. */
export interface SftStepMetrics {
  /** The mean cross-entropy (nats per token) over the step's tokens to learn. */
  readonly loss: number
  /** The gradient's global norm before clipping. */
  readonly grad_norm: number
  /** The learning rate applied. */
  readonly learning_rate: number
  /** The sequences in this step. */
  readonly num_trajectories: number
  /** The tokens learned in this step. */
  readonly num_trainable_tokens: number
  /** Tokens (before prefix sharing) processed per second in this step. */
  readonly tokens_per_second: number
}

/**
 * SFT: one pass over `sequences` in order, a gradient step per batch, minimising the mean cross-entropy of
 * the tokens whose mask is 1 (the assistant turns to learn, chosen by the caller: all, or the last).
 */
export const trainSft = (
  policy: Policy,
  optimizer: AdamState,
  sequences: ReadonlyArray<TrainingSequence>,
  options: SftOptions = {}
): ReadonlyArray<SftStepMetrics> => {
  const clock = options.clock ?? now
  const size = options.batchSize ?? "auto"
  if (size !== "auto" && !(Number.isInteger(size) && size > 0)) {
    throw new RangeError(`batch_size must be a positive integer or "auto", got ${size}`)
  }
  const rates = options.learningRate ?? DEFAULT_SFT_LEARNING_RATE
  if (typeof rates !== "number" && rates.length === 0) throw new RangeError("learning_rate: an empty list")
  const batches = sftBatches(sequences, size).map((batch) => batch.map((s) => ({ ids: s.ids, mask: trainableMask(s) })))
  const steps: Array<SftStepMetrics> = []
  batches.forEach((batch, index) => {
    const learningRate = typeof rates === "number" ? rates : (rates[Math.min(index, rates.length - 1)] ?? 0)
    const start = clock()
    const out = policy.forwardBatch(
      batch.map((s) => s.ids),
      batch.map((s) => s.mask)
    )
    let tokens = 0
    let nll = 0
    batch.forEach((s, i) => {
      const lp = out.logprobs[i]!
      for (let t = 0; t < s.mask.length; t++) {
        if (s.mask[t] !== 1) continue
        tokens++
        nll -= lp[t]!
      }
    })
    const g = -1 / tokens
    policy.zeroGrads()
    policy.backwardBatch(batch.map((s) => Float64Array.from(s.mask, (m) => (m === 1 ? g : 0))))
    const { gradNorm } = adamStep(policy.params, policy.grads, optimizer, learningRate)
    const seconds = (clock() - start) / 1000
    let total = 0
    for (const s of batch) total += s.ids.length
    const metrics: SftStepMetrics = {
      loss: nll / tokens,
      grad_norm: gradNorm,
      learning_rate: learningRate,
      num_trajectories: batch.length,
      num_trainable_tokens: tokens,
      tokens_per_second: seconds > 0 ? total / seconds : 0
    }
    steps.push(metrics)
    options.onStep?.(metrics, index)
  })
  return steps
}
