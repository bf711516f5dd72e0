/**
 * `effect-rl train-agent "<command>" --scenarios <file.jsonl>`: trains an agent that runs as its own process,
 * unchanged. Each step runs the command once per scenario line and group member (`ExternalAgent.command`)
 * with `OPENAI_BASE_URL` and `OPENAI_API_KEY` set to its rollout's endpoint on a `RolloutGateway`, the
 * scenario as JSON on its stdin and in `EFFECT_RL_SCENARIO`; the reward is the agent's report (its last stdout
 * line `{"reward": <number>, "metrics": {...}}`) unless `--reward` names a module that scores the recorded
 * trajectory. Runs on the backend `effect-rl train` uses (the hosted service when `WANDB_API_KEY` is set, else
 * the embedded backend) and prints the same report, ending with the `summary: {...}` line. Loaded by the
 * command only when `train-agent` runs.
 *
 * @since 0.1.0
 */
import { readFile } from "node:fs/promises"
import { resolve } from "node:path"
import * as Effect from "effect/Effect"
import * as Example from "../Example.js"
import type * as Gather from "../workflow/Gather.js"
import * as Policy from "../workflow/Policy.js"
import * as TrainingLoop from "../workflow/TrainingLoop.js"
import { commandAgent } from "./agentCommand.js"
import { failed, usage } from "./failure.js"

/** The flags of `train-agent`, validated. */
export interface TrainAgentFlags {
  readonly command: string
  readonly scenarios: string
  readonly steps: number | undefined
  readonly groupSize: number | undefined
  readonly baseModel: string | undefined
  readonly project: string | undefined
  readonly model: string | undefined
  readonly dataDir: string | undefined
  readonly concurrency: number | undefined
  readonly reward: string | undefined
  readonly timeout: number | undefined
  /** Failed runs of the agent tolerated per step (default 0: the first failure stops the run). */
  readonly maxFailures?: number | undefined
  /** Scenarios (groups) per step (default: the whole file up to {@link DEFAULTS}' `groupsPerStep`). */
  readonly groupsPerStep?: number | undefined
  /** Passes over the scenarios file: the steps it takes (instead of `steps`). */
  readonly epochs?: number | undefined
  /**
   * The storage URL of a rollout cluster whose runners run the agent (`effect-rl runner --agent-command` with the
   * same command, `--reward` and `--timeout`); default: the agents run in this process.
   */
  readonly cluster?: string | undefined
}

/**
 * The defaults: steps, rollouts per scenario, rollouts in flight, and the most scenarios a step takes when
 * `--groups-per-step` is not given (a file of up to that many lines runs whole every step).
 */
export const DEFAULTS = { steps: 5, groupSize: 8, concurrency: 16, groupsPerStep: 16 } as const

/**
 * How many scenarios a step takes and how many steps run: `--groups-per-step` (default: the whole file, up to
 * {@link DEFAULTS}' `groupsPerStep`), and `--steps` or `--epochs` (passes over the file: each epoch's steps take
 * every scenario once, the last step of an epoch sharing its groups with the next epoch's first when the
 * groups per step do not divide the file), else {@link DEFAULTS}' steps.
 */
export const plan = (
  lines: number,
  flags: Pick<TrainAgentFlags, "steps" | "epochs" | "groupsPerStep">
): { readonly groupsPerStep: number; readonly steps: number | undefined } => {
  const groupsPerStep = flags.groupsPerStep ?? Math.min(lines, DEFAULTS.groupsPerStep)
  return {
    groupsPerStep,
    steps: flags.epochs === undefined ? flags.steps : Math.ceil((flags.epochs * lines) / groupsPerStep)
  }
}

const errorText = (error: unknown) => (error instanceof Error ? error.message : String(error))

/** The scenarios of a JSONL file: one JSON value per non-blank line. */
export const readScenarios = (path: string) =>
  Effect.gen(function* () {
    const text = yield* Effect.tryPromise({
      try: () => readFile(path, "utf8"),
      catch: (error) => usage(`cannot read the scenarios file ${path}: ${errorText(error)}`)
    })
    const scenarios: Array<unknown> = []
    for (const [i, line] of text.split("\n").entries()) {
      if (line.trim() === "") continue
      scenarios.push(
        yield* Effect.try({
          try: () => JSON.parse(line) as unknown,
          catch: (error) => usage(`line ${i + 1} of ${path} is not JSON: ${errorText(error)}`)
        })
      )
    }
    if (scenarios.length === 0) return yield* usage(`the scenarios file ${path} has no scenarios (one JSON per line)`)
    return scenarios
  })

/**
 * A step's gather that failed for the agent's failures, as the command's sentence: the first failure's own
 * error, the count against the limit, and the flag that tolerates them (the library's advice names its option).
 */
export const tooManyFailures = (error: Gather.GatherError): string => {
  const first = error.exceptions[0]
  const count = error.exceptions.length
  const runs = count === 1 ? "1 failed run of the agent" : `the first of ${count} failed runs of the agent`
  return (
    (first === undefined ? "" : `${first.type}: ${first.message} `) +
    `(${runs}, more than the ${error.limit} tolerated; ${error.finished} of ${error.planned} finished); ` +
    "to tolerate some, pass --max-failures <n>"
  )
}

