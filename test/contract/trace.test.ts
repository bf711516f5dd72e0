/**
 * Every method of `TraceClient` against the real embedded backend, each a round trip: what one call writes,
 * another reads back the same. The trace-* files under `test/server/` test the server's rules in depth (many
 * through plain `fetch`, to control the bytes); this file is the client's side of the contract, one place
 * where each of the 34 operations is seen to work end to end. Digests are checked against `Digest`, which
 * the committed Python vectors pin.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { expect, layer } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import * as Digest from "../../src/api/Digest.js"
import type { ApiError } from "../../src/client/ApiError.js"
import * as TraceClient from "../../src/client/TraceClient.js"
import * as LocalBackend from "../../src/LocalBackend.js"
import { API_KEY } from "../support/clients.js"

const Backend = LocalBackend.layer({ apiKey: Redacted.make(API_KEY) })

const client = Effect.flatMap(LocalBackend.LocalBackend, ({ url }) =>
  TraceClient.make({ apiKey: Redacted.make(API_KEY), baseUrl: url })
)

const collect = <A, E, R>(stream: Stream.Stream<A, E, R>) => Effect.map(Stream.runCollect(stream), Chunk.toArray)

const status = <A, R>(effect: Effect.Effect<A, ApiError, R>) => Effect.map(Effect.flip(effect), (error) => error.status)

const at = (seconds: number) => new Date(Date.UTC(2026, 5, 1, 0, 0, seconds)).toISOString()
const id = (n: number) => `0190b000-0000-7000-8000-${n.toString(16).padStart(12, "0")}`

layer(Layer.merge(Backend, NodeHttpClient.layerUndici), { excludeTestServices: true })(
  "TraceClient against the embedded backend",
  (it) => {
    it.effect("calls: start, end, upsert_batch, read, update, stream_query, query_stats, delete", () =>
      Effect.gen(function* () {
        const trace = yield* client
        const project = "contract/calls"
        const root = yield* trace.callStart({
          start: {
            project_id: project,
            id: id(1),
            op_name: "root",
            started_at: at(0),
            attributes: {},
            inputs: { q: 1 }
          }
        })
        expect(root.id).toBe(id(1))
        yield* trace.callUpsertBatch({
          batch: [
            {
              mode: "start",
              req: {
                start: {
                  project_id: project,
                  id: id(2),
                  parent_id: id(1),
                  op_name: "child",
                  started_at: at(1),
                  attributes: {},
                  inputs: {}
                }
              }
            },
            { mode: "end", req: { end: { project_id: project, id: id(2), ended_at: at(2), summary: {}, output: 7 } } }
          ]
        })
        yield* trace.callEnd({ end: { project_id: project, id: id(1), ended_at: at(3), summary: {}, output: "done" } })
        yield* trace.callUpdate({ project_id: project, call_id: id(1), display_name: "the root" })
        const { call } = yield* trace.callRead({ project_id: project, id: id(1) })
        expect(call?.trace_id).toBe(root.trace_id)
        expect(call?.display_name).toBe("the root")
        expect(call?.output).toBe("done")
        expect(call?.summary?.weave?.latency_ms).toBe(3000)
        const all = yield* collect(trace.callsStreamQuery({ project_id: project }))
        expect(all.map((c) => [c.id, c.parent_id, c.trace_id])).toEqual([
          [id(1), null, root.trace_id],
          [id(2), id(1), root.trace_id]
        ])
        expect((yield* trace.callsQueryStats({ project_id: project })).count).toBe(2)
        expect(yield* trace.callsDelete({ project_id: project, call_ids: [id(1)] })).toEqual({ num_deleted: 2 })
        expect((yield* trace.callsQueryStats({ project_id: project })).count).toBe(0)
        expect((yield* trace.callRead({ project_id: project, id: id(2) })).call).toBeNull()
      })
    )

    it.effect("objects, tables, files, refs and the dataset delete", () =>
      Effect.gen(function* () {
        const trace = yield* client
        const project = "contract/objects"
        const val = { _type: "Dataset", _class_name: "Dataset", _bases: ["Object", "BaseModel"], note: "é" }
        const created = yield* trace.objCreate({ obj: { project_id: project, object_id: "evals", val } })
        expect(created.digest).toBe(Digest.ofValue(val))
        const read = yield* trace.objRead({ project_id: project, object_id: "evals", digest: "latest" })
        expect(read.obj.val).toEqual(val)
        expect(read.obj.base_object_class).toBe("Dataset")
        const listed = yield* trace.objsQuery({ project_id: project, filter: { object_ids: ["evals"] } })
        expect(listed.objs.map((o) => o.digest)).toEqual([created.digest])

        const rows = [{ a: 1 }, { a: 2.5 }, { a: "three" }]
        const table = yield* trace.tableCreate({ table: { project_id: project, rows } })
        expect(table.row_digests).toEqual(rows.map((row) => Digest.ofValue(row)))
        expect(table.digest).toBe(Digest.ofTable(table.row_digests))
        const updated = yield* trace.tableUpdate({
          project_id: project,
          base_digest: table.digest,
          updates: [{ append: { row: { a: 4 } } }, { pop: { index: 0 } }]
        })
        const queried = yield* trace.tableQuery({ project_id: project, digest: updated.digest })
        expect(queried.rows.map((row) => row.val)).toEqual([{ a: 2.5 }, { a: "three" }, { a: 4 }])
        const streamed = yield* collect(trace.tableQueryStream({ project_id: project, digest: updated.digest }))
        expect(streamed.map((row) => row.digest)).toEqual(queried.rows.map((row) => row.digest))
        expect((yield* trace.tableQueryStats({ project_id: project, digest: updated.digest })).count).toBe(3)

        const content = new TextEncoder().encode("def f():\n    return 1\n")
        const file = yield* trace.fileCreate({ project_id: project, name: "obj.py", content })
        expect(file.digest).toBe(Digest.ofBytes(content))
        expect(yield* trace.fileContent({ project_id: project, digest: file.digest })).toEqual(content)

        const refs = yield* trace.refsReadBatch({
          refs: [
            `weave:///${project}/object/evals:${created.digest}/attr/note`,
            `weave:///${project}/table/${updated.digest}/id/${queried.rows[2]?.digest}`
          ]
        })
        expect(refs.vals).toEqual(["é", { a: 4 }])

        const second = yield* trace.objCreate({
          obj: { project_id: project, object_id: "evals", val: { ...val, n: 2 } }
        })
        expect(yield* trace.objDelete({ project_id: project, object_id: "evals", digests: [second.digest] })).toEqual({
          num_deleted: 1
        })
        const [entity, name] = project.split("/") as [string, string]
        expect(yield* trace.datasetDelete(entity, name, "evals")).toEqual({ num_deleted: 1 })
        expect(yield* status(trace.datasetDelete(entity, name, "evals"))).toBe(404)
        expect(yield* status(trace.objRead({ project_id: project, object_id: "evals", digest: "latest" }))).toBe(404)
      })
    )

    it.effect("feedback, costs, threads, completions, OTel, health and server info", () =>
      Effect.gen(function* () {
        const trace = yield* client
        const project = "contract/misc"
        yield* trace.callStart({
          start: {
            project_id: project,
            id: id(10),
            op_name: "turn",
            started_at: at(0),
            attributes: {},
            inputs: {},
            thread_id: "t1",
            turn_id: id(10)
          }
        })
        const weave_ref = `weave:///${project}/call/${id(10)}`
        const note = yield* trace.feedbackCreate({
          project_id: project,
          weave_ref,
          feedback_type: "wandb.note.1",
          payload: { note: "first" }
        })
        const replaced = yield* trace.feedbackReplace({
          project_id: project,
          weave_ref,
          feedback_type: "wandb.note.1",
          payload: { note: "second" },
          feedback_id: note.id
        })
        const found = yield* trace.feedbackQuery({ project_id: project, fields: ["id", "payload"] })
        expect(found.result).toEqual([{ id: replaced.id, payload: { note: "second" } }])
        yield* trace.feedbackPurge({
          project_id: project,
          query: { $expr: { $eq: [{ $getField: "id" }, { $literal: replaced.id }] } }
        })
        expect((yield* trace.feedbackQuery({ project_id: project })).result).toEqual([])

        const costs = yield* trace.costCreate({
          project_id: project,
          costs: { "m-1": { prompt_token_cost: 1, completion_token_cost: 2 } }
        })
        const costId = costs.ids[0]?.[0] ?? ""
        const priced = yield* trace.costQuery({ project_id: project, fields: ["id", "llm_id", "prompt_token_cost"] })
        expect(priced.results).toEqual([{ id: costId, llm_id: "m-1", prompt_token_cost: 1 }])
        yield* trace.costPurge({
          project_id: project,
          query: { $expr: { $eq: [{ $getField: "id" }, { $literal: costId }] } }
        })
        expect((yield* trace.costQuery({ project_id: project })).results).toEqual([])

        const threads = yield* collect(trace.threadsStreamQuery({ project_id: project }))
        expect(threads.map((t) => [t.thread_id, t.turn_count, t.first_turn_id])).toEqual([["t1", 1, id(10)]])

        const inputs = { model: "effect-rl/tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 3, seed: 1 }
        const completion = yield* trace.completionsCreate({ project_id: project, inputs })
        expect(typeof completion.weave_call_id).toBe("string")
        const events = yield* collect(trace.completionsCreateStream({ project_id: project, inputs }))
        expect(events[0]?._tag).toBe("Meta")
        expect(events.slice(1).every((event) => event._tag === "Chunk")).toBe(true)

        const exported = yield* trace.otelExportTrace(
          {
            resourceSpans: [
              {
                scopeSpans: [
                  {
                    spans: [
                      {
                        traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
                        spanId: "00f067aa0ba902b7",
                        name: "otel.op",
                        startTimeUnixNano: "1780272000000000000",
                        endTimeUnixNano: "1780272001000000000"
                      }
                    ]
                  }
                ]
              }
            ]
          },
          { projectId: project }
        )
        expect(exported.partial_success ?? null).toBeNull()
        expect((yield* trace.callRead({ project_id: project, id: "00f067aa0ba902b7" })).call?.op_name).toBe("otel.op")

        expect((yield* trace.health).status).toBe("ok")
        expect((yield* trace.serverInfo).trace_server_version).toMatch(/^effect-rl /)
      })
    )
  }
)
