/**
 * The implementation of `RolloutCluster`: the rollout entity and its one persisted message, the handler a
 * runner registers, and the executor a driver gives `Gather`.
 *
 * One entity per rollout, addressed `<gather key>/<group>/<index>`; its message `Run` is persisted (saved in
 * the cluster's SQL storage before it is delivered) under the primary key of its attempt. So:
 * - a runner that dies mid-rollout leaves the message unprocessed: once the runner's shards move to another
 *   runner, that runner finds the message in storage and runs the rollout again;
 * - a driver that sends the same rollout again (after a restart) is told the message is a duplicate and gets
 *   its stored reply, or waits for the reply of the run in progress: nothing runs twice;
 * - a driver interrupted (the loop stopped) sends an interrupt for each rollout in flight, which the runner
 *   executes; a later driver that finds such an interrupted reply asks again under the next attempt.
 *
 * A rollout's failure (a typed error, a defect, a bad reward) is a successful reply `Failed` carrying the
 * exception, which the driver records as it would a local failure; only interruptions are not replies.
 *
 * @internal
 */
import * as ClusterSchema from "@effect/cluster/ClusterSchema"
import * as Entity from "@effect/cluster/Entity"
import * as EntityAddress from "@effect/cluster/EntityAddress"
import * as EntityId from "@effect/cluster/EntityId"
import * as MessageStorage from "@effect/cluster/MessageStorage"
import * as Sharding from "@effect/cluster/Sharding"
import * as Rpc from "@effect/rpc/Rpc"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import { Model } from "../../api/Model.js"
import { RolloutException } from "../../api/Trajectory.js"
import type { Binding, Executed, Executor, Job } from "../Gather.js"
import { RolloutFailed } from "../Gather.js"
import * as Policy from "../Policy.js"
import type { Scored, ScoreMetrics } from "../Reward.js"
import { normalize } from "../Reward.js"
import * as Rollout from "../Rollout.js"
import type * as RolloutAgent from "../RolloutAgent.js"
import { checkReward, exceptionOf } from "./gather.js"

/** The policy a rollout samples from, as a runner rebuilds it. */
const PolicyRef = Schema.Union(
  Schema.TaggedStruct("Trainable", { model: Model, step: Schema.Int }),
  Schema.TaggedStruct("Base", { name: Schema.String })
)
type PolicyRef = typeof PolicyRef.Type

/** A finished rollout, or the exception it failed with. */
const Outcome = Schema.Union(
  Schema.TaggedStruct("Done", {
    value: Schema.Unknown,
    trajectory: Schema.Unknown,
    reward: Schema.Number,
    metrics: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Union(Schema.Number, Schema.Boolean) }))
  }),
  Schema.TaggedStruct("Failed", { exception: RolloutException })
)
type Outcome = typeof Outcome.Type

/** The one message of a rollout: run it (this attempt) and reply with its outcome. */
export const Run = Rpc.make("Run", {
  payload: {
    agent: Schema.String,
    gather: Schema.String,
    group: Schema.Int,
    index: Schema.Int,
    attempt: Schema.Int,
    scenario: Schema.Unknown,
    metadata: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
    policy: PolicyRef
  },
  success: Outcome,
  primaryKey: (payload) => `attempt-${payload.attempt}`
}).annotate(ClusterSchema.Persisted, true)

/** The rollout entity (one per rollout of a gather). */
export const RolloutEntity = Entity.make("effect-rl/Rollout", [Run])

/** The entity id of rollout `index` of group `group` of the gather `gather`. */
export const entityId = (gather: string, group: number, index: number): string => `${gather}/${group}/${index}`

/** How many times a rollout whose run was interrupted (by an earlier driver) is asked for again. */
const MAX_ATTEMPTS = 8

/**
 * The storage busy or briefly unreachable, or the entity's mailbox full: sending again is safe (the message is
 * keyed), so it is retried a while before it counts as the rollout's failure.
 */
const isTransient = (error: { readonly _tag: string }): boolean =>
  error._tag === "PersistenceError" || error._tag === "MailboxFull"

const transient = Schedule.exponential("50 millis", 2).pipe(
  Schedule.either(Schedule.spaced("2 seconds")),
  Schedule.jittered,
  Schedule.intersect(Schedule.recurs(30))
)

const failed = (type: string, message: string): Outcome => ({
  _tag: "Failed",
  exception: { type, message, traceback: "" }
})

