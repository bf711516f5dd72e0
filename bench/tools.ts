/**
 * Tool calls in the local engine: calls/s and sampled tokens/s of chat completions whose output is a call with
 * constrained arguments (`tool_choice: "required"`, two tools with JSON-schema parameters), beside the same
 * model sampling free text for the same number of tokens in the same run (the baseline; the ratio is the cost
 * of the grammar: its compilation per request and its masks per token). Times are the best of several runs.
 * Run: `npx tsx bench/tools.ts`.
 */
import { loadavg } from "node:os"
import type { ChatCompletionRequest } from "../src/api/ChatCompletion.js"
import type { Tool } from "../src/api/ChatMessage.js"
import { Policy } from "../src/local/engine/Policy.js"
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
