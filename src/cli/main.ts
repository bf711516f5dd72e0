#!/usr/bin/env node
/**
 * The `effect-rl` command, parsed by `@effect/cli` (`--version`, typed options). Each command is declared as one
 * table (`help.ts`) that gives both @effect/cli's config and its `--help` page; the command line is read first
 * (`invocation.ts`) for `--help`, `--verbose` and the refusals worded better there (an unknown command or option,
 * a flag without its value).
 *
 * - `effect-rl health`: the training service's health and system check, with the URL it asked (the
 *   environment's `EFFECT_RL_TRAINING_URL`, else the hosted service's published URL)
 * - `effect-rl models [--project <team/project>]`: the inference service's model list
 * - `effect-rl base-models`: the trainable base models
 * - `effect-rl train [<example>] [--steps <n>] [--data-dir <dir>] [--base-model <name>] [--model <name>]
 *   [--trace <entity/project>] [--cluster <url>]`: trains one of the package's examples (without a name, lists
 *   them) on the hosted service when `WANDB_API_KEY` is set, else on the embedded backend started in-process,
 *   printing its dashboard's address (and, in a terminal, keeping it up after the run until Ctrl-C); with
 *   `--cluster`, its rollouts run on that cluster's runners
 * - `effect-rl train-agent "<command>" --scenarios <file.jsonl> [--steps <n>] [--group-size <n>] [--base-model <id>]
 *   [--project <p>] [--model <name>] [--data-dir <dir>] [--concurrency <n>] [--reward <module>] [--timeout <s>]
 *   [--max-failures <n>] [--groups-per-step <n>] [--epochs <n>] [--cluster <url>]`:
 *   trains an agent that runs as its own process, unchanged (see `trainAgent.ts`), on the backend `train` uses;
 *   with `--cluster`, on that cluster's runners
 * - `effect-rl train-mcp "<server command>" | --url <url> [--header "Name: value"]... --scenarios <file.jsonl>
 *   [--generate <n> --writer <model>] [--judge <model>] [--reward <module>] [--per-rollout] [--max-turns <n>]
 *   [--max-tokens <n>] [--call-timeout <s>]` and train-agent's flags (but `--cluster`): trains an agent on an MCP
 *   server's tools (see `trainMcp.ts`), on the backend `train` uses
 * - `effect-rl runner --cluster <url> [--agents <module>] [--agent-command "<command>" [--reward <module>]
 *   [--timeout <s>]] [--host <h>] [--port <n>] [--listen-host <h>] [--capacity <n>]`: a runner of a rollout
 *   cluster (`RolloutCluster`), registering the agents of a module and/or the agent of `train-agent "<command>"`
 *   (default: the examples'), calling the backend the environment names (as `health` does)
 * - `effect-rl serve [--host <h>] [--port <n>] [--data-dir <dir>] [--api-key <key>] [--max-body-size <bytes>]
 *   [--allow-dir <dir>]... [--allow-http]`: the embedded local backend; the key also comes from
 *   `EFFECT_RL_API_KEY`, and with neither a key is generated, printed once and stored in the data directory
 *   for the next start. One server per data directory (a second one fails naming the first); the directory
 *   is 0700 and its files 0600. SFT training data is read from the backend's own uploads, from `file://`
 *   URLs only under an `--allow-dir`, and from other http(s) URLs only with `--allow-http`; a damaged database
 *   is refused at start (SQLite's quick_check), saying how to recover
 * - `effect-rl check [--data-dir <dir>]`, `effect-rl backup <file> [--data-dir <dir>]`: the full check of a data
 *   directory's database, and a consistent copy of it, also while it is served (see `dataDir.ts`)
 *
 * Every failure is one sentence on stderr saying what failed and what to do (the whole cause with
 * `--verbose`); an invocation refused, by the check or by @effect/cli, is one line `effect-rl <command>: ...`.
 * Exit code 2 for an invocation refused (before anything is written), 1 for a failure, 130 for an
 * interruption. `serve` and `train` load the server and the engine when they run, `runner` (and `train
 * --cluster`) the cluster; `health`, `--help` and the other commands load none of them.
 *
 * @since 0.1.0
 */
