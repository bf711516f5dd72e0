/**
 * Server-sent events: an incremental parser that takes text as it arrives (an event may be split anywhere
 * across network reads) and yields whole events. Lines end in LF, CRLF or CR; lines starting with `:` are
 * comments; several `data` lines join with LF; a blank line ends an event.
 *
 * @internal
 */
import * as Channel from "effect/Channel"
import * as Chunk from "effect/Chunk"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"

/** One event. */
export interface SseEvent {
  /** The `event` field, when given (`message` is the default type). */
  readonly event: string | undefined
  /** The `data` lines joined with LF. */
  readonly data: string
  /** The `id` field, when given. */
  readonly id: string | undefined
}

/** An incremental parser: `feed` text as it comes, `end` once at the end of input. */
export interface SseParser {
  readonly feed: (text: string) => Array<SseEvent>
  readonly end: () => Array<SseEvent>
}

/** The parser's state machine: whole events are pushed onto the array given. */
export interface Scanner {
  readonly feed: (text: string, out: Array<SseEvent>) => void
  readonly end: (out: Array<SseEvent>) => void
}

/** Make the parser's state machine, with empty state. */
export const makeScanner = (): Scanner => {
  // What follows the last line end: never holds a CR or an LF.
  let buffer = ""
  // A CR ended the previous chunk: an LF starting the next one belongs to it.
  let pendingCr = false
  // The data lines so far, joined with LF; undefined before the event's first data line.
  let data: string | undefined
  let event: string | undefined
  let id: string | undefined

  const dispatch = (out: Array<SseEvent>) => {
    if (data !== undefined) out.push({ event, data, id })
    data = undefined
    event = undefined
    id = undefined
  }

  /** The line `text[start, end)`; a `data` line's value is cut from `text` once, with no copy of the line. */
  const line = (text: string, start: number, end: number, out: Array<SseEvent>) => {
    if (start === end) return dispatch(out)
    const first = text.charCodeAt(start)
    if (first === 58 /* ':' */) return
    if (first === 100 /* 'd' */ && text.startsWith("data:", start)) {
      const from = text.charCodeAt(start + 5) === 32 /* ' ' */ && start + 5 < end ? start + 6 : start + 5
      const value = text.slice(from, end)
      data = data === undefined ? value : `${data}\n${value}`
      return
    }
    const whole = text.slice(start, end)
    const colon = whole.indexOf(":")
    const field = colon === -1 ? whole : whole.slice(0, colon)
    let value = colon === -1 ? "" : whole.slice(colon + 1)
    if (value.charCodeAt(0) === 32 /* ' ' */) value = value.slice(1)
    switch (field) {
      case "data":
        data = data === undefined ? value : `${data}\n${value}`
        break
      case "event":
        event = value
        break
      case "id":
        if (!value.includes("\0")) id = value
        break
      default:
      // `retry` and unknown fields do not concern a client that does not reconnect.
    }
  }

  const feed = (text: string, out: Array<SseEvent>) => {
    if (text === "") return
    if (pendingCr && text.charCodeAt(0) === 10) text = text.slice(1)
    pendingCr = false
    // The buffer holds no line end: only the new text is scanned.
    let i = buffer.length
    buffer = buffer === "" ? text : buffer + text
    let start = 0
    const length = buffer.length
    for (; i < length; i++) {
      const c = buffer.charCodeAt(i)
      if (c === 10 || c === 13) {
        line(buffer, start, i, out)
        if (c === 13) {
          if (i + 1 < length) {
            if (buffer.charCodeAt(i + 1) === 10) i++
          } else {
            pendingCr = true
          }
        }
        start = i + 1
      }
    }
    buffer = start === 0 ? buffer : buffer.slice(start)
  }

  const end = (out: Array<SseEvent>) => {
    if (buffer !== "") line(buffer, 0, buffer.length, out)
    buffer = ""
    dispatch(out)
  }

  return { feed, end }
}

/** Make a parser with empty state. */
export const makeParser = (): SseParser => {
  const scanner = makeScanner()
  return {
    feed: (text) => {
      const out: Array<SseEvent> = []
      scanner.feed(text, out)
      return out
    },
    end: () => {
      const out: Array<SseEvent> = []
      scanner.end(out)
      return out
    }
  }
}

