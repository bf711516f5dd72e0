#!/usr/bin/env node
/**
 * The `effect-rl` command.
 *
 * - `effect-rl --version`, `effect-rl --help`
 * - `effect-rl health`: the training service's health and system check
 * - `effect-rl models [--project <team/project>]`: the inference service's model list
 * - `effect-rl base-models`: the trainable base models
 * - `effect-rl train [<example>] [--steps <n>] [--data-dir <dir>] [--base-model <name>] [--model <name>]
 *   [--trace <entity/project>]`: trains one of the package's examples (`examples/`; without a name, lists them)
 *   on the hosted service when `WANDB_API_KEY` is set, else on the embedded backend started in-process (data in
 *   a temporary directory unless `--data-dir`), traced into that project of the trace service with `--trace`,
 *   and prints its report
 * - `effect-rl serve [--host <h>] [--port <n>] [--data-dir <dir>] [--api-key <key>] [--max-body-size <bytes>]`:
 *   the embedded local backend; the key also comes from `EFFECT_RL_API_KEY`, and with neither a key is
 *   generated, printed once and stored in the data directory (`api-key`, mode 0600) for the next start.
 *
 * Configuration comes from the environment: `WANDB_API_KEY`, `EFFECT_RL_TRAINING_URL`,
 * `EFFECT_RL_INFERENCE_URL`, `EFFECT_RL_TRACE_URL`.
 *
 * @since 0.1.0
 */
import { homedir } from "node:os"
import { join, resolve } from "node:path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as InferenceClient from "../client/InferenceClient.js"
import * as TrainingClient from "../client/TrainingClient.js"
import * as Example from "../Example.js"
import { version } from "../internal/version.js"
import * as ApiKey from "../local/server/ApiKey.js"
import * as Server from "../local/server/Server.js"
import * as Store from "../local/store/Store.js"

const usage = `effect-rl ${version}

Usage:
  effect-rl health                        the training service's health and system check
  effect-rl models [--project <t/p>]      the inference service's model list
  effect-rl base-models                   the trainable base models
  effect-rl train [<example>] [--steps <n>] [--data-dir <dir>] [--base-model <name>] [--model <name>]
                  [--trace <entity/project>]
                                          train an example (hosted if WANDB_API_KEY is set, else local)
  effect-rl serve [--host 127.0.0.1] [--port 0] [--data-dir ~/.effect-rl] [--api-key <key>]
                  [--max-body-size <bytes>]
                                          the embedded local backend (key also from EFFECT_RL_API_KEY)
  effect-rl --version | --help

Environment: WANDB_API_KEY, EFFECT_RL_TRAINING_URL, EFFECT_RL_INFERENCE_URL, EFFECT_RL_TRACE_URL,
EFFECT_RL_BASE_MODEL (train), EFFECT_RL_API_KEY (serve).`

const json = (value: unknown) => Console.log(JSON.stringify(value, null, 2))

const flag = (args: ReadonlyArray<string>, name: string): string | undefined => {
  const i = args.indexOf(name)
  return i === -1 ? undefined : args[i + 1]
}

const Clients = Layer.mergeAll(TrainingClient.layerConfig(), InferenceClient.layerConfig()).pipe(
  Layer.provide(NodeHttpClient.layerUndici)
)

const integer = (args: ReadonlyArray<string>, name: string) =>
  Effect.suspend(() => {
    const raw = flag(args, name)
    if (raw === undefined) return Effect.succeed(undefined)
    const n = Number(raw)
    return Number.isInteger(n) && n >= 0 ? Effect.succeed(n) : Effect.fail(`${name} must be a non-negative integer`)
  })

/** `effect-rl serve`: runs the embedded backend until SIGINT/SIGTERM, printing its URL once it listens. */
const serve = (args: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const dataDir = resolve(flag(args, "--data-dir") ?? join(homedir(), ".effect-rl"))
    const port = yield* integer(args, "--port")
    const maxBodySize = yield* integer(args, "--max-body-size")
    const { apiKey, source } = yield* ApiKey.resolve({
      flag: flag(args, "--api-key"),
      env: process.env.EFFECT_RL_API_KEY,
      dataDir
    })
    const keyFile = join(dataDir, ApiKey.KEY_FILE)
    if (source === "generated") {
      yield* Console.log(`Generated API key (shown once, stored in ${keyFile}): ${Redacted.value(apiKey)}`)
    } else if (source === "file") {
      yield* Console.log(`Using the API key stored in ${keyFile}`)
    }
    const ready = Layer.effectDiscard(Effect.flatMap(Server.url, (url) => Console.log(`effect-rl serving on ${url}`)))
    return yield* Layer.launch(
      ready.pipe(
        Layer.provide(Server.layer({ apiKey, host: flag(args, "--host"), port, maxBodySize })),
        Layer.provide(Store.layer({ dataDir }))
      )
    )
  }).pipe(
    Effect.catchIf(
      (e): e is string => typeof e === "string",
      (message) =>
        Effect.zipRight(
          Console.error(`effect-rl serve: ${message}`),
          Effect.sync(() => {
            process.exitCode = 2
          })
        )
    ),
    Effect.provide(NodeContext.layer)
  )

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

/** `effect-rl train <example>`: loads the example module and runs it with its report. */
const train = (args: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const examples = yield* loadExamples
    const names = Object.keys(examples).sort()
    const name = args[0]
    if (name === undefined || name.startsWith("--")) {
      return yield* Console.log(`examples: ${names.join(", ")}\nrun one with: effect-rl train <example>`)
    }
    const example = examples[name]
    if (example === undefined) return yield* Effect.fail(`unknown example '${name}'; examples: ${names.join(", ")}`)
    const options = yield* Effect.try({
      try: () => Example.parseArgs(args.slice(1)),
      catch: (error) => (error instanceof Error ? error.message : String(error))
    })
    yield* Example.run(example, options)
  }).pipe(
    Effect.catchIf(
      (e): e is string => typeof e === "string",
      (message) =>
        Effect.zipRight(
          Console.error(`effect-rl train: ${message}`),
          Effect.sync(() => {
            process.exitCode = 2
          })
        )
    )
  )

const main = (args: ReadonlyArray<string>): Effect.Effect<void, unknown> => {
  const [command, ...rest] = args
  switch (command) {
    case "--version":
    case "-v":
      return Console.log(version)
    case undefined:
    case "--help":
    case "-h":
    case "help":
      return Console.log(usage)
    case "health":
      return Effect.gen(function* () {
        const client = yield* TrainingClient.TrainingClient
        yield* json({ health: yield* client.health, system_check: yield* client.systemCheck })
      }).pipe(Effect.provide(Clients))
    case "models":
      return Effect.gen(function* () {
        const client = yield* InferenceClient.InferenceClient
        yield* json(yield* client.listModels({ project: flag(rest, "--project") }))
      }).pipe(Effect.provide(Clients))
    case "base-models":
      return Effect.gen(function* () {
        const client = yield* TrainingClient.TrainingClient
        yield* json(yield* client.listBaseModels)
      }).pipe(Effect.provide(Clients))
    case "serve":
      return serve(rest)
    case "train":
      return train(rest)
    default:
      return Effect.zipRight(
        Console.error(`effect-rl: unknown command '${command}'\n\n${usage}`),
        Effect.sync(() => {
          process.exitCode = 2
        })
      )
  }
}

main(process.argv.slice(2)).pipe(NodeRuntime.runMain({ disableErrorReporting: false }))
