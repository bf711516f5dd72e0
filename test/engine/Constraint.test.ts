import { describe, expect, it } from "@effect/vitest"
import type { ChatCompletionRequest } from "../../src/api/ChatCompletion.js"
import type { JsonValue } from "../../src/api/Json.js"
import { ByteAutomaton, Matcher, type Node } from "../../src/local/engine/constraint/Automaton.js"
import { choiceNode } from "../../src/local/engine/constraint/Choice.js"
import { constraintOf } from "../../src/local/engine/constraint/Constraint.js"
import {
  compileJsonSchema,
  jsonObjectNode,
  MAX_EXPONENT_DIGITS,
  MAX_FRACTION_DIGITS,
  MAX_INTEGER_DIGITS
} from "../../src/local/engine/constraint/JsonSchema.js"
import { parseRegex, RegexError } from "../../src/local/engine/constraint/Regex.js"
import { EngineError } from "../../src/local/engine/EngineError.js"
import { Rng } from "../../src/local/engine/Random.js"
import { accepts, finiteNumbers, validates } from "../support/schemas.js"

const strict = new TextDecoder("utf-8", { fatal: true })

/** A random walk through the automaton: uniformly random allowed bytes, ending with probability 0.15. */
const walk = (node: Node | ByteAutomaton, seed: number, budget: number): { text: string; ended: boolean } => {
  const automaton = node instanceof ByteAutomaton ? node : new ByteAutomaton(node)
  const rng = new Rng(seed)
  const m = new Matcher(automaton)
  const bytes: Array<number> = []
  for (let left = budget; left > 0; left--) {
    const costs = m.costs()
    const options: Array<number> = []
    for (let b = 0; b < 256; b++) if (costs[b]! <= left) options.push(b)
    if (m.canEnd() && (options.length === 0 || rng.float() < 0.15)) break
    if (options.length === 0) break
    const b = options[rng.int(options.length)]!
    m.advance(b)
    bytes.push(b)
  }
  return { text: strict.decode(Uint8Array.from(bytes)), ended: m.canEnd() }
}

describe("regex constraint", () => {
  const patterns = [
    "[a-z]{2,4}@\\d+\\.(com|org)",
    "(ab|c)*d?",
    "[^\\n]{3}",
    "[^a-z]{1,3}x",
    "\\w+\\s\\w+",
    "é+|日本|\\u{1F600}",
    "^(?:yes|no)$",
    "-?\\d{1,3}(,\\d{3})*(\\.\\d+)?",
    "(?<word>[A-Z][a-z]+) ?k?",
    "[\\]\\-x]+\\.{2}",
    "a{3}b{2,}c{0,2}"
  ]

  it("every output of a random walk matches the pattern, and is valid UTF-8", () => {
    for (const pattern of patterns) {
      const node = parseRegex(pattern)
      const automaton = new ByteAutomaton(node)
      const reference = new RegExp(`^(?:${pattern})$`, "u")
      for (let seed = 0; seed < 150; seed++) {
        const { text, ended } = walk(automaton, seed, 40)
        expect(ended, `${pattern} / ${JSON.stringify(text)}`).toBe(true)
        expect(reference.test(text), `${pattern} / ${JSON.stringify(text)}`).toBe(true)
      }
    }
  })

  it("reaches an accepted output within a tight budget", () => {
    const automaton = new ByteAutomaton(parseRegex("[a-z]+@[a-z]+\\.com"))
    expect(automaton.minLength).toBe(7)
    for (let seed = 0; seed < 50; seed++) {
      const { text, ended } = walk(automaton, seed, 9)
      expect(ended).toBe(true)
      expect(text).toMatch(/^[a-z]+@[a-z]+\.com$/)
      expect(text.length).toBeLessThanOrEqual(9)
    }
  })

  it("allows exactly the bytes that can continue, and the end only when complete", () => {
    const m = new Matcher(new ByteAutomaton(parseRegex("ab?")))
    const allowed = () => [...m.costs()].flatMap((c, b) => (c < Number.POSITIVE_INFINITY ? [b] : []))
    expect(allowed()).toEqual([0x61])
    expect(m.canEnd()).toBe(false)
    m.advance(0x61)
    expect(allowed()).toEqual([0x62])
    expect(m.canEnd()).toBe(true)
    m.advance(0x62)
    expect(allowed()).toEqual([])
    expect(m.canEnd()).toBe(true)
  })

  it("a byte outside the automaton leaves it for good, without reading outside it", () => {
    const automaton = new ByteAutomaton(parseRegex("ab*"))
    const m = new Matcher(automaton)
    m.advance(0x61)
    expect(m.canContinue()).toBe(true)
    m.advance(0x7a)
    expect([...m.costs()].every((c) => c === Number.POSITIVE_INFINITY)).toBe(true)
    expect(m.canEnd()).toBe(false)
    expect(m.canContinue()).toBe(false)
    expect(m.remaining()).toBe(Number.POSITIVE_INFINITY)
    m.advance(0x62)
    expect(m.canEnd()).toBe(false)
    // A stray continuation byte, and a lead byte followed by no continuation, leave it too.
    for (const bytes of [[0x80], [0xc3, 0x61]]) {
      const stray = new Matcher(new ByteAutomaton(parseRegex(".*")))
      for (const b of bytes) stray.advance(b)
      expect(stray.canEnd()).toBe(false)
      expect(stray.canContinue()).toBe(false)
    }
    // A complete output that cannot go on.
    expect(new Matcher(new ByteAutomaton(parseRegex("a"))).canContinue()).toBe(true)
    const closed = new Matcher(new ByteAutomaton(parseRegex("a")))
    closed.advance(0x61)
    expect(closed.canEnd()).toBe(true)
    expect(closed.canContinue()).toBe(false)
  })

  it("refuses features outside the subset, naming them", () => {
    for (const [pattern, message] of [
      ["(a)\\1", /backreferences/],
      ["a(?=b)", /lookaround/],
      ["\\bword", /word boundaries/],
      ["a^b", /anchor/],
      ["(?i)abc", /lookaround, inline flags/]
    ] as const) {
      const error = (() => {
        try {
          parseRegex(pattern)
        } catch (e) {
          return e
        }
      })()
      expect(error).toBeInstanceOf(RegexError)
      expect((error as RegexError).unsupported).toBe(true)
      expect((error as RegexError).message).toMatch(message)
    }
    expect(() => parseRegex("(ab")).toThrow(/missing \)/)
    expect(() => parseRegex("[z-a]")).toThrow(/out of order/)
  })
})

