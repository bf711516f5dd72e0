/**
 * `effect-rl train` as a user runs it: the list of examples, a refused argument, and Ctrl-C (SIGINT) in the
 * middle of a training loop stopping the process promptly and cleanly (no stack trace, no report).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { afterAll, describe, expect, it } from "vitest"
import { cliArgs } from "../support/cli.js"

const root = new URL("../../", import.meta.url).pathname
const children: Array<ChildProcess> = []
afterAll(() => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL")
})

/** Runs the CLI (one Node process, so signals reach it directly; `test/support/cli.ts`). */
const cli = (args: ReadonlyArray<string>) => {
  const { WANDB_API_KEY: _, ...env } = process.env
  const child = spawn(process.execPath, cliArgs(...args), {
    cwd: root,
    env,
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
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  return { child, output: () => out, exited }
}

const until = async (predicate: () => boolean, ms: number) => {
  const deadline = Date.now() + ms
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error("timed out")
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

describe("effect-rl train", () => {
  it("lists the examples without a name; refuses a bad argument with exit code 2", async () => {
    // Three independent processes, started together: most of each one's time is loading the sources.
    const list = cli(["train"])
    const bad = cli(["train", "tictactoe", "--steps", "many"])
    const unknown = cli(["train", "chess"])
    expect(await list.exited).toBe(0)
    expect(list.output()).toContain("examples: arithmetic, judged, minimal, sft-then-rl, tictactoe")
    expect(await bad.exited).toBe(2)
    expect(bad.output()).toContain("--steps must be a positive integer, got 'many'")
    expect(await unknown.exited).toBe(2)
    expect(unknown.output()).toContain("unknown example 'chess'")
  }, 60_000)

  it("stops promptly and cleanly on SIGINT in the middle of the loop", async () => {
    // The example with the cheapest steps (every example runs for two steps in examples.slow.test.ts): the loop is
    // what is interrupted here, not any one example.
    const run = cli(["train", "arithmetic", "--steps", "100"])
    // The loop is running once the first training step is reported.
    await until(() => /step 0 -> 1/.test(run.output()), 90_000)
    const stoppedAt = Date.now()
    run.child.kill("SIGINT")
    const code = await run.exited
    expect(Date.now() - stoppedAt).toBeLessThan(10_000)
    // Interrupted, not failed: no defect or stack trace printed, and the report was not printed either.
    expect(code === 0 || code === 130).toBe(true)
    expect(run.output()).not.toMatch(/\n\s+at |Error:/)
    expect(run.output()).not.toContain("summary:")
    // On the embedded backend, a one-time sign-in link to the dashboard and where the key is are printed
    // before the run (never the key itself). Piped, the run does not stay up after its report, so its temporary
    // data directory goes when it ends: the note says the key file is there only while it runs, and it is gone.
    const note = run
      .output()
      .match(
        /dashboard: http:\/\/127\.0\.0\.1:\d+\/ui\/#token=[\w-]{43}\n {2}\(a one-time sign-in link, good for 10 minutes; after that, sign in with the key in (\S+api-key), while this program runs: its data directory is temporary, removed when it ends\)/
      )
    expect(note).not.toBeNull()
    expect(existsSync(note![1]!)).toBe(false)
  }, 120_000)
})
