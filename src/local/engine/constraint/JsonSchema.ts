/**
 * A JSON-Schema subset for `structured_outputs.json` and `response_format.json_schema`, compiled into an
 * automaton `Node` whose every output is compact JSON (no whitespace) that validates against the schema.
 *
 * Supported: `type` (`object`, `string`, `number`, `integer`, `boolean`, `null`, or a list of them),
 * `properties` and `required` (properties are written in the order the schema lists them, each optional one
 * may be left out; no other property is written, which every schema allows), `items`, `minItems`,
 * `maxItems`, `minLength`, `maxLength`, `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` (on
 * `number` and `integer`, see `NumberRange`), `enum`, `const`, `anyOf`, `allOf` with one member, local `$ref`
 * (`#/$defs/…`, `#/definitions/…`, not recursive), and `true`/`{}` for any value. Annotations (`title`,
 * `description`, `default`, `examples`, `$schema`, `$id`, `$comment`, `deprecated`, `readOnly`,
 * `writeOnly`, `additionalProperties`, `$defs`, `definitions`) are accepted. Any other keyword (`pattern`,
 * `format`, `multipleOf`, `oneOf`, …) is a `SchemaError` naming it: it is refused rather than ignored.
 *
 * "Any JSON value" is bounded in depth (`ANY_DEPTH` levels of nesting) so that it stays a regular language.
 * Numbers are bounded in digits (`MAX_INTEGER_DIGITS`, `MAX_FRACTION_DIGITS`, `MAX_EXPONENT_DIGITS`), as the
 * JSON grammars of other engines are, so that every number written parses to a finite value and every
 * integer to a safe integer.
 *
 * @since 0.1.0
 */
import type { JsonValue } from "../../../api/Json.js"
import { alt, empty, list, literal, type Node, negateRanges, optional, repeat, seq, set } from "./Automaton.js"
import { boundedNumber, boundsOf } from "./NumberRange.js"

/** A schema outside the supported subset (`unsupported`), or malformed. */
export class SchemaError extends Error {
  /** Whether the schema is valid but uses a feature outside the subset. */
  get unsupported(): boolean {
    return this.message.includes("not supported") || this.message.includes("supported with")
  }
}

/** How deeply "any JSON value" may nest objects and arrays. */
export const ANY_DEPTH = 4

const ANNOTATIONS = new Set([
  "title",
  "description",
  "default",
  "examples",
  "$schema",
  "$id",
  "$comment",
  "deprecated",
  "readOnly",
  "writeOnly",
  "additionalProperties",
  "$defs",
  "definitions",
  "strict"
])

const SUPPORTED = new Set([
  "type",
  "properties",
  "required",
  "items",
  "minItems",
  "maxItems",
  "minLength",
  "maxLength",
  "enum",
  "const",
  "anyOf",
  "allOf",
  "$ref",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum"
])

const HEX = [0x30, 0x39, 0x41, 0x46, 0x61, 0x66]

/** One character of a JSON string as written: an unescaped character or an escape. */
const STRING_CHAR: Node = alt(
  set(negateRanges([0x00, 0x1f, 0x22, 0x22, 0x5c, 0x5c])),
  seq(
    literal("\\"),
    alt(
      set([0x22, 0x22, 0x5c, 0x5c, 0x2f, 0x2f, 0x62, 0x62, 0x66, 0x66, 0x6e, 0x6e, 0x72, 0x72, 0x74, 0x74]),
      seq(literal("u"), set(HEX), set(HEX), set(HEX), set(HEX))
    )
  )
)

const QUOTE = literal('"')
const DIGIT = set([0x30, 0x39])

/**
 * The most digits of an integer (or of a number's integer part): 15, so that every integer written is a
 * safe integer (below 2^53) and reads back exactly.
 */
export const MAX_INTEGER_DIGITS = 15
/** The most digits of a number's fraction. */
export const MAX_FRACTION_DIGITS = 16
/**
 * The most digits of a number's exponent: 2, so that every number written is finite (below
 * 10^15 × 10^99, far below `Number.MAX_VALUE`); unbounded, `7e5085` would read back as `Infinity`.
 */
export const MAX_EXPONENT_DIGITS = 2

