/**
 * `effect-rl train-agent` on a scenarios file larger than a step: `--groups-per-step` (a step runs the agent
 * groups x group size times, whatever the file's length), `--epochs` (passes over the file), each step's
 * scenarios distinct and every scenario run once an epoch; rounded summary figures and the hosted-service advice
 * with the flags given; a run in which every agent fails says why (exit code, stderr) rather than only that
 * nothing trained. On the embedded backend, as a user runs it.
 */
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { plan } from "../../src/cli/trainAgent.js"
import { dir, root, summaryOf, trainAgent } from "./trainAgentSupport.js"

const agent = join(root, "examples/agents/python/agent.py")

/** A file of `n` scenarios of the minimal task, each with its number. */
const scenariosFile = (name: string, n: number) => {
  const path = join(dir, name)
  const answers = ["yes", "no"]
  writeFileSync(
    path,
    Array.from({ length: n }, (_, i) =>
      JSON.stringify({ question: `Is ${i} even?`, expected: answers[i % 2], n: i })
    ).join("\n")
  )
  return path
}

describe("effect-rl train-agent on a dataset", () => {
  it("plans groups per step and steps from the file's length, --groups-per-step and --epochs", () => {
    expect(plan(3, {} as never)).toEqual({ groupsPerStep: 3, steps: undefined })
    expect(plan(1000, {} as never)).toEqual({ groupsPerStep: 16, steps: undefined })
    expect(plan(1000, { groupsPerStep: 4 } as never)).toEqual({ groupsPerStep: 4, steps: undefined })
    expect(plan(1000, { groupsPerStep: 4, steps: 7 } as never)).toEqual({ groupsPerStep: 4, steps: 7 })
    expect(plan(10, { groupsPerStep: 4, epochs: 2 } as never)).toEqual({ groupsPerStep: 4, steps: 5 })
    expect(plan(10, { groupsPerStep: 5, epochs: 3 } as never)).toEqual({ groupsPerStep: 5, steps: 6 })
  })

  it("a step runs groups-per-step x group-size agents; an epoch runs every scenario; the advice keeps the flags", async () => {
    const file = scenariosFile("twelve.jsonl", 12)
    const log = join(dir, "runs.log")
    writeFileSync(log, "")
    // Each run logs its scenario's number, then is the Python agent.
    const command = `input=$(cat); printf '%s\\n' "$input" >> ${log}; printf %s "$input" | python3 ${agent}`
    const [run, both] = await Promise.all([
      trainAgent([
        command,
        "--scenarios",
        file,
        "--groups-per-step",
        "4",
        "--group-size",
        "2",
        "--epochs",
        "1",
        "--timeout",
        "60"
      ]),
      trainAgent([command, "--scenarios", file, "--steps", "1", "--epochs", "1"])
    ])
    expect(both.code, both.out).toBe(2)
    expect(both.out).toContain("pass --steps or --epochs, not both")
    expect(run.code, run.out).toBe(0)
    const summary = summaryOf(run.out)
    // One epoch of 12 scenarios, 4 a step: 3 steps of 4 x 2 runs.
    expect(summary.steps).toBe(3)
    const seen = readFileSync(log, "utf8")
      .trim()
      .split("\n")
      .map((line) => (JSON.parse(line) as { n: number }).n)
    expect(seen).toHaveLength(3 * 4 * 2)
    // Every scenario twice (its group of 2), none more.
    const counts = new Map<number, number>()
    for (const n of seen) counts.set(n, (counts.get(n) ?? 0) + 1)
    expect([...counts.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: 12 }, (_, i) => i))
    expect(new Set(counts.values())).toEqual(new Set([2]))
    // Rewards are means of eighths: shown to four decimals at most.
    for (const figure of [summary.first_reward, summary.last3_reward]) {
      expect(Math.round(figure * 10_000) / 10_000).toBe(figure)
    }
    expect(run.out).toMatch(
      /npx effect-rl train-agent .* --scenarios \S+ --epochs 1 --groups-per-step 4 --group-size 2 --timeout 60\n/
    )
  }, 240_000)

  it("when every run fails, the error says how the agent failed", async () => {
    const file = scenariosFile("three.jsonl", 3)
    const failing = await trainAgent([
      "echo 'cannot reach the tool server' >&2; exit 7",
      "--scenarios",
      file,
      "--steps",
      "1",
      "--group-size",
      "2",
      "--max-failures",
      "100"
    ])
    expect(failing.code, failing.out).toBe(1)
    expect(failing.out).toContain(
      "none of the 3 groups has a trajectory (6 rollouts failed; the first: ExternalAgentError"
    )
    expect(failing.out).toContain("exited with code 7")
    expect(failing.out).toContain("cannot reach the tool server")
  }, 120_000)
})
