/**
 * The implementation of `Gather`: the scheduling of groups and rollouts, the recording and counting of
 * failed rollouts, the scoring of groups and the progress counters.
 *
 * Scheduling: groups are a stream of scenarios mapped, unordered, with a bounded number of groups in flight;
 * within a group, rollouts run with the group's concurrency, each holding one permit of a semaphore shared by
 * the whole gather (the overall concurrency) while it runs. Twice as many groups are in flight as it takes
 * to fill every permit, so that groups finishing their last rollouts, or running their hooks, leave no permit
 * idle; the semaphore hands permits out first come, first served (in O(1): see `Permits`), so earlier groups
 * finish first.
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import type { Metadata, RolloutException, Trajectory } from "../../api/Trajectory.js"
import {
  type Binding,
  CurrentExecutor,
  DEFAULT_CONCURRENCY,
  GatherError,
  type Gathered,
  type GatheredRollout,
  type MaxExceptions,
  type Options,
  RolloutFailed
} from "../Gather.js"
import type { Scored } from "../Reward.js"
import { normalize } from "../Reward.js"
import * as Rollout from "../Rollout.js"
import * as Tracing from "../Tracing.js"
import { Counters, start as startProgress } from "./progress.js"
import { messagesOf, rolloutOpened, scenarioName, toJson } from "./tracing.js"

/** The most failed rollouts tolerated, as a count. */
export const limitOf = (max: MaxExceptions | undefined, planned: number): number => {
  if (max === undefined) return 0
  if (typeof max === "number") {
    if (!(max >= 0)) throw new RangeError(`maxExceptions must be a count >= 0, got ${max}`)
    return max
  }
  if (!(max.fraction >= 0 && max.fraction <= 1)) {
    throw new RangeError(`maxExceptions.fraction must be within [0, 1], got ${max.fraction}`)
  }
  return Math.floor(max.fraction * planned)
}

const positive = (name: string, value: number): number => {
  if (!(Number.isInteger(value) && value > 0)) throw new RangeError(`${name} must be a positive integer, got ${value}`)
  return value
}

const typeOf = (error: unknown): string => {
  if (typeof error === "object" && error !== null) {
    const tag = (error as { readonly _tag?: unknown })._tag
    if (typeof tag === "string") return tag
    if (error instanceof Error) return error.name
    return error.constructor?.name ?? "Object"
  }
  return typeof error
}

const messageOf = (error: unknown): string => {
  if (error instanceof Error) {
    // An error that wraps another (`new AgentError({ cause })`, `new Error("agent", { cause })`) says both.
    const inner = (error as { readonly cause?: unknown }).cause
    const said = inner instanceof Error && inner.message !== "" ? inner.message : undefined
    if (error.message === "") {
      if (said !== undefined) return said
    } else {
      return said === undefined || error.message.includes(said) ? error.message : `${error.message}: ${said}`
    }
  }
  if (typeof error === "string") return error
  try {
    const json = JSON.stringify(error)
    if (json !== undefined && json !== "{}") return json
  } catch {
    // circular: fall through
  }
  return String(error)
}

/**
 * What a failure is about: the rejection or the throw itself when Effect wrapped it in an `UnknownException`
 * (`Effect.tryPromise(() => ...)`, `Effect.try(() => ...)` without `catch`), whose own message only says that
 * something unknown happened; the error otherwise.
 */
const unwrap = (error: unknown): unknown =>
  Cause.isUnknownException(error) && error.error !== undefined && error.error !== null ? error.error : error

/**
 * The exception a failed rollout is recorded as: the error's tag (or name) and message, the pretty cause. A
 * rejected Promise's or thrown value's own name and message are recorded, not `UnknownException`'s.
 */
export const exceptionOf = (cause: Cause.Cause<unknown>): RolloutException => {
  const squashed = Cause.squash(cause)
  if (squashed instanceof RolloutFailed) return squashed.exception
  const error = unwrap(squashed)
  const traceback = Cause.pretty(cause)
  if (error === squashed) return { type: typeOf(error), message: messageOf(error), traceback }
  const inner = error instanceof Error && error.stack !== undefined ? error.stack : messageOf(error)
  return { type: typeOf(error), message: messageOf(error), traceback: `${traceback}\ncaused by: ${inner}` }
}

/** A trajectory: the draft with the score (a `Scored`'s metrics over the draft's). */
const scored = (draft: Rollout.Draft, score: Scored): Trajectory => {
  const metrics = score.metrics === undefined ? draft.metrics : { ...draft.metrics, ...score.metrics }
  return { ...draft, reward: score.reward, ...(metrics === undefined ? {} : { metrics }) }
}

