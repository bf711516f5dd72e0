/**
 * What the MCP tests share: the test server (`fixtures/mcp-server.mjs`, the official SDK's server run as its own
 * process), a policy that plays a script of turns, and checks that a process is gone.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { join } from "node:path"
import * as Effect from "effect/Effect"

/** The test server's script. */
export const SERVER = join(import.meta.dirname, "fixtures", "mcp-server.mjs")

/** The test server over stdio, as a program and its arguments. */
export const stdioServer = { command: [process.execPath, SERVER] } as const

export { scripted, type Turn } from "./scripted.js"

/** Whether a process runs (a zombie counts as gone: `ps` says so where `kill 0` would not). */
export const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  try {
    return !execFileSync("ps", ["-o", "stat=", "-p", String(pid)], { encoding: "utf8" }).startsWith("Z")
  } catch {
    return false
  }
}

/** Waits (up to `ms`) until none of `pids` runs; the ones still running then. */
export const goneWithin = (pids: ReadonlyArray<number>, ms = 3000): Promise<ReadonlyArray<number>> =>
  new Promise((resolve) => {
    const started = Date.now()
    const poll = () => {
      const left = pids.filter(alive)
      if (left.length === 0 || Date.now() - started > ms) resolve(left)
      else setTimeout(poll, 50)
    }
    poll()
  })

/** The test server over Streamable HTTP, started as a process for the scope: its URL. */
export const httpServer = Effect.acquireRelease(
  Effect.async<{ readonly url: string; readonly child: ChildProcess }, Error>((resume) => {
    const child = spawn(process.execPath, [SERVER, "--http"], { stdio: ["ignore", "pipe", "inherit"] })
    let out = ""
    child.stdout.setEncoding("utf8")
    child.stdout.on("data", (chunk: string) => {
      out += chunk
      const match = /listening (\S+)/.exec(out)
      if (match !== null) resume(Effect.succeed({ url: match[1]!, child }))
    })
    child.once("exit", (code) => resume(Effect.fail(new Error(`the HTTP test server exited (${code})`))))
  }),
  ({ child }) =>
    Effect.async<void>((resume) => {
      if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
      child.once("exit", () => resume(Effect.void))
      child.kill("SIGKILL")
    })
)
