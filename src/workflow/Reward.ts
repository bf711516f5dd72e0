/**
 * Reward functions: from a finished rollout (its scenario, the value the agent code returned, and its
 * trajectory) to a reward, or a reward with metrics.
 *
 * - A {@link Reward} scores one rollout; {@link fromFunction} and {@link constant} make simple ones, and
 *   {@link weighted}, {@link clamp}, {@link formatPenalty} and {@link map} combine them.
 * - A {@link GroupScorer} re-scores the finished rollouts of one group together: {@link judge} (a chat model
 *   scores the whole group in one call against a rubric; its score becomes the reward, the one it replaced is
 *   kept as the metric `original_reward`) and {@link groupRelative} (centered, z-scored or ranked within the
 *   group: what is trained on, kept as the metric `relative_reward`, while the reward reported stays the
 *   task's); {@link sequence} chains them.
 *
 * ```ts
 * interface Problem { readonly question: string; readonly answer: string }
 * const correct: Reward.Reward<Problem, string> = Reward.fromFunction(({ scenario, value }) =>
 *   value.trim() === scenario.answer ? 1 : 0
 * )
 * const short: Reward.Reward<Problem, string> = Reward.fromFunction(({ value }) => (value.length < 200 ? 1 : 0))
 * const reward = Reward.formatPenalty(
 *   Reward.weighted({ name: "correct", reward: correct, weight: 1 }, { name: "short", reward: short, weight: 0.1 }),
 *   { check: ({ value }) => /^\d+$/.test(value.trim()), penalty: 0.5 }
 * )
 * // inside Effect.gen: a group re-scored by a judge model, then made group-relative
 * const judgeModel = yield* Policy.base("some/judge-model")
 * const scoreGroup = Reward.sequence(
 *   Reward.judge({ policy: judgeModel, rubric: "Is the answer correct and brief?" }),
 *   Reward.groupRelative({ mode: "zscore" })
 * )
 * ```
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { Message } from "../api/ChatMessage.js"
import type { ApiError } from "../client/ApiError.js"
import * as Judge from "./internal/judge.js"
import { mean, populationStd } from "./Metrics.js"
import type { Policy, Request } from "./Policy.js"
import type { Draft } from "./Rollout.js"

/** Metrics of a score, by name: numbers, or booleans (counted as 0/1). */
export type ScoreMetrics = Readonly<Record<string, number | boolean>>

/** A reward with metrics, to be recorded in the trajectory's `metrics` alongside it. */
export interface Scored {
  /** The reward (a finite number). */
  readonly reward: number
  /** Metrics to record with it (they win over the rollout's own metrics of the same name). */
  readonly metrics?: ScoreMetrics | undefined
}

/** What a reward function returns: a reward, or a reward with metrics. */
export type Score = number | Scored

/** What a reward function scores: the scenario, the finished rollout's trajectory, and its value. */
export interface Input<S, A> {
  /** The scenario the rollout played. */
  readonly scenario: S
  /** The recorded trajectory (without its reward). */
  readonly trajectory: Draft
  /** What the rollout's agent code returned. */
  readonly value: A
}

/** A reward function: scores one finished rollout. */
export type Reward<S, A, E = never, R = never> = (input: Input<S, A>) => Effect.Effect<Score, E, R>

/** A rollout of a group with the score its reward function gave, as a {@link GroupScorer} sees it. */
export interface Scoring<S, A> extends Input<S, A> {
  /** The score so far. */
  readonly score: Scored
}

/**
 * Re-scores the finished rollouts of one group together (a judge, a group-relative reward): one score per
 * rollout, in the same order.
 */
export type GroupScorer<S, A, E = never, R = never> = (
  group: ReadonlyArray<Scoring<S, A>>
) => Effect.Effect<ReadonlyArray<Scored>, E, R>

/** A score as a {@link Scored} (a plain number becomes `{reward}`); the reward is not checked here. */
export const normalize = (score: Score): Scored => (typeof score === "number" ? { reward: score } : score)

/** The metric under which a group scorer keeps the reward it replaced. */
export const ORIGINAL_REWARD = "original_reward"

