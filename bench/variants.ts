/**
 * Scratch variants of the RL job body schema, for the profiling experiments of `bench/profile.ts`. They copy
 * the structure of `src/api/Trajectory.ts` and `src/api/TrainingJob.ts` and swap one hot construct at a time;
 * every variant accepts and rejects what the original does and produces the same JSON (bench/profile.ts checks
 * this, and whether the issue messages are the same).
 */
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as AST from "effect/SchemaAST"
import { TokenLogprob, TokenLogprobs, TopLogprob } from "../src/api/ChatCompletion.js"
import { Message, Tool } from "../src/api/ChatMessage.js"
import { checked } from "../src/api/internal/checked.js"
import { withFastPath } from "../src/api/internal/fastPath.js"
import { ModelId } from "../src/api/Model.js"
import { ExperimentalConfig } from "../src/api/TrainingJob.js"
import {
  AnyMetadata,
  EntryChoice,
  Exchanges,
  entryIssue,
  type MessageOrChoice,
  Metrics,
  RolloutException
} from "../src/api/Trajectory.js"

// ---------------------------------------------------------------------------------------------------------
// hand-written guards: the same checks as the structs, without allocating
// ---------------------------------------------------------------------------------------------------------

/** `Schema.Array(Schema.Int)`: an array of safe integers. */
const isIntArray = (u: unknown): u is ReadonlyArray<number> => {
  if (!Array.isArray(u)) return false
  for (let i = 0; i < u.length; i++) if (!Number.isSafeInteger(u[i])) return false
  return true
}

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** `Schema.Array(Schema.Int)` with a fast path (the `bytes` of a token). */
export const FastBytes = withFastPath(Schema.Array(Schema.Int), isIntArray)

// ---------------------------------------------------------------------------------------------------------
// the job body, rebuilt with pluggable parts
// ---------------------------------------------------------------------------------------------------------

/** Which construct a variant swaps. */
export interface VariantOptions {
  /** `src`: `Union(Choice, Message)`; `message-first`: `Union(Message, Choice)`; `guarded`: see below. */
  readonly union?: "src" | "message-first" | "guarded"
  /**
   * `src`: the library's `TokenLogprobs` (with its fast path); `plain`: `Schema.Array(TokenLogprob)` without it;
   * `fast-bytes`: plain structs with only `bytes` through {@link FastBytes}.
   */
  readonly tokens?: "src" | "plain" | "fast-bytes"
}

const tokenLogprobsOf = (tokens: VariantOptions["tokens"]): Schema.Schema<ReadonlyArray<TokenLogprob>> => {
  switch (tokens) {
    case "src":
    case undefined:
      return TokenLogprobs
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
const guardedUnion = (choice: Schema.Schema<EntryChoice>): Schema.Schema<MessageOrChoice> => {
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
  const choice: Schema.Schema<EntryChoice> =
    options.tokens === undefined || options.tokens === "src"
      ? EntryChoice
      : Schema.Struct({
          ...EntryChoice.fields,
          logprobs: Schema.optional(
            Schema.NullOr(
              Schema.Struct({
                content: Schema.optional(Schema.NullOr(tokens)),
                refusal: Schema.optional(Schema.NullOr(tokens))
              }).annotations({ identifier: "ChoiceLogprobs" })
            )
          )
        }).annotations({ identifier: "Choice" })
  const union: Schema.Schema<MessageOrChoice> =
    options.union === "guarded"
      ? guardedUnion(choice)
      : options.union === "message-first"
        ? Schema.Union(Message, choice).annotations({ identifier: "MessageOrChoice" })
        : Schema.Union(choice, Message).annotations({ identifier: "MessageOrChoice" })
  // The training service's checks, as `MessageOrChoice` makes them after its union.
  const entry = checked(union, entryIssue)
  const entries = Schema.Array(entry)
  const History = Schema.Struct({
    messages_and_choices: entries,
    tools: Schema.optional(Schema.NullOr(Schema.Array(Tool)))
  }).annotations({ identifier: "History" })
  const Trajectory = Schema.Struct({
    messages_and_choices: Schema.optionalWith(entries, { default: () => [] }),
    reward: Schema.optionalWith(Schema.Finite, { default: () => 0 }),
    tools: Schema.optional(Schema.NullOr(Schema.Array(Tool))),
    additional_histories: Schema.optional(Schema.Array(History)),
    initial_policy_version: Schema.optional(Schema.NullOr(Schema.Int)),
    final_policy_version: Schema.optional(Schema.NullOr(Schema.Int)),
    metrics: Schema.optional(Metrics),
    auto_metrics: Schema.optional(Metrics),
    metadata: Schema.optional(AnyMetadata),
    logs: Schema.optional(Schema.Array(Schema.String)),
    start_time: Schema.optional(Schema.String),
    exchanges: Schema.optional(Exchanges)
  }).annotations({ identifier: "Trajectory" })
  const TrajectoryGroup = Schema.Struct({
    trajectories: Schema.Array(Trajectory),
    metadata: Schema.optional(AnyMetadata),
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
