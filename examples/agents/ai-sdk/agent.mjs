/**
 * An agent in its own process, written with the Vercel AI SDK on its default provider, `openai(id)` (the
 * Responses API), with a tool, and trained unchanged by effect-rl: the provider reads OPENAI_BASE_URL and
 * OPENAI_API_KEY, which `effect-rl train-agent` sets to the rollout's endpoint on the rollout gateway. It reads
 * its scenario as JSON from stdin and prints its report as its last line: {"reward": ..., "metrics": ...}.
 *
 * The task: look up a price with the `price` tool (a call is required), then answer with the item's price as
 * structured output. The reward is 1 for the right item looked up plus 1 for answering with the price it
 * returned, halved. Train it:
 *
 *   npx effect-rl train-agent "node examples/agents/ai-sdk/agent.mjs" \
 *     --scenarios examples/agents/ai-sdk/scenarios.jsonl --steps 8
 *
 * Needs `ai`, `@ai-sdk/openai` and `zod` (`npm install ai @ai-sdk/openai zod`).
 */
import { text } from "node:stream/consumers"
import { openai } from "@ai-sdk/openai"
import { generateText, Output, stepCountIs, tool } from "ai"
import { z } from "zod"

const scenario = JSON.parse((await text(process.stdin)) || process.env.EFFECT_RL_SCENARIO)
const model = openai(process.env.OPENAI_MODEL ?? "policy")
const items = Object.keys(scenario.prices)
const looked = []
const price = tool({
  description: "The price of an item, in euros",
  inputSchema: z.object({ item: z.enum(items) }),
  execute: async ({ item }) => {
    looked.push(item)
    return scenario.prices[item]
  }
})
const prompt = `How much is the ${scenario.item}? Look it up.`
const first = await generateText({
  model,
  prompt,
  tools: { price },
  toolChoice: "required",
  stopWhen: stepCountIs(1),
  maxOutputTokens: 96
})
const answered = await generateText({
  model,
  messages: [{ role: "user", content: prompt }, ...first.response.messages],
  tools: { price },
  toolChoice: "none",
  output: Output.object({
    schema: z.object({ price: z.enum([...new Set(Object.values(scenario.prices).map(String))]) })
  }),
  maxOutputTokens: 32
}).then(
  (result) => result.output.price,
  () => null
)
const rightItem = looked[0] === scenario.item
const rightPrice = answered === String(scenario.prices[scenario.item])
console.log(
  JSON.stringify({
    reward: (Number(rightItem) + Number(rightPrice)) / 2,
    metrics: { right_item: rightItem, right_price: rightPrice }
  })
)
