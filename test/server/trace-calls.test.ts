/**
 * The trace surface's calls on the real server, through plain `fetch` with HTTP Basic credentials (as the
 * service's SDKs send them): start, end and read with the derived `summary.weave`, upsert_batch with ends
 * before their starts, update, soft deletion with descendants, stream_query with every filter kind, every
 * query operator, `$convert`, nested paths, prefix op names, sorting and paging, query_stats, and auth.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { API_KEY } from "../support/clients.js"
import { Backend, call, clean, MAX_BODY } from "./support.js"

const basic = `Basic ${Buffer.from(`api:${API_KEY}`).toString("base64")}`

const post = (path: string, body: unknown, authorization = basic) =>
  call(path, {
    method: "POST",
    headers: { authorization, "content-type": "application/json" },
    body: JSON.stringify(body)
  })

/** A JSON-lines answer as its parsed lines. */
const lines = (text: string): ReadonlyArray<Record<string, unknown>> =>
  text
    .split("\n")
    .filter((line) => line.length > 0)
    .map((line) => JSON.parse(line) as Record<string, unknown>)

const T0 = Date.parse("2026-01-01T00:00:00.000Z")
const at = (ms: number) => new Date(T0 + ms).toISOString()

const uuid = (n: number) => `0190a000-0000-7000-8000-${n.toString(16).padStart(12, "0")}`

interface StartFields {
  readonly id?: string
  readonly trace_id?: string
  readonly parent_id?: string
  readonly op_name?: string
  readonly started?: number
  readonly inputs?: Record<string, unknown>
  readonly attributes?: Record<string, unknown>
  readonly [key: string]: unknown
}

const startOf = (project: string, fields: StartFields) => {
  const { started = 0, inputs = {}, attributes = {}, op_name = "op", ...rest } = fields
  return { project_id: project, op_name, started_at: at(started), inputs, attributes, ...rest }
}

const endOf = (project: string, id: string, ended: number, extra: Record<string, unknown> = {}) => ({
  project_id: project,
  id,
  ended_at: at(ended),
  summary: {},
  ...extra
})

const read = (project: string, id: string) =>
  Effect.map(post("/call/read", { project_id: project, id }), (reply) => {
    expect(reply.status).toBe(200)
    return (reply.json as { call: Record<string, unknown> | null }).call
  })

/** A member of a JSON object; undefined for anything else. */
const part = (value: unknown, key: string): unknown =>
  value !== null && typeof value === "object" ? (value as Record<string, unknown>)[key] : undefined

const weaveOf = (call: Record<string, unknown> | null) =>
  (call?.summary as { weave?: Record<string, unknown> } | undefined)?.weave ?? {}

