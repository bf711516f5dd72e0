/**
 * Rollouts: an agent talks to a policy, and everything it samples is recorded into a trajectory.
 *
 * Inside {@link run}, agent code makes chat completions with {@link chat} (OpenAI-style: pass the whole
 * message list each time) or through a {@link conversation} (plain Effect code that keeps the list for you).
 * Each completion asks for logprobs and token ids, its first choice is appended to the trajectory (the
 * trainable assistant turn) and the messages sent before it are recorded as context. A request whose
 * messages do not continue the main conversation (a sub-agent's own conversation) is recorded as an
 * additional history. {@link metric}, {@link metadata} and {@link log} add to the trajectory; the rollout's
 * timing, token usage and the policy version at start and end are recorded for you. With a `Tracing` layer
 * provided, the rollout and each of its completions are calls of the trace service.
 *
 * ```ts
 * const play = (question: string) =>
 *   Effect.gen(function* () {
 *     const completion = yield* Rollout.chat({ messages: [{ role: "user", content: question }] })
 *     return completion.choices[0]?.message.content ?? ""
 *   })
 * const finished = yield* Rollout.run(policy, play("2 + 2 ="))
 * // finished.trajectory: messages_and_choices, metrics, timing; finished.value: the answer
 * ```
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Take from "effect/Take"
import type { ChatCompletion, ChatCompletionChunk, Choice } from "../api/ChatCompletion.js"
import type { AssistantMessage, Message, Tool } from "../api/ChatMessage.js"
import { chunksOf } from "../api/internal/chunkSplit.js"
import type { History, Metadata, Trajectory } from "../api/Trajectory.js"
import { ApiError } from "../client/ApiError.js"
import * as ChatStream from "../client/ChatStream.js"
import { type Checked, InvalidTurn, Recorder } from "./internal/recorder.js"
import { choiceJson, messagesOf, rolloutOpened, toJson, toJsonObject } from "./internal/tracing.js"
import type { Policy, Request } from "./Policy.js"
import * as Tracing from "./Tracing.js"

export {
  /**
   * A turn the training service would refuse in a trajectory (a role or `finish_reason` it does not take),
   * caught when the rollout records it.
   */
  InvalidTurn
}

/** The running rollout: its policy and its record. Provided by {@link run}. */
export class Current extends Context.Tag("effect-rl/Rollout/Current")<
  Current,
  { readonly policy: Policy; readonly recorder: Recorder }
>() {}

/** A trajectory without its reward: what a rollout recorded (the reward comes from a reward function). */
export type Draft = Omit<Trajectory, "reward">

/** A finished rollout: what the agent code returned, and its trajectory. */
export interface Finished<A> {
  /** The value the agent code returned (e.g. its final answer). */
  readonly value: A
  /** The recorded trajectory, without reward. */
  readonly trajectory: Draft
}

/** The policy of the running rollout. */
export const policy: Effect.Effect<Policy, never, Current> = Effect.map(Current, (current) => current.policy)

const noChoice = (completion: ChatCompletion) =>
  new ApiError({
    reason: "Decode",
    method: "POST",
    path: "/v1/chat/completions",
    description: `chat completion ${completion.id} has no choices`,
    retryable: false
  })

const emptyStream = () =>
  new ApiError({
    reason: "Decode",
    method: "POST",
    path: "/v1/chat/completions",
    description: "the streamed chat completion ended before its first chunk",
    retryable: false
  })

/** A chat completion's call: the request in, the choice out, its usage. */
const chatCall = (policy: Policy, request: Request) => (): Tracing.CallOptions<ChatCompletion> => ({
  op: Tracing.CHAT_OP,
  inputs: toJsonObject({ model: policy.name, ...request }),
  output: (completion) =>
    toJson({ id: completion.id, model: completion.model, choices: completion.choices.slice(0, 1).map(choiceJson) }),
  usage: (completion) => [
    [
      completion.model,
      {
        prompt_tokens: completion.usage.prompt_tokens,
        completion_tokens: completion.usage.completion_tokens,
        total_tokens: completion.usage.total_tokens,
        requests: 1
      }
    ]
  ]
})

