/**
 * Contract tests of `TraceClient` against a real HTTP server on port 0 (`FakeService`, with trace routes added
 * per test): the method, path, credentials and body of every endpoint, the JSON-lines streams (a bad line fails
 * the stream), the multipart upload, the bytes of a file, the dataset delete's repeated `digests`, the mapping
 * of `{reason}` and 422 bodies, and which calls are retried.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import type { ApiError } from "../../src/client/ApiError.js"
import * as TraceClient from "../../src/client/TraceClient.js"
import { version } from "../../src/internal/version.js"
import { API_KEY } from "../support/clients.js"
import * as FakeService from "../support/FakeService.js"

const project = "me/p"
const bearer = `Bearer ${API_KEY}`
const basic = `Basic ${Buffer.from(`api:${API_KEY}`).toString("base64")}`

/** A trace client against `baseUrl` over the undici-based Node client, for the life of the scope. */
const trace = (baseUrl: string, options: Partial<TraceClient.Options> = {}) =>
  Effect.flatMap(Layer.build(NodeHttpClient.layerUndici), (context) =>
    TraceClient.make({ apiKey: Redacted.make(API_KEY), ...options, baseUrl }).pipe(Effect.provide(context))
  )

const call = {
  id: "c1",
  project_id: project,
  op_name: "weave:///me/p/op/f:abc",
  trace_id: "t1",
  started_at: "2026-01-01T00:00:00Z",
  attributes: {},
  inputs: { x: 1 }
}
const objectVersion = {
  project_id: project,
  object_id: "ds",
  created_at: "2026-01-01T00:00:00Z",
  digest: "d1",
  version_index: 0,
  is_latest: 1,
  kind: "object",
  base_object_class: "Dataset",
  val: { rows: "weave:///me/p/table/abc" }
}
const thread = {
  thread_id: "th",
  turn_count: 2,
  start_time: "2026-01-01T00:00:00Z",
  last_updated: "2026-01-01T00:00:01Z",
  first_turn_id: "c1",
  last_turn_id: "c2",
  p50_turn_duration_ms: 10,
  p99_turn_duration_ms: 20.5
}
const feedbackReq = {
  project_id: project,
  weave_ref: "weave:///me/p/call/c1",
  feedback_type: "wandb.reaction.1",
  payload: { emoji: "+1" }
}
const feedbackRes = { id: "f1", created_at: "2026-01-01T00:00:00Z", wb_user_id: "u", payload: { emoji: "+1" } }
const chunk = {
  id: "chatcmpl-1",
  object: "chat.completion.chunk",
  created: 1,
  model: "m",
  choices: [{ index: 0, delta: { content: "hi" }, finish_reason: null }]
}

type Client = TraceClient.Service

/** One JSON endpoint: the call, its path, the body it must send, the reply and what the result must be. */
interface Case {
  readonly name: string
  readonly path: string
  readonly run: (client: Client) => Effect.Effect<unknown, ApiError>
  readonly body: unknown
  readonly reply: unknown
  readonly check: (result: unknown) => void
}

const startReq = {
  start: { project_id: project, id: "c1", op_name: "f", started_at: "2026-01-01T00:00:00Z", attributes: {}, inputs: {} }
}
const endReq = { end: { project_id: project, id: "c1", ended_at: "2026-01-01T00:00:01Z", summary: {}, output: 2 } }

