/**
 * Tools from an MCP server (the Model Context Protocol): a rollout's tools served by a command run over stdio or
 * by a Streamable HTTP endpoint, offered to the policy as function tools and run through the server by the
 * `Tools` loop, so that every turn, call and result is recorded as with tools written in Effect.
 *
 * - {@link connect} starts (or reaches) the server, initializes the session and lists its tools once (name,
 *   description, input schema). A command runs in a process group of its own; when the scope closes, the group is
 *   sent SIGTERM and, after a grace period, SIGKILL, so nothing it started survives it; Ctrl-C (the runtime's
 *   interruption) closes the scope too, and a guard process kills the group if this process dies outright.
 * - {@link run} is `Tools.run` with the server's tools: each tool's `parameters` is its input schema (on the
 *   embedded backend, what the call's arguments are constrained to), each call goes to the server under a time
 *   limit, and its result (text, structured content, `isError`) becomes the `tool` message.
 * - {@link servers} gives rollouts their server: one shared by all of them, or one per rollout for a server that
 *   keeps state (`perRollout: true`).
 *
 * A call the server answers with `isError`, or refuses with a JSON-RPC error, is the model's to read (`Error: ...`
 * in the tool message, counted in `tool_errors`), like a failing handler of `Tools`. The server's own failures fail
 * the rollout with an {@link McpError}: it could not start, it broke the protocol, it exited (its stderr's tail
 * in the error), a call outlived its time limit.
 *
 * Built on the official TypeScript SDK, `@modelcontextprotocol/sdk` (an optional peer dependency), loaded when a
 * server is first connected: importing this module loads none of it.
 *
 * ```ts
 * const program = Effect.gen(function* () {
 *   const memory = yield* McpTools.servers({ command: "npx -y @modelcontextprotocol/server-memory" })
 *   return yield* TrainingLoop.run({
 *     policy, scenarios, reward, groupsPerStep: 4, rolloutsPerGroup: 8, steps: 5,
 *     rollout: (task: string) => memory.use((server) => McpTools.run(server, { prompt: task, maxTurns: 6 }))
 *   })
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type { JsonObject, JsonValue } from "../api/Json.js"
import type { ApiError } from "../client/ApiError.js"
import type * as Rollout from "./Rollout.js"
import * as Tools from "./Tools.js"

/** A server run as a command, spoken to over its stdin and stdout. */
export interface StdioServer {
  /** A shell command line (run with `sh -c`), or a program and its arguments. */
  readonly command: string | ReadonlyArray<string>
  /**
   * Variables added to its environment. By default it inherits only the SDK's safe few (`HOME`, `PATH`, `USER`,
   * ...), not this process's secrets (`WANDB_API_KEY`); {@link StdioServer.inheritEnv} passes them all.
   */
  readonly env?: Readonly<Record<string, string>> | undefined
  /** Whether it inherits this process's whole environment (default false). */
  readonly inheritEnv?: boolean | undefined
  /** Its working directory (default: this process's). */
  readonly cwd?: string | undefined
}

/** A server reached over Streamable HTTP. */
export interface HttpServer {
  /** Its endpoint (`https://host/mcp`). */
  readonly url: string
  /** Headers sent with every request (`Authorization`, ...); never shown in errors or logs. */
  readonly headers?: Readonly<Record<string, string>> | undefined
}

/** An MCP server: a command, or an endpoint. */
export type Server = StdioServer | HttpServer

/** Whether a server is a command (else an endpoint). */
export const isStdio = (server: Server): server is StdioServer => "command" in server

/**
 * How a server is named in errors: its command line, or its URL without credentials, query or fragment (headers
 * are never shown).
 */
export const labelOf = (server: Server): string => {
  if (isStdio(server)) return typeof server.command === "string" ? server.command : server.command.join(" ")
  try {
    const url = new URL(server.url)
    return `${url.protocol}//${url.host}${url.pathname}`
  } catch {
    return "<an endpoint whose URL does not parse>"
  }
}

/**
 * Why a server failed: it could not start (`Start`: no such command, it exited or answered wrongly before its
 * tools were listed), it broke the protocol (`Protocol`), it exited or dropped the connection (`Closed`), it did
 * not answer in time (`Timeout`), it refused a call (`Call`: a JSON-RPC error, such as arguments that do not fit
 * its schema), or a call's result was an error (`ToolError`: `isError`, the tool's own text).
 */