describe("JSON schema constraint", () => {
  const schemas: ReadonlyArray<JsonValue> = [
    {
      type: "object",
      properties: {
        name: { type: "string", minLength: 1, maxLength: 8 },
        age: { type: "integer" },
        score: { type: "number" },
        tags: { type: "array", items: { enum: ["a", "b", 3, null] }, maxItems: 3 },
        ok: { type: "boolean" },
        nick: { type: ["string", "null"] },
        kind: { const: "person" }
      },
      required: ["name", "ok", "kind"]
    },
    { type: "array", items: { type: "object", properties: { x: { type: "number" } }, required: ["x"] }, minItems: 2 },
    {
      $defs: {
        Point: { type: "object", properties: { x: { type: "integer" }, y: { type: "integer" } }, required: ["x", "y"] }
      },
      type: "object",
      properties: { from: { $ref: "#/$defs/Point" }, to: { $ref: "#/$defs/Point" }, note: {} },
      required: ["from", "to"]
    },
    { anyOf: [{ type: "integer" }, { type: "string", maxLength: 3 }], title: "id" },
    { type: "object", properties: { a: { type: "string" }, b: { type: "string" }, c: { type: "string" } } }
  ]

  it("every output parses as JSON and validates against the schema", () => {
    for (const schema of schemas) {
      const automaton = new ByteAutomaton(compileJsonSchema(schema))
      for (let seed = 0; seed < 150; seed++) {
        const { text, ended } = walk(automaton, seed, 200)
        expect(ended, text).toBe(true)
        const value: unknown = JSON.parse(text)
        expect(validates(schema, value), `${JSON.stringify(schema)} / ${text}`).toBe(true)
        expect(text).not.toMatch(/^\s|\s$/)
      }
    }
  })

  it("writes optional properties in order with the right commas", () => {
    const bool = { type: "boolean" }
    const automaton = new ByteAutomaton(
      compileJsonSchema({ type: "object", properties: { a: bool, b: bool, c: bool } })
    )
    const seen = new Set<string>()
    for (let seed = 0; seed < 300; seed++) {
      const value = JSON.parse(walk(automaton, seed, 200).text) as Record<string, unknown>
      seen.add(Object.keys(value).join(""))
    }
    expect([...seen].sort()).toEqual(["", "a", "ab", "abc", "ac", "b", "bc", "c"])
  })

  it("json_object: every output is a JSON object", () => {
    const automaton = new ByteAutomaton(jsonObjectNode())
    for (let seed = 0; seed < 200; seed++) {
      const { text, ended } = walk(automaton, seed, 120)
      expect(ended).toBe(true)
      const value: unknown = JSON.parse(text)
      expect(typeof value === "object" && value !== null && !Array.isArray(value)).toBe(true)
    }
  })

  it("numbers are bounded in digits, so that each one reads back finite (7e5085 was Infinity)", () => {
    const number = new ByteAutomaton(compileJsonSchema({ type: "number" }))
    const integer = new ByteAutomaton(compileJsonSchema({ type: "integer" }))
    const object = new ByteAutomaton(jsonObjectNode())
    const digits = (n: number) => "9".repeat(n)
    for (const text of [
      "0",
      "-7",
      "1.5",
      "7e50",
      "7E+08",
      "-0.25e-99",
      `${digits(MAX_INTEGER_DIGITS)}.${digits(MAX_FRACTION_DIGITS)}e${digits(MAX_EXPONENT_DIGITS)}`
    ]) {
      expect(accepts(number, text), text).toBe(true)
      expect(accepts(object, `{"n":${text}}`), text).toBe(true)
      expect(Number.isFinite(JSON.parse(text)), text).toBe(true)
    }
    for (const text of [
      "7e5085",
      "1e309",
      `1e${digits(MAX_EXPONENT_DIGITS + 1)}`,
      `${digits(MAX_INTEGER_DIGITS + 1)}`,
      `0.${digits(MAX_FRACTION_DIGITS + 1)}`,
      "01",
      "1.",
      "1e"
    ]) {
      expect(accepts(number, text), text).toBe(false)
      expect(accepts(object, `{"n":${text}}`), text).toBe(false)
    }
    expect(accepts(integer, `-${digits(MAX_INTEGER_DIGITS)}`)).toBe(true)
    expect(Number.isSafeInteger(-Number(digits(MAX_INTEGER_DIGITS)))).toBe(true)
    expect(accepts(integer, digits(MAX_INTEGER_DIGITS + 1))).toBe(false)
    expect(accepts(integer, "1e5")).toBe(false)
    expect(accepts(integer, "1.0")).toBe(false)
  })

  it("random walks over numbers, integers and json_object only write finite numbers and safe integers", () => {
    const cases: ReadonlyArray<readonly [ByteAutomaton, (value: unknown) => boolean]> = [
      [new ByteAutomaton(compileJsonSchema({ type: "number" })), (v) => typeof v === "number" && Number.isFinite(v)],
      [new ByteAutomaton(compileJsonSchema({ type: "integer" })), (v) => Number.isSafeInteger(v)],
      [
        new ByteAutomaton(compileJsonSchema({ type: "array", items: { type: "number" }, minItems: 3 })),
        (v) => Array.isArray(v) && v.every((x) => typeof x === "number" && Number.isFinite(x))
      ],
      [new ByteAutomaton(jsonObjectNode()), (v) => finiteNumbers(v)]
    ]
    for (const [automaton, ok] of cases) {
      for (let seed = 0; seed < 200; seed++) {
        const { text, ended } = walk(automaton, seed, 300)
        expect(ended, text).toBe(true)
        expect(ok(JSON.parse(text)), text).toBe(true)
      }
    }
  })

  it("refuses keywords outside the subset, naming them", () => {
    for (const [schema, keyword] of [
      [{ type: "string", pattern: "^a" }, "pattern"],
      [{ type: "string", format: "date-time" }, "format"],
      [{ type: "integer", multipleOf: 3 }, "multipleOf"],
      [{ oneOf: [{ type: "string" }] }, "oneOf"]
    ] as const) {
      expect(() => compileJsonSchema(schema)).toThrow(new RegExp(`"${keyword}".*not supported`))
    }
    expect(() => compileJsonSchema({ $defs: { A: { $ref: "#/$defs/A" } }, $ref: "#/$defs/A" })).toThrow(/recursive/)
  })
})