const cases: ReadonlyArray<Case> = [
  {
    name: "callStart",
    path: "/call/start",
    run: (c) => c.callStart(startReq),
    body: startReq,
    reply: { id: "c1", trace_id: "t1" },
    check: (r) => expect(r).toEqual({ id: "c1", trace_id: "t1" })
  },
  {
    name: "callEnd",
    path: "/call/end",
    run: (c) => c.callEnd(endReq),
    body: endReq,
    reply: {},
    check: (r) => expect(r).toEqual({})
  },
  {
    name: "callUpsertBatch",
    path: "/call/upsert_batch",
    run: (c) =>
      c.callUpsertBatch({
        batch: [
          { mode: "start", req: startReq },
          { mode: "end", req: endReq }
        ]
      }),
    body: {
      batch: [
        { mode: "start", req: startReq },
        { mode: "end", req: endReq }
      ]
    },
    reply: { res: [{ id: "c1", trace_id: "t1" }, {}] },
    check: (r) => expect(r).toEqual({ res: [{ id: "c1", trace_id: "t1" }, {}] })
  },
  {
    name: "callRead",
    path: "/call/read",
    run: (c) => c.callRead({ project_id: project, id: "c1" }),
    body: { project_id: project, id: "c1" },
    reply: { call },
    check: (r) => expect((r as { call: { inputs: unknown } }).call.inputs).toEqual({ x: 1 })
  },
  {
    name: "callUpdate",
    path: "/call/update",
    run: (c) => c.callUpdate({ project_id: project, call_id: "c1", display_name: "n" }),
    body: { project_id: project, call_id: "c1", display_name: "n" },
    reply: {},
    check: (r) => expect(r).toEqual({})
  },
  {
    name: "callsDelete",
    path: "/calls/delete",
    run: (c) => c.callsDelete({ project_id: project, call_ids: ["c1", "c2"] }),
    body: { project_id: project, call_ids: ["c1", "c2"] },
    reply: { num_deleted: 3 },
    check: (r) => expect(r).toEqual({ num_deleted: 3 })
  },
  {
    name: "callsQueryStats",
    path: "/calls/query_stats",
    run: (c) => c.callsQueryStats({ project_id: project, filter: { trace_roots_only: true } }),
    body: { project_id: project, filter: { trace_roots_only: true } },
    reply: { count: 7 },
    check: (r) => expect((r as { count: number }).count).toBe(7)
  },
  {
    name: "costCreate",
    path: "/cost/create",
    run: (c) => c.costCreate({ project_id: project, costs: { m: { prompt_token_cost: 1, completion_token_cost: 2 } } }),
    body: { project_id: project, costs: { m: { prompt_token_cost: 1, completion_token_cost: 2 } } },
    reply: { ids: [["k1", "m"]] },
    check: (r) => expect(r).toEqual({ ids: [["k1", "m"]] })
  },
  {
    name: "costPurge",
    path: "/cost/purge",
    run: (c) =>
      c.costPurge({ project_id: project, query: { $expr: { $eq: [{ $getField: "id" }, { $literal: "k1" }] } } }),
    body: { project_id: project, query: { $expr: { $eq: [{ $getField: "id" }, { $literal: "k1" }] } } },
    reply: {},
    check: (r) => expect(r).toEqual({})
  },
  {
    name: "costQuery",
    path: "/cost/query",
    run: (c) => c.costQuery({ project_id: project, limit: 5 }),
    body: { project_id: project, limit: 5 },
    reply: { results: [{ id: "k1", llm_id: "m", prompt_token_cost: 1 }] },
    check: (r) => expect((r as { results: Array<{ llm_id: string }> }).results[0]?.llm_id).toBe("m")
  },
  {
    name: "feedbackCreate",
    path: "/feedback/create",
    run: (c) => c.feedbackCreate(feedbackReq),
    body: feedbackReq,
    reply: feedbackRes,
    check: (r) => expect(r).toEqual(feedbackRes)
  },
  {
    name: "feedbackPurge",
    path: "/feedback/purge",
    run: (c) =>
      c.feedbackPurge({ project_id: project, query: { $expr: { $eq: [{ $getField: "id" }, { $literal: "f1" }] } } }),
    body: { project_id: project, query: { $expr: { $eq: [{ $getField: "id" }, { $literal: "f1" }] } } },
    reply: {},
    check: (r) => expect(r).toEqual({})
  },
  {
    name: "feedbackQuery",
    path: "/feedback/query",
    run: (c) => c.feedbackQuery({ project_id: project, fields: ["id"] }),
    body: { project_id: project, fields: ["id"] },
    reply: { result: [{ id: "f1" }] },
    check: (r) => expect(r).toEqual({ result: [{ id: "f1" }] })
  },
  {
    name: "feedbackReplace",
    path: "/feedback/replace",
    run: (c) => c.feedbackReplace({ ...feedbackReq, feedback_id: "f0" }),
    body: { ...feedbackReq, feedback_id: "f0" },
    reply: feedbackRes,
    check: (r) => expect((r as { id: string }).id).toBe("f1")
  },
  {
    name: "objCreate",
    path: "/obj/create",
    run: (c) => c.objCreate({ obj: { project_id: project, object_id: "ds", val: { a: 1.5 } } }),
    body: { obj: { project_id: project, object_id: "ds", val: { a: 1.5 } } },
    reply: { digest: "d1" },
    check: (r) => expect((r as { digest: string }).digest).toBe("d1")
  },
  {
    name: "objDelete",
    path: "/obj/delete",
    run: (c) => c.objDelete({ project_id: project, object_id: "ds", digests: ["d1"] }),
    body: { project_id: project, object_id: "ds", digests: ["d1"] },
    reply: { num_deleted: 1 },
    check: (r) => expect((r as { num_deleted: number }).num_deleted).toBe(1)
  },
  {
    name: "objRead",
    path: "/obj/read",
    run: (c) => c.objRead({ project_id: project, object_id: "ds", digest: "latest" }),
    body: { project_id: project, object_id: "ds", digest: "latest" },
    reply: { obj: objectVersion },
    check: (r) => expect((r as { obj: { digest: string } }).obj.digest).toBe("d1")
  },
  {
    name: "objsQuery",
    path: "/objs/query",
    run: (c) => c.objsQuery({ project_id: project, filter: { latest_only: true } }),
    body: { project_id: project, filter: { latest_only: true } },
    reply: { objs: [objectVersion, { ...objectVersion, digest: "d2" }] },
    check: (r) => expect((r as { objs: Array<{ digest: string }> }).objs.map((o) => o.digest)).toEqual(["d1", "d2"])
  },
  {
    name: "otelExportTrace (JSON)",
    path: "/otel/v1/trace",
    run: (c) =>
      c.otelExportTrace({
        resourceSpans: [
          {
            scopeSpans: [
              { spans: [{ traceId: "t", spanId: "s", name: "n", startTimeUnixNano: "1", endTimeUnixNano: "2" }] }
            ]
          }
        ]
      }),
    body: {
      resourceSpans: [
        {
          scopeSpans: [
            { spans: [{ traceId: "t", spanId: "s", name: "n", startTimeUnixNano: "1", endTimeUnixNano: "2" }] }
          ]
        }
      ]
    },
    reply: {},
    check: (r) => expect(r).toEqual({})
  },
  {
    name: "refsReadBatch",
    path: "/refs/read_batch",
    run: (c) => c.refsReadBatch({ refs: ["weave:///me/p/object/ds:d1"] }),
    body: { refs: ["weave:///me/p/object/ds:d1"] },
    reply: { vals: [{ a: 1 }] },
    check: (r) => expect(r).toEqual({ vals: [{ a: 1 }] })
  },
  {
    name: "tableCreate",
    path: "/table/create",
    run: (c) => c.tableCreate({ table: { project_id: project, rows: [{ q: "é" }, { q: "b" }] } }),
    body: { table: { project_id: project, rows: [{ q: "é" }, { q: "b" }] } },
    reply: { digest: "t1", row_digests: ["r1", "r2"] },
    check: (r) => expect(r).toEqual({ digest: "t1", row_digests: ["r1", "r2"] })
  },
  {
    name: "tableQuery",
    path: "/table/query",
    run: (c) => c.tableQuery({ project_id: project, digest: "t1", limit: 1 }),
    body: { project_id: project, digest: "t1", limit: 1 },
    reply: { rows: [{ digest: "r1", val: { q: "a" }, original_index: 0 }] },
    check: (r) => expect((r as { rows: Array<{ digest: string }> }).rows[0]?.digest).toBe("r1")
  },
  {
    name: "tableQueryStats",
    path: "/table/query_stats",
    run: (c) => c.tableQueryStats({ project_id: project, digest: "t1" }),
    body: { project_id: project, digest: "t1" },
    reply: { count: 2 },
    check: (r) => expect(r).toEqual({ count: 2 })
  },
  {
    name: "tableUpdate",
    path: "/table/update",
    run: (c) => c.tableUpdate({ project_id: project, base_digest: "t1", updates: [{ append: { row: { q: "c" } } }] }),
    body: { project_id: project, base_digest: "t1", updates: [{ append: { row: { q: "c" } } }] },
    reply: { digest: "t2", updated_row_digests: ["r3"] },
    check: (r) => expect(r).toEqual({ digest: "t2", updated_row_digests: ["r3"] })
  },
  {
    name: "completionsCreate",
    path: "/completions/create",
    run: (c) =>
      c.completionsCreate({ project_id: project, inputs: { model: "m", messages: [{ role: "user", content: "hi" }] } }),
    body: { project_id: project, inputs: { model: "m", messages: [{ role: "user", content: "hi" }] } },
    reply: { response: { id: "x", choices: [] }, weave_call_id: "c9" },
    check: (r) => expect((r as { weave_call_id: string }).weave_call_id).toBe("c9")
  }
]

