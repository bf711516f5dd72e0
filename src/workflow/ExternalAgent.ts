/**
 * Agents outside the process, trained unchanged: rollouts that run an agent given its rollout's endpoint on
 * the `RolloutGateway` (an OpenAI base URL and key) and the scenario.
 *
 * - {@link fromFunction}: a function `(endpoint, scenario, signal) => Promise<report>` (an AI SDK, LangChain
 *   or Agents SDK app in this process, pointed at the endpoint);
 * - {@link http}: an agent service: `POST {scenario, endpoint: {base_url, api_key}}` to its URL, its JSON
 *   answer the report;
 * - {@link command}: a command run as a child process with the caller's environment plus `OPENAI_BASE_URL` and
 *   `OPENAI_API_KEY` set to the endpoint (so the `openai` SDKs of Python and JavaScript, the AI SDK's default
 *   provider, LangChain and the Agents SDK find it unchanged), the scenario as JSON on its stdin and in
 *   `EFFECT_RL_SCENARIO`; the last line of its stdout, `{"reward": <number>, "metrics": {...}}`, its report.
 *
 * {@link rollout} makes one an agent of `Gather` or `TrainingLoop`: each rollout gets its own endpoint, every
 * turn the agent samples through it is recorded, the report's `metrics` go in the trajectory's metrics, and
 * the value is the {@link Outcome}. The reward comes from the report ({@link reportedReward}) or from any
 * `Reward` over the recorded trajectory. A time limit ({@link RolloutOptions.timeout}), an agent's failure (a
 * command's exit code and the tail of its stderr, a service's status, a function's rejection), an agent that
 * never used its endpoint: each is an {@link ExternalAgentError}, the rollout's failure. An interrupted
 * rollout kills its command's whole process group (SIGTERM, then SIGKILL) and waits for it to be gone; a
 * process killed outright takes its agents' groups with it (a guard process kills them).
 *
 * {@link rolloutAgent} makes one a `RolloutAgent` by name, so that a cluster's runners run it (`RolloutCluster`,
 * `effect-rl runner`, `effect-rl train-agent --cluster`): each runner has its own rollout gateway and spawns the
 * agent processes of the rollouts it runs.
 *
 * ```ts
 * const agent = ExternalAgent.command<Scenario>("python3 agent.py", { timeout: "2 minutes" })
 * yield* TrainingLoop.run({
 *   policy, scenarios, groupsPerStep: 4, rolloutsPerGroup: 8, steps: 10,
 *   rollout: ExternalAgent.rollout(agent),
 *   reward: ExternalAgent.reportedReward
 * }).pipe(Effect.provide(RolloutGateway.layer()))
 * ```
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as Layer from "effect/Layer"
import * as ParseResult from "effect/ParseResult"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as internal from "./internal/externalAgent.js"
import { redact } from "./internal/secretTail.js"
import type { Reward } from "./Reward.js"
import * as Rollout from "./Rollout.js"
import * as RolloutAgent from "./RolloutAgent.js"
import * as RolloutGateway from "./RolloutGateway.js"

/** What an agent reports at its end: its reward, and metrics to record (other fields are ignored). */
export const Report = Schema.Struct({
  reward: Schema.optional(Schema.Number.pipe(Schema.finite())),
  metrics: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Union(Schema.Number, Schema.Boolean) }))
})

/** What an agent reports (see {@link Report}). */
export type Report = typeof Report.Type

/** An endpoint as an agent is given it: the base URL and the key in plain text. */
export interface AgentEndpoint {
  /** `OPENAI_BASE_URL`: the rollout's OpenAI base URL (ends with `/v1`). */
  readonly baseUrl: string
  /** `OPENAI_API_KEY`: the rollout's key. */
  readonly apiKey: string
}