describe("choice constraint", () => {
  it("every output is one of the strings", () => {
    const choices = ["yes", "no", "maybe", "nö", "y"]
    for (let seed = 0; seed < 200; seed++) {
      const { text, ended } = walk(choiceNode(choices), seed, 20)
      expect(ended).toBe(true)
      expect(choices).toContain(text)
    }
  })
})

describe("constraintOf", () => {
  const request = (fields: Partial<ChatCompletionRequest>): ChatCompletionRequest => ({ messages: [], ...fields })
  const refusal = (fields: Partial<ChatCompletionRequest>): EngineError => {
    try {
      constraintOf(request(fields))
    } catch (error) {
      if (error instanceof EngineError) return error
      throw error
    }
    throw new Error("expected an EngineError")
  }

  it("selects the constraint of structured_outputs or response_format", () => {
    expect(constraintOf(request({}))).toBeNull()
    expect(constraintOf(request({ response_format: { type: "text" } }))).toBeNull()
    expect(constraintOf(request({ structured_outputs: { regex: "a+" } }))?.minLength).toBe(1)
    expect(constraintOf(request({ structured_outputs: { choice: ["ab", "abc"] } }))?.minLength).toBe(2)
    expect(constraintOf(request({ structured_outputs: { json: '{"type":"boolean"}' } }))?.minLength).toBe(4)
    expect(constraintOf(request({ structured_outputs: { json_object: true } }))?.minLength).toBe(2)
    expect(constraintOf(request({ response_format: { type: "json_object" } }))?.minLength).toBe(2)
    expect(
      constraintOf(
        request({ response_format: { type: "json_schema", json_schema: { name: "n", schema: { type: "integer" } } } })
      )?.minLength
    ).toBe(1)
  })

  it("compiles an ask once: the same automaton for the same ask, which walks as a fresh one does", () => {
    const choice = (options: Array<string>) => constraintOf(request({ structured_outputs: { choice: options } }))
    const shared = choice(["4", "5", "92"])
    expect(choice(["4", "5", "92"])).toBe(shared)
    expect(choice(["4", "5"])).not.toBe(shared)
    expect(constraintOf(request({ structured_outputs: { regex: "a+" } }))).toBe(
      constraintOf(request({ structured_outputs: { regex: "a+" } }))
    )
    // A schema given as text or as an object is the same ask; another field's is another.
    const schema = { type: "integer" }
    const json = constraintOf(request({ structured_outputs: { json: JSON.stringify(schema) } }))
    expect(constraintOf(request({ structured_outputs: { json: schema } }))).toBe(json)
    expect(
      constraintOf(request({ response_format: { type: "json_schema", json_schema: { name: "n", schema } } }))
    ).not.toBe(json)
    // Walked by many outputs (its states determinised as they came), it allows what a fresh one allows.
    for (let seed = 0; seed < 50; seed++) {
      expect(walk(shared!, seed, 4)).toEqual(walk(choiceNode(["4", "5", "92"]), seed, 4))
    }
  })

  it("compiles afresh a kept constraint whose DFA grew large", () => {
    const ask = () => constraintOf(request({ structured_outputs: { regex: "[ab]*a[ab]{11}" } }))!
    const kept = ask()
    expect(ask()).toBe(kept)
    // Outputs of many requests reach states that one request's would not (this one's DFA has 2^12 of them).
    for (let seed = 0; kept.states <= 2_048 && seed < 20_000; seed++) walk(kept, seed, 40)
    expect(kept.states).toBeGreaterThan(2_048)
    const fresh = ask()
    expect(fresh).not.toBe(kept)
    expect(fresh.states).toBeLessThan(kept.states)
    expect(ask()).toBe(fresh)
  })

  it("refuses what it cannot honour, naming the field", () => {
    expect(refusal({ structured_outputs: { grammar: "root ::= 'a'" } })).toMatchObject({
      kind: "Unsupported",
      param: "structured_outputs.grammar"
    })
    expect(refusal({ structured_outputs: { structural_tag: "{}" } }).param).toBe("structured_outputs.structural_tag")
    expect(refusal({ structured_outputs: { whitespace_pattern: " *" } }).param).toBe(
      "structured_outputs.whitespace_pattern"
    )
    expect(refusal({ response_format: { type: "structural_tag", structures: [] } })).toMatchObject({
      kind: "Unsupported",
      param: "response_format"
    })
    expect(refusal({ structured_outputs: { regex: "(?=a)" } })).toMatchObject({
      kind: "Unsupported",
      param: "structured_outputs.regex"
    })
    expect(refusal({ structured_outputs: { regex: "(a" } })).toMatchObject({
      kind: "BadRequest",
      param: "structured_outputs.regex"
    })
    expect(refusal({ structured_outputs: { json: { type: "string", format: "email" } } })).toMatchObject({
      kind: "Unsupported",
      param: "structured_outputs.json"
    })
    expect(refusal({ structured_outputs: { json: "{not json" } }).param).toBe("structured_outputs.json")
    expect(refusal({ structured_outputs: { choice: [] } }).param).toBe("structured_outputs.choice")
    expect(refusal({ structured_outputs: { regex: "a", choice: ["a"] } }).message).toMatch(/Only one kind/)
    expect(refusal({ structured_outputs: { regex: "a" }, response_format: { type: "json_object" } }).message).toMatch(
      /Only one kind/
    )
    expect(refusal({ structured_outputs: { regex: "[^\\u{0}-\\u{10FFFF}]" } }).message).toMatch(/no output/)
  })
})
