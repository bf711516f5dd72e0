/**
 * `McpTools.connect`'s implementation, on the official SDK's `Client`: a command run by a transport of our own
 * (the SDK's stdio transport cannot put its child in a process group of its own, and so cannot end what the child
 * starts), or the SDK's Streamable HTTP transport; the session initialized and the tools listed under the start
 * time limit; calls under the call time limit, cancelled through the SDK (which tells the server) when it runs
 * out; the SDK's errors mapped once, here, to `McpError`. Loaded by `McpTools` when a server is first connected.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import { ErrorCode, type JSONRPCMessage, McpError as SdkError } from "@modelcontextprotocol/sdk/types.js"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import type { Tool } from "../../api/ChatMessage.js"
import type { JsonObject, JsonValue } from "../../api/Json.js"
import { version } from "../../internal/version.js"
import type {
  CallResult,
  Connection,
  ConnectOptions,
  McpAgentTool,
  Server,
  StdioServer,
  ToolInfo
} from "../McpTools.js"
import { isStdio, labelOf, McpError, render } from "../McpTools.js"
import { guarded, unguarded } from "./externalAgent.js"
import { SecretTail } from "./secretTail.js"

const killGroup = (pid: number, signal: NodeJS.Signals) => {
  try {
    process.kill(-pid, signal)
  } catch {
    // The group is gone already.
  }
}

/** How a command ended. */
interface Exit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

const exitText = (exit: Exit) =>
  exit.signal === null ? `exited with code ${exit.code}` : `was killed by ${exit.signal}`

/**
 * The stdio transport: newline-delimited JSON-RPC over the stdin and stdout of a command started in a process group
 * of its own (handed to the guard, so that it dies with this process however this process dies). `onclose` is
 * called once the command's output has ended (so its stderr's tail is whole when a pending call is rejected).
 */
class GroupStdioTransport implements Transport {
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: (message: JSONRPCMessage) => void
  /** How the command ended, once it has. */
  exit: Exit | undefined
  /** Resolves when the command has ended. */
  readonly ended: Promise<void>
  /** The last message that was not JSON-RPC, if any. */
  garbled: string | undefined
  child: ChildProcess | undefined
  private readonly buffer = new ReadBuffer()
  private markEnded: () => void = () => {}

  constructor(
    private readonly server: StdioServer,
    readonly stderr: SecretTail
  ) {
    this.ended = new Promise((resolve) => {
      this.markEnded = resolve
    })
  }

  start(): Promise<void> {
    const server = this.server
    const [program, args, shell] =
      typeof server.command === "string"
        ? [server.command, [] as ReadonlyArray<string>, true]
        : [server.command[0] ?? "", server.command.slice(1), false]
    return new Promise((resolve, reject) => {
      const child = spawn(program, args, {
        shell,
        detached: true,
        env: { ...(server.inheritEnv === true ? process.env : getDefaultEnvironment()), ...server.env },
        ...(server.cwd === undefined ? {} : { cwd: server.cwd }),
        stdio: ["pipe", "pipe", "pipe"]
      })
      this.child = child
      child.once("error", (error) => {
        this.exit ??= { code: null, signal: null }
        this.markEnded()
        reject(error)
      })
      child.once("spawn", () => {
        if (child.pid !== undefined) guarded(child.pid)
        resolve()
      })
      child.once("close", (code, signal) => {
        this.exit = { code, signal }
        if (child.pid !== undefined) {
          // Whatever it left running in its group goes with it.
          killGroup(child.pid, "SIGKILL")
          unguarded(child.pid)
        }
        this.markEnded()
        this.onclose?.()
      })
      child.stderr.setEncoding("utf8")
      child.stderr.on("data", (chunk: string) => this.stderr.push(chunk))
      child.stdin.on("error", () => {})
      child.stdout.on("data", (chunk: Buffer) => {
        this.buffer.append(chunk)
        for (;;) {
          let message: JSONRPCMessage | null
          try {
            message = this.buffer.readMessage()
          } catch (error) {
            this.garbled = error instanceof Error ? error.message : String(error)
            this.onerror?.(error instanceof Error ? error : new Error(String(error)))
            continue
          }
          if (message === null) break
          this.onmessage?.(message)
        }
      })
    })
  }

  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.child?.stdin
    if (stdin === undefined || stdin === null || !stdin.writable) return Promise.reject(new Error("Not connected"))
    return new Promise((resolve) => {
      if (stdin.write(serializeMessage(message))) resolve()
      else stdin.once("drain", resolve)
    })
  }

  /** Ends its stdin and sends its group SIGTERM; {@link stop} waits for the end. */
  close(): Promise<void> {
    const child = this.child
    if (child !== undefined && this.exit === undefined) {
      child.stdin?.end()
      if (child.pid !== undefined) killGroup(child.pid, "SIGTERM")
    }
    return Promise.resolve()
  }
}

