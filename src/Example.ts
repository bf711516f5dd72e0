/**
 * Runnable examples: what an example module exports, and how `effect-rl train <name>` and a plain
 * `npx tsx examples/<name>.ts` run it and report on it.
 *
 * An example is an {@link Example}: a name, what it shows, and a `train` effect that needs only the two
 * clients (so it runs on whichever backend layer it is given). {@link run} gives it a backend
 * ({@link Backend.fromEnv}: the hosted service when `WANDB_API_KEY` is set, else the embedded backend
 * started in-process) and prints the report: reward per step as a terminal chart, the best checkpoint's
 * model name, how to run the same loop against the hosted service, and a last machine-readable line
 * `summary: {"steps", "first_reward", "last3_reward", "seconds", "model"}`. With a trace project
 * (`--trace <entity/project>`), the run is traced into it on the backend's trace service (see `Tracing`).
 * With a cluster (`--cluster <url>`, for an example that lists its {@link Example.agents}), its rollouts run on
 * the cluster's runners (`effect-rl runner --cluster <url>`; see `RolloutCluster`).
 *
 * @since 0.1.0
 */
import { resolve } from "node:path"
import { fileURLToPath } from "node:url"
import type { PlatformError } from "@effect/platform/Error"
import type { ServeError } from "@effect/platform/HttpServerError"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Clock from "effect/Clock"
import type { ConfigError } from "effect/ConfigError"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Backend from "./Backend.js"
import type * as LocalBackend from "./LocalBackend.js"
import { artifactName, type Trainable } from "./workflow/Policy.js"
import type * as RolloutAgent from "./workflow/RolloutAgent.js"
import type { RolloutClusterError } from "./workflow/RolloutClusterError.js"
import * as Tracing from "./workflow/Tracing.js"
import type { Summary } from "./workflow/TrainingLoop.js"

/** Options every example takes (from the command line or the caller). */
export interface TrainOptions {
  /** The step budget (each example has its own default). */
  readonly steps?: number | undefined
  /** The base model to train (default: the embedded backend's `effect-rl/tiny`, or `EFFECT_RL_BASE_MODEL`). */
  readonly baseModel?: string | undefined
  /** The model name to train under (default: the example's name and the time, so each run starts fresh). */
  readonly modelName?: string | undefined
}

/** What an example's training gives back. */
export interface Outcome {
  /** The training loop's summary (steps with their metrics). */
  readonly summary: Summary
  /** The trained policy. */
  readonly policy: Trainable
}

/** A runnable example. */
export interface Example<E = unknown> {
  /** Its name (`effect-rl train <name>`). */
  readonly name: string
  /** What it shows and the outcome to expect. */
  readonly description: string
  /** Trains it, on the backend its clients point at. */
  readonly train: (options: TrainOptions) => Effect.Effect<Outcome, E, Backend.Clients>
  /**
   * The embedded backend's base model it trains on when none is asked for (default {@link LOCAL_BASE_MODEL});
   * e.g. `effect-rl/tiny-2k` for an agent whose prompts need more room.
   */
  readonly localBaseModel?: string | undefined
  /**
   * The agents its loop gathers with (`RolloutAgent`s), when its rollouts can run on a cluster's runners
   * (`effect-rl train <name> --cluster <url>`; the runners register them: `effect-rl runner`).
   */
  readonly agents?: ReadonlyArray<RolloutAgent.Any> | undefined
}

/** The embedded backend's base model, the default of every example. */
export const LOCAL_BASE_MODEL = "effect-rl/tiny"

/**
 * The base model an example trains: the option, else `EFFECT_RL_BASE_MODEL` (unless empty), else `local` (the
 * embedded backend's model the example needs; default {@link LOCAL_BASE_MODEL}).
 */
export const baseModelOf = (options: TrainOptions, local: string = LOCAL_BASE_MODEL): string =>
  options.baseModel ?? (process.env.EFFECT_RL_BASE_MODEL?.trim() || local)

/** The model name an example trains under: the option, else `<example>-<time>`. */
export const modelNameOf = (example: string, options: TrainOptions): string =>
  options.modelName ??
  `${example}-${new Date()
    .toISOString()
    .replace(/[-:.TZ]/g, "")
    .slice(0, 14)}`

/** A bar chart of values, one line per entry, scaled to `width` characters. */
export const chart = (rows: ReadonlyArray<{ readonly label: string; readonly value: number }>, width = 40): string => {
  if (rows.length === 0) return "(no steps)"
  const max = Math.max(...rows.map((r) => r.value), 1e-9)
  const min = Math.min(0, ...rows.map((r) => r.value))
  const labelWidth = Math.max(...rows.map((r) => r.label.length))
  return rows
    .map((r) => {
      const n = Math.round(((r.value - min) / (max - min || 1)) * width)
      return `${r.label.padStart(labelWidth)} | ${"#".repeat(n)}${" ".repeat(width - n)} ${r.value.toFixed(3)}`
    })
    .join("\n")
}

