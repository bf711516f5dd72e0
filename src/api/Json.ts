/**
 * JSON values on the wire: what an open-ended field (`parameters`, `kwargs`, extra keys of an open record)
 * may hold. Numbers are finite, as JSON allows.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

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

/** Schema of any JSON value (finite numbers only). */
export const JsonValue: Schema.Schema<JsonValue> = Schema.Union(
  Schema.Null,
  Schema.Boolean,
  Schema.Finite,
  Schema.String,
  Schema.Array(Schema.suspend(() => JsonValue)),
  Schema.Record({ key: Schema.String, value: Schema.suspend(() => JsonValue) })
).annotations({ identifier: "JsonValue" })

/** Schema of a JSON object. */
export const JsonObject: Schema.Schema<JsonObject> = Schema.Record({
  key: Schema.String,
  value: JsonValue
}).annotations({ identifier: "JsonObject" })

/**
 * The index signature that keeps unknown keys of an open record: pass it as the second argument of
 * `Schema.Struct` so that decoding and encoding preserve keys the schema does not name.
 *
 * The index signature also constrains the named keys, so its value admits `undefined`: a named optional key
 * set to `undefined` (`{ learning_rate: options.learningRate }`) stays legal, and reads as absent on the wire.
 */
export const OtherKeys = Schema.Record({ key: Schema.String, value: Schema.UndefinedOr(JsonValue) })