describe("TraceClient against a server that behaves as the trace service does", () => {
  for (const c of cases) {
    it.scoped(`${c.name}: POST ${c.path} with bearer and the request body`, () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        server.route("POST", c.path, () => ({ json: c.reply }))
        const client = yield* trace(server.url)
        c.check(yield* c.run(client))
        expect(server.received).toHaveLength(1)
        const [request] = server.received
        expect(request?.method).toBe("POST")
        expect(request?.path).toBe(c.path)
        expect(request?.headers.authorization).toBe(bearer)
        expect(request?.headers["user-agent"]).toBe(`effect-rl/${version}`)
        expect(request?.headers["content-type"]).toBe("application/json")
        expect(request?.json).toEqual(c.body)
      })
    )
  }

  it.scoped("health and server_info: GET with bearer", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      server.route("GET", "/health", () => ({ json: { status: "ok", extra: 1 } }))
      server.route("GET", "/server_info", () => ({
        json: { min_required_weave_python_version: "0.50.0", trace_server_version: null }
      }))
      const client = yield* trace(server.url)
      expect((yield* client.health).status).toBe("ok")
      expect((yield* client.serverInfo).min_required_weave_python_version).toBe("0.50.0")
      expect(server.received.map((r) => [r.method, r.path, r.headers.authorization])).toEqual([
        ["GET", "/health", bearer],
        ["GET", "/server_info", bearer]
      ])
    })
  )

  it.scoped("a request that breaks its schema is not sent", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* trace(server.url)
      const error = yield* Effect.flip(client.callsQueryStats({ project_id: project, limit: -1 }))
      expect(error.reason).toBe("InvalidRequest")
      expect(error.detail?.[0]?.loc).toEqual(["body", "limit"])
      expect(server.received).toHaveLength(0)
    })
  )
})