/**
 * The metric under which {@link groupRelative} keeps a rollout's reward relative to its group. `Trainer.train`
 * submits it as the trajectory's reward (what is trained on); the reward itself, which the loop reports and
 * logs, stays the one the task gave.
 */
export const RELATIVE_REWARD = "relative_reward"

/** A reward function from a plain (synchronous, pure) function. */
export const fromFunction =
  <S, A>(f: (input: Input<S, A>) => Score): Reward<S, A> =>
  (input) =>
    Effect.sync(() => f(input))

/** A reward function that gives every rollout the same reward. */
export const constant =
  (reward: number): Reward<unknown, unknown> =>
  () =>
    Effect.succeed(reward)

/** Transforms the score of a reward function (the function sees the score as a {@link Scored}). */
export const map =
  <S, A, E, R>(reward: Reward<S, A, E, R>, f: (scored: Scored, input: Input<S, A>) => Score): Reward<S, A, E, R> =>
  (input) =>
    Effect.map(reward(input), (score) => f(normalize(score), input))

/** A named, weighted part of a {@link weighted} sum. */
export interface Part<S, A, E = never, R = never> {
  /** The metric name of the part's (unweighted) reward; its own metrics are recorded as `<name>/<metric>`. */
  readonly name: string
  /** The part's reward function. */
  readonly reward: Reward<S, A, E, R>
  /** Its weight in the sum. */
  readonly weight: number
}

type AnyPart = Part<never, never, unknown, unknown>
type ScenarioOf<P> = [P] extends [{ readonly reward: (input: Input<infer S, infer _A>) => unknown }] ? S : never
type ValueOf<P> = [P] extends [{ readonly reward: (input: Input<infer _S, infer A>) => unknown }] ? A : never
type ErrorOf<P> = P extends { readonly reward: (input: never) => Effect.Effect<Score, infer E, infer _R> } ? E : never
type ContextOf<P> = P extends { readonly reward: (input: never) => Effect.Effect<Score, infer _E, infer R> } ? R : never

const merge = (scored: Scored, metrics: ScoreMetrics): Scored => ({
  reward: scored.reward,
  metrics: { ...scored.metrics, ...metrics }
})

/**
 * The weighted sum of reward functions, run concurrently. Each part's unweighted reward is recorded as the
 * metric `<name>`, and each of its metrics as `<name>/<metric>`. Part names must differ. The error and
 * context types are the union of the parts'; the parts' reward functions carry their input types (write an
 * inline one with {@link fromFunction} and its type parameters).
 */
export const weighted = <const P extends ReadonlyArray<AnyPart>>(
  ...parts: P
): Reward<ScenarioOf<P[number]>, ValueOf<P[number]>, ErrorOf<P[number]>, ContextOf<P[number]>> => {
  const names = new Set(parts.map((part) => part.name))
  if (names.size !== parts.length) throw new Error("Reward.weighted: the parts' names must differ")
  return (input) =>
    Effect.map(
      Effect.forEach(
        // The parts, at the input, error and context types computed from them above.
        parts as unknown as ReadonlyArray<
          Part<ScenarioOf<P[number]>, ValueOf<P[number]>, ErrorOf<P[number]>, ContextOf<P[number]>>
        >,
        (part) => Effect.map(part.reward(input), normalize),
        { concurrency: "unbounded" }
      ),
      (scores) => {
        const metrics: Record<string, number | boolean> = {}
        let reward = 0
        scores.forEach((scored, i) => {
          const part = parts[i]!
          reward += part.weight * scored.reward
          metrics[part.name] = scored.reward
          for (const [name, value] of Object.entries(scored.metrics ?? {})) metrics[`${part.name}/${name}`] = value
        })
        return { reward, metrics }
      }
    )
}

/** Bounds a reward function's reward to `[min, max]` (its metrics are kept). */
export const clamp = <S, A, E, R>(
  reward: Reward<S, A, E, R>,
  bounds: { readonly min: number; readonly max: number }
): Reward<S, A, E, R> => {
  if (!(bounds.min <= bounds.max)) throw new RangeError(`Reward.clamp: min ${bounds.min} > max ${bounds.max}`)
  return map(reward, (scored) => ({ ...scored, reward: Math.min(bounds.max, Math.max(bounds.min, scored.reward)) }))
}

