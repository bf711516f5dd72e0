/**
 * `effect-rl train-mcp` run as a user runs it on the `mcp` example's server (its own process over stdio) and tasks,
 * on the embedded backend: one step with the example's reward module, the summary line; refusals before anything
 * starts (exit code 2); and the example itself, run as a user runs it, learning: its reward over the last three of
 * its eight steps above its first step's (0.18 to 0.31 above in ten runs measured, see its header).
 */

import { spawn } from "node:child_process"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { cliArgs } from "../support/cli.js"
import { root, summaryOf } from "./trainAgentSupport.js"

const trainMcp = (args: ReadonlyArray<string>) =>
  new Promise<{ readonly code: number | null; readonly out: string }>((resolve) => {
    const { WANDB_API_KEY: _, EFFECT_RL_BASE_MODEL: __, ...env } = process.env
    const child = spawn(process.execPath, cliArgs("train-mcp", ...args), {
      cwd: root,
      env,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    child.stdout.on("data", (chunk) => {
      out += chunk
    })
    child.stderr.on("data", (chunk) => {
      out += chunk
    })
    child.once("exit", (code) => resolve({ code, out }))
  })

describe("MCP", () => {
  it("examples/mcp.ts: the reward of the last three steps is above the first step's", {
    timeout: 300_000
  }, async () => {
    const { WANDB_API_KEY: _, EFFECT_RL_BASE_MODEL: __, ...env } = process.env
    const child = spawn(process.execPath, ["--import", "tsx", join(root, "examples/mcp.ts")], {
      cwd: root,
      env,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    child.stdout.on("data", (chunk) => {
      out += chunk
    })
    child.stderr.on("data", (chunk) => {
      out += chunk
    })
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve))
    expect(code, out).toBe(0)
    const summary = summaryOf(out)
    expect(summary.steps).toBe(8)
    expect(summary.last3_reward!, out).toBeGreaterThan(summary.first_reward!)
  })

  it("effect-rl train-mcp: a step on the example's server and tasks; refusals", { timeout: 300_000 }, async () => {
    const server = `node ${join(root, "examples/mcp/server.mjs")}`
    const scenarios = join(root, "examples/mcp/scenarios.jsonl")
    const [run, both, generate, noReward] = await Promise.all([
      trainMcp([
        server,
        "--scenarios",
        scenarios,
        "--reward",
        join(root, "examples/mcp/reward.mjs"),
        "--steps",
        "1",
        "--group-size",
        "4",
        "--max-turns",
        "2",
        "--max-tokens",
        "80"
      ]),
      trainMcp([server, "--url", "http://127.0.0.1:9/mcp", "--scenarios", scenarios]),
      trainMcp([server, "--scenarios", scenarios, "--generate", "4"]),
      trainMcp([server, "--scenarios", scenarios])
    ])
    expect(run.code, run.out).toBe(0)
    expect(run.out).toContain("lists weather, time")
    expect(summaryOf(run.out)).toMatchObject({ steps: 1 })
    expect(both.code).toBe(2)
    expect(both.out).toContain("its command line")
    expect(generate.code).toBe(2)
    expect(generate.out).toContain("--generate <n> and --writer <model> go together")
    // No reward module on the embedded backend: the default judge (the base model) cannot judge; said at once.
    expect(noReward.code).toBe(2)
    expect(noReward.out).toContain("on the embedded backend, pass --reward <module>")
  })
})