const INTEGER: Node = seq(
  optional(literal("-")),
  alt(literal("0"), seq(set([0x31, 0x39]), repeat(DIGIT, 0, MAX_INTEGER_DIGITS - 1)))
)
const NUMBER: Node = seq(
  INTEGER,
  optional(seq(literal("."), repeat(DIGIT, 1, MAX_FRACTION_DIGITS))),
  optional(
    seq(set([0x45, 0x45, 0x65, 0x65]), optional(set([0x2b, 0x2b, 0x2d, 0x2d])), repeat(DIGIT, 1, MAX_EXPONENT_DIGITS))
  )
)
const BOOLEAN: Node = alt(literal("true"), literal("false"))
const NULL: Node = literal("null")

/** A JSON string of `min` to `max` characters. */
const jsonString = (min = 0, max = Number.POSITIVE_INFINITY): Node => seq(QUOTE, repeat(STRING_CHAR, min, max), QUOTE)

const anyString = jsonString()

/** Any JSON value nesting at most `depth` levels of objects and arrays. */
const anyValue = (depth: number): Node => {
  const scalars = [anyString, NUMBER, BOOLEAN, NULL]
  if (depth <= 0) return alt(...scalars)
  const inner = anyValue(depth - 1)
  return alt(...scalars, anyObject(inner), seq(literal("["), optional(list(inner, literal(","))), literal("]")))
}

/** Any JSON object whose values are `inner`. */
const anyObject = (inner: Node): Node =>
  seq(literal("{"), optional(list(seq(anyString, literal(":"), inner), literal(","))), literal("}"))

/** Any JSON object (`json_object`), nesting at most `ANY_DEPTH` levels below it. */
export const jsonObjectNode = (): Node => anyObject(anyValue(ANY_DEPTH - 1))

type Schema = JsonValue

const isObject = (v: JsonValue | undefined): v is { readonly [key: string]: JsonValue } =>
  v !== null && v !== undefined && typeof v === "object" && !Array.isArray(v)

const count = (schema: { readonly [key: string]: JsonValue }, key: string, where: string): number | undefined => {
  const v = schema[key]
  if (v === undefined) return undefined
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0)
    throw new SchemaError(`${where}.${key} must be a non-negative integer`)
  if (v > 1000) throw new SchemaError(`${where}.${key} may not exceed 1000`)
  return v
}

class Compiler {
  private readonly refs: Array<string> = []

  constructor(private readonly root: Schema) {}

  compile(schema: Schema, where: string): Node {
    if (schema === true) return anyValue(ANY_DEPTH)
    if (schema === false) throw new SchemaError(`${where} is false: no value matches`)
    if (!isObject(schema)) throw new SchemaError(`${where} must be an object or a boolean`)
    for (const key of Object.keys(schema)) {
      if (!SUPPORTED.has(key) && !ANNOTATIONS.has(key)) {
        throw new SchemaError(`the JSON Schema keyword ${JSON.stringify(key)} (at ${where}) is not supported`)
      }
    }
    if (schema.$ref !== undefined) return this.ref(schema, where)
    if (schema.const !== undefined) return literal(JSON.stringify(schema.const))
    if (schema.enum !== undefined) {
      if (!Array.isArray(schema.enum) || schema.enum.length === 0)
        throw new SchemaError(`${where}.enum must be a non-empty list`)
      return alt(...schema.enum.map((v) => literal(JSON.stringify(v))))
    }
    if (schema.anyOf !== undefined) {
      if (!Array.isArray(schema.anyOf) || schema.anyOf.length === 0)
        throw new SchemaError(`${where}.anyOf must be a non-empty list`)
      return alt(...schema.anyOf.map((s, i) => this.compile(s, `${where}.anyOf[${i}]`)))
    }
    if (schema.allOf !== undefined) {
      if (!Array.isArray(schema.allOf) || schema.allOf.length !== 1) {
        throw new SchemaError(`${where}.allOf is supported with exactly one member only`)
      }
      return this.compile(schema.allOf[0]!, `${where}.allOf[0]`)
    }
    const type = schema.type
    let types: ReadonlyArray<string>
    if (type === undefined) {
      if (schema.properties !== undefined || schema.required !== undefined) types = ["object"]
      else if (schema.items !== undefined) types = ["array"]
      else if (boundsOf(schema, where, (message) => new SchemaError(message)) !== undefined) {
        throw new SchemaError(`${where}: minimum and maximum are supported with a type (number or integer) only`)
      } else return anyValue(ANY_DEPTH)
    } else if (typeof type === "string") types = [type]
    else if (Array.isArray(type) && type.length > 0 && type.every((t) => typeof t === "string"))
      types = type as ReadonlyArray<string>
    else throw new SchemaError(`${where}.type must be a type name or a non-empty list of them`)
    return alt(...types.map((t) => this.typed(t, schema, where)))
  }

