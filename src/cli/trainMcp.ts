/**
 * `effect-rl train-mcp "<server command>" | --url <url> --scenarios <file.jsonl>`: trains an agent on an MCP server's
 * tools. Each rollout asks the policy a scenario's task with the server's tools offered (`McpTools.run`), the calls
 * going through the server: one server for the run, or one per rollout (`--per-rollout`). With `--generate <n>`
 * (and `--writer <model>`) the scenarios file is first written from the server's tools (`McpScenarios.write`). The
 * reward is a `--reward` module's (a function of `{scenario, value, trajectory}`, `value` the tool loop's outcome),
 * else the relative judge (`McpScenarios.judge`) with `--judge <model>` (default: the base model trained). It takes
 * `train-agent`'s flags and prints the same report, ending with the `summary: {...}` line. Loaded by the command
 * only when `train-mcp` runs.
 *
 * @since 0.1.0
 */
import { existsSync } from "node:fs"
import { resolve } from "node:path"
import * as Effect from "effect/Effect"
import * as Example from "../Example.js"
import * as McpScenarios from "../workflow/McpScenarios.js"
import * as McpTools from "../workflow/McpTools.js"
import * as Policy from "../workflow/Policy.js"
import * as Reward from "../workflow/Reward.js"
import type * as Tools from "../workflow/Tools.js"
import * as TrainingLoop from "../workflow/TrainingLoop.js"
import { loadReward } from "./agentCommand.js"
import { failed, usage } from "./failure.js"
import { DEFAULTS, plan, readScenarios, type TrainAgentFlags, tooManyFailures } from "./trainAgent.js"

/** The flags of `train-mcp`, validated: `train-agent`'s (the command being the server's) and its own. */
export interface TrainMcpFlags extends Omit<TrainAgentFlags, "command" | "cluster"> {
  /** The server's command line (run with `sh -c`), or undefined with {@link TrainMcpFlags.url}. */
  readonly command: string | undefined
  /** The server's Streamable HTTP endpoint, instead of a command. */
  readonly url: string | undefined
  /** Headers for the endpoint, as `Name: value`. */
  readonly headers: ReadonlyArray<string>
  /** Write this many scenarios into `--scenarios` first. */
  readonly generate: number | undefined
  /** The model that writes them. */
  readonly writer: string | undefined
  /** The judge model (when there is no `--reward`). */
  readonly judge: string | undefined
  /** One server per rollout, rather than one for the run. */
  readonly perRollout: boolean
  /** The most model turns of a rollout (default 6). */
  readonly maxTurns: number | undefined
  /** How long one call may take, in seconds (default 30). */
  readonly callTimeout: number | undefined
  /** The most tokens of one turn (default 256). */
  readonly maxTokens: number | undefined
}

/** A scenario line as a task: a string is the task, an object its `task` field. */
export const taskOf = (scenario: unknown): string | undefined =>
  typeof scenario === "string"
    ? scenario
    : typeof scenario === "object" && scenario !== null && typeof (scenario as { task?: unknown }).task === "string"
      ? (scenario as { task: string }).task
      : undefined