/** Options of {@link formatPenalty}. */
export interface FormatPenaltyOptions<S, A, E, R> {
  /** Whether the rollout's output is well-formed (a plain predicate or an effect). */
  readonly check: (input: Input<S, A>) => boolean | Effect.Effect<boolean, E, R>
  /** What is subtracted from the reward when the check fails. */
  readonly penalty: number
  /** The 0/1 metric recording a failed check (default `format_error`). */
  readonly name?: string | undefined
}

/**
 * Subtracts `penalty` from the reward when the rollout fails a format check, and records the metric
 * `format_error` (or `name`): 1 when the check failed, 0 when it passed. The check and the reward run
 * concurrently.
 */
export const formatPenalty = <S, A, E, R, E2 = never, R2 = never>(
  reward: Reward<S, A, E, R>,
  options: FormatPenaltyOptions<S, A, E2, R2>
): Reward<S, A, E | E2, R | R2> => {
  const name = options.name ?? "format_error"
  return (input) =>
    Effect.map(
      Effect.all(
        [
          Effect.map(reward(input), normalize),
          Effect.suspend(() => {
            const ok = options.check(input)
            return typeof ok === "boolean" ? Effect.succeed(ok) : ok
          })
        ],
        { concurrency: 2 }
      ),
      ([scored, ok]) =>
        merge({ ...scored, reward: ok ? scored.reward : scored.reward - options.penalty }, { [name]: ok ? 0 : 1 })
    )
}

const keepOriginal = (item: Scoring<unknown, unknown>, reward: number, metrics: ScoreMetrics = {}): Scored => ({
  reward,
  metrics: {
    ...item.score.metrics,
    ...metrics,
    [ORIGINAL_REWARD]: item.score.metrics?.[ORIGINAL_REWARD] ?? item.score.reward
  }
})

/** How {@link groupRelative} relates a reward to its group. */
export type RelativeMode = "centered" | "zscore" | "rank"

/**
 * A group scorer that trains each rollout on its reward relative to the group:
 * - `centered`: the reward minus the group's mean;
 * - `zscore`: centered, divided by the group's population standard deviation (all 0 when the rewards are
 *   equal);
 * - `rank`: the fraction of the group's other rollouts it beats, a tie counting half (from 0 to 1; 0.5 in a
 *   group of one).
 *
 * The relative value is the metric {@link RELATIVE_REWARD}, which `Trainer.train` submits as the reward; the
 * reward stays the task's, so progress, step logs, summaries and the log endpoint report what the rollouts
 * earned. The trainer already takes advantages within each group (the reward minus the group's mean, divided
 * by its standard deviation with `scale_rewards`), so `centered` trains exactly as no scorer does, and
 * `zscore` too under `scale_rewards`; `rank` changes what is learned (ranks instead of magnitudes).
 */
export const groupRelative =
  (options: { readonly mode: RelativeMode }): GroupScorer<unknown, unknown> =>
  (group) =>
    Effect.sync(() => {
      const rewards = group.map((item) => item.score.reward)
      const center = mean(rewards) ?? 0
      const std = populationStd(rewards)
      const relative = (r: number, i: number): number => {
        switch (options.mode) {
          case "centered":
            return r - center
          case "zscore":
            return std === 0 ? 0 : (r - center) / std
          case "rank": {
            if (rewards.length === 1) return 0.5
            const beaten = rewards.reduce(
              (n, other, j) => (j === i ? n : n + (r > other ? 1 : r === other ? 0.5 : 0)),
              0
            )
            return beaten / (rewards.length - 1)
          }
        }
      }
      return group.map(
        (item, i): Scored => ({
          reward: item.score.reward,
          metrics: { ...item.score.metrics, [RELATIVE_REWARD]: relative(rewards[i]!, i) }
        })
      )
    })

