/**
 * JSON-lines responses of the trace surface (`application/jsonl`, one JSON object per line). Rows are
 * written a thousand lines per chunk, so a large answer streams instead of being joined into one string.
 */
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Stream from "effect/Stream"
import { jsonLinesContentType } from "../../../../api/TraceApi.js"

/** Lines per written chunk. */
const LINES_PER_CHUNK = 1000

/** A JSON-lines response of rows (an empty body for none). */
export const jsonLinesResponse = (rows: ReadonlyArray<unknown>): HttpServerResponse.HttpServerResponse => {
  if (rows.length === 0) return HttpServerResponse.text("", { contentType: jsonLinesContentType })
  const chunks = Stream.range(0, Math.ceil(rows.length / LINES_PER_CHUNK) - 1).pipe(
    Stream.map((i) =>
      rows
        .slice(i * LINES_PER_CHUNK, (i + 1) * LINES_PER_CHUNK)
        .map((row) => `${JSON.stringify(row)}\n`)
        .join("")
    ),
    Stream.encodeText
  )
  return HttpServerResponse.stream(chunks, { contentType: jsonLinesContentType })
}

/** A JSON-lines response of a stream of rows, a line per row as it comes. */
export const jsonLinesStream = <E>(rows: Stream.Stream<unknown, E>) =>
  HttpServerResponse.stream(
    rows.pipe(
      Stream.map((row) => `${JSON.stringify(row)}\n`),
      Stream.encodeText
    ),
    { contentType: jsonLinesContentType }
  )

/** A JSON-lines response of a stream of text, each piece whole lines (`<json>\n`...). */
export const jsonLinesText = <E>(text: Stream.Stream<string, E>) =>
  HttpServerResponse.stream(Stream.encodeText(text), { contentType: jsonLinesContentType })
