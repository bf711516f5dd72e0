/**
 * Prompt states kept across requests (automatic prefix caching, as the hosted engine does): a request whose
 * prompt starts with a prompt seen before forks that prompt's state and runs only the tokens after it; one that
 * shares only a first part with a prompt seen before (at least {@link MIN_SHARED_TOKENS} tokens: an agent's system
 * prompt and tools, before a different question) copies that part of its state (`forkPrefix`) and runs the rest.
 * A prompt's state is kept once its prefill is done; one that starts while a prompt it shares a first part with
 * still runs (a step's groups start at once) waits for that prompt's state to hold the part, then copies it.
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
import { runToEnd } from "./Scheduler.js"

/** A model that can also extend a state by several tokens at once (the local policy can). */
export interface ExtendableModel<S extends DecodeState> extends LanguageModel<S> {
  /** Consume several tokens at once: the same state as advancing through them one by one. */
  readonly extend: (state: S, ids: ArrayLike<number>) => void
  /** A state holding no token yet, with room for `expected` tokens, for `extend` to fill (optional). */
  readonly emptyState?: ((expected: number) => S) | undefined
  /**
   * A new state holding the first `length` tokens of `state`, to be extended by at least one token before its
   * logits are read (optional: without it, only a whole cached prompt is reused).
   */
  readonly forkPrefix?: ((state: S, length: number) => S) | undefined
  /**
   * A copy of a state that is only read and forked, never extended, so it needs no room to grow (optional: the
   * cache keeps a `fork` without it).
   */
  readonly snapshot?: ((state: S) => S) | undefined
}

/**
 * A piece of a prompt to run: extend `state` by `ids` (by `extend`, or as rows of a batched forward pass), then
 * resume the generator that asked for it.
 */
export interface PromptWork<S extends DecodeState> {
  /** The state to extend. */
  readonly state: S
  /** The prompt tokens to consume into it. */
  readonly ids: ArrayLike<number>
}

/** Where a completion gets the state after its prompt. */
export interface PromptStates {
  /** The state after `ids` (a new state the caller owns and may advance). */
  readonly prefill: <S extends DecodeState>(model: LanguageModel<S>, ids: ReadonlyArray<number>) => S
  /**
   * The same state as `prefill`, computed a chunk of tokens at a time ({@link prefillSteps}): the generator
   * pauses (yields) between chunks, so a long prompt does not hold the event loop in one piece.
   */
  readonly prefillSteps: <S extends DecodeState>(
    model: LanguageModel<S>,
    ids: ReadonlyArray<number>,
    chunk?: ChunkSize
  ) => Generator<undefined, S>
  /**
   * The same state again, its chunks handed out as {@link PromptWork} for the caller to run (so that they can
   * ride in a batched forward pass with other sequences' rows) rather than run here.
   */
  readonly prefillWork: <S extends DecodeState>(
    model: LanguageModel<S>,
    ids: ReadonlyArray<number>,
    chunk?: ChunkSize
  ) => Generator<PromptWork<S>, S>
}

/** How many prompt tokens to run in one piece when the state already holds `position` tokens. */
export type ChunkSize = (position: number) => number

/**
 * The default chunk of a prefill run in steps: 64 tokens at the start of a prompt, fewer further on, where
 * each token also attends to all before it (about 8 at 2,048 tokens); some 5-10 ms of the local policy's
 * time per chunk either way.
 */
export const DEFAULT_CHUNK: ChunkSize = (position) => Math.max(8, Math.floor(36_000 / (560 + position)))

/** A chunk size that runs any prompt in one piece (`prefill`). */
const WHOLE: ChunkSize = () => Number.POSITIVE_INFINITY

/**
 * Runs `ids[from..]` into `state` (or, when `state` is null, into a new state by prefilling the first
 * chunk), a chunk at a time, pausing after each chunk but the last. Bit for bit the state of one prefill:
 * `extend` is exact however the tokens are split. A model that cannot extend is prefilled in one piece.
 */
export function* runPrompt<S extends DecodeState>(
  model: LanguageModel<S>,
  state: S | null,
  ids: ReadonlyArray<number>,
  chunk: ChunkSize = DEFAULT_CHUNK
): Generator<undefined, S> {
  return yield* runWork(model, promptWork(model, state, ids, chunk))
}

