/**
 * JSON values on the wire: what an open-ended field (`parameters`, `kwargs`, extra keys of an open record)
 * may hold. Numbers are finite, as JSON allows.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { isJsonObject, isJsonValue, withFastPath } from "./internal/fastPath.js"

/** Any JSON value. */
export type JsonValue =
  | null
  | boolean
  | number
  | string
  | ReadonlyArray<JsonValue>
  | { readonly [key: string]: JsonValue }

/** A JSON object. */
export type JsonObject = { readonly [key: string]: JsonValue }

/** The union every JSON value is decoded with when it is not plainly JSON (see {@link JsonValue}). */
const JsonValueUnion: Schema.Schema<JsonValue> = Schema.Union(
  Schema.Null,
  Schema.Boolean,
  Schema.Finite,
  Schema.String,
  Schema.Array(Schema.suspend(() => JsonValueUnion)),
  Schema.Record({ key: Schema.String, value: Schema.suspend(() => JsonValueUnion) })
).annotations({ identifier: "JsonValue" })

/**
 * Schema of any JSON value (finite numbers only). A value that is plainly JSON (what `JSON.parse` gives) is
 * checked in one pass and passed through as it is (`internal/fastPath.ts`); anything else goes through the
 * union, so its issues and results are the union's.
 */
export const JsonValue: Schema.Schema<JsonValue> = withFastPath(
  JsonValueUnion,
  isJsonValue as (u: unknown) => u is JsonValue
)

/** Schema of a JSON object (with the fast path of {@link JsonValue}). */
export const JsonObject: Schema.Schema<JsonObject> = withFastPath(
  Schema.Record({ key: Schema.String, value: JsonValueUnion }).annotations({ identifier: "JsonObject" }),
  isJsonObject as (u: unknown) => u is JsonObject
)

/**
 * The index signature that keeps unknown keys of an open record: pass it as the second argument of
 * `Schema.Struct` so that decoding and encoding preserve keys the schema does not name.
 */
export const OtherKeys = Schema.Record({ key: Schema.String, value: JsonValue })

/**
 * An optional named key of an open record (a struct with {@link OtherKeys}): present with a value, or absent.
 * The index signature constrains the named keys too, in the type and when decoding and encoding, so such a
 * key cannot hold `undefined`; `Schema.optional` would claim `T | undefined` and then reject it.
 */
export const optionalKey = <S extends Schema.Schema.All>(schema: S) => Schema.optionalWith(schema, { exact: true })

/**
 * A metric value as a Python service may serialize one it could not compute: a number, `null` (pydantic's
 * default for NaN and infinities), or the strings `"NaN"`, `"Infinity"` and `"-Infinity"` (its `strings`
 * mode). Decoded to a finite number or `null`.
 */
export const LooseMetric: Schema.Schema<number | null, number | null | "NaN" | "Infinity" | "-Infinity"> = Schema.Union(
  Schema.NullOr(Schema.Finite),
  Schema.transform(Schema.Literal("NaN", "Infinity", "-Infinity"), Schema.Null, {
    strict: true,
    decode: () => null,
    encode: () => "NaN" as const
  })
).annotations({ identifier: "LooseMetric" })