import { homedir } from "node:os"
import { join, resolve } from "node:path"
import * as Args from "@effect/cli/Args"
import type * as CliApp from "@effect/cli/CliApp"
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
import { ApiError } from "../client/ApiError.js"
import * as InferenceClient from "../client/InferenceClient.js"
import * as TrainingClient from "../client/TrainingClient.js"
import type * as Example from "../Example.js"
import { version } from "../internal/version.js"
import { backup, backupTable, check, checkTable } from "./dataDir.js"
import { failed, render, usage } from "./failure.js"
import { commandPage, describe, rootPage, table, terminalOf } from "./help.js"
import { read } from "./invocation.js"

const json = (value: unknown) => Console.log(JSON.stringify(value, null, 2))

/** An option's value refused, in the command's own words (rendered by `render`, exit code 2). */
const refuse = (message: string) => ValidationError.invalidValue(HelpDoc.p(message))

/** A flag's value shown as `<pseudo>` in the help: text of a given kind (a host, a URL, a name). */
const text = (name: string, pseudo: string) => Options.text(name).pipe(Options.withPseudoName(pseudo))

/** An integer flag within bounds, shown as `<pseudo>`, with a message naming the flag and the value given. */
const integer = (name: string, pseudo: string, what: string, bounds: { readonly min: number; readonly max: number }) =>
  text(name, pseudo).pipe(
    Options.mapEffect((raw) => {
      const n = Number(raw)
      return /^-?\d+$/.test(raw) && n >= bounds.min && n <= bounds.max
        ? Effect.succeed(n)
        : Effect.fail(refuse(`--${name} must be ${what}, got '${raw}'`))
    })
  )

/** An optional flag taking a positive whole number, shown as `<pseudo>`, described. */
const positive = (name: string, pseudo: string, description: string) =>
  integer(name, pseudo, "a positive whole number", { min: 1, max: 1_000_000_000 }).pipe(
    Options.optional,
    describe(description)
  )

/** A setting of the environment: an empty one (`WANDB_API_KEY=`) counts as unset. */
const isSet = (name: string) => (process.env[name] ?? "").trim() !== ""