/** The server the flags name. */
export const serverOf = (flags: Pick<TrainMcpFlags, "command" | "url" | "headers">) =>
  Effect.gen(function* () {
    if ((flags.command === undefined) === (flags.url === undefined)) {
      return yield* usage('name the MCP server: its command line ("npx -y <package>") or --url <endpoint>, one of them')
    }
    if (flags.url === undefined) {
      if (flags.headers.length > 0) return yield* usage("--header goes with --url (a command gets no headers)")
      return { command: flags.command! } satisfies McpTools.Server
    }
    const headers: Record<string, string> = {}
    for (const header of flags.headers) {
      const colon = header.indexOf(":")
      // The value may be a secret: the refusal names the header's position, never its text.
      if (colon <= 0)
        return yield* usage(`--header must be 'Name: value' (header ${flags.headers.indexOf(header) + 1})`)
      headers[header.slice(0, colon).trim()] = header.slice(colon + 1).trim()
    }
    if (!/^https?:\/\//.test(flags.url)) return yield* usage("--url must be an http:// or https:// endpoint")
    return { url: flags.url, headers } satisfies McpTools.Server
  })

const SYSTEM =
  "You are an agent with tools. Call the tools the task needs, read their results, then answer the user briefly " +
  "from those results."

/** Runs `train-mcp` with `flags`: the scenarios (written first with `--generate`), the loop, its report. */
export const trainMcp = (flags: TrainMcpFlags) =>
  Effect.gen(function* () {
    if (flags.steps !== undefined && flags.epochs !== undefined) {
      return yield* usage("pass --steps or --epochs, not both (an epoch is one pass over the scenarios file)")
    }
    if ((flags.generate === undefined) !== (flags.writer === undefined)) {
      return yield* usage(
        "--generate <n> and --writer <model> go together: how many scenarios, and the model that writes them"
      )
    }
    if (flags.generate !== undefined && existsSync(flags.scenarios)) {
      return yield* usage(
        `the scenarios file ${flags.scenarios} exists: remove it to write it anew, or drop --generate to train on it`
      )
    }
    if (flags.judge !== undefined && flags.reward !== undefined) {
      return yield* usage("pass --reward or --judge, not both (the judge scores when there is no reward module)")
    }
    const server = yield* serverOf(flags)
    if (flags.reward === undefined && flags.judge === undefined && process.env.WANDB_API_KEY === undefined) {
      // The default judge is the base model trained: the embedded ones cannot judge (their scores are not scores).
      return yield* usage(
        "on the embedded backend, pass --reward <module>: its base models cannot judge (or --judge <model> for a judge you serve)"
      )
    }
    const reward = flags.reward === undefined ? undefined : yield* loadReward(flags.reward)
    const label = McpTools.labelOf(server)
    const groupSize = flags.groupSize ?? DEFAULTS.groupSize
    const example: Example.Example<unknown> = {
      name: "mcp",
      description:
        `An agent on the tools of the MCP server ${label} (${flags.perRollout ? "one per rollout" : "one for the run"}), ` +
        `on the tasks of ${flags.scenarios}${flags.generate === undefined ? "" : ` (${flags.generate} written first by ${flags.writer})`}, ` +
        `${groupSize} rollouts each; reward: ${
          flags.reward === undefined
            ? `the relative judge ${flags.judge ?? "(the base model trained)"}, one completion per group and step`
            : `the module ${flags.reward}`
        }.`,
      localBaseModel: "effect-rl/base-2k",
      train: (options) =>
        Effect.gen(function* () {
          const servers = yield* McpTools.servers(server, {
            perRollout: flags.perRollout,
            ...(flags.callTimeout === undefined ? {} : { callTimeout: `${flags.callTimeout} seconds` })
          })
          yield* Effect.log(`train-mcp: ${label} lists ${servers.tools.map((t) => t.name).join(", ")}`)
          if (flags.generate !== undefined) {
            const writer = yield* Policy.base(flags.writer!)
            const written = yield* McpScenarios.write({ policy: writer, tools: servers.tools, count: flags.generate })
            yield* McpScenarios.save(flags.scenarios, written.scenarios)
            const { duplicates, unknownTools, malformed, tooShort } = written.dropped
            yield* Effect.log(
              `train-mcp: wrote ${written.scenarios.length} scenarios to ${flags.scenarios} in ${written.requests} ` +
                `completion(s) (dropped ${duplicates} repeated, ${unknownTools} naming unknown tools, ${malformed} malformed, ${tooShort} too short)`
            )
          }
          const scenarios = yield* readScenarios(flags.scenarios)
          const missing = scenarios.findIndex((scenario) => taskOf(scenario) === undefined)
          if (missing !== -1) {
            return yield* usage(
              `line ${missing + 1} of ${flags.scenarios} has no task: {"task": "...", "tools": [...]} or a string`
            )
          }
          const { groupsPerStep } = plan(scenarios.length, flags)
          const baseModel = Example.baseModelOf(options, "effect-rl/base-2k")
          const policy = yield* Policy.trainable({
            project: flags.project ?? "agents",
            name: Example.modelNameOf("mcp", options),
            base_model: baseModel
          })
          const judge =
            reward === undefined
              ? McpScenarios.judge<unknown>({ policy: yield* Policy.base(flags.judge ?? baseModel) })
              : undefined
          const summary = yield* TrainingLoop.run({
            policy,
            scenarios,
            rollout: (scenario: unknown) =>
              servers.use((connection) =>
                McpTools.run(connection, {
                  system: SYSTEM,
                  prompt: taskOf(scenario)!,
                  maxTurns: flags.maxTurns ?? 6,
                  request: { max_completion_tokens: flags.maxTokens ?? 256 }
                })
              ),
            // The module scores the tool loop's outcome (its `value`), whatever type the shared loader names.
            reward: (reward ?? Reward.constant(0)) as unknown as Reward.Reward<unknown, Tools.Outcome, unknown>,
            ...(judge === undefined ? {} : { scoreGroup: judge }),
            groupsPerStep,
            rolloutsPerGroup: groupSize,
            steps: options.steps ?? DEFAULTS.steps,
            gather: {
              concurrency: flags.concurrency ?? DEFAULTS.concurrency,
              ...(flags.timeout === undefined ? {} : { timeout: `${flags.timeout} seconds` }),
              ...(flags.maxFailures === undefined ? {} : { maxExceptions: flags.maxFailures })
            }
          }).pipe(Effect.catchTag("GatherError", (error) => Effect.fail(failed(tooManyFailures(error)))))
          return { summary, policy }
        }).pipe(Effect.scoped)
    }
    const lines = flags.generate ?? (yield* readScenarios(flags.scenarios)).length
    const { steps } = plan(lines, flags)
    return yield* Example.run(example, {
      ...(steps === undefined ? {} : { steps }),
      baseModel: flags.baseModel,
      modelName: flags.model,
      ...(flags.dataDir === undefined ? {} : { local: { dataDir: resolve(flags.dataDir) } })
    })
  })