  private ref(schema: { readonly [key: string]: JsonValue }, where: string): Node {
    const ref = schema.$ref
    if (typeof ref !== "string") throw new SchemaError(`${where}.$ref must be a string`)
    const match = /^#\/(\$defs|definitions)\/(.+)$/.exec(ref)
    if (match === null) throw new SchemaError(`${where}.$ref: only local references #/$defs/… are supported`)
    if (this.refs.includes(ref)) throw new SchemaError(`${where}.$ref: recursive schemas are not supported`)
    const defs = isObject(this.root) ? this.root[match[1]!] : undefined
    const target = isObject(defs) ? defs[match[2]!.replace(/~1/g, "/").replace(/~0/g, "~")] : undefined
    if (target === undefined) throw new SchemaError(`${where}.$ref: ${ref} is not defined`)
    this.refs.push(ref)
    try {
      return this.compile(target, ref)
    } finally {
      this.refs.pop()
    }
  }

  private typed(type: string, schema: { readonly [key: string]: JsonValue }, where: string): Node {
    switch (type) {
      case "string":
        return jsonString(
          count(schema, "minLength", where) ?? 0,
          count(schema, "maxLength", where) ?? Number.POSITIVE_INFINITY
        )
      case "number":
      case "integer": {
        const bounds = boundsOf(schema, where, (message) => new SchemaError(message))
        if (bounds === undefined) return type === "integer" ? INTEGER : NUMBER
        return boundedNumber(bounds, type === "integer", MAX_INTEGER_DIGITS, where, (m) => new SchemaError(m))
      }
      case "boolean":
        return BOOLEAN
      case "null":
        return NULL
      case "array":
        return this.array(schema, where)
      case "object":
        return this.object(schema, where)
    }
    throw new SchemaError(`${where}.type: unknown type ${JSON.stringify(type)}`)
  }

  private array(schema: { readonly [key: string]: JsonValue }, where: string): Node {
    const items = schema.items === undefined ? anyValue(ANY_DEPTH - 1) : this.compile(schema.items, `${where}.items`)
    const min = count(schema, "minItems", where) ?? 0
    const max = count(schema, "maxItems", where) ?? Number.POSITIVE_INFINITY
    if (min > max) throw new SchemaError(`${where}: minItems > maxItems`)
    let body: Node
    if (max === 0) body = empty
    else if (min <= 1 && max === Number.POSITIVE_INFINITY) {
      body = min === 0 ? optional(list(items, literal(","))) : list(items, literal(","))
    } else {
      const rest = repeat(seq(literal(","), items), Math.max(0, min - 1), max - 1)
      body = min === 0 ? optional(seq(items, rest)) : seq(items, rest)
    }
    return seq(literal("["), body, literal("]"))
  }

  private object(schema: { readonly [key: string]: JsonValue }, where: string): Node {
    const properties = schema.properties ?? {}
    if (!isObject(properties)) throw new SchemaError(`${where}.properties must be an object`)
    const requiredList = schema.required ?? []
    if (!Array.isArray(requiredList) || !requiredList.every((r) => typeof r === "string")) {
      throw new SchemaError(`${where}.required must be a list of names`)
    }
    const required = new Set(requiredList as ReadonlyArray<string>)
    const names = Object.keys(properties)
    for (const name of required) if (!names.includes(name)) names.push(name)
    const members = names.map((name) => ({
      required: required.has(name),
      node: seq(
        literal(JSON.stringify(name)),
        literal(":"),
        properties[name] === undefined
          ? anyValue(ANY_DEPTH - 1)
          : this.compile(properties[name], `${where}.properties.${name}`)
      )
    }))
    // After one member was written: each later one preceded by a comma, optional ones optional.
    const after = (from: number): Node =>
      seq(
        ...members
          .slice(from)
          .map((m) => (m.required ? seq(literal(","), m.node) : optional(seq(literal(","), m.node))))
      )
    // Nothing written yet from member `i` on.
    const none = (i: number): Node => {
      if (i === members.length) return empty
      const m = members[i]!
      const present = seq(m.node, after(i + 1))
      return m.required ? present : alt(present, none(i + 1))
    }
    return seq(literal("{"), none(0), literal("}"))
  }
}

/** Compile a schema of the supported subset (throws `SchemaError`). */
export const compileJsonSchema = (schema: JsonValue): Node => new Compiler(schema).compile(schema, "schema")
