/**
 * Scenarios written from a real MCP server's tools (the SDK's server of `fixtures/mcp-server.mjs`, over stdio). The
 * writing model is scripted (`mcpSupport.ts`), the only double: a model that can write tasks does not run here (the
 * embedded base models write well-formed JSON with meaningless words), and the script makes the answers to sift
 * known: repeats, unknown tools, malformed answers.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Ref from "effect/Ref"
import { readScenarios } from "../../src/cli/trainAgent.js"
import * as McpScenarios from "../../src/workflow/McpScenarios.js"
import * as McpTools from "../../src/workflow/McpTools.js"
import { scripted, stdioServer } from "./mcpSupport.js"

const tasks = (...list: ReadonlyArray<readonly [string, ReadonlyArray<string>]>) =>
  JSON.stringify({ tasks: list.map(([task, tools]) => ({ task, tools })) })

describe("McpScenarios", () => {
  it.live("writes tasks from the server's tools, drops repeats, unknown tools and malformed answers, saves JSONL", () =>
    Effect.gen(function* () {
      const server = yield* McpTools.servers(stdioServer)
      const { policy, sent } = yield* scripted([
        {
          content: tasks(
            ["Echo the word 'hello'.", ["echo"]],
            ["desas", ["echo"]],
            ["Add 2 and 40.", ["add"]],
            ["echo the word HELLO", ["echo"]],
            ["Delete the file /tmp/x.", ["delete_file"]],
            ["Count twice, then add 1 and the count.", ["count", "add"]]
          )
        },
        { content: "Sure! Here are some tasks: ..." },
        { content: `\`\`\`json\n${tasks(["Add 2 and 40!", ["add"]], ["Echo 'bye' back.", ["echo", "echo"]])}\n\`\`\`` },
        { content: tasks(["Wait 10 ms with slow.", ["slow"]]) }
      ])
      const written = yield* McpScenarios.write({ policy, tools: server.tools, count: 5, batch: 5, maxRequests: 6 })
      expect(written.scenarios).toEqual([
        { task: "Echo the word 'hello'.", tools: ["echo"] },
        { task: "Add 2 and 40.", tools: ["add"] },
        { task: "Count twice, then add 1 and the count.", tools: ["count", "add"] },
        { task: "Echo 'bye' back.", tools: ["echo"] },
        { task: "Wait 10 ms with slow.", tools: ["slow"] }
      ])
      expect(written.dropped).toEqual({ duplicates: 2, unknownTools: 1, malformed: 1, tooShort: 1 })
      expect(written.requests).toBe(4)
      // Each completion asks for what is still missing, the tools listed with their schemas, as structured output.
      const requests = yield* Ref.get(sent)
      expect(requests.map((r) => /Write (\d+) tasks/.exec(String(r.messages.at(-1)?.content))?.[1])).toEqual([
        "5",
        "2",
        "2",
        "1"
      ])
      expect(String(requests[0]!.messages[0]!.content)).toContain(
        '- add: Adds two numbers\n  arguments: {"type":"object"'
      )
      expect(requests[0]!.response_format).toMatchObject({
        type: "json_schema",
        json_schema: { schema: { properties: { tasks: { maxItems: 5 } } } }
      })

      const dir = mkdtempSync(join(tmpdir(), "effect-rl-mcp-scenarios-"))
      try {
        const file = join(dir, "scenarios.jsonl")
        yield* McpScenarios.save(file, written.scenarios)
        expect(yield* McpScenarios.read(file)).toEqual(written.scenarios)
        // What train-agent (and train-mcp) read: one JSON value a line.
        expect(yield* readScenarios(file)).toEqual(written.scenarios)
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }).pipe(Effect.scoped)
  )

  it.live("a model that writes nothing usable: NoTasks, saying what was dropped", () =>
    Effect.gen(function* () {
      const server = yield* McpTools.connect(stdioServer)
      const { policy } = yield* scripted([{ content: tasks(["Fly to the moon.", ["rocket"]]) }])
      const error = yield* Effect.flip(McpScenarios.write({ policy, tools: server.tools, count: 4, maxRequests: 2 }))
      expect(error).toMatchObject({ _tag: "ScenarioError", reason: "NoTasks" })
      expect(error.message).toContain("0 malformed, 2 naming tools the server does not list, 0 repeated")
    }).pipe(Effect.scoped)
  )
})