/**
 * Creates a chat completion with the rollout's policy and records it: the request's messages not yet in the
 * trajectory as context, then the first choice. `logprobs` and `return_token_ids` are always requested (the
 * trainer needs them). When traced, the completion is a call under the rollout's.
 *
 * What the training service would refuse in a trajectory fails here with an {@link InvalidTurn}, not with a
 * 422 when the step's job is created: a message of a role it does not take is refused before the request is
 * sent; a choice whose `finish_reason` it does not take, when the completion comes.
 */
export const chat = (request: Request): Effect.Effect<ChatCompletion, ApiError | InvalidTurn, Current> =>
  Effect.flatMap(Current, ({ policy, recorder }) =>
    Effect.flatMap(recorder.check(request.messages), (checked) =>
      policy
        .complete({ ...request, logprobs: true, return_token_ids: true })
        .pipe(recordedAs(recorder, checked, request), (completion) =>
          Tracing.call(chatCall(policy, request), completion)
        )
    )
  )

/** A completion recorded as the turn of `request` (its first choice; a completion without one fails). */
const recordedAs =
  (recorder: Recorder, checked: Checked, request: Request) =>
  <E>(completion: Effect.Effect<ChatCompletion, E>): Effect.Effect<ChatCompletion, E | ApiError | InvalidTurn> =>
    completion.pipe(
      Effect.filterOrFail(
        (completion) => completion.choices.length > 0,
        (completion) => noChoice(completion)
      ),
      Effect.tap((completion) =>
        // The filter above leaves only completions with a choice.
        Effect.map(Recorder.choiceOf(completion.choices[0]!, completion.id), (choice) =>
          recorder.record(checked, choice, completion, request.tools)
        )
      )
    )

/**
 * {@link chat} streamed: the policy's chunks as they are sampled (with `logprobs`, `token_ids` and a usage chunk
 * at the end, whatever the request asked), and the turn recorded as {@link chat} records it, from the chunks
 * joined, once the stream has ended. A stream that is not read to its end (its reader stopped, interrupted, or
 * gone away) aborts the policy's completion and records nothing: the turn never reached the conversation. A
 * policy without {@link Policy.stream} is asked for the whole completion, which is then cut into chunks.
 */
export const chatStream = (request: Request): Stream.Stream<ChatCompletionChunk, ApiError | InvalidTurn, Current> =>
  Stream.unwrapScoped(Effect.map(chatQueue(request), (queue) => Stream.flattenTake(Stream.fromQueue(queue))))

/**
 * {@link chatStream} as the queue its fiber fills, that fiber forked in the scope (closing the scope aborts the
 * completion and records nothing): for a relay that reads the chunks where they are put, with no stream pumped
 * into a queue of its own. The queue ends with `Take.end` once the turn is recorded, or with the failure.
 */
export const chatQueue = (
  request: Request
): Effect.Effect<Queue.Dequeue<Take.Take<ChatCompletionChunk, ApiError | InvalidTurn>>, never, Current | Scope.Scope> =>
  Effect.gen(function* () {
    const { policy, recorder } = yield* Current
    type E = ApiError | InvalidTurn
    const queue = yield* Effect.acquireRelease(Queue.unbounded<Take.Take<ChatCompletionChunk, E>>(), Queue.shutdown)
    const offer = (chunk: ChatCompletionChunk) => Queue.unsafeOffer(queue, Take.of(chunk))
    const stream = policy.stream
    const run: Effect.Effect<unknown, E, Current> =
      stream === undefined
        ? // A policy that answers whole: the completion (recorded by `chat`) cut into chunks.
          Effect.map(chat(request), (completion) => {
            for (const chunk of chunksOf(completion, true)) offer(chunk)
          })
        : Effect.flatMap(recorder.check(request.messages), (checked) =>
            // Joins the chunks as they are relayed; records the turn once they have all come.
            Tracing.call(
              chatCall(policy, request),
              ChatStream.collect(
                stream({
                  ...request,
                  logprobs: true,
                  return_token_ids: true,
                  stream_options: { include_usage: true }
                }),
                { onChunk: offer }
              ).pipe(
                Effect.catchTag("NoSuchElementException", () => Effect.fail(emptyStream())),
                recordedAs(recorder, checked, request)
              )
            )
          )
    yield* run.pipe(
      Effect.onExit((exit) => Queue.offer(queue, Exit.isSuccess(exit) ? Take.end : Take.failCause(exit.cause))),
      Effect.forkScoped
    )
    return queue
  })