export type McpErrorReason = "Start" | "Protocol" | "Closed" | "Timeout" | "Call" | "ToolError"

/** A failure of an MCP server or of one of its calls (see {@link McpErrorReason}). */
export class McpError extends Data.TaggedError("McpError")<{
  /** What failed. */
  readonly reason: McpErrorReason
  /** The server, as {@link labelOf} names it. */
  readonly server: string
  /** What went wrong, in words. */
  readonly description: string
  /** The tool called, for a call's failure. */
  readonly tool?: string | undefined
  /** The end of what a command wrote to its stderr, when it tells why it failed. */
  readonly stderr?: string | undefined
  /** The underlying error. */
  readonly cause?: unknown
}> {
  override get message(): string {
    // A call's own failure is what the model reads after `Error: `: the tool's words, not the server's name.
    if (this.reason === "ToolError" || this.reason === "Call") return this.description
    const tail = this.stderr?.trim() ?? ""
    return `MCP server ${this.server}: ${this.description}${tail === "" ? "" : `; its stderr ended with: ${tail}`}`
  }
}

/** Whether an error is one the model reads as a call's result (under `onToolError: "result"`). */
export const isCallFailure = (error: McpError): boolean => error.reason === "ToolError" || error.reason === "Call"

/** A tool as the server lists it. */
export interface ToolInfo {
  /** The function name the model calls. */
  readonly name: string
  /** What it does, for the model. */
  readonly description: string | undefined
  /** The JSON Schema of its arguments (an object). */
  readonly inputSchema: JsonObject
}

/** The result of a call, as the server gave it and as the model reads it. */
export interface CallResult {
  /** The text the `tool` message carries (see {@link render}). */
  readonly text: string
  /** Whether the server said the call failed (`isError`). */
  readonly isError: boolean
  /** The structured content, if the server gave one. */
  readonly structured: JsonValue | undefined
  /** The content blocks as given. */
  readonly content: ReadonlyArray<JsonObject>
}

/** A call's tool, as an agent tool of `Tools`: its arguments a JSON object, its result the server's. */
export type McpAgentTool = Tools.AgentTool<string, JsonObject, CallResult, McpError, never>

/** A connected server: its tools, listed once, and calls through it. */
export interface Connection {
  /** The server, as {@link labelOf} names it. */
  readonly label: string
  /** The process id of a command's server (the leader of its process group); undefined for an endpoint. */
  readonly pid: number | undefined
  /** The tools the server listed when it was connected, in its order. */
  readonly tools: ReadonlyArray<ToolInfo>
  /** The same tools as agent tools of `Tools`, their calls going to the server. */
  readonly agentTools: ReadonlyArray<McpAgentTool>
  /**
   * Calls a tool with arguments, under the call time limit. An `isError` result fails with reason `ToolError`
   * (its text the error's message); a JSON-RPC error with reason `Call`.
   */
  readonly call: (name: string, args: JsonObject) => Effect.Effect<CallResult, McpError>
  /** The tail of what a command's server wrote to stderr so far ("" for an endpoint). */
  readonly stderr: Effect.Effect<string>
}

/** Options of {@link connect}. */
export interface ConnectOptions {
  /** How long starting, initializing and listing the tools may take (default 30 seconds). */
  readonly startTimeout?: Duration.DurationInput | undefined
  /** How long one call may take (default 30 seconds); the call is then cancelled and fails with `Timeout`. */
  readonly callTimeout?: Duration.DurationInput | undefined
  /** How much of a command's stderr is kept for errors, in characters (default 4,096). */
  readonly stderrTail?: number | undefined
  /** How long a command has to exit after SIGTERM before its group is sent SIGKILL (default 2 seconds). */
  readonly killGrace?: Duration.DurationInput | undefined
}

/**
 * Connects to a server for the scope: starts a command (in its own process group) or reaches an endpoint,
 * initializes the session and lists the tools. Closing the scope ends the session and the command's whole group.
 */
export const connect = (
  server: Server,
  options: ConnectOptions = {}
): Effect.Effect<Connection, McpError, Scope.Scope> =>
  Effect.flatMap(
    Effect.promise(() => import("./internal/mcp.js")),
    (implementation) => implementation.connect(server, options)
  )

