/**
 * A scripted policy for the tool-loop tests (`Tools`, `McpTools`, `McpScenarios`): a double, because those tests are
 * about what is done with the calls a model makes and the tasks it writes, which the embedded base models cannot be
 * made to write on cue; the loop, the servers and the recording are the real ones.
 */
import * as Effect from "effect/Effect"
import * as Ref from "effect/Ref"
import type { ChatCompletion, ChatCompletionRequest, ResponseToolCall } from "../../src/api/ChatCompletion.js"
import * as Policy from "../../src/workflow/Policy.js"

/** A turn of a scripted policy: text, or calls as tool name and JSON arguments. */
export type Turn = { readonly content?: string; readonly calls?: ReadonlyArray<readonly [string, string]> }

/**
 * A policy that plays a script of turns, recording each request it gets. A scripted double: these tests are about
 * what is done with the calls a model makes and the tasks it writes (which the embedded base models cannot write);
 * the MCP servers, the SDK and the tool loop are the real ones.
 */
export const scripted = (turns: ReadonlyArray<Turn>) =>
  Effect.gen(function* () {
    const sent = yield* Ref.make<ReadonlyArray<ChatCompletionRequest>>([])
    const policy = Policy.make({
      name: "scripted",
      complete: (request) =>
        Effect.gen(function* () {
          const all = yield* Ref.updateAndGet(sent, (xs) => [...xs, request])
          const turn = turns[Math.min(all.length, turns.length) - 1]!
          const calls: ReadonlyArray<ResponseToolCall> = (turn.calls ?? []).map(([name, args], i) => ({
            id: `call_${all.length}_${i}`,
            type: "function",
            function: { name, arguments: args }
          }))
          return {
            id: `chatcmpl-${all.length}`,
            object: "chat.completion",
            created: 0,
            model: "scripted",
            choices: [
              {
                index: 0,
                message: {
                  role: "assistant",
                  content: turn.content ?? null,
                  ...(calls.length > 0 ? { tool_calls: calls } : {})
                },
                finish_reason: calls.length > 0 ? "tool_calls" : "stop",
                logprobs: { content: [{ token: "x", logprob: -0.5, bytes: [120], top_logprobs: [] }] },
                token_ids: [120]
              }
            ],
            usage: { prompt_tokens: 10, completion_tokens: 1, total_tokens: 11 }
          } as unknown as ChatCompletion
        })
    })
    return { policy, sent }
  })