/** The figures of the last line: steps run, first step's reward, mean of the last three, seconds, model. */
export interface SummaryLine {
  readonly steps: number
  readonly first_reward: number | null
  readonly last3_reward: number | null
  readonly seconds: number
  readonly model: string
}

/** A reward as the summary line shows it: four decimals (`0.1917`, not `0.19166666666666657`). */
const rounded = (reward: number) => Math.round(reward * 10_000) / 10_000

/** The summary line's figures for an outcome (rewards are the training groups' mean reward per step, rounded). */
export const summaryLine = (outcome: Outcome, seconds: number, model: string): SummaryLine => {
  const rewards = outcome.summary.steps.map((s) => s.train.reward ?? 0)
  const last3 = rewards.slice(-3)
  return {
    steps: rewards.length,
    first_reward: rewards.length === 0 ? null : rounded(rewards[0]!),
    last3_reward: last3.length === 0 ? null : rounded(last3.reduce((a, b) => a + b, 0) / last3.length),
    seconds: Math.round(seconds * 10) / 10,
    model
  }
}

/** The best step by mean training reward (the checkpoint that sampled the best rollouts). */
export const bestStep = (summary: Summary): number | undefined => {
  let best: { step: number; reward: number } | undefined
  for (const s of summary.steps) {
    const reward = s.train.reward
    if (reward !== undefined && (best === undefined || reward >= best.reward)) best = { step: s.step, reward }
  }
  // The final checkpoint sampled nothing yet; the validation at the end (if any) speaks for it.
  const final = summary.finalValidation?.reward
  if (final !== undefined && (best === undefined || final >= best.reward)) return summary.finalStep
  return best?.step
}

const hostedHelp = (command: string) => `To run the same loop against the hosted service:
  export WANDB_API_KEY=<your key>                      # the hosted service is used when this is set
  export EFFECT_RL_BASE_MODEL=OpenPipe/Qwen3-14B-Instruct  # a base model it trains (effect-rl base-models)
  # optional: EFFECT_RL_TRAINING_URL, EFFECT_RL_INFERENCE_URL (default: the hosted services)
  npx ${command}`

/** Options of {@link run}. */
export interface RunOptions extends TrainOptions {
  /** Options of the embedded backend, when it is used (e.g. a `dataDir` to keep its data). */
  readonly local?: Backend.LocalOptions | undefined
  /** Trace the run into this project (`entity/project`) of the backend's trace service; default: no tracing. */
  readonly trace?: string | undefined
  /**
   * On the embedded backend, keep it (and its dashboard) running after the report until interrupted, so the
   * run can still be looked at; default false (`effect-rl train` sets it when run in a terminal).
   */
  readonly keepServing?: boolean | undefined
  /** Run the rollouts on this cluster's runners (its storage URL; see `RolloutCluster`); default: in-process. */
  readonly cluster?: string | undefined
  /** The command that runs this loop again, for the report's hosted-service advice (default `effect-rl train <name>`). */
  readonly command?: string | undefined
}

/** An example that cannot run on a cluster was asked to (it lists no agents). */
export class NoAgents extends Error {
  override readonly name = "NoAgents"
}

/** The rollouts of `example` on the cluster at `url` (`RolloutCluster.layer`, loaded only when asked for). */
const onCluster = <A, E, R>(example: Example<unknown>, url: string, body: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const agents = example.agents ?? []
    if (agents.length === 0) {
      return yield* Effect.die(new NoAgents(`the ${example.name} example lists no agents: it cannot run on a cluster`))
    }
    const RolloutCluster = yield* Effect.promise(() => import("./workflow/RolloutCluster.js"))
    yield* Console.log(`rollouts on the cluster's runners (agents: ${agents.map((a) => a.name).join(", ")})`)
    return yield* Effect.provide(body, RolloutCluster.layer({ cluster: url, agents }))
  })

/**
 * Runs an example on {@link Backend.fromEnv} and prints its report (see the module comment); the outcome
 * is returned too. On the embedded backend, a one-time sign-in link to its dashboard is printed when it starts
 * (`printSignInLink`), and with `keepServing` the backend stays up after the report until Ctrl-C.
 */
export const run = <E>(
  example: Example<E>,
  options: RunOptions = {}
): Effect.Effect<
  Outcome,
  E | PlatformError | ServeError | ConfigError | LocalBackend.DataDirError | RolloutClusterError
