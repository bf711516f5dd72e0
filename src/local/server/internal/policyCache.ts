/**
 * A small LRU of loaded policies by checkpoint id, so chat completions against a trained checkpoint do not
 * decode its weights on every request. Checkpoints are immutable (a step is written once), so an entry never
 * goes stale; a deleted checkpoint is simply no longer resolved. What a model name (`wandb-artifact:///...`)
 * resolved to is kept too, for as long as no model or checkpoint has been written since (`catalogVersion`).
 */
import { PrefixCache, PromptBudget } from "../../engine/PrefixCache.js"
import type { Policy } from "../../engine/policy/Policy.js"

/** The default number of policies kept. */
export const DEFAULT_CAPACITY = 8

/** The most model names whose resolution is kept (all are forgotten at once beyond it). */
const NAMES_CAPACITY = 1024

/** An LRU of policies by checkpoint id. */
export class PolicyCache {
  private readonly entries = new Map<string, Policy>()
  private readonly names = new Map<string, string>()
  private namesVersion = -1

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
      const evicted = this.entries.get(oldest.value)
      this.entries.delete(oldest.value)
      // Its prompt states go now: in the shared budget they would keep the policy alive until evicted in turn.
      if (evicted !== undefined) promptStates.get(evicted)?.clear()
    }
  }

  /**
   * The policy a model name resolved to while the catalogue was at `version` (see `catalogVersion`), if it has
   * not been written since.
   */
  resolved(name: string, version: number): Policy | undefined {
    if (version !== this.namesVersion) return undefined
    const id = this.names.get(name)
    return id === undefined ? undefined : this.get(id)
  }

  /**
   * Keeps that a name resolved to a checkpoint at a catalogue version (forgetting every name of an older
   * version); its policy is the one cached by `set`, for as long as the LRU keeps it.
   */
  setResolved(name: string, version: number, id: string): void {
    if (version !== this.namesVersion) {
      this.names.clear()
      this.namesVersion = version
    }
    if (this.names.size >= NAMES_CAPACITY) this.names.clear()
    this.names.set(name, id)
  }

  /** How many policies are cached. */
  get size(): number {
    return this.entries.size
  }
}

const promptStates = new WeakMap<Policy, PrefixCache>()

/**
 * The bound the prefix caches of every policy served in this process share (their states share the kernels'
 * memory, one per process): an RL loop's new checkpoint evicts the states its earlier checkpoints' caches keep,
 * and their memory is reused at once (see `PromptBudget`).
 */
export const sharedPromptBudget = new PromptBudget()

/**
 * The prefix cache of a policy the server serves (a checkpoint's or a base model's, whose weights never
 * change), kept as long as the policy is: chat completions on both surfaces reuse its prompt states.
 */
export const promptStatesOf = (policy: Policy): PrefixCache => {
  let cache = promptStates.get(policy)
  if (cache === undefined) {
    cache = new PrefixCache(undefined, sharedPromptBudget)
    promptStates.set(policy, cache)
  }
  return cache
}