/** Ends a command: SIGTERM to its group, then SIGKILL after the grace period, and waits until it has ended. */
const stop = (transport: GroupStdioTransport, grace: Duration.DurationInput) =>
  Effect.gen(function* () {
    yield* Effect.promise(() => transport.close())
    const pid = transport.child?.pid
    yield* Effect.promise(() => transport.ended).pipe(
      Effect.timeout(grace),
      Effect.catchAll(() =>
        Effect.sync(() => {
          if (pid !== undefined) killGroup(pid, "SIGKILL")
        }).pipe(Effect.zipRight(Effect.promise(() => transport.ended)))
      )
    )
  })

const errorText = (error: unknown) => (error instanceof Error ? error.message : String(error))

const ToolList = Schema.Array(
  Schema.Struct({
    name: Schema.String,
    description: Schema.optional(Schema.String),
    inputSchema: Schema.Record({ key: Schema.String, value: Schema.Unknown })
  })
)

/**
 * A tool as the chat-completions request offers it: its input schema as the function's `parameters`, less
 * `$schema` (prompt tokens that tell the model nothing).
 */
const definitionOf = (tool: ToolInfo): Tool => {
  const { $schema: _, ...parameters } = tool.inputSchema
  return {
    type: "function",
    function: {
      name: tool.name,
      ...(tool.description === undefined ? {} : { description: tool.description }),
      parameters
    }
  }
}

const ArgumentsJson = Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Unknown }))

