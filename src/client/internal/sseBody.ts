/**
 * Server-sent events read straight from the Node body of a response of the platform's Node clients (undici's
 * and node:http's), without a `Stream` of bytes in between: the body's text is read with `read()` as it comes,
 * split into events by the SSE scanner and each event decoded at once, and the values reach the caller's
 * `Stream` as one chunk per read. What the platform's `response.stream` costs per read (its channel, a latch, a
 * pull through a second channel executor) is spent once per request here. {@link decodeBody} means what
 * `Sse.decodeEvents` means, for a body {@link nodeBodyOf} finds; for any other response the caller uses that.
 *
 * @internal
 */
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Channel from "effect/Channel"
import * as Chunk from "effect/Chunk"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Stream from "effect/Stream"
import { type Decoded, End, makeScanner, type SseEvent } from "./sse.js"
import { isLiveClock } from "./timeout.js"

/** The part of a Node `Readable` read here. */
interface NodeBody {
  read(): string | Uint8Array | null
  on(event: string, listener: (error?: unknown) => void): unknown
  off(event: string, listener: (error?: unknown) => void): unknown
  destroy(): unknown
  readonly readableEnded: boolean
  readonly readableFlowing: boolean | null
  readonly destroyed: boolean
}

/** A body to read, and how to abort its request. */
export interface BodySource {
  readonly body: NodeBody
  /** Aborts the request (the platform's abort controller, else the body destroyed). */
  readonly abort: () => void
  /**
   * The response the body came with, held for as long as the body is read: the platform aborts the request of a
   * response that is garbage collected before its body was asked for (as `response.stream` would have asked).
   */
  readonly response?: unknown
}

const isNodeBody = (u: unknown): u is NodeBody => {
  if (typeof u !== "object" || u === null) return false
  const r = u as Record<string, unknown>
  return (
    typeof r.read === "function" &&
    typeof r.on === "function" &&
    typeof r.off === "function" &&
    typeof r.destroy === "function" &&
    typeof r.readableEnded === "boolean"
  )
}

/**
 * The unread Node body behind a response of `@effect/platform-node`'s clients, with its request's abort: the
 * platform's interruptible response keeps the response made by the client (`original`) and its abort
 * controller; undici's response keeps the body as `source.body`, node:http's as `source`. `undefined` for any
 * other response (a fetch client, a test double, a body already being read): the caller then reads
 * `response.stream`. A property read, not an API: a platform that renames these fields loses this path, not
 * its streams (a test checks the path is taken with the Node clients).
 */
export const nodeBodyOf = (response: HttpClientResponse.HttpClientResponse): BodySource | undefined => {
  const outer = response as unknown as { readonly original?: unknown; readonly controller?: unknown }
  const controller = outer.controller instanceof AbortController ? outer.controller : undefined
  const inner = (controller !== undefined ? outer.original : response) as { readonly source?: unknown } | undefined
  const source = inner?.source as { readonly body?: unknown } | undefined
  const body = isNodeBody(source?.body) ? source.body : isNodeBody(source) ? source : undefined
  if (body === undefined || body.readableFlowing !== null || body.readableEnded || body.destroyed) return undefined
  return {
    body,
    response,
    abort: () => {
      if (!body.destroyed) body.destroy()
      controller?.abort()
    }
  }
}

/** The options of a decode of one read among others (a character may continue in the next). */
const STREAM = { stream: true } as const

/** No more values: the stream ends. */
const Done: unique symbol = Symbol("effect-rl/client/SseBody/Done")

/** The error of a body that closes before its end without one. */
const prematureClose = (): Error => new Error("the body closed before its end")

/**
 * The body's events decoded by `decode`, as `Sse.decodeEvents` does it from `response.stream`: the values of a
 * read emitted as one chunk, a failure emitted after the values before it, `End` ending the stream after a
 * bounded read of the rest of the body (`drainAfterEnd`), an event left unterminated at the end of input still
 * decoded, and a failure of the body mapped by `onBodyError`. The request is aborted when the stream stops before
 * the body's end (a failure, an interruption, a consumer that takes no more).
 */