describe("trace calls", () => {
  it.layer(Backend)("on the real server", (it) => {
    it.effect("start, end and read: a generated UUIDv7, the derived status, latency and trace name", () =>
      Effect.gen(function* () {
        const project = "ent/roundtrip"
        const started = yield* post("/call/start", {
          start: startOf(project, { op_name: "weave:///ent/roundtrip/op/solve:abc123", inputs: { q: "2+2" } })
        })
        expect(started.status).toBe(200)
        const { id, trace_id } = started.json as { id: string; trace_id: string }
        expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
        expect(trace_id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7/)
        expect(trace_id).not.toBe(id)

        const running = yield* read(project, id)
        expect(running).toMatchObject({ id, trace_id, project_id: project, inputs: { q: "2+2" }, ended_at: null })
        expect(weaveOf(running)).toEqual({ status: "running", latency_ms: null, trace_name: "solve" })

        const usage = { "m-1": { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8, requests: 1 } }
        const ended = yield* post("/call/end", {
          end: endOf(project, id, 1500, { output: { a: 4 }, summary: { usage } })
        })
        expect(ended.status).toBe(200)
        expect(ended.json).toEqual({})

        const done = yield* read(project, id)
        expect(done).toMatchObject({ output: { a: 4 }, ended_at: at(1500), started_at: at(0), exception: null })
        expect(done?.summary).toMatchObject({ usage })
        expect(weaveOf(done)).toEqual({ status: "success", latency_ms: 1500, trace_name: "solve" })

        expect(yield* read(project, uuid(999))).toBeNull()
        expect(yield* read("ent/other", id)).toBeNull()
      })
    )

    it.effect("OTel hex ids are accepted; malformed ids, project ids and timestamps are 400 {reason}", () =>
      Effect.gen(function* () {
        const project = "ent/ids"
        const span = "0123456789abcdef"
        const trace = "0123456789abcdef0123456789abcdef"
        const ok = yield* post("/call/start", { start: startOf(project, { id: span, trace_id: trace }) })
        expect(ok.json).toEqual({ id: span, trace_id: trace })
        for (const start of [
          startOf(project, { id: "not-an-id" }),
          startOf("no-slash", {}),
          { ...startOf(project, {}), started_at: "yesterday" }
        ]) {
          const reply = yield* post("/call/start", { start })
          expect(reply.status).toBe(400)
          expect(Object.keys(reply.json as object)).toEqual(["reason"])
          expect(clean(reply.text)).toBe(true)
        }
        const missing = yield* post("/call/start", { start: { project_id: project, started_at: at(0) } })
        expect(missing.status).toBe(422)
        const detail = (missing.json as { detail: ReadonlyArray<{ loc: ReadonlyArray<unknown> }> }).detail
        expect(detail.map((d) => d.loc)).toContainEqual(["body", "start", "op_name"])
      })
    )

    it.effect("timestamps are answered in UTC with Z, microseconds kept; latency counts them", () =>
      Effect.gen(function* () {
        const project = "ent/time"
        const id = uuid(51)
        yield* post("/call/start", {
          start: { ...startOf(project, { id }), started_at: "2026-03-01T10:00:00.000250+00:00" }
        })
        yield* post("/call/end", { end: { ...endOf(project, id, 0), ended_at: "2026-03-01T12:00:02.5+02:00" } })
        const call = yield* read(project, id)
        expect(call?.started_at).toBe("2026-03-01T10:00:00.000250Z")
        expect(call?.ended_at).toBe("2026-03-01T10:00:02.500Z")
        expect(weaveOf(call).latency_ms).toBe(2500)
      })
    )

    it.effect("a body over the limit is 413 {reason}", () =>
      Effect.gen(function* () {
        const reply = yield* post("/call/start", {
          start: startOf("ent/big", { inputs: { blob: "x".repeat(MAX_BODY) } })
        })
        expect(reply.status).toBe(413)
        expect(Object.keys(reply.json as object)).toEqual(["reason"])
      })
    )

    it.effect("exceptions: error on the call, descendant_error on its ancestors", () =>
      Effect.gen(function* () {
        const project = "ent/errors"
        const [root, mid, leaf] = [uuid(1), uuid(2), uuid(3)]
        const trace = uuid(100)
        const batch = [
          { mode: "start", req: { start: startOf(project, { id: root, trace_id: trace }) } },
          { mode: "start", req: { start: startOf(project, { id: mid, trace_id: trace, parent_id: root }) } },
          { mode: "start", req: { start: startOf(project, { id: leaf, trace_id: trace, parent_id: mid }) } },
          { mode: "end", req: { end: endOf(project, leaf, 5, { exception: "ValueError: boom" }) } },
          { mode: "end", req: { end: endOf(project, mid, 6) } },
          { mode: "end", req: { end: endOf(project, root, 7) } }
        ]
        expect((yield* post("/call/upsert_batch", { batch })).status).toBe(200)
        expect(weaveOf(yield* read(project, leaf)).status).toBe("error")
        expect(weaveOf(yield* read(project, mid)).status).toBe("descendant_error")
        expect(weaveOf(yield* read(project, root)).status).toBe("descendant_error")
      })
    )

    it.effect("upsert_batch: an end before its start, in the same batch or an earlier one, is merged", () =>
      Effect.gen(function* () {
        const project = "ent/batch"
        const [a, b] = [uuid(11), uuid(12)]
        const first = yield* post("/call/upsert_batch", {
          batch: [
            { mode: "end", req: { end: endOf(project, a, 250, { output: "A" }) } },
            { mode: "start", req: { start: startOf(project, { id: a, trace_id: uuid(110), started: 50 }) } },
            { mode: "end", req: { end: endOf(project, b, 900, { output: "B" }) } }
          ]
        })
        expect(first.json).toEqual({ res: [{}, { id: a, trace_id: uuid(110) }, {}] })
        expect(weaveOf(yield* read(project, a))).toMatchObject({ status: "success", latency_ms: 200 })
        expect((yield* read(project, a))?.output).toBe("A")
        // b has only its end so far: it is not a call yet.
        expect(yield* read(project, b)).toBeNull()
        const stats = yield* post("/calls/query_stats", { project_id: project })
        expect(stats.json).toEqual({ count: 1 })

        const second = yield* post("/call/upsert_batch", {
          batch: [{ mode: "start", req: { start: startOf(project, { id: b, trace_id: uuid(111), started: 100 }) } }]
        })
        expect(second.status).toBe(200)
        const merged = yield* read(project, b)
        expect(merged).toMatchObject({ output: "B", ended_at: at(900), started_at: at(100) })
        expect(weaveOf(merged)).toMatchObject({ status: "success", latency_ms: 800 })
      })
    )

    it.effect("update sets the display name (and so the trace name); an unknown call is 404", () =>
      Effect.gen(function* () {
        const project = "ent/update"
        const id = uuid(21)
        yield* post("/call/start", { start: startOf(project, { id, op_name: "plain-op" }) })
        expect(weaveOf(yield* read(project, id)).trace_name).toBe("plain-op")
        const updated = yield* post("/call/update", { project_id: project, call_id: id, display_name: "Nice name" })
        expect(updated.status).toBe(200)
        const call = yield* read(project, id)
        expect(call?.display_name).toBe("Nice name")
        expect(weaveOf(call).trace_name).toBe("Nice name")
        const missing = yield* post("/call/update", { project_id: project, call_id: uuid(22), display_name: "x" })
        expect(missing.status).toBe(404)
        expect(missing.json).toEqual({ reason: `Call not found: ${uuid(22)}` })
        const nothing = yield* post("/call/update", { project_id: project, call_id: id })
        expect(nothing.status).toBe(400)
      })
    )

    it.effect("delete is soft and takes every descendant, and nothing else", () =>
      Effect.gen(function* () {
        const project = "ent/delete"
        const [root, child, grandchild, sibling, other] = [uuid(31), uuid(32), uuid(33), uuid(34), uuid(35)]
        const starts = [
          { id: root },
          { id: child, parent_id: root },
          { id: grandchild, parent_id: child },
          { id: sibling, parent_id: root },
          { id: other }
        ]
        yield* post("/call/upsert_batch", {
          batch: starts.map((s, i) => ({
            mode: "start",
            req: { start: startOf(project, { ...s, trace_id: s.id === other ? uuid(301) : uuid(300), started: i }) }
          }))
        })
        const deleted = yield* post("/calls/delete", { project_id: project, call_ids: [child] })
        expect(deleted.json).toEqual({ num_deleted: 2 })
        expect(yield* read(project, child)).toBeNull()
        expect(yield* read(project, grandchild)).toBeNull()
        expect(yield* read(project, sibling)).not.toBeNull()
        const again = yield* post("/calls/delete", { project_id: project, call_ids: [root, child] })
        expect(again.json).toEqual({ num_deleted: 2 })
        const left = yield* post("/calls/stream_query", { project_id: project })
        expect(lines(left.text).map((c) => c.id)).toEqual([other])
      })
    )

    it.effect("401 for a wrong or missing key, with Basic and with Bearer; both pass with the key", () =>
      Effect.gen(function* () {
        const body = { project_id: "ent/auth" }
        const wrongBasic = `Basic ${Buffer.from("api:sk-wrong").toString("base64")}`
        for (const authorization of [wrongBasic, "Bearer sk-wrong", `Basic ${API_KEY}`, ""]) {
          const reply = yield* post("/calls/query_stats", body, authorization)
          expect(reply.status).toBe(401)
          expect(clean(reply.text)).toBe(true)
          expect(reply.text).not.toContain("sk-wrong")
        }
        const anyUser = `Basic ${Buffer.from(`someone:${API_KEY}`).toString("base64")}`
        for (const authorization of [basic, anyUser, `Bearer ${API_KEY}`]) {
          expect((yield* post("/calls/query_stats", body, authorization)).status).toBe(200)
        }
        // Basic is for the trace surface only.
        const training = yield* call("/v1/health", { headers: { authorization: basic } })
        expect(training.status).toBe(401)
      })
    )

    describe("stream_query and query_stats", () => {
      const project = "ent/query"
      const [c1, c2, c3, c4] = [uuid(41), uuid(42), uuid(43), uuid(44)]
      const [t1, t2, t3] = [uuid(401), uuid(402), uuid(403)]
      const dataset = "weave:///ent/query/object/ds:xyz"
      const seed = post("/call/upsert_batch", {
        batch: [
          {
            mode: "start",
            req: {
              start: startOf(project, {
                id: c1,
                trace_id: t1,
                op_name: "weave:///ent/query/op/alpha:abc",
                thread_id: "th-1",
                turn_id: "tu-1",
                wb_run_id: "run-1",
                attributes: { env: "prod" },
                inputs: { x: 1, name: "Hello World", nested: { deep: { v: 5 } }, tags: ["a", "b"] }
              })
            }
          },
          {
            mode: "start",
            req: {
              start: startOf(project, {
                id: c2,
                trace_id: t1,
                parent_id: c1,
                op_name: "weave:///ent/query/op/alpha:def",
                started: 10,
                attributes: { env: "dev" },
                inputs: { x: 2, name: "other", nested: { deep: { v: 7 } } }
              })
            }
          },
          {
            mode: "start",
            req: {
              start: startOf(project, {
                id: c3,
                trace_id: t2,
                op_name: "weave:///ent/query/op/beta:abc",
                started: 20,
                thread_id: "th-2",
                wb_run_id: "run-2",
                inputs: { x: "3", data: `${dataset}/attr/rows` }
              })
            }
          },
          {
            mode: "start",
            req: {
              start: startOf(project, {
                id: c4,
                trace_id: t3,
                op_name: "weave:///ent/query/op/alphabet:abc",
                started: 30,
                wb_user_id: "user-1",
                inputs: { x: 4, flag: "true" }
              })
            }
          },
          { mode: "end", req: { end: endOf(project, c2, 20, { exception: "boom", output: null }) } },
          { mode: "end", req: { end: endOf(project, c1, 100, { output: { score: 0.9 } }) } },
          { mode: "end", req: { end: endOf(project, c4, 70, { output: "text result" }) } }
        ]
      })

      const query = (body: Record<string, unknown>) =>
        Effect.gen(function* () {
          const reply = yield* post("/calls/stream_query", { project_id: project, ...body })
          expect(reply.status).toBe(200)
          expect(reply.contentType).toContain("application/jsonl")
          return lines(reply.text).map((c) => c.id)
        })

      const where = (expr: unknown) => query({ query: { $expr: expr } })
      const field = (path: string) => ({ $getField: path })
      const lit = (value: unknown) => ({ $literal: value })
      const dbl = (operand: unknown) => ({ $convert: { input: operand, to: "double" } })

      it.effect("each filter kind, prefix op names included", () =>
        Effect.gen(function* () {
          expect((yield* seed).status).toBe(200)
          expect(yield* query({})).toEqual([c1, c2, c3, c4])
          expect(yield* query({ filter: { op_names: ["weave:///ent/query/op/beta:abc"] } })).toEqual([c3])
          // `alpha:*` is the prefix `alpha:`, so `alphabet` is not in it.
          expect(yield* query({ filter: { op_names: ["weave:///ent/query/op/alpha:*"] } })).toEqual([c1, c2])
          expect(
            yield* query({ filter: { op_names: ["weave:///ent/query/op/alpha:*", "weave:///ent/query/op/beta:abc"] } })
          ).toEqual([c1, c2, c3])
          expect(yield* query({ filter: { trace_ids: [t1] } })).toEqual([c1, c2])
          expect(yield* query({ filter: { call_ids: [c4, c3] } })).toEqual([c3, c4])
          expect(yield* query({ filter: { parent_ids: [c1] } })).toEqual([c2])
          expect(yield* query({ filter: { trace_roots_only: true } })).toEqual([c1, c3, c4])
          expect(yield* query({ filter: { thread_ids: ["th-2"] } })).toEqual([c3])
          expect(yield* query({ filter: { turn_ids: ["tu-1"] } })).toEqual([c1])
          expect(yield* query({ filter: { wb_run_ids: ["run-1", "run-2"] } })).toEqual([c1, c3])
          expect(yield* query({ filter: { wb_user_ids: ["user-1"] } })).toEqual([c4])
          expect(yield* query({ filter: { input_refs: [dataset] } })).toEqual([c3])
          expect(yield* query({ filter: { trace_ids: [t1], trace_roots_only: true } })).toEqual([c1])
        })
      )

      it.effect("each query operator, $convert, nested paths and the derived summary.weave", () =>
        Effect.gen(function* () {
          yield* seed
          expect(yield* where({ $eq: [field("inputs.x"), lit(1)] })).toEqual([c1])
          expect(yield* where({ $eq: [field("inputs.nested.deep.v"), lit(7)] })).toEqual([c2])
          expect(yield* where({ $eq: [field("inputs.tags.1"), lit("b")] })).toEqual([c1])
          expect(yield* where({ $eq: [field("attributes.env"), lit("prod")] })).toEqual([c1])
          expect(yield* where({ $gt: [dbl(field("inputs.x")), lit(2)] })).toEqual([c3, c4])
          expect(yield* where({ $gte: [dbl(field("inputs.x")), lit(2)] })).toEqual([c2, c3, c4])
          expect(yield* where({ $lt: [dbl(field("inputs.x")), lit(2)] })).toEqual([c1])
          expect(yield* where({ $lte: [dbl(field("inputs.x")), lit(3)] })).toEqual([c1, c2, c3])
          expect(yield* where({ $in: [field("inputs.name"), [lit("other"), lit("nobody")]] })).toEqual([c2])
          expect(yield* where({ $contains: { input: field("inputs.name"), substr: lit("hello") } })).toEqual([])
          expect(
            yield* where({ $contains: { input: field("inputs.name"), substr: lit("hello"), case_insensitive: true } })
          ).toEqual([c1])
          expect(yield* where({ $not: [{ $eq: [field("attributes.env"), lit("prod")] }] })).toEqual([c2, c3, c4])
          expect(
            yield* where({
              $and: [{ $gt: [dbl(field("inputs.x")), lit(1)] }, { $lt: [dbl(field("inputs.x")), lit(4)] }]
            })
          ).toEqual([c2, c3])
          expect(
            yield* where({ $or: [{ $eq: [field("inputs.x"), lit(1)] }, { $eq: [field("inputs.x"), lit("3")] }] })
          ).toEqual([c1, c3])
          expect(yield* where({ $eq: [field("summary.weave.status"), lit("error")] })).toEqual([c2])
          expect(yield* where({ $eq: [field("summary.weave.status"), lit("descendant_error")] })).toEqual([c1])
          expect(yield* where({ $eq: [field("summary.weave.status"), lit("running")] })).toEqual([c3])
          expect(yield* where({ $gt: [field("summary.weave.latency_ms"), lit(50)] })).toEqual([c1])
          expect(yield* where({ $eq: [field("summary.weave.trace_name"), lit("alphabet")] })).toEqual([c4])
          expect(yield* where({ $eq: [field("output.score"), lit(0.9)] })).toEqual([c1])
          expect(yield* where({ $gt: [field("started_at"), lit(at(15))] })).toEqual([c3, c4])
          // $convert to each type.
          expect(yield* where({ $and: [{ $convert: { input: field("output"), to: "exists" } }] })).toEqual([c1, c4])
          expect(yield* where({ $eq: [{ $convert: { input: field("inputs.x"), to: "int" } }, lit(3)] })).toEqual([c3])
          expect(yield* where({ $eq: [{ $convert: { input: field("inputs.x"), to: "string" } }, lit("4")] })).toEqual([
            c4
          ])
          expect(yield* where({ $or: [{ $convert: { input: field("inputs.flag"), to: "bool" } }] })).toEqual([c4])
          expect(
            yield* where({
              $contains: { input: { $convert: { input: field("inputs.nested"), to: "string" } }, substr: lit('"v":5') }
            })
          ).toEqual([c1])
        })
      )

      it.effect("sort_by and paging", () =>
        Effect.gen(function* () {
          yield* seed
          expect(yield* query({ sort_by: [{ field: "started_at", direction: "desc" }] })).toEqual([c4, c3, c2, c1])
          // Missing values (c3 is running) sort last either way.
          expect(yield* query({ sort_by: [{ field: "summary.weave.latency_ms", direction: "desc" }] })).toEqual([
            c1,
            c4,
            c2,
            c3
          ])
          expect(yield* query({ sort_by: [{ field: "summary.weave.latency_ms", direction: "asc" }] })).toEqual([
            c2,
            c4,
            c1,
            c3
          ])
          expect(
            yield* query({
              sort_by: [
                { field: "attributes.env", direction: "asc" },
                { field: "started_at", direction: "desc" }
              ]
            })
          ).toEqual([c2, c1, c4, c3])
          expect(yield* query({ limit: 2, offset: 1 })).toEqual([c2, c3])
          expect(yield* query({ limit: 2 })).toEqual([c1, c2])
          expect(yield* query({ offset: 3 })).toEqual([c4])
          expect(yield* query({ offset: 10 })).toEqual([])
        })
      )

      it.effect("query_stats counts with the same filter and query; bad fields are 403", () =>
        Effect.gen(function* () {
          yield* seed
          const stats = (body: Record<string, unknown>) =>
            Effect.map(post("/calls/query_stats", { project_id: project, ...body }), (reply) => reply.json)
          expect(yield* stats({})).toEqual({ count: 4 })
          expect(yield* stats({ filter: { op_names: ["weave:///ent/query/op/alpha:*"] } })).toEqual({ count: 2 })
          expect(
            yield* stats({
              filter: { trace_roots_only: true },
              query: { $expr: { $gt: [dbl(field("inputs.x")), lit(1)] } }
            })
          ).toEqual({ count: 2 })
          expect(yield* stats({ limit: 3 })).toEqual({ count: 3 })
          const bad = yield* post("/calls/stream_query", {
            project_id: project,
            query: { $expr: { $eq: [field("secret_column"), lit(1)] } }
          })
          expect(bad.status).toBe(403)
          expect(bad.json).toEqual({ reason: "Invalid field: secret_column" })
          const badSort = yield* post("/calls/query_stats", {
            project_id: project,
            query: { $expr: { $eq: [field("id.x"), lit(1)] } }
          })
          expect(badSort.status).toBe(403)
          const malformed = yield* post("/calls/stream_query", { project_id: project, query: { $expr: { $nope: 1 } } })
          expect(malformed.status).toBe(422)
        })
      )
    })

    describe("columns, expand_columns, storage sizes and call refs", () => {
      const project = "ent/expand"
      const [r1, r2, r3] = [uuid(0x301), uuid(0x302), uuid(0x303)]

      const created = (path: string, body: unknown) =>
        Effect.map(post(path, body), (reply) => {
          expect(reply.status).toBe(200)
          return reply.json as { digest: string }
        })

      /** A model object, a dataset over a table, and three calls that take or give refs to them. */
      const seed = Effect.gen(function* () {
        const model = yield* created("/obj/create", {
          obj: {
            project_id: project,
            object_id: "model",
            val: { name: "m1", prompt: "weave:///ent/expand/object/prompt:v0" }
          }
        })
        const prompt = yield* created("/obj/create", {
          obj: { project_id: project, object_id: "prompt", val: { text: "Say hi" } }
        })
        const table = (yield* created("/table/create", {
          table: { project_id: project, rows: [{ q: "a" }, { q: "b" }] }
        })) as { digest: string; row_digests: ReadonlyArray<string> }
        const tableRef = `weave:///${project}/table/${table.digest}`
        const dataset = yield* created("/obj/create", {
          obj: { project_id: project, object_id: "ds", val: { _type: "Dataset", rows: tableRef } }
        })
        const refs = {
          model: `weave:///${project}/object/model:${model.digest}`,
          prompt: `weave:///${project}/object/prompt:${prompt.digest}`,
          dataset: `weave:///${project}/object/ds:${dataset.digest}`,
          table: tableRef,
          call: `weave:///${project}/call/${r1}`,
          row: `weave:///${project}/object/ds:${dataset.digest}/attr/rows/id/${table.row_digests[1]}`
        }
        // The model's prompt ref names version `v0` of `prompt`, which is its first version.
        const reply = yield* post("/call/upsert_batch", {
          batch: [
            {
              mode: "start",
              req: {
                start: startOf(project, {
                  id: r1,
                  started: 0,
                  op_name: "weave:///ent/expand/op/evaluate:abc",
                  attributes: { env: "prod" },
                  inputs: { model: refs.model, dataset: refs.dataset, n: 2, note: "plain" }
                })
              }
            },
            {
              mode: "start",
              req: {
                start: startOf(project, {
                  id: r2,
                  parent_id: r1,
                  started: 10,
                  inputs: { model: refs.model, table: refs.table, parent: refs.call, other: "weave:///x/y/object/o:d" }
                })
              }
            },
            {
              mode: "start",
              req: {
                start: startOf(project, { id: r3, started: 20, inputs: { model: "not a ref", example: refs.row } })
              }
            },
            { mode: "end", req: { end: endOf(project, r2, 15, { output: { model: refs.model } }) } },
            { mode: "end", req: { end: endOf(project, r1, 30, { output: { score: 1 }, summary: { usage: {} } }) } }
          ]
        })
        expect(reply.status).toBe(200)
        return refs
      })

      const query = (body: Record<string, unknown>) =>
        Effect.gen(function* () {
          const reply = yield* post("/calls/stream_query", { project_id: project, ...body })
          expect(reply.status).toBe(200)
          return lines(reply.text)
        })

      it.effect("columns: only the named fields (dotted ones whole) and the required ones carry values", () =>
        Effect.gen(function* () {
          yield* seed
          const full = yield* query({})
          const calls = yield* query({ columns: ["inputs.n", "summary"] })
          expect(calls.map((c) => c.id)).toEqual([r1, r2, r3])
          const [first, second] = calls
          const [fullFirst] = full
          // Required fields are always there, with their values.
          for (const key of ["id", "project_id", "trace_id", "op_name", "started_at"]) {
            expect(first?.[key]).toEqual(fullFirst?.[key])
          }
          // `inputs.n` selects `inputs` whole, as the service does; `summary` keeps its derived part.
          expect(first?.inputs).toEqual(fullFirst?.inputs)
          expect(first?.summary).toEqual(fullFirst?.summary)
          expect(part(part(first?.summary, "weave"), "status")).toBe("success")
          // Everything else is empty.
          expect(first?.attributes).toEqual({})
          expect(first?.ended_at).toBeNull()
          expect(first).not.toHaveProperty("output")
          expect(second?.parent_id).toBeNull()
          expect(fullFirst?.attributes).toEqual({ env: "prod" })
          expect(fullFirst?.output).toEqual({ score: 1 })
          const withOutput = yield* query({ columns: ["output", "parent_id"] })
          expect(withOutput.map((c) => c.output)).toEqual([{ score: 1 }, { model: expect.any(String) }, undefined])
          expect(withOutput.map((c) => c.parent_id)).toEqual([null, r1, null])
          expect(withOutput[0]?.inputs).toEqual({})
          expect(withOutput[0]?.summary).toBeNull()
          const bad = yield* post("/calls/stream_query", { project_id: project, columns: ["secret_column"] })
          expect(bad.status).toBe(403)
          expect(bad.json).toEqual({ reason: "Invalid field: secret_column" })
        })
      )

      it.effect("expand_columns: object refs become their values with _ref, nested paths after their parents", () =>
        Effect.gen(function* () {
          const refs = yield* seed
          const [c1, c2, c3] = yield* query({ expand_columns: ["inputs.model", "inputs.model.prompt", "output.model"] })
          // The model names its prompt as `prompt:v0`: `_ref` is the ref as found.
          const promptV0 = "weave:///ent/expand/object/prompt:v0"
          const model = { name: "m1", prompt: { text: "Say hi", _ref: promptV0 }, _ref: refs.model }
          expect(c1?.inputs).toEqual({ model, dataset: refs.dataset, n: 2, note: "plain" })
          // `output.model.prompt` is not named, so the output's model keeps its prompt ref.
          expect(c2?.output).toEqual({ model: { ...model, prompt: promptV0 } })
          expect(part(c2?.inputs, "model")).toEqual(model)
          // A value that is not a ref stays.
          expect(c3?.inputs).toEqual({ model: "not a ref", example: refs.row })
          // Without the nested path, the inner ref stays a string.
          const [shallow] = yield* query({ expand_columns: ["inputs.model"] })
          expect(part(shallow?.inputs, "model")).toEqual({
            name: "m1",
            prompt: promptV0,
            _ref: refs.model
          })
          // A dataset expands to its object (its rows stay a table ref); a dataset row ref to the row.
          const [withDataset] = yield* query({ expand_columns: ["inputs.dataset"] })
          expect(part(withDataset?.inputs, "dataset")).toEqual({
            _type: "Dataset",
            rows: refs.table,
            _ref: refs.dataset
          })
          const [, , withRow] = yield* query({ expand_columns: ["inputs.example"] })
          expect(part(withRow?.inputs, "example")).toEqual({ q: "b", _ref: refs.row })
          // Table refs, call refs and refs of another project are not expanded, as by the service.
          const [, second] = yield* query({ expand_columns: ["inputs.table", "inputs.parent", "inputs.other"] })
          expect(second?.inputs).toMatchObject({
            table: refs.table,
            parent: refs.call,
            other: "weave:///x/y/object/o:d"
          })
        })
      )

      it.effect("expand_columns serve the query and sort; return_expanded_column_values: false keeps the refs", () =>
        Effect.gen(function* () {
          const refs = yield* seed
          const byModelName = { $eq: [{ $getField: "inputs.model.name" }, { $literal: "m1" }] }
          expect(yield* query({ query: { $expr: byModelName } })).toEqual([])
          const expanded = yield* query({ query: { $expr: byModelName }, expand_columns: ["inputs.model"] })
          expect(expanded.map((c) => c.id)).toEqual([r1, r2])
          const raw = yield* query({
            query: { $expr: byModelName },
            expand_columns: ["inputs.model"],
            return_expanded_column_values: false
          })
          expect(raw.map((c) => c.id)).toEqual([r1, r2])
          expect(raw.map((c) => (c.inputs as { model?: unknown }).model)).toEqual([refs.model, refs.model])
          const stats = yield* post("/calls/query_stats", {
            project_id: project,
            query: { $expr: byModelName },
            expand_columns: ["inputs.model"]
          })
          expect(stats.json).toEqual({ count: 2 })
          // Sorting by an expanded value: "m1" sorts before a missing one (r3's model is not a ref).
          const sorted = yield* query({
            sort_by: [
              { field: "inputs.model.name", direction: "desc" },
              { field: "started_at", direction: "desc" }
            ],
            expand_columns: ["inputs.model"]
          })
          expect(sorted.map((c) => c.id)).toEqual([r2, r1, r3])
        })
      )

      it.effect("query_stats: count capped at limit; storage sizes of calls and of traces", () =>
        Effect.gen(function* () {
          yield* seed
          const stats = (body: Record<string, unknown>) =>
            Effect.map(post("/calls/query_stats", { project_id: project, ...body }), (reply) => {
              expect(reply.status).toBe(200)
              return reply.json as { count: number; total_storage_size_bytes?: number | null }
            })
          expect(yield* stats({})).toEqual({ count: 3 })
          expect(yield* stats({ limit: 2 })).toEqual({ count: 2 })
          expect(yield* stats({ limit: 0 })).toEqual({ count: 0 })
          const calls = yield* query({ include_storage_size: true, include_total_storage_size: true })
          const own = calls.map((c) => c.storage_size_bytes as number)
          for (const size of own) expect(size).toBeGreaterThan(0)
          // r1 and r2 are one trace; r3 another. Only roots carry a total.
          expect(calls.map((c) => c.total_storage_size_bytes)).toEqual([(own[0] ?? 0) + (own[1] ?? 0), null, own[2]])
          const bytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value), "utf8")
          const [first] = yield* query({})
          const summary = { ...(first?.summary as Record<string, unknown>) }
          delete summary.weave
          expect(own[0]).toBe(bytes(first?.attributes) + bytes(first?.inputs) + bytes(first?.output) + bytes(summary))
          const total = yield* stats({ include_total_storage_size: true })
          expect(total).toEqual({ count: 3, total_storage_size_bytes: (own[0] ?? 0) + (own[1] ?? 0) + (own[2] ?? 0) })
          // Only the matching roots count: r2 alone is not a root.
          const children = yield* stats({ include_total_storage_size: true, filter: { call_ids: [r2] } })
          expect(children).toEqual({ count: 1, total_storage_size_bytes: 0 })
        })
      )

      it.effect("refs/read_batch answers a call ref with the derived summary.weave", () =>
        Effect.gen(function* () {
          const refs = yield* seed
          const reply = yield* post("/refs/read_batch", { refs: [refs.call, `weave:///${project}/call/${r3}`] })
          expect(reply.status).toBe(200)
          const [root, running] = (reply.json as { vals: ReadonlyArray<Record<string, unknown>> }).vals
          const [fromRead] = yield* query({ filter: { call_ids: [r1] } })
          expect(root).toEqual(fromRead)
          expect(root?.summary).toEqual({
            usage: {},
            weave: { status: "success", latency_ms: 30, trace_name: "evaluate" }
          })
          expect(part(running?.summary, "weave")).toEqual({
            status: "running",
            latency_ms: null,
            trace_name: "op"
          })
        })
      )
    })

    it.effect("stream_query in the default order pages through the store: offset, limit and queries across pages", () =>
      Effect.gen(function* () {
        const project = "ent/pages"
        const n = 2_500
        const batch = Array.from({ length: n }, (_, i) => ({
          mode: "start",
          req: { start: startOf(project, { id: uuid(100_000 + i), started: i, inputs: { i } }) }
        }))
        expect((yield* post("/call/upsert_batch", { batch })).status).toBe(200)
        const ids = (body: Record<string, unknown>) =>
          Effect.map(post("/calls/stream_query", { project_id: project, ...body }), (reply) => {
            expect(reply.status).toBe(200)
            return lines(reply.text).map((line) => (line.inputs as { i: number }).i)
          })
        const range = (from: number, to: number) => Array.from({ length: to - from }, (_, k) => from + k)
        expect(yield* ids({})).toEqual(range(0, n))
        expect(yield* ids({ offset: 999, limit: 1_002 })).toEqual(range(999, 2_001))
        expect(yield* ids({ offset: 2_400 })).toEqual(range(2_400, n))
        expect(yield* ids({ offset: n })).toEqual([])
        const late = { $expr: { $gte: [{ $getField: "inputs.i" }, { $literal: 1_500 }] } }
        expect(yield* ids({ query: late, offset: 10, limit: 600 })).toEqual(range(1_510, 2_110))
        // The same through the materialized path (a sort other than the default) agrees.
        const sorted = yield* ids({ query: late, sort_by: [{ field: "started_at", direction: "desc" }], limit: 3 })
        expect(sorted).toEqual([2_499, 2_498, 2_497])
      })
    )
  })
})
