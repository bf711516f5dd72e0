/**
 * An agent in its own process, written with the `openai` SDK as usual and trained unchanged by effect-rl:
 * `new OpenAI()` reads OPENAI_BASE_URL and OPENAI_API_KEY, which `effect-rl train-agent` sets to the rollout's
 * endpoint on the rollout gateway (every turn it samples there is recorded). It reads its scenario as JSON from
 * stdin and prints its report as its last line: {"reward": ..., "metrics": ...}.
 *
 * The task is the `minimal` example's (answer "yes" or "no", constrained with vLLM's `structured_outputs`);
 * the reward is 1 for the scenario's expected answer. Train it:
 *
 *   npx effect-rl train-agent "node examples/agents/node/agent.mjs" \
 *     --scenarios examples/agents/scenarios.jsonl --steps 5
 */
import { text } from "node:stream/consumers"
import OpenAI from "openai"

const scenario = JSON.parse((await text(process.stdin)) || process.env.EFFECT_RL_SCENARIO)
const openai = new OpenAI()

const completion = await openai.chat.completions.create({
  model: process.env.OPENAI_MODEL ?? "policy",
  messages: [{ role: "user", content: scenario.question }],
  // A vLLM extension the SDK passes through: the answer is one of these.
  structured_outputs: { choice: ["yes", "no"] },
  max_completion_tokens: 4
})
const answer = (completion.choices[0]?.message.content ?? "").trim()
const expected = scenario.expected ?? "yes"
console.log(JSON.stringify({ reward: answer === expected ? 1 : 0, metrics: { said_yes: answer === "yes" } }))
