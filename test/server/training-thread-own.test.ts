/**
 * The training thread's module serves jobs only in a thread started for it. It is loaded wherever the embedded
 * backend runs, and a program may run the backend in a worker thread of its own (a job runner, a test pool of
 * threads): there, the module once took that thread's `parentPort` for its own, read the program's messages as
 * training jobs, and ran a warm-up pass nobody asked for.
 */
import { spawnSync } from "node:child_process"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { describe, expect, it } from "@effect/vitest"

const root = join(import.meta.dirname, "..", "..")

describe("the training thread's module in a program's own worker thread", () => {
  it("leaves the thread's port to the program", { timeout: 60_000 }, () => {
    const trainingThread = pathToFileURL(join(root, "src", "local", "server", "internal", "trainingThread.ts")).href
    // The program's worker loads the module (as building the backend there does), then talks to its parent.
    const worker = `
      const { register } = await import("tsx/esm/api")
      register()
      const { parentPort } = await import("node:worker_threads")
      await import(${JSON.stringify(trainingThread)})
      parentPort.on("message", (m) => parentPort.postMessage({ echo: m }))
      parentPort.postMessage("ready")`
    const program = `
      import { Worker } from "node:worker_threads"
      const seen = []
      const thread = new Worker(${JSON.stringify(worker)}, { eval: true })
      thread.on("message", (m) => {
        seen.push(m)
        if (m === "ready") thread.postMessage({ type: "work", id: 1 })
      })
      thread.on("error", (e) => seen.push("error: " + e.message))
      // Long enough for a job the module took to fail and say so.
      setTimeout(() => { console.log(JSON.stringify(seen)); thread.terminate() }, 3000)`
    const run = spawnSync(process.execPath, ["--input-type=module", "-e", program], { cwd: root, encoding: "utf8" })
    expect(run.status).toBe(0)
    expect(JSON.parse(run.stdout.trim())).toEqual(["ready", { echo: { type: "work", id: 1 } }])
  })
})
