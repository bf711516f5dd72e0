import { describe, expect, it } from "@effect/vitest"
import * as Arbitrary from "effect/Arbitrary"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { LLM_USAGE_KEYS } from "../../src/api/internal/traceFastPath.js"
import { JsonObject, JsonValue } from "../../src/api/Json.js"
import { CallBatchEnd, CallBatchStart, CallCreateBatchReq } from "../../src/api/TraceCall.js"
import { readBatchText } from "../../src/local/server/internal/trace/batchText.js"
import { callUpsertBatch } from "../../src/local/server/internal/trace/calls.js"
import { resultsText, storedItems } from "../../src/local/server/internal/trace/upsertBatch.js"
import * as TraceCalls from "../../src/local/store/TraceCalls.js"

// What the parsed path hands the store, caught by a store that keeps the batch it is given (the calls of these
// batches carry their ids and trace ids, so nothing else of the store is asked for).
const parsedPath = (body: unknown): { readonly items: ReadonlyArray<TraceCalls.BatchItem> } | string => {
  let caught: ReadonlyArray<TraceCalls.BatchItem> = []
  const store = {
    batch: (items: ReadonlyArray<TraceCalls.BatchItem>) =>
      Effect.sync(() => {
        caught = items
      })
  } as unknown as TraceCalls.Service
  const payload = Schema.decodeUnknownSync(CallCreateBatchReq)(body)
  const result = Effect.runSync(
    Effect.either(callUpsertBatch({ payload }).pipe(Effect.provideService(TraceCalls.TraceCalls, store)))
  )
  return Either.isLeft(result) ? result.left.reason : { items: caught }
}

// The rows the store writes for a batch: its JSON values as `JSON.stringify` writes them (as `TraceCalls.batch`).
const asText = (item: TraceCalls.BatchItem): TraceCalls.BatchTextItem =>
  item.mode === "start"
    ? {
        mode: "start",
        start: {
          ...item.start,
          attributes: JSON.stringify(item.start.attributes),
          inputs: JSON.stringify(item.start.inputs)
        }
      }
    : {
        mode: "end",
        end: {
          ...item.end,
          output: Option.match(item.end.output, { onNone: () => null, onSome: (o) => JSON.stringify(o) }),
          summary: JSON.stringify(item.end.summary)
        }
      }

const hex = (n: number) =>
  FastCheck.string({ unit: FastCheck.constantFrom(..."0123456789abcdef"), minLength: n, maxLength: n })
const callId = FastCheck.oneof(FastCheck.uuid(), hex(16), hex(32))
const timestamp = FastCheck.date({ min: new Date(0), max: new Date(4e12), noInvalidDate: true }).map((d) =>
  d.toISOString()
)
const json = Arbitrary.make(JsonValue)
const object = Arbitrary.make(JsonObject)
// Keys that need care: array indices (objects order them first), `__proto__`, escapes, the usage's own names.
const awkwardKey = FastCheck.constantFrom("0", "7", "10", "01", "-1", "__proto__", 'a"b', "a\\b", "\n", "é", "requests")
const awkward = FastCheck.oneof(
  object,
  FastCheck.dictionary(FastCheck.oneof(FastCheck.string(), awkwardKey), json, { maxKeys: 4 }),
  FastCheck.constant({ a: [1.5, -0, 1e21, 12345678901234568, "\u2028", "\ud83d\ude00"], b: { c: null } })
)
const count = FastCheck.oneof(FastCheck.constant(null), FastCheck.integer(), FastCheck.maxSafeInteger())
// The usage's own names (in LLMUsage's order) and two it does not name.
const usageName = FastCheck.constantFrom(...LLM_USAGE_KEYS, "other", "cost")
// A usage in any key order, some keys not the schema's.
const usage = FastCheck.uniqueArray(FastCheck.tuple(usageName, count), {
  selector: ([name]) => name,
  maxLength: 6
}).map((entries) => Object.fromEntries(entries))
const summary = FastCheck.tuple(
  FastCheck.option(FastCheck.dictionary(FastCheck.constantFrom("m", "effect-rl/tiny", "n"), usage, { maxKeys: 2 })),
  FastCheck.option(FastCheck.dictionary(FastCheck.string({ maxLength: 3 }), FastCheck.integer(), { maxKeys: 2 })),
  FastCheck.dictionary(FastCheck.constantFrom("x", "weave", "z"), json, { maxKeys: 2 }),
  FastCheck.boolean()
).map(([u, counts, others, othersFirst]) => {
  const named = { ...(u === null ? {} : { usage: u }), ...(counts === null ? {} : { status_counts: counts }) }
  return othersFirst ? { ...others, ...named } : { ...named, ...others }
})

const start = FastCheck.record(
  {
    project_id: FastCheck.constantFrom("ent/proj", "e/p", "no-slash"),
    id: callId,
    op_name: FastCheck.string(),
    display_name: FastCheck.option(FastCheck.string()),
    trace_id: callId,
    parent_id: FastCheck.option(callId),
    thread_id: FastCheck.option(FastCheck.string()),
    started_at: FastCheck.oneof({ weight: 9, arbitrary: timestamp }, { weight: 1, arbitrary: FastCheck.string() }),
    attributes: awkward,
    inputs: awkward,
    otel_dump: FastCheck.option(object),
    wb_run_step: FastCheck.option(FastCheck.integer()),
    extra: json
  },
  { requiredKeys: ["project_id", "id", "op_name", "trace_id", "started_at", "attributes", "inputs"] }
).map((s) => ({ mode: "start", req: { start: s } }))

