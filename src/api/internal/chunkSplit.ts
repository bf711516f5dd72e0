/**
 * A whole chat completion cut into the chunks an engine would have streamed (role, content, each tool call,
 * the finish, and the usage): what a streamed request is answered with when the policy answers whole only. The
 * chunk joiner (`chunkJoin.ts`) joins them back into the completion.
 */
import type { ChatCompletion, ChatCompletionChunk } from "../ChatCompletion.js"

/**
 * The chunks of a whole completion, as an engine would stream it: per choice its role, its reasoning, content and
 * refusal (each with its logprobs), each tool call, the finish (with the token ids); then the usage, when asked.
 */
export const chunksOf = (completion: ChatCompletion, includeUsage: boolean): ReadonlyArray<ChatCompletionChunk> => {
  const base = {
    id: completion.id ?? "chatcmpl-rollout",
    object: "chat.completion.chunk" as const,
    created: completion.created ?? 0,
    model: completion.model
  }
  const chunks: Array<ChatCompletionChunk> = []
  for (const choice of completion.choices) {
    const index = choice.index
    chunks.push({ ...base, choices: [{ index, delta: { role: "assistant", content: "" } }] })
    const { reasoning, reasoning_content } = choice.message
    if ((reasoning != null && reasoning !== "") || (reasoning_content != null && reasoning_content !== "")) {
      chunks.push({
        ...base,
        choices: [
          {
            index,
            delta: {
              ...(reasoning == null ? {} : { reasoning }),
              ...(reasoning_content == null ? {} : { reasoning_content })
            }
          }
        ]
      })
    }
    // The choice's logprobs (of its content and refusal) go with its first text, else with its finish.
    let logprobs = choice.logprobs ?? null
    for (const key of ["content", "refusal"] as const) {
      const text = choice.message[key]
      if (text == null || text === "") continue
      chunks.push({ ...base, choices: [{ index, delta: { [key]: text }, logprobs }] })
      logprobs = null
    }
    for (const [i, call] of (choice.message.tool_calls ?? []).entries()) {
      chunks.push({
        ...base,
        choices: [
          {
            index,
            delta: {
              tool_calls: [
                {
                  index: i,
                  ...(call.id === undefined ? {} : { id: call.id }),
                  type: "function",
                  function: { name: call.function.name, arguments: call.function.arguments }
                }
              ]
            }
          }
        ]
      })
    }
    chunks.push({
      ...base,
      choices: [
        {
          index,
          delta: {},
          finish_reason: choice.finish_reason,
          token_ids: choice.token_ids ?? null,
          ...(logprobs === null ? {} : { logprobs })
        }
      ]
    })
  }
  if (includeUsage) chunks.push({ ...base, choices: [], usage: completion.usage ?? null })
  return chunks
}
