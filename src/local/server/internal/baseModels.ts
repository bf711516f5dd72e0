/**
 * The base models the engine serves, each with its shape and the seed of its initial weights: a base model's
 * step 0 is `Policy.create(config, { seed })`, the same weights whether it is served by name or stored as the step 0
 * checkpoint of a new model (so a trained model at step 0 answers exactly as its base model does). The pretrained
 * base models' step 0 is the weights shipped in the package (`assets/base-2k.erlp` and `assets/base-wide-2k.erlp`,
 * made by `scripts/pretrain.ts`), read on first use and checked against the SHA-256 written beside them.
 *
 * Each base model also carries its default learning rates: what a job on a model trained from it applies when
 * the job's config gives no `learning_rate` (see `Trainer`'s "Learning rate"). The random-init models take the
 * engine's defaults; the pretrained ones smaller RL rates, so that RL teaches the task without unlearning what
 * pretraining taught.
 */
import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import { loadCheckpoint, saveCheckpoint } from "../../engine/policy/Checkpoint.js"
import { Policy } from "../../engine/policy/Policy.js"
import { DEFAULT_POLICY_CONFIG, type PolicyConfig } from "../../engine/policy/PolicyConfig.js"
import { DEFAULT_RL_LEARNING_RATE, DEFAULT_SFT_LEARNING_RATE } from "../../engine/Trainer.js"

/** The base model every fresh backend serves. */
export const BASE_MODEL = "effect-rl/tiny"

/**
 * The base model with a 2,048-token context, for tool agents: a request with tools (their schemas in the
 * prompt), past calls and their results does not fit the default 512 tokens of a byte-level model.
 */
export const LONG_CONTEXT_MODEL = "effect-rl/tiny-2k"

/**
 * The pretrained base model: the shape of `effect-rl/tiny-2k`, pretrained on conversations in the chat
 * template (tool calls and answers that use their results, JSON, yes/no, choices, copying from the prompt), so
 * it writes ASCII words, numbers and JSON from the start. The random-init models stay for tests that need them.
 */
export const PRETRAINED_MODEL = "effect-rl/base-2k"

/** Where the pretrained base model's weights ship (`<file>.sha256` beside them holds their checksum). */
export const PRETRAINED_WEIGHTS_URL: URL = new URL("../../../../assets/base-2k.erlp", import.meta.url)

/**
 * The wider pretrained base model: twice the width of `effect-rl/base-2k` (96, 4 heads of 24, MLP 384; 470k
 * parameters) pretrained on the same corpus for 2.6x the tokens (`scripts/pretrain.ts --run base-wide-2k`, in
 * base-2k's pretraining time on the WebAssembly kernels). It copies a tool's value into a JSON string or integer
 * nearly always where base-2k rarely does, and RL from it learns lookup agents further (docs/training-loop.md);
 * a token costs about 3.5x base-2k's arithmetic.
 */
export const WIDE_PRETRAINED_MODEL = "effect-rl/base-wide-2k"

/** Where the wider pretrained base model's weights ship (`<file>.sha256` beside them holds their checksum). */
export const WIDE_PRETRAINED_WEIGHTS_URL: URL = new URL("../../../../assets/base-wide-2k.erlp", import.meta.url)

/** The learning rates a job applies when its config gives none. */
export interface LearningRates {
  /** Of RL jobs (before the job worker's `learningRateScale`). */
  readonly rl: number
  /** Of SFT jobs. */
  readonly sft: number
}

/** The engine's defaults, made for random-init models: they must learn everything, and fast. */
const ENGINE_RATES: LearningRates = { rl: DEFAULT_RL_LEARNING_RATE, sft: DEFAULT_SFT_LEARNING_RATE }

/**
 * The pretrained base model's. With RL at 1e-3, `bench/base.ts`'s shop agent (48 rollouts a step, five shop
 * seeds) reached a mean reward of 0.8 within 20 steps in every run, at 5e-4 in four of five, and ended higher
 * (the last three steps' mean reward 0.80 against 0.73, right answers 0.69 against 0.60); the engine's 3e-3
 * unlearned copying the tool's result (right 0.29 -> 0.00 in 20 steps). SFT keeps the engine's 1e-3: on shop
 * demonstrations it learned them and kept copying as 5e-4 did (3e-3 lost some).
 */
const PRETRAINED_RATES: LearningRates = { rl: 1e-3, sft: DEFAULT_SFT_LEARNING_RATE }