describe("TraceClient JSON-lines streams", () => {
  it.scoped("calls/stream_query decodes each line, even split across writes, CRLF and blank lines included", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const lines = [JSON.stringify(call), JSON.stringify({ ...call, id: "c2", display_name: "two" })]
      const body = `${lines[0]}\r\n\n${lines[1]}\n`
      server.route("POST", "/calls/stream_query", () => ({
        headers: { "content-type": "application/jsonl" },
        chunks: [body.slice(0, 10), body.slice(10, lines[0]!.length + 1), body.slice(lines[0]!.length + 1)],
        delayMs: 2
      }))
      const client = yield* trace(server.url)
      const calls = Chunk.toReadonlyArray(
        yield* Stream.runCollect(
          client.callsStreamQuery({
            project_id: project,
            limit: 10,
            sort_by: [{ field: "started_at", direction: "desc" }]
          })
        )
      )
      expect(calls.map((c) => c.id)).toEqual(["c1", "c2"])
      expect(calls[1]?.display_name).toBe("two")
      const [request] = server.received
      expect(request?.headers.accept).toBe("application/jsonl")
      expect(request?.headers.authorization).toBe(bearer)
      expect(request?.json).toEqual({
        project_id: project,
        limit: 10,
        sort_by: [{ field: "started_at", direction: "desc" }]
      })
    })
  )

  it.scoped("a last line without a newline is decoded; an empty body is an empty stream", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      server.route("POST", "/table/query_stream", (_, attempt) => ({
        headers: { "content-type": "application/jsonl" },
        body:
          attempt === 0
            ? `${JSON.stringify({ digest: "r1", val: 1 })}\n${JSON.stringify({ digest: "r2", val: [1.5] })}`
            : ""
      }))
      const client = yield* trace(server.url)
      const rows = yield* Stream.runCollect(client.tableQueryStream({ project_id: project, digest: "t1" }))
      expect(Chunk.toReadonlyArray(rows).map((r) => [r.digest, r.val])).toEqual([
        ["r1", 1],
        ["r2", [1.5]]
      ])
      const none = yield* Stream.runCollect(client.tableQueryStream({ project_id: project, digest: "t1" }))
      expect(Chunk.size(none)).toBe(0)
      expect(server.received[0]?.path).toBe("/table/query_stream")
    })
  )

  it.scoped("a line that is not JSON fails the stream with a Decode error naming it, after the good lines", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      server.route("POST", "/threads/stream_query", () => ({
        headers: { "content-type": "application/jsonl" },
        body: `${JSON.stringify(thread)}\n{"thread_id": oops\n${JSON.stringify(thread)}\n`
      }))
      const client = yield* trace(server.url)
      const seen: Array<string> = []
      const error = yield* Effect.flip(
        Stream.runForEach(client.threadsStreamQuery({ project_id: project }), (t) =>
          Effect.sync(() => seen.push(t.thread_id))
        )
      )
      expect(seen).toEqual(["th"])
      expect(error.reason).toBe("Decode")
      expect(error.path).toBe("/threads/stream_query")
      expect(error.description).toContain("line 2 is not JSON")
      expect(error.excerpt).toBe('{"thread_id": oops')
    })
  )

  it.scoped("a line that does not match its schema fails the stream with a Decode error", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      server.route("POST", "/calls/stream_query", () => ({
        headers: { "content-type": "application/jsonl" },
        body: `${JSON.stringify(call)}\n${JSON.stringify({ ...call, trace_id: 5 })}\n`
      }))
      const client = yield* trace(server.url)
      const error = yield* Effect.flip(Stream.runDrain(client.callsStreamQuery({ project_id: project })))
      expect(error.reason).toBe("Decode")
      expect(error.description).toContain("line 2 does not match")
      expect(error.description).toContain("trace_id")
    })
  )

  it.scoped("completions/create_stream: the metadata line, then chunks; an error line ends it", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      server.route("POST", "/completions/create_stream", (_, attempt) => ({
        headers: { "content-type": "application/jsonl" },
        body:
          attempt === 0
            ? [{ _meta: { weave_call_id: "c9" } }, chunk, { ...chunk, choices: [] }]
                .map((l) => JSON.stringify(l))
                .join("\n")
            : [chunk, { error: { message: "model overloaded" } }].map((l) => JSON.stringify(l)).join("\n")
      }))
      const client = yield* trace(server.url)
      const request = { project_id: project, inputs: { model: "m", messages: [] } }
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(client.completionsCreateStream(request)))
      expect(events.map((e) => e._tag)).toEqual(["Meta", "Chunk", "Chunk"])
      const [meta, first] = events
      expect(meta?._tag === "Meta" ? meta.meta.weave_call_id : undefined).toBe("c9")
      expect(first?._tag === "Chunk" ? first.chunk.choices[0]?.delta.content : undefined).toBe("hi")
      expect(server.received[0]?.json).toEqual(request)

      const error = yield* Effect.flip(Stream.runDrain(client.completionsCreateStream(request)))
      expect(error.reason).toBe("ServerError")
      expect(error.description).toBe("model overloaded")
    })
  )

  it.scoped("a stream whose request fails is an ApiError with the service's reason", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      server.route("POST", "/calls/stream_query", () => ({ status: 400, json: { reason: "bad query: $foo" } }))
      const client = yield* trace(server.url)
      const error = yield* Effect.flip(Stream.runDrain(client.callsStreamQuery({ project_id: project })))
      expect(error.reason).toBe("BadRequest")
      expect(error.status).toBe(400)
      expect(error.description).toBe("bad query: $foo")
    })
  )
})

