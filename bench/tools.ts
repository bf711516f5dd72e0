/**
 * Tool calls in the local engine: calls/s and sampled tokens/s of chat completions whose output is a call with
 * constrained arguments (`tool_choice: "required"`, two tools with JSON-schema parameters), beside the same
 * model sampling free text for the same number of tokens in the same run (the baseline; the ratio is the cost
 * of the grammar: its compilation per request and its masks per token). Then a group of two-turn tool rollouts
 * with the prefix cache against prefilling every prompt (the baseline). Times are the best of several runs.
 * Run: `npx tsx bench/tools.ts`.
 */
import { loadavg } from "node:os"
import type { ChatCompletionRequest } from "../src/api/ChatCompletion.js"
import type { Tool } from "../src/api/ChatMessage.js"
import { PrefixCache } from "../src/local/engine/PrefixCache.js"
import { Policy } from "../src/local/engine/policy/Policy.js"
import { complete } from "../src/local/engine/Sampler.js"

const tools: ReadonlyArray<Tool> = [
  {
    type: "function",
    function: {
      name: "add",
      parameters: {
        type: "object",
        properties: { a: { type: "integer" }, b: { type: "integer" } },
        required: ["a", "b"]
      }
    }
  },
  {
    type: "function",
    function: {
      name: "lookup",
      parameters: { type: "object", properties: { key: { type: "string", maxLength: 12 } }, required: ["key"] }
    }
  }
]

const policy = Policy.create(undefined, { seed: 1 })
const messages = [{ role: "user" as const, content: "What is 2 + 3?" }]
const N = 8

/** The best time (ms) of a request over `runs` runs, and its sampled tokens and calls. */
const measure = (request: ChatCompletionRequest, runs = 5) => {
  let best = Number.POSITIVE_INFINITY
  let tokens = 0
  let calls = 0
  for (let i = 0; i < runs + 1; i++) {
    const t0 = performance.now()
    const response = complete(policy, { ...request, seed: i }, { modelName: "bench" })
    const ms = performance.now() - t0
    if (i === 0) continue
    if (ms < best) {
      best = ms
      tokens = response.usage?.completion_tokens ?? 0
      calls = response.choices.reduce((sum, choice) => sum + (choice.message.tool_calls?.length ?? 0), 0)
    }
  }
  return { ms: best, tokens, calls }
}

const called = measure({ messages, tools, tool_choice: "required", parallel_tool_calls: false, n: N, max_tokens: 100 })
// The baseline samples as many tokens per choice, free, with the same prompt (tools rendered, none called).
const perChoice = Math.max(1, Math.round(called.tokens / N))
const free = measure({ messages, tools, tool_choice: "none", n: N, max_tokens: perChoice, ignore_eos: true })

const rate = (count: number, ms: number) => (count / (ms / 1000)).toFixed(0)
console.log(`load average ${loadavg()[0]!.toFixed(2)}; n = ${N} choices per request, best of 5`)
console.log(
  `tool calls (required, constrained arguments): ${called.calls} calls, ${called.tokens} tokens in ${called.ms.toFixed(1)} ms: ${rate(called.calls, called.ms)} calls/s, ${rate(called.tokens, called.ms)} tokens/s`
)
console.log(
  `free text (baseline):                         ${free.tokens} tokens in ${free.ms.toFixed(1)} ms: ${rate(free.tokens, free.ms)} tokens/s`
)
console.log(
  `ratio (tokens/s, calls over free text): ${(called.tokens / called.ms / (free.tokens / free.ms)).toFixed(2)}`
)

// A group of two-turn tool rollouts, as an RL step asks for them: eight rollouts of one question, each a
// request that must call a tool, then one with the call and its result that answers. With the server's prefix
// cache the first prompt is prefilled once for the group and each second prompt continues its first; the
// baseline prefills every prompt from nothing. The completions are the same, bit for bit.
const agentPolicy = Policy.create({ ...policy.config, contextLength: 2048 }, { seed: 2 })
const rollouts = (cache: PrefixCache | undefined) => {
  const options = { modelName: "bench", ...(cache === undefined ? {} : { promptStates: cache }) }
  let tokens = 0
  const t0 = performance.now()
  for (let r = 0; r < N; r++) {
    const first = complete(
      agentPolicy,
      { messages, tools, tool_choice: "required", parallel_tool_calls: false, max_tokens: 100, seed: r },
      options
    )
    const call = first.choices[0]!.message.tool_calls![0]!
    const second = complete(
      agentPolicy,
      {
        messages: [
          ...messages,
          {
            role: "assistant",
            content: null,
            tool_calls: [{ id: call.id!, type: "function", function: call.function }]
          },
          { role: "tool", tool_call_id: call.id!, content: "5" }
        ],
        tools,
        tool_choice: "none",
        max_tokens: 8,
        seed: r
      },
      options
    )
    tokens += first.usage.prompt_tokens + second.usage.prompt_tokens
  }
  return { ms: performance.now() - t0, tokens }
}
let uncached = Number.POSITIVE_INFINITY
let cached = Number.POSITIVE_INFINITY
let promptTokens = 0
let saved = 0
for (let i = 0; i < 4; i++) {
  const plain = rollouts(undefined)
  uncached = Math.min(uncached, plain.ms)
  promptTokens = plain.tokens
  const cache = new PrefixCache()
  cached = Math.min(cached, rollouts(cache).ms)
  saved = cache.savedTokens
}
console.log(
  `a group of ${N} two-turn tool rollouts (${promptTokens} prompt tokens): ${uncached.toFixed(0)} ms prefilling every prompt, ${cached.toFixed(0)} ms with the prefix cache (${saved} prompt tokens not run): ${(uncached / cached).toFixed(2)}x`
)
