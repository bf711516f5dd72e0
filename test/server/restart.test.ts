/**
 * Crash and restart of `effect-rl serve`: the CLI is spawned on a data directory, given models, logs, a
 * finished job, a long SFT job (killed while it trains) and a job queued behind it, killed with SIGKILL and
 * started again on the same directory. After the restart the interrupted job has ended `training_failed`
 * (the store's crash recovery, see `Jobs`), the queued job runs to its end, only completed steps have
 * checkpoints (listed or served), and everything acknowledged before the kill is still there.
 *
 * The server is spawned as `node --import tsx`, one process: the `tsx` binary runs the script in a child
 * process, and a SIGKILL sent to `tsx` would leave that child (the real server) running.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Effect from "effect/Effect"
import { afterAll, describe, expect, it } from "vitest"
import * as Database from "../../src/local/store/Database.js"
import { INTERRUPTED_MESSAGE } from "../../src/local/store/Jobs.js"
import { API_KEY } from "../support/clients.js"

const root = new URL("../../", import.meta.url).pathname
const BASE = "effect-rl/tiny"
const WORDS = ["red", "green", "blue", "gold"]

interface Running {
  readonly child: ChildProcess
  readonly url: string
  readonly output: () => string
}

const children: Array<ChildProcess> = []
const dirs: Array<string> = []

const alive = (child: ChildProcess) => child.exitCode === null && child.signalCode === null

afterAll(() => {
  for (const child of children) if (alive(child)) child.kill("SIGKILL")
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

const tempDir = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  dirs.push(dir)
  return dir
}

/** Spawns `effect-rl serve` on a data directory with the test key and waits for the line with its URL. */
const serve = (dataDir: string, allowDir: string) =>
  new Promise<Running>((resolve, reject) => {
    const { EFFECT_RL_API_KEY: _, ...inherited } = process.env
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        "src/cli/main.ts",
        "serve",
        "--port",
        "0",
        "--data-dir",
        dataDir,
        "--api-key",
        API_KEY,
        "--allow-dir",
        allowDir
      ],
      { cwd: root, env: inherited, stdio: ["ignore", "pipe", "pipe"] }
    )
    children.push(child)
    let out = ""
    const timer = setTimeout(() => reject(new Error(`serve did not start:\n${out}`)), 20_000)
    child.stderr.on("data", (chunk) => {
      out += chunk
    })
    child.stdout.on("data", (chunk) => {
      out += chunk
      const match = /effect-rl serving on (http:\/\/\S+)/.exec(out)
      if (match) {
        clearTimeout(timer)
        resolve({ child, url: match[1]!, output: () => out })
      }
    })
    child.once("exit", (code, signal) => reject(new Error(`serve exited (${code ?? signal}):\n${out}`)))
  })

/** Sends a signal and resolves with how the process ended. */
const kill = (child: ChildProcess, signal: "SIGKILL" | "SIGTERM") =>
  new Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>((resolve) => {
    if (!alive(child)) return resolve({ code: child.exitCode, signal: child.signalCode })
    child.once("exit", (code, signal) => resolve({ code, signal }))
    child.kill(signal)
  })

interface Reply<A> {
  readonly status: number
  readonly text: string
  readonly json: A
}

interface Job {
  readonly id: string
  readonly status: string
  readonly step: number | null
  readonly error_message: string | null
  readonly training_end: string | null
}

interface Page<A> {
  readonly data: ReadonlyArray<A>
}

interface Checkpoint {
  readonly id: string
  readonly step: number
  readonly metrics: Readonly<Record<string, number>>
}

interface LogResult {
  readonly metrics: Readonly<Record<string, number>>
}

interface Completion {
  readonly choices: ReadonlyArray<{ readonly message: { readonly content: string } }>
}

/** A JSON request with the test key; every route answers JSON, read as `A` (the assertions check it). */
const api = async <A = unknown>(
  url: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {}
): Promise<Reply<A>> => {
  const response = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json", ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  try {
    return { status: response.status, text, json: JSON.parse(text) as A }
  } catch {
    throw new Error(`${method} ${path} answered ${response.status} with a body that is not JSON: ${text.slice(0, 200)}`)
  }
}

