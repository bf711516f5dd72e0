/**
 * `effect-rl train-agent` as a user runs it, on the embedded backend: the Python agent (standard library) learns
 * the `minimal` example's task, the Node agent (the `openai` SDK) runs end to end, each ending with the summary
 * line; a failing agent is one sentence with its exit code and the end of its stderr (exit code 1); a
 * scenarios file that is not JSONL is refused (exit code 2).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"

const root = new URL("../../", import.meta.url).pathname
const dir = mkdtempSync(join(tmpdir(), "effect-rl-train-agent-"))
const children: Array<ChildProcess> = []
afterAll(() => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL")
  rmSync(dir, { recursive: true, force: true })
})

/** Runs `effect-rl train-agent` from source, on the embedded backend, to its end (`started` sees it start). */
const trainAgent = async (
  args: ReadonlyArray<string>,
  extraEnv: Readonly<Record<string, string>> = {},
  started?: (child: ChildProcess, output: () => string) => void
) => {
  const { WANDB_API_KEY: _, EFFECT_RL_BASE_MODEL: __, ...env } = process.env
  const child = spawn(process.execPath, ["--import", "tsx", join(root, "src/cli/main.ts"), "train-agent", ...args], {
    cwd: root,
    env: { ...env, ...extraEnv },
    stdio: ["ignore", "pipe", "pipe"]
  })
  children.push(child)
  let out = ""
  child.stdout.on("data", (chunk) => {
    out += chunk
  })
  child.stderr.on("data", (chunk) => {
    out += chunk
  })
  const exited = new Promise<number | null>((resolve) => child.once("exit", (c) => resolve(c)))
  started?.(child, () => out)
  const code = await exited
  return { code, out }
}

interface Summary {
  readonly steps: number
  readonly first_reward: number
  readonly last3_reward: number
  readonly model: string
}

const summaryOf = (out: string): Summary => {
  const line = out.split("\n").find((l) => l.startsWith("summary: "))
  if (line === undefined) throw new Error(`no summary line in:\n${out}`)
  return JSON.parse(line.slice("summary: ".length)) as Summary
}

const scenarios = join(root, "examples/agents/scenarios.jsonl")

/** Whether a process runs (a zombie orphan, which PID 1 of a container may never reap, does not). */
const alive = (pid: number) => {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"))
  } catch {
    return false
  }
}

describe("effect-rl train-agent", () => {
  it("trains the Python agent: the reward rises as minimal's does", async () => {
    const run = await trainAgent([
      `python3 ${join(root, "examples/agents/python/agent.py")}`,
      "--scenarios",
      scenarios,
      "--steps",
      "4",
      "--project",
      "agents-test"
    ])
    expect(run.code, run.out).toBe(0)
    const summary = summaryOf(run.out)
    expect(summary.steps).toBe(4)
    expect(summary.model).toMatch(/^wandb-artifact:\/\/\/local\/agents-test\/agent-\d+:step\d$/)
    // The untrained policy answers "yes" about half the time; three trained steps later, mostly.
    expect(summary.last3_reward).toBeGreaterThan(summary.first_reward)
    expect(summary.last3_reward).toBeGreaterThan(0.7)
    expect(run.out).toContain("npx effect-rl train-agent 'python3 ")
  }, 120_000)

  it("runs the Node agent (the openai SDK) end to end", async () => {
    const run = await trainAgent([
      `node ${join(root, "examples/agents/node/agent.mjs")}`,
      "--scenarios",
      scenarios,
      "--steps",
      "1",
      "--group-size",
      "4"
    ])
    expect(run.code, run.out).toBe(0)
    const summary = summaryOf(run.out)
    expect(summary.steps).toBe(1)
    expect(summary.first_reward).toBeGreaterThanOrEqual(0)
  }, 120_000)

  it("a failing agent is one sentence with its exit code and stderr; bad scenarios are refused", async () => {
    const bad = join(dir, "bad.jsonl")
    writeFileSync(bad, '{"question": "ok"}\n{not json\n')
    const [failing, refused] = await Promise.all([
      trainAgent(["python3 -c 'import sys; sys.exit(\"the agent broke\")'", "--scenarios", scenarios, "--steps", "1"]),
      trainAgent(["python3 agent.py", "--scenarios", bad])
    ])
    expect(failing.code, failing.out).toBe(1)
    expect(failing.out).toMatch(
      /effect-rl train-agent: .*the agent command python3 exited with code 1[\s\S]*the agent broke/
    )
    expect(failing.out).not.toMatch(/\n\s+at /)
    expect(failing.out).not.toContain("summary:")
    expect(refused.code, refused.out).toBe(2)
    expect(refused.out).toContain(`effect-rl train-agent: line 2 of ${bad} is not JSON`)
  }, 120_000)

  it("Ctrl-C mid-step stops the command and leaves no agent process behind", async () => {
    const one = join(dir, "one.jsonl")
    writeFileSync(one, '{"question": "q"}\n')
    const pidFile = join(dir, "pids.json")
    let pids: ReadonlyArray<number> = []
    const run = await trainAgent(
      [`python3 ${join(root, "test/workflow/fixtures/external_agent.py")}`, "--scenarios", one, "--group-size", "1"],
      // The agent ignores SIGTERM and leaves a grandchild: only the process group's SIGKILL ends both.
      { MODE: "hang", PID_FILE: pidFile },
      (child, output) => {
        const started = Date.now()
        const poll = setInterval(() => {
          if (existsSync(pidFile)) {
            clearInterval(poll)
            pids = JSON.parse(readFileSync(pidFile, "utf8")) as ReadonlyArray<number>
            child.kill("SIGINT")
          } else if (Date.now() - started > 90_000) {
            clearInterval(poll)
            child.kill("SIGKILL")
            throw new Error(`the agent never started:\n${output()}`)
          }
        }, 50)
      }
    )
    expect(pids).toHaveLength(2)
    // Interrupted, not failed (as `effect-rl train` on SIGINT).
    expect(run.code === 0 || run.code === 130, run.out).toBe(true)
    expect(run.out).not.toMatch(/\n\s+at |Error:/)
    expect(run.out).not.toContain("summary:")
    for (const pid of pids) expect(alive(pid)).toBe(false)
  }, 120_000)
})
