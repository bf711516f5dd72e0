/**
 * Server-sent events: an incremental parser that takes text as it arrives (an event may be split anywhere
 * across network reads) and yields whole events. Lines end in LF, CRLF or CR; lines starting with `:` are
 * comments; several `data` lines join with LF; a blank line ends an event.
 *
 * @internal
 */
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

/** Make a parser with empty state. */
export const makeParser = (): SseParser => {
  let buffer = ""
  // A CR ended the previous chunk: an LF starting the next one belongs to it.
  let pendingCr = false
  let data: Array<string> = []
  let hasData = false
  let event: string | undefined
  let id: string | undefined

  const dispatch = (out: Array<SseEvent>) => {
    if (hasData) out.push({ event, data: data.join("\n"), id })
    data = []
    hasData = false
    event = undefined
    id = undefined
  }

  const line = (text: string, out: Array<SseEvent>) => {
    if (text === "") return dispatch(out)
    if (text.charCodeAt(0) === 58 /* ':' */) return
    const colon = text.indexOf(":")
    const field = colon === -1 ? text : text.slice(0, colon)
    let value = colon === -1 ? "" : text.slice(colon + 1)
    if (value.charCodeAt(0) === 32 /* ' ' */) value = value.slice(1)
    switch (field) {
      case "data":
        data.push(value)
        hasData = true
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

  const feed = (text: string): Array<SseEvent> => {
    const out: Array<SseEvent> = []
    if (text === "") return out
    if (pendingCr && text.charCodeAt(0) === 10) text = text.slice(1)
    pendingCr = false
    buffer += text
    let start = 0
    for (let i = 0; i < buffer.length; i++) {
      const c = buffer.charCodeAt(i)
      if (c === 10 || c === 13) {
        line(buffer.slice(start, i), out)
        if (c === 13) {
          if (i + 1 < buffer.length) {
            if (buffer.charCodeAt(i + 1) === 10) i++
          } else {
            pendingCr = true
          }
        }
        start = i + 1
      }
    }
    buffer = buffer.slice(start)
    return out
  }

  const end = (): Array<SseEvent> => {
    const out: Array<SseEvent> = []
    if (buffer !== "") line(buffer, out)
    buffer = ""
    dispatch(out)
    return out
  }

  return { feed, end }
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