/** How rollouts get their server. */
export interface Servers {
  /** The server, as {@link labelOf} names it. */
  readonly label: string
  /** The tools listed when the server was first connected. */
  readonly tools: ReadonlyArray<ToolInfo>
  /** Whether each rollout gets a server of its own. */
  readonly perRollout: boolean
  /** Runs `f` with a server: the shared one, or one started for this call and ended after it. */
  readonly use: <A, E, R>(f: (connection: Connection) => Effect.Effect<A, E, R>) => Effect.Effect<A, E | McpError, R>
}

/** Options of {@link servers}. */
export interface ServersOptions extends ConnectOptions {
  /**
   * One server per rollout, started for it and ended after it (for a server that keeps state a rollout must not
   * see another's), rather than one shared by all (default false).
   */
  readonly perRollout?: boolean | undefined
}

/**
 * The server of a loop's rollouts, for the scope. It is connected once here either way, so that a server that
 * cannot start fails the loop before it runs and its tools are known (to write scenarios from them); shared, that
 * connection serves every rollout; per rollout, it is closed and each {@link Servers.use} connects anew.
 */
export const servers = (server: Server, options: ServersOptions = {}): Effect.Effect<Servers, McpError, Scope.Scope> =>
  Effect.gen(function* () {
    const label = labelOf(server)
    if (options.perRollout !== true) {
      const shared = yield* connect(server, options)
      return { label, tools: shared.tools, perRollout: false, use: (f) => f(shared) } satisfies Servers
    }
    const tools = yield* Effect.scoped(Effect.map(connect(server, options), (connection) => connection.tools))
    return {
      label,
      tools,
      perRollout: true,
      use: (f) => Effect.scoped(Effect.flatMap(connect(server, options), f))
    } satisfies Servers
  })

const blockText = (block: JsonObject): string => {
  switch (block.type) {
    case "text":
      return typeof block.text === "string" ? block.text : ""
    case "resource": {
      const resource = (block.resource ?? {}) as JsonObject
      return typeof resource.text === "string" ? resource.text : `[resource ${String(resource.uri ?? "")}]`
    }
    case "resource_link":
      return `[resource ${String(block.uri ?? "")}]`
    default:
      return `[${String(block.type)}${typeof block.mimeType === "string" ? ` ${block.mimeType}` : ""}]`
  }
}

/**
 * The text of a result, as the `tool` message carries it: its content blocks' text joined by newlines (a resource
 * by its text, an image or audio block as `[image image/png]`); with no content, the structured content as JSON.
 */
export const render = (content: ReadonlyArray<JsonObject>, structured: JsonValue | undefined): string =>
  content.length === 0 && structured !== undefined ? JSON.stringify(structured) : content.map(blockText).join("\n")

/** Options of {@link run}: those of `Tools.run`, but the tools, which are the server's. */
export interface RunOptions extends Omit<Tools.RunOptions<Tools.Any>, "tools"> {
  /** The server's tools to offer, by name (default: all of them). */
  readonly only?: ReadonlyArray<string> | undefined
}

/**
 * Runs `Tools.run` in the current rollout with the server's tools. A call the server answers with `isError` or
 * refuses is a result the model reads (`Error: ...`, counted in `tool_errors`) unless `onToolError: "fail"`; the
 * server's own failures (it exited, broke the protocol, a call timed out) fail the rollout with an
 * {@link McpError} whatever `onToolError` says.
 */
export const run = (
  connection: Connection,
  options: RunOptions
): Effect.Effect<Tools.Outcome, ApiError | Rollout.InvalidTurn | Tools.ToolCallError | McpError, Rollout.Current> => {
  const offered =
    options.only === undefined
      ? connection.agentTools
      : connection.agentTools.filter((tool) => options.only!.includes(tool.name))
  if (options.onToolError === "fail") return Tools.run({ ...options, tools: offered })
  // Under "result", `Tools.run` hands every failure of a handler to the model. A server's own failure must fail the
  // rollout instead: it leaves the handler as a defect, which `Tools.run` does not catch, and is turned back into
  // the typed failure it was here, at the loop's edge.
  const tools = offered.map(
    (tool): McpAgentTool => ({
      ...tool,
      handler: (args) => Effect.catchIf(tool.handler(args), (error) => !isCallFailure(error), Effect.die)
    })
  )
  return Tools.run({ ...options, tools }).pipe(
    Effect.catchSomeDefect((defect) => (defect instanceof McpError ? Option.some(Effect.fail(defect)) : Option.none()))
  )
}