export const decodeBody = <A, E, E2>(
  source: BodySource,
  decode: (event: SseEvent) => Decoded<A, E>,
  options: {
    readonly drainAfterEnd: Duration.DurationInput
    readonly onBodyError: (cause: unknown) => E2
  }
): Stream.Stream<A, E | E2> =>
  Stream.fromChannel(
    Channel.suspend(() => {
      type Next = Effect.Effect<Chunk.Chunk<A> | typeof Done, E | E2>
      const { body } = source
      const scanner = makeScanner()
      const pending: Array<SseEvent> = []
      // A streaming decoder: a character cut between two reads is decoded once whole.
      const decoder = new TextDecoder()
      const drainMillis = Duration.toMillis(Duration.decode(options.drainAfterEnd))
      let ended = false
      // The body's failure, once it fails.
      let failed = false
      let failure: unknown
      // Called when the body is readable, ends or fails: the drain's wait after `End`.
      let wake: (() => void) | undefined
      // The read waiting for the body: woken once the body gives something, which waits in `ready` until a read
      // takes it. (The wait has no canceler, which costs ~9 steps of the fiber a read: a read interrupted while it
      // waits leaves a stale callback here, which the fiber ignores, and what the body gave stays in `ready` for
      // the next read, if the stream is read again.)
      let waiting: ((next: Next) => void) | undefined
      let ready: Next | undefined
      const onReadable = () => {
        const resume = wake
        wake = undefined
        resume?.()
        if (waiting !== undefined && ready === undefined) {
          if (draining) {
            if (!drainOver()) return
          } else {
            try {
              ready = step()
            } catch (defect) {
              ready = Effect.die(defect)
            }
            if (ready === undefined) return
          }
          const resumeRead = waiting
          waiting = undefined
          resumeRead(takeReady)
        }
      }
      const onEnd = () => {
        ended = true
        onReadable()
      }
      const onError = (error: unknown) => {
        if (!failed) {
          failed = true
          failure = error
        }
        onReadable()
      }
      const onClose = () => {
        if (!ended && !failed) {
          failed = true
          failure = prematureClose()
        }
        onReadable()
      }
      body.on("readable", onReadable)
      body.on("end", onEnd)
      body.on("error", onError)
      body.on("close", onClose)
      /** Waits for the body to be readable, to end or to fail. */
      const waitBody = Effect.async<void>((resume) => {
        wake = () => resume(Effect.void)
        return Effect.sync(() => {
          wake = undefined
        })
      })

      const finished: Next = Effect.succeed(Done)
      /** Reads what the body holds and drops it (nothing after `End` is decoded); whether the body is over. */
      const dropRead = (): boolean => {
        while (body.read() !== null) {
          // dropped
        }
        return ended || failed
      }
      /** Reads the rest of the body and drops it, until its end or its failure. */
      const rest: Effect.Effect<void> = Effect.suspend(() =>
        dropRead() ? Effect.void : Effect.flatMap(waitBody, () => rest)
      )
      // The drain under the live clock: the read waits in the slot reads wait in, woken when the body is over or
      // when `drainTimer` has fired (no fiber, no canceler: ~15 steps of the fiber fewer than a wait of its own).
      let draining = false
      let drainTimer: ReturnType<typeof setTimeout> | undefined
      /** Whether the drain is over (the body's end or failure, or the timer): then `finished` is ready. */
      const drainOver = (): boolean => {
        if (!dropRead() && drainTimer !== undefined) return false
        clearTimeout(drainTimer)
        drainTimer = undefined
        draining = false
        ready = finished
        return true
      }
      /** {@link rest} for at most `drainAfterEnd` (for the live clock only). */
      const restWithin: Next = Effect.suspend(() => {
        draining = true
        clearTimeout(drainTimer)
        const timer = setTimeout(() => {
          if (drainTimer !== timer) return
          drainTimer = undefined
          onReadable()
        }, drainMillis)
        drainTimer = timer
        return drainOver() ? takeReady : waitRead
      })
      const drained: Next = Effect.suspend(() => {
        if (dropRead()) return finished
        // A server ends its body right after its last event: a wait of one turn or two, for which the live
        // clock's sleep (a `setTimeout`) is set directly (`Effect.timeout` forks two fibers, ~50 us); under any
        // other clock (a test's), `Effect.timeout`.
        return Effect.clockWith((clock) =>
          isLiveClock(clock) ? restWithin : Effect.as(Effect.ignore(Effect.timeout(rest, options.drainAfterEnd)), Done)
        )
      })
      // How the stream stops, once the values read before it are emitted.
      let stop: Next | undefined
      /** Decodes the pending events into `out`, noting a stop. */
      const decodePending = (out: Array<A>) => {
        for (let i = 0; i < pending.length && stop === undefined; i++) {
          const decoded = decode(pending[i]!)
          if (decoded === End) stop = drained
          else if (Either.isLeft(decoded)) stop = Effect.fail(decoded.left)
          else out.push(decoded.right)
        }
        pending.length = 0
      }
      /** What the body gives now (values, a stop, a failure), or `undefined` when there is nothing yet. */
      const step = (): Next | undefined => {
        if (stop !== undefined) return stop
        const out: Array<A> = []
        while (stop === undefined) {
          const text = body.read()
          if (text === null) break
          scanner.feed(typeof text === "string" ? text : decoder.decode(text, STREAM), pending)
          decodePending(out)
        }
        if (out.length > 0) return Effect.succeed(Chunk.unsafeFromArray(out))
        if (stop !== undefined) return stop
        if (failed) return Effect.fail(options.onBodyError(failure))
        if (ended) {
          // The end of input: an event left unterminated is still decoded.
          scanner.end(pending)
          decodePending(out)
          if (stop === undefined || stop === drained) stop = finished
          return out.length > 0 ? Effect.succeed(Chunk.unsafeFromArray(out)) : stop
        }
        return undefined
      }
      /** What `onReadable` read for the read it woke (or a read after it, if that one was interrupted). */
      const takeReady: Next = Effect.suspend(() => {
        const got = ready!
        ready = undefined
        return got
      })
      /** Waits for the body to give something, read as it comes (by `onReadable`, with no second pass). */
      const waitRead = Effect.async<Chunk.Chunk<A> | typeof Done, E | E2>((resume) => {
        waiting = resume
      })
      const next: Next = Effect.suspend(() => (ready !== undefined ? takeReady : (step() ?? waitRead)))
      const loop: Channel.Channel<Chunk.Chunk<A>, unknown, E | E2, unknown, void, unknown> = Channel.flatMap(
        Channel.fromEffect(next),
        (out) => (out === Done ? Channel.void : Channel.flatMap(Channel.write(out), () => loop))
      )
      return Channel.ensuring(
        loop,
        Effect.sync(() => {
          waiting = undefined
          clearTimeout(drainTimer)
          body.off("readable", onReadable)
          body.off("end", onEnd)
          body.off("error", onError)
          body.off("close", onClose)
          // `source` (and so its response, see `BodySource`) is reachable from here until the stream ends.
          if (!ended) source.abort()
        })
      )
    })
  )
