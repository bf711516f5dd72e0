/**
 * Threads on a module of the package (the training and decoding threads) start under any way of running node,
 * including `node --input-type=module -e ...`, whose `--input-type` Node refuses for a module file's thread, and
 * `node --max-old-space-size=...`, whose V8 options Node refuses in a thread's explicit `execArgv`.
 */
import { spawnSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import { threadExecArgv, withoutRefused } from "../../src/internal/moduleThread.js"

const root = join(import.meta.dirname, "..", "..")

/**
 * Starts a thread on a small module from a program run from the repository as `node <flags> --import tsx/esm` and
 * the program: `--input-type=module -e <code>`, or the same code in a file; the run's output.
 */
const startsUnder = (flags: ReadonlyArray<string>, from: "-e" | "file") => {
  const dir = mkdtempSync(join(tmpdir(), "effect-rl-thread-"))
  try {
    const file = join(dir, "thread.mjs")
    writeFileSync(file, `import { parentPort } from "node:worker_threads"\nparentPort.postMessage("started")\n`)
    const moduleThread = pathToFileURL(join(root, "src", "internal", "moduleThread.ts")).href
    const code = `
      const { startModuleThread } = await import(${JSON.stringify(moduleThread)})
      const thread = startModuleThread(${JSON.stringify(pathToFileURL(file).href)})
      thread.on("message", (m) => { console.log(m); thread.terminate() })
      thread.on("error", (e) => { console.log("error: " + e.message); process.exitCode = 1 })`
    const program = join(dir, "main.mjs")
    writeFileSync(program, code)
    const args = from === "-e" ? ["--input-type=module", "-e", code] : [program]
    return spawnSync(process.execPath, [...flags, "--import", "tsx/esm", ...args], { cwd: root, encoding: "utf8" })
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

describe("startModuleThread", () => {
  it("leaves out --input-type, in both of its forms, and keeps the rest", () => {
    expect(
      threadExecArgv(["--input-type=module", "--import", "tsx/esm", "--input-type", "commonjs", "-e", "x"])
    ).toEqual(["--import", "tsx/esm", "-e", "x"])
  })

  it("without --input-type, gives no execArgv: the thread inherits the parent's, V8's options included", () => {
    expect(threadExecArgv(["--max-old-space-size=4096", "--import", "tsx/esm"])).toBeUndefined()
    expect(threadExecArgv([])).toBeUndefined()
  })

  it("leaves out the options a refusal names, written with - or _", () => {
    const refusal = "Initiated Worker with invalid execArgv flags: --max-old-space-size=4096, --expose-gc"
    const execArgv = ["--import", "tsx/esm", "--max-old-space-size=4096", "--expose_gc", "--enable-source-maps"]
    expect(withoutRefused(execArgv, refusal)).toEqual(["--import", "tsx/esm", "--enable-source-maps"])
  })

  it("starts a module file's thread from a program run as node --input-type=module -e", { timeout: 60_000 }, () => {
    const run = startsUnder([], "-e")
    expect(run.stdout.trim()).toBe("started")
    expect(run.status).toBe(0)
  })

  it("starts it under V8's options (--max-old-space-size, --expose_gc), from a file or -e", { timeout: 60_000 }, () => {
    for (const from of ["file", "-e"] as const) {
      const run = startsUnder(["--max-old-space-size=4096", "--expose_gc", "--max-semi-space-size=16"], from)
      expect(run.stderr).not.toContain("invalid execArgv")
      expect(run.stdout.trim()).toBe("started")
      expect(run.status).toBe(0)
    }
  })
})
