/**
 * An agent by name: its rollout code, its reward and how its scenarios and values cross the wire, so that a
 * process that is not the training loop (a runner of `RolloutCluster`) can run its rollouts.
 *
 * The loop and every runner import the same module defining the agent; the loop passes `agent.rollout` and
 * `agent.reward` to `TrainingLoop.run` (or `Gather`) as it would any agent code, and a runner registers
 * the agent, so a rollout sent by the loop is run by name on the runner with the same code.
 *
 * ```ts
 * export const arithmetic = RolloutAgent.make({
 *   name: "arithmetic",
 *   rollout: solve,                  // (problem, index) => Effect<string, E, Rollout.Current>
 *   reward,                          // Reward<Problem, string>
 *   scenario: Problem,               // a Schema (default: JSON values as they are)
 *   value: Schema.String
 * })
 * yield* TrainingLoop.run({ policy, scenarios, rollout: arithmetic.rollout, reward: arithmetic.reward, ... })
 * ```
 *
 * Scenarios and values must survive their schema's encoding (by default `Schema.Unknown`: JSON values, no
 * class instances, no `undefined` in arrays). The rollout may use the backend's clients (a judge through the
 * inference service): a runner provides them.
 *
 * This module is light (it loads nothing of `@effect/cluster`); see `RolloutCluster` for the runners.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { InferenceClient } from "../client/InferenceClient.js"
import type { TraceClient } from "../client/TraceClient.js"
import type { TrainingClient } from "../client/TrainingClient.js"
import type { Reward } from "./Reward.js"
import type { Current } from "./Rollout.js"

/** What an agent's code may require: the running rollout and the backend's clients (a runner provides them). */
export type Requirements = Current | TrainingClient | InferenceClient | TraceClient

/** An agent by name (see the module). */
export interface Agent<S, A> {
  /** The name a runner knows it by (unique among a runner's agents). */
  readonly name: string
  /** The agent code of one rollout of a scenario. */
  readonly rollout: (scenario: S, index: number) => Effect.Effect<A, unknown, Requirements>
  /** The reward of one finished rollout. */
  readonly reward: Reward<S, A, unknown, Exclude<Requirements, Current>>
  /** How a scenario crosses the wire. */
  readonly scenario: Schema.Schema<S, unknown>
  /** How a value the agent returns crosses the wire. */
  readonly value: Schema.Schema<A, unknown>
}

/** Any agent (for lists of agents). */
/* biome-ignore lint/suspicious/noExplicitAny: a list of agents of different scenario and value types */
export type Any = Agent<any, any>

/** Options of {@link make}. */
export interface Options<S, A, SI, AI, E, ER> {
  /** The name a runner knows it by. */
  readonly name: string
  /** The agent code of one rollout of a scenario (`index`: the rollout's index in its group). */
  readonly rollout: (scenario: S, index: number) => Effect.Effect<A, E, Requirements>
  /** The reward of one finished rollout. */
  readonly reward: Reward<S, A, ER, Exclude<Requirements, Current>>
  /** How a scenario crosses the wire (default: as a JSON value). */
  readonly scenario?: Schema.Schema<S, SI> | undefined
  /** How the agent's value crosses the wire (default: as a JSON value). */
  readonly value?: Schema.Schema<A, AI> | undefined
}

/** An agent (see the module). */
export const make = <S, A, SI = S, AI = A, E = never, ER = never>(
  options: Options<S, A, SI, AI, E, ER>
): Agent<S, A> => {
  if (options.name === "" || /\s/.test(options.name)) {
    throw new RangeError(`an agent's name must be non-empty, without spaces, got '${options.name}'`)
  }
  return {
    name: options.name,
    rollout: options.rollout,
    reward: options.reward,
    scenario: (options.scenario ?? Schema.Unknown) as Schema.Schema<S, unknown>,
    value: (options.value ?? Schema.Unknown) as Schema.Schema<A, unknown>
  }
}