/** See `McpTools.connect`. */
export const connect = (server: Server, options: ConnectOptions): Effect.Effect<Connection, McpError, Scope.Scope> =>
  Effect.gen(function* () {
    const label = labelOf(server)
    const stderr = new SecretTail(options.stderrTail ?? 4096, "")
    const startTimeout = Duration.decode(options.startTimeout ?? "30 seconds")
    const callTimeout = Duration.decode(options.callTimeout ?? "30 seconds")
    const stdio = isStdio(server) ? new GroupStdioTransport(server, stderr) : undefined
    const transport: Transport =
      stdio ??
      new StreamableHTTPClientTransport(new URL((server as { url: string }).url), {
        requestInit: { headers: { ...(server as { headers?: Record<string, string> }).headers } }
      })
    const client = new Client({ name: "effect-rl", version }, { capabilities: {} })
    const fail = (reason: McpError["reason"], description: string, extra: { tool?: string; cause?: unknown } = {}) =>
      new McpError({
        reason,
        server: label,
        description,
        ...(stdio === undefined ? {} : { stderr: stderr.value() }),
        ...extra
      })
    /** A failure of the session: the command ended, the transport failed, or the server answered an error. */
    const failure = (error: unknown, during: string, tool?: string): McpError => {
      const extra = { cause: error, ...(tool === undefined ? {} : { tool }) }
      if (stdio?.exit !== undefined) return fail("Closed", `the server ${exitText(stdio.exit)} ${during}`, extra)
      if (error instanceof SdkError) {
        if (error.code === ErrorCode.ConnectionClosed) return fail("Closed", `the connection closed ${during}`, extra)
        if (error.code === ErrorCode.RequestTimeout) return fail("Timeout", `no answer ${during}`, extra)
        return fail(tool === undefined ? "Protocol" : "Call", `${errorText(error)} (${during})`, extra)
      }
      if (stdio?.garbled !== undefined) {
        return fail("Protocol", `it wrote what is not JSON-RPC (${stdio.garbled}) ${during}`, extra)
      }
      return fail("Protocol", `${errorText(error)} ${during}`, extra)
    }

    // The finalizer first, so that a command that started and then failed to initialize is ended too.
    yield* Effect.addFinalizer(() =>
      stdio === undefined
        ? Effect.promise(async () => {
            await (transport as StreamableHTTPClientTransport).terminateSession().catch(() => {})
            await client.close().catch(() => {})
          })
        : stop(stdio, options.killGrace ?? "2 seconds")
    )
    const started = yield* Effect.tryPromise({
      try: async (signal) => {
        await client.connect(transport, { signal, timeout: Duration.toMillis(startTimeout) + 1000 })
        const listed: Array<unknown> = []
        let cursor: string | undefined
        do {
          const page = await client.listTools(cursor === undefined ? {} : { cursor }, { signal })
          listed.push(...page.tools)
          cursor = page.nextCursor
        } while (cursor !== undefined)
        return listed
      },
      catch: (error) => {
        const mapped = failure(error, "before its tools were listed")
        return new McpError({ ...mapped, reason: mapped.reason === "Timeout" ? "Timeout" : "Start" })
      }
    }).pipe(
      Effect.timeoutFail({
        duration: startTimeout,
        onTimeout: () =>
          fail(
            stdio?.garbled === undefined ? "Timeout" : "Protocol",
            stdio?.garbled === undefined
              ? `it did not initialize and list its tools within ${Duration.format(startTimeout)}`
              : `it wrote what is not JSON-RPC (${stdio.garbled}) and did not initialize`
          )
      }),
      Effect.flatMap((listed) =>
        Schema.decodeUnknown(ToolList)(listed).pipe(
          Effect.mapError((error) => fail("Protocol", `its tool list does not decode: ${error.message}`))
        )
      )
    )
    const tools: ReadonlyArray<ToolInfo> = started.map((tool) => ({
      name: tool.name,
      description: tool.description,
      inputSchema: tool.inputSchema as JsonObject
    }))

    const call = (name: string, args: JsonObject): Effect.Effect<CallResult, McpError> =>
      Effect.tryPromise({
        try: (signal) =>
          client.callTool({ name, arguments: args }, undefined, {
            signal,
            // The SDK's own limit is left past ours, so that ours (which cancels the call) is the one that ends it.
            timeout: Duration.toMillis(callTimeout) + 1000
          }),
        catch: (error) => failure(error, `during the call of ${name}`, name)
      }).pipe(
        Effect.timeoutFail({
          duration: callTimeout,
          onTimeout: () =>
            fail("Timeout", `the call of ${name} did not end within ${Duration.format(callTimeout)}`, { tool: name })
        }),
        Effect.flatMap((answer) => {
          const content = (Array.isArray(answer.content) ? answer.content : []) as ReadonlyArray<JsonObject>
          const structured = answer.structuredContent as JsonValue | undefined
          const result: CallResult = {
            text: render(content, structured),
            isError: answer.isError === true,
            structured,
            content
          }
          return result.isError ? Effect.fail(fail("ToolError", result.text, { tool: name })) : Effect.succeed(result)
        }),
        Effect.withSpan("McpTools.call", { attributes: { "mcp.server": label, "mcp.tool": name } })
      )

    const agentTools = tools.map(
      (tool): McpAgentTool => ({
        name: tool.name,
        definition: definitionOf(tool),
        decode: (text) =>
          Effect.map(Schema.decodeUnknown(ArgumentsJson)(text), (args) => args as JsonObject) as Effect.Effect<
            JsonObject,
            ParseResult.ParseError
          >,
        handler: (args) => call(tool.name, args),
        render: (result) => result.text
      })
    )
    return {
      label,
      pid: stdio?.child?.pid,
      tools,
      agentTools,
      call,
      stderr: Effect.sync(() => stderr.value())
    } satisfies Connection
  })
