/**
 * Rollouts on a cluster of real processes: a real Postgres (Debian's `postgresql`, started here in a temporary
 * directory) as the cluster's storage, three runner processes (`fixtures/cluster-runner.ts`) and a driver
 * process (`fixtures/cluster-driver.ts`), all on this machine, the runners calling the embedded backend that
 * runs in this process. The agent (`fixtures/cluster-agent.ts`) logs each run's start and end to a file, with
 * the runner's pid, so the test counts how many times each rollout ran and where.
 *
 * - a step's gather completes with every rollout exactly once (and spread over the runners), and a training
 *   loop with the cluster layer trains a step;
 * - the driver SIGKILLed mid-gather and started again with the same key completes the gather, and no rollout
 *   ran twice (the finished ones came from storage, those in flight finished on their runners);
 * - a runner SIGKILLed mid-gather (with rollouts in flight): the gather completes with every rollout exactly
 *   once, those in flight on the dead runner run again on another.
 *
 * Without Postgres binaries the tests are skipped, loudly.
 */
import type { ChildProcess } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as LocalBackend from "../../src/LocalBackend.js"
import { type Child, spawnTsx, until } from "../support/children.js"
import { API_KEY } from "../support/clients.js"
import * as Pg from "../support/postgres.js"

const bin = Pg.binaries()
if (bin === undefined) {
  console.warn(
    "\n*** RolloutCluster.slow.test.ts: NO POSTGRES BINARIES (initdb, pg_ctl on PATH or under /usr/lib/postgresql) — " +
      "THE CLUSTER TESTS ARE SKIPPED. Install Debian's postgresql (.ci/run does). ***\n"
  )
}

const children: Array<ChildProcess> = []
const dirs: Array<string> = []
const scope = Effect.runSync(Scope.make())
let postgres: Pg.Postgres | undefined
let env: NodeJS.ProcessEnv = {}
let log = ""
let cluster = ""
let runners: Array<Child> = []

const spawnChild = (script: string, args: ReadonlyArray<string>): Child => {
  const started = spawnTsx(script, args, env)
  children.push(started.child)
  return started
}

/** The log's lines: what happened (`start`/`done`), the rollout (`<scenario id>/<index>`), the runner's pid. */
const entries = () =>
  (existsSync(log) ? readFileSync(log, "utf8") : "")
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => {
      const [event, key, pid] = line.split(" ")
      return { event: event!, key: key!, pid: Number(pid) }
    })

const of = (prefix: string, event: string) =>
  entries().filter((e) => e.event === event && e.key.startsWith(`${prefix}-`))

/** How many times each rollout of a gather had `event`, by key. */
const counts = (prefix: string, event: string) => {
  const map = new Map<string, number>()
  for (const e of of(prefix, event)) map.set(e.key, (map.get(e.key) ?? 0) + 1)
  return map
}

const allKeys = (prefix: string, groups: number, n: number) =>
  Array.from({ length: groups * n }, (_, k) => `${prefix}-${Math.floor(k / n)}/${k % n}`).sort()

interface Result {
  readonly index: number
  readonly id: string
  readonly rollouts: ReadonlyArray<{ readonly index: number; readonly pid: number; readonly reward: number }>
  readonly exceptions: number
}

const driver = (mode: "gather" | "loop", prefix: string, groups: number, n: number) => {
  const out = join(dirs[0]!, `${prefix}.json`)
  return {
    out,
    process: spawnChild("test/workflow/fixtures/cluster-driver.ts", [
      cluster,
      mode,
      prefix,
      String(groups),
      String(n),
      out
    ])
  }
}

const finish = async (child: Child, ms = 60_000) => {
  const exit = await Promise.race([
    child.exited,
    new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), ms))
  ])
  if (exit === undefined || exit.code !== 0) {
    throw new Error(`the driver ${exit === undefined ? "did not finish" : `exited ${exit.code}`}:\n${child.output()}`)
  }
}

/** Every rollout of every group exactly once, no exception. */
const expectComplete = (result: ReadonlyArray<Result>, prefix: string, groups: number, n: number) => {
  expect(result.map((g) => g.id)).toEqual(Array.from({ length: groups }, (_, g) => `${prefix}-${g}`))
  for (const group of result) {
    expect(group.exceptions).toBe(0)
    expect(group.rollouts.map((r) => r.index)).toEqual(Array.from({ length: n }, (_, i) => i))
  }
}

beforeAll(async () => {
  if (bin === undefined) return
  const dir = mkdtempSync(join(tmpdir(), "effect-rl-cluster-"))
  dirs.push(dir)
  log = join(dir, "runs.log")
  postgres = await Pg.start(bin)
  cluster = postgres.database("rollouts")
  const backend = await Effect.runPromise(
    Layer.buildWithScope(LocalBackend.layer({ apiKey: Redacted.make(API_KEY) }), scope).pipe(
      Effect.map((context) => Context.get(context, LocalBackend.LocalBackend))
    )
  )
  env = {
    ...process.env,
    WANDB_API_KEY: API_KEY,
    EFFECT_RL_TRAINING_URL: backend.url,
    EFFECT_RL_INFERENCE_URL: backend.url,
    EFFECT_RL_TRACE_URL: backend.url,
    CLUSTER_LOG: log,
    CLUSTER_PAUSE_MS: "400"
  }
  const ports = await Promise.all([Pg.freePort(), Pg.freePort(), Pg.freePort()])
  runners = ports.map((port) => spawnChild("test/workflow/fixtures/cluster-runner.ts", [cluster, String(port), "2"]))
  for (const runner of runners) {
    await until(
      "a runner to listen",
      () => (/Listening on/.test(runner.output()) ? true : undefined),
      45_000,
      runner.output
    )
  }
}, 90_000)

afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  await Effect.runPromise(Scope.close(scope, Exit.void))
  postgres?.stop()
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

describe.skipIf(bin === undefined)("RolloutCluster on Postgres, three runner processes and a driver", () => {
  it("a step's gather completes with every rollout exactly once, and a loop with the cluster layer trains", async () => {
    const gather = driver("gather", "once", 4, 6)
    await finish(gather.process)
    const result = JSON.parse(readFileSync(gather.out, "utf8")) as ReadonlyArray<Result>
    expectComplete(result, "once", 4, 6)
    const done = counts("once", "done")
    expect([...done.keys()].sort()).toEqual(allKeys("once", 4, 6))
    expect([...done.values()].every((count) => count === 1)).toBe(true)
    // The work was spread: more than one runner ran rollouts.
    expect(new Set(result.flatMap((g) => g.rollouts.map((r) => r.pid))).size).toBeGreaterThan(1)

    const loop = driver("loop", "loop", 2, 4)
    await finish(loop.process)
    const summary = JSON.parse(readFileSync(loop.out, "utf8")) as {
      readonly finalStep: number
      readonly steps: ReadonlyArray<{ readonly trainedStep: number }>
    }
    expect(summary.finalStep).toBe(1)
    expect(summary.steps.map((s) => s.trainedStep)).toEqual([1])
    expect([...counts("loop", "done").values()]).toEqual(Array.from({ length: 8 }, () => 1))
  }, 90_000)

  it("the driver SIGKILLed mid-gather and restarted completes it without running a finished rollout again", async () => {
    const first = driver("gather", "restart", 5, 6)
    await until(
      "some rollouts to finish",
      () => (of("restart", "done").length >= 8 ? true : undefined),
      60_000,
      first.process.output
    )
    first.process.child.kill("SIGKILL")
    await first.process.exited
    const finishedBefore = of("restart", "done").length
    expect(finishedBefore).toBeLessThan(30)

    const second = driver("gather", "restart", 5, 6)
    await finish(second.process)
    const result = JSON.parse(readFileSync(second.out, "utf8")) as ReadonlyArray<Result>
    expectComplete(result, "restart", 5, 6)
    // Each rollout started once and finished once, across both drivers.
    for (const event of ["start", "done"]) {
      const count = counts("restart", event)
      expect([...count.keys()].sort()).toEqual(allKeys("restart", 5, 6))
      expect([...count.entries()].filter(([, n]) => n !== 1)).toEqual([])
    }
  }, 90_000)

  it("a runner SIGKILLed mid-gather: its rollouts run on another, and each lands in its group exactly once", async () => {
    const gather = driver("gather", "failover", 5, 6)
    // A runner with rollouts in flight, once the gather is under way.
    const pids = runners.map((r) => r.child.pid!)
    const inFlight = (pid: number) => {
      const done = new Set(
        of("failover", "done")
          .filter((e) => e.pid === pid)
          .map((e) => e.key)
      )
      return of("failover", "start")
        .filter((e) => e.pid === pid && !done.has(e.key))
        .map((e) => e.key)
    }
    const victim = await until(
      "a runner with rollouts in flight",
      () => (of("failover", "done").length >= 4 ? runners.find((r) => inFlight(r.child.pid!).length > 0) : undefined),
      60_000,
      gather.process.output
    )
    victim.child.kill("SIGKILL")
    await victim.exited
    const lost = inFlight(victim.child.pid!)
    expect(lost.length).toBeGreaterThan(0)

    await finish(gather.process, 75_000)
    const result = JSON.parse(readFileSync(gather.out, "utf8")) as ReadonlyArray<Result>
    expectComplete(result, "failover", 5, 6)
    // What was in flight on the dead runner ran again, and finished, on a live one.
    const doneBy = new Map(of("failover", "done").map((e) => [e.key, e.pid]))
    for (const key of lost) {
      expect(doneBy.get(key)).toBeDefined()
      expect(doneBy.get(key)).not.toBe(victim.child.pid)
      expect(pids).toContain(doneBy.get(key))
    }
    const byKey = new Map<string, number>(result.flatMap((g) => g.rollouts.map((r) => [`${g.id}/${r.index}`, r.pid])))
    for (const key of lost) expect(byKey.get(key)).toBe(doneBy.get(key))
  }, 90_000)
})

if (bin === undefined) {
  it.skip("SKIPPED: the cluster tests need Postgres binaries (initdb, pg_ctl): install Debian's postgresql", () => {})
}
