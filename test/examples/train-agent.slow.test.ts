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
    const run = await trainAgent([
      `node ${join(root, "examples/agents/ai-sdk/agent.mjs")}`,
      "--scenarios",
      two,
      "--steps",
      "1",
      "--group-size",
      "3"
    ])
    expect(run.code, run.out).toBe(0)
    const summary = summaryOf(run.out)
    expect(summary.steps).toBe(1)
    expect(summary.first_reward).toBeGreaterThanOrEqual(0)
  }, 180_000)
})
