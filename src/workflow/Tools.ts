/**
 * Tool agents written with effect-rl: tools declared with a `Schema` for their parameters and a handler that
 * is an Effect, and a loop ({@link run}) that lets the rollout's policy call them until it answers.
 *
 * Each turn is a recorded chat completion ({@link Rollout.chat}) with the tools offered; the calls the model
 * made are decoded with their tool's schema and run (concurrently when it made several), their results go
 * back as `tool` messages, and the loop asks again, until the model answers in text or the turn limit is
 * reached. A call that cannot run (an unknown tool, arguments that do not fit, a handler that fails) becomes a
 * tool result the model sees (`Error: ...`) and counts in the `tool_errors` metric, not a failed rollout;
 * `onToolError: "fail"` makes it fail the rollout instead.
 *
 * ```ts
 * const add = Tools.make("add", {
 *   description: "Adds two numbers",
 *   parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
 *   handler: ({ a, b }) => Effect.succeed(a + b)
 * })
 * const agent = (question: string) =>
 *   Effect.map(Tools.run({ tools: [add], prompt: question, maxTurns: 4 }), (outcome) => outcome.answer)
 * // inside Rollout.run (or a Gather/TrainingLoop rollout): calls, results and the answer are recorded
 * ```
 *
 * @since 0.1.0
 */

import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as JSONSchema from "effect/JSONSchema"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type * as AST from "effect/SchemaAST"
import type { ResponseToolCall } from "../api/ChatCompletion.js"
import type { Message, Tool, ToolMessage } from "../api/ChatMessage.js"
import type { JsonObject } from "../api/Json.js"
import type { ApiError } from "../client/ApiError.js"
import type { Request } from "./Policy.js"
import * as Rollout from "./Rollout.js"

/** A tool the agent offers: its wire definition, how its arguments decode, and its handler. */
export interface AgentTool<Name extends string, Params, Result, E, R> {
  /** The function name the model calls. */
  readonly name: Name
  /** The tool as the chat-completions request offers it (its `parameters` derived from the schema). */
  readonly definition: Tool
  /** Decodes a call's JSON `arguments` string into the handler's parameters. */
  readonly decode: (args: string) => Effect.Effect<Params, ParseResult.ParseError>
  /** Runs the tool. */
  readonly handler: (params: Params) => Effect.Effect<Result, E, R>
  /** The text of a result, as the `tool` message carries it back to the model. */
  readonly render: (result: Result) => string
}

/** Any {@link AgentTool}. */
/* biome-ignore lint/suspicious/noExplicitAny: a tool list mixes tools of any parameter and result types */
export type Any = AgentTool<string, any, any, any, any>

/** The errors of a tool's handler. */
export type ErrorOf<T> = T extends AgentTool<string, infer _P, infer _A, infer E, infer _R> ? E : never

/** The services a tool's handler needs. */
export type ContextOf<T> = T extends AgentTool<string, infer _P, infer _A, infer _E, infer R> ? R : never

/** Options of {@link make}. */
export interface MakeOptions<Params, I, Result, E, R> {
  /** What the tool does, for the model. */
  readonly description?: string | undefined
  /**
   * The parameters: a schema of the object the model writes as the call's `arguments` (its JSON Schema is
   * what the model is offered; on the embedded backend, what its arguments are constrained to).
   */
  readonly parameters: Schema.Schema<Params, I, never>
  /** Runs the tool with the decoded parameters. */
  readonly handler: (params: Params) => Effect.Effect<Result, E, R>
  /**
   * The text of a result for the model; by default a string as it is and anything else as JSON (encoded with
   * {@link MakeOptions.success} when given).
   */
  readonly render?: ((result: Result) => string) | undefined
  /** A schema to encode results with before they are written as JSON. */
  readonly success?: Schema.Schema<Result, unknown, never> | undefined
}

/**
 * The JSON Schema of a parameters schema, as a tool's `parameters`: no `$schema` (it costs prompt tokens and
 * says nothing to the model), definitions under `$defs` when the schema has named parts.
 */
export const parametersOf = (schema: { readonly ast: AST.AST }): JsonObject => {
  const defs: Record<string, JSONSchema.JsonSchema7> = {}
  const json = JSONSchema.fromAST(schema.ast, { definitions: defs, topLevelReferenceStrategy: "skip" })
  return (Object.keys(defs).length === 0 ? json : { ...json, $defs: defs }) as unknown as JsonObject
}

const defaultRender =
  <Result>(success: Schema.Schema<Result, unknown, never> | undefined) =>
  (result: Result): string => {
    if (typeof result === "string") return result
    const encoded = success === undefined ? result : Schema.encodeSync(success)(result)
    return JSON.stringify(encoded) ?? "null"
  }