/** Why an agent's rollout failed. */
export type ExternalAgentErrorReason =
  /** The command could not be started. */
  | "Spawn"
  /** The command exited with a non-zero code or was killed by a signal. */
  | "Exit"
  /** The agent service answered with an error status, or could not be reached. */
  | "Http"
  /** The agent function rejected. */
  | "Failed"
  /** What the agent reported is not a report (or has no reward where one was needed). */
  | "Report"
  /** The agent did not finish within the time limit. */
  | "Timeout"
  /** The agent finished without one chat completion through its endpoint. */
  | "NoCompletion"

/** An external agent's rollout failed (tag `ExternalAgentError`); the message says what and how. */
export class ExternalAgentError extends Data.TaggedError("ExternalAgentError")<{
  /** What failed. */
  readonly reason: ExternalAgentErrorReason
  /** The agent (its name: the command's program, the service's URL, the function's name). */
  readonly agent: string
  /** What failed, in a sentence. */
  readonly description: string
  /** A command's exit code, when it exited. */
  readonly exitCode?: number | null | undefined
  /** The signal that ended a command, if one did. */
  readonly signal?: string | null | undefined
  /** The tail of a command's stderr (the rollout's key, if it shows, is replaced by `<redacted>`). */
  readonly stderr?: string | undefined
  /** The underlying error, if any. */
  readonly cause?: unknown
}> {
  override get message(): string {
    return this.description
  }
}

/** An agent that runs given a rollout's endpoint and a scenario, and reports (or not) at its end. */
export interface Agent<S> {
  /** A short name for errors and traces. */
  readonly name: string
  /** Runs the agent against the endpoint on the scenario. */
  readonly run: (
    endpoint: RolloutGateway.Endpoint,
    scenario: S
  ) => Effect.Effect<Report | undefined, ExternalAgentError>
}

/** What a rollout of an external agent returns: the agent's report, if it made one. */
export interface Outcome {
  /** The report (reward and metrics), or `undefined` when the agent reported nothing. */
  readonly report: Report | undefined
}

const decodeReport = Schema.decodeUnknownEither(Report)

const errorText = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/** A value as a report: `undefined` and `null` are none; anything else must be a {@link Report}. */
const reportOf = (
  agent: string,
  value: unknown,
  where: string
): Effect.Effect<Report | undefined, ExternalAgentError> => {
  if (value === undefined || value === null) return Effect.succeed(undefined)
  return Either.match(decodeReport(value), {
    onRight: (report) => Effect.succeed(report),
    onLeft: (error) =>
      Effect.fail(
        new ExternalAgentError({
          reason: "Report",
          agent,
          description: `the agent ${agent} reported ${where} something that is not {"reward": <number>, "metrics": {...}}: ${ParseResult.TreeFormatter.formatErrorSync(error)}`
        })
      )
  })
}

const plain = (endpoint: RolloutGateway.Endpoint): AgentEndpoint => ({
  baseUrl: endpoint.baseUrl,
  apiKey: Redacted.value(endpoint.apiKey)
})

/** The environment variables that point an OpenAI SDK at the endpoint. */
export const environment = (endpoint: RolloutGateway.Endpoint): Readonly<Record<string, string>> => ({
  OPENAI_BASE_URL: endpoint.baseUrl,
  OPENAI_API_KEY: Redacted.value(endpoint.apiKey)
})

/**
 * An agent as a function: given the endpoint (plain base URL and key), the scenario and an abort signal
 * (fired when the rollout is interrupted or runs out of time), it resolves to its report (`{reward,
 * metrics}`) or to nothing; a rejection is the rollout's failure.
 */
export const fromFunction = <S>(
  f: (endpoint: AgentEndpoint, scenario: S, signal: AbortSignal) => Promise<unknown>,
  options: { readonly name?: string | undefined } = {}
): Agent<S> => {
  const name = options.name ?? (f.name === "" ? "function" : f.name)
  return {
    name,
    run: (endpoint, scenario) =>
      Effect.tryPromise({
        try: (signal) => f(plain(endpoint), scenario, signal),
        catch: (cause) =>
          new ExternalAgentError({
            reason: "Failed",
            agent: name,
            description: `the agent ${name} failed: ${redact(errorText(cause), Redacted.value(endpoint.apiKey))}`,
            cause
          })
      }).pipe(Effect.flatMap((value) => reportOf(name, value, "as its result")))
  }
}