/** The hosted service's environment, checked before a command calls it. */
const remote = (urlEnv: string) =>
  Effect.suspend(() =>
    !isSet("WANDB_API_KEY") && !isSet(urlEnv)
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

const healthTable = table("health", "the training service's health and system check", {})

const health = Command.make("health", healthTable.config, () =>
  Effect.gen(function* () {
    yield* remote(TrainingClient.URL_ENV)
    const url = yield* TrainingClient.configuredUrl()
    const client = yield* TrainingClient.TrainingClient
    // A failure says which URL it asked too (the one sentence on stderr).
    const asked = Effect.mapError(
      (error: ApiError) => new ApiError({ ...error, description: `${error.description} (asked ${url})` })
    )
    yield* json({ url, health: yield* asked(client.health), system_check: yield* asked(client.systemCheck) })
  }).pipe(Effect.provide(Clients))
).pipe(Command.withDescription(healthTable.help.description))

const modelsTable = table("models", "the inference service's model list", {
  project: text("project", "team/project").pipe(
    Options.optional,
    describe("the project to list for, sent as OpenAI-Project")
  )
})

const models = Command.make("models", modelsTable.config, ({ project }) =>
  Effect.gen(function* () {
    yield* remote(InferenceClient.URL_ENV)
    const client = yield* InferenceClient.InferenceClient
    yield* json(yield* client.listModels({ project: Option.getOrUndefined(project) }))
  }).pipe(Effect.provide(Clients))
).pipe(Command.withDescription(modelsTable.help.description))

const baseModelsTable = table("base-models", "the trainable base models", {})

const baseModels = Command.make("base-models", baseModelsTable.config, () =>
  Effect.gen(function* () {
    yield* remote(TrainingClient.URL_ENV)
    const client = yield* TrainingClient.TrainingClient
    yield* json(yield* client.listBaseModels)
  }).pipe(Effect.provide(Clients))
).pipe(Command.withDescription(baseModelsTable.help.description))

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

const trainTable = table(
  "train",
  "train one of the package's examples (on the hosted service if WANDB_API_KEY is set, else on the embedded backend)",
  {
    example: Args.text({ name: "example" }).pipe(
      Args.optional,
      describe("the example to train (without one, the list)")
    ),
    steps: integer("steps", "n", "a positive integer", { min: 1, max: Number.MAX_SAFE_INTEGER }).pipe(
      Options.optional,
      describe("training steps (default: the example's)")
    ),
    dataDir: Options.directory("data-dir").pipe(
      Options.withPseudoName("dir"),
      Options.optional,
      describe("keep the embedded backend's data here (default: a temporary directory)")
    ),
    baseModel: text("base-model", "name").pipe(
      Options.optional,
      describe("the base model to train (default: EFFECT_RL_BASE_MODEL, else the backend's)")
    ),
    model: text("model", "name").pipe(Options.optional, describe("the trained model's name")),
    trace: text("trace", "entity/project").pipe(
      Options.mapEffect((project) =>
        /^[^/\s]+\/[^/\s]+$/.test(project)
          ? Effect.succeed(project)
          : Effect.fail(refuse(`--trace must be a project as entity/project, got '${project}'`))
      ),
      Options.optional,
      describe("trace the run into this project of the trace service")
    ),
    cluster: text("cluster", "url").pipe(
      Options.optional,
      describe("run the rollouts on this cluster's runners (postgres://... or sqlite:<file>)")
    )
  }
)

const train = Command.make("train", trainTable.config, (flags) =>
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
).pipe(Command.withDescription(trainTable.help.description))

const serveTable = table("serve", "the embedded local backend: all three services on one origin", {
  host: text("host", "host").pipe(
    Options.withDefault("127.0.0.1"),
    describe("the address to listen on (default 127.0.0.1)")
  ),
  port: integer("port", "port", "a port from 0 to 65535", { min: 0, max: 65_535 }).pipe(
    Options.withDefault(0),
    describe("the port (default 0: a free one)")
  ),
  dataDir: Options.directory("data-dir").pipe(
    Options.withPseudoName("dir"),
    Options.withDefault(join(homedir(), ".effect-rl")),
    describe("where the store and the key live (default ~/.effect-rl)")
  ),
  apiKey: text("api-key", "key").pipe(
    Options.optional,
    describe("the key clients must send (also EFFECT_RL_API_KEY; default: the stored one, else a new one)")
  ),
  maxBodySize: integer("max-body-size", "bytes", "a positive number of bytes", {
    min: 1,
    max: Number.MAX_SAFE_INTEGER
  }).pipe(Options.optional, describe("the largest request body accepted (default 64 MiB)")),
  maxN: positive("max-n", "n", "the most choices (n) one completion may ask for (default 128)"),
  maxRequestTokens: positive(
    "max-request-tokens",
    "tokens",
    "the most tokens one completion may sample, n times its token limit (default 16384)"
  ),
  maxQueuedTokens: positive(
    "max-queued-tokens",
    "tokens",
    "the most tokens all admitted completions may still sample; beyond, a 429 (default 262144)"
  ),
  requestTimeout: positive(
    "request-timeout",
    "seconds",
    "how long a request may take to arrive whole; then a 408 (default 60)"
  ),
  idleTimeout: positive("idle-timeout", "seconds", "how long an idle keep-alive connection stays open (default 5)"),
  allowDirs: Options.directory("allow-dir", { exists: "yes" }).pipe(
    Options.withPseudoName("dir"),
    Options.repeated,
    describe("a directory whose files SFT jobs may name as file:// training_data_url (repeatable; default: none)")
  ),
  allowHttp: Options.boolean("allow-http").pipe(
    describe("fetch SFT training_data_url http(s) URLs, wherever they point (default: refused)")
  )
})

const serve = Command.make("serve", serveTable.config, (flags) =>
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
).pipe(Command.withDescription(serveTable.help.description))

const runnerTable = table("runner", "a runner of a rollout cluster: runs the rollouts a training loop sends it", {
  cluster: text("cluster", "url").pipe(
    describe("the cluster's storage: postgres://user:password@host:port/db, or sqlite:<file>")
  ),
  agents: Options.file("agents", { exists: "yes" }).pipe(
    Options.withPseudoName("file"),
    Options.optional,
    describe("a module exporting the agents to register (default: the package's examples')")
  ),
  host: text("host", "host").pipe(
    Options.withDefault("localhost"),
    describe("the host the other processes reach this runner at (default localhost)")
  ),
  port: integer("port", "port", "a port from 1 to 65535", { min: 1, max: 65_535 }).pipe(
    Options.withDefault(34431),
    describe("the port this runner listens on (default 34431)")
  ),
  listenHost: text("listen-host", "host").pipe(
    Options.optional,
    describe("the address to listen on (default: --host)")
  ),
  capacity: positive("capacity", "n", "rollouts in flight on this runner (default 16)"),
  agentCommand: text("agent-command", "command").pipe(
    Options.optional,
    describe(
      "register the agent of `effect-rl train-agent <command> --cluster <url>`: its command line (the same as the " +
        "loop's), run here with this runner's own rollout gateway"
    )
  ),
  reward: Options.file("reward", { exists: "yes" }).pipe(
    Options.withPseudoName("module"),
    Options.optional,
    describe("with --agent-command: the loop's --reward module (the runner scores its rollouts)")
  ),
  timeout: positive("timeout", "seconds", "with --agent-command: the loop's --timeout")
})

const runner = Command.make("runner", runnerTable.config, (flags) =>
  Effect.gen(function* () {
    if (Option.isNone(flags.agentCommand) && (Option.isSome(flags.reward) || Option.isSome(flags.timeout))) {
      return yield* usage("--reward and --timeout go with --agent-command (the agent they belong to)")
    }
    yield* remote(TrainingClient.URL_ENV)
    const implementation = yield* Effect.promise(() => import("./runner.js"))
    return yield* implementation.runner(
      {
        cluster: flags.cluster,
        agents: Option.getOrUndefined(flags.agents),
        host: flags.host,
        port: flags.port,
        listenHost: Option.getOrUndefined(flags.listenHost),
        capacity: Option.getOrUndefined(flags.capacity),
        agentCommand: Option.getOrUndefined(flags.agentCommand),
        reward: Option.getOrUndefined(flags.reward),
        timeout: Option.getOrUndefined(flags.timeout)
      },
      loadExamples
    )
  })
).pipe(Command.withDescription(runnerTable.help.description))

/** The flags of a run's shape that train-agent and train-mcp share, in their words for what a step runs. */
const runShape = (words: {
  readonly groupsPerStep: string
  readonly item: string
  readonly baseModel: string
  readonly concurrency: string
}) => ({
  steps: positive("steps", "n", "training steps (default 5)"),
  epochs: positive("epochs", "n", "passes over the scenarios file, instead of --steps"),
  groupsPerStep: positive("groups-per-step", "n", words.groupsPerStep),
  groupSize: positive("group-size", "n", `rollouts per ${words.item} and step (default 8)`),
  baseModel: text("base-model", "name").pipe(Options.optional, describe(words.baseModel)),
  project: text("project", "name").pipe(
    Options.optional,
    describe("the project of the trained model (default agents)")
  ),
  model: text("model", "name").pipe(Options.optional, describe("the trained model's name")),
  dataDir: Options.directory("data-dir").pipe(
    Options.withPseudoName("dir"),
    Options.optional,
    describe("keep the embedded backend's data here (default: a temporary directory)")
  ),
  concurrency: positive("concurrency", "n", words.concurrency)
})

/** The time limit and failure tolerance of one run that train-agent and train-mcp share. */
const runLimits = (one: string, many: string) => ({
  timeout: positive("timeout", "seconds", `how long one ${one} may take (default: no limit)`),
  maxFailures: integer("max-failures", "n", "a whole number", { min: 0, max: 1_000_000_000 }).pipe(
    Options.optional,
    describe(`failed ${many} tolerated per step (default 0: the first failure stops the run)`)
  )
})

const trainAgentTable = table(
  "train-agent",
  "train an agent that runs as its own process (any language): its OpenAI requests are recorded through a rollout gateway",
  {
    command: Args.text({ name: "command" }).pipe(
      describe("the agent's command line (run with sh -c), quoted as one argument")
    ),
    scenarios: text("scenarios", "file").pipe(describe("a JSONL file: one scenario (JSON) per line")),
    ...runShape({
      groupsPerStep:
        "scenarios a step takes, drawn in a fixed shuffled order (default: the whole file, up to 16 lines); a step " +
        "runs the agent groups-per-step x group-size times",
      item: "scenario",
      baseModel:
        "the base model to train (default: EFFECT_RL_BASE_MODEL, else effect-rl/base-2k on the embedded backend, " +
        "whose 2,048-token context fits an agent's tools; its tokens are bytes, so a tool call needs max_tokens of at " +
        "least its shortest JSON, ~70 for a small tool)",
      concurrency: "agent processes running at once (default 16)"
    }),
    reward: Options.file("reward", { exists: "yes" }).pipe(
      Options.withPseudoName("module"),
      Options.optional,
      describe(
        "a module whose `reward` (or default) export scores {scenario, value, trajectory} (default: the agent's report)"
      )
    ),
    ...runLimits("run of the agent", "runs of the agent"),
    cluster: text("cluster", "url").pipe(
      Options.optional,
      describe(
        "run the agent on this cluster's runners (postgres://... or sqlite:<file>), each started with " +
          "`effect-rl runner --cluster <url> --agent-command <the same command>` (and the same --reward, --timeout)"
      )
    )
  }
)

const trainAgent = Command.make("train-agent", trainAgentTable.config, (flags) =>
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
        timeout: Option.getOrUndefined(flags.timeout),
        maxFailures: Option.getOrUndefined(flags.maxFailures),
        groupsPerStep: Option.getOrUndefined(flags.groupsPerStep),
        epochs: Option.getOrUndefined(flags.epochs),
        cluster: Option.getOrUndefined(flags.cluster)
      })
  )
).pipe(Command.withDescription(trainAgentTable.help.description))