/**
 * `runPrompt` with its chunks handed out as {@link PromptWork} (the caller runs each, then resumes the
 * generator) rather than run here. A model that can make an empty state (`emptyState`) has every chunk handed
 * out; one that cannot has its first chunk prefilled here; one that cannot extend is prefilled in one piece.
 */
export function* promptWork<S extends DecodeState>(
  model: LanguageModel<S>,
  state: S | null,
  ids: ReadonlyArray<number>,
  chunk: ChunkSize = DEFAULT_CHUNK
): Generator<PromptWork<S>, S> {
  if (state === null && !isExtendable(model)) return model.prefill(ids)
  let at = state?.length ?? 0
  let current = state
  if (current === null && (model as ExtendableModel<S>).emptyState !== undefined) {
    current = (model as ExtendableModel<S>).emptyState!(ids.length)
  }
  while (current === null || at < ids.length) {
    const size = Math.max(1, Math.min(ids.length - at, chunk(at)))
    const piece = size === ids.length - at && at === 0 ? ids : ids.slice(at, at + size)
    if (current === null) current = model.prefill(piece)
    else yield { state: current, ids: piece }
    at += size
  }
  return current
}

/** Runs the pieces of a prompt by `extend`, pausing between pieces (not after the last): `runPrompt`'s steps. */
function* runWork<S extends DecodeState>(model: LanguageModel<S>, work: Generator<PromptWork<S>, S>) {
  let next = work.next()
  let first = true
  while (next.done !== true) {
    if (!first) yield
    first = false
    ;(model as ExtendableModel<S>).extend(next.value.state, next.value.ids)
    next = work.next()
  }
  return next.value
}

/** A prompt whose pieces are running, and the state they build (null until its first piece). */
interface Running {
  readonly ids: ReadonlyArray<number>
  state: DecodeState | null
}

/** The tokens of a piece that waits (see `PrefixCache.startOf`): none. */
const NO_TOKENS: ReadonlyArray<number> = []

interface Entry {
  readonly ids: Int32Array
  readonly state: DecodeState
  /** Gives the state's memory back (its model's `release`), when the entry is evicted. */
  readonly release: ((state: DecodeState) => void) | undefined
  used: number
}

/** The default bound on the prompt tokens a cache keeps states for (their keys and values: ~0.75 KB a token). */
export const DEFAULT_MAX_TOKENS = 32_768

/**
 * A bound on the prompt tokens that several caches keep states for together, the least recently used entry of
 * any of them evicted first (a server keeps a cache for each policy it has loaded; they share one, as their
 * states share the kernels' memory). Each cache keeps its own bound as well.
 *
 * Without it, the caches of an RL loop's earlier checkpoints, which its requests no longer name, held their
 * states until the policy was dropped and its cache collected: new states took fresh memory, whose first
 * writes (page faults) cost some 40 times a copy into a block given back. With it, the new checkpoint's
 * prompts evict the old ones' states, and their blocks are reused at once.
 */
export class PromptBudget {
  private readonly caches = new Set<PrefixCache>()
  private held = 0
  private clock = 0

  constructor(readonly maxTokens: number = DEFAULT_MAX_TOKENS) {}

  /** The prompt tokens whose states the caches keep, together. */
  get tokens(): number {
    return this.held
  }

  /** The next use's time, shared by the caches so that their entries' ages compare. */
  tick(): number {
    return ++this.clock
  }

  /** A cache kept `n` more tokens (net of what its own bound evicted); evicts the oldest entries beyond the bound. */
  changed(cache: PrefixCache, n: number): void {
    this.held += n
    if (cache.size > 0) this.caches.add(cache)
    else this.caches.delete(cache)
    while (this.held > this.maxTokens) {
      let oldest: PrefixCache | undefined
      let at = Number.POSITIVE_INFINITY
      let entries = 0
      for (const c of this.caches) {
        entries += c.size
        const used = c.oldestUse()
        if (used < at) {
          at = used
          oldest = c
        }
      }
      // The entry just kept stays, as a cache's own bound keeps one entry.
      if (oldest === undefined || entries <= 1) return
      this.held -= oldest.evictOldest()
      if (oldest.size === 0) this.caches.delete(oldest)
    }
  }
}

