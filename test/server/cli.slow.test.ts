/**
 * `effect-rl serve` as a user runs it: its URL printed, the API key generated once and stored (0600), taken
 * from `--api-key` or `EFFECT_RL_API_KEY` otherwise and never printed, and a clean stop on SIGTERM or SIGINT.
 * One server per data directory (issue 18, part 5): a second one refuses, naming the first, and leaves its
 * running job alone; after the first is killed with SIGKILL a new one starts. Private by default (part 6):
 * the directory 0700 and its files 0600, with `--api-key` too.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { cliArgs } from "../support/cli.js"

const root = new URL("../../", import.meta.url).pathname

interface Running {
  readonly child: ChildProcess
  readonly url: string
  readonly stdout: () => string
}

/**
 * Spawns `effect-rl serve` and waits for the line with its URL. One Node process (`test/support/cli.ts`), as the
 * installed bin runs: the `tsx` binary would start a second Node process to relay signals to.
 */
const serve = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  new Promise<Running>((resolve, reject) => {
    const { EFFECT_RL_API_KEY: _, ...inherited } = process.env
    const child = spawn(process.execPath, cliArgs("serve", "--port", "0", ...args), {
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

/** Runs `effect-rl serve` expecting it to exit by itself (refused); its exit code and output. */
const serveRefused = (args: ReadonlyArray<string>) =>
  new Promise<{ readonly code: number | null; readonly stdout: string; readonly stderr: string }>((resolve, reject) => {
    const { EFFECT_RL_API_KEY: _, ...inherited } = process.env
    const child = spawn(process.execPath, cliArgs("serve", "--port", "0", ...args), {
      cwd: root,
      env: inherited,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    let err = ""
    child.stdout.on("data", (chunk) => {
      out += chunk
    })
    child.stderr.on("data", (chunk) => {
      err += chunk
    })
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`serve did not exit:\n${out}\n${err}`))
    }, 20_000)
    child.once("exit", (code) => {
      clearTimeout(timer)
      resolve({ code, stdout: out, stderr: err })
    })
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

/** A request with a key; the status and the JSON answered. */
const api = async <A>(url: string, key: string, method: string, path: string, body?: string | object) => {
  const response = await fetch(`${url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      "content-type": typeof body === "string" ? "application/jsonl" : "application/json"
    },
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) })
  })
  return { status: response.status, json: (await response.json()) as A }
}

interface Job {
  readonly id: string
  readonly status: string
  readonly error_message: string | null
}

/** Polls a job until `done` holds of it (20 s at most). */
const jobUntil = async (url: string, key: string, id: string, done: (job: Job) => boolean) => {
  for (let i = 0; i < 200; i++) {
    const job = await api<Job>(url, key, "GET", `/v1/preview/training-jobs/${id}`)
    if (done(job.json)) return job.json
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`job ${id} did not reach the awaited state`)
}

/** SFT JSONL of `count` one-turn examples. */
const sftJsonl = (count: number) =>
  Array.from({ length: count }, (_, i) =>
    JSON.stringify({
      messages: [
        // Long enough a line that the job runs on through the test at the WebAssembly kernels' speed (it is
        // killed with its server, so its length costs nothing).
        { role: "user", content: `Colour ${i % 4}? ${"Say which colour it is, in one word. ".repeat(8)}` },
        { role: "assistant", content: ["red", "blue", "green", "gold"][i % 4] }
      ]
    })
  ).join("\n")

/** Kills with SIGKILL and resolves once the process is gone. */
const kill9 = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    child.once("exit", () => resolve())
    child.kill("SIGKILL")
  })

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
  it("prints its URL and its dashboard's, generates a key once, stores it (0600) and reuses it after a restart; stops on signals", async () => {
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
      // A one-time sign-in link to the dashboard, served by the backend itself (its page needs no key; its
      // reads do): the token in the link's fragment is good for the key once.
      const link = new RegExp(`dashboard: ${first.url}/ui/#token=([\\w-]{43})\n`).exec(first.stdout())
      expect(link).not.toBeNull()
      expect((await fetch(`${first.url}/ui/`)).status).toBe(200)
      const signIn = () =>
        fetch(`${first.url}/v1/local/sign-in`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ token: link![1] })
        })
      expect(await (await signIn()).json()).toEqual({ api_key: key })
      expect((await signIn()).status).toBe(401)
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

  it("a second serve on the data directory refuses, naming the first, and leaves its running job alone; after kill -9 of the first a new one starts", async () => {
    const dataDir = tempDir()
    const key = "sk-owner"
    const first = await serve(["--data-dir", dataDir, "--api-key", key])
    try {
      const file = await api<{ readonly url: string }>(first.url, key, "POST", "/v1/local/files", sftJsonl(3000))
      expect(file.status).toBe(200)
      const model = await api<{ readonly id: string }>(first.url, key, "POST", "/v1/preview/models", {
        project: "owner",
        name: "long",
        base_model: "effect-rl/tiny"
      })
      const long = await api<Job>(first.url, key, "POST", "/v1/preview/sft-training-jobs", {
        model_id: model.json.id,
        training_data_url: file.json.url,
        config: { batch_size: 1 }
      })
      expect(long.status).toBe(200)
      await jobUntil(first.url, key, long.json.id, (job) => job.status === "RUNNING")

      const second = await serveRefused(["--data-dir", dataDir, "--api-key", "sk-other"])
      expect(second.code).toBe(1)
      expect(second.stdout).not.toContain("serving on")
      expect(second.stderr).toContain(`the data directory ${dataDir} is in use by another effect-rl server`)
      expect(second.stderr).toContain(`pid ${first.child.pid}`)
      expect(second.stderr).toContain(first.url)
      // The first one serves on, its job still running (a second store would have failed it on start-up).
      expect(await status(first.url, key)).toBe(200)
      expect((await api<Job>(first.url, key, "GET", `/v1/preview/training-jobs/${long.json.id}`)).json.status).toBe(
        "RUNNING"
      )
      expect(JSON.parse(readFileSync(join(dataDir, "server.json"), "utf8"))).toEqual({
        pid: first.child.pid,
        url: first.url
      })

      await kill9(first.child)
      const third = await serve(["--data-dir", dataDir, "--api-key", key])
      try {
        // The new server holds the directory: it recovered the killed one's job.
        const failed = await jobUntil(third.url, key, long.json.id, (job) => job.status !== "RUNNING")
        expect(failed.status).toBe("FAILED")
        expect(JSON.parse(readFileSync(join(dataDir, "server.json"), "utf8"))).toEqual({
          pid: third.child.pid,
          url: third.url
        })
      } finally {
        expect(await stop(third.child)).toBe(0)
      }
      expect(existsSync(join(dataDir, "server.json"))).toBe(false)
    } finally {
      await kill9(first.child)
    }
  }, 90_000)

  it("with --api-key, the data directory is made 0700 (an existing open one too) and every file in it 0600", async () => {
    const dataDir = join(tempDir(), "data")
    mkdirSync(dataDir, { mode: 0o755 })
    chmodSync(dataDir, 0o755)
    const running = await serve(["--data-dir", dataDir, "--api-key", "sk-private"])
    try {
      // Writes, so that the WAL has content.
      const file = await api<{ readonly id: string }>(running.url, "sk-private", "POST", "/v1/local/files", sftJsonl(4))
      expect(file.status).toBe(200)
      expect(statSync(dataDir).mode & 0o777).toBe(0o700)
      const files = readdirSync(dataDir).sort()
      expect(files).toEqual(
        expect.arrayContaining([
          "effect-rl.lock",
          "effect-rl.sqlite",
          "effect-rl.sqlite-shm",
          "effect-rl.sqlite-wal",
          "server.json"
        ])
      )
      for (const name of files) expect([name, statSync(join(dataDir, name)).mode & 0o777]).toEqual([name, 0o600])
    } finally {
      expect(await stop(running.child)).toBe(0)
    }
  }, 60_000)
})
