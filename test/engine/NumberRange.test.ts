/**
 * Numeric bounds in the JSON-Schema subset (`minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`):
 * zod 4 writes them into every `z.number().int()` (the safe-integer range), so tool schemas from the AI SDK,
 * LangChain or the Agents SDK carry them, and the engine refused them. Integers are checked exhaustively
 * over a window against the bounds; numbers by random walks and by chosen texts at the bounds, including the
 * ones a double would round onto an exclusive bound.
 */
import { describe, expect, it } from "@effect/vitest"
import type { JsonValue } from "../../src/api/Json.js"
import { ByteAutomaton, Matcher } from "../../src/local/engine/constraint/Automaton.js"
import { compileJsonSchema, MAX_INTEGER_DIGITS } from "../../src/local/engine/constraint/JsonSchema.js"
import { MAX_SIGNIFICANT_DIGITS } from "../../src/local/engine/constraint/NumberRange.js"
import { Rng } from "../../src/local/engine/Random.js"
import { accepts, validates } from "../support/schemas.js"

const automaton = (schema: JsonValue) => new ByteAutomaton(compileJsonSchema(schema))

/** A random walk: uniformly random allowed bytes, ending with probability 0.2 where it may. */
const walk = (a: ByteAutomaton, seed: number): string => {
  const rng = new Rng(seed)
  const m = new Matcher(a)
  let text = ""
  for (let left = 40; left > 0; left--) {
    const options: Array<number> = []
    const costs = m.costs()
    for (let b = 0; b < 256; b++) if (costs[b]! <= left) options.push(b)
    if (m.canEnd() && (options.length === 0 || rng.float() < 0.2)) break
    const b = options[rng.int(options.length)]!
    m.advance(b)
    text += String.fromCharCode(b)
  }
  expect(m.canEnd(), text).toBe(true)
  return text
}

const BOUNDS: ReadonlyArray<{ readonly [key: string]: number | boolean }> = [
  { minimum: 0 },
  { minimum: -7, maximum: 12 },
  { exclusiveMinimum: 0 },
  { exclusiveMinimum: -3, exclusiveMaximum: 3 },
  { minimum: -2.5, maximum: 9.5 },
  { maximum: -1 },
  { exclusiveMaximum: 10.5, minimum: 10 },
  { minimum: 5, maximum: 5 },
  { minimum: 4, exclusiveMinimum: 4 },
  { minimum: 4, exclusiveMinimum: true, maximum: 9, exclusiveMaximum: true },
  { minimum: -9007199254740991, maximum: 9007199254740991 },
  { minimum: 99, maximum: 1001 },
  { minimum: -1000, maximum: -98 }
]

describe("numeric bounds", () => {
  it("integers: exactly those within the bounds, in plain decimal (no -0, no leading zeros)", () => {
    for (const bounds of BOUNDS) {
      const schema = { type: "integer", ...bounds }
      const a = automaton(schema)
      for (let n = -1100; n <= 1100; n++)
        expect(accepts(a, String(n)), `${n} ${JSON.stringify(bounds)}`).toBe(validates(schema, n))
      for (const text of ["-0", "00", "01", "1.0", "1e1", "+1"]) expect(accepts(a, text), text).toBe(false)
    }
  })

  it("zod 4's safe-integer range writes every integer of up to MAX_INTEGER_DIGITS digits", () => {
    const a = automaton({ type: "integer", minimum: -9007199254740991, maximum: 9007199254740991 })
    const nines = "9".repeat(MAX_INTEGER_DIGITS)
    for (const text of ["0", "7", "-1", nines, `-${nines}`, "123456789012345", "-100000000000000"])
      expect(accepts(a, text), text).toBe(true)
    expect(accepts(a, `1${nines}`)).toBe(false)
  })

  it("numbers: random walks stay within the bounds and read back as finite numbers", () => {
    for (const bounds of BOUNDS) {
      const schema = { type: "number", ...bounds }
      const a = automaton(schema)
      for (let seed = 0; seed < 150; seed++) {
        const text = walk(a, seed)
        expect(validates(schema, JSON.parse(text)), `${text} ${JSON.stringify(bounds)}`).toBe(true)
      }
    }
  })

  it("numbers: fractions between integers within the bounds, never rounded onto an exclusive bound", () => {
    const unit = automaton({ type: "number", minimum: 0, maximum: 1 })
    for (const text of ["0", "1", "0.5", "0.25", `0.${"9".repeat(MAX_SIGNIFICANT_DIGITS)}`]) {
      expect(accepts(unit, text), text).toBe(true)
    }
    for (const text of ["1.5", "-0.5", "-1", "0.50", "2", "1e0", `0.${"9".repeat(MAX_SIGNIFICANT_DIGITS + 1)}`])
      expect(accepts(unit, text), text).toBe(false)
    const below6 = automaton({ type: "number", exclusiveMinimum: 5, exclusiveMaximum: 6 })
    // 15 significant digits read back as a double distinct from 5 and 6; 16 may round onto them.
    const fourteen = `5.${"9".repeat(MAX_SIGNIFICANT_DIGITS - 1)}`
    expect(accepts(below6, fourteen)).toBe(true)
    expect(JSON.parse(fourteen)).toBeLessThan(6)
    expect(accepts(below6, `${fourteen}9`)).toBe(false)
    expect(JSON.parse(`${fourteen}99`)).toBe(6)
    expect(accepts(below6, `5.${"0".repeat(MAX_SIGNIFICANT_DIGITS - 2)}1`)).toBe(true)
    for (const text of ["5", "6", "5.0", "4.5", "6.5"]) expect(accepts(below6, text), text).toBe(false)
    const negative = automaton({ type: "number", minimum: -2, exclusiveMaximum: 0 })
    for (const text of ["-2", "-1", "-1.5", "-0.001", "-1.999"]) expect(accepts(negative, text), text).toBe(true)
    for (const text of ["0", "-0", "-0.0", "-2.5", "-2.1", "0.5"]) expect(accepts(negative, text), text).toBe(false)
  })

  it("bounds on a type list apply to its numbers only", () => {
    const a = automaton({ type: ["integer", "null", "string"], minimum: 1, maxLength: 2 })
    for (const text of ["null", "1", "99", '"ab"']) expect(accepts(a, text), text).toBe(true)
    for (const text of ["0", "-5", '"abc"']) expect(accepts(a, text), text).toBe(false)
  })

  it("refuses bounds that leave no value, or none the engine writes, or that are not numbers", () => {
    const refusal = (schema: JsonValue): { message: string; unsupported: boolean } => {
      try {
        compileJsonSchema(schema)
      } catch (error) {
        return { message: (error as Error).message, unsupported: (error as { unsupported: boolean }).unsupported }
      }
      throw new Error(`compiled ${JSON.stringify(schema)}`)
    }
    expect(refusal({ type: "integer", minimum: 3, maximum: 2 })).toEqual({
      message: "schema: no value is within its bounds",
      unsupported: false
    })
    expect(refusal({ type: "number", minimum: 1, exclusiveMaximum: 1 }).unsupported).toBe(false)
    expect(refusal({ type: "integer", minimum: 0.2, maximum: 0.8 }).unsupported).toBe(true)
    expect(refusal({ type: "number", minimum: 0.5, maximum: 0.9 })).toMatchObject({ unsupported: true })
    expect(refusal({ type: "number", minimum: "0" }).message).toBe("schema.minimum must be a finite number")
    expect(refusal({ minimum: 0 }).message).toContain("supported with a type (number or integer) only")
    expect(refusal({ type: "integer", multipleOf: 2 }).message).toContain('"multipleOf"')
  })
})