/** A traced rollout's trajectory names its call in its metadata (`Tracing.TRACE_CALL_METADATA`). */
const withCall = (trajectory: Trajectory, call: Option.Option<Tracing.CallRef>, project: string): Trajectory =>
  Option.isNone(call)
    ? trajectory
    : {
        ...trajectory,
        metadata: { ...trajectory.metadata, [Tracing.TRACE_CALL_METADATA]: Tracing.callRef(project, call.value.id) }
      }

const notFinite = (score: Scored) => new RangeError(`the reward is not a finite number: ${score.reward}`)

/** A score whose reward is a finite number; a defect naming the reward otherwise. */
export const checkReward = (score: Scored): Effect.Effect<Scored> =>
  Number.isFinite(score.reward) ? Effect.succeed(score) : Effect.die(notFinite(score))

/**
 * A first-come, first-served semaphore of single permits: a released permit goes straight to the fiber that has
 * waited longest. (Effect's own semaphore wakes every waiter on each release to let them race for it: with
 * hundreds of rollouts waiting that is quadratic, and the order is lost.)
 */
class Permits {
  private readonly waiting: Array<Waiter | undefined> = []
  private head = 0

  constructor(private free: number) {}

  private readonly take: Effect.Effect<void> = Effect.async<void>((resume) => {
    const waiter: Waiter = { resume, granted: false, cancelled: false }
    if (this.free > 0) {
      this.free--
      waiter.granted = true
      resume(Effect.void)
    } else {
      this.waiting.push(waiter)
    }
    // Interrupted while waiting: leave the line; interrupted as the permit arrived: pass it on.
    return Effect.sync(() => {
      if (waiter.granted) this.release()
      else waiter.cancelled = true
    })
  })

  private release(): void {
    while (this.head < this.waiting.length) {
      const next = this.waiting[this.head]!
      this.waiting[this.head++] = undefined
      if (this.head > 1024 && this.head * 2 > this.waiting.length) {
        this.waiting.splice(0, this.head)
        this.head = 0
      }
      if (!next.cancelled) {
        next.granted = true
        next.resume(Effect.void)
        return
      }
    }
    this.free++
  }

  /** Runs `self` holding a permit. */
  with<A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> {
    return Effect.uninterruptibleMask((restore) =>
      Effect.zipRight(
        restore(this.take),
        Effect.ensuring(
          restore(self),
          Effect.sync(() => this.release())
        )
      )
    )
  }
}

interface Waiter {
  readonly resume: (effect: Effect.Effect<void>) => void
  granted: boolean
  cancelled: boolean
}

/** An interruption from inside a group (not of the gather itself), carried as a failure through the stream. */
class Interrupted {
  constructor(readonly cause: Cause.Cause<never>) {}
}

/** A rollout that finished, with its score. */
interface Done<A> {
  readonly value: A
  readonly draft: Rollout.Draft
  readonly score: Scored
  /** The rollout's call, when traced. */
  readonly call: Option.Option<Tracing.CallRef>
}

/** A rollout that failed. */
class Failed {
  constructor(readonly exception: RolloutException) {}
}

type Outcome<A> = Done<A> | Failed

/**
 * The gather's shared state: the exceptions so far and the limit, and the gather's failure once one exception is
 * over it. That failure is decided once: a rollout that fails after it (others fail in the same instant, before
 * the failure stops them) gets the same error and is not counted, so the error and the progress display
 * (stopped with it) give the same counts, whichever rollout's failure ends the gather.
 */
class Ledger {
  readonly exceptions: Array<RolloutException> = []
  private failure: GatherError | undefined
  constructor(
    readonly limit: number,
    readonly planned: number,
    readonly counters: Counters
  ) {}

  /** Records a failed rollout; the gather's failure when this one is over the limit (or the gather had failed). */
  fail(exception: RolloutException): GatherError | undefined {
    if (this.failure !== undefined) return this.failure
    this.exceptions.push(exception)
    this.counters.failed()
    if (this.exceptions.length <= this.limit) return undefined
    this.failure = new GatherError({
      reason: "TooManyExceptions",
      exceptions: [...this.exceptions],
      limit: this.limit,
      planned: this.planned,
      finished: this.counters.done
    })
    this.counters.stop()
    return this.failure
  }
}

