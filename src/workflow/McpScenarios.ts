/**
 * Training scenarios written from an MCP server's tools by a model: tasks a user could ask that need those tools,
 * asked for as structured output (a JSON object `{"tasks": [{"task", "tools"}]}`), in batches until enough are
 * kept. A task whose `tools` name one the server does not list is dropped, as is one that repeats another (the same
 * words, whatever the case, spacing or punctuation) and one of fewer than {@link MIN_TASK_WORDS} words (no task a
 * user would give: what the embedded base models write, `"desas"`); each line of the file is one {@link Scenario}, which
 * `TrainingLoop` (as its scenarios) and `effect-rl train-agent` / `train-mcp` (`--scenarios`) read.
 *
 * The model is any `Policy`: a hosted instruction model writes useful tasks. The embedded backend's base models
 * are far too small to write tasks (they write JSON that fits the schema, and words that mean nothing); a loop on
 * the embedded backend ships its scenarios file instead (see `examples/mcp.ts`).
 *
 * With no reward function for such tasks, {@link judge} scores each group together with `Reward.judge`: one
 * completion of the judge model per group and step, its prompt the task, the group's shared context once and
 * each rollout's turns and tool results (see docs/agents.md for what it costs).
 *
 * ```ts
 * const program = Effect.gen(function* () {
 *   const server = yield* McpTools.servers({ command: "npx -y @modelcontextprotocol/server-memory" })
 *   const writer = yield* Policy.base("some/instruction-model")
 *   const written = yield* McpScenarios.write({ policy: writer, tools: server.tools, count: 64 })
 *   yield* McpScenarios.save("scenarios.jsonl", written.scenarios)
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 */
import { readFile, writeFile } from "node:fs/promises"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import type { ResponseFormat } from "../api/ChatCompletion.js"
import type { JsonObject } from "../api/Json.js"
import type { ApiError } from "../client/ApiError.js"
import type { ToolInfo } from "./McpTools.js"
import type { Policy, Request } from "./Policy.js"
import * as Reward from "./Reward.js"

/** A scenario: the task the user asks, and the tools it needs (names the server lists). */
export const Scenario = Schema.Struct({
  task: Schema.String.pipe(Schema.nonEmptyString()),
  tools: Schema.Array(Schema.String)
})

/** A scenario (see {@link Scenario}). */
export type Scenario = typeof Scenario.Type

/** Why scenarios could not be written, saved or read. */
export type ScenarioErrorReason = "NoTasks" | "File"

/**
 * Scenarios could not be had: the model wrote no task that was kept (`NoTasks`: its answers were malformed, named
 * unknown tools or repeated each other), or a file could not be written or read (`File`).
 */
export class ScenarioError extends Data.TaggedError("ScenarioError")<{
  /** What failed. */
  readonly reason: ScenarioErrorReason
  /** What went wrong, in words. */
  readonly description: string
  /** The underlying error. */
  readonly cause?: unknown
}> {
  override get message(): string {
    return this.description
  }
}

/** Options of {@link write}. */
export interface WriteOptions {
  /** The model that writes the tasks. */
  readonly policy: Policy
  /** The server's tools (`McpTools.Servers.tools` or `Connection.tools`). */
  readonly tools: ReadonlyArray<ToolInfo>
  /** How many scenarios to write. */
  readonly count: number
  /** Tasks asked for per completion (default 8). */
  readonly batch?: number | undefined
  /** The most completions to make (default: three times the batches `count` needs). */
  readonly maxRequests?: number | undefined
  /** What the tasks should be like, added to the instructions ("tasks a support agent gets", ...). */
  readonly guidance?: string | undefined
  /** Request fields of each completion (default `temperature: 1`: varied tasks). */
  readonly request?: Partial<Request> | undefined
}

/** What {@link write} made, and what it dropped. */
export interface Written {
  /** The scenarios kept, in the order written (at most `count`). */
  readonly scenarios: ReadonlyArray<Scenario>
  /**
   * Tasks dropped: repeats, tasks naming tools the server does not list, answers that did not parse, tasks of fewer
   * than {@link MIN_TASK_WORDS} words.
   */
  readonly dropped: {
    readonly duplicates: number
    readonly unknownTools: number
    readonly malformed: number
    readonly tooShort: number
  }
  /** Completions made. */
  readonly requests: number
}