/**
 * An agent service at `url`: each rollout is a `POST` of `{"scenario": ..., "endpoint": {"base_url",
 * "api_key"}}` (JSON, with `headers`), answered once the agent is done with its report as JSON (or an empty
 * body). A status other than 2xx, or no answer, is the rollout's failure; an interrupted rollout aborts the
 * request.
 */
export const http = <S>(
  url: string,
  options: { readonly headers?: Readonly<Record<string, string>> | undefined } = {}
): Agent<S> => {
  const name = new URL(url).origin + new URL(url).pathname
  const failure = (description: string, cause?: unknown) =>
    new ExternalAgentError({
      reason: "Http",
      agent: name,
      description: `the agent service ${name} ${description}`,
      cause
    })
  return {
    name,
    run: (endpoint, scenario) =>
      Effect.gen(function* () {
        // What the service answers is shown in part: the key redacted first, so that no cut leaves a piece of it.
        const shown = (text: string, length: number) => redact(text, Redacted.value(endpoint.apiKey)).slice(0, length)
        const response = yield* Effect.tryPromise({
          try: (signal) =>
            fetch(url, {
              method: "POST",
              headers: { "content-type": "application/json", ...options.headers },
              body: JSON.stringify({
                scenario,
                endpoint: { base_url: endpoint.baseUrl, api_key: Redacted.value(endpoint.apiKey) }
              }),
              signal
            }),
          catch: (cause) => failure(`could not be reached: ${errorText(cause)}`, cause)
        })
        const text = yield* Effect.tryPromise({
          try: () => response.text(),
          catch: (cause) => failure(`broke off its answer: ${errorText(cause)}`, cause)
        })
        if (!response.ok) return yield* failure(`answered ${response.status}: ${shown(text, 500)}`)
        if (text.trim() === "") return undefined
        const parsed = yield* Effect.try({
          try: () => JSON.parse(text) as unknown,
          catch: (cause) => failure(`answered with a body that is not JSON: ${shown(text, 200)}`, cause)
        })
        return yield* reportOf(name, parsed, "in its answer")
      })
  }
}

/** Options of {@link command}. */
export interface CommandOptions {
  /** The working directory (default: this process's). */
  readonly cwd?: string | undefined
  /** Variables added to the caller's environment (the endpoint's and the scenario's are set over them). */
  readonly env?: Readonly<Record<string, string>> | undefined
  /** How much of the end of its stderr is kept for the error, in characters (default 2000). */
  readonly stderrTail?: number | undefined
  /** How long an interrupted command has between SIGTERM and SIGKILL (default 2 seconds). */
  readonly killGrace?: Duration.DurationInput | undefined
  /** Called with the process id once it runs. */
  readonly onSpawn?: ((pid: number) => void) | undefined
}

/**
 * An agent as a command (a shell command line, or a program and its arguments), run once per rollout in a
 * process group of its own (see the module): the caller's environment with `OPENAI_BASE_URL`,
 * `OPENAI_API_KEY` and `EFFECT_RL_SCENARIO` (the scenario as JSON) set; the scenario's JSON and a newline on
 * its stdin. Its report is the last non-empty line of its stdout when that line is a JSON object
 * (`{"reward": 1, "metrics": {"turns": 3}}`); any other last line is no report. A non-zero exit is the
 * rollout's failure, with the exit code and the tail of its stderr.
 */
