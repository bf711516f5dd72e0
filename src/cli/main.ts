#!/usr/bin/env node
/**
 * The `effect-rl` command, on `@effect/cli` (`--help` on every subcommand, `--version`, typed options).
 *
 * - `effect-rl health`: the training service's health and system check
 * - `effect-rl models [--project <team/project>]`: the inference service's model list
 * - `effect-rl base-models`: the trainable base models
 * - `effect-rl train [<example>] [--steps <n>] [--data-dir <dir>] [--base-model <name>] [--model <name>]
 *   [--trace <entity/project>] [--cluster <url>]`: trains one of the package's examples (without a name, lists
 *   them) on the hosted service when `WANDB_API_KEY` is set, else on the embedded backend started in-process,
 *   printing its dashboard's address (and, in a terminal, keeping it up after the run until Ctrl-C); with
 *   `--cluster`, its rollouts run on that cluster's runners
 * - `effect-rl train-agent "<command>" --scenarios <file.jsonl> [--steps <n>] [--group-size <n>] [--base-model <id>]
 *   [--project <p>] [--model <name>] [--data-dir <dir>] [--concurrency <n>] [--reward <module>] [--timeout <s>]`:
 *   trains an agent that runs as its own process, unchanged (see `trainAgent.ts`), on the backend `train` uses
 * - `effect-rl runner --cluster <url> [--agents <module>] [--host <h>] [--port <n>] [--listen-host <h>]
 *   [--capacity <n>]`: a runner of a rollout cluster (`RolloutCluster`), registering the agents of a module
 *   (default: the examples'), calling the backend the environment names (as `health` does)
 * - `effect-rl serve [--host <h>] [--port <n>] [--data-dir <dir>] [--api-key <key>] [--max-body-size <bytes>]
 *   [--allow-dir <dir>]... [--allow-http]`: the embedded local backend; the key also comes from
 *   `EFFECT_RL_API_KEY`, and with neither a key is generated, printed once and stored in the data directory
 *   for the next start. One server per data directory (a second one fails naming the first); the directory
 *   is 0700 and its files 0600. SFT training data is read from the backend's own uploads, from `file://`
 *   URLs only under an `--allow-dir`, and from other http(s) URLs only with `--allow-http`
 *
 * Every failure is one sentence on stderr saying what failed and what to do (the whole cause with
 * `--verbose`); exit code 2 for an invocation refused (before anything is written), 1 for a failure, 130 for an
 * interruption. `serve` and `train` load the server and the engine when they run, `runner` (and `train
 * --cluster`) the cluster; `health`, `--help` and the other commands load none of them.
 *
 * @since 0.1.0
 */
import { homedir } from "node:os"
import { join, resolve } from "node:path"
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Cause from "effect/Cause"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as InferenceClient from "../client/InferenceClient.js"
import * as TrainingClient from "../client/TrainingClient.js"
import type * as Example from "../Example.js"
import { version } from "../internal/version.js"
import { failed, render, usage } from "./failure.js"

const json = (value: unknown) => Console.log(JSON.stringify(value, null, 2))

/** An option's value refused, in the command's own words (shown by @effect/cli, exit code 2). */
const refuse = (message: string) => ValidationError.invalidValue(HelpDoc.p(message))

/** An integer option within bounds, with a message naming the flag and the value given. */
const integer = (name: string, what: string, bounds: { readonly min: number; readonly max: number }) =>
  Options.text(name).pipe(
    Options.mapEffect((raw) => {
      const n = Number(raw)
      return /^-?\d+$/.test(raw) && n >= bounds.min && n <= bounds.max
        ? Effect.succeed(n)
        : Effect.fail(refuse(`--${name} must be ${what}, got '${raw}'`))
    })
  )

/** An optional flag taking a positive whole number, described. */
const positive = (name: string, description: string) =>
  integer(name, "a positive whole number", { min: 1, max: 1_000_000_000 }).pipe(
    Options.withDescription(description),
    Options.optional
  )

/** The hosted service's environment, checked before a command calls it. */
const remote = (urlEnv: string) =>
  Effect.suspend(() =>
    process.env.WANDB_API_KEY === undefined && process.env[urlEnv] === undefined
      ? Effect.fail(
          failed(
            `no WANDB_API_KEY is set: set it for the hosted service, or run \`effect-rl serve\` and set ${urlEnv} to the URL it prints and WANDB_API_KEY to its key`
          )
        )
      : Effect.void
  )

const Clients = Layer.mergeAll(TrainingClient.layerConfig(), InferenceClient.layerConfig()).pipe(
  Layer.provide(NodeHttpClient.layerUndici)
)

