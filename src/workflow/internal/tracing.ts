/**
 * The implementation of `Tracing`: call handles carried in a FiberRef, the bounded queue of trace items and
 * the worker that sends it, the counters, and the JSON helpers that keep what is sent plain JSON.
 *
 * - A call's start is queued when it starts, its end when it ends (with its output, its summary and, on
 *   failure, the exception). A call's `usage` is its own (a chat completion's) plus its children's, added up
 *   as each child ends, so a rollout's call carries the usage of its completions and a step's that of its
 *   rollouts.
 * - The queue holds at most `capacity` items; an item offered when it is full is dropped and counted. The
 *   worker sends the queue every `flushInterval`, or as soon as a batch is full: the calls' starts and ends
 *   in one `call/upsert_batch`, then the feedback, one `feedback/create` each. A batch the service refuses
 *   (or never gets) is counted as failed, with the first error kept.
 * - When the layer's scope closes, the worker sends what is left and stops; past `finalFlushTimeout` it is
 *   interrupted and what was not sent is counted as failed. Then, if anything was dropped or failed, one
 *   warning is logged with the counts and the first error.
 *
 * @internal
 */
import { randomFillSync } from "node:crypto"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import { globalValue } from "effect/GlobalValue"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import type { Choice } from "../../api/ChatCompletion.js"
import type { JsonObject, JsonValue } from "../../api/Json.js"
import type { CallBatchEnd, CallBatchStart } from "../../api/TraceCall.js"
import type { FeedbackCreateReq } from "../../api/TraceMisc.js"
import { isChoice, type MessageOrChoice } from "../../api/Trajectory.js"
import type { TraceClient } from "../../client/TraceClient.js"
import type { CallOptions, ModelUsage, Stats } from "../Tracing.js"

/** A call in flight: its ids, its parent, the usage of itself and its ended children. */
export interface Handle {
  readonly id: string
  readonly traceId: string
  readonly parent: Handle | undefined
  readonly usage: Map<string, Sum>
}

/** A usage being added up. */
type Sum = { -readonly [K in keyof ModelUsage]: ModelUsage[K] }

/** The call the running code is inside of, if any (inherited by forked fibers). */
export const currentCall: FiberRef.FiberRef<Handle | undefined> = globalValue(
  Symbol.for("effect-rl/Tracing/currentCall"),
  () => FiberRef.unsafeMake<Handle | undefined>(undefined)
)

/**
 * Set by a gatherer that opened a rollout's call around `Rollout.run` (so that the call can carry the reward):
 * the `Rollout.run` inside takes that call instead of opening its own, and clears the flag for its body.
 */
export const rolloutOpened: FiberRef.FiberRef<boolean> = globalValue(
  Symbol.for("effect-rl/Tracing/rolloutOpened"),
  () => FiberRef.unsafeMake(false)
)

/** An item of the queue: a call's start or end, or a feedback. */
export type Item =
  | { readonly _tag: "Call"; readonly item: CallBatchStart | CallBatchEnd }
  | { readonly _tag: "Feedback"; readonly request: FeedbackCreateReq }

/** Options of {@link make}, resolved. */
export interface QueueOptions {
  readonly capacity: number
  readonly batchSize: number
  readonly flushInterval: Duration.Duration
  readonly finalFlushTimeout: Duration.Duration
  readonly feedbackConcurrency: number
}

// ---------------------------------------------------------------------------------------------------------------
// JSON and ids
// ---------------------------------------------------------------------------------------------------------------

/** Any value as plain JSON (what `JSON.stringify` keeps); a value it cannot take becomes its `String`. */
export const toJson = (value: unknown): JsonValue => {
  if (value === undefined) return null
  try {
    const text = JSON.stringify(value, (_, v: unknown) => (typeof v === "bigint" ? v.toString() : v))
    return text === undefined ? null : (JSON.parse(text) as JsonValue)
  } catch {
    return String(value)
  }
}

