/**
 * Round trips of every trace-service record (`decode(encode(x))` is `x`, in memory and over JSON), the query
 * language, and unknown keys on responses.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as Schema from "effect/Schema"
import * as TraceCall from "../../src/api/TraceCall.js"
import * as TraceError from "../../src/api/TraceError.js"
import * as TraceMisc from "../../src/api/TraceMisc.js"
import * as TraceObject from "../../src/api/TraceObject.js"
import { arbitraryOf, roundTrip } from "./roundTrip.js"

/**
 * The derived arbitrary of an OTLP export nests open records (each with arbitrary extra keys of arbitrary JSON)
 * four levels deep and takes seconds per value. This one bounds the outer lists and draws the spans, the scope
 * and the resource from the real schemas' arbitraries, so its values are values of the real schema.
 */
const smallExportRequest: FastCheck.Arbitrary<TraceMisc.ExportTraceServiceRequest> = FastCheck.array(
  FastCheck.record(
    {
      resource: arbitraryOf(TraceMisc.OtlpResource),
      scopeSpans: FastCheck.array(
        FastCheck.record(
          { spans: FastCheck.array(arbitraryOf(TraceMisc.OtlpSpan), { maxLength: 2 }) },
          { requiredKeys: [] }
        ),
        { maxLength: 2 }
      )
    },
    { requiredKeys: [] }
  ),
  { maxLength: 2 }
).map((resourceSpans) => ({ resourceSpans }))

describe("TraceCall round trips", () => {
  roundTrip("SortBy", TraceCall.SortBy)
  roundTrip("Operand", TraceCall.Operand, { numRuns: 50 })
  roundTrip("Query", TraceCall.Query, { numRuns: 50 })
  roundTrip("LLMUsage", TraceCall.LLMUsage)
  roundTrip("CallSummary", TraceCall.CallSummary, { numRuns: 50 })
  roundTrip("Call", TraceCall.Call, { numRuns: 50 })
  roundTrip("CallStartReq", TraceCall.CallStartReq, { numRuns: 50 })
  roundTrip("CallStartRes", TraceCall.CallStartRes)
  roundTrip("CallEndReq", TraceCall.CallEndReq, { numRuns: 50 })
  roundTrip("CallEndRes", TraceCall.CallEndRes)
  roundTrip("CallCreateBatchReq", TraceCall.CallCreateBatchReq, { numRuns: 30 })
  roundTrip("CallCreateBatchRes", TraceCall.CallCreateBatchRes)
  roundTrip("CallReadReq", TraceCall.CallReadReq)
  roundTrip("CallReadRes", TraceCall.CallReadRes, { numRuns: 50 })
  roundTrip("CallUpdateReq", TraceCall.CallUpdateReq)
  roundTrip("CallUpdateRes", TraceCall.CallUpdateRes)
  roundTrip("CallsDeleteReq", TraceCall.CallsDeleteReq)
  roundTrip("CallsDeleteRes", TraceCall.CallsDeleteRes)
  roundTrip("CallsFilter", TraceCall.CallsFilter)
  roundTrip("CallsQueryReq", TraceCall.CallsQueryReq, { numRuns: 50 })
  roundTrip("CallsQueryStatsReq", TraceCall.CallsQueryStatsReq, { numRuns: 50 })
  roundTrip("CallsQueryStatsRes", TraceCall.CallsQueryStatsRes)
})