const describeTool = (tool: ToolInfo): string => {
  const { $schema: _, ...schema } = tool.inputSchema
  return `- ${tool.name}: ${tool.description ?? "(no description)"}\n  arguments: ${JSON.stringify(schema)}`
}

/** The instructions of a completion asking for `n` tasks. */
export const prompt = (
  tools: ReadonlyArray<ToolInfo>,
  n: number,
  guidance: string | undefined
): ReadonlyArray<{ readonly role: "system" | "user"; readonly content: string }> => [
  {
    role: "system",
    content:
      "You write training tasks for an AI agent that has the tools below. Each task is a request a user could " +
      "make that the agent can only complete by calling one or more of the tools; it is self-contained (it gives " +
      "every value the calls need) and has a checkable outcome. List the tools each task needs, by their exact " +
      `names. Vary the tasks; do not repeat one.${guidance === undefined ? "" : `\n${guidance}`}\n\nTools:\n` +
      tools.map(describeTool).join("\n")
  },
  { role: "user", content: `Write ${n} tasks, as JSON: {"tasks": [{"task": "...", "tools": ["..."]}]}` }
]

/** The structured output asked for: `{"tasks": [{"task": string, "tools": [one of the tool names]}]}`. */
export const responseFormat = (tools: ReadonlyArray<ToolInfo>, n: number): ResponseFormat => {
  const task: JsonObject = {
    type: "object",
    properties: {
      task: { type: "string", minLength: 1 },
      tools: { type: "array", items: { type: "string", enum: tools.map((t) => t.name) }, minItems: 1 }
    },
    required: ["task", "tools"],
    additionalProperties: false
  }
  return {
    type: "json_schema",
    json_schema: {
      name: "tasks",
      schema: {
        type: "object",
        properties: { tasks: { type: "array", items: task, minItems: 1, maxItems: n } },
        required: ["tasks"],
        additionalProperties: false
      },
      strict: true
    }
  }
}

/** The fewest words a task is kept with (a request a user gives the agent: "Add 2 and 40" has four). */
export const MIN_TASK_WORDS = 3

/** A task's words as compared for repeats: lower case, punctuation and runs of spaces as one space. */
export const normalize = (task: string): string =>
  task
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, " ")
    .trim()

const Answer = Schema.parseJson(
  Schema.Struct({ tasks: Schema.Array(Schema.Struct({ task: Schema.String, tools: Schema.Array(Schema.String) })) })
)

const unfence = (text: string): string => {
  const fenced = /^```[a-zA-Z]*\s*\n([\s\S]*?)\n?```\s*$/.exec(text.trim())
  return fenced === null ? text.trim() : fenced[1]!
}

/**
 * Sorts the tasks of answers into kept and dropped: kept if it has {@link MIN_TASK_WORDS} words or more, every tool
 * it names is listed and it repeats no task kept before it (nor one of `seen`).
 */
export const sift = (
  answers: ReadonlyArray<string>,
  tools: ReadonlyArray<ToolInfo>,
  seen: ReadonlySet<string> = new Set()
): Written["dropped"] & { readonly kept: ReadonlyArray<Scenario> } => {
  const known = new Set(tools.map((t) => t.name))
  const keys = new Set(seen)
  const kept: Array<Scenario> = []
  let duplicates = 0
  let unknownTools = 0
  let malformed = 0
  let tooShort = 0
  for (const text of answers) {
    const decoded = Schema.decodeUnknownEither(Answer)(unfence(text))
    if (Either.isLeft(decoded)) {
      malformed += 1
      continue
    }
    for (const candidate of decoded.right.tasks) {
      const key = normalize(candidate.task)
      if (key === "") malformed += 1
      else if (key.split(" ").length < MIN_TASK_WORDS) tooShort += 1
      else if (candidate.tools.length === 0 || candidate.tools.some((name) => !known.has(name))) unknownTools += 1
      else if (keys.has(key)) duplicates += 1
      else {
        keys.add(key)
        kept.push({ task: candidate.task.trim(), tools: [...new Set(candidate.tools)] })
      }
    }
  }
  return { kept, duplicates, unknownTools, malformed, tooShort }
}

/**
 * Writes `count` scenarios from the server's tools with the model (see the module): batches of `batch` tasks until
 * `count` are kept or `maxRequests` completions were made. Fails with `NoTasks` if none was kept.
 */
