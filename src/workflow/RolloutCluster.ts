/**
 * Rollouts across machines, on `@effect/cluster`: when one process cannot run a step's environments, the
 * loop sends each rollout to a **runner** (a process, on this machine or another, that registers the same
 * agents by name) and gathers the finished trajectories as it would its own.
 *
 * - The **driver** (the process running `TrainingLoop.run` or `Gather`) provides {@link layer}: its gathers
 *   then send each rollout (scenario, index, the gather's key, the policy's model and step) to the cluster
 *   instead of running it. Scorers, hooks, `maxExceptions`, progress and tracing stay in the driver, as before.
 *   The loop code does not change; only this layer is added.
 * - Each **runner** runs {@link runner} (or `effect-rl runner --cluster <url> --agents <module>`): it registers
 *   the agents, calls the backend with its own clients, runs each rollout and its reward, and replies with the
 *   scored trajectory. At most `capacity` rollouts run at once on a runner. An agent's `layer` is built once
 *   per runner: an external agent (`ExternalAgent.rolloutAgent`) gets a rollout gateway on each runner, and its
 *   agent processes are spawned there (and die with the runner, however it dies).
 * - The **storage** is SQL, named by a URL: `postgres://...` (`@effect/sql-pg`) for real clusters, reachable
 *   from every machine; `sqlite:<file>` for development on one machine (every process on that machine uses
 *   the same file).
 *
 * Faults: each rollout is a persisted message keyed by (gather key, group, index): a runner that dies
 * mid-rollout has its shards, and so its rollouts, taken over by the other runners, which run them again; a
 * driver restarted with the same gather key (`TrainingLoop` keys gathers by model and step) gets the replies
 * of the rollouts that had finished, and waits for those still running, instead of running them again; so
 * each rollout lands in its group exactly once. Interrupting the loop interrupts its rollouts on the runners.
 * Once a step is taken, `TrainingLoop` releases its gathers (`Gather.release`): their stored messages and
 * replies are deleted, so the storage does not grow with the run.
 *
 * ```ts
 * // agents.ts, imported by the loop and by every runner
 * export const agent = RolloutAgent.make({ name: "sums", rollout: solve, reward })
 * // the loop: the same code, one more layer
 * TrainingLoop.run({ ..., rollout: agent.rollout, reward: agent.reward })
 *   .pipe(Effect.provide(RolloutCluster.layer({ cluster: "postgres://...", agents: [agent] })))
 * // each runner
 * Layer.launch(RolloutCluster.runner({ cluster: "postgres://...", agents: [agent], port: 34431 }))
 * ```
 *
 * The policy is rebuilt on the runner: a trainable policy as its model at the step the rollout started on
 * (sampled on the training host), any other by name with `Policy.base`. Traced, the driver records each
 * rollout's call as before (scenario in; messages, value, reward out), but not its chat completions as child
 * calls: they are made on the runner.
 *
 * Needs `@effect/cluster`, `@effect/rpc`, `@effect/workflow` and, for Postgres, `@effect/sql-pg` (optional
 * peer dependencies); this module is a subpath export only (`effect-rl/RolloutCluster`), so the package's
 * root, and a loop that does not ask for a cluster, never load it.
 *
 * @since 0.1.0
 */
import type * as ShardingConfig from "@effect/cluster/ShardingConfig"
import type { SqlClient } from "@effect/sql/SqlClient"
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Random from "effect/Random"
import * as Redacted from "effect/Redacted"
import type { InferenceClient } from "../client/InferenceClient.js"
import type { TraceClient } from "../client/TraceClient.js"
import type { TrainingClient } from "../client/TrainingClient.js"
import { CurrentExecutor } from "./Gather.js"
import * as internal from "./internal/cluster.js"
import type * as RolloutAgent from "./RolloutAgent.js"
import { RolloutClusterError } from "./RolloutClusterError.js"

export {
  /** The cluster could not be joined (tag `RolloutClusterError`); the message says what to fix. */
  RolloutClusterError,
  /** Why the cluster could not be joined: its URL, its storage, or the runner's port. */
  type RolloutClusterErrorReason
} from "./RolloutClusterError.js"

/** The port a runner listens on by default (the cluster's own default). */
export const DEFAULT_PORT = 34431

/** Rollouts in flight on one runner by default. */
export const DEFAULT_CAPACITY = 16

