#!/usr/bin/env node
/**
 * The `effect-rl` command.
 *
 * - `effect-rl --version`, `effect-rl --help`
 * - `effect-rl health`: the training service's health and system check
 * - `effect-rl models [--project <team/project>]`: the inference service's model list
 * - `effect-rl base-models`: the trainable base models
 * - `effect-rl serve [--host <h>] [--port <n>] [--data-dir <dir>] [--api-key <key>] [--max-body-size <bytes>]`:
 *   the embedded local backend; the key also comes from `EFFECT_RL_API_KEY`, and with neither a key is
 *   generated, printed once and stored in the data directory (`api-key`, mode 0600) for the next start.
 *
 * Configuration comes from the environment: `WANDB_API_KEY`, `EFFECT_RL_TRAINING_URL`,
 * `EFFECT_RL_INFERENCE_URL`.
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
import { version } from "../internal/version.js"
import * as ApiKey from "../local/server/ApiKey.js"
import * as Server from "../local/server/Server.js"
import * as Store from "../local/store/Store.js"

const usage = `effect-rl ${version}

Usage:
  effect-rl health                        the training service's health and system check
  effect-rl models [--project <t/p>]      the inference service's model list
  effect-rl base-models                   the trainable base models
  effect-rl serve [--host 127.0.0.1] [--port 0] [--data-dir ~/.effect-rl] [--api-key <key>]
                  [--max-body-size <bytes>]
                                          the embedded local backend (key also from EFFECT_RL_API_KEY)
  effect-rl --version | --help

Environment: WANDB_API_KEY, EFFECT_RL_TRAINING_URL, EFFECT_RL_INFERENCE_URL, EFFECT_RL_API_KEY (serve).`

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
