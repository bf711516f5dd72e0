/**
 * `effect-rl train-agent "<command>" --cluster <url>` with two `effect-rl runner --agent-command "<command>"`
 * processes, as a user runs them: a real Postgres (Debian's `postgresql`, started here in a temporary directory)
 * as the cluster's storage, the embedded backend served from this process (the runners and the loop reach it by
 * the environment, as they would an `effect-rl serve`), the Python agent of `examples/agents` behind a shell line
 * that logs each run's start and end with its runner's pid and its own process group.
 *
 * - the agent processes run on the runners, both of them;
 * - a runner SIGKILLed mid-step, with agents running there: those agents are gone within seconds (their
 *   guard kills their groups), the step completes on the other runner, and the store records each step trained
 *   once (one succeeded job per checkpoint) with every rollout of each group exactly once.
 *
 * Without Postgres binaries the tests are skipped, loudly.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
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
import { until } from "../support/children.js"
import { cliArgs } from "../support/cli.js"
import { API_KEY } from "../support/clients.js"
import * as Pg from "../support/postgres.js"
import { alive, root, summaryOf } from "./trainAgentSupport.js"

const bin = Pg.binaries()
if (bin === undefined) {
  console.warn(
    "\n*** train-agent-cluster.slow.test.ts: NO POSTGRES BINARIES (initdb, pg_ctl on PATH or under /usr/lib/postgresql) — " +
      "THE EXTERNAL AGENTS' CLUSTER TESTS ARE SKIPPED. Install Debian's postgresql (.ci/run does). ***\n"
  )
}

/** The few calls of `better-sqlite3` the test reads the backend's store with (read-only). */
interface Database {
  prepare(sql: string): { all(...params: ReadonlyArray<unknown>): Array<Record<string, unknown>> }
  close(): void
}
const Sqlite = createRequire(import.meta.url)("better-sqlite3") as new (
  file: string,
  options: { readonly readonly: boolean }
) => Database

interface Started {
  readonly child: ChildProcess
  readonly output: () => string
  readonly exited: Promise<number | null>
}

const children: Array<ChildProcess> = []
const scope = Effect.runSync(Scope.make())
let dir = ""
let postgres: Pg.Postgres | undefined
let env: NodeJS.ProcessEnv = {}
let data = ""

/** `effect-rl <args>` as a child process with the test's environment. */
const effectRl = (args: ReadonlyArray<string>): Started => {
  const child = spawn(process.execPath, cliArgs(...args), { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] })
  children.push(child)
  let out = ""
  child.stdout.on("data", (chunk) => {
    out += chunk
  })
  child.stderr.on("data", (chunk) => {
    out += chunk
  })
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  return { child, output: () => out, exited }
}

/** The processes of a process group (from /proc: the fifth field of `stat`, after the command's parentheses). */
const groupMembers = (pgid: number): ReadonlyArray<number> =>
  readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .filter((name) => {
      try {
        const stat = readFileSync(`/proc/${name}/stat`, "utf8")
        const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
        return fields[0] !== "Z" && Number(fields[2]) === pgid
      } catch {
        return false
      }
    })
    .map(Number)

beforeAll(async () => {
  if (bin === undefined) return
  dir = mkdtempSync(join(tmpdir(), "effect-rl-agent-cluster-"))
  data = join(dir, "backend")
  postgres = await Pg.start(bin)
  const backend = await Effect.runPromise(
    Layer.buildWithScope(LocalBackend.layer({ apiKey: Redacted.make(API_KEY), dataDir: data }), scope).pipe(
      Effect.map((context) => Context.get(context, LocalBackend.LocalBackend))
    )
  )
  const { VITEST: _, EFFECT_RL_BASE_MODEL: __, ...inherited } = process.env
  env = {
    ...inherited,
    VITEST: "1",
    WANDB_API_KEY: API_KEY,
    EFFECT_RL_TRAINING_URL: backend.url,
    EFFECT_RL_INFERENCE_URL: backend.url,
    EFFECT_RL_TRACE_URL: backend.url
  }
}, 120_000)

afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  await Effect.runPromise(Scope.close(scope, Exit.void))
  postgres?.stop()
  if (dir !== "") rmSync(dir, { recursive: true, force: true })
})