export const write = (options: WriteOptions): Effect.Effect<Written, ApiError | ScenarioError> =>
  Effect.gen(function* () {
    const batch = Math.max(1, options.batch ?? 8)
    const maxRequests = options.maxRequests ?? 3 * Math.ceil(options.count / batch)
    const kept: Array<Scenario> = []
    const seen = new Set<string>()
    const dropped = { duplicates: 0, unknownTools: 0, malformed: 0, tooShort: 0 }
    let requests = 0
    while (kept.length < options.count && requests < maxRequests) {
      const n = Math.min(batch, options.count - kept.length)
      requests += 1
      const completion = yield* options.policy.complete({
        temperature: 1,
        ...options.request,
        messages: [...prompt(options.tools, n, options.guidance)],
        response_format: responseFormat(options.tools, n)
      })
      const sifted = sift([completion.choices[0]?.message.content ?? ""], options.tools, seen)
      for (const scenario of sifted.kept.slice(0, options.count - kept.length)) {
        kept.push(scenario)
        seen.add(normalize(scenario.task))
      }
      dropped.duplicates += sifted.duplicates
      dropped.unknownTools += sifted.unknownTools
      dropped.malformed += sifted.malformed
      dropped.tooShort += sifted.tooShort
      yield* Effect.logDebug(`McpScenarios.write: ${kept.length} of ${options.count} after ${requests} completion(s)`)
    }
    if (kept.length === 0) {
      return yield* new ScenarioError({
        reason: "NoTasks",
        description:
          `the model ${options.policy.name} wrote no usable task in ${requests} completion(s) ` +
          `(${dropped.malformed} malformed, ${dropped.unknownTools} naming tools the server does not list, ` +
          `${dropped.duplicates} repeated, ${dropped.tooShort} of fewer than ${MIN_TASK_WORDS} words)`
      })
    }
    return { scenarios: kept, dropped, requests }
  }).pipe(Effect.withSpan("McpScenarios.write", { attributes: { count: options.count } }))

/** Saves scenarios as JSONL: one JSON object a line. */
export const save = (path: string, scenarios: ReadonlyArray<Scenario>): Effect.Effect<void, ScenarioError> =>
  Effect.tryPromise({
    try: () => writeFile(path, scenarios.map((s) => `${JSON.stringify(s)}\n`).join("")),
    catch: (cause) =>
      new ScenarioError({
        reason: "File",
        description: `cannot write the scenarios file ${path}: ${String(cause)}`,
        cause
      })
  })

/** Reads a JSONL file of scenarios (blank lines skipped); a line that is not a {@link Scenario} is a `File` error. */
export const read = (path: string): Effect.Effect<ReadonlyArray<Scenario>, ScenarioError> =>
  Effect.gen(function* () {
    const text = yield* Effect.tryPromise({
      try: () => readFile(path, "utf8"),
      catch: (cause) =>
        new ScenarioError({
          reason: "File",
          description: `cannot read the scenarios file ${path}: ${String(cause)}`,
          cause
        })
    })
    const scenarios: Array<Scenario> = []
    for (const [i, line] of text.split("\n").entries()) {
      if (line.trim() === "") continue
      const decoded = Schema.decodeUnknownEither(Schema.parseJson(Scenario))(line)
      if (Either.isLeft(decoded)) {
        return yield* new ScenarioError({
          reason: "File",
          description: `line ${i + 1} of ${path} is not a scenario {"task": "...", "tools": [...]}: ${decoded.left.message}`
        })
      }
      scenarios.push(decoded.right)
    }
    return scenarios
  })

/** The rubric {@link judge} scores with. */
export const RUBRIC =
  "The user asked the agent to do the task in the first user message, with the tools it was given. Score how well " +
  "each trajectory did it: the right tools called with the right arguments, their results used, and a final answer " +
  "that completes the task truthfully from those results. A trajectory that invents results, stops early or " +
  "leaves the task undone scores low."

/**
 * The relative judge of MCP rollouts: `Reward.judge` with {@link RUBRIC} (or another), scoring each group of one
 * task together from 0 to 1 with the given judge model. Use it as the loop's `scoreGroup` with a constant reward.
 */
export const judge = <S>(options: {
  readonly policy: Policy
  readonly rubric?: string | undefined
  readonly request?: Partial<Request> | undefined
}): Reward.GroupScorer<S, unknown, Reward.JudgeError> =>
  Reward.judge<S>({
    policy: options.policy,
    rubric: options.rubric ?? RUBRIC,
    ...(options.request === undefined ? {} : { request: options.request })
  })