> =>
  Effect.gen(function* () {
    const started = yield* Clock.currentTimeMillis
    yield* Console.log(`effect-rl: training the ${example.name} example\n${example.description}\n`)
    const local = { ...options.local, printSignInLink: true, keepServing: options.keepServing }
    return yield* report(example, options, started).pipe(Effect.provide(Backend.fromEnv(local)))
  })

/** The run itself and its report, on the backend in context (see {@link run}). */
const report = <E>(example: Example<E>, options: RunOptions, started: number) =>
  Effect.gen(function* () {
    const trained =
      options.cluster === undefined
        ? example.train(options)
        : onCluster(example as Example<unknown>, options.cluster, example.train(options))
    const outcome = yield* options.trace === undefined
      ? trained
      : Effect.provide(trained, Tracing.layer({ project: options.trace }))
    if (options.trace !== undefined) yield* Console.log(`\ntraced into ${options.trace}: a call per step and rollout`)
    const seconds = ((yield* Clock.currentTimeMillis) - started) / 1000
    const model = outcome.policy.record
    const best = bestStep(outcome.summary)
    const bestName = artifactName(model, best ?? outcome.summary.finalStep)
    const rows = outcome.summary.steps.map((s) => ({ label: `step ${s.step}`, value: s.train.reward ?? 0 }))
    yield* Console.log(`\nreward per step (mean over the step's rollouts):\n${chart(rows)}`)
    yield* Console.log(`\nbest checkpoint: ${bestName}`)
    yield* Console.log(`latest checkpoint: ${artifactName(model, outcome.summary.finalStep)}`)
    yield* Console.log(`\n${hostedHelp(options.command ?? `effect-rl train ${example.name}`)}\n`)
    yield* Console.log(`summary: ${JSON.stringify(summaryLine(outcome, seconds, bestName))}`)
    return outcome
  })

/** A command line the examples' runner does not understand. */
export class ArgumentError extends Error {
  override readonly name = "ArgumentError"
}

const FLAGS = ["--steps", "--base-model", "--model", "--data-dir", "--trace"]

/**
 * Reads `--steps <n>`, `--base-model <name>`, `--model <name>`, `--data-dir <dir>` and
 * `--trace <entity/project>` from arguments; throws {@link ArgumentError} for an unknown flag, a flag without
 * its value, a `--steps` that is not a positive integer, or a `--trace` that is not `entity/project`.
 */
export const parseArgs = (args: ReadonlyArray<string>): RunOptions => {
  const values = new Map<string, string>()
  for (let i = 0; i < args.length; i += 2) {
    const name = args[i]!
    if (!FLAGS.includes(name)) throw new ArgumentError(`unknown argument '${name}' (flags: ${FLAGS.join(", ")})`)
    const value = args[i + 1]
    if (value === undefined || value.startsWith("--")) throw new ArgumentError(`${name} needs a value`)
    values.set(name, value)
  }
  const steps = values.get("--steps")
  if (steps !== undefined && !/^[1-9][0-9]*$/.test(steps)) {
    throw new ArgumentError(`--steps must be a positive integer, got '${steps}'`)
  }
  const trace = values.get("--trace")
  if (trace !== undefined && !/^[^/\s]+\/[^/\s]+$/.test(trace)) {
    throw new ArgumentError(`--trace must be a project as entity/project, got '${trace}'`)
  }
  const dataDir = values.get("--data-dir")
  return {
    ...(steps === undefined ? {} : { steps: Number(steps) }),
    baseModel: values.get("--base-model"),
    modelName: values.get("--model"),
    ...(dataDir === undefined ? {} : { local: { dataDir: resolve(dataDir) } }),
    ...(trace === undefined ? {} : { trace })
  }
}

/**
 * Whether the module at `moduleUrl` (its `import.meta.url`) is the program's entry point (`npx tsx <file>`,
 * `node <file>`), not a module imported by another (by `effect-rl train` or a test).
 */
export const isEntryPoint = (moduleUrl: string): boolean => {
  const entry = process.argv[1]
  return entry !== undefined && resolve(entry) === fileURLToPath(moduleUrl)
}

/**
 * Runs the example when its file is the program's entry point (`npx tsx examples/<name>.ts [--steps n]`);
 * does nothing when the file is imported (by the CLI or a test).
 */
export const main = <E>(example: Example<E>, moduleUrl: string): void => {
  if (!isEntryPoint(moduleUrl)) return
  let options: RunOptions
  try {
    options = parseArgs(process.argv.slice(2))
  } catch (error) {
    console.error(`${example.name}: ${error instanceof Error ? error.message : String(error)}`)
    process.exitCode = 2
    return
  }
  NodeRuntime.runMain(run(example, options))
}
