import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as Stream from "effect/Stream"
import { decodeLines, type Line } from "../../src/client/internal/jsonLines.js"
import { cutAt } from "../support/utf8.js"

/** The stages `decodeLines` stands for: text, `Stream.splitLines`, numbering, blank lines left out, `mapEffect`. */
const staged = <A, E, E1>(bytes: Stream.Stream<Uint8Array, E1>, decode: (line: Line) => Either.Either<A, E>) =>
  bytes.pipe(
    Stream.decodeText(),
    Stream.splitLines,
    Stream.zipWithIndex,
    Stream.filter(([text]) => text.trim() !== ""),
    Stream.map(([text, index]) => ({ number: index + 1, text })),
    Stream.mapEffect((line) => Either.match(decode(line), { onLeft: Effect.fail, onRight: Effect.succeed }))
  )

/** The body cut at the given points, as network reads would cut it (inside a CRLF or a UTF-8 sequence too). */
const reads = (body: Uint8Array, cuts: ReadonlyArray<number>): Stream.Stream<Uint8Array> => {
  const pieces = cutAt(body, cuts)
  // Two reads arrive together now and then: a chunk of several pieces.
  return Stream.fromChunks(
    ...pieces.map((piece, i) => (i % 3 === 2 ? Chunk.make(piece, piece.subarray(0, 0)) : Chunk.of(piece)))
  )
}

const line = FastCheck.oneof(
  FastCheck.constantFrom("", " ", "\t", '{"a":1}', '{"b":"é✓"}', "[1,2]", "not json", "x\ry"),
  FastCheck.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v))
)
const eol = FastCheck.constantFrom("\n", "\r\n", "\r")
const body = FastCheck.array(FastCheck.tuple(line, eol), { maxLength: 8 }).chain((lines) =>
  FastCheck.boolean().map((last) =>
    lines.map(([text, end], i) => (i === lines.length - 1 && last ? text : text + end)).join("")
  )
)

/** Parse each line; a line that is not JSON fails, naming its number. */
const decode = (l: Line): Either.Either<unknown, string> => {
  try {
    return Either.right([l.number, JSON.parse(l.text)])
  } catch {
    return Either.left(`line ${l.number}`)
  }
}

describe("decodeLines", () => {
  it.effect("gives the values and the failure of the staged pipeline, however the body is cut", () =>
    Effect.promise(() =>
      FastCheck.assert(
        FastCheck.asyncProperty(body, FastCheck.array(FastCheck.nat(), { maxLength: 6 }), async (text, cuts) => {
          const bytes = new TextEncoder().encode(text)
          const run = (stream: Stream.Stream<unknown, string>) =>
            Effect.runPromise(
              Effect.either(
                Stream.runFoldEffect(stream, [] as Array<unknown>, (seen, a) => Effect.succeed([...seen, a]))
              )
            )
          const ours = await run(decodeLines(reads(bytes, cuts), decode))
          const theirs = await run(staged(reads(bytes, cuts), decode))
          expect(ours).toEqual(theirs)
          // Values before a failure are emitted too: compare what a consumer sees before it.
          const seen = async (stream: Stream.Stream<unknown, string>) => {
            const out: Array<unknown> = []
            await Effect.runPromise(Effect.either(Stream.runForEach(stream, (a) => Effect.sync(() => out.push(a)))))
            return out
          }
          expect(await seen(decodeLines(reads(bytes, cuts), decode))).toEqual(
            await seen(staged(reads(bytes, cuts), decode))
          )
        }),
        { numRuns: 300 }
      )
    )
  )

  it.effect("a body that breaks mid-line decodes the partial line first, as splitLines emits it", () =>
    Effect.gen(function* () {
      const bytes = Stream.concat(Stream.make(new TextEncoder().encode('{"a":1}\n{"b":')), Stream.fail("broke"))
      const ours = yield* Effect.either(Stream.runCollect(decodeLines(bytes, decode)))
      const theirs = yield* Effect.either(Stream.runCollect(staged(bytes, decode)))
      expect(ours).toEqual(theirs)
      expect(ours).toEqual(Either.left("line 2"))
      const whole = Stream.concat(Stream.make(new TextEncoder().encode('{"a":1}\n')), Stream.fail("broke"))
      expect(yield* Effect.either(Stream.runCollect(decodeLines(whole, decode)))).toEqual(Either.left("broke"))
    })
  )
})