/** Parse a stream of text into events; an event left unterminated at the end is still delivered. */
export const events = <E, R>(text: Stream.Stream<string, E, R>): Stream.Stream<SseEvent, E, R> =>
  Stream.suspend(() => {
    const parser = makeParser()
    return text.pipe(
      Stream.mapConcat(parser.feed),
      Stream.concat(Stream.suspend(() => Stream.fromIterable(parser.end())))
    )
  })

/** What {@link decodeEvents} makes of an event: a value, a failure, or `End` (the stream ends before it). */
export type Decoded<A, E> = Either.Either<A, E> | typeof End

/** Ends the stream of {@link decodeEvents} at an event (as `data: [DONE]` does a chat completion's). */
export const End: unique symbol = Symbol.for("effect-rl/client/Sse/End")

/**
 * Bytes of an event stream to decoded values in ONE stage: each read is decoded as UTF-8 text, split into
 * events and each event decoded by `decode`, and the values of a read are emitted as one chunk. A failure is
 * emitted after the values before it and ends the stream; a failure of the body is mapped by `onBodyError`. An
 * event left unterminated at the end of input is still decoded. The same as `Stream.mapError`,
 * `Stream.decodeText`, {@link events} and a `Stream.mapEffect` of `decode`, without a stage per event.
 *
 * `End` ends the stream after the values before it; the rest of the body is then read and dropped for at most
 * `drainAfterEnd` (nothing after `End` is decoded, and a failure of that rest is not the caller's): a server
 * ends its body right after its last event, and a body read to its end lets the HTTP client keep the
 * connection, where closing the stream first would abort the request and the connection with it. A server that
 * holds the body open past that time has it aborted. (The body is read through `Stream.toPull`, so that this
 * one bounded wait is an `Effect.timeout`: a channel would need a merge with a timer, which costs more per
 * request than the pull costs per read.)
 */
export const decodeEvents = <A, E, E1, E2, R>(
  bytes: Stream.Stream<Uint8Array, E1, R>,
  decode: (event: SseEvent) => Decoded<A, E>,
  options: { readonly drainAfterEnd: Duration.DurationInput; readonly onBodyError: (error: E1) => E2 }
): Stream.Stream<A, E | E2, R> =>
  Stream.fromChannel(
    Channel.unwrapScoped(
      Effect.map(Stream.toPull(bytes), (pull) => {
        const decoder = new TextDecoder()
        const scanner = makeScanner()
        const pending: Array<SseEvent> = []
        type Next = Effect.Effect<Chunk.Chunk<A>, Option.Option<E | E2>, R>
        const finished: Next = Effect.fail(Option.none())
        const drained: Next = Effect.zipRight(
          Effect.ignore(Effect.timeout(Effect.forever(pull), options.drainAfterEnd)),
          finished
        )
        // How the stream stops, once the values read before it are emitted.
        let stop: Next | undefined
        /** Decodes the pending events into `out`, noting a stop. */
        const drain = (out: Array<A>) => {
          for (let i = 0; i < pending.length && stop === undefined; i++) {
            const decoded = decode(pending[i]!)
            if (decoded === End) stop = drained
            else if (Either.isLeft(decoded)) stop = Effect.fail(Option.some(decoded.left))
            else out.push(decoded.right)
          }
          pending.length = 0
        }
        const emitOr = (out: Array<A>, otherwise: () => Next): Next =>
          out.length > 0 ? Effect.succeed(Chunk.unsafeFromArray(out)) : otherwise()
        const next: Next = Effect.suspend(() =>
          stop !== undefined
            ? stop
            : Effect.matchEffect(pull, {
                onFailure: (error): Next => {
                  if (Option.isSome(error)) return Effect.fail(Option.some(options.onBodyError(error.value)))
                  // The end of input: an event left unterminated is still decoded.
                  scanner.end(pending)
                  const out: Array<A> = []
                  drain(out)
                  if (stop === undefined || stop === drained) stop = finished
                  return emitOr(out, () => stop!)
                },
                onSuccess: (input) => {
                  const out: Array<A> = []
                  for (const piece of input) {
                    scanner.feed(decoder.decode(piece, { stream: true }), pending)
                    drain(out)
                    if (stop !== undefined) break
                  }
                  return emitOr(out, () => next)
                }
              })
        )
        return Stream.toChannel(Stream.repeatEffectChunkOption(next))
      })
    )
  )