type AnyScorer = GroupScorer<never, never, unknown, unknown>
type GroupScenarioOf<P> = [P] extends [(group: ReadonlyArray<Scoring<infer S, infer _A>>) => unknown] ? S : never
type GroupValueOf<P> = [P] extends [(group: ReadonlyArray<Scoring<infer _S, infer A>>) => unknown] ? A : never
type GroupErrorOf<P> = P extends (group: never) => Effect.Effect<unknown, infer E, infer _R> ? E : never
type GroupContextOf<P> = P extends (group: never) => Effect.Effect<unknown, infer _E, infer R> ? R : never

/**
 * Runs group scorers one after another, each seeing the scores the one before gave (e.g. a judge, then
 * {@link groupRelative}). A scorer that does not return one score per rollout is a defect.
 */
export const sequence = <const P extends ReadonlyArray<AnyScorer>>(
  ...scorers: P
): GroupScorer<
  GroupScenarioOf<P[number]>,
  GroupValueOf<P[number]>,
  GroupErrorOf<P[number]>,
  GroupContextOf<P[number]>
> => {
  type Typed = GroupScorer<
    GroupScenarioOf<P[number]>,
    GroupValueOf<P[number]>,
    GroupErrorOf<P[number]>,
    GroupContextOf<P[number]>
  >
  return (group) =>
    Effect.reduce(
      // The scorers, at the input, error and context types computed from them above.
      scorers as unknown as ReadonlyArray<Typed>,
      group.map((item) => item.score) as ReadonlyArray<Scored>,
      (scores, scorer) =>
        Effect.filterOrDieMessage(
          scorer(group.map((item, i) => ({ ...item, score: scores[i]! }))),
          (next) => next.length === group.length,
          `Reward.sequence: a scorer did not return one score per rollout (${group.length})`
        )
    )
}

/** Why a {@link judge} could not score a group. */
export type JudgeErrorReason = "Malformed" | "Api"

/**
 * A judge failed: its answers stayed malformed (not JSON, a trajectory missing or extra, a score out of
 * range) after every attempt, or the call to its model failed (`cause`).
 */
export class JudgeError extends Data.TaggedError("JudgeError")<{
  /** `Malformed`: no valid answer within the attempts; `Api`: the chat completion failed. */
  readonly reason: JudgeErrorReason
  /** What was wrong with the last answer, or the API failure. */
  readonly description: string
  /** The start of the last answer, if any. */
  readonly excerpt?: string | undefined
  /** How many chat completions were made. */
  readonly attempts: number
  /** The failed call, when `reason` is `Api`. */
  readonly cause?: ApiError | undefined
}> {
  override get message(): string {
    return `the judge failed after ${this.attempts} attempt(s): ${this.reason}: ${this.description}`
  }
}

/** Options of {@link judge}. */
export interface JudgeOptions<S> {
  /** The judge model: any policy (a base model of the inference service, another provider). */
  readonly policy: Policy
  /** What a good trajectory is; a function of the group's scenario if it depends on it. */
  readonly rubric: string | ((scenario: S) => string)
  /** The range of scores (default 0 to 1); an answer with a score outside it is malformed. */
  readonly range?: { readonly min: number; readonly max: number } | undefined
  /**
   * A discrete scale (e.g. `[0, 0.5, 1]`): the only scores allowed, as an `enum` in the answer's schema (so a
   * constrained decoder can only write them); it replaces `range`.
   */
  readonly levels?: ReadonlyArray<number> | undefined
  /** Whether the judge explains each score before giving it (default true); explanations are logged. */
  readonly explain?: boolean | undefined
  /** The longest explanation allowed, if bounded (a `maxLength` in the answer's schema). */
  readonly maxExplanationLength?: number | undefined
  /** How many chat completions to make before a malformed answer is a failure (default 3). */
  readonly maxAttempts?: number | undefined
  /** Request fields of the judge's completion (`temperature`, `max_completion_tokens`, `seed`, ...). */
  readonly request?: Partial<Request> | undefined
}

const EXCERPT = 500

