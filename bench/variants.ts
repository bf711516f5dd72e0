/**
 * Scratch variants of the RL job body schema, for the profiling experiments of `bench/profile.ts`. They copy
 * the structure of `src/api/Trajectory.ts` and `src/api/TrainingJob.ts` and swap one hot construct at a time;
 * every variant accepts and rejects what the original does and produces the same JSON (bench/profile.ts checks
 * this, and whether the issue messages are the same).
 */
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as AST from "effect/SchemaAST"
import { Choice, TokenLogprob, TopLogprob } from "../src/api/ChatCompletion.js"
import { Message, Tool } from "../src/api/ChatMessage.js"
import { ModelId } from "../src/api/Model.js"
import { ExperimentalConfig } from "../src/api/TrainingJob.js"
import { type MessageOrChoice, Metadata, Metrics, RolloutException } from "../src/api/Trajectory.js"

// ---------------------------------------------------------------------------------------------------------
// hand-written guards: the same checks as the structs, without allocating
// ---------------------------------------------------------------------------------------------------------

// The guards mirror src/api/ChatCompletion.ts: `logprob` is `Schema.Finite`, `bytes` `Schema.Array(Schema.Int)`.

/** `Schema.Array(Schema.Int)`: an array of safe integers. */
export const isIntArray = (u: unknown): u is ReadonlyArray<number> => {
  if (!Array.isArray(u)) return false
  for (let i = 0; i < u.length; i++) if (!Number.isSafeInteger(u[i])) return false
  return true
}

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const isBytes = (u: unknown): boolean => u === undefined || u === null || isIntArray(u)

/**
 * `TopLogprob`, and no keys besides its own: an object with excess keys is left to the schema, which drops them
 * (or keeps, or rejects them, per `onExcessProperty`).
 */
export const isTopLogprob = (u: unknown): u is TopLogprob => {
  if (!isObject(u) || typeof u.token !== "string" || !Number.isFinite(u.logprob) || !isBytes(u.bytes)) return false
  for (const key in u) if (key !== "token" && key !== "logprob" && key !== "bytes") return false
  return true
}

/** `TokenLogprob`, and no keys besides its own (see {@link isTopLogprob}). */
export const isTokenLogprob = (u: unknown): u is TokenLogprob => {
  if (!isObject(u) || typeof u.token !== "string" || !Number.isFinite(u.logprob) || !isBytes(u.bytes)) return false
  const top = u.top_logprobs
  if (top !== undefined) {
    if (!Array.isArray(top)) return false
    for (let i = 0; i < top.length; i++) if (!isTopLogprob(top[i])) return false
  }
  for (const key in u)
    if (key !== "token" && key !== "logprob" && key !== "bytes" && key !== "top_logprobs") return false
  return true
}

/** `Schema.Array(TokenLogprob)`. */
export const isTokenLogprobArray = (u: unknown): u is ReadonlyArray<TokenLogprob> => {
  if (!Array.isArray(u)) return false
  for (let i = 0; i < u.length; i++) if (!isTokenLogprob(u[i])) return false
  return true
}

/**
 * A schema that passes a value its guard accepts through as it is (no copy) and hands anything else to `full`,
 * so that invalid input fails with exactly the issue `full` reports. Only for schemas whose type and encoded
 * sides are the same (no transformations inside). The surrogate annotation makes JSON Schema, arbitraries,
 * pretty-printing and equivalence use `full`; the title keeps issue messages as they were.
 */
export const withFastPath = <A>(full: Schema.Schema<A>, guard: (u: unknown) => u is A) =>
  Schema.declare(
    [full],
    {
      decode: (schema) => {
        const slow = ParseResult.decodeUnknown(schema)
        return (u, options) => (guard(u) ? ParseResult.succeed(u) : slow(u, options))
      },
      encode: (schema) => {
        const slow = ParseResult.encodeUnknown(schema)
        return (u, options) => (guard(u) ? ParseResult.succeed(u) : slow(u, options))
      }
    },
    { title: String(full.ast), [AST.SurrogateAnnotationId]: full.ast }
  )

/** `Schema.Array(TokenLogprob)` with a fast path. */
export const FastTokenLogprobs = withFastPath(Schema.Array(TokenLogprob), isTokenLogprobArray)

/** `Schema.Array(Schema.Int)` with a fast path (the `bytes` of a token). */
export const FastBytes = withFastPath(Schema.Array(Schema.Int), isIntArray)

// ---------------------------------------------------------------------------------------------------------
// the job body, rebuilt with pluggable parts
// ---------------------------------------------------------------------------------------------------------

/** Which construct a variant swaps. */
export interface VariantOptions {
  /** `src`: `Union(Choice, Message)`; `message-first`: `Union(Message, Choice)`; `guarded`: see below. */
  readonly union?: "src" | "message-first" | "guarded"
  /** `src`: the structs; `fast-bytes`: `bytes` through {@link FastBytes}; `fast-array`: {@link FastTokenLogprobs}. */
  readonly tokens?: "src" | "fast-bytes" | "fast-array"
}