/**
 * What the agents' layers provide, by agent name, each distinct layer built once in the current scope (two
 * agents given the same layer value share what it built); an agent without a layer is not in the map.
 */
export const buildLayers = <E>(
  agents: ReadonlyMap<string, RolloutAgent.Any>,
  onError: (agent: string, cause: unknown) => E
): Effect.Effect<ReadonlyMap<string, Context.Context<never>>, E, Scope.Scope | RolloutAgentLayerInput> =>
  Effect.gen(function* () {
    const byLayer = new Map<unknown, Context.Context<never>>()
    const byAgent = new Map<string, Context.Context<never>>()
    for (const [name, agent] of agents) {
      if (agent.layer === undefined) continue
      let context = byLayer.get(agent.layer)
      if (context === undefined) {
        context = (yield* Layer.build(agent.layer as Layer.Layer<never, unknown, RolloutAgentLayerInput>).pipe(
          Effect.mapError((cause) => onError(name, cause))
        )) as Context.Context<never>
        byLayer.set(agent.layer, context)
      }
      byAgent.set(name, context)
    }
    return byAgent
  })

/** What an agent's layer may require: the backend's clients (a runner has them). */
type RolloutAgentLayerInput = Exclude<RolloutAgent.Requirements, Rollout.Current>

/** The agents by name; refuses two of one name. */
export const byName = (agents: ReadonlyArray<RolloutAgent.Any>): ReadonlyMap<string, RolloutAgent.Any> => {
  const map = new Map<string, RolloutAgent.Any>()
  for (const agent of agents) {
    if (map.has(agent.name)) throw new RangeError(`two agents are named '${agent.name}'`)
    map.set(agent.name, agent)
  }
  return map
}

/**
 * The handler of `Run` on a runner: the rollout with a policy rebuilt from its reference, then its reward,
 * holding one of the runner's `capacity` permits; an agent's rollout is given what its layer built (`built`, by
 * agent name). Everything but an interruption is a reply.
 */
export const runOne =
  (
    agents: ReadonlyMap<string, RolloutAgent.Any>,
    withPermit: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>,
    built: ReadonlyMap<string, Context.Context<never>> = new Map()
  ) =>
  (payload: typeof Run.payloadSchema.Type) =>
    Effect.gen(function* () {
      const agent = agents.get(payload.agent)
      if (agent === undefined) {
        return failed(
          "RolloutClusterError",
          `this runner has no agent named '${payload.agent}' (it has: ${[...agents.keys()].join(", ") || "none"}); ` +
            "start every runner with the agents the loop uses"
        )
      }
      const policy = yield* policyOf(payload.policy)
      const scenario = yield* Schema.decodeUnknown(agent.scenario)(payload.scenario)
      const metadata = payload.metadata as Rollout.RunOptions["metadata"]
      const services = built.get(agent.name) ?? Context.empty()
      const finished = yield* Rollout.run(
        policy,
        Effect.provide(
          agent.rollout(scenario, payload.index) as Effect.Effect<unknown, unknown, Rollout.Current>,
          services
        ),
        { metadata }
      )
      const score = yield* checkReward(
        normalize(yield* agent.reward({ scenario, trajectory: finished.trajectory, value: finished.value }))
      )
      const value = yield* Schema.encode(agent.value)(finished.value)
      return {
        _tag: "Done",
        value,
        trajectory: finished.trajectory,
        reward: score.reward,
        ...(score.metrics === undefined ? {} : { metrics: score.metrics })
      } satisfies Outcome
    }).pipe(
      withPermit,
      Effect.catchAllCause((cause) =>
        Cause.isInterruptedOnly(cause)
          ? Effect.failCause(cause as Cause.Cause<never>)
          : Effect.succeed<Outcome>({ _tag: "Failed", exception: exceptionOf(cause) })
      ),
      Effect.withSpan("RolloutCluster.run", {
        attributes: { agent: payload.agent, gather: payload.gather, group: payload.group, index: payload.index }
      })
    )

const policyOf = (ref: PolicyRef) =>
  ref._tag === "Trainable" ? Policy.fromModel(ref.model, { step: ref.step }) : Policy.base(ref.name)

/** The reference a runner rebuilds a policy from: a trainable model at its current step, else a base name. */
const refOf = (policy: Policy.Policy): Effect.Effect<PolicyRef> =>
  Option.match(policy.model, {
    onNone: () => Effect.succeed<PolicyRef>({ _tag: "Base", name: policy.name }),
    onSome: (model) => Effect.map(policy.version, (step): PolicyRef => ({ _tag: "Trainable", model, step: step ?? 0 }))
  })

