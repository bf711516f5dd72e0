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
 * inference service): a runner provides them. What else it needs comes from the agent's `layer`, which each
 * runner builds once, when it starts, for all of the agent's rollouts it runs (an external agent's rollout
 * gateway: `ExternalAgent.rolloutAgent`); a loop that runs the agent in its own process provides it as it would
 * any service (`Effect.provide(agent.layer)`).
 *
 * This module is light (it loads nothing of `@effect/cluster`); see `RolloutCluster` for the runners.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type { InferenceClient } from "../client/InferenceClient.js"
import type { TraceClient } from "../client/TraceClient.js"
import type { TrainingClient } from "../client/TrainingClient.js"
import type { Reward } from "./Reward.js"
import type { Current } from "./Rollout.js"

/** What an agent's code may require: the running rollout and the backend's clients (a runner provides them). */
export type Requirements = Current | TrainingClient | InferenceClient | TraceClient

/** An agent by name (see the module); `R`: what its rollouts need beyond {@link Requirements}, from its `layer`. */
export interface Agent<S, A, R = never> {
  /** The name a runner knows it by (unique among a runner's agents). */
  readonly name: string
  /** The agent code of one rollout of a scenario. */
  readonly rollout: (scenario: S, index: number) => Effect.Effect<A, unknown, Requirements | R>
  /** What the rollouts need beyond {@link Requirements}: built once by each runner that registers the agent. */
  readonly layer?: Layer.Layer<R, unknown, Exclude<Requirements, Current>> | undefined
  /** The reward of one finished rollout. */
  readonly reward: Reward<S, A, unknown, Exclude<Requirements, Current>>
  /** How a scenario crosses the wire. */
  readonly scenario: Schema.Schema<S, unknown>
  /** How a value the agent returns crosses the wire. */
  readonly value: Schema.Schema<A, unknown>
}

/** Any agent (for lists of agents). */
/* biome-ignore lint/suspicious/noExplicitAny: a list of agents of different scenario and value types */
export type Any = Agent<any, any, any>

/** Options of {@link make}. */
export interface Options<S, A, SI, AI, E, ER, R = never> {
  /** The name a runner knows it by. */
  readonly name: string
  /** The agent code of one rollout of a scenario (`index`: the rollout's index in its group). */
  readonly rollout: (scenario: S, index: number) => Effect.Effect<A, E, Requirements | R>
  /**
   * What the rollouts need beyond {@link Requirements} (e.g. `RolloutGateway.layer()`): each runner builds it once
   * when it starts (a failure to build it is the runner's); default none.
   */
  readonly layer?: Layer.Layer<R, unknown, Exclude<Requirements, Current>> | undefined
  /** The reward of one finished rollout. */
  readonly reward: Reward<S, A, ER, Exclude<Requirements, Current>>
  /** How a scenario crosses the wire (default: as a JSON value). */
  readonly scenario?: Schema.Schema<S, SI> | undefined
  /** How the agent's value crosses the wire (default: as a JSON value). */
  readonly value?: Schema.Schema<A, AI> | undefined
}

/** An agent (see the module). */
export const make = <S, A, SI = S, AI = A, E = never, ER = never, R = never>(
  options: Options<S, A, SI, AI, E, ER, R>
): Agent<S, A, R> => {
  if (options.name === "" || /\s/.test(options.name)) {
    throw new RangeError(`an agent's name must be non-empty, without spaces, got '${options.name}'`)
  }
  return {
    name: options.name,
    rollout: options.rollout,
    ...(options.layer === undefined ? {} : { layer: options.layer }),
    reward: options.reward,
    scenario: (options.scenario ?? Schema.Unknown) as Schema.Schema<S, unknown>,
    value: (options.value ?? Schema.Unknown) as Schema.Schema<A, unknown>
  }
}