describe.skipIf(bin === undefined)("train-agent --cluster: external agents on two runners, on Postgres", () => {
  it("spreads the agents over both runners; one SIGKILLed mid-step: its agents die, the step completes, none twice", async () => {
    const cluster = postgres!.database("agents")
    const log = join(dir, "runs.log")
    writeFileSync(log, "")
    const scenarios = join(dir, "scenarios.jsonl")
    writeFileSync(
      scenarios,
      Array.from({ length: 6 }, (_, n) =>
        JSON.stringify({ question: `Is ${n} even?`, expected: n % 2 === 0 ? "yes" : "no", n })
      ).join("\n")
    )
    // Each run: its start (scenario, runner pid, its own group), a process of its group that outlives it unless
    // the group is killed (a tool server left behind), a second's pause, the Python agent, its end.
    const agent = join(root, "examples/agents/python/agent.py")
    const command =
      `input=$(cat); n=$(printf %s "$input" | sed 's/.*"n": *\\([0-9]*\\).*/\\1/'); ` +
      `echo "start $n $PPID $$" >> ${log}; sleep 300 </dev/null >/dev/null 2>&1 & ` +
      `sleep 1; printf %s "$input" | python3 ${agent}; code=$?; ` +
      `echo "done $n $PPID $$" >> ${log}; exit $code`
    const ports = await Promise.all([Pg.freePort(), Pg.freePort()])
    const runners = ports.map((port) =>
      effectRl([
        "runner",
        "--cluster",
        cluster,
        "--agent-command",
        command,
        "--port",
        String(port),
        "--capacity",
        "4",
        "--timeout",
        "60"
      ])
    )
    for (const runner of runners) {
      await until(
        "a runner to start",
        () => (/effect-rl runner on/.test(runner.output()) ? true : undefined),
        60_000,
        runner.output
      )
    }
    const names = runners.map((runner) => /agents: (agent-[0-9a-f]{12})/.exec(runner.output())?.[1])
    expect(names[0]).toBeDefined()
    expect(names[1]).toBe(names[0])

    const entries = () =>
      readFileSync(log, "utf8")
        .split("\n")
        .filter((line) => line !== "")
        .map((line) => {
          const [event, n, runner, group] = line.split(" ")
          return { event: event!, n: Number(n), runner: Number(runner), group: Number(group) }
        })
    const inFlight = (runner: number) => {
      const done = new Set(
        entries()
          .filter((e) => e.event === "done")
          .map((e) => e.group)
      )
      return entries().filter((e) => e.event === "start" && e.runner === runner && !done.has(e.group))
    }

    // 2 steps of 3 scenarios x 4 rollouts, 8 in flight: a step is 12 agent runs spread over the two runners.
    const loop = effectRl([
      "train-agent",
      command,
      "--scenarios",
      scenarios,
      "--cluster",
      cluster,
      "--steps",
      "2",
      "--groups-per-step",
      "3",
      "--group-size",
      "4",
      "--concurrency",
      "8",
      "--timeout",
      "60",
      "--base-model",
      "effect-rl/tiny",
      "--model",
      "on-cluster"
    ])
    const pids = runners.map((runner) => runner.child.pid!)
    const victim = await until(
      "both runners to run agents, one with some in flight",
      () =>
        pids.every((pid) => entries().some((e) => e.runner === pid)) && entries().some((e) => e.event === "done")
          ? runners.find((runner) => inFlight(runner.child.pid!).length > 0)
          : undefined,
      90_000,
      () => loop.output() + runners.map((r) => r.output()).join("\n")
    )
    const lost = inFlight(victim.child.pid!)
    victim.child.kill("SIGKILL")
    await victim.exited
    // Its agents' groups (each `sh -c` leads its own), killed by their guard: nothing of them left.
    const killed = Date.now()
    for (const run of lost) {
      while (groupMembers(run.group).length > 0 && Date.now() - killed < 3_000) {
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
      expect(groupMembers(run.group), `the group of scenario ${run.n}'s run on the dead runner`).toEqual([])
      expect(alive(run.group)).toBe(false)
    }
    const before = entries().length

    const code = await Promise.race([
      loop.exited,
      new Promise<"late">((resolve) => setTimeout(() => resolve("late"), 150_000))
    ])
    expect(code, loop.output()).toBe(0)
    expect(summaryOf(loop.output()).steps).toBe(2)
    // From then on every run that started or ended was the other runner's (none of the dead runner's agents lived
    // on to end), and it ran at least those the dead one had in flight again.
    const survivor = pids.find((pid) => pid !== victim.child.pid)!
    const after = entries().slice(before)
    expect(after.filter((e) => e.runner !== survivor)).toEqual([])
    expect(after.filter((e) => e.event === "start").length).toBeGreaterThanOrEqual(lost.length)

    const db = new Sqlite(join(data, "effect-rl.sqlite"), { readonly: true })
    try {
      const [model] = db.prepare("SELECT id FROM models WHERE name = 'on-cluster'").all()
      const jobs = db
        .prepare("SELECT step FROM training_jobs WHERE model_id = ? AND status = 'COMPLETED' ORDER BY seq")
        .all(model!.id)
      // Each step trained once, none lost.
      expect(jobs.map((job) => job.step)).toEqual([1, 2])
      const logs = db
        .prepare("SELECT step, trajectory_groups FROM logs WHERE model_id = ? AND split = 'train'")
        .all(model!.id)
      expect(logs.map((entry) => entry.step).sort()).toEqual([0, 1])
      for (const entry of logs) {
        // Three groups of four: every rollout of each group exactly once, each of its group's scenario.
        const groups = JSON.parse(String(entry.trajectory_groups)) as ReadonlyArray<{
          readonly trajectories: ReadonlyArray<{ readonly messages_and_choices: ReadonlyArray<unknown> }>
        }>
        expect(groups).toHaveLength(3)
        for (const group of groups) {
          expect(group.trajectories).toHaveLength(4)
          const asked = new Set(
            group.trajectories.map((t) => JSON.stringify(t.messages_and_choices).match(/Is (\d+) even\?/)?.[1])
          )
          expect(asked.size).toBe(1)
        }
      }
    } finally {
      db.close()
    }
    expect(existsSync(log)).toBe(true)
  }, 300_000)
})

if (bin === undefined) {
  it.skip("SKIPPED: the external agents' cluster tests need Postgres binaries (initdb, pg_ctl): install Debian's postgresql", () => {})
}
