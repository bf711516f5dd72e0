/**
 * The base models the engine serves, each with its shape and the seed of its initial weights: a base model's
 * step 0 is `Policy.create(config, { seed })`, the same weights whether it is served by name or stored as the step 0
 * checkpoint of a new model (so a trained model at step 0 answers exactly as its base model does).
 */
import { saveCheckpoint } from "../../engine/policy/Checkpoint.js"
import { Policy } from "../../engine/policy/Policy.js"
import { DEFAULT_POLICY_CONFIG, type PolicyConfig } from "../../engine/policy/PolicyConfig.js"

/** The base model every fresh backend serves. */
export const BASE_MODEL = "effect-rl/tiny"

/**
 * The base model with a 2,048-token context, for tool agents: a request with tools (their schemas in the
 * prompt), past calls and their results does not fit the default 512 tokens of a byte-level model.
 */
export const LONG_CONTEXT_MODEL = "effect-rl/tiny-2k"

/** Each base model's shape and the seed of its initial weights. */
const models: ReadonlyMap<string, { readonly seed: number; readonly config: PolicyConfig }> = new Map([
  [BASE_MODEL, { seed: 0, config: DEFAULT_POLICY_CONFIG }],
  [LONG_CONTEXT_MODEL, { seed: 0, config: { ...DEFAULT_POLICY_CONFIG, contextLength: 2048 } }]
])

/** The names of the base models, in order. */
export const baseModelNames: ReadonlyArray<string> = [...models.keys()]

/** Whether a name is a base model's. */
export const isBaseModel = (name: string): boolean => models.has(name)

const policies = new Map<string, Policy>()
const bytes = new Map<string, Uint8Array>()

/** A base model's initial policy, made once (undefined for an unknown name). */
export const basePolicy = (name: string): Policy | undefined => {
  const model = models.get(name)
  if (model === undefined) return undefined
  let policy = policies.get(name)
  if (policy === undefined) {
    policy = Policy.create(model.config, { seed: model.seed })
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
    out = saveCheckpoint(Policy.create(model.config, { seed: model.seed }))
    bytes.set(name, out)
  }
  return out
}
