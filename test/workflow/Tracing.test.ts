/**
 * Tracing of the workflow against the real embedded backend (its trace surface read back through the real
 * `TraceClient`), on a real clock: a training loop leaves one call per rollout under its step's call, with its
 * chat completions as children, usage summed up the tree and its reward as feedback; the queue is bounded,
 * flushed when the layer closes, and a dead trace server never fails a rollout and is reported by one warning
 * that does not show the key.
 */
import { createServer } from "node:net"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientError from "@effect/platform/HttpClientError"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { describe, expect, it, layer } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import type { JsonObject } from "../../src/api/Json.js"
import type { Call } from "../../src/api/TraceCall.js"
import * as TraceClient from "../../src/client/TraceClient.js"
import * as Example from "../../src/Example.js"
import { LocalBackend } from "../../src/LocalBackend.js"
import * as Gather from "../../src/workflow/Gather.js"
import * as Policy from "../../src/workflow/Policy.js"
import * as Rollout from "../../src/workflow/Rollout.js"
import * as Tracing from "../../src/workflow/Tracing.js"
import * as TrainingLoop from "../../src/workflow/TrainingLoop.js"
import { API_KEY } from "../support/clients.js"
import { pick, reward, TINY, WorkflowBackend } from "./support.js"

/** Every call of a project, through the real client. */
const callsOf = (project: string) =>
  Effect.flatMap(TraceClient.TraceClient, (client) =>
    Stream.runCollect(client.callsStreamQuery({ project_id: project })).pipe(Effect.map(Chunk.toReadonlyArray))
  )

/** The `summary.usage` of a call's only model. */
const usageOf = (call: Call) => {
  const usage = Object.values(call.summary?.usage ?? {})
  expect(usage).toHaveLength(1)
  return usage[0]!
}

/** A logger that keeps the warnings (and worse) it is given. */
const captureWarnings = (into: Array<string>) =>
  Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ logLevel, message }) => {
      if (logLevel._tag === "Warning" || logLevel._tag === "Error") {
        into.push((Array.isArray(message) ? message : [message]).map(String).join(" "))
      }
    })
  )

/** A loopback port nothing listens on (bound, then released). */
const deadPort = Effect.promise(
  () =>
    new Promise<number>((resolve, reject) => {
      const server = createServer()
      server.once("error", reject)
      server.listen(0, "127.0.0.1", () => {
        const address = server.address()
        const port = typeof address === "object" && address !== null ? address.port : 0
        server.close(() => resolve(port))
      })
    })
)

const LOOP_SCENARIOS = ["a", "b", "c"]

/** The loop of the first tests: 2 steps of 2 groups of 3 rollouts, traced into `project`. */
const tracedLoop = (project: string, name: string) =>
  Effect.gen(function* () {
    const policy = yield* Policy.trainable({ project: "tracing", name, base_model: TINY })
    return yield* TrainingLoop.run({
      policy,
      scenarios: LOOP_SCENARIOS,
      rollout: pick,
      reward,
      groupsPerStep: 2,
      rolloutsPerGroup: 3,
      steps: 2,
      gather: { progress: false }
    }).pipe(Effect.provide(Tracing.layer({ project, flushInterval: "100 millis" })))
  })

