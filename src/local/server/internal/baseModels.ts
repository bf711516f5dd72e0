/**
 * The base models the engine serves, each with the seed of its initial weights: a base model's step 0 is
 * `Policy.create(undefined, { seed })`, the same weights whether it is served by name or stored as the step 0
 * checkpoint of a new model (so a trained model at step 0 answers exactly as its base model does).
 */
import { Policy, saveCheckpoint } from "../../engine/Policy.js"

/** The base model every fresh backend serves. */
export const BASE_MODEL = "effect-rl/tiny"

/** The seed of each base model's initial weights. */
const seeds: ReadonlyMap<string, number> = new Map([[BASE_MODEL, 0]])

/** The names of the base models, in order. */
export const baseModelNames: ReadonlyArray<string> = [...seeds.keys()]

/** Whether a name is a base model's. */
export const isBaseModel = (name: string): boolean => seeds.has(name)

const policies = new Map<string, Policy>()
const bytes = new Map<string, Uint8Array>()

/** A base model's initial policy, made once (undefined for an unknown name). */
export const basePolicy = (name: string): Policy | undefined => {
  const seed = seeds.get(name)
  if (seed === undefined) return undefined
  let policy = policies.get(name)
  if (policy === undefined) {
    policy = Policy.create(undefined, { seed })
    policies.set(name, policy)
  }
  return policy
}

/** A base model's initial weights as checkpoint bytes, made once (undefined for an unknown name). */
export const initialWeights = (name: string): Uint8Array | undefined => {
  let out = bytes.get(name)
  if (out === undefined) {
    const seed = seeds.get(name)
    if (seed === undefined) return undefined
    out = saveCheckpoint(Policy.create(undefined, { seed }))
    bytes.set(name, out)
  }
  return out
}
