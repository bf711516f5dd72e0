/**
 * `effect-rl health` as a user runs it against a served backend (the training URL from `EFFECT_RL_TRAINING_URL`):
 * it prints the URL it asked beside the service's health and system check, and a refusal names that URL too and
 * never the key. Slow: a server and two CLI processes (about 6 s quiet, over 20 s on a loaded machine).
 */
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { cliArgs, runCli } from "../support/cli.js"

const root = new URL("../../", import.meta.url).pathname

/** Runs the CLI to its end over this environment without a key of its own. */
const cli = (args: ReadonlyArray<string>, env: Record<string, string>) => {
  const { EFFECT_RL_API_KEY: _, ...inherited } = process.env
  return runCli(args, { ...inherited, ...env })
}

describe("effect-rl health", () => {
  it("prints the URL it asked beside the health and system check; a wrong key names the URL too, never the key", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "effect-rl-health-"))
    const { EFFECT_RL_API_KEY: _, ...inherited } = process.env
    const server = spawn(process.execPath, cliArgs("serve", "--port", "0", "--data-dir", dataDir), {
      cwd: root,
      env: { ...inherited, EFFECT_RL_API_KEY: "sk-health" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = ""
        server.stdout.on("data", (chunk) => {
          out += chunk
          const match = /effect-rl serving on (http:\/\/\S+)/.exec(out)
          if (match) resolve(match[1]!)
        })
        server.once("exit", (code) => reject(new Error(`serve exited with ${code}: ${out}`)))
      })
      const ok = await cli(["health"], { WANDB_API_KEY: "sk-health", EFFECT_RL_TRAINING_URL: url })
      expect(ok.code, ok.stderr).toBe(0)
      const printed = JSON.parse(ok.stdout) as { url: string; health: { status: string }; system_check: unknown }
      expect(printed.url).toBe(url)
      expect(printed.health.status).toBe("ok")
      expect(printed.system_check).toBeDefined()
      const refused = await cli(["health"], { WANDB_API_KEY: "sk-wrong", EFFECT_RL_TRAINING_URL: url })
      expect(refused.code).toBe(1)
      expect(refused.stderr).toContain(`(asked ${url})`)
      expect(refused.stderr).not.toContain("sk-wrong")
    } finally {
      server.kill("SIGTERM")
      await new Promise((resolve) => server.once("exit", resolve))
      rmSync(dataDir, { recursive: true, force: true })
    }
  }, 120_000)
})
