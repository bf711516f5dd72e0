/**
 * Ctrl-C in a program using an MCP server (`fixtures/mcp-driver.ts`, run as its own process through tsx, which
 * takes seconds to start: hence the slow tier): the program's process group gets SIGINT mid-call, as a terminal's
 * foreground job does; the program ends, and so do the server (in a group of its own, which the terminal's SIGINT
 * does not reach) and the sleep the server started.
 */
import { spawn } from "node:child_process"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { goneWithin, SERVER } from "./mcpSupport.js"

describe("McpTools", () => {
  it.live("Ctrl-C mid-call: the program ends, and so do the server and what it started", () =>
    Effect.gen(function* () {
      const driver = join(import.meta.dirname, "fixtures", "mcp-driver.ts")
      // Its own process group, as a terminal's foreground job: Ctrl-C sends SIGINT to the group.
      const child = spawn(process.execPath, ["--import", "tsx/esm", driver, SERVER], {
        detached: true,
        stdio: ["ignore", "pipe", "inherit"]
      })
      const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
      const pids = yield* Effect.promise(
        () =>
          new Promise<ReadonlyArray<number>>((resolve) => {
            let out = ""
            child.stdout.setEncoding("utf8")
            child.stdout.on("data", (chunk: string) => {
              out += chunk
              const match = /ready (\d+) (\d+)/.exec(out)
              if (match !== null) resolve([Number(match[1]), Number(match[2])])
            })
          })
      )
      expect(yield* Effect.promise(() => goneWithin(pids, 0))).toEqual(pids)
      process.kill(-child.pid!, "SIGINT")
      // NodeRuntime.runMain ends an interrupted program with code 0 (the command's own edge says 130).
      expect(yield* Effect.promise(() => exited)).toBe(0)
      expect(yield* Effect.promise(() => goneWithin(pids))).toEqual([])
    })
  )
})
