/**
 * Threads on a module of the package (the training and decoding threads) start under any way of running node,
 * including `node --input-type=module -e ...`, whose `--input-type` Node refuses for a module file's thread.
 */
import { spawnSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import { threadExecArgv } from "../../src/internal/moduleThread.js"

const root = join(import.meta.dirname, "..", "..")

describe("startModuleThread", () => {
  it("leaves out --input-type, in both of its forms, and keeps the rest", () => {
    expect(
      threadExecArgv(["--input-type=module", "--import", "tsx/esm", "--input-type", "commonjs", "-e", "x"])
    ).toEqual(["--import", "tsx/esm", "-e", "x"])
  })

  it("starts a module file's thread from a program run as node --input-type=module -e", { timeout: 60_000 }, () => {
    const dir = mkdtempSync(join(tmpdir(), "effect-rl-thread-"))
    try {
      const file = join(dir, "thread.mjs")
      writeFileSync(file, `import { parentPort } from "node:worker_threads"\nparentPort.postMessage("started")\n`)
      const code = `
        const { startModuleThread } = await import("./src/internal/moduleThread.ts")
        const thread = startModuleThread(${JSON.stringify(pathToFileURL(file).href)})
        thread.on("message", (m) => { console.log(m); thread.terminate() })
        thread.on("error", (e) => { console.log("error: " + e.message); process.exitCode = 1 })`
      const run = spawnSync(process.execPath, ["--import", "tsx/esm", "--input-type=module", "-e", code], {
        cwd: root,
        encoding: "utf8"
      })
      expect(run.stdout.trim()).toBe("started")
      expect(run.status).toBe(0)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