/**
 * A group scorer that asks a chat model to score all the group's rollouts in one completion, against a
 * rubric. The prompt sends the messages the trajectories share (their longest common prefix of
 * `messages_and_choices`, choices read as assistant messages) once, then each trajectory's rest labelled
 * `trajectory 1`, `trajectory 2`, ...; the answer is asked for as structured output (`response_format`
 * `json_schema`: one `{explanation, score}` per label). An answer that is not that JSON, misses or adds a
 * trajectory, or has a score out of range is malformed: the judge asks again, telling the model what was
 * wrong, up to `maxAttempts` completions in all, and then fails with a `Malformed` {@link JudgeError}; a
 * failed chat completion fails at once with an `Api` one.
 *
 * The judged score becomes the reward; the reward it replaces is kept as the metric `original_reward`. The
 * explanations are logged at debug level (metrics are numbers). Only each trajectory's main conversation is
 * shown to the judge, not its `additional_histories`. The answer's schema keeps to what the embedded
 * engine's constrained decoding supports (no `minimum`/`maximum`: the range is checked here instead), so a
 * judge on the local backend always writes well-formed JSON, and with `levels` only allowed scores.
 */
export const judge = <S = unknown>(options: JudgeOptions<S>): GroupScorer<S, unknown, JudgeError> => {
  const range = options.range ?? { min: 0, max: 1 }
  if (!(range.min <= range.max)) throw new RangeError(`Reward.judge: min ${range.min} > max ${range.max}`)
  const maxAttempts = Math.max(1, options.maxAttempts ?? 3)
  return (group) => {
    if (group.length === 0) return Effect.succeed([])
    const shape: Judge.Shape = {
      labels: group.map((_, i) => Judge.label(i)),
      min: range.min,
      max: range.max,
      levels: options.levels,
      explain: options.explain ?? true,
      maxExplanationLength: options.maxExplanationLength
    }
    const rubric = typeof options.rubric === "string" ? options.rubric : options.rubric(group[0]!.scenario)
    const messages = Judge.prompt(
      rubric,
      group.map((item) => item.trajectory.messages_and_choices),
      shape
    )
    const response_format = Judge.responseFormat(shape)
    const ask = (
      attempt: number,
      retry: { readonly problem: string; readonly excerpt: string } | undefined
    ): Effect.Effect<ReadonlyArray<Judge.Verdict>, JudgeError> => {
      const sent: ReadonlyArray<Message> =
        retry === undefined
          ? messages
          : [
              ...messages,
              { role: "assistant", content: retry.excerpt },
              {
                role: "user",
                content: `That answer is invalid: ${retry.problem.slice(0, 300)}. Answer again, in JSON only.`
              }
            ]
      return options.policy.complete({ ...options.request, messages: sent, response_format }).pipe(
        Effect.mapError(
          (cause) => new JudgeError({ reason: "Api", description: cause.message, attempts: attempt, cause })
        ),
        Effect.flatMap((completion) => {
          const message = completion.choices[0]?.message
          const text = message?.content ?? null
          const parsed: Either.Either<ReadonlyArray<Judge.Verdict>, string> = text === null
            ? Either.left(
                message?.refusal != null ? `the judge refused: ${message.refusal}` : "the answer has no content"
              )
            : Judge.parse(text, shape)
          if (Either.isRight(parsed)) return Effect.succeed(parsed.right)
          const excerpt = (text ?? message?.refusal ?? "").slice(0, EXCERPT)
          if (attempt >= maxAttempts) {
            return Effect.fail(
              new JudgeError({ reason: "Malformed", description: parsed.left, excerpt, attempts: attempt })
            )
          }
          return Effect.logDebug(`Reward.judge: malformed answer (attempt ${attempt}): ${parsed.left}`).pipe(
            Effect.zipRight(ask(attempt + 1, { problem: parsed.left, excerpt }))
          )
        })
      )
    }
    return ask(1, undefined).pipe(
      Effect.tap((verdicts) =>
        Effect.logDebug(
          "Reward.judge: verdicts",
          verdicts.map((v) => ({ trajectory: v.label, score: v.score, explanation: v.explanation }))
        )
      ),
      Effect.map((verdicts) => group.map((item, i) => keepOriginal(item, verdicts[i]!.score))),
      Effect.withSpan("Reward.judge", {
        attributes: { policy: options.policy.name, trajectories: group.length }
      })
    )
  }
}