export const command = <S>(command: string | ReadonlyArray<string>, options: CommandOptions = {}): Agent<S> => {
  const name = typeof command === "string" ? (command.trim().split(/\s+/)[0] ?? command) : (command[0] ?? "")
  return {
    name,
    run: (endpoint, scenario) => {
      const key = Redacted.value(endpoint.apiKey)
      const scenarioJson = JSON.stringify(scenario) ?? "null"
      return internal
        .run({
          command,
          env: { ...process.env, ...options.env, ...environment(endpoint), EFFECT_RL_SCENARIO: scenarioJson },
          cwd: options.cwd,
          stdin: `${scenarioJson}\n`,
          stderrTail: options.stderrTail ?? 2000,
          secret: key,
          killGrace: options.killGrace ?? Duration.seconds(2),
          onSpawn: options.onSpawn
        })
        .pipe(
          Effect.mapError(
            (cause) =>
              new ExternalAgentError({
                reason: "Spawn",
                agent: name,
                description: `the agent command ${name} could not be started: ${cause.message}`,
                cause
              })
          ),
          Effect.flatMap((ended) => {
            const stderr = ended.stderr.trimEnd()
            if (ended.code !== 0) {
              const how = ended.signal === null ? `exited with code ${ended.code}` : `was killed by ${ended.signal}`
              return Effect.fail(
                new ExternalAgentError({
                  reason: "Exit",
                  agent: name,
                  description: `the agent command ${name} ${how}${stderr === "" ? " (its stderr was empty)" : `; the end of its stderr:\n${stderr}`}`,
                  exitCode: ended.code,
                  signal: ended.signal,
                  stderr
                })
              )
            }
            const line = ended.lastLine
            if (line === undefined || !line.startsWith("{")) return Effect.succeed(undefined)
            return Effect.try({
              try: () => JSON.parse(line) as unknown,
              catch: (cause) =>
                new ExternalAgentError({
                  reason: "Report",
                  agent: name,
                  description: `the agent command ${name}'s last line of output is not JSON: ${line.slice(0, 200)}`,
                  cause
                })
            }).pipe(Effect.flatMap((value) => reportOf(name, value, "on its last line")))
          })
        )
    }
  }
}

/** Options of {@link rollout}: the endpoint's, and a time limit. */
export interface RolloutOptions extends RolloutGateway.EndpointOptions {
  /** The longest the agent may take; then it is stopped and the rollout fails with reason `Timeout`. */
  readonly timeout?: Duration.DurationInput | undefined
}

/**
 * The rollout of an external agent (for `Gather` and `TrainingLoop`): an endpoint on the `RolloutGateway` for
 * this rollout, the agent run against it on the scenario, its report's metrics recorded in the trajectory.
 * It fails when the agent fails, runs out of time, or made no chat completion through its endpoint (nothing
 * would be trained: usually an agent that does not read `OPENAI_BASE_URL`).
 */
export const rollout =
  <S>(agent: Agent<S>, options: RolloutOptions = {}) =>
  (scenario: S): Effect.Effect<Outcome, ExternalAgentError, RolloutGateway.RolloutGateway | Rollout.Current> => {
    const { timeout, ...endpointOptions } = options
    const run = RolloutGateway.withEndpoint((endpoint) => agent.run(endpoint, scenario), endpointOptions)
    const limited =
      timeout === undefined
        ? run
        : Effect.timeoutFail(run, {
            duration: timeout,
            onTimeout: () =>
              new ExternalAgentError({
                reason: "Timeout",
                agent: agent.name,
                description: `the agent ${agent.name} did not finish within ${Duration.format(Duration.decode(timeout))}`
              })
          })
    return Effect.gen(function* () {
      const report = yield* limited
      const { recorder } = yield* Rollout.Current
      if (recorder.completions === 0) {
        return yield* new ExternalAgentError({
          reason: "NoCompletion",
          agent: agent.name,
          description: `the agent ${agent.name} finished without a chat completion through its endpoint: check that it sends its requests to OPENAI_BASE_URL with OPENAI_API_KEY`
        })
      }
      for (const [name, value] of Object.entries(report?.metrics ?? {})) yield* Rollout.metric(name, value)
      return { report }
    }).pipe(Effect.withSpan("ExternalAgent.rollout", { attributes: { agent: agent.name } }))
  }

/**
 * The reward the agent reported (`report.reward`); a rollout whose agent reported none fails with reason
 * `Report` (use a reward function over the trajectory for such agents).
 */
