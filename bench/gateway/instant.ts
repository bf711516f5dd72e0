/**
 * What the gateway benches share: a policy that answers at once (so what is measured is the gateway and the
 * rollout's recording, not a model), its completion, the request the agents send, and a quantile.
 */
import * as Effect from "effect/Effect"
import type { ChatCompletion } from "../../src/api/ChatCompletion.js"
import * as Policy from "../../src/workflow/Policy.js"

/** The completion the instant policy answers (a one-token "yes" with its logprob and token id). */
export const COMPLETION = {
  id: "chatcmpl-bench",
  object: "chat.completion",
  created: 0,
  model: "instant",
  choices: [
    {
      index: 0,
      finish_reason: "stop",
      message: { role: "assistant", content: "yes" },
      logprobs: { content: [{ token: "yes", logprob: -0.1, bytes: [121, 101, 115], top_logprobs: [] }] },
      token_ids: [42]
    }
  ],
  usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 }
}

/** A policy answering every request at once with {@link COMPLETION}. */
export const instant = Policy.make({
  name: "instant",
  complete: (request) => Effect.succeed({ ...COMPLETION, model: request.model } as unknown as ChatCompletion)
})

/** The chat completion request an agent sends. */
export const BODY = JSON.stringify({ model: "any", messages: [{ role: "user", content: "Shall we?" }], max_tokens: 4 })

/** The `q` quantile of `values` (the value below which that share of them falls). */
export const quantile = (values: ReadonlyArray<number>, q: number): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
}