const trainMcpTable = table(
  "train-mcp",
  "train an agent on an MCP server's tools (a command over stdio, or --url): tasks from --scenarios, or written first with --generate",
  {
    command: Args.text({ name: "server command" }).pipe(
      Args.optional,
      describe("the MCP server's command line (run with sh -c in a process group of its own), quoted as one argument")
    ),
    url: text("url", "url").pipe(
      Options.optional,
      describe("the server's Streamable HTTP endpoint, instead of a command")
    ),
    headers: text("header", "Name: value").pipe(
      Options.repeated,
      describe("a header sent to --url with every request (repeatable; never shown in errors)")
    ),
    scenarios: text("scenarios", "file").pipe(
      describe('a JSONL file of tasks, one a line: {"task": "...", "tools": [...]} (or a string)')
    ),
    generate: positive("generate", "n", "first write this many tasks from the server's tools into --scenarios"),
    writer: text("writer", "model").pipe(
      Options.optional,
      describe(
        "with --generate: the model that writes the tasks (a hosted instruction model; the embedded ones cannot)"
      )
    ),
    judge: text("judge", "model").pipe(
      Options.optional,
      describe(
        "without --reward: the judge model scoring each group together (default on the hosted service: the base model trained)"
      )
    ),
    perRollout: Options.boolean("per-rollout").pipe(
      describe("start a server for each rollout (for servers that keep state) rather than one for the run")
    ),
    maxTurns: positive("max-turns", "n", "model turns per rollout (default 6)"),
    maxTokens: positive("max-tokens", "n", "the most tokens of one turn (default 256)"),
    callTimeout: positive("call-timeout", "seconds", "how long one tool call may take (default 30)"),
    ...runShape({
      groupsPerStep: "tasks a step takes (default: the whole file, up to 16 lines)",
      item: "task",
      baseModel:
        "the base model to train (default: EFFECT_RL_BASE_MODEL, else effect-rl/base-2k on the embedded backend)",
      concurrency: "rollouts running at once (default 16)"
    }),
    reward: Options.file("reward", { exists: "yes" }).pipe(
      Options.withPseudoName("module"),
      Options.optional,
      describe(
        "a module whose `reward` (or default) export scores {scenario, value, trajectory}, value the tool loop's outcome (default: the judge)"
      )
    ),
    ...runLimits("rollout", "rollouts")
  }
)