const tokenLogprobsOf = (tokens: VariantOptions["tokens"]): Schema.Schema<ReadonlyArray<TokenLogprob>> => {
  switch (tokens) {
    case "fast-array":
      return FastTokenLogprobs
    case "fast-bytes": {
      const optionalBytes = Schema.optional(Schema.NullOr(FastBytes))
      const Top = Schema.Struct({ ...TopLogprob.fields, bytes: optionalBytes }).annotations({
        identifier: "TopLogprob"
      })
      return Schema.Array(
        Schema.Struct({
          ...TokenLogprob.fields,
          bytes: optionalBytes,
          top_logprobs: Schema.optional(Schema.Array(Top))
        }).annotations({ identifier: "TokenLogprob" })
      )
    }
    default:
      return Schema.Array(TokenLogprob)
  }
}

/**
 * `guarded`: an entry whose `index` is `undefined` cannot be a `Choice` (its `index` is a required `Int`), so it
 * goes straight to `Message`; anything else, and a message that fails, goes through the original union (`Choice`
 * first). Same results and same issues as the union, without the failed `Choice` attempt for every message.
 */
const guardedUnion = (choice: Schema.Schema<Choice>): Schema.Schema<MessageOrChoice> => {
  const union = Schema.Union(choice, Message).annotations({ identifier: "MessageOrChoice" })
  return Schema.declare(
    [union, Message],
    {
      decode: (all, message) => {
        const slow = ParseResult.decodeUnknown(all)
        const msg = ParseResult.decodeUnknown(message)
        return (u, options) =>
          isObject(u) && u.index === undefined
            ? ParseResult.orElse(msg(u, options), () => slow(u, options))
            : slow(u, options)
      },
      encode: (all, message) => {
        const slow = ParseResult.encodeUnknown(all)
        const msg = ParseResult.encodeUnknown(message)
        return (u, options) =>
          isObject(u) && u.index === undefined
            ? ParseResult.orElse(msg(u, options), () => slow(u, options))
            : slow(u, options)
      }
    },
    { identifier: "MessageOrChoice", [AST.SurrogateAnnotationId]: union.ast }
  )
}

/** `CreateTrainingJob` with the constructs `options` name swapped. */
export const makeCreateTrainingJob = (options: VariantOptions) => {
  const tokens = tokenLogprobsOf(options.tokens)
  const choice: Schema.Schema<Choice> =
    options.tokens === undefined || options.tokens === "src"
      ? Choice
      : Schema.Struct({
          ...Choice.fields,
          logprobs: Schema.optional(
            Schema.NullOr(
              Schema.Struct({
                content: Schema.optional(Schema.NullOr(tokens)),
                refusal: Schema.optional(Schema.NullOr(tokens))
              }).annotations({ identifier: "ChoiceLogprobs" })
            )
          )
        }).annotations({ identifier: "Choice" })
  const entry: Schema.Schema<MessageOrChoice> =
    options.union === "guarded"
      ? guardedUnion(choice)
      : options.union === "message-first"
        ? Schema.Union(Message, choice).annotations({ identifier: "MessageOrChoice" })
        : Schema.Union(choice, Message).annotations({ identifier: "MessageOrChoice" })
  const entries = Schema.Array(entry)
  const History = Schema.Struct({
    messages_and_choices: entries,
    tools: Schema.optional(Schema.NullOr(Schema.Array(Tool)))
  }).annotations({ identifier: "History" })
  const Trajectory = Schema.Struct({
    messages_and_choices: entries,
    reward: Schema.Finite,
    tools: Schema.optional(Schema.NullOr(Schema.Array(Tool))),
    additional_histories: Schema.optional(Schema.Array(History)),
    initial_policy_version: Schema.optional(Schema.NullOr(Schema.Int)),
    final_policy_version: Schema.optional(Schema.NullOr(Schema.Int)),
    metrics: Schema.optional(Metrics),
    auto_metrics: Schema.optional(Metrics),
    metadata: Schema.optional(Metadata),
    logs: Schema.optional(Schema.Array(Schema.String)),
    start_time: Schema.optional(Schema.String)
  }).annotations({ identifier: "Trajectory" })
  const TrajectoryGroup = Schema.Struct({
    trajectories: Schema.Array(Trajectory),
    metadata: Schema.optional(Metadata),
    metrics: Schema.optional(Metrics),
    logs: Schema.optional(Schema.Array(Schema.String)),
    exceptions: Schema.optional(Schema.Array(RolloutException))
  }).annotations({ identifier: "TrajectoryGroup" })
  return Schema.Struct({
    model_id: ModelId,
    trajectory_groups: Schema.Array(TrajectoryGroup),
    experimental_config: Schema.optional(Schema.NullOr(ExperimentalConfig))
  }).annotations({ identifier: "CreateTrainingJob" })
}
