/**
 * Child processes of the tests and benchmarks that need a real process to kill: a TypeScript script run as
 * `node --import tsx <script>` (one process, so a signal reaches the script itself), its stdout and stderr
 * collected, and a wait for something to show.
 */
import { type ChildProcess, spawn } from "node:child_process"

const root = new URL("../../", import.meta.url).pathname

/** A running script: the process, what it printed so far (stdout and stderr) and its exit. */
export interface Child {
  readonly child: ChildProcess
  readonly output: () => string
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

/** Runs `script` (a path from the repository's root) with `args`, from the root, with `env` if given. */
export const spawnTsx = (script: string, args: ReadonlyArray<string>, env?: NodeJS.ProcessEnv): Child => {
  const child = spawn(process.execPath, ["--import", "tsx", script, ...args], {
    cwd: root,
    ...(env === undefined ? {} : { env }),
    stdio: ["ignore", "pipe", "pipe"]
  })
  let out = ""
  child.stdout?.on("data", (chunk) => {
    out += chunk
  })
  child.stderr?.on("data", (chunk) => {
    out += chunk
  })
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal }))
  )
  return { child, output: () => out, exited }
}

/**
 * Polls `probe` every `everyMs` until it gives a value; after `ms`, throws naming `what` with `output()` (what
 * the processes involved printed).
 */
export const until = async <A>(
  what: string,
  probe: () => A | undefined,
  ms: number,
  output: () => string,
  everyMs = 25
): Promise<A> => {
  const deadline = Date.now() + ms
  for (;;) {
    const value = probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}:\n${output()}`)
    await new Promise((resolve) => setTimeout(resolve, everyMs))
  }
}
