/**
 * `effect-rl train-agent` training agents in their own processes on the embedded backend (slow: run by
 * `npm run test:slow`): the Python agent (standard library, chat completions) and the Node agent (the `openai`
 * SDK on the Responses API) learn the `minimal` example's task as `minimal` does; the AI SDK agent (its default
 * provider, the Responses API, a tool) runs end to end.
 */
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { dir, root, scenarios, summaryOf, trainAgent } from "./trainAgentSupport.js"

/**
 * Trains `command` for 4 steps on minimal's scenarios from the random-init `effect-rl/tiny` (learning from chance;
 * train-agent's own default is the pretrained base): the run's output and summary, checked to rise.
 */
const learns = async (command: string) => {
  const run = await trainAgent([
    command,
    "--scenarios",
    scenarios,
    "--steps",
    "4",
    "--project",
    "agents-test",
    "--base-model",
    "effect-rl/tiny"
  ])
  expect(run.code, run.out).toBe(0)
  const summary = summaryOf(run.out)
  expect(summary.steps).toBe(4)
  expect(summary.model).toMatch(/^wandb-artifact:\/\/\/local\/agents-test\/agent-\d+:step\d$/)
  // The untrained policy answers "yes" about half the time; three trained steps later, mostly.
  expect(summary.last3_reward).toBeGreaterThan(summary.first_reward)
  expect(summary.last3_reward).toBeGreaterThan(0.7)
  return run
}

/** What the test's reward module keeps of a rollout of the AI SDK agent. */
interface SeenRollout {
  readonly scenario: { readonly item: string; readonly prices: Readonly<Record<string, number>> }
  readonly report: { readonly reward: number; readonly metrics: Readonly<Record<string, boolean>> }
  readonly trajectory: {
    readonly tools: ReadonlyArray<unknown>
    readonly messages_and_choices: ReadonlyArray<{
      readonly role?: string
      readonly content?: string | null
      readonly message?: {
        readonly content: string | null
        readonly tool_calls?: ReadonlyArray<{
          readonly id: string
          readonly function: { readonly name: string; readonly arguments: string }
        }>
      }
    }>
  }
}

describe("effect-rl train-agent, learning", () => {
  it("trains the Python agent: the reward rises as minimal's does", async () => {
    const run = await learns(`python3 ${join(root, "examples/agents/python/agent.py")}`)
    expect(run.out).toContain("npx effect-rl train-agent 'python3 ")
  }, 120_000)

  it("trains the Node agent (the openai SDK on the Responses API): the reward rises as minimal's does", async () => {
    await learns(`node ${join(root, "examples/agents/node/agent.mjs")}`)
  }, 180_000)

  it("runs the AI SDK agent (its default provider, the Responses API, with a tool) end to end", async () => {
    const two = join(dir, "prices.jsonl")
    writeFileSync(
      two,
      readFileSync(join(root, "examples/agents/ai-sdk/scenarios.jsonl"), "utf8").split("\n").slice(0, 2).join("\n")
    )
    // A reward module that keeps each rollout's scenario, report and recorded trajectory, and rewards the report:
    // what the agent saw and did is then checked against what it reported, rollout by rollout.
    const seen = join(dir, "seen.jsonl")
    const module = join(dir, "keep.mjs")
    writeFileSync(
      module,
      `import { appendFileSync } from "node:fs"
export const reward = ({ scenario, value, trajectory }) => {
  appendFileSync(${JSON.stringify(seen)}, JSON.stringify({ scenario, report: value.report, trajectory }) + "\\n")
  return value.report
}
`
    )
    const run = await trainAgent([
      `node ${join(root, "examples/agents/ai-sdk/agent.mjs")}`,
      "--scenarios",
      two,
      "--steps",
      "1",
      "--group-size",
      "3",
      "--reward",
      module
    ])
    expect(run.code, run.out).toBe(0)
    const summary = summaryOf(run.out)
    expect(summary.steps).toBe(1)
    const rollouts = readFileSync(seen, "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as SeenRollout)
    expect(rollouts).toHaveLength(6)
    for (const { scenario, report, trajectory } of rollouts) {
      const items = Object.keys(scenario.prices)
      // The tool reached the policy through the Responses API, its enum intact.
      expect(trajectory.tools).toMatchObject([
        { type: "function", function: { name: "price", parameters: { properties: { item: { enum: items } } } } }
      ])
      const [question, call, result, answer, ...rest] = trajectory.messages_and_choices
      expect(rest).toStrictEqual([])
      expect(question).toStrictEqual({ role: "user", content: `How much is the ${scenario.item}? Look it up.` })
      // The required call: one, to `price`, with an item of the scenario; its result the agent's tool returned.
      const calls = call?.message?.tool_calls ?? []
      expect(calls).toHaveLength(1)
      expect(calls[0]!.function.name).toBe("price")
      const { item } = JSON.parse(calls[0]!.function.arguments) as { item: string }
      expect(items).toContain(item)
      expect(result).toStrictEqual({ role: "tool", content: String(scenario.prices[item]), tool_call_id: calls[0]!.id })
      // The structured answer: one of the scenario's prices, as its schema allows.
      const { price } = JSON.parse(answer?.message?.content ?? "null") as { price: string }
      expect(Object.values(scenario.prices).map(String)).toContain(price)
      // The report scores what was done, and the run's reward is the reports' mean.
      const rightItem = item === scenario.item
      const rightPrice = price === String(scenario.prices[scenario.item])
      expect(report).toStrictEqual({
        reward: (Number(rightItem) + Number(rightPrice)) / 2,
        metrics: { right_item: rightItem, right_price: rightPrice }
      })
    }
    const mean = rollouts.reduce((sum, { report }) => sum + report.reward, 0) / rollouts.length
    // The summary shows rewards to four decimals.
    expect(summary.first_reward).toBe(Math.round(mean * 10_000) / 10_000)
  }, 180_000)
})