const isExtendable = <S extends DecodeState>(model: LanguageModel<S>): model is ExtendableModel<S> =>
  typeof (model as Partial<ExtendableModel<S>>).extend === "function"

/** How many tokens `ids` and `cached` begin with alike. */
const sharedLength = (ids: ArrayLike<number>, cached: ArrayLike<number>): number => {
  const n = Math.min(ids.length, cached.length)
  let i = 0
  while (i < n && ids[i] === cached[i]) i++
  return i
}

/**
 * The fewest tokens a prompt must share with a cached one for the shared part to be copied rather than run: a
 * copy of a few rows costs about what running them does.
 */
export const MIN_SHARED_TOKENS = 16

/** An LRU of prompt states of one model, bounded in tokens. */
export class PrefixCache implements PromptStates {
  private readonly entries: Array<Entry> = []
  private readonly running = new Set<Running>()
  private held = 0
  private clock = 0
  /** Prompts that started from a cached state. */
  hits = 0
  /** Prompts that started from the first part of a cached prompt (a system prompt and tools, say). */
  partialHits = 0
  /** Prompts prefilled from nothing. */
  misses = 0
  /** Prompt tokens not run thanks to the cache. */
  savedTokens = 0

  /**
   * @param maxTokens the bound on the prompt tokens this cache keeps states for
   * @param budget a bound this cache shares with others (see {@link PromptBudget}), if any
   */
  constructor(
    readonly maxTokens: number = DEFAULT_MAX_TOKENS,
    readonly budget?: PromptBudget
  ) {}

  /** The prompt tokens whose states are kept. */
  get tokens(): number {
    return this.held
  }

  /** How many prompt states are kept. */
  get size(): number {
    return this.entries.length
  }

  /** When the least recently used entry was last used (infinity for an empty cache): for its {@link PromptBudget}. */
  oldestUse(): number {
    let at = Number.POSITIVE_INFINITY
    for (const entry of this.entries) if (entry.used < at) at = entry.used
    return at
  }

  /**
   * Drops every entry, their states' memory given back (for a cache whose model is no longer served: its states
   * would otherwise hold the model, through their entries, for as long as a shared {@link PromptBudget} keeps them).
   */
  clear(): void {
    const held = this.held
    for (const entry of this.entries.splice(0)) entry.release?.(entry.state)
    this.held = 0
    this.budget?.changed(this, -held)
  }

  /**
   * Evicts the least recently used entry, its state's memory given back, and answers how many prompt tokens it held
   * (for its {@link PromptBudget}, which counts them itself).
   */
  evictOldest(): number {
    if (this.entries.length === 0) return 0
    let oldest = 0
    for (let i = 1; i < this.entries.length; i++) if (this.entries[i]!.used < this.entries[oldest]!.used) oldest = i
    const [evicted] = this.entries.splice(oldest, 1)
    this.held -= evicted!.ids.length
    // The cache's own copy (a prompt forks it, never holds it): its memory goes back at once.
    evicted!.release?.(evicted!.state)
    return evicted!.ids.length
  }

  private tick(): number {
    return this.budget === undefined ? ++this.clock : this.budget.tick()
  }

  readonly prefill = <S extends DecodeState>(model: LanguageModel<S>, ids: ReadonlyArray<number>): S =>
    runToEnd(this.prefillSteps(model, ids, WHOLE))

  readonly prefillSteps = <S extends DecodeState>(
    model: LanguageModel<S>,
    ids: ReadonlyArray<number>,
    chunk: ChunkSize = DEFAULT_CHUNK
  ): Generator<undefined, S> => runWork(model, this.prefillWork(model, ids, chunk))

  readonly prefillWork = <S extends DecodeState>(
    model: LanguageModel<S>,
    ids: ReadonlyArray<number>,
    chunk: ChunkSize = DEFAULT_CHUNK
  ): Generator<PromptWork<S>, S> => {
    if (!isExtendable(model) || ids.length > this.maxTokens) return promptWork(model, null, ids, chunk)
    return this.cachedWork(model, ids, chunk)
  }

