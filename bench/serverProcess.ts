/**
 * The real `effect-rl serve` (src/cli/main.ts) as a SEPARATE process for the benchmarks, and what the kernel
 * says of a process: its memory (`/proc/<pid>/status`), CPU time (`/proc/<pid>/stat`) and a reset of its peak
 * RSS (`/proc/<pid>/clear_refs`).
 *
 * The server is started as `node --import tsx src/cli/main.ts serve --port 0 ...` (the `tsx` binary would put a
 * wrapper process between the bench and the server, whose memory would then be read), with the API key in
 * `EFFECT_RL_API_KEY` (out of the process list), and is ready when it prints "effect-rl serving on <url>".
 */
import { type ChildProcess, spawn } from "node:child_process"
import { readFileSync, writeFileSync } from "node:fs"

const root = new URL("../", import.meta.url).pathname

/** A running `effect-rl serve` process: its pid, URL and what it wrote to stderr so far. */
export interface Server {
  readonly child: ChildProcess
  readonly pid: number
  readonly url: string
  readonly stderr: () => string
}

export const startServer = (dataDir: string, apiKey: string, nodeArgs: ReadonlyArray<string> = []): Promise<Server> =>
  new Promise((resolve, reject) => {
    const args = [...nodeArgs, "--import", "tsx", "src/cli/main.ts", "serve", "--port", "0", "--data-dir", dataDir]
    // The key goes by env (EFFECT_RL_API_KEY) rather than `--api-key`, so that it is not in the process list.
    const child = spawn(process.execPath, args, {
      cwd: root,
      env: { ...process.env, EFFECT_RL_API_KEY: apiKey },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    let err = ""
    // Both pipes are drained for the whole run, so a chatty server never blocks on a full pipe.
    child.stdout.on("data", (chunk) => {
      if (out.length < 1 << 16) out += chunk
      const match = /effect-rl serving on (http:\/\/\S+)/.exec(out)
      if (match && child.pid !== undefined) {
        clearTimeout(timer)
        resolve({ child, pid: child.pid, url: match[1]!, stderr: () => err })
      }
    })
    child.stderr.on("data", (chunk) => {
      if (err.length < 1 << 16) err += chunk
    })
    const timer = setTimeout(() => reject(new Error(`the server did not start:\n${out}\n${err}`)), 30_000)
    child.once("exit", (code) => {
      clearTimeout(timer)
      reject(new Error(`the server exited with ${code}:\n${out}\n${err}`))
    })
  })

/** Stops the server with SIGTERM (SIGKILL if it has not exited 10 s later). */
export const stopServer = (child: ChildProcess): Promise<void> =>
  new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    const force = setTimeout(() => child.kill("SIGKILL"), 10_000)
    child.once("exit", () => {
      clearTimeout(force)
      resolve()
    })
    child.kill("SIGTERM")
  })

/** A field of `/proc/<pid>/status` in bytes (`VmRSS`, `VmHWM`), or NaN where there is no procfs. */
export const memory = (pid: number, field: "VmRSS" | "VmHWM"): number => {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"))
    return match === null ? Number.NaN : Number(match[1]) * 1024
  } catch {
    return Number.NaN
  }
}

/** CPU seconds (user + system) of a process so far, from `/proc/<pid>/stat` (clock ticks of 10 ms). */
export const cpuSeconds = (pid: number): number => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return (Number(fields[11]) + Number(fields[12])) / 100
  } catch {
    return Number.NaN
  }
}

/** Resets the kernel's peak RSS of `pid` to its current RSS (Linux 4.0+); false where that is not allowed. */
export const resetPeak = (pid: number): boolean => {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, "5")
    return true
  } catch {
    return false
  }
}
