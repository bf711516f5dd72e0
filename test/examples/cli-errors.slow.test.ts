/**
 * The command's failures, as a user meets them: one sentence on stderr saying what failed and what to do, no
 * stack trace, exit code 2 for a refused invocation (and nothing written before it) and 1 for a failure;
 * `--help` on every subcommand. Each case is a real `effect-rl` process (`test/support/cli.ts`).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { type CliOutcome, runCli } from "../support/cli.js"

const dirs: Array<string> = []
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "effect-rl-cli-errors-"))
  dirs.push(dir)
  return dir
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

type Outcome = CliOutcome

/** Runs `effect-rl <args>` with `env` over an environment without the service's settings. */
const run = (args: ReadonlyArray<string>, env: Record<string, string> = {}): Promise<Outcome> => {
  const {
    WANDB_API_KEY: _key,
    EFFECT_RL_TRAINING_URL: _training,
    EFFECT_RL_INFERENCE_URL: _inference,
    ...inherited
  } = process.env
  return runCli(args, { ...inherited, HOME: tempDir(), ...env })
}

const noStack = (text: string) => !/\n\s+at |Error:/.test(text)

describe("effect-rl failures", () => {
  it("no key and no URL: one sentence that says what to set, at once, exit code 1", async () => {
    const started = Date.now()
    const outcome = await run(["health"])
    expect(outcome.code).toBe(1)
    expect(outcome.stdout).toBe("")
    expect(outcome.stderr.trim()).toBe(
      "effect-rl health: no WANDB_API_KEY is set: set it for the hosted service, or run `effect-rl serve` and set EFFECT_RL_TRAINING_URL to the URL it prints and WANDB_API_KEY to its key"
    )
    // It did not go looking for the hosted service first.
    expect(Date.now() - started).toBeLessThan(15_000)
  }, 30_000)

  it("a service that does not answer: the call, the cause and what to check; the cause in full with --verbose", async () => {
    const env = { EFFECT_RL_TRAINING_URL: "http://127.0.0.1:9", WANDB_API_KEY: "erl-secret-0123456789" }
    const plain = await run(["health"], env)
    expect(plain.code).toBe(1)
    expect(plain.stderr.trim().split("\n")).toHaveLength(1)
    expect(plain.stderr).toContain("effect-rl health: GET /v1/health failed: connect ECONNREFUSED 127.0.0.1:9")
    expect(plain.stderr).toContain("check the service URL")
    expect(noStack(plain.stderr)).toBe(true)
    const verbose = await run(["health", "--verbose"], env)
    expect(verbose.code).toBe(1)
    expect(verbose.stderr).toContain("ApiError")
    for (const outcome of [plain, verbose]) expect(outcome.stderr + outcome.stdout).not.toContain("erl-secret")
  }, 60_000)

  it("refused flags: exit code 2, a sentence naming the flag, nothing written", async () => {
    const dir = join(tempDir(), "data")
    const cases = await Promise.all([
      run(["serve", "--port", "99999", "--data-dir", dir]),
      run(["serve", "--port", "abc", "--data-dir", dir]),
      run(["serve", "--data-dir"]),
      run(["serve", "--max-body-size", "0", "--data-dir", dir]),
      run(["train", "chess"]),
      run(["train", "tictactoe", "--trace", "nope"]),
      run(["fly"]),
      run(["serve", "--max-queued-tokens", "-5", "--data-dir", dir])
    ])
    const said = cases.map((c) => c.stderr.trim())
    expect(cases.map((c) => c.code)).toEqual([2, 2, 2, 2, 2, 2, 2, 2])
    expect(said[0]).toBe("effect-rl serve: --port must be a port from 0 to 65535, got '99999'")
    expect(said[1]).toBe("effect-rl serve: --port must be a port from 0 to 65535, got 'abc'")
    expect(said[2]).toBe("effect-rl serve: --data-dir needs a value")
    expect(said[3]).toBe("effect-rl serve: --max-body-size must be a positive number of bytes, got '0'")
    expect(said[4]).toMatch(/^effect-rl train: unknown example 'chess'; examples: arithmetic, /)
    expect(said[5]).toBe("effect-rl train: --trace must be a project as entity/project, got 'nope'")
    expect(said[6]).toMatch(/^effect-rl: unknown command 'fly'; the commands: health, /)
    expect(said[7]).toBe("effect-rl serve: --max-queued-tokens must be a positive whole number, got '-5'")
    for (const outcome of cases) {
      expect(outcome.stdout).toBe("")
      expect(noStack(outcome.stderr)).toBe(true)
    }
    // No data directory, no key file: nothing was written before the flags were refused.
    expect(existsSync(dir)).toBe(false)
  }, 60_000)

  it("a port in use: one sentence, exit code 1", async () => {
    const dir = tempDir()
    const { createServer } = await import("node:net")
    const taken = createServer()
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve))
    const port = (taken.address() as { port: number }).port
    const outcome = await run(["serve", "--port", String(port), "--data-dir", dir])
    taken.close()
    expect(outcome.code).toBe(1)
    expect(outcome.stderr.trim()).toBe(
      `effect-rl serve: cannot listen on 127.0.0.1:${port}: listen EADDRINUSE: address already in use 127.0.0.1:${port}`
    )
    // The key it generated before trying to listen is kept for the next start, and never printed on stderr.
    expect(outcome.stderr).not.toContain(readFileSync(join(dir, "api-key"), "utf8").trim())
  }, 60_000)

  it("--help on the command and every subcommand", async () => {
    const outcomes = await Promise.all(
      [[], ["health"], ["models"], ["base-models"], ["train"], ["serve"], ["runner"]].map((args) =>
        run([...args, "--help"])
      )
    )
    expect(outcomes.map((o) => o.code)).toEqual([0, 0, 0, 0, 0, 0, 0])
    expect(outcomes[0]!.stdout).toContain("COMMANDS")
    for (const flag of ["--max-body-size", "--max-n", "--max-queued-tokens", "--request-timeout", "--idle-timeout"]) {
      expect(outcomes[5]!.stdout).toContain(flag)
    }
    expect(outcomes[4]!.stdout).toContain("--trace")
    expect(outcomes[4]!.stdout).toContain("--cluster")
    for (const flag of ["--cluster", "--agents", "--host", "--port", "--capacity"]) {
      expect(outcomes[6]!.stdout).toContain(flag)
    }
  }, 60_000)

  it("runner: without the backend's settings, or with no cluster URL, one sentence and exit code 1", async () => {
    // A module that exports no agents (a plain JS module: the compiled bin, as Node, imports JSON only with an
    // import attribute).
    const module = join(tempDir(), "no-agents.mjs")
    writeFileSync(module, "export const notAgents = 1\n")
    const [unset, badUrl, noAgents] = await Promise.all([
      run(["runner", "--cluster", "postgres://db/rl"]),
      run(["runner", "--cluster", "mysql://user:secret@db/rl"], {
        EFFECT_RL_TRAINING_URL: "http://127.0.0.1:9",
        WANDB_API_KEY: "erl-secret-0123456789"
      }),
      run(["runner", "--cluster", "sqlite:x.db", "--agents", module], {
        EFFECT_RL_TRAINING_URL: "http://127.0.0.1:9",
        WANDB_API_KEY: "erl-secret-0123456789"
      })
    ])
    expect(unset.code).toBe(1)
    expect(unset.stderr.trim()).toMatch(/^effect-rl runner: no WANDB_API_KEY is set/)
    expect(badUrl.code).toBe(1)
    expect(badUrl.stderr.trim()).toBe(
      "effect-rl runner: 'mysql://***@db/rl' is no cluster URL: use postgres://user:password@host:port/db or sqlite:<file>"
    )
    expect(noAgents.code).toBe(1)
    expect(noAgents.stderr.trim()).toMatch(/^effect-rl runner: no agents in .*no-agents\.mjs: export `agents`/)
    for (const outcome of [unset, badUrl, noAgents]) expect(noStack(outcome.stderr)).toBe(true)
  }, 60_000)
})