/** An object as a JSON object (a non-object value is put under `value`). */
export const toJsonObject = (value: unknown): JsonObject => {
  const json = toJson(value)
  return json !== null && typeof json === "object" && !Array.isArray(json) ? (json as JsonObject) : { value: json }
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"))

/** A UUIDv7 (RFC 9562): 48 bits of milliseconds, then random bits. */
export const uuid7 = (millis: number): string => {
  const bytes = randomFillSync(new Uint8Array(16))
  let ms = Math.max(0, Math.floor(millis))
  for (let i = 5; i >= 0; i--) {
    bytes[i] = ms % 256
    ms = Math.floor(ms / 256)
  }
  bytes[6] = (bytes[6]! & 0x0f) | 0x70
  bytes[8] = (bytes[8]! & 0x3f) | 0x80
  const h = Array.from(bytes, (b) => HEX[b]!)
  return `${h.slice(0, 4).join("")}-${h.slice(4, 6).join("")}-${h.slice(6, 8).join("")}-${h.slice(8, 10).join("")}-${h.slice(10).join("")}`
}

const iso = (millis: number) => new Date(millis).toISOString()

/** What an error says, in one line (a tagged error's tag and message; never more than 500 characters). */
export const describeError = (error: unknown): string => {
  const text =
    error instanceof Error
      ? `${(error as { readonly _tag?: unknown })._tag ?? error.name}: ${error.message}`
      : typeof error === "string"
        ? error
        : String(toJson(error))
  return text.length > 500 ? `${text.slice(0, 500)}...` : text
}

/** Adds usage into a usage map. */
export const addUsage = (into: Map<string, Sum>, model: string, usage: ModelUsage): void => {
  const sum = into.get(model)
  if (sum === undefined) {
    into.set(model, { ...usage })
  } else {
    sum.prompt_tokens += usage.prompt_tokens
    sum.completion_tokens += usage.completion_tokens
    sum.total_tokens += usage.total_tokens
    sum.requests += usage.requests
  }
}

/** A choice as a trace shows it: without logprobs and token ids. */
export const choiceJson = (choice: Choice): JsonValue => {
  const { logprobs: _logprobs, token_ids: _tokenIds, ...rest } = choice
  return toJson(rest)
}

/** A trajectory's main conversation as messages (a recorded choice as its assistant message). */
export const messagesOf = (trajectory: { readonly messages_and_choices: ReadonlyArray<MessageOrChoice> }): JsonValue =>
  toJson(trajectory.messages_and_choices.map((entry) => (isChoice(entry) ? entry.message : entry)))

/** A short name for a scenario: its text, its `id`, `name` or `title`, else `scenario <index>`. */
export const scenarioName = (scenario: unknown, index: number): string => {
  const short = (text: string) => (text.length > 60 ? `${text.slice(0, 57)}...` : text)
  if (typeof scenario === "string") return short(scenario.replace(/\s+/g, " "))
  if (typeof scenario === "number") return String(scenario)
  if (typeof scenario === "object" && scenario !== null) {
    for (const key of ["id", "name", "title"]) {
      const value = (scenario as Record<string, unknown>)[key]
      if (typeof value === "string" || typeof value === "number") return short(String(value))
    }
  }
  return `scenario ${index}`
}

// ---------------------------------------------------------------------------------------------------------------
// The queue and its worker
// ---------------------------------------------------------------------------------------------------------------

/** The running queue: offer items, read the counters. */
export interface Sink {
  readonly offer: (item: Item) => Effect.Effect<void>
  readonly stats: Effect.Effect<Stats>
}

class Counters {
  enqueued = 0
  sent = 0
  dropped = 0
  failed = 0
  firstError: string | undefined = undefined

  fail(items: number, error: unknown): void {
    this.failed += items
    if (this.firstError === undefined) this.firstError = describeError(error)
  }

  get stats(): Stats {
    return {
      enqueued: this.enqueued,
      sent: this.sent,
      dropped: this.dropped,
      failed: this.failed,
      firstError: this.firstError
    }
  }
}

/** Starts the queue and its worker in the scope (see the module comment). */
export const makeSink = (client: TraceClient["Type"], options: QueueOptions): Effect.Effect<Sink, never, Scope.Scope> =>
  Effect.gen(function* () {
    const queue = yield* Queue.dropping<Item>(options.capacity)
    const wake = yield* Queue.sliding<void>(1)
    const closing = yield* Deferred.make<void>()
    const counters = new Counters()
    let closed = false

    const send = (items: ReadonlyArray<Item>) =>
      Effect.gen(function* () {
        const batch: Array<CallBatchStart | CallBatchEnd> = []
        const feedback: Array<FeedbackCreateReq> = []
        for (const item of items) {
          if (item._tag === "Call") batch.push(item.item)
          else feedback.push(item.request)
        }
        if (batch.length > 0) {
          yield* client.callUpsertBatch({ batch }).pipe(
            Effect.matchCause({
              onSuccess: () => {
                counters.sent += batch.length
              },
              onFailure: (cause) => counters.fail(batch.length, Cause.squash(cause))
            }),
            Effect.onInterrupt(() => Effect.sync(() => counters.fail(batch.length, "interrupted before it was sent")))
          )
        }
        yield* Effect.forEach(
          feedback,
          (request) =>
            createFeedback(request).pipe(
              Effect.matchCause({
                onSuccess: () => {
                  counters.sent += 1
                },
                onFailure: (cause) => counters.fail(1, Cause.squash(cause))
              }),
              Effect.onInterrupt(() => Effect.sync(() => counters.fail(1, "interrupted before it was sent")))
            ),
          { concurrency: options.feedbackConcurrency, discard: true }
        )
      })

    /**
     * `feedback/create` is not idempotent, so the client sends it once. The feedback carries its own id: after
     * a failure on the way (a reset connection, a time-out), a query by that id tells whether it was stored,
     * and it is sent once more only when it was not.
     */
    const createFeedback = (request: FeedbackCreateReq) =>
      client.feedbackCreate(request).pipe(
        Effect.catchIf(
          (error) => request.id != null && (error.reason === "Transport" || error.reason === "Timeout"),
          (error) =>
            client
              .feedbackQuery({
                project_id: request.project_id,
                fields: ["id"],
                query: { $expr: { $eq: [{ $getField: "id" }, { $literal: request.id! }] } }
              })
              .pipe(
                Effect.flatMap(({ result }) => (result.length > 0 ? Effect.void : client.feedbackCreate(request))),
                Effect.mapError(() => error)
              )
        )
      )

    const drain = Effect.gen(function* () {
      while ((yield* Queue.size(queue)) > 0) {
        const chunk = yield* Queue.takeUpTo(queue, options.batchSize)
        yield* send(Chunk.toReadonlyArray(chunk))
      }
    })

    const worker = Effect.gen(function* () {
      while (true) {
        const stop = yield* Effect.raceAll([
          Effect.as(Effect.sleep(options.flushInterval), false),
          Effect.as(Queue.take(wake), false),
          Effect.as(Deferred.await(closing), true)
        ])
        yield* drain
        if (stop) return
      }
    })
    const fiber = yield* Effect.forkScoped(worker)

    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        closed = true
        yield* Deferred.succeed(closing, undefined)
        const finished = yield* Fiber.join(fiber).pipe(Effect.timeout(options.finalFlushTimeout), Effect.exit)
        if (Exit.isFailure(finished)) {
          yield* Fiber.interrupt(fiber)
          const left = yield* Queue.size(queue)
          if (left > 0) {
            counters.fail(left, `the final flush did not finish within ${Duration.format(options.finalFlushTimeout)}`)
          }
        }
        const { dropped, failed, enqueued, firstError } = counters
        if (dropped + failed > 0) {
          yield* Effect.logWarning(
            `tracing: ${dropped + failed} of ${enqueued + dropped} trace items were not recorded ` +
              `(${dropped} dropped: the queue was full; ${failed} not taken by the trace service)` +
              (firstError === undefined ? "" : `; the first error: ${firstError}`)
          )
        }
      })
    )

    const offer = (item: Item): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (closed) {
          counters.dropped += 1
          return Effect.void
        }
        return Effect.flatMap(Queue.offer(queue, item), (accepted) => {
          if (!accepted) {
            counters.dropped += 1
            return Effect.void
          }
          counters.enqueued += 1
          return Effect.flatMap(Queue.size(queue), (size) =>
            size >= options.batchSize ? Queue.offer(wake, undefined) : Effect.void
          )
        })
      })

    return { offer, stats: Effect.sync(() => counters.stats) } satisfies Sink
  })

