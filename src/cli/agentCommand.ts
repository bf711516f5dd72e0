/**
 * The agent of `effect-rl train-agent "<command>"` as a `RolloutAgent` (`ExternalAgent.rolloutAgent`): the
 * command, its reward (the agent's report, or a `--reward` module's function) and its time limit. The same
 * definition is registered by `effect-rl runner --agent-command "<command>"` (with the same `--reward` and
 * `--timeout`), so that `train-agent --cluster <url>` runs its rollouts there. Its name is a digest of the
 * command, of the reward module's contents and of the time limit: a runner started with another command, reward
 * or limit has no agent of that name, and answers so, rather than run other code for the loop.
 *
 * @since 0.1.0
 */
import { createHash } from "node:crypto"
import { readFile } from "node:fs/promises"
import { resolve } from "node:path"
import { pathToFileURL } from "node:url"
import * as Effect from "effect/Effect"
import * as ExternalAgent from "../workflow/ExternalAgent.js"
import type { Reward, Score } from "../workflow/Reward.js"
import { type CliFailure, failed, usage } from "./failure.js"

/** What defines the agent: its command line, its reward module (if any) and its time limit in seconds (if any). */
export interface AgentCommandFlags {
  readonly command: string
  readonly reward: string | undefined
  readonly timeout: number | undefined
}

/** The agent (see the module): scenarios are JSON values, its value the agent's `Outcome`. */
export type CommandAgent = ExternalAgent.ExternalRolloutAgent<unknown, ExternalAgent.ExternalAgentError | CliFailure>

const errorText = (error: unknown) => (error instanceof Error ? error.message : String(error))

type Scoring = (input: {
  readonly scenario: unknown
  readonly value: ExternalAgent.Outcome
  readonly trajectory: unknown
}) => unknown

/**
 * The reward a module exports (`reward`, else its default export): a function of `{scenario, value,
 * trajectory}` (`value.report` is the agent's report) giving a number or `{reward, metrics}`, directly, as a
 * Promise or as an Effect.
 */
export const loadReward = (path: string) =>
  Effect.gen(function* () {
    const module = yield* Effect.tryPromise({
      try: () => import(pathToFileURL(resolve(path)).href) as Promise<Record<string, unknown>>,
      catch: (error) => usage(`cannot load the reward module ${path}: ${errorText(error)}`)
    })
    const score = (module.reward ?? module.default) as Scoring | undefined
    if (typeof score !== "function") {
      return yield* usage(`the reward module ${path} exports no reward function (export \`reward\` or a default)`)
    }
    const reward: Reward<unknown, ExternalAgent.Outcome, CliFailure> = (input) =>
      Effect.suspend(() => {
        const result = score(input)
        return Effect.isEffect(result)
          ? (result as Effect.Effect<Score, CliFailure>)
          : Effect.tryPromise({
              try: () => Promise.resolve(result as Score | Promise<Score>),
              catch: (error) => failed(`the reward module ${path} failed: ${errorText(error)}`)
            })
      })
    return reward
  })

/**
 * The agent's name: `agent-` and 12 hex digits of a SHA-256 over the command, the reward module's bytes (not its
 * path, which may differ between machines) and the time limit.
 */
export const agentName = (flags: AgentCommandFlags) =>
  Effect.gen(function* () {
    const module =
      flags.reward === undefined
        ? ""
        : yield* Effect.tryPromise({
            try: () => readFile(flags.reward!),
            catch: (error) => usage(`cannot read the reward module ${flags.reward}: ${errorText(error)}`)
          }).pipe(Effect.map((bytes) => createHash("sha256").update(bytes).digest("hex")))
    const digest = createHash("sha256")
      .update(JSON.stringify([flags.command, module, flags.timeout ?? null]))
      .digest("hex")
    return `agent-${digest.slice(0, 12)}`
  })

/** The agent of `flags` (see the module). */
export const commandAgent = (flags: AgentCommandFlags): Effect.Effect<CommandAgent, CliFailure> =>
  Effect.gen(function* () {
    const reward: Reward<unknown, ExternalAgent.Outcome, ExternalAgent.ExternalAgentError | CliFailure> =
      flags.reward === undefined ? ExternalAgent.reportedReward : yield* loadReward(flags.reward)
    return ExternalAgent.rolloutAgent<unknown, unknown, ExternalAgent.ExternalAgentError | CliFailure>({
      name: yield* agentName(flags),
      agent: ExternalAgent.command<unknown>(flags.command),
      reward,
      ...(flags.timeout === undefined ? {} : { timeout: `${flags.timeout} seconds` })
    })
  })