/** Adds a numeric (or boolean) metric to the trajectory; a later value of the same name wins. */
export const metric = (name: string, value: number | boolean): Effect.Effect<void, never, Current> =>
  Effect.map(Current, ({ recorder }) => {
    recorder.metrics[name] = value
  })

/** Adds a metadata entry (a scalar) to the trajectory. */
export const metadata = (key: string, value: string | number | boolean | null): Effect.Effect<void, never, Current> =>
  Effect.map(Current, ({ recorder }) => {
    recorder.metadata[key] = value
  })

/** Adds a line to the trajectory's logs. */
export const log = (line: string): Effect.Effect<void, never, Current> =>
  Effect.map(Current, ({ recorder }) => {
    recorder.logs.push(line)
  })

/** Appends messages to the main conversation without a completion (e.g. the environment's last word). */
export const append = (...messages: ReadonlyArray<Message>): Effect.Effect<void, InvalidTurn, Current> =>
  Effect.flatMap(Current, ({ recorder }) => recorder.append(messages))

/** A conversation kept for the agent: add messages, ask the model for the next assistant turn. */
export interface Conversation {
  /** The messages so far. */
  readonly messages: Effect.Effect<ReadonlyArray<Message>>
  /** Adds a user message. */
  readonly user: (content: string) => Effect.Effect<void>
  /** Adds any message (a tool result, a system note). */
  readonly add: (message: Message) => Effect.Effect<void>
  /**
   * Asks the model for the next assistant turn (recorded in the trajectory), adds it to the conversation
   * and returns the choice; `overrides` are merged into this request.
   */
  readonly reply: (overrides?: Partial<Request>) => Effect.Effect<Choice, ApiError | InvalidTurn, Current>
}

/** Options of {@link conversation}. */
export interface ConversationOptions {
  /** The system prompt, if any. */
  readonly system?: string | undefined
  /** The tools offered to the model. */
  readonly tools?: ReadonlyArray<Tool> | undefined
  /** Request fields used for every turn (e.g. `max_completion_tokens`, `temperature`, `structured_outputs`). */
  readonly request?: Partial<Request> | undefined
}

/** The assistant message that goes back into the conversation for a sampled choice. */
export const assistantMessage = (choice: Choice): AssistantMessage => ({
  role: "assistant",
  content: choice.message.content ?? null,
  ...(choice.message.tool_calls != null && choice.message.tool_calls.length > 0
    ? {
        tool_calls: choice.message.tool_calls.map((call, i) => ({
          id: call.id ?? `call_${i}`,
          type: "function" as const,
          function: call.function
        }))
      }
    : {})
})

/** A new {@link Conversation}, recorded into the running rollout as the agent talks. */
export const conversation = (options: ConversationOptions = {}): Effect.Effect<Conversation> =>
  Effect.sync(() => {
    const messages: Array<Message> =
      options.system === undefined ? [] : [{ role: "system", content: options.system } as Message]
    return {
      messages: Effect.sync(() => [...messages]),
      user: (content) => Effect.sync(() => void messages.push({ role: "user", content } as Message)),
      add: (message) => Effect.sync(() => void messages.push(message)),
      reply: (overrides) =>
        Effect.map(
          chat({
            ...options.request,
            ...overrides,
            messages: [...messages],
            ...(options.tools === undefined ? {} : { tools: options.tools })
          }),
          (completion) => {
            const choice = completion.choices[0]!
            messages.push(assistantMessage(choice))
            return choice
          }
        )
    }
  })