const end = FastCheck.record(
  {
    project_id: FastCheck.constantFrom("ent/proj", "e/p"),
    id: callId,
    trace_id: FastCheck.option(callId),
    is_eval: FastCheck.option(FastCheck.boolean()),
    ended_at: timestamp,
    exception: FastCheck.option(FastCheck.string()),
    output: json,
    summary,
    wb_run_step_end: FastCheck.option(FastCheck.integer())
  },
  { requiredKeys: ["project_id", "id", "ended_at", "summary"] }
).map((e) => ({ mode: "end", req: { end: e } }))

// Items as the schema's arbitraries make them (ids and times mostly malformed, so refused) and as clients send
// them, in any order of their keys.
const item = FastCheck.oneof(
  { weight: 4, arbitrary: start },
  { weight: 4, arbitrary: end },
  { weight: 1, arbitrary: Arbitrary.make(CallBatchStart) },
  { weight: 1, arbitrary: Arbitrary.make(CallBatchEnd) }
)
const body = FastCheck.array(item, { maxLength: 5 }).map((batch) => ({ batch }))

// The same body as other clients write it: indented, with `\u` escapes, keys moved or repeated.
const written = (value: unknown, how: number): string => {
  const text = JSON.stringify(value)
  switch (how) {
    case 1:
      return JSON.stringify(value, null, 1)
    case 2:
      return text.replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)
    case 3:
      return text.replace('{"batch":', '{"other":[1,{"a":2}],"batch":')
    case 4:
      return text.replace(/"mode":"(start|end)"/, '"mode":"start","mode":"$1"')
    case 5:
      return text.replace(/:1,/, ":1.0,").replace(/:(\d+)\}/, ":$1e0}")
    default:
      return text
  }
}

describe("call/upsert_batch bodies read from their text", () => {
  it("store the very rows the parsed path stores, refuse the same item, or decline", () => {
    let stored = 0
    let refused = 0
    FastCheck.assert(
      FastCheck.property(body, FastCheck.nat({ max: 6 }), (value, how) => {
        const text = written(value, how)
        const items = readBatchText(text)
        if (items === undefined) return
        // What was read is a batch the schema takes as it is.
        const parsed = JSON.parse(text) as unknown
        expect(Schema.decodeUnknownEither(CallCreateBatchReq)(parsed)._tag).toBe("Right")
        const fast = storedItems(items)
        const slow = parsedPath(parsed)
        if (fast === undefined) return
        if (typeof fast === "string") {
          refused++
          expect(slow).toBe(fast)
          return
        }
        stored++
        if (typeof slow === "string") throw new Error(`the parsed path refused: ${slow}`)
        expect(fast.items).toStrictEqual(slow.items.map(asText))
        // The answer: the JSON of the results the parsed path gives.
        const res = slow.items.map((i) => (i.mode === "start" ? { id: i.start.id, trace_id: i.start.trace_id } : {}))
        expect(resultsText(fast.items)).toBe(JSON.stringify({ res }))
      }),
      { numRuns: 1000 }
    )
    // Batches as clients send them mostly take this way.
    expect(stored).toBeGreaterThan(100)
    expect(refused).toBeGreaterThan(5)
  })

  it("declines what it does not read plainly, for the schema to answer", () => {
    const one = {
      batch: [
        {
          mode: "end",
          req: {
            end: {
              project_id: "e/p",
              id: "0190a000-0000-7000-8000-000000000001",
              ended_at: "2026-01-01T00:00:00Z",
              summary: {}
            }
          }
        }
      ]
    }
    const text = JSON.stringify(one)
    expect(readBatchText(text)).toHaveLength(1)
    for (const other of [
      JSON.stringify(one, null, 2),
      text.replace('"summary":{}', '"summary":{"a":1,"a":2}'),
      text.replace('"summary":{}', '"summary":{"2":1,"1":2}'),
      text.replace('"summary":{}', '"summary":{"a":1.50}'),
      text.replace('"summary":{}', '"summary":{"a":"\\u0041"}'),
      text.replace('"summary":{}', '"summary":{"usage":{"m":{"requests":1.5}}}'),
      text.replace('"summary":{}', '"summary":{"status_counts":{"error":null}}'),
      text.replace('"summary":{}', '"summary":[]'),
      text.replace('"end"', '"middle"'),
      // A raw control character and a lone surrogate inside strings (JSON.parse refuses the first; JSON.stringify
      // would write the second escaped).
      text.replace('"summary":{}', '"summary":{"a":"x\u0001y"}'),
      text.replace('"summary":{}', '"summary":{"a":"x\ud800y"}'),
      text.replace('"id":', '"id":"0190a000-0000-7000-8000-000000000002","id":'),
      text.replace('{"end":', '{"end":{},"end":'),
      text.replace('"ended_at":"2026-01-01T00:00:00Z",', ""),
      `${text} `,
      text.slice(0, -1),
      "",
      "[]",
      `{"batch":[${text}]}`
    ]) {
      expect(readBatchText(other), other).toBeUndefined()
    }
  })
})
