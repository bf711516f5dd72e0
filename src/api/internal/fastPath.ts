/**
 * A fast path for the hottest schema of the wire: the logprob entries of choices (an RL job carries hundreds
 * of thousands of them). Measured in `bench/encode.ts`: the generic struct-and-array parser made encoding a
 * job body about 5x slower than `JSON.stringify`; with this guard it is within 1.5x.
 *
 * @internal
 */
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as AST from "effect/SchemaAST"

/**
 * A schema that passes a value its guard accepts through as it is (no copy), and hands anything else to
 * `full`, so that invalid input fails with exactly the issue `full` reports and excess keys are dropped as
 * `full` drops them. Only for schemas whose type and encoded sides are the same (no transformations inside).
 * The annotations make JSON Schema, arbitraries, pretty-printing and equivalence those of `full`.
 */
export const withFastPath = <A>(full: Schema.Schema<A>, guard: (u: unknown) => u is A): Schema.Schema<A> =>
  Schema.declare(
    [full],
    {
      decode: (schema) => {
        const slow = ParseResult.decodeUnknown(schema)
        return (u, options) => (guard(u) ? ParseResult.succeed(u) : slow(u, options))
      },
      encode: (schema) => {
        const slow = ParseResult.encodeUnknown(schema)
        return (u, options) => (guard(u) ? ParseResult.succeed(u) : slow(u, options))
      }
    },
    {
      title: String(full.ast),
      [AST.SurrogateAnnotationId]: full.ast,
      arbitrary: (arbitrary) => arbitrary,
      pretty: (pretty) => pretty,
      equivalence: (equivalence) => equivalence
    }
  )

/**
 * A schema that decodes (and encodes) with `fast` when it gives a value, and with `full` when it gives
 * `undefined` (declines): `fast` must give exactly what `full` would (the same keys in the same order), and
 * decline whatever it is not sure of, so that every failure is `full`'s own. Only for schemas whose type and
 * encoded sides are the same. The annotations make JSON Schema, arbitraries, pretty-printing and equivalence
 * those of `full`.
 */
export const withFastDecode = <A>(full: Schema.Schema<A>, fast: (u: unknown) => A | undefined): Schema.Schema<A> =>
  Schema.declare(
    [full],
    {
      decode: (schema) => {
        const slow = ParseResult.decodeUnknown(schema)
        return (u, options) => {
          const value = fast(u)
          return value === undefined ? slow(u, options) : ParseResult.succeed(value)
        }
      },
      encode: (schema) => {
        const slow = ParseResult.encodeUnknown(schema)
        return (u, options) => {
          const value = fast(u)
          return value === undefined ? slow(u, options) : ParseResult.succeed(value)
        }
      }
    },
    {
      title: String(full.ast),
      [AST.SurrogateAnnotationId]: full.ast,
      arbitrary: (arbitrary) => arbitrary,
      pretty: (pretty) => pretty,
      equivalence: (equivalence) => equivalence
    }
  )

/** A plain record of a decoded JSON body (the fast decoders' working type). */
export type Record_ = Record<string, unknown>

/** An object that is not an array. */
export const isRecord = (u: unknown): u is Record_ => typeof u === "object" && u !== null && !Array.isArray(u)

/** Whether `o` has `key` as its own (present with `undefined` counts). */
export const has = (o: Record_, key: string): boolean => Object.hasOwn(o, key)

/** A string, `null` or `undefined`. */
export const isNullableString = (u: unknown): boolean => u === null || u === undefined || typeof u === "string"

/** A safe integer, `null` or `undefined`. */
export const isNullableInt = (u: unknown): boolean => u === null || u === undefined || Number.isSafeInteger(u)

/**
 * Copies the optional key of `from` to `to` when it passes `check` (present with `undefined` stays present);
 * false when it is there and fails.
 */
export const optional = (from: Record_, to: Record_, key: string, check: (u: unknown) => boolean): boolean => {
  if (!has(from, key)) return true
  const value = from[key]
  if (!check(value)) return false
  to[key] = value
  return true
}

/**
 * {@link optional} for a key whose value is decoded: sets `decode(from[key])` on `to` when `from` has the key
 * (present with `undefined` stays present if `decode` keeps it); false when the decoder declines.
 */
export const optionalDecoded = (from: Record_, to: Record_, key: string, decode: Decoder): boolean => {
  if (!has(from, key)) return true
  const value = decode(from[key])
  if (value === DECLINED) return false
  to[key] = value
  return true
}

