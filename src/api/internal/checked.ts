/**
 * A schema that decodes and encodes as another one does, then asks one more question of the value: like
 * `Schema.filter`, but in one pass. A refinement validates its value against the type side of the schema it
 * refines before encoding it, which for the entries of an RL job body (hundreds of thousands of logprob
 * entries behind them) doubled the cost of encoding (bench/encode.ts).
 *
 * @internal
 */
import type * as Arbitrary from "effect/Arbitrary"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as AST from "effect/SchemaAST"

/**
 * `schema`, with `refuse` asked of every value it decodes and every value before it encodes: an issue (at
 * the value's own path) fails it. Values that are not objects go to `schema` alone (it fails them itself).
 * The annotations make JSON Schema, arbitraries, pretty-printing and equivalence those of `schema`, but for
 * the arbitrary `annotations` gives.
 */
export const checked = <A, I>(
  schema: Schema.Schema<A, I>,
  refuse: (value: A) => ParseResult.ParseIssue | undefined,
  annotations: {
    readonly identifier?: string | undefined
    /** Where property tests draw values from (default: `schema`'s values); asked only when they do. */
    readonly arbitrary?: (() => Arbitrary.LazyArbitrary<A>) | undefined
  } = {}
): Schema.Schema<A, I> => {
  const check = (value: A): Either.Either<A, ParseResult.ParseIssue> => {
    const issue = refuse(value)
    return issue === undefined ? Either.right(value) : Either.left(issue)
  }
  return Schema.declare(
    [schema],
    {
      decode: (inner) => {
        const decode = ParseResult.decodeUnknown(inner)
        return (u, options) => ParseResult.flatMap(decode(u, options), check)
      },
      encode: (inner) => {
        const encode = ParseResult.encodeUnknown(inner)
        return (u, options) =>
          typeof u === "object" && u !== null
            ? ParseResult.flatMap(check(u as A), (value) => encode(value, options))
            : encode(u, options)
      }
    },
    {
      title: String(schema.ast),
      ...(annotations.identifier === undefined ? {} : { identifier: annotations.identifier }),
      [AST.SurrogateAnnotationId]: schema.ast,
      arbitrary: (arbitrary) => (annotations.arbitrary === undefined ? arbitrary : annotations.arbitrary()),
      pretty: (pretty) => pretty,
      equivalence: (equivalence) => equivalence
    }
  ) as unknown as Schema.Schema<A, I>
}
