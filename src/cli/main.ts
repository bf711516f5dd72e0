#!/usr/bin/env node
/**
 * The `effect-rl` command.
 *
 * - `effect-rl --version`, `effect-rl --help`
 * - `effect-rl health`: the training service's health and system check
 * - `effect-rl models [--project <team/project>]`: the inference service's model list
 * - `effect-rl base-models`: the trainable base models
 *
 * Configuration comes from the environment: `WANDB_API_KEY`, `EFFECT_RL_TRAINING_URL`,
 * `EFFECT_RL_INFERENCE_URL`.
 *
 * @since 0.1.0
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as InferenceClient from "../client/InferenceClient.js"
import * as TrainingClient from "../client/TrainingClient.js"
import { version } from "../internal/version.js"

const usage = `effect-rl ${version}

Usage:
  effect-rl health                        the training service's health and system check
  effect-rl models [--project <t/p>]      the inference service's model list
  effect-rl base-models                   the trainable base models
  effect-rl --version | --help

Environment: WANDB_API_KEY, EFFECT_RL_TRAINING_URL, EFFECT_RL_INFERENCE_URL.`

const json = (value: unknown) => Console.log(JSON.stringify(value, null, 2))

const flag = (args: ReadonlyArray<string>, name: string): string | undefined => {
  const i = args.indexOf(name)
  return i === -1 ? undefined : args[i + 1]
}

const Clients = Layer.mergeAll(TrainingClient.layerConfig(), InferenceClient.layerConfig()).pipe(
  Layer.provide(NodeHttpClient.layerUndici)
)

const main = (args: ReadonlyArray<string>) => {
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