/** Options of {@link run}. */
export interface RunOptions {
  /** Metadata to start the trajectory with (e.g. the scenario's id). */
  readonly metadata?: Metadata | undefined
}

const historyOf = (history: { readonly entries: ReadonlyArray<unknown>; readonly tools: unknown }): History =>
  ({
    messages_and_choices: history.entries,
    ...(history.tools === undefined ? {} : { tools: history.tools })
  }) as History

/**
 * Runs agent code as a rollout of `policy`: it returns what the code returned and the trajectory recorded,
 * with `start_time`, the policy version at start and end, and among its `metrics` what the rollout measured:
 * `duration_seconds`, `completions`, `prompt_tokens`, `completion_tokens` (a metric of the agent's own of the
 * same name wins). They go in `metrics`, not `auto_metrics`: the hosted service keeps the former and drops
 * the latter. The code's failure is the rollout's failure.
 *
 * A policy that offers a `snapshot` (a trainable one) is held at its current version for the whole rollout:
 * every turn samples from the checkpoint current when the rollout started, even if a training job moves the
 * policy on meanwhile, so `initial_policy_version` and `final_policy_version` name the one checkpoint that
 * sampled it.
 *
 * When traced (see `Tracing`), the rollout is a call (inputs its metadata, output its messages and value) with
 * its chat completions as children; under `Gather`, the gatherer's call for the rollout (which also carries
 * the scenario and the reward) is that call.
 */
export const run = <A, E, R>(
  policy: Policy,
  body: Effect.Effect<A, E, R>,
  options: RunOptions = {}
): Effect.Effect<Finished<A>, E, Exclude<R, Current>> =>
  Effect.flatMap(FiberRef.get(rolloutOpened), (opened) =>
    opened
      ? Effect.locally(record(policy, body, options), rolloutOpened, false)
      : Tracing.call(
          (): Tracing.CallOptions<Finished<A>> => ({
            op: Tracing.ROLLOUT_OP,
            inputs: { metadata: toJsonObject(options.metadata ?? {}) },
            attributes: { policy: policy.name },
            output: ({ value, trajectory }) => ({ messages: messagesOf(trajectory), value: toJson(value) })
          }),
          record(policy, body, options)
        )
  )

const record = <A, E, R>(
  policy_: Policy,
  body: Effect.Effect<A, E, R>,
  options: RunOptions
): Effect.Effect<Finished<A>, E, Exclude<R, Current>> =>
  Effect.gen(function* () {
    const recorder = new Recorder(options.metadata)
    // One checkpoint per rollout: the one current now, even if training moves the policy on meanwhile.
    const policy = policy_.snapshot === undefined ? policy_ : yield* policy_.snapshot
    const initialVersion = yield* policy.version
    const start = yield* Clock.currentTimeMillis
    const value = yield* Effect.provideService(body, Current, { policy, recorder })
    const end = yield* Clock.currentTimeMillis
    const finalVersion = yield* policy.version
    const [main, ...others] = recorder.histories
    const trajectory: Draft = {
      ...historyOf(main!),
      ...(others.length > 0 ? { additional_histories: others.map(historyOf) } : {}),
      initial_policy_version: initialVersion,
      final_policy_version: finalVersion,
      // What the rollout measured goes with the agent's own metrics (which win on a name clash): the hosted
      // service keeps `metrics` and drops `auto_metrics`, which its current schema no longer has.
      metrics: {
        duration_seconds: (end - start) / 1000,
        completions: recorder.completions,
        prompt_tokens: recorder.promptTokens,
        completion_tokens: recorder.completionTokens,
        ...recorder.metrics
      },
      metadata: { ...recorder.metadata },
      logs: [...recorder.logs],
      start_time: new Date(start).toISOString(),
      // What the agent exchanged in the Responses API, as it sent and got it (trained on as chat turns above).
      ...(recorder.exchanges.length > 0
        ? { exchanges: { responses: toJson(recorder.exchanges) } as Trajectory["exchanges"] & object }
        : {})
    }
    return { value, trajectory }
  })