describe("TraceClient files", () => {
  it.scoped("file/create sends multipart with project_id, expected_digest and the file; answers the digest", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      server.route("POST", "/file/create", () => ({ json: { digest: "fd1" } }))
      const client = yield* trace(server.url)
      const content = new TextEncoder().encode("hello, file\n")
      const result = yield* client.fileCreate({
        project_id: project,
        name: "a.txt",
        content,
        contentType: "text/plain",
        expected_digest: "fd1"
      })
      expect(result).toEqual({ digest: "fd1" })
      const [request] = server.received
      expect(request?.path).toBe("/file/create")
      expect(request?.headers.authorization).toBe(bearer)
      const contentType = request?.headers["content-type"] ?? ""
      expect(contentType).toMatch(/^multipart\/form-data; boundary=/)
      const form = yield* Effect.promise(() =>
        new Response(request?.body, { headers: { "content-type": contentType } }).formData()
      )
      expect(form.get("project_id")).toBe(project)
      expect(form.get("expected_digest")).toBe("fd1")
      const file = form.get("file")
      expect(file).toBeInstanceOf(Blob)
      expect((file as File).name).toBe("a.txt")
      expect((file as File).type).toBe("text/plain")
      expect(yield* Effect.promise(() => (file as File).text())).toBe("hello, file\n")
    })
  )

  it.scoped("file/content answers the raw bytes", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      server.route("POST", "/file/content", () => ({
        headers: { "content-type": "application/octet-stream" },
        body: "bytes \u00e9"
      }))
      const client = yield* trace(server.url)
      const bytes = yield* client.fileContent({ project_id: project, digest: "fd1" })
      expect(bytes).toBeInstanceOf(Uint8Array)
      expect(new TextDecoder().decode(bytes)).toBe("bytes \u00e9")
      expect(server.received[0]?.json).toEqual({ project_id: project, digest: "fd1" })
      expect(server.received[0]?.headers.accept).toBe("application/octet-stream")
    })
  )

  it.scoped("the OTel export sends protobuf bytes as application/x-protobuf", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      server.route("POST", "/otel/v1/trace", () => ({
        json: { partial_success: { rejected_spans: 1, error_message: "x" } }
      }))
      const client = yield* trace(server.url)
      const result = yield* client.otelExportTrace(new TextEncoder().encode("\n\u0001a"))
      expect(result.partial_success?.rejected_spans).toBe(1)
      expect(server.received[0]?.headers["content-type"]).toBe("application/x-protobuf")
      expect(server.received[0]?.body).toBe("\n\u0001a")
    })
  )
})

