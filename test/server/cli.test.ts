/**
 * `effect-rl serve` as a user runs it: its URL printed, the API key generated once and stored (0600), taken
 * from `--api-key` or `EFFECT_RL_API_KEY` otherwise and never printed, and a clean stop on SIGTERM or SIGINT.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"

const root = new URL("../../", import.meta.url).pathname

interface Running {
  readonly child: ChildProcess
  readonly url: string
  readonly stdout: () => string
}

/**
 * Spawns `effect-rl serve` and waits for the line with its URL. One process (`node --import tsx`), as the
 * installed bin runs: the `tsx` binary would start a second Node process to relay signals to.
 */
const serve = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  new Promise<Running>((resolve, reject) => {
    const { EFFECT_RL_API_KEY: _, ...inherited } = process.env
    const child = spawn(process.execPath, ["--import", "tsx", "src/cli/main.ts", "serve", "--port", "0", ...args], {
      cwd: root,
      env: { ...inherited, ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    let err = ""
    const timer = setTimeout(() => reject(new Error(`serve did not start:\n${out}\n${err}`)), 20_000)
    child.stderr.on("data", (chunk) => {
      err += chunk
    })
    child.stdout.on("data", (chunk) => {
      out += chunk
      const match = /effect-rl serving on (http:\/\/\S+)/.exec(out)
      if (match) {
        clearTimeout(timer)
        resolve({ child, url: match[1]!, stdout: () => out })
      }
    })
    child.once("exit", (code) => reject(new Error(`serve exited with ${code}:\n${out}\n${err}`)))
  })

/** Sends SIGTERM (or SIGINT) and resolves with the exit code. */
const stop = (child: ChildProcess, signal: "SIGTERM" | "SIGINT" = "SIGTERM") =>
  new Promise<number | null>((resolve) => {
    if (child.exitCode !== null) return resolve(child.exitCode)
    child.once("exit", (code) => resolve(code))
    child.kill(signal)
  })

const status = async (url: string, key: string) =>
  (await fetch(`${url}/v1/health`, { headers: { authorization: `Bearer ${key}` } })).status

const dirs: Array<string> = []
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "effect-rl-cli-"))
  dirs.push(dir)
  return dir
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

describe("effect-rl serve", () => {
  it("prints its URL, generates a key once, stores it (0600) and reuses it after a restart; stops on signals", async () => {
    const dataDir = tempDir()
    const first = await serve(["--data-dir", dataDir])
    let key: string
    try {
      expect(first.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
      const match = /Generated API key \(shown once, stored in (.+)\): (\S+)/.exec(first.stdout())
      expect(match).not.toBeNull()
      key = match![2]!
      const file = join(dataDir, "api-key")
      expect(match![1]).toBe(file)
      expect(readFileSync(file, "utf8").trim()).toBe(key)
      expect(statSync(file).mode & 0o777).toBe(0o600)
      expect(await status(first.url, key)).toBe(200)
      expect(await status(first.url, "wrong")).toBe(401)
    } finally {
      expect(await stop(first.child)).toBe(0)
    }

    const second = await serve(["--data-dir", dataDir])
    try {
      expect(second.stdout()).not.toContain(key)
      expect(second.stdout()).toContain("Using the API key stored in")
      expect(await status(second.url, key)).toBe(200)
    } finally {
      expect(await stop(second.child, "SIGINT")).toBe(0)
    }
  }, 60_000)

  it("takes the key from --api-key, else from EFFECT_RL_API_KEY, and never prints it", async () => {
    const dataDir = tempDir()
    const flagged = await serve(["--data-dir", dataDir, "--api-key", "sk-from-flag"], { EFFECT_RL_API_KEY: "sk-env" })
    try {
      expect(flagged.stdout()).not.toContain("sk-from-flag")
      expect(await status(flagged.url, "sk-from-flag")).toBe(200)
      expect(await status(flagged.url, "sk-env")).toBe(401)
    } finally {
      await stop(flagged.child)
    }
    const fromEnv = await serve(["--data-dir", dataDir], { EFFECT_RL_API_KEY: "sk-env" })
    try {
      expect(fromEnv.stdout()).not.toContain("sk-env")
      expect(await status(fromEnv.url, "sk-env")).toBe(200)
    } finally {
      await stop(fromEnv.child)
    }
  }, 60_000)

  it("takes the server's bounds as flags: --max-n and --max-request-tokens are what a completion may ask", async () => {
    const dataDir = tempDir()
    const running = await serve([
      "--data-dir",
      dataDir,
      "--api-key",
      "sk-bounds",
      "--max-n",
      "3",
      "--max-request-tokens",
      "20",
      "--request-timeout",
      "5"
    ])
    const complete = async (body: unknown) => {
      const response = await fetch(`${running.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: "Bearer sk-bounds", "content-type": "application/json" },
        body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], ...(body as object) })
      })
      return {
        status: response.status,
        message: ((await response.json()) as { error?: { message: string } }).error?.message
      }
    }
    try {
      expect(await complete({ n: 4, max_tokens: 1 })).toEqual({ status: 400, message: "n must be at most 3, got 4" })
      expect(await complete({ n: 3, max_tokens: 7 })).toEqual({
        status: 400,
        message: "n x max_tokens may be at most 20 tokens per request, got 3 x 7 = 21: lower n or max_tokens"
      })
      expect((await complete({ n: 3, max_tokens: 6 })).status).toBe(200)
    } finally {
      await stop(running.child)
    }
  }, 60_000)
})
