/**
 * External agents as rollouts, through a real gateway, as real child processes (Python, standard library) and
 * a real HTTP agent service: the report as reward and metrics; a failing or killed agent recorded as its
 * rollout's failure with the exit code and the tail of its stderr (the key redacted); an interrupted or
 * timed-out rollout leaving no process behind, grandchildren included, even one ignoring SIGTERM, and none left
 * by a process killed outright (its guard kills them); an agent
 * that never used its endpoint; a report that is not one. The policy answers at once (no backend): what is
 * tested is the agent's side.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as TestServices from "effect/TestServices"
import type { ChatCompletion } from "../../src/api/ChatCompletion.js"
import { isChoice } from "../../src/api/Trajectory.js"
import * as ExternalAgent from "../../src/workflow/ExternalAgent.js"
import * as Gather from "../../src/workflow/Gather.js"
import * as Policy from "../../src/workflow/Policy.js"
import * as Rollout from "../../src/workflow/Rollout.js"
import * as RolloutGateway from "../../src/workflow/RolloutGateway.js"
import { spawnTsx, until } from "../support/children.js"

const fixture = new URL("./fixtures/external_agent.py", import.meta.url).pathname
const dir = mkdtempSync(join(tmpdir(), "effect-rl-agents-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** A policy that answers every request at once with `content`. */
const policy = Policy.make({
  name: "echo",
  complete: (request) =>
    Effect.succeed({
      id: "chatcmpl-echo",
      object: "chat.completion",
      created: 0,
      model: request.model,
      choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content: "forty-two" } }],
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 }
    } as unknown as ChatCompletion)
})

interface Scenario {
  readonly question: string
}

const python = (mode: string, options: ExternalAgent.CommandOptions = {}) =>
  ExternalAgent.command<Scenario>(`/usr/bin/python3 ${fixture}`, { ...options, env: { MODE: mode, ...options.env } })

const gather = <E>(agent: ExternalAgent.Agent<Scenario>, options: { readonly maxExceptions?: number } = {}) =>
  Gather.groups({
    policy,
    scenarios: [{ question: "the answer?" }],
    rolloutsPerGroup: 2,
    rollout: ExternalAgent.rollout(agent) as (s: Scenario) => Effect.Effect<ExternalAgent.Outcome, E, never>,
    reward: ExternalAgent.reportedReward,
    maxExceptions: options.maxExceptions ?? 0,
    progress: false
  })

/**
 * Whether a process runs: it exists and is not a zombie (an orphan whose new parent, PID 1 in a container, may
 * never reap it, is dead all the same).
 */
const alive = (pid: number) => {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"))
  } catch {
    return false
  }
}