const health = Command.make("health", {}, () =>
  Effect.gen(function* () {
    yield* remote(TrainingClient.URL_ENV)
    const client = yield* TrainingClient.TrainingClient
    yield* json({ health: yield* client.health, system_check: yield* client.systemCheck })
  }).pipe(Effect.provide(Clients))
).pipe(Command.withDescription("the training service's health and system check"))

const models = Command.make(
  "models",
  {
    project: Options.text("project").pipe(
      Options.withDescription("the project (team/project) to list for, sent as OpenAI-Project"),
      Options.optional
    )
  },
  ({ project }) =>
    Effect.gen(function* () {
      yield* remote(InferenceClient.URL_ENV)
      const client = yield* InferenceClient.InferenceClient
      yield* json(yield* client.listModels({ project: Option.getOrUndefined(project) }))
    }).pipe(Effect.provide(Clients))
).pipe(Command.withDescription("the inference service's model list"))

const baseModels = Command.make("base-models", {}, () =>
  Effect.gen(function* () {
    yield* remote(TrainingClient.URL_ENV)
    const client = yield* TrainingClient.TrainingClient
    yield* json(yield* client.listBaseModels)
  }).pipe(Effect.provide(Clients))
).pipe(Command.withDescription("the trainable base models"))

/**
 * The examples' registry (`examples/index`): beside `src/` when this runs from source (tsx), in `dist/examples/`
 * when built.
 */
const registry = import.meta.url.endsWith(".ts") ? "../../examples/index.ts" : "../examples/index.js"

const loadExamples = Effect.promise(
  () =>
    import(new URL(registry, import.meta.url).href) as Promise<{
      readonly examples: Readonly<Record<string, Example.Example>>
    }>
).pipe(Effect.map((module) => module.examples))

const train = Command.make(
  "train",
  {
    example: Args.text({ name: "example" }).pipe(
      Args.withDescription("the example to train (without one, the list)"),
      Args.optional
    ),
    steps: integer("steps", "a positive integer", { min: 1, max: Number.MAX_SAFE_INTEGER }).pipe(
      Options.withDescription("training steps (default: the example's)"),
      Options.optional
    ),
    dataDir: Options.text("data-dir").pipe(
      Options.withDescription("keep the embedded backend's data here (default: a temporary directory)"),
      Options.optional
    ),
    baseModel: Options.text("base-model").pipe(
      Options.withDescription("the base model to train (default: EFFECT_RL_BASE_MODEL, else the backend's)"),
      Options.optional
    ),
    model: Options.text("model").pipe(Options.withDescription("the trained model's name"), Options.optional),
    trace: Options.text("trace").pipe(
      Options.mapEffect((project) =>
        /^[^/\s]+\/[^/\s]+$/.test(project)
          ? Effect.succeed(project)
          : Effect.fail(refuse(`--trace must be a project as entity/project, got '${project}'`))
      ),
      Options.withDescription("trace the run into this project (entity/project) of the trace service"),
      Options.optional
    ),
    cluster: Options.text("cluster").pipe(
      Options.withDescription("run the rollouts on this cluster's runners (postgres://... or sqlite:<file>)"),
      Options.optional
    )
  },
  (flags) =>
    Effect.gen(function* () {
      const examples = yield* loadExamples
      const names = Object.keys(examples).sort()
      if (Option.isNone(flags.example)) {
        return yield* Console.log(`examples: ${names.join(", ")}\nrun one with: effect-rl train <example>`)
      }
      const example = examples[flags.example.value]
      if (example === undefined) {
        return yield* usage(`unknown example '${flags.example.value}'; examples: ${names.join(", ")}`)
      }
      const { run } = yield* Effect.promise(() => import("../Example.js"))
      const dataDir = Option.getOrUndefined(flags.dataDir)
      yield* run(example, {
        ...(Option.isSome(flags.steps) ? { steps: flags.steps.value } : {}),
        baseModel: Option.getOrUndefined(flags.baseModel),
        modelName: Option.getOrUndefined(flags.model),
        ...(dataDir === undefined ? {} : { local: { dataDir: resolve(dataDir) } }),
        ...(Option.isSome(flags.trace) ? { trace: flags.trace.value } : {}),
        // In a terminal, the embedded backend's dashboard stays up after the run for a person to look at.
        keepServing: process.stdout.isTTY === true && process.stdin.isTTY === true,
        ...(Option.isSome(flags.cluster) ? { cluster: flags.cluster.value } : {})
      })
    })
).pipe(Command.withDescription("train one of the package's examples (hosted if WANDB_API_KEY is set, else locally)"))

