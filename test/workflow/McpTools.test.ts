/**
 * Tools from MCP servers, against a real server written with the official SDK (`fixtures/mcp-server.mjs`), started
 * by the test as its own process over stdio and over Streamable HTTP. The policy is scripted (see `mcpSupport.ts`)
 * so that the calls made are known; one test lets the embedded backend's model call, its arguments constrained to
 * the server's input schema.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Ref from "effect/Ref"
import type { ToolMessage } from "../../src/api/ChatMessage.js"
import { isChoice } from "../../src/api/Trajectory.js"
import * as McpTools from "../../src/workflow/McpTools.js"
import * as Policy from "../../src/workflow/Policy.js"
import * as Rollout from "../../src/workflow/Rollout.js"
import { goneWithin, httpServer, scripted, stdioServer } from "./mcpSupport.js"
import { WorkflowBackend } from "./support.js"

const toolMessages = (messages: ReadonlyArray<unknown>) =>
  messages.filter((m): m is ToolMessage => (m as { role?: string }).role === "tool").map((m) => m.content)

describe("McpTools", () => {
  it.live("lists a stdio server's tools once and runs the model's calls through it: text, structured, isError", () =>
    Effect.gen(function* () {
      const server = yield* McpTools.connect(stdioServer)
      expect(server.tools.map((t) => t.name)).toEqual(["echo", "add", "fail", "count", "slow", "spawn", "crash"])
      expect(server.tools[1]).toMatchObject({
        description: "Adds two numbers",
        inputSchema: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } } }
      })
      const { policy, sent } = yield* scripted([
        {
          calls: [
            ["echo", '{"text":"hi"}'],
            ["add", '{"a":1,"b":2}'],
            ["fail", '{"why":"no"}']
          ]
        },
        {
          calls: [
            ["nosuch", "{}"],
            ["add", '{"a":"x"}']
          ]
        },
        { content: "done" }
      ])
      const finished = yield* Rollout.run(policy, McpTools.run(server, { prompt: "go", maxTurns: 4 }))
      const outcome = finished.value
      expect(outcome.answer).toBe("done")
      expect(outcome.calls.map((c) => [c.name, c.result, c.failed])).toEqual([
        ["echo", "echo: hi", false],
        ["add", '{"sum":3}', false],
        ["fail", "Error: cannot: no", true],
        ["nosuch", expect.stringContaining('Error: there is no tool "nosuch"'), true],
        // The server refuses arguments that do not fit its schema; the model reads why.
        ["add", expect.stringMatching(/^Error: .*(Invalid|expected number)/s), true]
      ])
      // Offered as function tools, their parameters the server's input schemas (less $schema).
      const offered = (yield* Ref.get(sent))[0]!.tools!
      expect(offered.map((t) => t.function.name)).toEqual(server.tools.map((t) => t.name))
      expect(offered[0]!.function.parameters).not.toHaveProperty("$schema")
      expect(offered[0]!.function.parameters).toMatchObject({ properties: { text: { type: "string" } } })
      // Every turn and result recorded in the trajectory, as with Tools.
      const entries = finished.trajectory.messages_and_choices
      expect(entries.filter(isChoice)).toHaveLength(3)
      expect(toolMessages(entries).slice(0, 3)).toEqual(["echo: hi", '{"sum":3}', "Error: cannot: no"])
      expect(finished.trajectory.metrics).toMatchObject({ tool_calls: 5, tool_errors: 3, tool_turns: 3 })
    }).pipe(Effect.scoped)
  )

  it.live('onToolError "fail": an isError result fails the rollout with the tool\'s words', () =>
    Effect.gen(function* () {
      const server = yield* McpTools.connect(stdioServer)
      const { policy } = yield* scripted([{ calls: [["fail", '{"why":"no"}']] }])
      const error = yield* Effect.flip(Rollout.run(policy, McpTools.run(server, { prompt: "go", onToolError: "fail" })))
      expect(error).toMatchObject({ _tag: "McpError", reason: "ToolError", tool: "fail", message: "cannot: no" })
    }).pipe(Effect.scoped)
  )

  it.live("over Streamable HTTP with headers; a wrong header is a Start failure that does not show it", () =>
    Effect.gen(function* () {
      const { url } = yield* httpServer
      const refused = yield* Effect.flip(
        Effect.scoped(McpTools.connect({ url, headers: { Authorization: "Bearer wrong-secret-123" } }))
      )
      expect(refused).toMatchObject({ _tag: "McpError", reason: "Start" })
      expect(JSON.stringify({ ...refused, cause: undefined }) + refused.message).not.toContain("wrong-secret-123")
      const server = yield* McpTools.connect({ url, headers: { Authorization: "Bearer test-token" } })
      expect(server.pid).toBeUndefined()
      const { policy } = yield* scripted([
        {
          calls: [
            ["echo", '{"text":"over http"}'],
            ["fail", '{"why":"remote"}']
          ]
        },
        { content: "ok" }
      ])
      const finished = yield* Rollout.run(policy, McpTools.run(server, { prompt: "go" }))
      expect(toolMessages(finished.trajectory.messages_and_choices)).toEqual([
        "echo: over http",
        "Error: cannot: remote"
      ])
    }).pipe(Effect.scoped)
  )

  it.live(
    "a server that crashes mid-rollout: a typed failure with its stderr, the rollout failed, no process left",
    () =>
      Effect.gen(function* () {
        const pids: Array<number> = []
        const failure = yield* Effect.flip(
          Effect.scoped(
            Effect.gen(function* () {
              const server = yield* McpTools.connect(stdioServer)
              pids.push(server.pid!)
              // The server starts a sleep in its group, then exits in the middle of the next call.
              const { policy } = yield* scripted([{ calls: [["spawn", "{}"]] }, { calls: [["crash", "{}"]] }])
              const spawned = server.call("spawn", {}).pipe(Effect.map((result) => Number(result.text)))
              pids.push(yield* spawned)
              return yield* Rollout.run(policy, McpTools.run(server, { prompt: "go" }))
            })
          )
        )
        expect(failure).toMatchObject({ _tag: "McpError", reason: "Closed", tool: "crash" })
        expect(failure.message).toContain("exited with code 3 during the call of crash")
        expect((failure as McpTools.McpError).stderr).toContain("crashing now on purpose")
        expect(pids).toHaveLength(2)
        expect(yield* Effect.promise(() => goneWithin(pids))).toEqual([])
      })
  )

  it.live("ending the scope ends the server's whole process group; a call past its limit is a Timeout", () =>
    Effect.gen(function* () {
      const pids: Array<number> = []
      const timedOut = yield* Effect.scoped(
        Effect.gen(function* () {
          const server = yield* McpTools.connect(stdioServer, { callTimeout: "300 millis" })
          pids.push(server.pid!)
          pids.push(Number((yield* server.call("spawn", {})).text))
          const { policy } = yield* scripted([{ calls: [["slow", '{"ms":5000}']] }])
          const error = yield* Effect.flip(Rollout.run(policy, McpTools.run(server, { prompt: "go" })))
          // Both the server and the sleep it started run until the scope ends.
          expect(pids.every((pid) => pid > 0)).toBe(true)
          expect(yield* Effect.promise(() => goneWithin(pids, 0))).toEqual(pids)
          return error
        })
      )
      expect(timedOut).toMatchObject({ _tag: "McpError", reason: "Timeout", tool: "slow" })
      expect(yield* Effect.promise(() => goneWithin(pids))).toEqual([])
    })
  )

  it.live("a command that cannot start: Start, with its stderr", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(Effect.scoped(McpTools.connect({ command: "effect-rl-no-such-server --x" })))
      expect(error).toMatchObject({ _tag: "McpError", reason: "Start" })
      expect(error.message).toMatch(/exited with code 127/)
      expect(error.stderr).toMatch(/not found/)
    })
  )

  it.live("one server shared by the rollouts, or one per rollout", () =>
    Effect.gen(function* () {
      const countTwice = (servers: McpTools.Servers) =>
        Effect.forEach([1, 2], () =>
          Effect.gen(function* () {
            const { policy } = yield* scripted([{ calls: [["count", "{}"]] }, { content: "ok" }])
            const finished = yield* Rollout.run(
              policy,
              servers.use((server) => McpTools.run(server, { prompt: "count" }))
            )
            return finished.value.calls[0]!.result
          })
        )
      const shared = yield* McpTools.servers(stdioServer)
      expect(shared.tools.map((t) => t.name)).toContain("count")
      expect(yield* countTwice(shared)).toEqual(["1", "2"])
      const own = yield* McpTools.servers(stdioServer, { perRollout: true })
      expect(own.tools).toEqual(shared.tools)
      expect(yield* countTwice(own)).toEqual(["1", "1"])
    }).pipe(Effect.scoped)
  )

  it.layer(WorkflowBackend, { timeout: 120_000 })((it) => {
    it.effect("on the embedded backend the model's arguments are constrained to the server's input schema", () =>
      Effect.gen(function* () {
        const server = yield* McpTools.connect(stdioServer)
        const policy = yield* Policy.base("effect-rl/tiny-2k")
        const finished = yield* Rollout.run(
          policy,
          McpTools.run(server, {
            only: ["add"],
            prompt: "1 + 2?",
            maxTurns: 1,
            request: { tool_choice: "required", max_completion_tokens: 120, temperature: 1 }
          })
        )
        const call = finished.value.calls[0]!
        expect(call.name).toBe("add")
        const args = JSON.parse(call.arguments) as { a: unknown; b: unknown }
        expect([typeof args.a, typeof args.b]).toEqual(["number", "number"])
        expect(call.failed).toBe(false)
        expect(JSON.parse(call.result)).toEqual({ sum: (args.a as number) + (args.b as number) })
      }).pipe(Effect.scoped)
    )
  })
})
