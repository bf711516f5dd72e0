/**
 * A small deterministic language model for the engine's tests. It stands in for the neural policy so that
 * each sampling field's effect can be checked against a known distribution: the next-token logits are a
 * function of the tokens so far that the test chooses (by default a fixed pseudo-random table keyed by the
 * last token), and `scoreTokens` is the exact log-softmax of those logits.
 */
import type { DecodeState, LanguageModel } from "../../../src/local/engine/LanguageModel.js"
import { Rng } from "../../../src/local/engine/Random.js"
import { VOCAB_SIZE } from "../../../src/local/engine/Tokenizer.js"

/** The state of a table model: the tokens so far. */
export interface TableState extends DecodeState {
  readonly ids: Array<number>
  length: number
}

/** The logits of the next token after `ids`. */
export type LogitsFn = (ids: ReadonlyArray<number>) => ArrayLike<number>

/** A model whose logits come from a function of the tokens so far. */
export class TableModel implements LanguageModel<TableState> {
  readonly vocabSize: number
  readonly contextLength: number
  /** How many times `logits` was called. */
  logitsCalls = 0
  private readonly fn: LogitsFn

  constructor(fn: LogitsFn, options: { readonly vocabSize?: number; readonly contextLength?: number } = {}) {
    this.fn = fn
    this.vocabSize = options.vocabSize ?? VOCAB_SIZE
    this.contextLength = options.contextLength ?? 4096
  }

  /** The same logits after any tokens. */
  static constant(logits: ArrayLike<number>, options?: { readonly contextLength?: number }): TableModel {
    return new TableModel(() => logits, options)
  }

  /** Logits from a seeded table keyed by the last token (`scale` times standard normals). */
  static keyed(seed: number, scale = 2, options?: { readonly contextLength?: number }): TableModel {
    const rng = new Rng(seed)
    const table = Array.from({ length: VOCAB_SIZE }, () =>
      Float32Array.from({ length: VOCAB_SIZE }, () => scale * rng.normal())
    )
    return new TableModel((ids) => table[ids[ids.length - 1] ?? 0]!, options)
  }

  prefill = (ids: ArrayLike<number>): TableState => {
    const copy = Array.from(ids)
    return { ids: copy, length: copy.length }
  }

  fork = (state: TableState): TableState => ({ ids: [...state.ids], length: state.length })

  advance = (state: TableState, id: number): void => {
    state.ids.push(id)
    state.length = state.ids.length
  }

  logits = (state: TableState, out?: Float32Array): Float32Array => {
    this.logitsCalls++
    const target = out ?? new Float32Array(this.vocabSize)
    const values = this.fn(state.ids)
    for (let i = 0; i < this.vocabSize; i++) target[i] = values[i] ?? Number.NEGATIVE_INFINITY
    return target
  }

  scoreTokens = (ids: ArrayLike<number>, from: number): Float32Array => {
    const all = Array.from(ids)
    const out = new Float32Array(Math.max(0, all.length - from))
    for (let t = Math.max(from, 1); t < all.length; t++) {
      out[t - from] = logSoftmax(this.fn(all.slice(0, t)))[all[t]!]!
    }
    return out
  }
}

/** The log-softmax of logits (float64). */
export const logSoftmax = (logits: ArrayLike<number>): Float64Array => {
  let max = Number.NEGATIVE_INFINITY
  for (let i = 0; i < logits.length; i++) max = Math.max(max, logits[i]!)
  let sum = 0
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i]! - max)
  const lse = max + Math.log(sum)
  return Float64Array.from({ length: logits.length }, (_, i) => logits[i]! - lse)
}

/** Logits that are `low` everywhere except the given ids. */
export const peaked = (values: Readonly<Record<number, number>>, low = -5): Float32Array => {
  const out = new Float32Array(VOCAB_SIZE).fill(low)
  for (const [id, v] of Object.entries(values)) out[Number(id)] = v
  return out
}