const serve = Command.make(
  "serve",
  {
    host: Options.text("host").pipe(
      Options.withDescription("the address to listen on"),
      Options.withDefault("127.0.0.1")
    ),
    port: integer("port", "a port from 0 to 65535", { min: 0, max: 65_535 }).pipe(
      Options.withDescription("the port (0: a free one)"),
      Options.withDefault(0)
    ),
    dataDir: Options.text("data-dir").pipe(
      Options.withDescription("where the store and the key live"),
      Options.withDefault(join(homedir(), ".effect-rl"))
    ),
    apiKey: Options.text("api-key").pipe(
      Options.withDescription("the key clients must send (also EFFECT_RL_API_KEY; default: stored, else generated)"),
      Options.optional
    ),
    maxBodySize: integer("max-body-size", "a positive number of bytes", { min: 1, max: Number.MAX_SAFE_INTEGER }).pipe(
      Options.withDescription("the largest request body accepted, in bytes (default 64 MiB)"),
      Options.optional
    ),
    maxN: positive("max-n", "the most choices (n) one completion may ask for (default 128)"),
    maxRequestTokens: positive(
      "max-request-tokens",
      "the most tokens one completion may sample, n times its token limit (default 16384)"
    ),
    maxQueuedTokens: positive(
      "max-queued-tokens",
      "the most tokens all admitted completions may still sample; beyond, a 429 (default 262144)"
    ),
    requestTimeout: positive("request-timeout", "seconds a request may take to arrive whole; then a 408 (default 60)"),
    idleTimeout: positive("idle-timeout", "seconds an idle keep-alive connection stays open (default 5)"),
    allowDirs: Options.directory("allow-dir", { exists: "yes" }).pipe(
      Options.repeated,
      Options.withDescription(
        "a directory whose files SFT jobs may name as file:// training_data_url (repeatable; default: none)"
      )
    ),
    allowHttp: Options.boolean("allow-http").pipe(
      Options.withDescription("fetch SFT training_data_url http(s) URLs, wherever they point (default: refused)")
    )
  },
  (flags) =>
    Effect.flatMap(
      Effect.promise(() => import("./serve.js")),
      (implementation) =>
        implementation.serve({
          host: flags.host,
          port: flags.port,
          dataDir: resolve(flags.dataDir),
          apiKey: Option.getOrUndefined(flags.apiKey),
          maxBodySize: Option.getOrUndefined(flags.maxBodySize),
          maxN: Option.getOrUndefined(flags.maxN),
          maxRequestTokens: Option.getOrUndefined(flags.maxRequestTokens),
          maxQueuedTokens: Option.getOrUndefined(flags.maxQueuedTokens),
          requestTimeoutMs: Option.getOrUndefined(Option.map(flags.requestTimeout, (seconds) => seconds * 1000)),
          idleTimeoutMs: Option.getOrUndefined(Option.map(flags.idleTimeout, (seconds) => seconds * 1000)),
          allowDirs: flags.allowDirs.map((dir) => resolve(dir)),
          allowHttp: flags.allowHttp
        })
    )
).pipe(Command.withDescription("the embedded local backend: all three services on one origin"))

const runner = Command.make(
  "runner",
  {
    cluster: Options.text("cluster").pipe(
      Options.withDescription("the cluster's storage: postgres://user:password@host:port/db, or sqlite:<file>")
    ),
    agents: Options.file("agents", { exists: "yes" }).pipe(
      Options.withDescription("a module exporting the agents to register (default: the package's examples')"),
      Options.optional
    ),
    host: Options.text("host").pipe(
      Options.withDescription("the host the other processes reach this runner at"),
      Options.withDefault("localhost")
    ),
    port: integer("port", "a port from 1 to 65535", { min: 1, max: 65_535 }).pipe(
      Options.withDescription("the port this runner listens on"),
      Options.withDefault(34431)
    ),
    listenHost: Options.text("listen-host").pipe(
      Options.withDescription("the address to listen on (default: --host)"),
      Options.optional
    ),
    capacity: positive("capacity", "rollouts in flight on this runner (default 16)")
  },
  (flags) =>
    Effect.gen(function* () {
      yield* remote(TrainingClient.URL_ENV)
      const implementation = yield* Effect.promise(() => import("./runner.js"))
      return yield* implementation.runner(
        {
          cluster: flags.cluster,
          agents: Option.getOrUndefined(flags.agents),
          host: flags.host,
          port: flags.port,
          listenHost: Option.getOrUndefined(flags.listenHost),
          capacity: Option.getOrUndefined(flags.capacity)
        },
        loadExamples
      )
    })
).pipe(Command.withDescription("a runner of a rollout cluster: runs the rollouts a training loop sends it"))

