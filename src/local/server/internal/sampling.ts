/**
 * The server's bound on sampling work: how many tokens the admitted completions (chat completions on both
 * surfaces, streamed or not) may still sample, all together. A request reserves `n` times its token limit
 * when it is admitted and gives it back when its response has been written (or the client left); one that
 * would take the total over the bound is refused with a 429 and `retry-after`, which the clients of the
 * convention retry. With the per-request limits of the engine (`RequestLimits`), this keeps the work the
 * server holds, and the time any request waits behind others, bounded.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { DEFAULT_LIMITS, type RequestLimits } from "../../engine/Sampler.js"

/** The default bound on queued sampling work: 16 requests of the largest size, 262,144 tokens. */
export const DEFAULT_MAX_QUEUED_TOKENS = 16 * DEFAULT_LIMITS.maxRequestTokens

/** The settings of sampling on the server. */
export interface SamplingOptions {
  /** The bounds on one request (default the engine's `DEFAULT_LIMITS`). */
  readonly limits?: RequestLimits | undefined
  /** The most tokens all admitted completions may still sample (default {@link DEFAULT_MAX_QUEUED_TOKENS}). */
  readonly maxQueuedTokens?: number | undefined
}

/** The sampling settings and the tokens reserved so far. */
export class SamplingBudget {
  private reserved = 0

  constructor(
    readonly limits: RequestLimits,
    readonly maxQueuedTokens: number
  ) {}

  /** The tokens reserved by the completions admitted and not yet done. */
  get queued(): number {
    return this.reserved
  }

  /**
   * Reserves `tokens` until the scope closes (the request's scope closes once its response is written), or
   * answers false, reserving nothing, when that would take the total over the bound.
   */
  reserve(tokens: number): Effect.Effect<boolean, never, Scope.Scope> {
    return Effect.suspend(() => {
      if (this.reserved + tokens > this.maxQueuedTokens) return Effect.succeed(false)
      this.reserved += tokens
      return Effect.as(
        Effect.addFinalizer(() =>
          Effect.sync(() => {
            this.reserved -= tokens
          })
        ),
        true
      )
    })
  }

  /** The message of a refusal: what is queued, the bound, and what to do. */
  refusal(tokens: number): string {
    return `The server is busy: ${this.reserved} tokens of sampling are queued and this request may sample ${tokens} more, over the bound of ${this.maxQueuedTokens}; retry later`
  }
}

/** The server's sampling budget, shared by the completion routes of both surfaces. */
export class Sampling extends Context.Tag("effect-rl/local/server/Sampling")<Sampling, SamplingBudget>() {}

/** The sampling budget of a server with these settings. */
export const layer = (options: SamplingOptions = {}): Layer.Layer<Sampling> =>
  Layer.sync(
    Sampling,
    () => new SamplingBudget(options.limits ?? DEFAULT_LIMITS, options.maxQueuedTokens ?? DEFAULT_MAX_QUEUED_TOKENS)
  )

/** Seconds a client refused for a full queue is asked to wait (`retry-after`). */
export const RETRY_AFTER_SECONDS = 1
