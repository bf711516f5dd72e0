/**
 * The error of joining a rollout cluster (`RolloutCluster`), in a module of its own so that code naming it
 * (a command, an example's runner) loads nothing of the cluster.
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"

/**
 * Why the cluster could not be joined: its URL, its storage, the runner's port, or an agent's `layer` (what its
 * rollouts need, such as an external agent's gateway) that the runner could not build.
 */
export type RolloutClusterErrorReason = "InvalidUrl" | "Storage" | "Listen" | "Agent"

/** The cluster could not be joined (tag `RolloutClusterError`); the message says what to fix. */
export class RolloutClusterError extends Data.TaggedError("RolloutClusterError")<{
  /** What failed. */
  readonly reason: RolloutClusterErrorReason
  /** What failed and what to do, in a sentence. */
  readonly description: string
  /** The underlying error, if any. */
  readonly cause?: unknown
}> {
  override get message(): string {
    return this.description
  }
}
