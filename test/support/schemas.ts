/**
 * JSON-Schema helpers for the constrained-decoding tests: a validator of the engine's schema subset written
 * independently of its compiler, a seeded generator of schemas in that subset, and a check that a text is a
 * prefix of some output an automaton accepts.
 */
import type { JsonValue } from "../../src/api/Json.js"
import { type ByteAutomaton, Matcher } from "../../src/local/engine/constraint/Automaton.js"
import type { Rng } from "../../src/local/engine/Random.js"

/**
 * Whether `value` validates against a schema of the subset (numbers must be finite and integers safe, as
 * a client's own validator, like zod, requires).
 */
export const validates = (schema: JsonValue, value: unknown, root: JsonValue = schema): boolean => {
  if (schema === true) return true
  if (schema === null || typeof schema !== "object" || Array.isArray(schema)) return false
  const s = schema as { readonly [key: string]: JsonValue }
  if (s.$ref !== undefined) {
    const name = String(s.$ref).split("/").pop()!
    return validates((root as { $defs: Record<string, JsonValue> }).$defs[name]!, value, root)
  }
  if (s.const !== undefined) return JSON.stringify(s.const) === JSON.stringify(value)
  if (Array.isArray(s.enum)) return s.enum.some((v) => JSON.stringify(v) === JSON.stringify(value))
  if (Array.isArray(s.anyOf)) return s.anyOf.some((sub) => validates(sub, value, root))
  const types = s.type === undefined ? [] : Array.isArray(s.type) ? (s.type as Array<string>) : [s.type as string]
  const typeOk = (t: string): boolean => {
    switch (t) {
      case "string":
        return (
          typeof value === "string" &&
          [...value].length >= ((s.minLength as number) ?? 0) &&
          [...value].length <= ((s.maxLength as number) ?? Number.POSITIVE_INFINITY)
        )
      case "number":
        return typeof value === "number" && Number.isFinite(value) && withinBounds(s, value)
      case "integer":
        return typeof value === "number" && Number.isSafeInteger(value) && withinBounds(s, value)
      case "boolean":
        return typeof value === "boolean"
      case "null":
        return value === null
      case "array":
        return (
          Array.isArray(value) &&
          value.length >= ((s.minItems as number) ?? 0) &&
          value.length <= ((s.maxItems as number) ?? Number.POSITIVE_INFINITY) &&
          value.every((v) => validates(s.items ?? true, v, root))
        )
      case "object": {
        if (value === null || typeof value !== "object" || Array.isArray(value)) return false
        const obj = value as Record<string, unknown>
        const props = (s.properties ?? {}) as Record<string, JsonValue>
        const required = (s.required ?? []) as Array<string>
        return (
          required.every((k) => k in obj) &&
          Object.entries(obj).every(([k, v]) => (k in props ? validates(props[k]!, v, root) : true))
        )
      }
    }
    return false
  }
  return types.length === 0 ? true : types.some(typeOk)
}

/** Whether a number is within a schema's `minimum`, `maximum`, `exclusiveMinimum` and `exclusiveMaximum`. */
const withinBounds = (s: { readonly [key: string]: JsonValue }, value: number): boolean => {
  const { minimum, maximum, exclusiveMinimum: exMin, exclusiveMaximum: exMax } = s
  if (typeof minimum === "number" && (exMin === true ? value <= minimum : value < minimum)) return false
  if (typeof maximum === "number" && (exMax === true ? value >= maximum : value > maximum)) return false
  if (typeof exMin === "number" && value <= exMin) return false
  if (typeof exMax === "number" && value >= exMax) return false
  return true
}

/** Whether every number inside a JSON value is finite. */
export const finiteNumbers = (value: unknown): boolean =>
  typeof value === "number"
    ? Number.isFinite(value)
    : value !== null && typeof value === "object"
      ? Object.values(value).every(finiteNumbers)
      : true

const pick = <A>(rng: Rng, items: ReadonlyArray<A>): A => items[rng.int(items.length)]!