/**
 * The sharding settings used unless overridden (the same on every process of a cluster): 60 shards, and
 * short lock and health intervals, so that the rollouts of a dead runner move to another within seconds.
 */
export const DEFAULT_SHARDING: Partial<ShardingConfig.ShardingConfig["Type"]> = {
  shardsPerGroup: 60,
  shardLockRefreshInterval: Duration.seconds(2),
  shardLockExpiration: Duration.seconds(8),
  refreshAssignmentsInterval: Duration.seconds(1),
  runnerHealthCheckInterval: Duration.seconds(2),
  entityMessagePollInterval: Duration.seconds(1),
  entityReplyPollInterval: Duration.millis(100),
  entityMaxIdleTime: Duration.seconds(30),
  entityTerminationTimeout: Duration.seconds(5)
}

/** Options every process of a cluster takes. */
export interface ClusterOptions {
  /** The storage's URL: `postgres://user:password@host:port/db` (or `postgresql://`), or `sqlite:<file>`. */
  readonly cluster: string
  /** The agents (the same list on the driver and the runners). */
  readonly agents: ReadonlyArray<RolloutAgent.Any>
  /** Sharding settings over {@link DEFAULT_SHARDING} (keep them the same on every process). */
  readonly sharding?: Partial<ShardingConfig.ShardingConfig["Type"]> | undefined
}

/** Options of {@link runner}. */
export interface RunnerOptions extends ClusterOptions {
  /** The host other processes reach this runner at (default `localhost`). */
  readonly host?: string | undefined
  /** The port (default {@link DEFAULT_PORT}). */
  readonly port?: number | undefined
  /** The address to listen on (default: `host`). */
  readonly listenHost?: string | undefined
  /** Rollouts in flight on this runner (default {@link DEFAULT_CAPACITY}). */
  readonly capacity?: number | undefined
}

/** The clients a runner's rollouts call the backend with (e.g. from `Backend.hosted()`). */
export type RunnerRequirements = TrainingClient | InferenceClient | TraceClient

const invalid = (url: string) =>
  new RolloutClusterError({
    reason: "InvalidUrl",
    description: `'${url.replace(/\/\/[^@/]*@/, "//***@")}' is no cluster URL: use postgres://user:password@host:port/db or sqlite:<file>`
  })

/**
 * A (fresh) cluster layer that failed to start, built again a few times after a short random pause: processes
 * joining a new cluster at once all create its tables, and Postgres may refuse all but one of them.
 */
const retryStart = <A, E, R>(layer: Layer.Layer<A, E, R>): Layer.Layer<A, E, R> => {
  const attempt = (left: number): Layer.Layer<A, E, R> =>
    Layer.catchAllCause(layer, (cause) =>
      left <= 1 || Cause.isInterruptedOnly(cause) || invalidUrl(cause)
        ? Layer.failCause(cause)
        : Layer.unwrapEffect(
            Effect.as(
              Effect.flatMap(Random.nextIntBetween(200, 1_000), (ms) => Effect.sleep(Duration.millis(ms))),
              attempt(left - 1)
            )
          )
    )
  return attempt(START_ATTEMPTS)
}

const invalidUrl = (cause: Cause.Cause<unknown>): boolean =>
  Option.exists(
    Cause.failureOption(cause),
    (error) => error instanceof RolloutClusterError && error.reason === "InvalidUrl"
  )

/** How many times a cluster layer is built before its failure to start is the layer's failure. */
const START_ATTEMPTS = 5

/** The SQL client of a cluster URL (its driver loaded only when used). */
export const storage = (url: string): Layer.Layer<SqlClient, RolloutClusterError> => {
  const storageError = (cause: unknown) =>
    new RolloutClusterError({
      reason: "Storage",
      description: `the cluster's storage could not be opened: ${cause instanceof Error ? cause.message : String(cause)}`,
      cause
    })
  if (/^postgres(ql)?:\/\//.test(url)) {
    return Layer.unwrapEffect(
      Effect.map(
        Effect.promise(() => import("@effect/sql-pg/PgClient")),
        (Pg) => Pg.layer({ url: Redacted.make(url) })
      )
    ).pipe(Layer.mapError(storageError))
  }
  const sqlite = /^(sqlite|file):(.+)$/.exec(url)
  if (sqlite !== null) {
    return Layer.unwrapEffect(
      Effect.map(
        Effect.promise(() => import("@effect/sql-sqlite-node/SqliteClient")),
        (Sqlite) => Sqlite.layer({ filename: sqlite[2]! })
      )
    ).pipe(Layer.mapError(storageError))
  }
  return Layer.fail(invalid(url))
}

