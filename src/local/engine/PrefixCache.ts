/**
 * Prompt states kept across requests (automatic prefix caching, as the hosted engine does): a request whose
 * prompt starts with a prompt seen before forks that prompt's state and runs only the tokens after it.
 *
 * An RL loop asks the same thing many times: the rollouts of a group share their first prompt, and each turn
 * of a multi-turn agent's conversation starts with the previous turn's prompt (the generation prompt is
 * followed by the turn it generated). With the cache, a group of eight two-turn rollouts runs its first
 * prompt once and each second prompt from where the first ended.
 *
 * The states are exact: `extend` gives the same state, bit for bit, as a prefill of the whole prompt, so a
 * cached completion is the completion an uncached one would have been. A cache belongs to one model whose
 * weights do not change (the server keeps one per loaded checkpoint or base model).
 *
 * @since 0.1.0
 */
import type { DecodeState, LanguageModel } from "./LanguageModel.js"

/** A model that can also extend a state by several tokens at once (the local policy can). */
export interface ExtendableModel<S extends DecodeState> extends LanguageModel<S> {
  /** Consume several tokens at once: the same state as advancing through them one by one. */
  readonly extend: (state: S, ids: ArrayLike<number>) => void
}

/** Where a completion gets the state after its prompt. */
export interface PromptStates {
  /** The state after `ids` (a new state the caller owns and may advance). */
  readonly prefill: <S extends DecodeState>(model: LanguageModel<S>, ids: ReadonlyArray<number>) => S
}

interface Entry {
  readonly ids: Int32Array
  readonly state: DecodeState
  used: number
}

/** The default bound on the prompt tokens a cache keeps states for (their keys and values: ~0.75 KB a token). */
export const DEFAULT_MAX_TOKENS = 32_768

const isExtendable = <S extends DecodeState>(model: LanguageModel<S>): model is ExtendableModel<S> =>
  typeof (model as Partial<ExtendableModel<S>>).extend === "function"

/** Whether `prefix` is a prefix of `ids`. */
const startsWith = (ids: ReadonlyArray<number>, prefix: Int32Array): boolean => {
  if (prefix.length > ids.length) return false
  // The last token differs most often (prompts share their beginnings): check it first.
  if (prefix.length > 0 && ids[prefix.length - 1] !== prefix[prefix.length - 1]) return false
  for (let i = 0; i < prefix.length; i++) if (ids[i] !== prefix[i]) return false
  return true
}

/** An LRU of prompt states of one model, bounded in tokens. */
export class PrefixCache implements PromptStates {
  private readonly entries: Array<Entry> = []
  private held = 0
  private clock = 0
  /** Prompts that started from a cached state. */
  hits = 0
  /** Prompts prefilled from nothing. */
  misses = 0
  /** Prompt tokens not run thanks to the cache. */
  savedTokens = 0

  constructor(readonly maxTokens: number = DEFAULT_MAX_TOKENS) {}

  /** The prompt tokens whose states are kept. */
  get tokens(): number {
    return this.held
  }

  readonly prefill = <S extends DecodeState>(model: LanguageModel<S>, ids: ReadonlyArray<number>): S => {
    if (!isExtendable(model) || ids.length > this.maxTokens) return model.prefill(ids)
    let best: Entry | undefined
    for (const entry of this.entries) {
      if ((best === undefined || entry.ids.length > best.ids.length) && startsWith(ids, entry.ids)) best = entry
    }
    let state: S
    if (best === undefined) {
      this.misses += 1
      state = model.prefill(ids)
    } else {
      this.hits += 1
      this.savedTokens += best.ids.length
      best.used = ++this.clock
      state = model.fork(best.state as S)
      if (best.ids.length < ids.length) model.extend(state, ids.slice(best.ids.length))
    }
    if (best === undefined || best.ids.length < ids.length) this.keep(Int32Array.from(ids), model.fork(state))
    return state
  }

  private keep(ids: Int32Array, state: DecodeState): void {
    this.entries.push({ ids, state, used: ++this.clock })
    this.held += ids.length
    while (this.held > this.maxTokens && this.entries.length > 1) {
      let oldest = 0
      for (let i = 1; i < this.entries.length; i++) if (this.entries[i]!.used < this.entries[oldest]!.used) oldest = i
      this.held -= this.entries[oldest]!.ids.length
      this.entries.splice(oldest, 1)
    }
  }
}