/**
 * The wider base's. With RL at 1e-3 (base-2k's) its first step collapsed it: from right answers 0.63-0.75 to
 * every group's rollouts alike (entropy 0.03) and one tool called for every question (0.50), never left (two
 * seeds). `bench:rl-holds`'s shop agent, seeds 1-10, on its fixed set: at 3e-4 the goal (last three >= 0.8, no
 * step below 0.6 after the first 0.8) in eight seeds of ten, two never learning (0.65, 0.46); at 2e-4 in nine,
 * every seed's last three 0.92-1.00 (one dip to 0.46, recovered). The directory agent alike at both (five seeds:
 * 0.41-0.93 and 0.42-0.92). (Likely why a wider base wants a smaller rate: Adam moves every weight by about the
 * rate, and a wider layer sums more moved weights.) SFT: 5e-4, half the engine's, by the same reasoning (not
 * measured).
 */
const WIDE_PRETRAINED_RATES: LearningRates = { rl: 2e-4, sft: 5e-4 }

/** A base model: a shape and the seed of its random initial weights, or weights shipped in a file. */
type BaseModel = (
  | { readonly seed: number; readonly config: PolicyConfig }
  | { readonly weights: URL; readonly config: PolicyConfig }
) & { readonly learningRates: LearningRates }

/** Each base model's shape, the seed of its initial weights or the file they ship in, and its learning rates. */
const models: ReadonlyMap<string, BaseModel> = new Map<string, BaseModel>([
  [BASE_MODEL, { seed: 0, config: DEFAULT_POLICY_CONFIG, learningRates: ENGINE_RATES }],
  [
    LONG_CONTEXT_MODEL,
    { seed: 0, config: { ...DEFAULT_POLICY_CONFIG, contextLength: 2048 }, learningRates: ENGINE_RATES }
  ],
  [
    PRETRAINED_MODEL,
    {
      weights: PRETRAINED_WEIGHTS_URL,
      config: { ...DEFAULT_POLICY_CONFIG, contextLength: 2048 },
      learningRates: PRETRAINED_RATES
    }
  ],
  [
    WIDE_PRETRAINED_MODEL,
    {
      weights: WIDE_PRETRAINED_WEIGHTS_URL,
      config: { ...DEFAULT_POLICY_CONFIG, contextLength: 2048, dModel: 96, dFf: 384 },
      learningRates: WIDE_PRETRAINED_RATES
    }
  ]
])

/** The bytes of shipped weights, checked against the SHA-256 in the `.sha256` file beside them. */
const readShipped = (url: URL): Uint8Array => {
  const weights = new Uint8Array(readFileSync(url))
  const expected = readFileSync(new URL(`${url.href}.sha256`), "utf8").split(/\s+/)[0]
  const actual = createHash("sha256").update(weights).digest("hex")
  if (actual !== expected) throw new Error(`${url.pathname}: SHA-256 ${actual}, expected ${expected}`)
  return weights
}

/** A base model's initial weights as checkpoint bytes. */
const weightsOf = (model: BaseModel): Uint8Array =>
  "weights" in model ? readShipped(model.weights) : saveCheckpoint(Policy.create(model.config, { seed: model.seed }))

/** The names of the base models, in order. */
export const baseModelNames: ReadonlyArray<string> = [...models.keys()]

/** Whether a name is a base model's. */
export const isBaseModel = (name: string): boolean => models.has(name)

/**
 * The learning rates a job on a model trained from this base model applies when its config gives none
 * (undefined for an unknown name: the engine's defaults apply).
 */
export const learningRatesOf = (name: string): LearningRates | undefined => models.get(name)?.learningRates

const policies = new Map<string, Policy>()
const bytes = new Map<string, Uint8Array>()

/** A base model's initial policy, made once (undefined for an unknown name). */
export const basePolicy = (name: string): Policy | undefined => {
  const model = models.get(name)
  if (model === undefined) return undefined
  let policy = policies.get(name)
  if (policy === undefined) {
    policy =
      "weights" in model
        ? loadCheckpoint(initialWeights(name)!).policy
        : Policy.create(model.config, { seed: model.seed })
    policies.set(name, policy)
  }
  return policy
}

/** A base model's initial weights as checkpoint bytes, made once (undefined for an unknown name). */
export const initialWeights = (name: string): Uint8Array | undefined => {
  let out = bytes.get(name)
  if (out === undefined) {
    const model = models.get(name)
    if (model === undefined) return undefined
    out = weightsOf(model)
    bytes.set(name, out)
  }
  return out
}