export const reportedReward: Reward<unknown, Outcome, ExternalAgentError> = ({ value }) =>
  value.report?.reward === undefined
    ? Effect.fail(
        new ExternalAgentError({
          reason: "Report",
          agent: "agent",
          description:
            'the agent reported no reward: print {"reward": <number>} as its last line of output (or score the trajectory with a reward function)'
        })
      )
    : Effect.succeed(value.report.reward)

/**
 * How an {@link Outcome} crosses the wire between a cluster's runner and its loop: the report, or none (encoded
 * without the key).
 */
export const OutcomeSchema: Schema.Schema<Outcome, { readonly report?: Report | undefined }> = Schema.Struct({
  report: Schema.optionalWith(Schema.UndefinedOr(Report), { default: () => undefined })
})

/** Options of {@link rolloutAgent}. */
export interface RolloutAgentOptions<S, SI, ER> extends RolloutOptions {
  /** The name a runner knows it by (the same on the loop and every runner; no spaces). */
  readonly name: string
  /** The agent (a command, a service or a function). */
  readonly agent: Agent<S>
  /** The reward of a finished rollout (default {@link reportedReward}: the agent's report). */
  readonly reward?: Reward<S, Outcome, ER, Exclude<RolloutAgent.Requirements, Rollout.Current>> | undefined
  /** How a scenario crosses the wire (default: as a JSON value). */
  readonly scenario?: Schema.Schema<S, SI> | undefined
  /** The rollout gateway each runner (or the loop, in its own process) starts: loopback on a free port by default. */
  readonly gateway?: RolloutGateway.Options | undefined
}

/** An external agent as a `RolloutAgent` ({@link rolloutAgent}), its parts typed as they are. */
export interface ExternalRolloutAgent<S, ER> extends RolloutAgent.Agent<S, Outcome, RolloutGateway.RolloutGateway> {
  /** One rollout: {@link rollout} of the agent. */
  readonly rollout: (
    scenario: S,
    index: number
  ) => Effect.Effect<Outcome, ExternalAgentError, RolloutGateway.RolloutGateway | Rollout.Current>
  /** The reward of one finished rollout. */
  readonly reward: Reward<S, Outcome, ER, Exclude<RolloutAgent.Requirements, Rollout.Current>>
  /** The rollout gateway its rollouts reach the agent through, one per process that runs them. */
  readonly layer: Layer.Layer<RolloutGateway.RolloutGateway, RolloutGateway.RolloutGatewayError>
}

/**
 * An external agent as a `RolloutAgent`: its `rollout` is {@link rollout} of `agent` (a rollout gateway in its
 * requirements), its `layer` the gateway (`RolloutGateway.layer(options.gateway)`), its value an
 * {@link Outcome}. On a cluster each runner builds the gateway once and spawns the agent processes of the
 * rollouts it runs, so the agents' CPU is the runners'; the loop passes `agent.rollout` and `agent.reward` to
 * `TrainingLoop.run` as for any agent, and provides `agent.layer` (a gateway it uses only when it runs rollouts
 * itself, without a cluster).
 *
 * ```ts
 * // agents.ts, imported by the loop and by `effect-rl runner --agents agents.ts`
 * export const coder = ExternalAgent.rolloutAgent({
 *   name: "coder",
 *   agent: ExternalAgent.command("python3 coder.py"),
 *   timeout: "10 minutes"
 * })
 * export const agents = [coder]
 * ```
 */
export const rolloutAgent = <S, SI = S, ER = ExternalAgentError>(
  options: RolloutAgentOptions<S, SI, ER>
): ExternalRolloutAgent<S, ER> => {
  const { name, agent, reward, scenario, gateway, ...rolloutOptions } = options
  const run = rollout(agent, rolloutOptions)
  const parts = {
    rollout: (value: S, _index: number) => run(value),
    reward: reward ?? (reportedReward as Reward<S, Outcome, ER>),
    layer: RolloutGateway.layer(gateway)
  }
  return {
    ...RolloutAgent.make({
      name,
      ...parts,
      scenario: scenario ?? (Schema.Unknown as unknown as Schema.Schema<S, SI>),
      value: OutcomeSchema
    }),
    ...parts
  }
}
