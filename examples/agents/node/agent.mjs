/**
 * An agent in its own process, written with the `openai` SDK's primary API, the Responses API, and trained
 * unchanged by effect-rl: `new OpenAI()` reads OPENAI_BASE_URL and OPENAI_API_KEY, which `effect-rl
 * train-agent` sets to the rollout's endpoint on the rollout gateway (the rollout translates each response
 * onto the chat completion its policy samples, and records that). It reads its scenario as JSON from stdin and
 * prints its report as its last line: {"reward": ..., "metrics": ...}.
 *
 * The task is the `minimal` example's (answer "yes" or "no"), here as structured output: `text.format` is a
 * JSON schema whose `answer` is one of the two; the reward is 1 for the scenario's expected answer. Train it:
 *
 *   npx effect-rl train-agent "node examples/agents/node/agent.mjs" \
 *     --scenarios examples/agents/scenarios.jsonl --steps 5
 */
import { text } from "node:stream/consumers"
import OpenAI from "openai"

const scenario = JSON.parse((await text(process.stdin)) || process.env.EFFECT_RL_SCENARIO)
const openai = new OpenAI()

const response = await openai.responses.create({
  model: process.env.OPENAI_MODEL ?? "policy",
  input: scenario.question,
  text: {
    format: {
      type: "json_schema",
      name: "answer",
      strict: true,
      schema: {
        type: "object",
        properties: { answer: { type: "string", enum: ["yes", "no"] } },
        required: ["answer"],
        additionalProperties: false
      }
    }
  },
  max_output_tokens: 24
})
const answer = JSON.parse(response.output_text).answer
const expected = scenario.expected ?? "yes"
console.log(JSON.stringify({ reward: answer === expected ? 1 : 0, metrics: { said_yes: answer === "yes" } }))
