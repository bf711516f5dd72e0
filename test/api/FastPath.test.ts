import { describe, expect, it } from "@effect/vitest"
import * as Arbitrary from "effect/Arbitrary"
import * as FastCheck from "effect/FastCheck"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { ChatCompletionChunk, TokenLogprob, TokenLogprobs } from "../../src/api/ChatCompletion.js"
import { decodeChunk } from "../../src/api/internal/chunkDecode.js"
import { callCreateBatchReq } from "../../src/api/internal/traceFastPath.js"
import { JsonObject, JsonValue } from "../../src/api/Json.js"
import { CallBatchEnd, CallBatchStart, CallCreateBatchReq } from "../../src/api/TraceCall.js"

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

// The plain schemas of JSON values, as ../../src/api/Json.ts had them before the fast path.
const PlainJsonValue: Schema.Schema<JsonValue> = Schema.Union(
  Schema.Null,
  Schema.Boolean,
  Schema.Finite,
  Schema.String,
  Schema.Array(Schema.suspend(() => PlainJsonValue)),
  Schema.Record({ key: Schema.String, value: Schema.suspend(() => PlainJsonValue) })
).annotations({ identifier: "JsonValue" })
const PlainJsonObject = Schema.Record({ key: Schema.String, value: PlainJsonValue }).annotations({
  identifier: "JsonObject"
})

class Point {
  constructor(readonly x: number) {}
}

// JSON as `JSON.parse` gives it, and values that are not quite JSON, alone or nested in JSON.
const notJson = FastCheck.oneof(
  FastCheck.constantFrom(Number.NaN, Number.POSITIVE_INFINITY, undefined, () => 1, 10n),
  FastCheck.constant(new Date(0)),
  FastCheck.constant(new Point(1)),
  FastCheck.constant({ [Symbol.for("s")]: 1, a: 1 }),
  FastCheck.constant(Object.assign(Object.create(null), { a: [1, { b: "c" }] }))
)
const nearJson = FastCheck.letrec((tie) => ({
  value: FastCheck.oneof(
    { depthSize: "small", withCrossShrink: true },
    FastCheck.jsonValue({ maxDepth: 3 }),
    notJson,
    FastCheck.array(tie("value"), { maxLength: 3 }),
    FastCheck.dictionary(FastCheck.string({ maxLength: 3 }), tie("value"), { maxKeys: 3 })
  )
})).value

/**
 * Whether a value holds an object with an own `__proto__` key (as `JSON.parse('{"__proto__": ...}')` gives):
 * there the fast paths and the plain schemas differ on purpose. A plain record's decoding assigns each key, and
 * assigning `__proto__` sets the new object's prototype instead (the key is lost); the fast paths keep the
 * parsed value as it is, key and all (see the test below). fast-check generates such keys now and then.
 */
const hasProtoKey = (value: unknown): boolean =>
  typeof value === "object" &&
  value !== null &&
  (Object.hasOwn(value, "__proto__") || Object.values(value).some(hasProtoKey))

const sameAs = <A>(fastSchema: Schema.Schema<A>, plainSchema: Schema.Schema<A>, value: unknown) => {
  if (hasProtoKey(value)) return
  for (const [fast, plain] of [
    [Schema.decodeUnknownEither(fastSchema), Schema.decodeUnknownEither(plainSchema)],
    [Schema.encodeUnknownEither(fastSchema), Schema.encodeUnknownEither(plainSchema)]
  ] as const) {
    const a = fast(value, { errors: "all" })
    const b = plain(value, { errors: "all" })
    expect(a._tag).toBe(b._tag)
    if (a._tag === "Right" && b._tag === "Right") expect(a.right).toStrictEqual(b.right)
    if (a._tag === "Left" && b._tag === "Left") {
      expect(ParseResult.ArrayFormatter.formatErrorSync(a.left)).toEqual(
        ParseResult.ArrayFormatter.formatErrorSync(b.left)
      )
    }
  }
}

describe("the fast path of JSON values", () => {
  it("JsonValue decodes and encodes exactly as the plain union, JSON or not", () => {
    FastCheck.assert(
      FastCheck.property(nearJson, (value) => sameAs(JsonValue, PlainJsonValue, value)),
      { numRuns: 500 }
    )
  })

  it("JsonObject decodes and encodes exactly as the plain record, JSON or not", () => {
    FastCheck.assert(
      FastCheck.property(nearJson, (value) => sameAs(JsonObject, PlainJsonObject, value)),
      { numRuns: 500 }
    )
  })

  it("keeps an own __proto__ key of parsed JSON as data (the plain record would set the prototype instead)", () => {
    const parsed = JSON.parse('{"a": 1, "__proto__": {"polluted": true}}') as Record<string, unknown>
    for (const schema of [JsonValue, JsonObject] as const) {
      const decoded = Schema.decodeUnknownSync(schema as Schema.Schema<unknown>)(parsed) as object
      expect(Object.hasOwn(decoded, "__proto__")).toBe(true)
      expect(Object.getPrototypeOf(decoded)).toBe(Object.prototype)
      expect((decoded as { polluted?: unknown }).polluted).toBeUndefined()
    }
    const plain = Schema.decodeUnknownSync(PlainJsonObject)(parsed) as object
    expect(Object.hasOwn(plain, "__proto__")).toBe(false)
  })

  it("passes parsed JSON through as it is, and still refuses what is not JSON", () => {
    const parsed = JSON.parse('{"a":[1,{"b":null}],"c":"d"}') as JsonObject
    expect(Schema.decodeUnknownSync(JsonObject)(parsed)).toBe(parsed)
    expect(Schema.decodeUnknownSync(JsonValue)(parsed)).toBe(parsed)
    expect(Schema.decodeUnknownEither(JsonValue)({ a: [Number.NaN] })._tag).toBe("Left")
    expect(Schema.decodeUnknownEither(JsonObject)([1])._tag).toBe("Left")
  })
})

