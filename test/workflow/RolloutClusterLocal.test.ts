/**
 * `RolloutCluster` in one process, on SQLite storage (the development set-up): a runner and a driver layer
 * side by side, the embedded backend behind both. What the multi-process test does not look at: a rollout
 * that fails on the runner is recorded in its group as the runner recorded it, a gather whose agent no
 * runner knows dies saying so, interrupting the driver interrupts the rollouts on the runner, a released
 * gather's stored messages are deleted, and an external agent (`ExternalAgent.rolloutAgent`) runs through the
 * gateway its runner built once (a runner that cannot build it fails to start, saying which agent).
 */
import { mkdtempSync, rmSync } from "node:fs"
import { type AddressInfo, createServer, type Server } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { describe, expect, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Backend from "../../src/Backend.js"
import * as ExternalAgent from "../../src/workflow/ExternalAgent.js"
import * as Gather from "../../src/workflow/Gather.js"
import * as Policy from "../../src/workflow/Policy.js"
import * as Rollout from "../../src/workflow/Rollout.js"
import * as RolloutAgent from "../../src/workflow/RolloutAgent.js"
import * as RolloutCluster from "../../src/workflow/RolloutCluster.js"
import { freePort } from "../support/postgres.js"

class Refused extends Data.TaggedError("Refused")<{ readonly message: string }> {}

const Case = Schema.Struct({ id: Schema.Int, fail: Schema.Boolean, pauseMs: Schema.Int })

const running = { started: 0, interrupted: 0 }

const agent = RolloutAgent.make({
  name: "local-test",
  scenario: Case,
  value: Schema.String,
  rollout: (scenario: typeof Case.Type, index: number) =>
    Effect.gen(function* () {
      running.started++
      const completion = yield* Rollout.chat({
        messages: [{ role: "user", content: "1+1=" }],
        max_completion_tokens: 2
      })
      if (scenario.fail && index === 1) return yield* new Refused({ message: `case ${scenario.id} refuses rollout 1` })
      yield* Effect.sleep(scenario.pauseMs)
      return completion.choices[0]?.message.content ?? ""
    }).pipe(
      Effect.onInterrupt(() =>
        Effect.sync(() => {
          running.interrupted++
        })
      )
    ),
  reward: () => Effect.succeed(1)
})

/** The base URLs an external agent was given, one per run. */
const endpoints: Array<string> = []

/** An external agent (a function) by name: one chat completion through its endpoint, its report the reward. */
const external = ExternalAgent.rolloutAgent<{ readonly question: string }>({
  name: "external-test",
  agent: ExternalAgent.fromFunction(async (endpoint, scenario) => {
    endpoints.push(endpoint.baseUrl)
    const response = await fetch(`${endpoint.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${endpoint.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "policy", messages: [{ role: "user", content: scenario.question }], max_tokens: 2 })
    })
    if (!response.ok) throw new Error(`the gateway answered ${response.status}`)
    return { reward: 0.25, metrics: { asked: scenario.question.length } }
  })
})

/** The embedded backend, a runner and the driver's layer, on a fresh SQLite file. */
const withCluster = <A, E>(
  body: (policy: Policy.Trainable, file: string) => Effect.Effect<A, E, Backend.Clients>,
  agents: ReadonlyArray<RolloutAgent.Any> = [agent]
) =>
  Effect.gen(function* () {
    const dir = mkdtempSync(join(tmpdir(), "effect-rl-cluster-local-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
    const file = join(dir, "cluster.db")
    const cluster = `sqlite:${file}`
    const port = yield* Effect.promise(freePort)
    const context = yield* Layer.build(
      Layer.merge(
        RolloutCluster.runner({ cluster, agents, port, capacity: 4 }),
        RolloutCluster.layer({ cluster, agents })
      ).pipe(Layer.provideMerge(Backend.local()))
    )
    const policy = yield* Effect.provide(
      Policy.trainable({ project: "local", name: `m${port}`, base_model: "effect-rl/tiny" }),
      context
    )
    return yield* Effect.provide(body(policy, file), context)
  }).pipe(Effect.scoped)

describe("RolloutCluster in one process, on SQLite", () => {
  it.live(
    "a rollout failing on the runner is recorded in its group as the runner recorded it",
    () =>
      withCluster((policy) =>
        Effect.gen(function* () {
          const groups = yield* Gather.groups({
            policy,
            scenarios: [
              { id: 0, fail: false, pauseMs: 0 },
              { id: 1, fail: true, pauseMs: 0 }
            ],
            rolloutsPerGroup: 3,
            rollout: agent.rollout,
            reward: agent.reward,
            maxExceptions: 1
          })
          expect(groups.map((g) => g.rollouts.map((r) => r.index))).toEqual([
            [0, 1, 2],
            [0, 2]
          ])
          const exceptions = groups[1]!.group.exceptions ?? []
          expect(exceptions.map((e) => [e.type, e.message])).toEqual([["Refused", "case 1 refuses rollout 1"]])
          expect(groups[0]!.rollouts[0]!.trajectory.messages_and_choices.length).toBeGreaterThan(0)
        })
      ),
    60_000
  )

  it.live(
    "a gather whose rollout is no registered agent's dies saying so",
    () =>
      withCluster((policy) =>
        Effect.gen(function* () {
          const exit = yield* Effect.exit(
            Gather.groups({
              policy,
              scenarios: [{ id: 0, fail: false, pauseMs: 0 }],
              rolloutsPerGroup: 1,
              rollout: (scenario: typeof Case.Type, index: number) => agent.rollout(scenario, index),
              reward: agent.reward
            })
          )
          expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
          if (Exit.isFailure(exit)) expect(Cause.pretty(exit.cause)).toMatch(/not the `rollout` of an agent given/)
        })
      ),
    60_000
  )

  it.live(
    "interrupting the driver's gather interrupts the rollouts on the runner",
    () =>
      withCluster((policy) =>
        Effect.gen(function* () {
          running.started = 0
          running.interrupted = 0
          const fiber = yield* Effect.fork(
            Gather.groups({
              policy,
              scenarios: [{ id: 0, fail: false, pauseMs: 60_000 }],
              rolloutsPerGroup: 4,
              rollout: agent.rollout,
              reward: agent.reward
            })
          )
          yield* Effect.sleep("50 millis").pipe(
            Effect.repeat({ until: () => running.started >= 4 }),
            Effect.timeout("30 seconds")
          )
          yield* Fiber.interrupt(fiber)
          yield* Effect.sleep("100 millis").pipe(
            Effect.repeat({ until: () => running.interrupted >= 4 }),
            Effect.timeout("15 seconds")
          )
          expect(running.interrupted).toBe(4)
        })
      ),
    60_000
  )

  it.live(
    "a released gather's messages and replies are deleted from the storage; another gather's are kept",
    () =>
      withCluster((policy, file) =>
        Effect.gen(function* () {
          /** The stored messages of a gather's rollouts (their entity ids start with its key). */
          const stored = (key: string) =>
            Effect.gen(function* () {
              const sql = yield* SqliteClient.SqliteClient
              const rows = yield* sql<{ readonly n: number }>`SELECT COUNT(*) AS n FROM cluster_messages
                WHERE entity_id LIKE ${`${key}/%`}`
              return rows[0]?.n ?? -1
            }).pipe(Effect.provide(SqliteClient.layer({ filename: file, readonly: true })), Effect.orDie)
          const counts = Effect.all([stored("kept"), stored("released")])
          const gather = (key: string) =>
            Gather.groups({
              policy,
              scenarios: [{ id: 0, fail: false, pauseMs: 0 }],
              rolloutsPerGroup: 2,
              rollout: agent.rollout,
              reward: agent.reward,
              key
            })
          yield* gather("kept")
          yield* gather("released")
          expect(yield* counts).toEqual([2, 2])
          yield* Gather.release("released")
          expect(yield* counts).toEqual([2, 0])
          // A key never gathered, or released twice: nothing happens.
          yield* Gather.release("released")
          yield* Gather.release("never")
          expect(yield* stored("kept")).toBe(2)
        })
      ),
    60_000
  )

  it.live(
    "an external agent runs on the runner through the gateway the runner built once, its report the reward",
    () =>
      withCluster(
        (policy) =>
          Effect.gen(function* () {
            endpoints.length = 0
            const groups = yield* Gather.groups({
              policy,
              scenarios: [{ question: "1+1=" }, { question: "2+2=" }],
              rolloutsPerGroup: 3,
              rollout: external.rollout,
              reward: external.reward
              // The driver provides the agent's layer too (its gateway would serve rollouts run here, without a cluster).
            }).pipe(Effect.provide(external.layer))
            expect(groups.map((g) => g.rollouts.map((r) => r.trajectory.reward))).toEqual([
              [0.25, 0.25, 0.25],
              [0.25, 0.25, 0.25]
            ])
            // The value crossed the wire: the report, as the agent made it.
            expect(groups[1]!.rollouts[0]!.value).toEqual({ report: { reward: 0.25, metrics: { asked: 4 } } })
            expect(groups[1]!.rollouts[0]!.trajectory.metrics).toMatchObject({ asked: 4, completions: 1 })
            // Six endpoints, each its own rollout's, all on one gateway (one origin): the runner built it once.
            expect(new Set(endpoints).size).toBe(6)
            expect(new Set(endpoints.map((url) => new URL(url).origin)).size).toBe(1)
          }),
        [agent, external]
      ),
    60_000
  )

  it.live(
    "a runner that cannot build an agent's layer (its gateway's port taken) fails to start, naming the agent",
    () =>
      Effect.gen(function* () {
        const taken = yield* Effect.acquireRelease(
          Effect.promise(
            () =>
              new Promise<Server>((resolve) => {
                const server = createServer()
                server.listen(0, "127.0.0.1", () => resolve(server))
              })
          ),
          (server) => Effect.promise(() => new Promise((resolve) => server.close(resolve)))
        )
        const port = (taken.address() as AddressInfo).port
        const blocked = ExternalAgent.rolloutAgent({
          name: "blocked",
          agent: ExternalAgent.command("true"),
          gateway: { port }
        })
        const dir = mkdtempSync(join(tmpdir(), "effect-rl-cluster-local-"))
        yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
        const runnerPort = yield* Effect.promise(freePort)
        const error = yield* Effect.flip(
          Layer.build(
            RolloutCluster.runner({
              cluster: `sqlite:${join(dir, "cluster.db")}`,
              agents: [blocked],
              port: runnerPort
            }).pipe(Layer.provide(Backend.local()))
          )
        )
        expect(error).toMatchObject({ _tag: "RolloutClusterError", reason: "Agent" })
        expect(error.message).toContain("the agent 'blocked' could not be set up on this runner")
      }).pipe(Effect.scoped),
    60_000
  )
})