interface JobEvent {
  readonly id: string
  readonly type: string
  readonly data: Record<string, unknown>
}

/** A job's events from the start, long-polling until one satisfies `done` (or 20 s pass). */
const eventsUntil = async (url: string, jobId: string, done: (event: JobEvent) => boolean) => {
  const events: Array<JobEvent> = []
  const deadline = Date.now() + 20_000
  while (Date.now() < deadline) {
    const after = events.at(-1)?.id
    const query = `limit=100&wait_ms=2000${after === undefined ? "" : `&after=${after}`}`
    const page = await api<Page<JobEvent>>(url, "GET", `/v1/preview/training-jobs/${jobId}/events?${query}`)
    expect(page.status).toBe(200)
    events.push(...page.json.data)
    if (events.some(done)) return events
  }
  throw new Error(`job ${jobId} did not reach the awaited event: ${JSON.stringify(events.map((e) => e.type))}`)
}

const ended = (event: JobEvent) => event.type === "training_ended" || event.type === "training_failed"

/** SFT training data: `count` one-turn examples, one JSON object per line. */
const sftFile = (dir: string, name: string, count: number) => {
  const file = join(dir, name)
  const lines = Array.from({ length: count }, (_, i) =>
    JSON.stringify({
      messages: [
        // Long enough a line that the long job is still training when it is killed, at the WebAssembly kernels'
        // speed (a short job of a few lines stays short).
        { role: "user", content: `Colour ${i % 4}? ${"Say which colour it is, in one word. ".repeat(8)}` },
        { role: "assistant", content: WORDS[i % 4] }
      ]
    })
  )
  writeFileSync(file, `${lines.join("\n")}\n`)
  return pathToFileURL(file).href
}

const steps = async (url: string, modelId: string) => {
  const page = await api<Page<Checkpoint>>(url, "GET", `/v1/preview/models/${modelId}/checkpoints?limit=100`)
  expect(page.status).toBe(200)
  return page.json.data
}

const artifact = (name: string, step?: number) =>
  `wandb-artifact:///local/restart/${name}${step === undefined ? "" : `:step${step}`}`

/** The served model ids of this test's models. */
const servedArtifacts = async (url: string) => {
  const list = await api<Page<{ readonly id: string }>>(url, "GET", "/v1/models")
  expect(list.status).toBe(200)
  return list.json.data
    .map((model) => model.id)
    .filter((id) => id.startsWith(artifact("")))
    .sort()
}

const complete = (url: string, model: string) =>
  api<Completion>(url, "POST", "/v1/chat/completions", {
    model,
    messages: [{ role: "user", content: "Colour 1?" }],
    seed: 11,
    max_completion_tokens: 6
  })

/** The mean of each metric over the steps, nulls left out (how a job's checkpoint metrics are formed). */
const meanOf = (metrics: ReadonlyArray<Record<string, unknown>>) => {
  const sums = new Map<string, { sum: number; n: number }>()
  for (const step of metrics) {
    for (const [key, value] of Object.entries(step)) {
      if (typeof value !== "number") continue
      const entry = sums.get(key) ?? { sum: 0, n: 0 }
      sums.set(key, { sum: entry.sum + value, n: entry.n + 1 })
    }
  }
  return Object.fromEntries([...sums].map(([key, { sum, n }]) => [key, sum / n]))
}

/** The log rows of a model, read from the database file with a read-only connection. */
const storedLogs = (dataDir: string, modelId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<{ readonly split: string; readonly step: number; readonly metrics: string }>`
      SELECT split, step, metrics FROM logs WHERE model_id = ${modelId} ORDER BY rowid`
  }).pipe(
    Effect.provide(SqliteClient.layer({ filename: Database.filename(dataDir), readonly: true })),
    Effect.scoped,
    Effect.runPromise
  )

const turn = (reward: number) => ({ messages_and_choices: [{ role: "user", content: "Colour 2?" }], reward })
const trainLog = { split: "train", trajectory_groups: [{ trajectories: [turn(1), turn(0)] }] }
const valLog = { split: "val", trajectory_groups: [{ trajectories: [turn(1), turn(1), turn(0.5)] }] }

