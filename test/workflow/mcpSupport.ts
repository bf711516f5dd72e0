/**
 * What the MCP tests share: the test server (`fixtures/mcp-server.mjs`, the official SDK's server run as its own
 * process), a policy that plays a script of turns, and checks that a process is gone.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { join } from "node:path"
import * as Effect from "effect/Effect"
import * as Ref from "effect/Ref"
import type { ChatCompletion, ChatCompletionRequest, ResponseToolCall } from "../../src/api/ChatCompletion.js"
import * as Policy from "../../src/workflow/Policy.js"

/** The test server's script. */
export const SERVER = join(import.meta.dirname, "fixtures", "mcp-server.mjs")

/** The test server over stdio, as a program and its arguments. */
export const stdioServer = { command: [process.execPath, SERVER] } as const

/** A turn of a scripted policy: text, or calls as tool name and JSON arguments. */
export type Turn = { readonly content?: string; readonly calls?: ReadonlyArray<readonly [string, string]> }

/**
 * A policy that plays a script of turns, recording each request it gets. A scripted double: these tests are about
 * what is done with the calls a model makes and the tasks it writes (which the embedded base models cannot write);
 * the MCP servers, the SDK and the tool loop are the real ones.
 */
export const scripted = (turns: ReadonlyArray<Turn>) =>
  Effect.gen(function* () {
    const sent = yield* Ref.make<ReadonlyArray<ChatCompletionRequest>>([])
    const policy = Policy.make({
      name: "scripted",
      complete: (request) =>
        Effect.gen(function* () {
          const all = yield* Ref.updateAndGet(sent, (xs) => [...xs, request])
          const turn = turns[Math.min(all.length, turns.length) - 1]!
          const calls: ReadonlyArray<ResponseToolCall> = (turn.calls ?? []).map(([name, args], i) => ({
            id: `call_${all.length}_${i}`,
            type: "function",
            function: { name, arguments: args }
          }))
          return {
            id: `chatcmpl-${all.length}`,
            object: "chat.completion",
            created: 0,
            model: "scripted",
            choices: [
              {
                index: 0,
                message: {
                  role: "assistant",
                  content: turn.content ?? null,
                  ...(calls.length > 0 ? { tool_calls: calls } : {})
                },
                finish_reason: calls.length > 0 ? "tool_calls" : "stop",
                logprobs: { content: [{ token: "x", logprob: -0.5, bytes: [120], top_logprobs: [] }] },
                token_ids: [120]
              }
            ],
            usage: { prompt_tokens: 10, completion_tokens: 1, total_tokens: 11 }
          } as unknown as ChatCompletion
        })
    })
    return { policy, sent }
  })

/** Whether a process runs (a zombie counts as gone: `ps` says so where `kill 0` would not). */
export const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  try {
    return !execFileSync("ps", ["-o", "stat=", "-p", String(pid)], { encoding: "utf8" }).startsWith("Z")
  } catch {
    return false
  }
}

/** Waits (up to `ms`) until none of `pids` runs; the ones still running then. */
export const goneWithin = (pids: ReadonlyArray<number>, ms = 3000): Promise<ReadonlyArray<number>> =>
  new Promise((resolve) => {
    const started = Date.now()
    const poll = () => {
      const left = pids.filter(alive)
      if (left.length === 0 || Date.now() - started > ms) resolve(left)
      else setTimeout(poll, 50)
    }
    poll()
  })

/** The test server over Streamable HTTP, started as a process for the scope: its URL. */
export const httpServer = Effect.acquireRelease(
  Effect.async<{ readonly url: string; readonly child: ChildProcess }, Error>((resume) => {
    const child = spawn(process.execPath, [SERVER, "--http"], { stdio: ["ignore", "pipe", "inherit"] })
    let out = ""
    child.stdout.setEncoding("utf8")
    child.stdout.on("data", (chunk: string) => {
      out += chunk
      const match = /listening (\S+)/.exec(out)
      if (match !== null) resume(Effect.succeed({ url: match[1]!, child }))
    })
    child.once("exit", (code) => resume(Effect.fail(new Error(`the HTTP test server exited (${code})`))))
  }),
  ({ child }) =>
    Effect.async<void>((resume) => {
      if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
      child.once("exit", () => resume(Effect.void))
      child.kill("SIGKILL")
    })
)