describe("TraceClient dataset delete", () => {
  it.scoped("DELETE /v2/{entity}/{project}/datasets/{object_id}?digests=a&digests=b with Basic credentials", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      server.route("DELETE", "/v2/:entity/:project/datasets/:id", (r) => ({
        json: { num_deleted: r.query.getAll("digests").length || 3 }
      }))
      const client = yield* trace(server.url)
      expect(yield* client.datasetDelete("me", "my p", "ds/1", { digests: ["a", "b"] })).toEqual({ num_deleted: 2 })
      expect(yield* client.datasetDelete("me", "p", "ds")).toEqual({ num_deleted: 3 })
      const [first, second] = server.received
      expect(first?.method).toBe("DELETE")
      expect(first?.path).toBe("/v2/me/my%20p/datasets/ds%2F1")
      expect(first?.query.getAll("digests")).toEqual(["a", "b"])
      expect(first?.headers.authorization).toBe(basic)
      expect(second?.path).toBe("/v2/me/p/datasets/ds")
      expect(second?.query.has("digests")).toBe(false)
      expect(second?.headers.authorization).toBe(basic)
    })
  )

  it.scoped("404 and the 422 body of seed 2.2 map to NotFound and Validation", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      server.route("DELETE", "/v2/:entity/:project/datasets/:id", (_, attempt) =>
        attempt === 0
          ? { status: 404, json: { reason: "Dataset ds not found" } }
          : {
              status: 422,
              json: {
                detail: [
                  { loc: ["query", "digests", 0], msg: "String should match pattern", type: "string_pattern_mismatch" }
                ]
              }
            }
      )
      const client = yield* trace(server.url)
      const notFound = yield* Effect.flip(client.datasetDelete("me", "p", "ds"))
      expect(notFound.reason).toBe("NotFound")
      expect(notFound.description).toBe("Dataset ds not found")
      expect(notFound.retryable).toBe(false)
      const invalid = yield* Effect.flip(client.datasetDelete("me", "p", "ds", { digests: ["!"] }))
      expect(invalid.reason).toBe("Validation")
      expect(invalid.status).toBe(422)
      expect(invalid.detail?.[0]?.loc).toEqual(["query", "digests", 0])
      expect(invalid.description).toBe("query.digests.0: String should match pattern")
      expect(server.received).toHaveLength(2)
    })
  )
})

