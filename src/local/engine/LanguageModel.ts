/**
 * The contract between the local engine's policy (a small neural network) and what drives it: the
 * sampler, which asks for next-token logits step by step, and the trainer, which scores whole sequences.
 * The policy implements it; the sampler and the chat template only depend on it.
 *
 * @since 0.1.0
 */

/** The state of one sequence being decoded: the tokens so far and whatever the policy caches for them. */
export interface DecodeState {
  /** The token ids consumed so far (prompt and sampled). */
  readonly length: number
}

/** A causal language model over token ids `0 .. vocabSize - 1`. */
export interface LanguageModel<S extends DecodeState = DecodeState> {
  /** The number of token ids. */
  readonly vocabSize: number
  /** The most tokens a sequence may hold (prompt and completion). */
  readonly contextLength: number
  /**
   * Consume a prompt (at least one token) and return the state after it. `logits(state)` is then the
   * distribution of the first completion token.
   */
  readonly prefill: (ids: ArrayLike<number>) => S
  /** A copy of a state, so that several completions (`n > 1`) can share one prefill. */
  readonly fork: (state: S) => S
  /**
   * Gives a state's memory back at once, when its owner is done with it (optional: without it, or for a state
   * not given back, the memory returns when the state is collected). The state must not be used again.
   */
  readonly release?: ((state: S) => void) | undefined
  /** Consume one more token. */
  readonly advance: (state: S, id: number) => void
  /**
   * The unnormalised next-token logits after the state's tokens, written into `out` (length `vocabSize`)
   * and returned. The policy may reuse `out`; callers must not keep it across calls.
   */
  readonly logits: (state: S, out?: Float32Array) => Float32Array
  /**
   * The log-probability of each token `ids[t]` given `ids[0 .. t-1]`, for `t` in `from .. ids.length - 1`
   * (entry `t - from` of the result). Used for prompt logprobs and to recompute old logprobs.
   */
  readonly scoreTokens: (ids: ArrayLike<number>, from: number) => Float32Array
}

/** A trajectory rendered to tokens for training. */
export interface TrainingSequence {
  /** The token ids, context and sampled turns in order. */
  readonly ids: Int32Array
  /** 1 where the token was sampled by the policy (a choice's token, trainable), 0 for context. */
  readonly mask: Uint8Array
  /** The logprob recorded when each sampled token was sampled; NaN where unknown or not sampled. */
  readonly logprobs: Float32Array
}