describe("effect-rl serve after kill -9", () => {
  it("fails the interrupted job, runs the queued one, serves only whole checkpoints and keeps acknowledged data", async () => {
    const dataDir = tempDir("effect-rl-restart-")
    const dataFiles = tempDir("effect-rl-restart-data-")
    const shortData = sftFile(dataFiles, "short.jsonl", 8)
    const longData = sftFile(dataFiles, "long.jsonl", 3000)

    // 1. State acknowledged before the crash.
    const first = await serve(dataDir, dataFiles)
    const createModel = async (name: string) => {
      const reply = await api<{ readonly id: string }>(first.url, "POST", "/v1/preview/models", {
        project: "restart",
        name,
        base_model: BASE
      })
      expect(reply.status).toBe(200)
      return reply.json.id
    }
    const a = await createModel("a")
    const b = await createModel("b")
    const logTrain = await api<LogResult>(first.url, "POST", `/v1/preview/models/${a}/log`, trainLog, {
      "idempotency-key": "l-1"
    })
    expect(logTrain.status).toBe(200)
    expect(logTrain.json.metrics).toMatchObject({ reward: 0.5, num_trajectories: 2 })

    const done = await api<Job>(first.url, "POST", "/v1/preview/sft-training-jobs", {
      model_id: a,
      training_data_url: shortData
    })
    expect(done.status).toBe(200)
    expect((await eventsUntil(first.url, done.json.id, ended)).at(-1)).toMatchObject({ type: "training_ended" })
    const logVal = await api<LogResult>(first.url, "POST", `/v1/preview/models/${a}/log`, valLog, {
      "idempotency-key": "l-2"
    })
    expect(logVal.status).toBe(200)
    const before = await steps(first.url, a)
    expect(before.map((c) => c.step)).toEqual([0, 1])

    // 2. A long job, killed while it trains, and a job queued behind it on the same model.
    const long = await api<Job>(first.url, "POST", "/v1/preview/sft-training-jobs", {
      model_id: a,
      training_data_url: longData,
      config: { batch_size: 1 }
    })
    expect(long.status).toBe(200)
    const queued = await api<Job>(
      first.url,
      "POST",
      "/v1/preview/sft-training-jobs",
      { model_id: a, training_data_url: shortData },
      { "idempotency-key": "q-1" }
    )
    expect(queued.status).toBe(200)
    const trained = await eventsUntil(first.url, long.json.id, (e) => e.type === "gradient_step")
    expect(trained[0]).toMatchObject({ type: "training_started", data: { num_sequences: 3000 } })
    expect((await api<Job>(first.url, "GET", `/v1/preview/training-jobs/${long.json.id}`)).json.status).toBe("RUNNING")
    expect((await api<Job>(first.url, "GET", `/v1/preview/training-jobs/${queued.json.id}`)).json.status).toBe(
      "PENDING"
    )
    // While it trains, only the finished steps are served.
    expect(await servedArtifacts(first.url)).toEqual([artifact("a", 0), artifact("a", 1), artifact("b", 0)])

    // 3. kill -9, and a restart on the same data directory.
    expect(await kill(first.child, "SIGKILL")).toEqual({ code: null, signal: "SIGKILL" })
    const second = await serve(dataDir, dataFiles)

    // 4. The interrupted job failed; nothing after its last event but the failure.
    const failed = await api<Job>(second.url, "GET", `/v1/preview/training-jobs/${long.json.id}`)
    expect(failed.json).toMatchObject({ status: "FAILED", step: null, error_message: INTERRUPTED_MESSAGE })
    expect(failed.json.training_end).toEqual(expect.any(String))
    const longEvents = await eventsUntil(second.url, long.json.id, ended)
    expect(longEvents.map((e) => e.type).filter((t) => t !== "gradient_step")).toEqual([
      "training_started",
      "training_failed"
    ])
    expect(longEvents.at(-1)?.data).toEqual({ error_message: INTERRUPTED_MESSAGE })
    // It was killed mid-job: some of its 3000 steps taken, not all.
    const longSteps = longEvents.filter((e) => e.type === "gradient_step").length
    expect(longSteps).toBeGreaterThan(0)
    expect(longSteps).toBeLessThan(3000)

    // The queued job still runs, from the last whole checkpoint, to the next step.
    const queuedEvents = await eventsUntil(second.url, queued.json.id, ended)
    expect(queuedEvents.at(-1)).toMatchObject({ type: "training_ended", data: { step: 2 } })
    expect((await api<Job>(second.url, "GET", `/v1/preview/training-jobs/${queued.json.id}`)).json).toMatchObject({
      status: "COMPLETED",
      step: 2,
      error_message: null
    })
    // Its acknowledged creation is remembered: the same Idempotency-Key answers the same job.
    const replayed = await api<Job>(
      second.url,
      "POST",
      "/v1/preview/sft-training-jobs",
      { model_id: a, training_data_url: shortData },
      { "idempotency-key": "q-1" }
    )
    expect(replayed.json.id).toBe(queued.json.id)

    // Checkpoints: the ones from before the crash unchanged, and step 2 is the queued job's (its steps' mean).
    const after = await steps(second.url, a)
    expect(after.map((c) => c.step)).toEqual([0, 1, 2])
    expect(after.slice(0, 2)).toEqual(before)
    const queuedSteps = queuedEvents.filter((e) => e.type === "gradient_step").map((e) => e.data)
    expect(queuedSteps.length).toBeGreaterThan(0)
    const expected = meanOf(queuedSteps)
    const metrics = after[2]!.metrics
    expect(Object.keys(metrics).sort()).toEqual(Object.keys(expected).sort())
    for (const [key, value] of Object.entries(expected)) expect(metrics[key]).toBeCloseTo(value, 10)
    expect((await steps(second.url, b)).map((c) => c.step)).toEqual([0])

    // Served: exactly the whole checkpoints; the latest name is step 2; no step past it.
    expect(await servedArtifacts(second.url)).toEqual([
      artifact("a", 0),
      artifact("a", 1),
      artifact("a", 2),
      artifact("b", 0)
    ])
    const latest = await complete(second.url, artifact("a"))
    expect(latest.status).toBe(200)
    const content = (reply: Reply<Completion>) => reply.json.choices[0]?.message.content
    expect(typeof content(latest)).toBe("string")
    expect(content(await complete(second.url, artifact("a", 2)))).toBe(content(latest))
    expect((await complete(second.url, artifact("a", 3))).status).toBe(404)
    expect((await complete(second.url, artifact("b"))).status).toBe(200)

    // The acknowledged log is remembered (same key, same answer) and the server is healthy.
    const logAgain = await api<LogResult>(second.url, "POST", `/v1/preview/models/${a}/log`, trainLog, {
      "idempotency-key": "l-1"
    })
    expect(logAgain.status).toBe(200)
    expect(logAgain.text).toBe(logTrain.text)
    expect((await api(second.url, "GET", "/v1/health")).json).toEqual({ status: "ok" })
    const check = await api(second.url, "GET", "/v1/system-check")
    expect(check.status).toBe(200)
    expect(check.json).toMatchObject({ api: true, database: true })

    expect(await kill(second.child, "SIGTERM")).toEqual({ code: 0, signal: null })
    expect(first.output()).not.toContain(API_KEY)
    expect(second.output()).not.toContain(API_KEY)

    // With the server gone: each acknowledged log stored once, under the step it was logged at, with its metrics.
    const logs = await storedLogs(dataDir, a)
    expect(logs.map((row) => [row.split, row.step, JSON.parse(row.metrics)])).toEqual([
      ["train", 0, logTrain.json.metrics],
      ["val", 1, logVal.json.metrics]
    ])
    // Checkpoints live in the database: the data directory holds nothing but its files and its lock file.
    const files = readdirSync(dataDir)
    expect(files).toContain(Database.FILE_NAME)
    for (const file of files) expect(file).toMatch(/^effect-rl\.(sqlite(-wal|-shm)?|lock)$/)
  }, 60_000)
})