describe("TraceObject round trips", () => {
  roundTrip("ObjCreateReq", TraceObject.ObjCreateReq)
  roundTrip("ObjCreateRes", TraceObject.ObjCreateRes)
  roundTrip("ObjectVersion", TraceObject.ObjectVersion)
  roundTrip("ObjReadReq", TraceObject.ObjReadReq)
  roundTrip("ObjReadRes", TraceObject.ObjReadRes)
  roundTrip("ObjQueryReq", TraceObject.ObjQueryReq)
  roundTrip("ObjQueryRes", TraceObject.ObjQueryRes, { numRuns: 50 })
  roundTrip("ObjDeleteReq", TraceObject.ObjDeleteReq)
  roundTrip("ObjDeleteRes", TraceObject.ObjDeleteRes)
  roundTrip("DatasetDeletePath", TraceObject.DatasetDeletePath)
  roundTrip("DatasetDeleteParams", TraceObject.DatasetDeleteParams)
  roundTrip("DatasetDeleteRes", TraceObject.DatasetDeleteRes)
  roundTrip("TableCreateReq", TraceObject.TableCreateReq, { numRuns: 50 })
  roundTrip("TableCreateRes", TraceObject.TableCreateRes)
  roundTrip("TableUpdateReq", TraceObject.TableUpdateReq, { numRuns: 50 })
  roundTrip("TableUpdateRes", TraceObject.TableUpdateRes)
  roundTrip("TableQueryReq", TraceObject.TableQueryReq)
  roundTrip("TableRow", TraceObject.TableRow)
  roundTrip("TableQueryRes", TraceObject.TableQueryRes, { numRuns: 50 })
  roundTrip("TableQueryStatsReq", TraceObject.TableQueryStatsReq)
  roundTrip("TableQueryStatsRes", TraceObject.TableQueryStatsRes)
  roundTrip("RefsReadBatchReq", TraceObject.RefsReadBatchReq)
  roundTrip("RefsReadBatchRes", TraceObject.RefsReadBatchRes)
  roundTrip("FileCreateFields", TraceObject.FileCreateFields)
  roundTrip("FileCreateRes", TraceObject.FileCreateRes)
  roundTrip("FileContentReadReq", TraceObject.FileContentReadReq)
})

describe("TraceMisc round trips", () => {
  roundTrip("FeedbackCreateReq", TraceMisc.FeedbackCreateReq)
  roundTrip("FeedbackCreateRes", TraceMisc.FeedbackCreateRes)
  roundTrip("FeedbackQueryReq", TraceMisc.FeedbackQueryReq, { numRuns: 50 })
  roundTrip("Feedback", TraceMisc.Feedback)
  roundTrip("FeedbackQueryRes", TraceMisc.FeedbackQueryRes)
  roundTrip("FeedbackPurgeReq", TraceMisc.FeedbackPurgeReq, { numRuns: 50 })
  roundTrip("FeedbackPurgeRes", TraceMisc.FeedbackPurgeRes)
  roundTrip("FeedbackReplaceReq", TraceMisc.FeedbackReplaceReq)
  roundTrip("CostCreateReq", TraceMisc.CostCreateReq)
  roundTrip("CostCreateRes", TraceMisc.CostCreateRes)
  roundTrip("CostQueryReq", TraceMisc.CostQueryReq, { numRuns: 50 })
  roundTrip("CostQueryRes", TraceMisc.CostQueryRes)
  roundTrip("CostPurgeReq", TraceMisc.CostPurgeReq, { numRuns: 50 })
  roundTrip("CostPurgeRes", TraceMisc.CostPurgeRes)
  roundTrip("ThreadsQueryReq", TraceMisc.ThreadsQueryReq)
  roundTrip("Thread", TraceMisc.Thread)
  roundTrip("CompletionsCreateReq", TraceMisc.CompletionsCreateReq)
  roundTrip("CompletionsCreateRes", TraceMisc.CompletionsCreateRes)
  roundTrip("CompletionsStreamMeta", TraceMisc.CompletionsStreamMeta)
  roundTrip("OtlpKeyValue", TraceMisc.OtlpKeyValue)
  roundTrip("OtlpSpan", TraceMisc.OtlpSpan, { numRuns: 50 })
  roundTrip("ExportTraceServiceRequest", TraceMisc.ExportTraceServiceRequest, {
    numRuns: 30,
    arbitrary: smallExportRequest
  })
  roundTrip("OtelExportRes", TraceMisc.OtelExportRes)
  roundTrip("TraceHealth", TraceMisc.TraceHealth)
  roundTrip("ServerInfoRes", TraceMisc.ServerInfoRes)
})