  private *cachedWork<S extends DecodeState>(
    model: ExtendableModel<S>,
    ids: ReadonlyArray<number>,
    chunk: ChunkSize
  ): Generator<PromptWork<S>, S> {
    const mine: Running = { ids, state: null }
    try {
      const start = yield* this.startOf(model, ids)
      this.running.add(mine)
      // The pieces run as they come, the state they build in view of prompts that start meanwhile.
      const work = promptWork(model, start, ids, chunk)
      let next = work.next()
      while (next.done !== true) {
        mine.state = next.value.state
        yield next.value
        next = work.next()
      }
      const state = next.value
      // Kept once complete (a request dropped while its prompt runs leaves nothing half-done behind).
      if (!this.holdsWhole(ids))
        this.keep(model, Int32Array.from(ids), model.snapshot !== undefined ? model.snapshot(state) : model.fork(state))
      return state
    } finally {
      this.running.delete(mine)
    }
  }

  /** Whether an entry holds exactly `ids`. */
  private holdsWhole(ids: ReadonlyArray<number>): boolean {
    for (const entry of this.entries) {
      if (entry.ids.length === ids.length && sharedLength(ids, entry.ids) === ids.length) return true
    }
    return false
  }

  /**
   * The state a prompt starts from, or null (from nothing). The entry sharing the most tokens with the prompt: a
   * whole cached prompt is forked as it is; the first part of one (the prompts of an agent share their system
   * prompt and tools) is copied, and the rest run from there. When a prompt still running shares more (a step's
   * groups start together: their prompts arrive before any is kept), it waits for that prompt's state to hold
   * the shared part (pieces of no tokens, one a step) and copies it from there.
   */
  private *startOf<S extends DecodeState>(model: ExtendableModel<S>, ids: ReadonlyArray<number>) {
    for (;;) {
      let best: Entry | undefined
      let shared = 0
      for (const entry of this.entries) {
        const n = sharedLength(ids, entry.ids)
        // On a tie, a whole cached prompt over the first part of a longer one (its state is ready to sample from).
        const wholeOverPart = n === shared && n === entry.ids.length && best !== undefined && n < best.ids.length
        if (n > shared || wholeOverPart) {
          best = entry
          shared = n
        }
      }
      if (best !== undefined && shared === best.ids.length) {
        this.hits += 1
        this.savedTokens += shared
        best.used = this.tick()
        return model.fork(best.state as S)
      }
      if (model.forkPrefix === undefined) break
      // A part leaves at least one token to run (its hidden state is not kept).
      const part = Math.min(shared, ids.length - 1)
      let other: Running | undefined
      let otherPart = 0
      for (const running of this.running) {
        const n = Math.min(sharedLength(ids, running.ids), ids.length - 1)
        if (running.state !== null && n > otherPart) {
          other = running
          otherPart = n
        }
      }
      if (other !== undefined && otherPart >= MIN_SHARED_TOKENS && otherPart >= part + MIN_SHARED_TOKENS) {
        const state = other.state as S
        // Until it holds the part, a step at a time; only that prompt is watched meanwhile (not every entry and
        // prompt again each step). If it ends first (kept, or dropped), everything is looked at again.
        while (state.length < otherPart && this.running.has(other)) yield { state, ids: NO_TOKENS }
        if (!this.running.has(other)) continue
        this.partialHits += 1
        this.savedTokens += otherPart
        return model.forkPrefix(state, otherPart)
      }
      if (best !== undefined && part >= MIN_SHARED_TOKENS) {
        this.partialHits += 1
        this.savedTokens += part
        best.used = this.tick()
        return model.forkPrefix(best.state as S, part)
      }
      break
    }
    this.misses += 1
    return null
  }

  private keep<S extends DecodeState>(model: ExtendableModel<S>, ids: Int32Array, state: S): void {
    const release = model.release === undefined ? undefined : (kept: DecodeState) => model.release!(kept as S)
    this.entries.push({ ids, state, release, used: this.tick() })
    this.held += ids.length
    let freed = 0
    while (this.held > this.maxTokens && this.entries.length > 1) freed += this.evictOldest()
    this.budget?.changed(this, ids.length - freed)
  }
}
