/**
 * `effect-rl runner`: a runner of a rollout cluster (see `RolloutCluster`) until SIGINT or SIGTERM. It
 * registers the agents of a module (`--agents <file>`: its `agents` export, else every agent it exports), the
 * agent of `effect-rl train-agent "<command>"` (`--agent-command "<command>"`, with that command's `--reward`
 * and `--timeout`: see `agentCommand.ts`; its processes are spawned here, with this runner's own rollout
 * gateway), or by default the package's examples' agents, and calls the backend the environment names (`WANDB_API_KEY`,
 * `EFFECT_RL_TRAINING_URL`, ...: the same backend as the loop). Loaded by the command only when `runner`
 * runs, so that the other commands (and `--help`) load nothing of the cluster.
 *
 * @since 0.1.0
 */
import { resolve } from "node:path"
import { pathToFileURL } from "node:url"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Backend from "../Backend.js"
import type * as RolloutAgent from "../workflow/RolloutAgent.js"
import { failed } from "./failure.js"

/** The flags of `runner`, validated. */
export interface RunnerFlags {
  readonly cluster: string
  readonly agents: string | undefined
  readonly host: string
  readonly port: number
  readonly listenHost: string | undefined
  readonly capacity: number | undefined
  /** The command line of `train-agent`'s agent to register (see `agentCommand.ts`). */
  readonly agentCommand?: string | undefined
  /** With `agentCommand`: the loop's `--reward` module. */
  readonly reward?: string | undefined
  /** With `agentCommand`: the loop's `--timeout`, in seconds. */
  readonly timeout?: number | undefined
}

const isAgent = (value: unknown): value is RolloutAgent.Any =>
  typeof value === "object" &&
  value !== null &&
  typeof (value as { readonly name?: unknown }).name === "string" &&
  typeof (value as { readonly rollout?: unknown }).rollout === "function" &&
  typeof (value as { readonly reward?: unknown }).reward === "function" &&
  "scenario" in value &&
  "value" in value

/** The agents a module exports: its `agents` (an array), else every export that is an agent. */
const agentsOf = (module: Readonly<Record<string, unknown>>): ReadonlyArray<RolloutAgent.Any> => {
  const listed = module.agents
  if (Array.isArray(listed)) return listed.filter(isAgent)
  return Object.values(module).filter(isAgent)
}

/** Runs a runner with `flags` until interrupted; `examples` gives the package's examples (the default agents). */
export const runner = (
  flags: RunnerFlags,
  examples: Effect.Effect<Readonly<Record<string, { readonly agents?: ReadonlyArray<RolloutAgent.Any> | undefined }>>>
) =>
  Effect.gen(function* () {
    const command =
      flags.agentCommand === undefined
        ? []
        : [
            yield* Effect.flatMap(
              Effect.promise(() => import("./agentCommand.js")),
              (module) =>
                module.commandAgent({ command: flags.agentCommand!, reward: flags.reward, timeout: flags.timeout })
            )
          ]
    const modules =
      flags.agents === undefined
        ? command.length > 0
          ? []
          : Object.values(yield* examples).flatMap((example) => example.agents ?? [])
        : agentsOf(
            yield* Effect.tryPromise({
              try: () => import(pathToFileURL(resolve(flags.agents!)).href) as Promise<Record<string, unknown>>,
              catch: (cause) =>
                failed(
                  `cannot load the agents module ${flags.agents}: ${cause instanceof Error ? cause.message : String(cause)}`
                )
            })
          )
    const agents: ReadonlyArray<RolloutAgent.Any> = [...modules, ...command]
    if (agents.length === 0) {
      return yield* Effect.fail(
        failed(
          `no agents in ${flags.agents ?? "the package's examples"}: export \`agents\`, an array of RolloutAgent.make(...) values, from the module`
        )
      )
    }
    const RolloutCluster = yield* Effect.promise(() => import("../workflow/RolloutCluster.js"))
    const ready = Layer.effectDiscard(
      Console.log(
        `effect-rl runner on ${flags.host}:${flags.port}, agents: ${agents.map((agent) => agent.name).join(", ")}`
      )
    )
    // The line is printed once the runner has joined the cluster.
    return yield* Layer.launch(
      ready.pipe(
        Layer.provide(
          RolloutCluster.runner({
            cluster: flags.cluster,
            agents,
            host: flags.host,
            port: flags.port,
            listenHost: flags.listenHost,
            capacity: flags.capacity
          })
        ),
        Layer.provide(Backend.hosted())
      )
    ).pipe(Effect.catchTag("RolloutClusterError", (error) => Effect.fail(failed(error.message))))
  })