describe("TraceClient errors", () => {
  for (const [status, reason] of [
    [400, "BadRequest"],
    [403, "Forbidden"],
    [404, "NotFound"],
    [413, "BadRequest"]
  ] as const) {
    it.scoped(`a ${status} {reason} body is a ${reason} with the service's message, never the key`, () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        server.route("POST", "/obj/read", () => ({
          status,
          headers: { "x-request-id": "req-1" },
          json: { reason: `why ${status}` }
        }))
        const client = yield* trace(server.url)
        const error = yield* Effect.flip(client.objRead({ project_id: project, object_id: "ds", digest: "latest" }))
        expect(error.reason).toBe(reason)
        expect(error.status).toBe(status)
        expect(error.description).toBe(`why ${status}`)
        expect(error.requestId).toBe("req-1")
        expect(error.path).toBe("/obj/read")
        expect(JSON.stringify(error)).not.toContain(API_KEY)
        expect(error.message).not.toContain(API_KEY)
      })
    )
  }
})

describe("TraceClient retries", () => {
  /** 503 twice (waiting the 1 ms the service asks for), then the reply. */
  const flaky =
    (reply: FakeService.Reply): FakeService.Handler =>
    (_, attempt) =>
      attempt < 2 ? { status: 503, headers: { "retry-after-ms": "1" }, json: { reason: "busy" } } : reply

  it.scopedLive("obj/create, call/start with an id, upsert_batch with ids and call/end are retried on 503", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      server.route("POST", "/obj/create", flaky({ json: { digest: "d1" } }))
      server.route("POST", "/call/start", flaky({ json: { id: "c1", trace_id: "t1" } }))
      server.route("POST", "/call/upsert_batch", flaky({ json: { res: [{ id: "c1", trace_id: "t1" }] } }))
      server.route("POST", "/call/end", flaky({ json: {} }))
      const client = yield* trace(server.url)
      expect((yield* client.objCreate({ obj: { project_id: project, object_id: "o", val: 1 } })).digest).toBe("d1")
      expect(yield* client.callStart(startReq)).toEqual({ id: "c1", trace_id: "t1" })
      yield* client.callUpsertBatch({ batch: [{ mode: "start", req: startReq }] })
      yield* client.callEnd(endReq)
      expect(server.count("POST", "/obj/create")).toBe(3)
      expect(server.count("POST", "/call/start")).toBe(3)
      expect(server.count("POST", "/call/upsert_batch")).toBe(3)
      expect(server.count("POST", "/call/end")).toBe(3)
    })
  )

  it.scopedLive("the streams and the dataset delete are retried until their response begins", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      server.route(
        "POST",
        "/calls/stream_query",
        flaky({ headers: { "content-type": "application/jsonl" }, body: `${JSON.stringify(call)}\n` })
      )
      server.route("DELETE", "/v2/:entity/:project/datasets/:id", flaky({ json: { num_deleted: 1 } }))
      const client = yield* trace(server.url)
      expect(Chunk.size(yield* Stream.runCollect(client.callsStreamQuery({ project_id: project })))).toBe(1)
      expect(yield* client.datasetDelete("me", "p", "ds")).toEqual({ num_deleted: 1 })
      expect(server.count("POST", "/calls/stream_query")).toBe(3)
      expect(server.count("DELETE", "/v2/:entity/:project/datasets/:id")).toBe(3)
    })
  )

  it.scopedLive("feedback/create, cost/create and a start without an id are sent once", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      server.route("POST", "/feedback/create", flaky({ json: feedbackRes }))
      server.route("POST", "/cost/create", flaky({ json: { ids: [] } }))
      server.route("POST", "/call/start", flaky({ json: { id: "c1", trace_id: "t1" } }))
      const client = yield* trace(server.url)
      const feedback = yield* Effect.flip(client.feedbackCreate(feedbackReq))
      expect(feedback.reason).toBe("ServerError")
      expect(feedback.description).toBe("busy")
      expect(feedback.retryable).toBe(true)
      yield* Effect.flip(client.costCreate({ project_id: project, costs: {} }))
      const { id: _, ...start } = startReq.start
      yield* Effect.flip(client.callStart({ start }))
      expect(server.count("POST", "/feedback/create")).toBe(1)
      expect(server.count("POST", "/cost/create")).toBe(1)
      expect(server.count("POST", "/call/start")).toBe(1)
    })
  )

  it.scopedLive("feedback/create with an idempotency key sends it and is retried", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      server.route("POST", "/feedback/create", flaky({ json: feedbackRes }))
      const client = yield* trace(server.url)
      expect((yield* client.feedbackCreate(feedbackReq, { idempotencyKey: "k-1" })).id).toBe("f1")
      expect(server.received.map((r) => r.headers["idempotency-key"])).toEqual(["k-1", "k-1", "k-1"])
    })
  )
})

describe("TraceClient layers", () => {
  it.scoped("layerConfig reads EFFECT_RL_TRACE_URL and WANDB_API_KEY", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      server.route("GET", "/health", () => ({ json: { status: "ok" } }))
      const provider = ConfigProvider.fromMap(
        new Map([
          ["EFFECT_RL_TRACE_URL", server.url],
          ["WANDB_API_KEY", "sk-from-env"]
        ])
      )
      const layer = TraceClient.layerConfig().pipe(
        Layer.provide(NodeHttpClient.layerUndici),
        Layer.provide(Layer.setConfigProvider(provider))
      )
      const status = yield* Effect.flatMap(TraceClient.TraceClient, (c) => c.health).pipe(Effect.provide(layer))
      expect(status.status).toBe("ok")
      expect(server.received[0]?.headers.authorization).toBe("Bearer sk-from-env")
      expect(TraceClient.DEFAULT_URL).toBe("https://trace.wandb.ai")
    })
  )
})