const trainMcp = Command.make("train-mcp", trainMcpTable.config, (flags) =>
  Effect.flatMap(
    Effect.promise(() => import("./trainMcp.js")),
    (implementation) =>
      implementation.trainMcp({
        command: Option.getOrUndefined(flags.command),
        url: Option.getOrUndefined(flags.url),
        headers: flags.headers,
        scenarios: flags.scenarios,
        generate: Option.getOrUndefined(flags.generate),
        writer: Option.getOrUndefined(flags.writer),
        judge: Option.getOrUndefined(flags.judge),
        perRollout: flags.perRollout,
        maxTurns: Option.getOrUndefined(flags.maxTurns),
        maxTokens: Option.getOrUndefined(flags.maxTokens),
        callTimeout: Option.getOrUndefined(flags.callTimeout),
        steps: Option.getOrUndefined(flags.steps),
        epochs: Option.getOrUndefined(flags.epochs),
        groupsPerStep: Option.getOrUndefined(flags.groupsPerStep),
        groupSize: Option.getOrUndefined(flags.groupSize),
        baseModel: Option.getOrUndefined(flags.baseModel),
        project: Option.getOrUndefined(flags.project),
        model: Option.getOrUndefined(flags.model),
        dataDir: Option.getOrUndefined(flags.dataDir),
        concurrency: Option.getOrUndefined(flags.concurrency),
        reward: Option.getOrUndefined(flags.reward),
        timeout: Option.getOrUndefined(flags.timeout),
        maxFailures: Option.getOrUndefined(flags.maxFailures)
      })
  )
).pipe(Command.withDescription(trainMcpTable.help.description))