/** The executor of a driver: each rollout sent as a persisted message to its entity (see the module). */
export const makeExecutor = (
  agents: ReadonlyArray<RolloutAgent.Any>
): Effect.Effect<Executor, never, Sharding.Sharding | MessageStorage.MessageStorage> =>
  Effect.gen(function* () {
    const client = yield* RolloutEntity.client
    const sharding = yield* Sharding.Sharding
    const storage = yield* MessageStorage.MessageStorage
    const named = byName(agents)
    /** The entities this driver sent rollouts to, by gather key (what `release` clears). */
    const sent = new Map<string, Set<string>>()
    /** Deletes a rollout entity's stored messages and replies. */
    const clear = (id: string) => {
      const entityId = EntityId.make(id)
      return storage.clearAddress(
        EntityAddress.make({
          shardId: sharding.getShardId(entityId, RolloutEntity.getShardGroup(entityId)),
          entityType: RolloutEntity.type,
          entityId
        })
      )
    }
    const byRollout = new Map<unknown, RolloutAgent.Any>(agents.map((agent) => [agent.rollout, agent]))
    return {
      name: "cluster",
      bind: <S, A>(binding: Binding<S, A>) =>
        Effect.gen(function* () {
          const agent = byRollout.get(binding.rollout)
          if (agent === undefined) {
            return yield* Effect.dieMessage(
              "RolloutCluster: the gather's rollout is not the `rollout` of an agent given to RolloutCluster.layer " +
                `(agents: ${[...named.keys()].join(", ") || "none"}); pass \`agent.rollout\` and \`agent.reward\` of a ` +
                "RolloutAgent the runners register"
            )
          }
          if (binding.reward !== agent.reward) {
            return yield* Effect.dieMessage(
              `RolloutCluster: the gather's reward is not the reward of the agent '${agent.name}'; the runners ` +
                "compute the agent's own reward, so pass `agent.reward` (or make an agent with this reward)"
            )
          }
          const decodeValue = Schema.decodeUnknown(agent.value as Schema.Schema<A, unknown>)
          const encodeScenario = Schema.encode(agent.scenario as Schema.Schema<S, unknown>)
          return (job: Job<S>): Effect.Effect<Executed<A>, unknown> =>
            Effect.gen(function* () {
              const policy = yield* refOf(binding.policy)
              const scenario = yield* encodeScenario(job.scenario)
              const id = entityId(binding.key, job.group, job.index)
              const ids = sent.get(binding.key) ?? new Set<string>()
              sent.set(binding.key, ids.add(id))
              const entity = client(id)
              for (let attempt = 0; ; attempt++) {
                const exit = yield* Effect.exit(
                  entity
                    .Run({
                      agent: agent.name,
                      gather: binding.key,
                      group: job.group,
                      index: job.index,
                      attempt,
                      scenario,
                      ...(job.metadata === undefined ? {} : { metadata: job.metadata }),
                      policy
                    })
                    .pipe(Effect.retry({ schedule: transient, while: isTransient }))
                )
                if (Exit.isSuccess(exit)) {
                  const outcome = exit.value
                  if (outcome._tag === "Failed")
                    return yield* Effect.fail(new RolloutFailed({ exception: outcome.exception }))
                  const score: Scored = {
                    reward: outcome.reward,
                    ...(outcome.metrics === undefined ? {} : { metrics: outcome.metrics as ScoreMetrics })
                  }
                  return {
                    value: yield* decodeValue(outcome.value),
                    trajectory: outcome.trajectory as Rollout.Draft,
                    score
                  }
                }
                // Reaching here, this fiber is not interrupted: the stored run was (an earlier driver stopped it).
                if (!Cause.isInterruptedOnly(exit.cause) || attempt + 1 >= MAX_ATTEMPTS) {
                  return yield* Effect.failCause(exit.cause)
                }
              }
            })
        }),
      release: (key: string) => {
        const ids = sent.get(key)
        if (ids === undefined) return Effect.void
        sent.delete(key)
        return Effect.forEach(ids, clear, { discard: true, concurrency: 8 }).pipe(
          Effect.catchAllCause((cause) =>
            Effect.logWarning(`RolloutCluster: the stored rollouts of ${key} could not be deleted`, cause)
          )
        )
      }
    } satisfies Executor
  })
