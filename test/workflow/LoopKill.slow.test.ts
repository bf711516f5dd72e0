/**
 * A training loop killed with SIGKILL while its job is on the backend, then started again with the same
 * state directory: it follows that job instead of gathering and submitting the step again, and no step is
 * trained twice (the jobs of the model are counted in the backend's database).
 *
 * The backend is the real embedded one, in this process on a data directory; the loop is a real child
 * process (`fixtures/loop-child.ts`, run as `node --import tsx`, one process, so the SIGKILL reaches it). A
 * long SFT job of another model is queued first, so the loop's job waits behind it long enough to kill the
 * loop and start it again while the job has not ended.
 */
import type { ChildProcess } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import { afterAll, describe, expect, it } from "vitest"
import * as LocalBackend from "../../src/LocalBackend.js"
import * as Database from "../../src/local/store/Database.js"
import { spawnTsx, until } from "../support/children.js"
import { API_KEY } from "../support/clients.js"

const children: Array<ChildProcess> = []
const dirs: Array<string> = []
const scope = Effect.runSync(Scope.make())

afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  await Effect.runPromise(Scope.close(scope, Exit.void))
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

const tempDir = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  dirs.push(dir)
  return dir
}

/** Runs the loop in a child process; its output and its exit. */
const loop = (url: string, state: string, steps: number) => {
  const started = spawnTsx("test/workflow/fixtures/loop-child.ts", [url, state, String(steps)])
  children.push(started.child)
  return started
}

const api = async <A>(url: string, method: string, path: string, body?: unknown): Promise<A> => {
  const response = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  expect(response.status).toBe(200)
  return (await response.json()) as A
}

/** The training jobs of a model, read from the database file with a read-only connection. */
const jobsOf = (dataDir: string, modelId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<{ readonly id: string; readonly status: string }>`
      SELECT id, status FROM training_jobs WHERE model_id = ${modelId} ORDER BY seq`
  }).pipe(
    Effect.provide(SqliteClient.layer({ filename: Database.filename(dataDir), readonly: true })),
    Effect.scoped,
    Effect.runPromise
  )

describe("a training loop killed while its job trains", () => {
  it("restarted with the same state, follows that job; no step is trained twice", async () => {
    const dataDir = tempDir("effect-rl-loopkill-")
    const files = tempDir("effect-rl-loopkill-data-")
    const state = tempDir("effect-rl-loopkill-state-")
    const context = await Effect.runPromise(
      Layer.buildWithScope(LocalBackend.layer({ dataDir, apiKey: Redacted.make(API_KEY), allowDirs: [files] }), scope)
    )
    const { url } = Context.get(context, LocalBackend.LocalBackend)

    // A long job of another model holds the backend's worker, so the loop's job waits behind it.
    const data = join(files, "long.jsonl")
    const line = (i: number) =>
      JSON.stringify({
        messages: [
          // Long enough a line that 4,000 of them outlast the loop's gather and its restart at the WebAssembly
          // kernels' speed, with room: 1,200 did on a quiet machine (about 6 s of training) but once, in CI with the
          // other slow tests beside it, ended before the restarted loop read the job (2026-12-03).
          { role: "user", content: `Colour ${i % 4}? ${"Say which colour it is, in one word. ".repeat(3)}` },
          { role: "assistant", content: ["red", "green", "blue", "gold"][i % 4] }
        ]
      })
    writeFileSync(data, `${Array.from({ length: 4000 }, (_, i) => line(i)).join("\n")}\n`)
    const blocker = await api<{ id: string }>(url, "POST", "/v1/preview/models", {
      project: "kill",
      name: "blocker",
      base_model: "effect-rl/tiny"
    })
    const blocking = await api<{ id: string }>(url, "POST", "/v1/preview/sft-training-jobs", {
      model_id: blocker.id,
      training_data_url: pathToFileURL(data).href,
      config: { batch_size: 1 }
    })

    // 1. The loop gathers step 0 and submits its job; once the record names the job, kill -9.
    const first = loop(url, state, 2)
    const record = await until(
      "the record of step 0's job",
      () => {
        for (const name of readdirSync(state)) {
          if (!name.endsWith(".step-0.json")) continue
          const parsed = JSON.parse(readFileSync(join(state, name), "utf8")) as { modelId: string; jobId?: string }
          if (parsed.jobId !== undefined) return parsed as { modelId: string; jobId: string }
        }
        return undefined
      },
      30_000,
      first.output
    )
    first.child.kill("SIGKILL")
    expect((await first.exited).signal).toBe("SIGKILL")
    const before = await api<{ status: string }>(url, "GET", `/v1/preview/training-jobs/${record.jobId}`)
    expect(["PENDING", "RUNNING"]).toContain(before.status)
    expect(await jobsOf(dataDir, record.modelId)).toHaveLength(1)

    // 2. Started again on the same state: step 0's job is followed, then step 1 is gathered and trained.
    const second = loop(url, state, 2)
    const { code } = await second.exited
    expect(code, second.output()).toBe(0)
    expect(second.output()).toContain(`step 0: following training job ${record.jobId}`)
    expect(second.output()).toContain("summary [[0,1],[1,2]]")
    const blocked = await api<{ status: string }>(url, "GET", `/v1/preview/training-jobs/${blocking.id}`)
    expect(blocked.status).toBe("COMPLETED")

    // One job per step: the one submitted before the kill and the next step's.
    const jobs = await jobsOf(dataDir, record.modelId)
    expect(jobs).toHaveLength(2)
    expect(jobs[0]?.id).toBe(record.jobId)
    expect(jobs.map((job) => job.status)).toEqual(["COMPLETED", "COMPLETED"])
  }, 120_000)
})