/** The commands' help pages, in the order `effect-rl --help` lists them. */
const pages = [
  healthTable.help,
  modelsTable.help,
  baseModelsTable.help,
  trainTable.help,
  trainAgentTable.help,
  trainMcpTable.help,
  serveTable.help,
  checkTable.help,
  backupTable.help,
  runnerTable.help
]

const invocation = read(process.argv.slice(2), pages)
const command = invocation.command === undefined ? "effect-rl" : `effect-rl ${invocation.command.name}`

/**
 * The command line, parsed and run by @effect/cli. It prints a refused invocation itself, bare and in colour; here
 * its `Console.error` is silenced so that `render` words it once, as the command's other failures (the commands'
 * own handlers get the real console back).
 */
const parsed = Console.consoleWith((console) => {
  const root = Command.make("effect-rl", {}, () =>
    Console.log(
      `effect-rl ${version}: ${pages.map((page) => page.name).join(", ")}\nrun \`effect-rl <command> --help\` for one, \`effect-rl --help\` for all`
    )
  ).pipe(
    Command.withSubcommands([health, models, baseModels, train, trainAgent, trainMcp, serve, check, backup, runner]),
    Command.transformHandler((handler) => Effect.withConsole(handler, console))
  )
  const quiet: Console.Console = { ...console, error: () => Effect.void }
  return Command.run(root, { name: "effect-rl", version })([...process.argv.slice(0, 2), ...invocation.args]).pipe(
    Effect.withConsole(quiet)
  )
})

/** `--help`: the page of the command named (or the command's own), rendered for where stdout goes. */
const help = Effect.sync(() => {
  const terminal = terminalOf(process.stdout, process.env)
  console.log(
    invocation.command === undefined ? rootPage(version, pages, terminal) : commandPage(invocation.command, terminal)
  )
})

const program: Effect.Effect<void, unknown, CliApp.CliApp.Environment> =
  invocation.refusal !== undefined && !(invocation.help && invocation.command !== undefined)
    ? Effect.fail(usage(invocation.refusal))
    : invocation.help
      ? help
      : parsed

program.pipe(
  Effect.provide(NodeContext.layer),
  Effect.exit,
  Effect.flatMap((exit) => {
    if (Exit.isSuccess(exit)) return Effect.void
    const { exitCode, sentence } = render(command, exit.cause)
    return Effect.sync(() => {
      if (sentence !== undefined) console.error(sentence)
      if (invocation.verbose && exitCode !== 130) console.error(Cause.pretty(exit.cause))
      process.exitCode = exitCode
    })
  }),
  NodeRuntime.runMain({ disableErrorReporting: true })
)