export const stream = <S, A, E, R, ER, RR, EG, RG, EH, RH>(
  options: Options<S, A, E, R, ER, RR, EG, RG, EH, RH>
): Stream.Stream<Gathered<S, A>, GatherError | EG | EH, Exclude<R, Rollout.Current> | RR | RG | RH> =>
  Stream.unwrapScoped(
    Effect.gen(function* () {
      const scenarios = Array.from(options.scenarios)
      const n = positive("rolloutsPerGroup", options.rolloutsPerGroup)
      const concurrency = positive("concurrency", options.concurrency ?? DEFAULT_CONCURRENCY)
      const perGroup = Math.min(positive("groupConcurrency", options.groupConcurrency ?? n), n)
      const planned = scenarios.length * n
      const counters = new Counters(planned, scenarios.length)
      const ledger = new Ledger(limitOf(options.maxExceptions, planned), planned, counters)
      const timeout = options.timeout === undefined ? undefined : Duration.decode(options.timeout)
      const permits = new Permits(concurrency)
      // Rollouts run elsewhere when an executor is provided (the types of `rollout` and `reward` are its
      // business: it runs them where their requirements are met).
      const executor = yield* CurrentExecutor
      const remote =
        executor === undefined
          ? undefined
          : yield* executor.bind({
              key: options.key ?? globalThis.crypto.randomUUID(),
              policy: options.policy,
              rollout: options.rollout,
              reward: options.reward
            } as unknown as Binding<S, A>)
      yield* startProgress(options.progress, counters)

      /**
       * One rollout and its reward, under the time limit; when traced, a call (opened here, around
       * `Rollout.run`, so that it carries the scenario and the reward).
       */
      const attempt = (scenario: S, index: number, i: number, metadata: Metadata | undefined) => {
        const body: Effect.Effect<Done<A>, unknown, Exclude<R, Rollout.Current> | RR> = remote !== undefined
          ? Effect.zipWith(
              Tracing.currentCall,
              remote({ scenario, group: index, index: i, metadata }),
              (call, { value, trajectory, score }): Done<A> => ({ value, draft: trajectory, score, call })
            )
          : Effect.flatMap(
              Effect.zip(
                Tracing.currentCall,
                Effect.locally(
                  Rollout.run(options.policy, options.rollout(scenario, i), { metadata }),
                  rolloutOpened,
                  true
                )
              ),
              ([call, { value, trajectory }]) =>
                Effect.map(
                  Effect.flatMap(options.reward({ scenario, trajectory, value }), (score) =>
                    checkReward(normalize(score))
                  ),
                  (score): Done<A> => ({ value, draft: trajectory, score, call })
                )
            )
        const timed =
          timeout === undefined
            ? body
            : Effect.timeoutFail(body, {
                duration: timeout,
                onTimeout: () =>
                  new Cause.TimeoutException(`the rollout did not finish within ${Duration.format(timeout)}`)
              })
        return Tracing.call(
          (): Tracing.CallOptions<Done<A>> => ({
            op: Tracing.ROLLOUT_OP,
            displayName: `${scenarioName(scenario, index)} #${i}`,
            inputs: { scenario: toJson(scenario) },
            attributes: { ...metadata, scenario_index: index, rollout_index: i, policy: options.policy.name },
            output: (done) => ({
              messages: messagesOf(done.draft),
              value: toJson(done.value),
              reward: done.score.reward,
              metrics: toJson({ ...done.draft.metrics, ...done.score.metrics })
            })
          }),
          timed
        )
      }

      /**
       * One rollout, holding a permit: its outcome, or the gather's failure when it is one failure too many.
       * An interruption (not the time limit's: that one fails) is no exception of the rollout: it propagates.
       */
      const rollout = (scenario: S, index: number, i: number, metadata: Metadata | undefined) =>
        permits.with(
          Effect.matchCauseEffect(attempt(scenario, index, i, metadata), {
            onSuccess: (done): Effect.Effect<Outcome<A>, GatherError> => {
              const tokens = done.draft.metrics?.completion_tokens
              counters.succeeded(typeof tokens === "number" ? tokens : 0)
              return Effect.succeed(done)
            },
            onFailure: (cause): Effect.Effect<Outcome<A>, GatherError> => {
              if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
              const exception = exceptionOf(cause)
              const error = ledger.fail(exception)
              return error === undefined ? Effect.succeed(new Failed(exception)) : Effect.fail(error)
            }
          })
        )

      const group = (scenario: S, index: number) =>
        Effect.gen(function* () {
          const tracing = yield* Tracing.service
          const metadata = options.metadata?.(scenario, index)
          const outcomes = yield* Effect.forEach(
            Array.from({ length: n }, (_, i) => i),
            (i) => rollout(scenario, index, i, metadata),
            { concurrency: perGroup }
          )
          const done: Array<{
            readonly index: number
            readonly value: A
            readonly draft: Rollout.Draft
            readonly call: Option.Option<Tracing.CallRef>
          }> = []
          let scores: Array<Scored> = []
          const exceptions: Array<RolloutException> = []
          outcomes.forEach((outcome, i) => {
            if (outcome instanceof Failed) {
              exceptions.push(outcome.exception)
            } else {
              done.push({ index: i, value: outcome.value, draft: outcome.draft, call: outcome.call })
              scores.push(outcome.score)
            }
          })
          if (options.scoreGroup !== undefined && done.length > 0) {
            const rescored = yield* options.scoreGroup(
              done.map((d, k) => ({ scenario, trajectory: d.draft, value: d.value, score: scores[k]! }))
            )
            if (rescored.length !== done.length) {
              return yield* Effect.dieMessage(
                `scoreGroup returned ${rescored.length} scores for ${done.length} rollouts (scenario ${index})`
              )
            }
            // The scorer's metrics go over the reward's (a scorer that leaves some out does not drop them).
            scores = yield* Effect.forEach(rescored, (s, k) =>
              checkReward(
                s.metrics === undefined
                  ? { ...scores[k]!, reward: s.reward }
                  : {
                      reward: s.reward,
                      metrics: { ...scores[k]!.metrics, ...s.metrics }
                    }
              )
            )
          }
          const rollouts: Array<GatheredRollout<A>> = done.map((d, k) => ({
            index: d.index,
            value: d.value,
            trajectory: withCall(scored(d.draft, scores[k]!), d.call, tracing.project)
          }))
          // The reward the trainer sees, as feedback on each traced rollout's call.
          yield* Effect.forEach(
            done,
            (d, k) =>
              Option.match(d.call, {
                onNone: () => Effect.void,
                onSome: (call) =>
                  Tracing.feedback(call, Tracing.REWARD_FEEDBACK, {
                    reward: rollouts[k]!.trajectory.reward,
                    metrics: toJson(rollouts[k]!.trajectory.metrics ?? {})
                  })
              }),
            { discard: true }
          )
          let gathered: Gathered<S, A> = {
            scenario,
            index,
            group: {
              trajectories: rollouts.map((r) => r.trajectory),
              ...(metadata === undefined ? {} : { metadata }),
              ...(exceptions.length === 0 ? {} : { exceptions })
            },
            rollouts
          }
          if (options.afterGroup !== undefined) {
            const replaced = yield* options.afterGroup(gathered)
            if (replaced !== undefined) gathered = replaced
          }
          counters.group(gathered.group.trajectories.map((t) => t.reward))
          return gathered
        }).pipe(
          // `Stream.mapEffect` drops an element whose effect was interrupted: carry the interruption past it.
          Effect.catchAllCause(
            (cause): Effect.Effect<never, GatherError | EG | EH | Interrupted> =>
              Cause.isInterruptedOnly(cause)
                ? Effect.fail(new Interrupted(cause as Cause.Cause<never>))
                : Effect.failCause(cause)
          ),
          Effect.withSpan("Gather.group", { attributes: { index, rollouts: n }, captureStackTrace: false })
        )

      const groupsInFlight = Math.max(1, Math.min(scenarios.length, 2 * Math.ceil(concurrency / perGroup)))
      return Stream.fromIterable(scenarios).pipe(
        Stream.zipWithIndex,
        Stream.mapEffect(([scenario, index]) => group(scenario, index), {
          concurrency: groupsInFlight,
          unordered: true
        }),
        Stream.catchAll(
          (error): Stream.Stream<never, GatherError | EG | EH> =>
            error instanceof Interrupted ? Stream.failCause(error.cause) : Stream.fail(error)
        )
      )
    })
  )

export const groups = <S, A, E, R, ER, RR, EG, RG, EH, RH>(
  options: Options<S, A, E, R, ER, RR, EG, RG, EH, RH>
): Effect.Effect<ReadonlyArray<Gathered<S, A>>, GatherError | EG | EH, Exclude<R, Rollout.Current> | RR | RG | RH> =>
  Effect.map(Stream.runCollect(stream(options)), (chunk) =>
    Chunk.toReadonlyArray(chunk)
      .slice()
      .sort((a, b) => a.index - b.index)
  ).pipe(Effect.withSpan("Gather.groups"))
