import { describe, expect, it } from "@effect/vitest"
import * as Arbitrary from "effect/Arbitrary"
import * as FastCheck from "effect/FastCheck"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { TokenLogprob, TokenLogprobs } from "../../src/api/ChatCompletion.js"

const Plain = Schema.Array(TokenLogprob)

// Values near the schema: valid entries, and entries with one field broken or an extra key.
const entry = Arbitrary.make(TokenLogprob)
const broken = FastCheck.oneof(
  entry,
  entry.map((e) => ({ ...e, logprob: Number.NaN })),
  entry.map((e) => ({ ...e, token: 1 })),
  entry.map((e) => ({ ...e, bytes: [1.5] })),
  entry.map((e) => ({ ...e, top_logprobs: [{ token: "x" }] })),
  entry.map((e) => ({ ...e, extra: true })),
  FastCheck.constant(null)
)

describe("the fast path of logprob entries", () => {
  it("decodes and encodes exactly as the plain array schema, valid or not", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.array(broken, { maxLength: 4 }), (value) => {
        for (const [fast, plain] of [
          [Schema.decodeUnknownEither(TokenLogprobs), Schema.decodeUnknownEither(Plain)],
          [Schema.encodeUnknownEither(TokenLogprobs), Schema.encodeUnknownEither(Plain)]
        ] as const) {
          const a = fast(value)
          const b = plain(value)
          expect(a._tag).toBe(b._tag)
          if (a._tag === "Right" && b._tag === "Right") expect(a.right).toEqual(b.right)
          if (a._tag === "Left" && b._tag === "Left") {
            expect(ParseResult.ArrayFormatter.formatErrorSync(a.left)).toEqual(
              ParseResult.ArrayFormatter.formatErrorSync(b.left)
            )
          }
        }
      }),
      { numRuns: 300 }
    )
  })
})