/** A tool named `name` (the function name the model calls). */
export const make = <const Name extends string, Params, I, Result, E = never, R = never>(
  name: Name,
  options: MakeOptions<Params, I, Result, E, R>
): AgentTool<Name, Params, Result, E, R> => {
  const decodeJson = Schema.decodeUnknown(Schema.parseJson(options.parameters))
  return {
    name,
    definition: {
      type: "function",
      function: {
        name,
        ...(options.description === undefined ? {} : { description: options.description }),
        parameters: parametersOf(options.parameters)
      }
    },
    decode: (args) => decodeJson(args),
    handler: options.handler,
    render: options.render ?? defaultRender(options.success)
  }
}

/** The wire definitions of tools, for a request made by hand ({@link Rollout.chat}). */
export const definitions = (tools: ReadonlyArray<Any>): ReadonlyArray<Tool> => tools.map((tool) => tool.definition)

/**
 * A call the loop could not run, failing the rollout under `onToolError: "fail"`: the model called a tool
 * not offered (`UnknownTool`) or wrote arguments that do not decode with the tool's schema (`Arguments`). A
 * handler's own failure is not wrapped: it fails the rollout as it is.
 */
export class ToolCallError extends Data.TaggedError("ToolCallError")<{
  /** What was wrong with the call. */
  readonly reason: "UnknownTool" | "Arguments"
  /** The function name the model called. */
  readonly tool: string
  /** The call's id. */
  readonly callId: string
  /** What was wrong, in words. */
  readonly description: string
}> {
  override get message(): string {
    return this.description
  }
}

/** One call the loop ran, in the order the model made them. */
export interface CallRecord {
  /** The turn (from 1) whose choice made the call. */
  readonly turn: number
  /** The call's id. */
  readonly id: string
  /** The function name called. */
  readonly name: string
  /** The arguments as the model wrote them. */
  readonly arguments: string
  /** The result's text as sent back (`Error: ...` for a failed call). */
  readonly result: string
  /** Whether the call failed (unknown tool, arguments that do not fit, or the handler failed). */
  readonly failed: boolean
}

/** What a tool loop ended with. */
export interface Outcome {
  /** The final answer's text: the content of the last choice when it made no call, else `null`. */
  readonly answer: string | null
  /** Why the loop stopped: the model answered, or the turn limit was reached with calls still being made. */
  readonly stop: "answer" | "turns"
  /** The number of model turns (chat completions) taken. */
  readonly turns: number
  /** The calls run, in order. */
  readonly calls: ReadonlyArray<CallRecord>
  /** The conversation at the end: the messages given, then every turn and tool result. */
  readonly messages: ReadonlyArray<Message>
}

/** The request fields of one turn of a tool loop (its messages and tools are the loop's). */
export type TurnRequest = Partial<Omit<Request, "messages" | "tools">>

/** Options of {@link run}. */
export interface RunOptions<T extends Any> {
  /** The tools offered to the model. */
  readonly tools: ReadonlyArray<T>
  /** The conversation so far; the loop continues it. */
  readonly messages?: ReadonlyArray<Message> | undefined
  /** A system prompt put first (before `messages`). */
  readonly system?: string | undefined
  /** A user message put last (after `messages`). */
  readonly prompt?: string | undefined
  /** The most model turns to take (default 8). */
  readonly maxTurns?: number | undefined
  /**
   * Request fields for every turn: `tool_choice` (default `auto`), `parallel_tool_calls`,
   * `max_completion_tokens`, `temperature`, ...; or a function of the turn (from 1), e.g. to require a call
   * first and then ask for an answer (`tool_choice: "none"`, which also lets `structured_outputs` constrain it).
   */
  readonly request?: TurnRequest | ((turn: number) => TurnRequest) | undefined
  /** How many calls of one turn run at once (default: all of them). */
  readonly concurrency?: number | "unbounded" | undefined
  /**
   * What a call that cannot run does: `"result"` (the default) sends the model `Error: <what went wrong>` as
   * the call's result and counts it in the `tool_errors` metric; `"fail"` fails the rollout (with a
   * {@link ToolCallError}, or the handler's own error).
   */
  readonly onToolError?: "result" | "fail" | undefined
}

/** The metrics a tool loop adds to the rollout (summed over the loops it ran). */
export const METRICS = {
  /** Calls the model made. */
  calls: "tool_calls",
  /** Calls that failed (unknown tool, arguments that do not fit, the handler failed). */
  errors: "tool_errors",
  /** Model turns taken. */
  turns: "tool_turns"
} as const

const describeFailure = (error: unknown): string => {
  if (ParseResult.isParseError(error)) return ParseResult.TreeFormatter.formatErrorSync(error)
  if (typeof error === "object" && error !== null && "message" in error && typeof error.message === "string") {
    return error.message || String((error as { readonly _tag?: unknown })._tag ?? "failed")
  }
  return typeof error === "string" ? error : (JSON.stringify(error) ?? String(error))
}

