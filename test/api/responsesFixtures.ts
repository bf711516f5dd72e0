/**
 * What the Responses translation's tests share: the request decoder, a response's meta, a completion of one
 * choice, and chunks of a streamed one, written by hand.
 */
import * as Schema from "effect/Schema"
import type { ChatCompletion, ChatCompletionChunk } from "../../src/api/ChatCompletion.js"
import { ResponseCreateRequest } from "../../src/api/Responses.js"

/** A Responses request decoded as the servers decode it. */
export const decode = Schema.decodeUnknownSync(ResponseCreateRequest)

/** The meta of the responses made in the tests. */
export const meta = { id: "resp_00ff", createdAt: 1_700_000_000, model: "m", store: true }

/** A completion of one choice: its message, finish and logprobs, token ids and usage (10 + 3, 4 cached). */
export const completion = (
  message: ChatCompletion["choices"][number]["message"],
  finish = "stop",
  logprobs: ReadonlyArray<{ token: string; logprob: number }> = []
): ChatCompletion => ({
  id: "chatcmpl-1",
  object: "chat.completion",
  created: 1,
  model: "m",
  choices: [{ index: 0, message, finish_reason: finish, logprobs: { content: logprobs }, token_ids: [1, 2, 3] }],
  usage: { prompt_tokens: 10, completion_tokens: 3, total_tokens: 13, prompt_tokens_details: { cached_tokens: 4 } }
})

/** A chunk of choice 0 (or `index`): its delta and what goes beside it (finish, logprobs). */
export const chunk = (
  delta: Record<string, unknown>,
  extra: Record<string, unknown> = {},
  index = 0
): ChatCompletionChunk =>
  ({
    id: "chatcmpl-1",
    object: "chat.completion.chunk",
    created: 1,
    model: "m",
    choices: [{ index, delta, ...extra }]
  }) as ChatCompletionChunk

/** A whole completion's first choice as streamed: the role, the text, each call whole, the finish, the usage. */
export const streamOf = (whole: ChatCompletion): Array<ChatCompletionChunk> => {
  const choice = whole.choices[0]!
  return [
    chunk({ role: "assistant", content: "" }),
    ...(choice.message.content ? [chunk({ content: choice.message.content })] : []),
    ...(choice.message.tool_calls ?? []).map((call, index) =>
      chunk({ tool_calls: [{ index, id: call.id, type: "function", function: call.function }] })
    ),
    chunk({}, { finish_reason: choice.finish_reason }),
    { ...chunk({}), choices: [], usage: whole.usage ?? null } as ChatCompletionChunk
  ]
}