/** `Schema.Array(Schema.Int)`: an array of safe integers. */
export const isIntArray = (u: unknown): boolean => {
  if (!Array.isArray(u)) return false
  for (let i = 0; i < u.length; i++) if (!Number.isSafeInteger(u[i])) return false
  return true
}

const isBytes = (u: unknown): boolean => u === undefined || u === null || isIntArray(u)

/**
 * A `TopLogprob` with no keys besides its own (an object with others is left to the schema, which drops them).
 * Mirrors `TopLogprob` in ../ChatCompletion.ts: keep the two in step (a property test compares them).
 */
const isTopLogprob = (u: unknown): boolean => {
  if (!isRecord(u) || typeof u.token !== "string" || !Number.isFinite(u.logprob) || !isBytes(u.bytes)) return false
  for (const key in u) if (key !== "token" && key !== "logprob" && key !== "bytes") return false
  return true
}

/** A `TokenLogprob` with no keys besides its own. Mirrors `TokenLogprob` in ../ChatCompletion.ts. */
const isTokenLogprob = (u: unknown): boolean => {
  if (!isRecord(u) || typeof u.token !== "string" || !Number.isFinite(u.logprob) || !isBytes(u.bytes)) return false
  const top = u.top_logprobs
  if (top !== undefined) {
    if (!Array.isArray(top)) return false
    for (let i = 0; i < top.length; i++) if (!isTopLogprob(top[i])) return false
  }
  for (const key in u) {
    if (key !== "token" && key !== "logprob" && key !== "bytes" && key !== "top_logprobs") return false
  }
  return true
}

/** Whether a value is an array of `TokenLogprob` entries, checked without allocating. */
export const isTokenLogprobArray = <A>(u: unknown): u is ReadonlyArray<A> => {
  if (!Array.isArray(u)) return false
  for (let i = 0; i < u.length; i++) if (!isTokenLogprob(u[i])) return false
  return true
}

/** Nesting deeper than this is left to the schema (which reports it as it does), so the guard never overflows. */
const MAX_GUARD_DEPTH = 256

const isJsonAt = (u: unknown, depth: number): boolean => {
  switch (typeof u) {
    case "string":
    case "boolean":
      return true
    case "number":
      return Number.isFinite(u)
    case "object": {
      if (u === null) return true
      if (depth > MAX_GUARD_DEPTH) return false
      if (Array.isArray(u)) {
        for (let i = 0; i < u.length; i++) if (!isJsonAt(u[i], depth + 1)) return false
        return true
      }
      return isJsonRecordAt(u, depth)
    }
    default:
      return false
  }
}

/**
 * A plain object (its prototype `Object.prototype`, as the schema's result has it; no symbol keys, which the
 * schema drops) whose values are all JSON.
 */
const isJsonRecordAt = (u: object, depth: number): boolean => {
  if (Object.getPrototypeOf(u) !== Object.prototype) return false
  for (const key in u) if (!isJsonAt((u as Record<string, unknown>)[key], depth + 1)) return false
  return Object.getOwnPropertySymbols(u).length === 0
}

/**
 * Whether a value is JSON as `JsonValue` in ../Json.ts takes it (null, booleans, finite numbers, strings, arrays
 * and plain objects of those), checked without allocating: such a value decodes and encodes to an equal one.
 */
export const isJsonValue = (u: unknown): boolean => isJsonAt(u, 0)

/** Whether a value is a plain object of JSON values (`JsonObject` in ../Json.ts). */
export const isJsonObject = (u: unknown): boolean =>
  typeof u === "object" && u !== null && !Array.isArray(u) && isJsonRecordAt(u, 0)

/** The two directions of {@link withFastCodec}: each gives what `full` gives, or declines (`undefined`). */
export interface FastCodec<A, I> {
  /** From the encoded side (parsed JSON) to what `full` decodes it to. */
  readonly decode: (u: unknown) => A | undefined
  /** From the type side to what `full` encodes it to. */
  readonly encode: (u: unknown) => I | undefined
}

/**
 * Parse options under which the fast decoders' results are `full`'s: excess keys dropped, the schema's key order.
 * (`exact` changes only which inputs fail, and the fast decoders decline those.)
 */
export const plainOptions = (options: AST.ParseOptions | undefined): boolean =>
  options === undefined ||
  ((options.onExcessProperty === undefined || options.onExcessProperty === "ignore") &&
    options.propertyOrder !== "original")

/**
 * {@link withFastDecode} for a schema whose two sides differ (defaults applied when decoding, say): one fast
 * function per direction, each giving exactly what `full` gives (the same keys in the same order, excess keys
 * dropped) or declining (`undefined`), so that every failure is `full`'s own. The fast functions are used only
 * for `full` itself, under the default handling of excess keys and key order: a derived schema
 * (`Schema.typeSchema`, `Schema.encodedSchema`, hence `Schema.is`) and other options go to `full` alone. The
 * annotations make JSON Schema, arbitraries, pretty-printing and equivalence those of `full`, and keep its
 * identifier (error messages name the schema by it).
 */
