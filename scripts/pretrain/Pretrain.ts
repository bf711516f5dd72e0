/**
 * Pretraining of the embedded engine's base model on its own corpus (`Corpus.ts`): next-token prediction over
 * conversations, with the engine's policy, its batched forward and backward passes and its AdamW step.
 *
 * Deterministic: one thread, a fixed order of operations, the corpus and the initial weights drawn from the
 * seed. The same options give the same weights bit for bit, so the shipped file is reproducible, and a test can
 * re-run the first steps and compare their checksum with the one the full run recorded.
 *
 * The learned position embeddings start as sinusoids (amplitude 0.5, the scale of the token embeddings) rather
 * than the engine's independent noise: neighbouring positions start alike and an offset is the same rotation
 * at every position, so attention to "the previous token" (what copying is built on) holds at positions the
 * run rarely trains.
 *
 * A step is about 1,024 tokens (many small steps learn more per token than fewer large ones, at this size):
 * fifteen steps in sixteen, a batch of whole conversations, each its own sequence from position 0 (as an agent's
 * prompt is, and attention costs only the conversation's own length); the sixteenth, one sequence of 2,048
 * tokens packed with conversations one after another, so that every learned position up to the context length
 * is trained. Assistant tokens weigh 1 in the loss, the rest (tools, questions, results) 0.25: the model learns
 * to read them, and mostly to answer.
 *
 * The shipped run (`SHIPPED_RUN`): 1,500 steps, 1.28M tokens, 28 minutes on one core of a loaded 2-core machine
 * (770 tokens/s; 1,000-1,400 when the machine was otherwise quiet).
 */
import { createHash } from "node:crypto"
import { adamStep, makeAdamState } from "../../src/local/engine/Optimizer.js"
import { saveCheckpoint } from "../../src/local/engine/policy/Checkpoint.js"
import { Policy } from "../../src/local/engine/policy/Policy.js"
import {
  DEFAULT_POLICY_CONFIG,
  type PolicyConfig,
  parameterTensors
} from "../../src/local/engine/policy/PolicyConfig.js"
import { Corpus, type RenderedConversation } from "./Corpus.js"

/** What a pretraining run is: every field the weights depend on. */
export interface PretrainOptions {
  /** The seed of the initial weights and of the corpus. */
  readonly seed: number
  /** The optimiser steps. */
  readonly steps: number
  /** The model's shape. */
  readonly config: PolicyConfig
  /** The peak learning rate (after warm-up; cosine decay to a tenth of it at the last step). */
  readonly learningRate: number
  /** The steps of linear warm-up. */
  readonly warmupSteps: number
  /** The loss weight of tokens outside assistant turns (assistant tokens weigh 1). */
  readonly contextWeight: number
}

/** The base model's shape: the engine's default policy with a 2,048-token context (as `effect-rl/tiny-2k`). */
export const BASE_CONFIG: PolicyConfig = { ...DEFAULT_POLICY_CONFIG, contextLength: 2048 }

/** The run that made the shipped weights. */
export const SHIPPED_RUN: PretrainOptions = {
  seed: 1,
  steps: 1500,
  config: BASE_CONFIG,
  learningRate: 4e-3,
  warmupSteps: 50,
  contextWeight: 0.25
}

/** The steps after which a run records the checksum that the test reproduces. */
export const PREFIX_STEPS = 2

/** What one step did. */
export interface StepReport {
  /** The step, from 1. */
  readonly step: number
  /** The mean negative log-likelihood (nats per token) of the step's assistant tokens. */
  readonly assistantLoss: number
  /** The mean negative log-likelihood of the step's other tokens. */
  readonly contextLoss: number
  /** The tokens of the step's sequences. */
  readonly tokens: number
  /** The step's learning rate. */
  readonly learningRate: number
  /** The gradient's global norm before clipping. */
  readonly gradNorm: number
}

/** The learning rate of a step (1-based): linear warm-up, then cosine decay to a tenth. */
export const learningRateAt = (options: PretrainOptions, step: number): number => {
  if (step <= options.warmupSteps) return (options.learningRate * step) / options.warmupSteps
  const t = (step - options.warmupSteps) / Math.max(1, options.steps - options.warmupSteps)
  return options.learningRate * (0.1 + 0.9 * 0.5 * (1 + Math.cos(Math.PI * Math.min(1, t))))
}

/** The tokens of a step's batch of separate conversations. */
export const STEP_TOKENS = 1024

/** The length of a packed step's sequence: the context length. */
export const PACKED_TOKENS = 2048

/** Whether a step (1-based) trains on one packed sequence of `PACKED_TOKENS` rather than separate conversations. */
export const isPackedStep = (step: number): boolean => step % 16 === 0

