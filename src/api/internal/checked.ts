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
import { plainOptions } from "./fastPath.js"

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
    /**
     * What `schema` gives for a value, in one pass, or `undefined` when not sure (then `schema` runs): for a
     * `schema` whose two sides are the same (no transformation inside), so one function serves both directions
     * and `schema`'s derived sides too (a struct with defaults around this one encodes and decodes its type
     * side, `AST.typeAST`, which rebuilds any recursive part, so an identity check against `schema` would
     * send every value there to the slow path). It must give only values `schema` takes, as `schema` gives them.
     */
    readonly fast?: ((u: unknown) => unknown) | undefined
  } = {}
): Schema.Schema<A, I> => {
  const check = (value: A): Either.Either<A, ParseResult.ParseIssue> => {
    const issue = refuse(value)
    return issue === undefined ? Either.right(value) : Either.left(issue)
  }
  const fast = annotations.fast
  return Schema.declare(
    [schema],
    {
      decode: (inner) => {
        const decode = ParseResult.decodeUnknown(inner)
        return (u, options) => {
          const value = fast !== undefined && plainOptions(options) ? fast(u) : undefined
          return value !== undefined ? check(value as A) : ParseResult.flatMap(decode(u, options), check)
        }
      },
      encode: (inner) => {
        const encode = ParseResult.encodeUnknown(inner)
        const encodeChecked = (value: A, options: AST.ParseOptions | undefined) => {
          const encoded = fast !== undefined && plainOptions(options) ? fast(value) : undefined
          return encoded !== undefined ? ParseResult.succeed(encoded as I) : encode(value, options)
        }
        return (u, options) =>
          typeof u === "object" && u !== null
            ? ParseResult.flatMap(check(u as A), (value) => encodeChecked(value, options))
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
