/**
 * `effect-rl train-agent` run as a user runs it (on the embedded backend, as a child process: `test/support/cli.ts`),
 * for the command's tests: its exit code and output, the summary line, and whether an agent process still runs.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll } from "vitest"
import { cliArgs } from "../support/cli.js"

/** The repository's root. */
export const root = new URL("../../", import.meta.url).pathname
/**
 * A scratch directory, removed when the test process exits. Not after a file's tests: with `isolate: false` this
 * module is loaded once for every file that imports it, so a file's `afterAll` would remove it under the next.
 */
export const dir = mkdtempSync(join(tmpdir(), "effect-rl-train-agent-"))
const children: Array<ChildProcess> = []
// Each file's commands still running after its tests are killed then; the directory goes with the process.
afterAll(() => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL")
})
process.once("exit", () => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL")
  rmSync(dir, { recursive: true, force: true })
})

/**
 * Runs `effect-rl train-agent` on the embedded backend, to its end (`started` sees it start); `extraEnv` adds
 * variables to the environment, and removes those it sets to `undefined` (`VITEST`, to see the progress lines).
 */
export const trainAgent = async (
  args: ReadonlyArray<string>,
  extraEnv: Readonly<Record<string, string | undefined>> = {},
  started?: (child: ChildProcess, output: () => string) => void
) => {
  const { WANDB_API_KEY: _, EFFECT_RL_BASE_MODEL: __, ...env } = process.env
  const merged: NodeJS.ProcessEnv = { ...env, ...extraEnv }
  for (const [name, value] of Object.entries(extraEnv)) if (value === undefined) delete merged[name]
  const child = spawn(process.execPath, cliArgs("train-agent", ...args), {
    cwd: root,
    env: merged,
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

/** The summary line of a run. */
export interface Summary {
  readonly steps: number
  readonly first_reward: number
  readonly last3_reward: number
  readonly model: string
}

/** The summary line of a run's output (a failure naming the output when there is none). */
export const summaryOf = (out: string): Summary => {
  const line = out.split("\n").find((l) => l.startsWith("summary: "))
  if (line === undefined) throw new Error(`no summary line in:\n${out}`)
  return JSON.parse(line.slice("summary: ".length)) as Summary
}

/** The examples' scenarios of the `minimal` task. */
export const scenarios = join(root, "examples/agents/scenarios.jsonl")

/** Whether a process runs (a zombie orphan, which PID 1 of a container may never reap, does not). */
export const alive = (pid: number) => {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"))
  } catch {
    return false
  }
}