// ---------------------------------------------------------------------------------------------------------------
// Calls
// ---------------------------------------------------------------------------------------------------------------

/** Runs `body` as a traced call of `project`, queued through `offer` (see the module comment). */
export const traceCall =
  (project: string, offer: (item: Item) => Effect.Effect<void>) =>
  <A, E, R>(options: CallOptions<A> | (() => CallOptions<A>), body: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.uninterruptibleMask((restore) =>
      Effect.gen(function* () {
        const spec = typeof options === "function" ? options() : options
        const parent = yield* FiberRef.get(currentCall)
        const started = yield* Clock.currentTimeMillis
        const handle: Handle = {
          id: uuid7(started),
          traceId: parent?.traceId ?? uuid7(started),
          parent,
          usage: new Map()
        }
        yield* offer({
          _tag: "Call",
          item: {
            mode: "start",
            req: {
              start: {
                project_id: project,
                id: handle.id,
                trace_id: handle.traceId,
                parent_id: parent?.id ?? null,
                op_name: spec.op,
                display_name: spec.displayName ?? null,
                started_at: iso(started),
                attributes: spec.attributes ?? {},
                inputs: spec.inputs
              }
            }
          }
        })
        const exit = yield* Effect.exit(restore(Effect.locally(body, currentCall, handle)))
        const ended = yield* Clock.currentTimeMillis
        let output: JsonValue | undefined
        let exception: string | null = null
        if (Exit.isSuccess(exit)) {
          try {
            for (const [model, usage] of spec.usage?.(exit.value) ?? []) addUsage(handle.usage, model, usage)
            output = spec.output === undefined ? undefined : spec.output(exit.value)
          } catch (error) {
            output = { tracing_error: describeError(error) }
          }
        } else {
          exception = Cause.isInterruptedOnly(exit.cause) ? "Interrupted" : describeError(Cause.squash(exit.cause))
        }
        if (parent !== undefined) for (const [model, usage] of handle.usage) addUsage(parent.usage, model, usage)
        yield* offer({
          _tag: "Call",
          item: {
            mode: "end",
            req: {
              end: {
                project_id: project,
                id: handle.id,
                ended_at: iso(ended),
                exception,
                ...(output === undefined ? {} : { output }),
                summary: handle.usage.size === 0 ? {} : { usage: Object.fromEntries(handle.usage) }
              }
            }
          }
        })
        return yield* exit
      })
    )
