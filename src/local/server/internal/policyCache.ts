/**
 * A small LRU of loaded policies by checkpoint id, so chat completions against a trained checkpoint do not
 * decode its weights on every request. Checkpoints are immutable (a step is written once), so an entry never
 * goes stale; a deleted checkpoint is simply no longer resolved.
 */
import { PrefixCache } from "../../engine/PrefixCache.js"
import type { Policy } from "../../engine/policy/Policy.js"

/** The default number of policies kept. */
export const DEFAULT_CAPACITY = 8

/** An LRU of policies by checkpoint id. */
export class PolicyCache {
  private readonly entries = new Map<string, Policy>()

  constructor(readonly capacity: number = DEFAULT_CAPACITY) {}

  /** The cached policy of a checkpoint (now the most recent), if any. */
  get(id: string): Policy | undefined {
    const hit = this.entries.get(id)
    if (hit !== undefined) {
      this.entries.delete(id)
      this.entries.set(id, hit)
    }
    return hit
  }

  /** Caches a checkpoint's policy, evicting the least recently used beyond the capacity. */
  set(id: string, policy: Policy): void {
    this.entries.delete(id)
    this.entries.set(id, policy)
    while (this.entries.size > this.capacity) {
      const oldest = this.entries.keys().next()
      if (oldest.done === true) break
      this.entries.delete(oldest.value)
    }
  }

  /** How many policies are cached. */
  get size(): number {
    return this.entries.size
  }
}

const promptStates = new WeakMap<Policy, PrefixCache>()

/**
 * The prefix cache of a policy the server serves (a checkpoint's or a base model's, whose weights never
 * change), kept as long as the policy is: chat completions on both surfaces reuse its prompt states.
 */
export const promptStatesOf = (policy: Policy): PrefixCache => {
  let cache = promptStates.get(policy)
  if (cache === undefined) {
    cache = new PrefixCache()
    promptStates.set(policy, cache)
  }
  return cache
}