export const withFastCodec = <A, I>(full: Schema.Schema<A, I>, fast: FastCodec<A, I>): Schema.Schema<A, I> =>
  Schema.declare(
    [full],
    {
      decode: (schema) => {
        const slow = ParseResult.decodeUnknown(schema)
        if (schema.ast !== full.ast) return slow
        return (u, options) => {
          const value = plainOptions(options) ? fast.decode(u) : undefined
          return value === undefined ? slow(u, options) : ParseResult.succeed(value)
        }
      },
      encode: (schema) => {
        const slow = ParseResult.encodeUnknown(schema)
        if (schema.ast !== full.ast) return slow
        return (u, options) => {
          const value = plainOptions(options) ? fast.encode(u) : undefined
          return value === undefined ? slow(u, options) : ParseResult.succeed(value)
        }
      }
    },
    {
      ...identifierOf(full.ast),
      title: String(full.ast),
      [AST.SurrogateAnnotationId]: full.ast,
      arbitrary: (arbitrary) => arbitrary,
      pretty: (pretty) => pretty,
      equivalence: (equivalence) => equivalence
    }
  )

const identifierOf = (ast: AST.AST): { readonly identifier?: string } => {
  const identifier = AST.getIdentifierAnnotation(ast)
  return identifier._tag === "Some" ? { identifier: identifier.value } : {}
}

/** Declined: a fast decoder's answer for a value it leaves to the schema. */
export const DECLINED: unique symbol = Symbol("declined")
/** A fast decoder's result: the value the schema gives, or {@link DECLINED}. */
export type Declinable<A> = A | typeof DECLINED

/** A fast decoder of one present value: what the schema gives for it, or {@link DECLINED}. */
export type Decoder = (u: unknown) => unknown

/** `Schema.String`. */
export const isString = (u: unknown): boolean => typeof u === "string"
/** `Schema.Boolean`. */
export const isBoolean = (u: unknown): boolean => typeof u === "boolean"
/** `Schema.Finite`. */
export const isFiniteNumber = (u: unknown): boolean => Number.isFinite(u)
/** `Schema.Int`: a safe integer. */
export const isInt = (u: unknown): boolean => Number.isSafeInteger(u)

/** `Schema.Array(Schema.String)`. */
export const isStringArray = (u: unknown): boolean => {
  if (!Array.isArray(u)) return false
  for (let i = 0; i < u.length; i++) if (typeof u[i] !== "string") return false
  return true
}

/** `Schema.optional(S)` as a check: `undefined`, or what `check` takes. */
export const undefinedOr =
  (check: (u: unknown) => boolean) =>
  (u: unknown): boolean =>
    u === undefined || check(u)

/** `Schema.optional(Schema.NullOr(S))` as a check: `undefined`, `null`, or what `check` takes. */
export const nullishOr =
  (check: (u: unknown) => boolean) =>
  (u: unknown): boolean =>
    u === undefined || u === null || check(u)

/** A decoder that keeps what `check` takes as it is (the schema's result is equal to it). */
export const keepIf =
  (check: (u: unknown) => boolean): Decoder =>
  (u) =>
    check(u) ? u : DECLINED

/** A decoder of `Schema.optional(Schema.NullOr(S))` that keeps `null` and `undefined` and decodes the rest. */
export const nullishOrDecode =
  (decode: Decoder): Decoder =>
  (u) =>
    u === undefined || u === null ? u : decode(u)

/** A decoder of `Schema.optional(S)` that keeps `undefined` and decodes the rest (`null` included). */
export const undefinedOrDecode =
  (decode: Decoder): Decoder =>
  (u) =>
    u === undefined ? u : decode(u)

/** `Schema.Array(S)`: a new array of what `decode` gives for each element, or {@link DECLINED}. */
export const decodeArray = (u: unknown, decode: Decoder): Declinable<Array<unknown>> => {
  if (!Array.isArray(u)) return DECLINED
  const out: Array<unknown> = new Array(u.length)
  for (let i = 0; i < u.length; i++) {
    const value = decode(u[i])
    if (value === DECLINED) return DECLINED
    out[i] = value
  }
  return out
}

/** `null` or `undefined`: for a key a fast decoder takes only then (its other values are left to the schema). */
export const isNullish = (u: unknown): boolean => u === null || u === undefined