type Ran = { readonly text: string; readonly failed: boolean }

const runCall = <T extends Any>(
  byName: ReadonlyMap<string, T>,
  call: ResponseToolCall,
  id: string,
  fail: boolean
): Effect.Effect<Ran, ToolCallError | ErrorOf<T>, ContextOf<T>> => {
  const name = call.function.name
  const tool = byName.get(name)
  const refused = (reason: ToolCallError["reason"], description: string) =>
    fail
      ? Effect.fail(new ToolCallError({ reason, tool: name, callId: id, description }))
      : Effect.succeed<Ran>({ text: `Error: ${description}`, failed: true })
  if (tool === undefined) {
    const offered = [...byName.keys()].map((n) => JSON.stringify(n)).join(", ")
    return refused("UnknownTool", `there is no tool ${JSON.stringify(name)} (the tools are ${offered})`)
  }
  return Effect.flatMap(Effect.either(tool.decode(call.function.arguments)), (decoded) =>
    Either.isLeft(decoded)
      ? refused("Arguments", `the arguments of ${name} do not fit its parameters: ${describeFailure(decoded.left)}`)
      : (tool.handler(decoded.right) as Effect.Effect<unknown, ErrorOf<T>, ContextOf<T>>).pipe(
          Effect.map((result): Ran => ({ text: tool.render(result), failed: false })),
          fail
            ? (effect) => effect
            : Effect.catchAll((error) =>
                Effect.succeed<Ran>({ text: `Error: ${describeFailure(error)}`, failed: true })
              )
        )
  )
}

const addMetric = (name: string, by: number) =>
  Effect.flatMap(Rollout.Current, ({ recorder }) =>
    Effect.sync(() => {
      const before = recorder.metrics[name]
      recorder.metrics[name] = (typeof before === "number" ? before : 0) + by
    })
  )

/**
 * Runs a tool loop in the current rollout: asks the policy (with `tools` offered), runs the calls it makes,
 * sends their results back, and repeats until it answers in text or `maxTurns` turns were taken. Every turn
 * and result is recorded in the trajectory; the metrics {@link METRICS} count calls, failed calls and turns.
 */
export const run = <T extends Any>(
  options: RunOptions<T>
): Effect.Effect<
  Outcome,
  ApiError | Rollout.InvalidTurn | ToolCallError | ErrorOf<T>,
  Rollout.Current | ContextOf<T>
> =>
  Effect.gen(function* () {
    const maxTurns = options.maxTurns ?? 8
    const fail = options.onToolError === "fail"
    const byName = new Map<string, T>(options.tools.map((tool) => [tool.name, tool]))
    const tools = definitions(options.tools)
    const messages: Array<Message> = [
      ...(options.system === undefined ? [] : [{ role: "system", content: options.system } as Message]),
      ...(options.messages ?? []),
      ...(options.prompt === undefined ? [] : [{ role: "user", content: options.prompt } as Message])
    ]
    const calls: Array<CallRecord> = []
    let turns = 0
    let answer: string | null = null
    let stop: Outcome["stop"] = "turns"
    // The last turn's tool results (sent back with the next turn, or appended when the limit ends the loop).
    let results: ReadonlyArray<ToolMessage> = []
    // Every loop's rollout carries the three metrics, so that their means over a group count the zeros.
    for (const name of Object.values(METRICS)) yield* addMetric(name, 0)
    while (turns < maxTurns) {
      turns += 1
      const request = typeof options.request === "function" ? options.request(turns) : options.request
      const completion = yield* Rollout.chat({ ...request, messages: [...messages], tools })
      const choice = completion.choices[0]!
      const assistant = Rollout.assistantMessage(choice)
      messages.push(assistant)
      const made = choice.message.tool_calls ?? []
      if (made.length === 0) {
        answer = choice.message.content ?? ""
        stop = "answer"
        break
      }
      const ids = (assistant.tool_calls ?? []).map((call) => call.id)
      const ran = yield* Effect.forEach(made, (call, i) => runCall(byName, call, ids[i]!, fail), {
        concurrency: options.concurrency ?? "unbounded"
      })
      results = ran.map((result, i) => {
        const call = made[i]!
        calls.push({
          turn: turns,
          id: ids[i]!,
          name: call.function.name,
          arguments: call.function.arguments,
          result: result.text,
          failed: result.failed
        })
        return { role: "tool", tool_call_id: ids[i]!, content: result.text } satisfies ToolMessage
      })
      messages.push(...results)
      const failed = ran.filter((result) => result.failed).length
      yield* addMetric(METRICS.calls, made.length)
      yield* addMetric(METRICS.errors, failed)
    }
    yield* addMetric(METRICS.turns, turns)
    // The results of the last turn's calls, when the limit cut the loop: the trajectory keeps them too.
    if (stop === "turns") yield* Rollout.append(...results)
    return { answer, stop, turns, calls, messages }
  })