/** Packs a corpus's conversations into sequences of at most a given length, in order. */
export class Packer {
  private pending: RenderedConversation | undefined
  constructor(private readonly corpus: Corpus) {}
  /** The next conversations, each a sequence, while their tokens add up to at most `tokens` (at least one). */
  separate(tokens: number): Array<{ readonly ids: Int32Array; readonly assistant: Uint8Array }> {
    const out: Array<{ readonly ids: Int32Array; readonly assistant: Uint8Array }> = []
    let total = 0
    for (;;) {
      const c = this.pending ?? this.corpus.nextRendered()
      this.pending = undefined
      if (out.length > 0 && total + c.ids.length > tokens) {
        this.pending = c
        return out
      }
      const n = Math.min(c.ids.length, tokens)
      out.push({ ids: Int32Array.from(c.ids.slice(0, n)), assistant: c.assistant.slice(0, n) })
      total += n
    }
  }
  /** The next sequence: whole conversations while they fit (a first one longer than `length` is cut). */
  next(length: number): { readonly ids: Int32Array; readonly assistant: Uint8Array } {
    const ids: Array<number> = []
    const assistant: Array<number> = []
    for (;;) {
      const c = this.pending ?? this.corpus.nextRendered()
      this.pending = undefined
      if (ids.length + c.ids.length > length) {
        if (ids.length === 0) {
          for (let i = 0; i < length; i++) {
            ids.push(c.ids[i]!)
            assistant.push(c.assistant[i]!)
          }
        } else this.pending = c
        break
      }
      for (let i = 0; i < c.ids.length; i++) {
        ids.push(c.ids[i]!)
        assistant.push(c.assistant[i]!)
      }
    }
    return { ids: Int32Array.from(ids), assistant: Uint8Array.from(assistant) }
  }
}

/** Overwrite a policy's position embeddings with sinusoids: dimension 2k is sin, 2k + 1 cos, of p / 10000^(2k/d). */
export const sinusoidalPositions = (policy: Policy): void => {
  const d = policy.config.dModel
  const posEmb = parameterTensors(policy.config).find((t) => t.name === "posEmb")!
  for (let p = 0; p < policy.config.contextLength; p++) {
    for (let k = 0; 2 * k < d; k++) {
      const angle = p / 10000 ** ((2 * k) / d)
      policy.params[posEmb.offset + p * d + 2 * k] = 0.5 * Math.sin(angle)
      if (2 * k + 1 < d) policy.params[posEmb.offset + p * d + 2 * k + 1] = 0.5 * Math.cos(angle)
    }
  }
}

/** The SHA-256 of bytes, in hex. */
export const sha256 = (bytes: Uint8Array): string => createHash("sha256").update(bytes).digest("hex")

/**
 * Run pretraining: `onStep` sees each step's report and the policy after it (to log, to checksum a prefix, to
 * save snapshots). Stops after `stopAfter` steps when given (the schedule is still that of `steps`).
 */
export const pretrain = (
  options: PretrainOptions,
  onStep: (report: StepReport, policy: Policy) => void = () => {},
  stopAfter: number = options.steps
): Policy => {
  const policy = Policy.create(options.config, { seed: options.seed })
  sinusoidalPositions(policy)
  const adam = makeAdamState(policy.parameterCount)
  const packer = new Packer(new Corpus(options.seed))
  for (let step = 1; step <= Math.min(stopAfter, options.steps); step++) {
    const sequences = isPackedStep(step) ? [packer.next(PACKED_TOKENS)] : packer.separate(STEP_TOKENS)
    const want = sequences.map((s) => {
      const w = new Uint8Array(s.ids.length).fill(1)
      w[0] = 0
      return w
    })
    let total = 0
    for (const s of sequences) {
      for (let t = 1; t < s.ids.length; t++) total += s.assistant[t] === 1 ? 1 : options.contextWeight
    }
    policy.zeroGrads()
    const out = policy.forwardBatch(
      sequences.map((s) => s.ids),
      want
    )
    let aLoss = 0
    let aCount = 0
    let cLoss = 0
    let cCount = 0
    const dLogprobs = sequences.map((s, k) => {
      const lp = out.logprobs[k]!
      const g = new Float64Array(s.ids.length)
      for (let t = 1; t < s.ids.length; t++) {
        if (s.assistant[t] === 1) {
          aLoss -= lp[t]!
          aCount++
          g[t] = -1 / total
        } else {
          cLoss -= lp[t]!
          cCount++
          g[t] = -options.contextWeight / total
        }
      }
      return g
    })
    policy.backwardBatch(dLogprobs)
    const learningRate = learningRateAt(options, step)
    const { gradNorm } = adamStep(policy.params, policy.grads, adam, learningRate)
    onStep(
      {
        step,
        assistantLoss: aLoss / Math.max(1, aCount),
        contextLoss: cLoss / Math.max(1, cCount),
        tokens: out.tokens,
        learningRate,
        gradNorm
      },
      policy
    )
  }
  return policy
}

/** The checksum of a policy's weights as shipped (a checkpoint of the parameters, without optimiser state). */
export const weightsChecksum = (policy: Policy): string => sha256(saveCheckpoint(policy))