describe("Tracing on the embedded backend", () => {
  layer(WorkflowBackend, { timeout: 120_000, excludeTestServices: true })((it) => {
    it.effect("training loop on local backend leaves one call per rollout with reward feedback", () =>
      Effect.gen(function* () {
        const project = "tracing/loop-calls"
        const warnings: Array<string> = []
        const summary = yield* tracedLoop(project, "calls").pipe(Effect.provide(captureWarnings(warnings)))
        const calls = yield* callsOf(project)

        const steps = calls.filter((c) => c.op_name === Tracing.STEP_OP)
        const rollouts = calls.filter((c) => c.op_name === Tracing.ROLLOUT_OP)
        const chats = calls.filter((c) => c.op_name === Tracing.CHAT_OP)
        expect(steps.map((s) => s.display_name)).toEqual(["step 0", "step 1"])
        expect(rollouts).toHaveLength(2 * 2 * 3)
        expect(chats).toHaveLength(rollouts.length)
        expect(calls).toHaveLength(steps.length + rollouts.length + chats.length)
        for (const call of calls) {
          expect(call.ended_at).not.toBeNull()
          expect(call.exception ?? null).toBeNull()
        }

        for (const [k, step] of steps.entries()) {
          expect(step.parent_id ?? null).toBeNull()
          const report = summary.steps[k]!
          expect(step.output).toMatchObject({ step: report.step, trainedStep: report.trainedStep })
          const mine = rollouts.filter((r) => r.parent_id === step.id)
          expect(mine).toHaveLength(2 * 3)
          for (const r of mine) {
            expect(r.trace_id).toBe(step.trace_id)
            expect(r.attributes).toMatchObject({ step: report.step })
          }
          // The rewards in the rollouts' outputs are the step's training rewards.
          const rewards = mine.map((r) => (r.output as JsonObject).reward as number)
          expect(rewards.reduce((a, b) => a + b, 0) / rewards.length).toBeCloseTo(report.train.reward!, 9)
          // A step's usage is the sum of its rollouts'.
          const total = mine.map(usageOf).reduce((a, u) => a + (u.prompt_tokens ?? 0), 0)
          expect(usageOf(step).prompt_tokens).toBe(total)
          expect(usageOf(step).requests).toBe(mine.length)
        }

        for (const r of rollouts) {
          const scenario = (r.inputs as { scenario: string }).scenario
          expect(LOOP_SCENARIOS).toContain(scenario)
          const output = r.output as { messages: ReadonlyArray<JsonObject>; value: string; reward: number }
          expect(output.reward).toBe(output.value === scenario ? 1 : 0)
          expect(output.messages.map((m) => m.role)).toEqual(["user", "assistant"])
          expect(output.messages[1]!.content).toBe(output.value)
          const children = chats.filter((c) => c.parent_id === r.id)
          expect(children).toHaveLength(1)
          const chat = children[0]!
          expect(chat.trace_id).toBe(r.trace_id)
          expect((chat.inputs.messages as ReadonlyArray<JsonObject>)[0]!.content).toBe(`pick ${scenario}`)
          const choice = (chat.output as { choices: ReadonlyArray<{ message: JsonObject }> }).choices[0]!
          expect(choice.message.content).toBe(output.value)
          expect(choice).not.toHaveProperty("logprobs")
          // The rollout's usage is its completion's.
          expect(usageOf(r)).toEqual(usageOf(chat))
          expect(usageOf(chat).requests).toBe(1)
          expect(usageOf(chat).prompt_tokens).toBeGreaterThan(0)
        }

        // One reward feedback per rollout call, with the reward of its output and the trajectory's metrics.
        const client = yield* TraceClient.TraceClient
        const { result } = yield* client.feedbackQuery({ project_id: project })
        expect(result).toHaveLength(rollouts.length)
        for (const r of rollouts) {
          const mine = result.filter((f) => f.weave_ref === `weave:///${project}/call/${r.id}`)
          expect(mine).toHaveLength(1)
          expect(mine[0]!.feedback_type).toBe(Tracing.REWARD_FEEDBACK)
          const payload = mine[0]!.payload as { reward: number; metrics: JsonObject }
          expect(payload.reward).toBe((r.output as JsonObject).reward)
          expect(payload.metrics).toEqual((r.output as JsonObject).metrics)
        }
        expect(warnings.filter((w) => w.includes("tracing"))).toEqual([])
      })
    )

    it.effect("the queue is bounded (over capacity: dropped and counted) and flushed when the layer closes", () =>
      Effect.gen(function* () {
        const project = "tracing/queue"
        const warnings: Array<string> = []
        // No timer flush within the test: what reaches the server is the final flush's.
        const stats = yield* Effect.gen(function* () {
          for (let i = 0; i < 10; i++) {
            yield* Tracing.call({ op: "test.op", displayName: `call ${i}`, inputs: { i } }, Effect.succeed(i))
          }
          return yield* Tracing.stats
        }).pipe(
          Effect.provide(Tracing.layer({ project, capacity: 5, flushInterval: "1 hour", batchSize: 100 })),
          Effect.provide(captureWarnings(warnings))
        )
        expect(stats).toMatchObject({ enqueued: 5, dropped: 15, sent: 0, failed: 0 })
        const calls = yield* callsOf(project)
        // Five items: the start and end of calls 0 and 1, the start of call 2.
        const seen = calls.map((c) => [c.display_name, c.ended_at === null || c.ended_at === undefined])
        // Started within the same millisecond, the calls' order is their random ids': compare them by name.
        expect(seen.sort((a, b) => String(a[0]).localeCompare(String(b[0])))).toEqual([
          ["call 0", false],
          ["call 1", false],
          ["call 2", true]
        ])
        expect(warnings).toHaveLength(1)
        expect(warnings[0]).toContain("15 of 20 trace items were not recorded")
        expect(warnings[0]).toContain("15 dropped")
      })
    )

    it.effect("a dead trace server never fails the rollouts; one warning, without the key", () =>
      Effect.gen(function* () {
        const port = yield* deadPort
        const dead = TraceClient.layer({
          baseUrl: `http://127.0.0.1:${port}`,
          apiKey: Redacted.make(API_KEY),
          maxRetries: 0
        }).pipe(Layer.provide(NodeHttpClient.layerUndici))
        const warnings: Array<string> = []
        const policy = yield* Policy.trainable({ project: "tracing", name: "dead", base_model: TINY })
        const [gathered, stats] = yield* Effect.gen(function* () {
          const gathered = yield* Gather.groups({
            policy,
            scenarios: ["a", "b", "c"],
            rolloutsPerGroup: 4,
            rollout: pick,
            reward,
            progress: false
          })
          // Let the worker try (and fail) at least once before the layer closes.
          yield* Effect.sleep("300 millis")
          return [gathered, yield* Tracing.stats] as const
        }).pipe(
          Effect.provide(Tracing.layer({ project: "tracing/dead", flushInterval: "50 millis" })),
          Effect.provide(dead),
          Effect.provide(captureWarnings(warnings))
        )
        expect(gathered.map((g) => g.group.trajectories.length)).toEqual([4, 4, 4])
        expect(gathered.every((g) => g.group.exceptions === undefined)).toBe(true)
        expect(stats.sent).toBe(0)
        expect(stats.failed).toBeGreaterThan(0)
        expect(stats.firstError).toContain("Transport")
        expect(warnings).toHaveLength(1)
        expect(warnings[0]).toMatch(/^tracing: \d+ of \d+ trace items were not recorded/)
        expect(warnings[0]).toContain("the first error: ApiError")
        expect(warnings.join("\n")).not.toContain(API_KEY)
        expect(stats.firstError).not.toContain(API_KEY)
      })
    )

    it.effect("a rollout run on its own is a call; a failed rollout's call carries its exception, no feedback", () =>
      Effect.gen(function* () {
        const project = "tracing/failures"
        const policy = yield* Policy.trainable({ project: "tracing", name: "failures", base_model: TINY })
        const [alone, gathered] = yield* Effect.all([
          Rollout.run(policy, pick("c"), { metadata: { source: "alone" } }),
          Gather.groups({
            policy,
            scenarios: ["a", "b"],
            rolloutsPerGroup: 2,
            rollout: (scenario) => (scenario === "b" ? Effect.fail(new Error("no b today")) : pick(scenario)),
            reward,
            maxExceptions: 2,
            progress: false
          })
        ]).pipe(Effect.provide(Tracing.layer({ project, flushInterval: "100 millis" })))
        expect(gathered.map((g) => g.group.exceptions?.length ?? 0)).toEqual([0, 2])
        const calls = yield* callsOf(project)
        const rollouts = calls.filter((c) => c.op_name === Tracing.ROLLOUT_OP)
        expect(rollouts).toHaveLength(1 + 4)

        const own = rollouts.filter((r) => r.inputs.scenario === undefined)
        expect(own).toHaveLength(1)
        expect(own[0]!.inputs).toEqual({ metadata: { source: "alone" } })
        expect(own[0]!.parent_id ?? null).toBeNull()
        expect((own[0]!.output as JsonObject).value).toBe(alone.value)
        expect(calls.filter((c) => c.parent_id === own[0]!.id).map((c) => c.op_name)).toEqual([Tracing.CHAT_OP])

        const failed = rollouts.filter((r) => r.inputs.scenario === "b")
        expect(failed).toHaveLength(2)
        for (const r of failed) {
          expect(r.exception).toContain("no b today")
          expect(r.summary?.weave?.status).toBe("error")
        }
        const client = yield* TraceClient.TraceClient
        const { result } = yield* client.feedbackQuery({ project_id: project })
        const refs = result.map((f) => f.weave_ref)
        expect(refs).toHaveLength(2)
        for (const r of failed) expect(refs).not.toContain(`weave:///${project}/call/${r.id}`)

        // Each gathered trajectory names its rollout's call (the one its reward feedback is on); the rollout
        // run on its own, outside a gather, records nothing of the kind.
        const named = gathered[0]!.group.trajectories.map((t) => t.metadata?.[Tracing.TRACE_CALL_METADATA])
        expect([...named].sort()).toEqual([...refs].sort())
        for (const t of gathered[0]!.group.trajectories) {
          const ref = t.metadata?.[Tracing.TRACE_CALL_METADATA] as string
          const call = rollouts.find((r) => Tracing.callRef(project, r.id) === ref)
          expect(call).toBeDefined()
          expect((call!.output as JsonObject).reward).toBe(t.reward)
        }
        expect(alone.trajectory.metadata).toEqual({ source: "alone" })
      })
    )

    it.effect("a feedback whose response was lost is not sent twice; one that never left is sent again", () =>
      Effect.gen(function* () {
        const project = "tracing/feedback-faults"
        const backend = yield* LocalBackend
        // Stands in for a network that drops a connection (which cannot be arranged on loopback at will): the
        // first feedback/create reaches the server and its response is lost; the second never leaves.
        let creates = 0
        const faulty = (client: HttpClient.HttpClient) =>
          HttpClient.transform(client, (effect, request) => {
            if (!request.url.endsWith("/feedback/create")) return effect
            const k = creates++
            const reset = new HttpClientError.RequestError({ request, reason: "Transport", description: "ECONNRESET" })
            if (k === 0)
              return Effect.flatMap(effect, (response) => Effect.zipRight(Effect.ignore(response.text), reset))
            if (k === 1) return reset
            return effect
          })
        const client = TraceClient.layer({
          baseUrl: backend.url,
          apiKey: backend.apiKey,
          transformClient: faulty
        }).pipe(Layer.provide(NodeHttpClient.layerUndici))
        const policy = yield* Policy.trainable({ project: "tracing", name: "faults", base_model: TINY })
        const stats = yield* Gather.groups({
          policy,
          scenarios: ["a"],
          rolloutsPerGroup: 2,
          rollout: pick,
          reward,
          progress: false
        }).pipe(
          Effect.zipRight(Effect.sleep("500 millis")),
          Effect.zipRight(Tracing.stats),
          Effect.provide(Tracing.layer({ project, flushInterval: "50 millis" })),
          Effect.provide(client)
        )
        expect(creates).toBe(3)
        expect(stats.failed).toBe(0)
        const rollouts = (yield* callsOf(project)).filter((c) => c.op_name === Tracing.ROLLOUT_OP)
        expect(rollouts).toHaveLength(2)
        const { result } = yield* Effect.flatMap(TraceClient.TraceClient, (c) =>
          c.feedbackQuery({ project_id: project })
        )
        expect(result.map((f) => f.weave_ref).sort()).toEqual(
          rollouts.map((r) => `weave:///${project}/call/${r.id}`).sort()
        )
      })
    )

    it.effect("Tracing.otlp exports the library's Effect spans to /otel/v1/traces, where they become calls", () =>
      Effect.gen(function* () {
        const project = "tracing/otlp"
        const backend = yield* LocalBackend
        const policy = yield* Policy.trainable({ project: "tracing", name: "otlp", base_model: TINY })
        yield* Gather.groups({
          policy,
          scenarios: ["a", "b"],
          rolloutsPerGroup: 2,
          rollout: pick,
          reward,
          progress: false
        }).pipe(
          Effect.withSpan("otlp-test.root"),
          Effect.provide(
            Tracing.otlp({ project, url: backend.url, apiKey: backend.apiKey }).pipe(
              Layer.provide(NodeHttpClient.layerUndici)
            )
          )
        )
        const calls = yield* callsOf(project)
        const root = calls.filter((c) => c.op_name === "otlp-test.root")
        expect(root).toHaveLength(1)
        const gather = calls.filter((c) => c.op_name === "Gather.groups")
        expect(gather.map((c) => c.parent_id)).toEqual([root[0]!.id])
        const groups = calls.filter((c) => c.op_name === "Gather.group")
        expect(groups).toHaveLength(2)
        for (const group of groups) {
          expect(group.trace_id).toBe(root[0]!.trace_id)
          expect(group.ended_at).not.toBeNull()
        }
      })
    )
  })
})

describe("Example.parseArgs --trace", () => {
  it("reads a trace project and refuses one that is not entity/project", () => {
    expect(Example.parseArgs(["--trace", "team/run"]).trace).toBe("team/run")
    expect(Example.parseArgs([]).trace).toBeUndefined()
    expect(() => Example.parseArgs(["--trace", "nope"])).toThrow("--trace must be a project as entity/project")
  })
})