describe("ExternalAgent", () => {
  it.layer(RolloutGateway.layer(), { timeout: 60_000 })((it) => {
    it.effect("a command's last line is its report: the reward, and its metrics in the trajectory", () =>
      Effect.gen(function* () {
        const [group] = yield* gather(python("report"))
        expect(group!.group.trajectories).toHaveLength(2)
        for (const trajectory of group!.group.trajectories) {
          expect(trajectory.reward).toBe(0.75)
          expect(trajectory.metrics).toMatchObject({ length: "forty-two".length, env_matches: true, completions: 1 })
          const entries = trajectory.messages_and_choices
          expect(entries[0]).toMatchObject({ role: "user", content: "the answer?" })
          expect(entries.filter(isChoice)).toHaveLength(1)
        }
      })
    )

    it.effect("a failing agent is its rollout's failure: exit code, the tail of its stderr, no key", () =>
      Effect.gen(function* () {
        const [group] = yield* gather(python("fail"), { maxExceptions: 2 })
        const exceptions = group!.group.exceptions ?? []
        expect(exceptions).toHaveLength(2)
        for (const exception of exceptions) {
          expect(exception.type).toBe("ExternalAgentError")
          expect(exception.message).toContain("the agent command /usr/bin/python3 exited with code 3")
          expect(exception.message).toContain("boom: the tool broke with key <redacted>")
          expect(exception.message).not.toMatch(/sk-rollout-/)
          // The tail: the last 2000 characters of stderr, not all of it.
          expect(exception.message.length).toBeLessThan(2300)
        }
        // Run without a shell (a program and its arguments), the signal is the agent's own.
        const killed = ExternalAgent.command<Scenario>(["/usr/bin/python3", fixture], { env: { MODE: "killed" } })
        const failure = yield* Effect.flip(Rollout.run(policy, ExternalAgent.rollout(killed)({ question: "q" })))
        expect(failure).toMatchObject({ reason: "Exit", signal: "SIGKILL", exitCode: null, stderr: "about to die" })
        expect(failure.message).toContain("was killed by SIGKILL")
      })
    )

    it.effect("an interrupted rollout leaves no process behind, grandchildren and SIGTERM-deaf agents too", () =>
      Effect.gen(function* () {
        const pidFile = join(dir, "hang.json")
        const agent = python("hang", { env: { PID_FILE: pidFile }, killGrace: "300 millis" })
        const fiber = yield* Effect.fork(Rollout.run(policy, ExternalAgent.rollout(agent)({ question: "q" })))
        const started = Date.now()
        while (!existsSync(pidFile)) {
          if (Date.now() - started > 20_000) throw new Error("the agent never wrote its pids")
          yield* Effect.sleep("20 millis")
        }
        const pids = JSON.parse(readFileSync(pidFile, "utf8")) as ReadonlyArray<number>
        expect(pids.every(alive)).toBe(true)
        const exit = yield* Fiber.interrupt(fiber)
        expect(Exit.isInterrupted(exit)).toBe(true)
        // The interruption returns once the process it spawned is gone (reaped). That is `sh -c`, which here
        // (dash) does not exec the agent: python and its grandchild are killed with the group but are not ours
        // to wait for, and a killed process closes its pipes (which ends our wait) a moment before it leaves the
        // table (seen in a full run under load), so each is given up to 2 s to be gone.
        const killed = Date.now()
        for (const pid of pids) {
          while (alive(pid) && Date.now() - killed < 2_000) yield* Effect.sleep("10 millis")
          expect(alive(pid)).toBe(false)
        }
        expect(yield* Effect.flatMap(RolloutGateway.RolloutGateway, (g) => g.open)).toBe(0)
      }).pipe(TestServices.provideLive)
    )

    it.effect("a time limit stops the agent and fails its rollout, grandchildren and SIGTERM-deaf agents too", () =>
      Effect.gen(function* () {
        const pidFile = join(dir, "slow.json")
        let pid = 0
        const agent = python("hang", { env: { PID_FILE: pidFile }, killGrace: "200 millis", onSpawn: (p) => (pid = p) })
        // 3 s: time for python to start, take its turn and write its pids on a loaded machine, before it is stopped.
        const failure = yield* Effect.flip(
          Rollout.run(policy, ExternalAgent.rollout(agent, { timeout: "3 seconds" })({ question: "q" }))
        )
        expect(failure).toMatchObject({ _tag: "ExternalAgentError", reason: "Timeout" })
        expect(failure.message).toBe("the agent /usr/bin/python3 did not finish within 3s")
        expect(pid).toBeGreaterThan(0)
        expect(alive(pid)).toBe(false)
        // What matters is the agent (python, which ignores SIGTERM) and its grandchild (sleep), not the `sh -c`
        // spawned: each given up to 2 s to leave the table, as in the interruption's test above.
        expect(existsSync(pidFile)).toBe(true)
        const pids = JSON.parse(readFileSync(pidFile, "utf8")) as ReadonlyArray<number>
        expect(pids).toHaveLength(2)
        const stopped = Date.now()
        for (const agentPid of pids) {
          while (alive(agentPid) && Date.now() - stopped < 2_000) yield* Effect.sleep("10 millis")
          expect(alive(agentPid)).toBe(false)
        }
      }).pipe(TestServices.provideLive)
    )

    it.effect("a process killed outright (SIGKILL) leaves no agent behind: its guard kills the agents' groups", () =>
      Effect.promise(async () => {
        const pidFile = join(dir, "orphan.json")
        const parent = spawnTsx("test/workflow/fixtures/external-agent-parent.ts", [pidFile])
        try {
          const pids = await until(
            "the agent to write its pids",
            () =>
              existsSync(pidFile) ? (JSON.parse(readFileSync(pidFile, "utf8")) as ReadonlyArray<number>) : undefined,
            30_000,
            parent.output
          )
          const guard = Number(/guard (\d+)/.exec(parent.output())?.[1])
          expect(pids).toHaveLength(2)
          expect([...pids, guard].every(alive)).toBe(true)
          parent.child.kill("SIGKILL")
          await parent.exited
          // No finalizer ran: the guard, told by the pipe's end, kills the agent and its grandchild, then exits.
          const killed = Date.now()
          for (const pid of [...pids, guard]) {
            while (alive(pid) && Date.now() - killed < 2_000) await new Promise((resolve) => setTimeout(resolve, 10))
            expect(alive(pid), `process ${pid}`).toBe(false)
          }
        } finally {
          if (parent.child.exitCode === null && parent.child.signalCode === null) parent.child.kill("SIGKILL")
        }
      }).pipe(TestServices.provideLive)
    )

    it.effect("an agent that never used its endpoint, or reports garbage, fails with what it did", () =>
      Effect.gen(function* () {
        const silent = yield* Effect.flip(
          Rollout.run(policy, ExternalAgent.rollout(python("silent"))({ question: "q" }))
        )
        expect(silent).toMatchObject({ reason: "NoCompletion" })
        expect(silent.message).toContain("OPENAI_BASE_URL")
        const garbled = yield* Effect.flip(
          Rollout.run(policy, ExternalAgent.rollout(python("garbled"))({ question: "q" }))
        )
        expect(garbled).toMatchObject({ reason: "Report" })
        expect(garbled.message).toContain("reward")
        const spawn = yield* Effect.flip(
          Rollout.run(policy, ExternalAgent.rollout(ExternalAgent.command(["/no/such/agent"]))({ question: "q" }))
        )
        expect(spawn).toMatchObject({ reason: "Spawn" })
        expect(spawn.message).toContain("ENOENT")
      })
    )

    it.effect("an agent service gets the scenario and the endpoint, and answers its report", () =>
      Effect.gen(function* () {
        const seen: Array<unknown> = []
        const server = http.createServer((req, res) => {
          let body = ""
          req.on("data", (chunk) => {
            body += chunk
          })
          req.on("end", async () => {
            const { scenario, endpoint } = JSON.parse(body) as {
              scenario: Scenario
              endpoint: { base_url: string; api_key: string }
            }
            seen.push(scenario)
            if (scenario.question === "fail") {
              res.writeHead(503).end("agent overloaded")
              return
            }
            const answer = await fetch(`${endpoint.base_url}/chat/completions`, {
              method: "POST",
              headers: { authorization: `Bearer ${endpoint.api_key}`, "content-type": "application/json" },
              body: JSON.stringify({ model: "m", messages: [{ role: "user", content: scenario.question }] })
            })
            const completion = (await answer.json()) as ChatCompletion
            res.writeHead(200, { "content-type": "application/json" })
            res.end(JSON.stringify({ reward: completion.choices[0]!.message.content === "forty-two" ? 1 : 0 }))
          })
        })
        yield* Effect.acquireRelease(
          Effect.promise(() => new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))),
          () => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
        )
        const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/agent`
        const [group] = yield* gather(ExternalAgent.http(url))
        expect(group!.group.trajectories.map((t) => t.reward)).toEqual([1, 1])
        expect(seen).toEqual([{ question: "the answer?" }, { question: "the answer?" }])
        const failure = yield* Effect.flip(
          Rollout.run(policy, ExternalAgent.rollout(ExternalAgent.http<Scenario>(url))({ question: "fail" }))
        )
        expect(failure).toMatchObject({ reason: "Http" })
        expect(failure.message).toBe(`the agent service ${url} answered 503: agent overloaded`)
      }).pipe(Effect.scoped)
    )
  })
})
