/**
 * Tools from MCP servers written by others, as users run them from the registry: the reference knowledge-graph
 * server (`@modelcontextprotocol/server-memory`) over stdio, and the reference test server
 * (`@modelcontextprotocol/server-everything`) over Streamable HTTP, each started by the test as its own process
 * from the package installed beside ours (no download). The policy is scripted (`scripted.ts`) so that the calls
 * are known; the servers, the SDK and the tool loop are the real ones.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { ToolMessage } from "../../src/api/ChatMessage.js"
import * as McpTools from "../../src/workflow/McpTools.js"
import * as Rollout from "../../src/workflow/Rollout.js"
import { goneWithin, scripted } from "./mcpSupport.js"

const registry = join(import.meta.dirname, "..", "..", "node_modules", "@modelcontextprotocol")
const MEMORY = join(registry, "server-memory", "dist", "index.js")
const EVERYTHING = join(registry, "server-everything", "dist", "index.js")

const toolMessages = (messages: ReadonlyArray<unknown>) =>
  messages.filter((m): m is ToolMessage => (m as { role?: string }).role === "tool").map((m) => m.content)

/** A port free now (the reference server takes its port from `PORT` and cannot be asked for port 0's). */
const freePort = Effect.async<number>((resume) => {
  const probe = createServer()
  probe.listen(0, "127.0.0.1", () => {
    const address = probe.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    probe.close(() => resume(Effect.succeed(port)))
  })
})

/** `server-everything streamableHttp` as a process for the scope: its `/mcp` URL and the process. */
const everything = Effect.acquireRelease(
  Effect.flatMap(freePort, (port) =>
    Effect.async<{ readonly url: string; readonly child: ChildProcess }, Error>((resume) => {
      const child = spawn(process.execPath, [EVERYTHING, "streamableHttp"], {
        env: { ...process.env, PORT: String(port) },
        stdio: ["ignore", "ignore", "pipe"]
      })
      let err = ""
      child.stderr!.setEncoding("utf8")
      child.stderr!.on("data", (chunk: string) => {
        err += chunk
        if (/listening on port/.test(err)) resume(Effect.succeed({ url: `http://127.0.0.1:${port}/mcp`, child }))
      })
      child.once("exit", (code) => resume(Effect.fail(new Error(`server-everything exited (${code}): ${err}`))))
    })
  ),
  ({ child }) =>
    Effect.async<void>((resume) => {
      if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
      child.once("exit", () => resume(Effect.void))
      child.kill("SIGKILL")
    })
)

describe("McpTools with the registry's reference servers", () => {
  it.live("server-memory over stdio: entities created, searched and kept in its file; bad arguments are isError", () =>
    Effect.gen(function* () {
      const dir = mkdtempSync(join(tmpdir(), "effect-rl-mcp-memory-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const file = join(dir, "memory.jsonl")
      const pid = yield* Effect.scoped(
        Effect.gen(function* () {
          const server = yield* McpTools.connect({
            command: [process.execPath, MEMORY],
            env: { MEMORY_FILE_PATH: file }
          })
          expect(server.tools.map((t) => t.name)).toEqual(
            expect.arrayContaining(["create_entities", "create_relations", "read_graph", "search_nodes", "open_nodes"])
          )
          const entity = { name: "Ada", entityType: "person", observations: ["wrote the first program"] }
          const { policy } = yield* scripted([
            { calls: [["create_entities", JSON.stringify({ entities: [entity] })]] },
            {
              calls: [
                ["search_nodes", '{"query":"first program"}'],
                ["create_entities", '{"entities":"Ada"}']
              ]
            },
            { content: "Ada wrote the first program." }
          ])
          const finished = yield* Rollout.run(policy, McpTools.run(server, { prompt: "remember Ada", maxTurns: 4 }))
          const outcome = finished.value
          expect(outcome.answer).toBe("Ada wrote the first program.")
          expect(outcome.calls.map((c) => [c.name, c.failed])).toEqual([
            ["create_entities", false],
            ["search_nodes", false],
            ["create_entities", true]
          ])
          // The search found what the first call created, through the server's own store.
          expect(JSON.parse(outcome.calls[1]!.result)).toMatchObject({ entities: [entity] })
          expect(outcome.calls[2]!.result).toMatch(/^Error: /)
          expect(toolMessages(finished.trajectory.messages_and_choices)).toHaveLength(3)
          return server.pid!
        })
      )
      // Its graph is in its file (JSON lines), and the process is gone with the scope.
      expect(readFileSync(file, "utf8")).toContain('"name":"Ada"')
      expect(yield* Effect.promise(() => goneWithin([pid]))).toEqual([])
    }).pipe(Effect.scoped)
  )

  it.live("server-everything over Streamable HTTP: its tools listed, a call's text and bad arguments' error", () =>
    Effect.gen(function* () {
      const { url } = yield* everything
      const server = yield* McpTools.connect({ url })
      expect(server.pid).toBeUndefined()
      const names = server.tools.map((t) => t.name)
      expect(names).toEqual(expect.arrayContaining(["echo", "get-sum"]))
      expect(server.tools.find((t) => t.name === "get-sum")!.inputSchema).toMatchObject({
        properties: { a: { type: "number" }, b: { type: "number" } }
      })
      const { policy } = yield* scripted([
        {
          calls: [
            ["get-sum", '{"a":2,"b":3}'],
            ["echo", '{"message":"over http"}'],
            ["get-sum", '{"a":"two"}']
          ]
        },
        { content: "5" }
      ])
      const finished = yield* Rollout.run(policy, McpTools.run(server, { prompt: "add" }))
      const [sum, echo, bad] = finished.value.calls
      expect(sum).toMatchObject({ name: "get-sum", failed: false, result: expect.stringContaining("is 5") })
      expect(echo).toMatchObject({ name: "echo", failed: false, result: expect.stringContaining("over http") })
      expect(bad).toMatchObject({ name: "get-sum", failed: true, result: expect.stringMatching(/^Error: /) })
    }).pipe(Effect.scoped)
  )
})