// Chunks as a service sends them (the schema's encoded side), and with one part changed: an extra key, a count
// null or missing, a field of the wrong type.
const encodedChunk = Arbitrary.make(ChatCompletionChunk).map(
  (chunk) => Schema.encodeSync(ChatCompletionChunk)(chunk) as Record<string, unknown>
)
type Loose = Record<string, unknown>
const firstChoice = (c: Loose) => ((c.choices as Array<Loose>)[0] ?? {}) as Loose
const nearChunk = FastCheck.oneof(
  encodedChunk,
  encodedChunk.map((c) => ({ ...c, system_fingerprint: "fp" })),
  encodedChunk.map((c) => ({ ...c, usage: { total_tokens: 3, prompt_tokens: null } })),
  encodedChunk.map((c) => ({ ...c, usage: { prompt_tokens: 1.5 } })),
  encodedChunk.map((c) => ({ ...c, created: "yesterday" })),
  encodedChunk.map((c) => ({ ...c, choices: [{ ...firstChoice(c), delta: { content: 1 } }] })),
  encodedChunk.map((c) => ({ ...c, choices: [{ ...firstChoice(c), extra: true, index: 0, delta: { x: 1 } }] })),
  encodedChunk.map((c) => ({ ...c, choices: [{ index: 0, delta: { tool_calls: null } }] })),
  encodedChunk.map((c) => ({ ...c, choices: [{ index: 0, delta: [], logprobs: { content: [{ token: "a" }] } }] })),
  FastCheck.constant(null)
)

describe("the fast decoder of chat completion chunks", () => {
  it("gives what the schema gives, or declines (undefined) and leaves the value to the schema", () => {
    const schema = Schema.decodeUnknownEither(ChatCompletionChunk)
    let decided = 0
    FastCheck.assert(
      FastCheck.property(nearChunk, (value) => {
        const fast = decodeChunk(value)
        const slow = schema(value)
        if (fast === undefined) return
        decided++
        expect(slow._tag).toBe("Right")
        if (slow._tag === "Right") {
          expect(fast).toStrictEqual(slow.right)
          // The same keys in the same order: the JSON of the two is the same.
          expect(JSON.stringify(fast)).toBe(JSON.stringify(slow.right))
        }
      }),
      { numRuns: 1000 }
    )
    // Most valid chunks take the fast path.
    expect(decided).toBeGreaterThan(100)
  })

  it("decodes a chunk as a service sends it, dropping unknown keys and counting absent usage as 0", () => {
    const chunk = {
      id: "c",
      object: "chat.completion.chunk",
      created: 1,
      model: "m",
      system_fingerprint: "fp",
      choices: [
        { index: 0, delta: { role: "assistant", content: "hi", extra: 1 }, logprobs: null, finish_reason: null }
      ],
      usage: { completion_tokens: 2, total_tokens: 3, prompt_tokens: null }
    }
    expect(decodeChunk(chunk)).toStrictEqual(Schema.decodeUnknownSync(ChatCompletionChunk)(chunk))
    expect(decodeChunk({ ...chunk, created: 1.5 })).toBeUndefined()
  })
})

// The batch schema without its fast path, and batches near it: as sent, and with a part changed.
const PlainBatch = Schema.Struct({ batch: Schema.Array(Schema.Union(CallBatchStart, CallBatchEnd)) }).annotations({
  identifier: "CallCreateBatchReq"
})
const batchItem = Arbitrary.make(Schema.Union(CallBatchStart, CallBatchEnd))
const changedItem = FastCheck.oneof(
  { weight: 4, arbitrary: batchItem },
  batchItem.map((item) => ({ ...item, extra: 1 })),
  batchItem.map((item) =>
    item.mode === "start"
      ? { ...item, req: { start: { ...item.req.start, extra: 1, wb_run_step: 1.5 } } }
      : { ...item, req: { end: { ...item.req.end, is_eval: "yes" } } }
  ),
  batchItem.map((item) =>
    item.mode === "start"
      ? { ...item, req: { start: { ...item.req.start, inputs: { a: Number.NaN } } } }
      : {
          ...item,
          req: {
            end: {
              ...item.req.end,
              summary: { z: 1, status_counts: { b: 2 }, usage: { m: { x: 1, requests: 1, prompt_tokens: null } } }
            }
          }
        }
  ),
  batchItem.map((item) =>
    item.mode === "end"
      ? { ...item, req: { end: { ...item.req.end, summary: { usage: { m: { requests: 0.5 } } } } } }
      : item
  ),
  FastCheck.constant({ mode: "middle", req: {} })
)

describe("the fast path of call/upsert_batch bodies", () => {
  it("decodes and encodes exactly as the plain schema (the same keys in the same order), valid or not", () => {
    let fastOnes = 0
    FastCheck.assert(
      FastCheck.property(FastCheck.array(changedItem, { maxLength: 4 }), (items) => {
        const value = { batch: items }
        if (items.length > 0 && callCreateBatchReq(value) !== undefined) fastOnes++
        sameAs(CallCreateBatchReq, PlainBatch, value)
        const fast = Schema.decodeUnknownEither(CallCreateBatchReq)(value)
        const plain = Schema.decodeUnknownEither(PlainBatch)(value)
        if (fast._tag === "Right" && plain._tag === "Right" && !hasProtoKey(value)) {
          expect(JSON.stringify(fast.right)).toBe(JSON.stringify(plain.right))
        }
      }),
      { numRuns: 500 }
    )
    // Many batches of calls as sent take the fast path.
    expect(fastOnes).toBeGreaterThan(25)
  })
})