const NAMES = ["id", "name", "score", "tags", "ok", "when", "x", "y", "note", "kind"]
const WORDS = ["a", "bc", "yes", "no", "grün", "日本"]

/** A random schema of the subset, nesting at most `depth` more levels of arrays and objects. */
export const randomSchema = (rng: Rng, depth = 2): { [key: string]: JsonValue } => {
  const kinds = depth > 0 ? 12 : 8
  switch (rng.int(kinds)) {
    case 0: {
      const schema: { [key: string]: JsonValue } = { type: "string" }
      if (rng.int(2) === 0) schema.minLength = rng.int(4)
      if (rng.int(2) === 0) schema.maxLength = ((schema.minLength as number | undefined) ?? 0) + rng.int(8)
      return schema
    }
    case 1:
    case 2: {
      const schema: { [key: string]: JsonValue } = { type: rng.int(2) === 0 ? "number" : "integer" }
      // Bounds half the time: zod 4's safe-integer range, or small ones, inclusive or exclusive.
      if (rng.int(2) === 0) {
        const low = pick(rng, [-9007199254740991, -20, -1.5, 0, 3])
        schema[pick(rng, ["minimum", "exclusiveMinimum"])] = low
        if (rng.int(2) === 0) schema[pick(rng, ["maximum", "exclusiveMaximum"])] = Math.max(low, 0) + 2 + rng.int(40)
      }
      return schema
    }
    case 3:
      return { type: "boolean" }
    case 4:
      return {
        type: pick(rng, [
          ["string", "null"],
          ["integer", "null"],
          ["number", "boolean"]
        ])
      }
    case 5:
      return {
        enum: Array.from({ length: 1 + rng.int(4) }, () => pick<JsonValue>(rng, [...WORDS, 3, -1.5, null, true]))
      }
    case 6:
      return { const: pick<JsonValue>(rng, [...WORDS, 42, { a: [1, null] }]) }
    case 7:
      return { anyOf: [randomSchema(rng, 0), randomSchema(rng, 0)] }
    case 8:
    case 9: {
      const schema: { [key: string]: JsonValue } = { type: "array", items: randomSchema(rng, depth - 1) }
      if (rng.int(2) === 0) schema.minItems = rng.int(3)
      if (rng.int(2) === 0) schema.maxItems = ((schema.minItems as number | undefined) ?? 0) + rng.int(4)
      return schema
    }
    default: {
      const properties: { [key: string]: JsonValue } = {}
      const required: Array<string> = []
      const count = 1 + rng.int(4)
      for (let i = 0; i < count; i++) {
        const name = NAMES[(i + rng.int(NAMES.length)) % NAMES.length]!
        if (name in properties) continue
        properties[name] = randomSchema(rng, depth - 1)
        if (rng.int(2) === 0) required.push(name)
      }
      return { type: "object", properties, required }
    }
  }
}

const bytesOf = (text: string | ReadonlyArray<number>): ReadonlyArray<number> =>
  typeof text === "string" ? [...new TextEncoder().encode(text)] : text

/** Run a matcher over the bytes; null when a byte left the automaton. */
const run = (automaton: ByteAutomaton, text: string | ReadonlyArray<number>): Matcher | null => {
  const m = new Matcher(automaton)
  for (const b of bytesOf(text)) {
    if (!(m.costs()[b]! < Number.POSITIVE_INFINITY)) return null
    m.advance(b)
  }
  return m
}

/** Whether every byte of a text (or of raw bytes) keeps the automaton on the way to an accepted output. */
export const acceptedPrefix = (automaton: ByteAutomaton, text: string | ReadonlyArray<number>): boolean =>
  run(automaton, text) !== null

/** Whether the automaton accepts the whole of a text (or of raw bytes). */
export const accepts = (automaton: ByteAutomaton, text: string | ReadonlyArray<number>): boolean =>
  run(automaton, text)?.canEnd() === true