describe("TraceError round trips", () => {
  roundTrip("InvalidRequest", TraceError.InvalidRequest)
  roundTrip("InvalidField", TraceError.InvalidField)
  roundTrip("NotFound", TraceError.NotFound)
  roundTrip("TooLarge", TraceError.TooLarge)
})

const callId = "0192f3a1-7c2e-7b8a-9c61-0e5f4d3b2a19"
const traceId = "0192f3a1-7c2e-7b8a-9c61-aaaaaaaaaaaa"
const call = {
  id: callId,
  project_id: "entity/project",
  op_name: "weave:///entity/project/op/rollout:abc",
  trace_id: traceId,
  parent_id: null,
  started_at: "2025-01-01T00:00:00.123456Z",
  ended_at: "2025-01-01T00:00:01Z",
  attributes: { weave: { client_version: "0.1" } },
  inputs: { scenario: { question: "2+2?" } },
  output: { reward: 1 },
  summary: {
    usage: { "qwen-1": { prompt_tokens: 10, completion_tokens: 2, total_tokens: 12, requests: 1, cost_usd: 0.1 } },
    weave: { status: "success", latency_ms: 1000, trace_name: "rollout", costs: { "qwen-1": {} } },
    custom: [1, "x"]
  }
}

describe("unknown keys on responses", () => {
  it("a call drops unknown top-level keys and keeps the open summary's", () => {
    const decoded = Schema.decodeUnknownSync(TraceCall.Call)({ ...call, future_column: 1, storage_size_bytes: 5 })
    expect(decoded).toBeInstanceOf(TraceCall.Call)
    expect(Object.hasOwn(decoded, "future_column")).toBe(false)
    expect(decoded.storage_size_bytes).toBe(5)
    expect(Schema.encodeSync(TraceCall.Call)(decoded).summary).toStrictEqual(call.summary)
  })

  it("a call read, an object read, a table row and a thread tolerate extra keys", () => {
    expect(() => Schema.decodeUnknownSync(TraceCall.CallReadRes)({ call, extra: true })).not.toThrow()
    const obj = {
      project_id: "entity/project",
      object_id: "my-dataset",
      created_at: "2025-01-01T00:00:00Z",
      digest: "a".repeat(43),
      version_index: 0,
      is_latest: 1,
      kind: "object",
      base_object_class: "Dataset",
      val: { rows: "weave:///entity/project/table/abc" },
      ttl: 3
    }
    expect(Schema.decodeUnknownSync(TraceObject.ObjReadRes)({ obj, etag: "x" }).obj.val).toStrictEqual(obj.val)
    expect(Schema.decodeUnknownSync(TraceObject.TableRow)({ digest: "d", val: 1, size: 2 }).val).toBe(1)
    const thread = {
      thread_id: "t",
      turn_count: 2,
      start_time: "2025-01-01T00:00:00Z",
      last_updated: "2025-01-01T00:00:01Z",
      first_turn_id: null,
      last_turn_id: "b",
      p50_turn_duration_ms: 1.5,
      p99_turn_duration_ms: null,
      extra: {}
    }
    expect(Schema.decodeUnknownSync(TraceMisc.Thread)(thread).turn_count).toBe(2)
  })

  it("a required key still has to be there, with its type", () => {
    const { trace_id: _, ...withoutTrace } = call
    expect(Either.isLeft(Schema.decodeUnknownEither(TraceCall.Call)(withoutTrace))).toBe(true)
    expect(Either.isLeft(Schema.decodeUnknownEither(TraceCall.CallsDeleteRes)({ num_deleted: "1" }))).toBe(true)
  })
})