const quote = (text: string) => (/^[\w./:@%+=,-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`)

/**
 * The same run's command for the hosted service, as the report's advice gives it: every flag given but the
 * embedded backend's own (`--data-dir`) and `--base-model` (the advice sets `EFFECT_RL_BASE_MODEL` to one the
 * service trains).
 */
export const hostedCommand = (flags: TrainAgentFlags): string => {
  const given: ReadonlyArray<readonly [string, string | number | undefined]> = [
    ["--scenarios", flags.scenarios],
    ["--steps", flags.steps],
    ["--epochs", flags.epochs],
    ["--groups-per-step", flags.groupsPerStep],
    ["--group-size", flags.groupSize],
    ["--project", flags.project],
    ["--model", flags.model],
    ["--concurrency", flags.concurrency],
    ["--reward", flags.reward],
    ["--timeout", flags.timeout],
    ["--max-failures", flags.maxFailures],
    ["--cluster", flags.cluster === undefined ? undefined : "<cluster url>"]
  ]
  return ["effect-rl train-agent", quote(flags.command)]
    .concat(given.flatMap(([flag, value]) => (value === undefined ? [] : [`${flag} ${quote(String(value))}`])))
    .join(" ")
}

/** Runs `train-agent` with `flags`: the loop, its report and the summary line. */
export const trainAgent = (flags: TrainAgentFlags) =>
  Effect.gen(function* () {
    if (flags.steps !== undefined && flags.epochs !== undefined) {
      return yield* usage("pass --steps or --epochs, not both (an epoch is one pass over the scenarios file)")
    }
    const scenarios = yield* readScenarios(flags.scenarios)
    const { groupsPerStep, steps } = plan(scenarios.length, flags)
    if (flags.cluster !== undefined && process.env.WANDB_API_KEY === undefined) {
      return yield* usage(
        "--cluster needs a backend the runners reach too: set WANDB_API_KEY (and EFFECT_RL_TRAINING_URL, " +
          "EFFECT_RL_INFERENCE_URL, EFFECT_RL_TRACE_URL for an `effect-rl serve`) here and on every runner"
      )
    }
    const agent = yield* commandAgent(flags)
    const groupSize = flags.groupSize ?? DEFAULTS.groupSize
    const example: Example.Example<unknown> = {
      name: "agent",
      description:
        `The agent \`${flags.command}\` on ${groupsPerStep} of the ${scenarios.length} scenario(s) of ` +
        `${flags.scenarios} a step, ${groupSize} rollouts each (${groupsPerStep * groupSize} runs a step), its ` +
        `turns recorded through a rollout gateway; reward: ${
          flags.reward === undefined ? "the agent's report" : `the module ${flags.reward}`
        }.` +
        (flags.cluster === undefined
          ? ""
          : ` On the cluster's runners, each started with \`effect-rl runner --cluster <url> --agent-command ` +
            `${quote(flags.command)}\`${flags.reward === undefined ? "" : ` --reward ${quote(flags.reward)}`}` +
            `${flags.timeout === undefined ? "" : ` --timeout ${flags.timeout}`} (agent ${agent.name}).`),
      agents: [agent],
      train: (options) =>
        Effect.gen(function* () {
          const policy = yield* Policy.trainable({
            project: flags.project ?? "agents",
            name: Example.modelNameOf("agent", options),
            // Locally the pretrained base: an agent's own prompts (tools, instructions) need its 2,048 tokens, and
            // it starts from text rather than noise (minimal's task: 0.88 -> 1.00 against 0.46 -> 0.96 from tiny).
            base_model: Example.baseModelOf(options, "effect-rl/base-2k")
          })
          const summary = yield* TrainingLoop.run({
            policy,
            scenarios,
            rollout: agent.rollout,
            reward: agent.reward,
            groupsPerStep,
            rolloutsPerGroup: groupSize,
            steps: options.steps ?? DEFAULTS.steps,
            gather: {
              concurrency: flags.concurrency ?? DEFAULTS.concurrency,
              ...(flags.maxFailures === undefined ? {} : { maxExceptions: flags.maxFailures })
            }
          }).pipe(
            // The gateway the agents reach when they run in this process (on a cluster, each runner has its own).
            Effect.provide(agent.layer),
            Effect.catchTag("GatherError", (error) => Effect.fail(failed(tooManyFailures(error))))
          )
          return { summary, policy }
        })
    }
    return yield* Example.run(example, {
      ...(steps === undefined ? {} : { steps }),
      ...(flags.cluster === undefined ? {} : { cluster: flags.cluster }),
      baseModel: flags.baseModel,
      modelName: flags.model,
      ...(flags.dataDir === undefined ? {} : { local: { dataDir: resolve(flags.dataDir) } }),
      command: hostedCommand(flags)
    })
  })
