/**
 * `effect-rl train-agent` on a scenarios file larger than a step: `--groups-per-step` (a step runs the agent
 * groups x group size times, whatever the file's length), `--epochs` (passes over the file), each step's
 * scenarios distinct and every scenario run once an epoch; rounded summary figures and the hosted-service advice
 * with the flags given; a run in which every agent fails says why (exit code, stderr) rather than only that
 * nothing trained; a run killed twice (SIGKILL, mid-gather and as a job starts) and run again with the same data
 * directory and model trains every step once and no scenario twice in an epoch, as its store records. On the
 * embedded backend, as a user runs it.
 */
import type { ChildProcess } from "node:child_process"
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { plan } from "../../src/cli/trainAgent.js"
import { dir, root, summaryOf, trainAgent } from "./trainAgentSupport.js"

/** The few calls of `better-sqlite3` the restart test reads the store with (read-only). */
interface Database {
  prepare(sql: string): { all(...params: ReadonlyArray<unknown>): Array<Record<string, unknown>> }
  close(): void
}
const Sqlite = createRequire(import.meta.url)("better-sqlite3") as new (
  file: string,
  options: { readonly readonly: boolean }
) => Database

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

  it("killed mid-run and run again (same data directory and model): every step trained once, no scenario twice an epoch", async () => {
    const file = scenariosFile("restart.jsonl", 12)
    const data = join(dir, "restart-data")
    const log = join(dir, "restart-runs.log")
    writeFileSync(log, "")
    const command = `input=$(cat); printf '%s\\n' "$input" >> ${log}; printf %s "$input" | python3 ${agent}`
    // 12 scenarios, 4 a step, 2 epochs: 6 steps of 4 x 2 runs.
    const args = [command, "--scenarios", file, "--groups-per-step", "4", "--group-size", "2", "--epochs", "2"]
    const runs = () =>
      readFileSync(log, "utf8")
        .split("\n")
        .filter((line) => line !== "").length
    const killWhen = (ready: (output: string) => boolean) => (child: ChildProcess, output: () => string) => {
      const poll = setInterval(() => {
        if (child.exitCode !== null) clearInterval(poll)
        else if (ready(output())) {
          clearInterval(poll)
          child.kill("SIGKILL")
        }
      }, 10)
    }
    const common = ["--model", "restart", "--data-dir", data, "--timeout", "60"]
    // Killed in step 2's gather (steps 0 and 1 ran their 16 runs), then as its first training job starts.
    const first = await trainAgent(
      [...args, ...common],
      {},
      killWhen(() => runs() >= 19)
    )
    expect(first.code, first.out).toBeNull()
    const second = await trainAgent(
      [...args, ...common],
      {},
      killWhen((out) => /training job \S+ started/.test(out))
    )
    expect(second.code, second.out).toBeNull()
    const last = await trainAgent([...args, ...common])
    expect(last.code, last.out).toBe(0)
    expect(summaryOf(last.out).model).toMatch(/\/restart:step\d$/)

    expect(existsSync(join(data, "effect-rl.sqlite"))).toBe(true)
    const db = new Sqlite(join(data, "effect-rl.sqlite"), { readonly: true })
    try {
      const [model] = db.prepare("SELECT id FROM models WHERE name = 'restart'").all()
      const jobs = db
        .prepare("SELECT step FROM training_jobs WHERE model_id = ? AND status = 'COMPLETED' ORDER BY seq")
        .all(model!.id)
      // Each step trained once: one succeeded job per checkpoint 1..6, in order.
      expect(jobs.map((job) => job.step)).toEqual([1, 2, 3, 4, 5, 6])
      const logs = db
        .prepare("SELECT step, trajectory_groups FROM logs WHERE model_id = ? AND split = 'train' ORDER BY created_at")
        .all(model!.id)
      /** The scenario numbers of a logged step's trajectories (each agent asks its scenario's question). */
      const scenariosOf = (groups: string) =>
        (
          JSON.parse(groups) as ReadonlyArray<{
            readonly trajectories: ReadonlyArray<{ readonly messages_and_choices: ReadonlyArray<unknown> }>
          }>
        )
          .flatMap((group) => group.trajectories)
          .map((trajectory) => {
            const asked = JSON.stringify(trajectory.messages_and_choices).match(/Is (\d+) even\?/)
            return Number(asked?.[1])
          })
          .sort((a, b) => a - b)
      const byStep = new Map<number, Array<ReadonlyArray<number>>>()
      for (const entry of logs) {
        const step = Number(entry.step)
        byStep.set(step, [...(byStep.get(step) ?? []), scenariosOf(String(entry.trajectory_groups))])
      }
      expect([...byStep.keys()].sort()).toEqual([0, 1, 2, 3, 4, 5])
      for (const [step, gathered] of byStep) {
        // A step gathered again after a kill draws the same scenarios (they are a function of the step).
        for (const again of gathered) expect(again, `step ${step}`).toEqual(gathered[0])
        expect(gathered[0]).toHaveLength(8)
      }
      // What each epoch trained (its steps' logs): every scenario once, with its group of 2, none twice.
      for (const epoch of [0, 1]) {
        const trained = [0, 1, 2].flatMap((k) => byStep.get(epoch * 3 + k)![0]!).sort((a, b) => a - b)
        expect(trained, `epoch ${epoch}`).toEqual(Array.from({ length: 24 }, (_, i) => Math.floor(i / 2)))
      }
    } finally {
      db.close()
    }
  }, 300_000)
})