/**
 * A driver's or runner's cluster layer on the storage of `cluster`, its other failures a
 * {@link RolloutClusterError} with `reason` and `describe(cause)`, built fresh (its own sharding, not shared
 * with another built in the same layer) and started again after a failure ({@link retryStart}).
 */
const joined = <A, E, R>(
  layer: Layer.Layer<A, E, R>,
  cluster: string,
  reason: RolloutClusterError["reason"],
  describe: (cause: E) => string
): Layer.Layer<A, RolloutClusterError, Exclude<R, SqlClient>> =>
  layer.pipe(
    Layer.provide(storage(cluster)),
    Layer.mapError((cause) =>
      cause instanceof RolloutClusterError
        ? cause
        : new RolloutClusterError({ reason, description: describe(cause), cause })
    ),
    Layer.fresh,
    retryStart
  )

/**
 * The driver's layer: gathers (and so `TrainingLoop.run`) send their rollouts to the cluster's runners. The
 * gather's `rollout` and `reward` must be an agent's of `agents` (it dies saying so otherwise).
 */
export const layer = (options: ClusterOptions): Layer.Layer<never, RolloutClusterError> =>
  Layer.unwrapEffect(
    Effect.map(
      Effect.promise(() => import("@effect/platform-node/NodeClusterSocket")),
      (Socket) =>
        Layer.effect(CurrentExecutor, internal.makeExecutor(options.agents)).pipe(
          Layer.provide(
            Socket.layer({
              clientOnly: true,
              storage: "sql",
              shardingConfig: { ...DEFAULT_SHARDING, ...options.sharding }
            })
          ),
          // Its own cluster client, not shared with a runner (or another driver) built in the same layer.
          (built) => joined(built, options.cluster, "Storage", (cause) => `the cluster could not be joined: ${cause}`)
        )
    )
  )

/**
 * A runner: joins the cluster at `host:port`, registers the agents and runs the rollouts sent to it, with the
 * backend's clients it is given. Launch it with `Layer.launch` (it runs until interrupted).
 */
export const runner = (options: RunnerOptions): Layer.Layer<never, RolloutClusterError, RunnerRequirements> => {
  const agents = internal.byName(options.agents)
  const capacity = options.capacity ?? DEFAULT_CAPACITY
  if (!(Number.isInteger(capacity) && capacity > 0))
    throw new RangeError(`capacity must be a positive integer, got ${capacity}`)
  return Layer.unwrapScoped(
    Effect.gen(function* () {
      const [Socket, RunnerAddress] = yield* Effect.promise(() =>
        Promise.all([import("@effect/platform-node/NodeClusterSocket"), import("@effect/cluster/RunnerAddress")])
      )
      const permits = yield* Effect.makeSemaphore(capacity)
      const host = options.host ?? "localhost"
      const port = options.port ?? DEFAULT_PORT
      // What the agents' rollouts need beyond the clients (an external agent's gateway), built once for the runner.
      const built = yield* internal.buildLayers(
        agents,
        (agent, cause) =>
          new RolloutClusterError({
            reason: "Agent",
            description: `the agent '${agent}' could not be set up on this runner: ${cause instanceof Error ? cause.message : String(cause)}`,
            cause
          })
      )
      const handle = internal.runOne(agents, permits.withPermits(1), built)
      const entities = internal.RolloutEntity.toLayer(
        internal.RolloutEntity.of({ Run: (request) => handle(request.payload) }),
        { maxIdleTime: Duration.seconds(30) }
      )
      return entities.pipe(
        Layer.provide(
          Socket.layer({
            storage: "sql",
            shardingConfig: {
              ...DEFAULT_SHARDING,
              ...options.sharding,
              runnerAddress: Option.some(RunnerAddress.RunnerAddress.make({ host, port })),
              ...(options.listenHost === undefined
                ? {}
                : {
                    runnerListenAddress: Option.some(
                      RunnerAddress.RunnerAddress.make({ host: options.listenHost, port })
                    )
                  })
            }
          })
        ),
        // Its own sharding, not shared with a driver (or another runner) built in the same layer.
        (built) =>
          joined(
            built,
            options.cluster,
            "Listen",
            (cause) => `the runner could not listen on ${options.listenHost ?? host}:${port}: ${cause}`
          )
      )
    })
  )
}