describe("the query language", () => {
  const decode = Schema.decodeUnknownEither(TraceCall.Query)

  it("reads every operator and operand of trace-service.md", () => {
    const query = {
      $expr: {
        $and: [
          { $eq: [{ $getField: "inputs.scenario.id" }, { $literal: "s1" }] },
          { $or: [{ $gt: [{ $getField: "summary.weave.latency_ms" }, { $literal: 100 }] }] },
          {
            $not: [{ $lte: [{ $convert: { input: { $getField: "output.reward" }, to: "double" } }, { $literal: 0 }] }]
          },
          { $gte: [{ $getField: "attributes.step" }, { $literal: 1 }] },
          { $lt: [{ $getField: "started_at" }, { $literal: "2026-01-01" }] },
          { $in: [{ $getField: "summary.weave.status" }, [{ $literal: "success" }, { $literal: "error" }]] },
          { $contains: { input: { $getField: "op_name" }, substr: { $literal: "roll" }, case_insensitive: true } },
          { $eq: [{ $convert: { input: { $getField: "output.x" }, to: "exists" } }, { $literal: true }] },
          { $eq: [{ $literal: { a: { $literal: [{ $literal: 1 }] } } }, { $literal: null }] }
        ]
      }
    }
    const decoded = decode(query)
    expect(Either.getOrThrow(decoded)).toStrictEqual(query)
    expect(Schema.encodeSync(TraceCall.Query)(Either.getOrThrow(decoded))).toStrictEqual(query)
  })

  it("rejects wrong arities, unknown operators and conversions", () => {
    const field = { $getField: "x" }
    for (const $expr of [
      { $eq: [field] },
      { $eq: [field, field, field] },
      { $not: [field, field] },
      { $in: [field, field] },
      { $regex: [field, field] },
      { $eq: [{ $convert: { input: field, to: "float" } }, field] },
      { $contains: { input: field } }
    ]) {
      expect(Either.isLeft(decode({ $expr })), JSON.stringify($expr)).toBe(true)
    }
    // A bare operand is not an operation.
    expect(Either.isLeft(decode({ $expr: field }))).toBe(true)
  })
})

describe("request constraints", () => {
  it("an object id is [\\w._-]+ of at most 128 characters, Unicode word characters included", () => {
    const is = Schema.is(TraceObject.ObjectId)
    expect(is("my-dataset_v1.2")).toBe(true)
    expect(is("données")).toBe(true)
    expect(is("a".repeat(128))).toBe(true)
    expect(is("a".repeat(129))).toBe(false)
    expect(is("")).toBe(false)
    expect(is("with space")).toBe(false)
    expect(is("slash/no")).toBe(false)
  })

  it("refs/read_batch takes at most 1000 refs", () => {
    const refs = (n: number) => ({ refs: Array.from({ length: n }, (_, i) => `weave:///e/p/call/${i}`) })
    expect(Either.isRight(Schema.decodeUnknownEither(TraceObject.RefsReadBatchReq)(refs(1000)))).toBe(true)
    expect(Either.isLeft(Schema.decodeUnknownEither(TraceObject.RefsReadBatchReq)(refs(1001)))).toBe(true)
  })

  it("a batch item is a start or an end by its mode", () => {
    const start = {
      mode: "start",
      req: {
        start: {
          project_id: "entity/project",
          op_name: "op",
          started_at: "2025-01-01T00:00:00Z",
          attributes: {},
          inputs: {}
        }
      }
    }
    const end = {
      mode: "end",
      req: { end: { project_id: "entity/project", id: callId, ended_at: "2025-01-01T00:00:01Z", summary: {} } }
    }
    const decoded = Schema.decodeUnknownSync(TraceCall.CallCreateBatchReq)({ batch: [start, end] })
    expect(decoded.batch.map((item) => item.mode)).toEqual(["start", "end"])
    expect(
      Either.isLeft(Schema.decodeUnknownEither(TraceCall.CallCreateBatchReq)({ batch: [{ ...end, mode: "start" }] }))
    ).toBe(true)
  })
})