const trainAgent = Command.make(
  "train-agent",
  {
    command: Args.text({ name: "command" }).pipe(
      Args.withDescription("the agent's command line (run with sh -c), quoted as one argument")
    ),
    scenarios: Options.text("scenarios").pipe(Options.withDescription("a JSONL file: one scenario (JSON) per line")),
    steps: positive("steps", "training steps (default 5)"),
    groupSize: positive("group-size", "rollouts per scenario and step (default 8)"),
    baseModel: Options.text("base-model").pipe(
      Options.withDescription("the base model to train (default: EFFECT_RL_BASE_MODEL, else the backend's)"),
      Options.optional
    ),
    project: Options.text("project").pipe(
      Options.withDescription("the project of the trained model (default agents)"),
      Options.optional
    ),
    model: Options.text("model").pipe(Options.withDescription("the trained model's name"), Options.optional),
    dataDir: Options.text("data-dir").pipe(
      Options.withDescription("keep the embedded backend's data here (default: a temporary directory)"),
      Options.optional
    ),
    concurrency: positive("concurrency", "agent processes running at once (default 16)"),
    reward: Options.file("reward", { exists: "yes" }).pipe(
      Options.withDescription(
        "a module whose `reward` (or default) export scores {scenario, value, trajectory} (default: the agent's report)"
      ),
      Options.optional
    ),
    timeout: positive("timeout", "seconds one run of the agent may take (default: no limit)")
  },
  (flags) =>
    Effect.flatMap(
      Effect.promise(() => import("./trainAgent.js")),
      (implementation) =>
        implementation.trainAgent({
          command: flags.command,
          scenarios: flags.scenarios,
          steps: Option.getOrUndefined(flags.steps),
          groupSize: Option.getOrUndefined(flags.groupSize),
          baseModel: Option.getOrUndefined(flags.baseModel),
          project: Option.getOrUndefined(flags.project),
          model: Option.getOrUndefined(flags.model),
          dataDir: Option.getOrUndefined(flags.dataDir),
          concurrency: Option.getOrUndefined(flags.concurrency),
          reward: Option.getOrUndefined(flags.reward),
          timeout: Option.getOrUndefined(flags.timeout)
        })
    )
).pipe(
  Command.withDescription(
    "train an agent that runs as its own process (any language): its OpenAI requests are recorded through a rollout gateway"
  )
)

const root = Command.make("effect-rl", {}, () =>
  Console.log(
    `effect-rl ${version}: health, models, base-models, train, train-agent, serve, runner\nrun \`effect-rl <command> --help\` for one, \`effect-rl --help\` for all`
  )
).pipe(Command.withSubcommands([health, models, baseModels, train, trainAgent, serve, runner]))

const cli = Command.run(root, { name: "effect-rl", version })

/** Flags that take a value: one given none (last, or followed by another flag) is refused by name. */
const VALUED = new Set([
  "--project",
  "--steps",
  "--data-dir",
  "--base-model",
  "--model",
  "--trace",
  "--host",
  "--port",
  "--api-key",
  "--max-body-size",
  "--max-n",
  "--max-request-tokens",
  "--max-queued-tokens",
  "--request-timeout",
  "--idle-timeout",
  "--allow-dir",
  "--cluster",
  "--agents",
  "--listen-host",
  "--capacity",
  "--scenarios",
  "--group-size",
  "--concurrency",
  "--reward",
  "--timeout"
])

const missingValue = (args: ReadonlyArray<string>): string | undefined =>
  args.find((arg, i) => VALUED.has(arg) && (args[i + 1] === undefined || args[i + 1]!.startsWith("--")))

const argv = process.argv.filter((arg) => arg !== "--verbose")
const verbose = argv.length !== process.argv.length
const command = ["effect-rl", argv.slice(2).find((arg) => !arg.startsWith("-"))].filter(Boolean).join(" ")
const missing = missingValue(argv.slice(2))

const program = (missing === undefined ? cli(argv) : Effect.fail(usage(`${missing} needs a value`))) as Effect.Effect<
  void,
  unknown
>

program.pipe(
  Effect.provide(NodeContext.layer),
  Effect.exit,
  Effect.flatMap((exit) => {
    if (Exit.isSuccess(exit)) return Effect.void
    const { exitCode, sentence } = render(command, exit.cause)
    return Effect.sync(() => {
      if (sentence !== undefined) console.error(sentence)
      if (verbose && exitCode !== 130) console.error(Cause.pretty(exit.cause))
      process.exitCode = exitCode
    })
  }),
  NodeRuntime.runMain({ disableErrorReporting: true })
)
