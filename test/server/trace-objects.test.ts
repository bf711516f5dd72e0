/**
 * The trace surface's objects, tables and dataset delete on the real server, through plain `fetch` with HTTP
 * Basic credentials: obj/create with digests computed from the raw JSON (checked against `Digest` and the
 * committed Python vectors), versions (`latest`, `vN`), no-op re-creation, objs/query filters, sorting and
 * paging, obj/delete and the dataset delete with their 404 and 422 cases; table create, update, query,
 * query_stream and query_stats; file create (multipart) and content with the plural aliases, checked against
 * the committed byte vectors; refs read_batch over objects, ops, tables, calls and every extra.
 */
import { readFileSync } from "node:fs"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Digest from "../../src/api/Digest.js"
import * as LocalBackend from "../../src/LocalBackend.js"
import { API_KEY } from "../support/clients.js"
import { Backend, call, clean } from "./support.js"

const basic = `Basic ${Buffer.from(`api:${API_KEY}`).toString("base64")}`

const post = (path: string, body: unknown) =>
  call(path, {
    method: "POST",
    headers: { authorization: basic, "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body)
  })

const del = (path: string) => call(path, { method: "DELETE", headers: { authorization: basic } })

const vectors = JSON.parse(readFileSync(new URL("../api/fixtures/trace-digests.json", import.meta.url), "utf8")) as {
  readonly values: ReadonlyArray<{ readonly name: string; readonly json: string; readonly digest: string }>
  readonly tables: ReadonlyArray<{
    readonly name: string
    readonly rows: ReadonlyArray<string>
    readonly row_digests: ReadonlyArray<string>
    readonly digest: string
  }>
  readonly files: ReadonlyArray<{ readonly name: string; readonly base64: string; readonly digest: string }>
}

/** A multipart file/create (or its alias). */
const upload = (path: string, project: string, content: Uint8Array, expected?: string) => {
  const form = new FormData()
  form.append("project_id", project)
  if (expected !== undefined) form.append("expected_digest", expected)
  form.append("file", new Blob([content]), "upload.bin")
  return call(path, { method: "POST", headers: { authorization: basic }, body: form })
}

/** file/content (or its alias) as status and bytes. */
const content = (path: string, project: string, digest: string) =>
  Effect.gen(function* () {
    const { url } = yield* LocalBackend.LocalBackend
    return yield* Effect.promise(async () => {
      const response = await fetch(`${url}${path}`, {
        method: "POST",
        headers: { authorization: basic, "content-type": "application/json" },
        body: JSON.stringify({ project_id: project, digest })
      })
      return { status: response.status, bytes: new Uint8Array(await response.arrayBuffer()) }
    })
  })

const vector = (name: string) => {
  const found = vectors.values.find((v) => v.name === name)
  if (found === undefined) throw new Error(`no vector ${name}`)
  return found
}

/** An obj/create body with `val` given as raw JSON text, so floats like `1.0` reach the server as written. */
const createRaw = (project: string, objectId: string, valText: string) =>
  post(
    "/obj/create",
    `{"obj": {"project_id": ${JSON.stringify(project)}, "object_id": ${JSON.stringify(objectId)}, "val": ${valText}}}`
  )

const create = (project: string, objectId: string, val: unknown) => createRaw(project, objectId, JSON.stringify(val))

type Obj = Record<string, unknown>

const readObj = (project: string, objectId: string, digest: string) =>
  post("/obj/read", { project_id: project, object_id: objectId, digest })

const lines = (text: string): ReadonlyArray<Record<string, unknown>> =>
  text
    .split("\n")
    .filter((line) => line.length > 0)
    .map((line) => JSON.parse(line) as Record<string, unknown>)

describe("trace objects", () => {
  it.layer(Backend)("on the real server", (it) => {
    it.effect("obj/create digests match Digest and the Python vectors, floats included", () =>
      Effect.gen(function* () {
        const project = "ent/digests"
        for (const name of ["float 1.0", "nested", "non-ascii keys", "list", "object value", "large int"]) {
          const v = vector(name)
          const reply = yield* createRaw(project, `v-${name.replaceAll(/[^\w]/g, "_")}`, v.json)
          expect(reply.status).toBe(200)
          const { digest } = reply.json as { digest: string }
          expect(digest).toBe(v.digest)
          expect(digest).toBe(Digest.ofJsonText(v.json))
        }
        // 1 and 1.0 are different values for the service.
        const one = yield* createRaw(project, "one", "1")
        const oneFloat = yield* createRaw(project, "one", "1.0")
        expect((one.json as Obj).digest).not.toBe((oneFloat.json as Obj).digest)
        expect((oneFloat.json as Obj).digest).toBe(vector("float 1.0").digest)
      })
    )

    it.effect("a chunked obj/create body (no content-length) hashes the same raw JSON", () =>
      Effect.gen(function* () {
        const { url } = yield* LocalBackend.LocalBackend
        const v = vector("nested")
        const text = `{"obj": {"project_id": "ent/chunked", "object_id": "nested", "val": ${v.json}}}`
        const reply = yield* Effect.promise(async () => {
          const body = new ReadableStream<Uint8Array>({
            start(controller) {
              const bytes = new TextEncoder().encode(text)
              controller.enqueue(bytes.slice(0, 10))
              controller.enqueue(bytes.slice(10))
              controller.close()
            }
          })
          const response = await fetch(`${url}/obj/create`, {
            method: "POST",
            headers: { authorization: basic, "content-type": "application/json" },
            body,
            duplex: "half"
          } as RequestInit)
          return { status: response.status, json: (await response.json()) as Obj }
        })
        expect(reply.status).toBe(200)
        expect(reply.json.digest).toBe(v.digest)
      })
    )

    it.effect("versions: no-op re-creation, latest, vN, kinds and classes", () =>
      Effect.gen(function* () {
        const project = "ent/versions"
        const first = yield* create(project, "ds", {
          _type: "Dataset",
          _class_name: "Dataset",
          rows: 1,
          _bases: ["Object", "BaseModel"]
        })
        const again = yield* create(project, "ds", {
          _bases: ["Object", "BaseModel"],
          rows: 1,
          _class_name: "Dataset",
          _type: "Dataset"
        })
        expect(first.status).toBe(200)
        expect(again.json).toEqual(first.json)
        const second = yield* create(project, "ds", {
          _class_name: "Dataset",
          rows: 2,
          _bases: ["Object", "BaseModel"]
        })
        const d1 = (first.json as Obj).digest as string
        const d2 = (second.json as Obj).digest as string
        expect(d2).toBe(Digest.ofValue({ _class_name: "Dataset", rows: 2, _bases: ["Object", "BaseModel"] }))

        const latest = (yield* readObj(project, "ds", "latest")).json as { obj: Obj }
        expect(latest.obj).toMatchObject({ digest: d2, version_index: 1, is_latest: 1, kind: "object" })
        expect(latest.obj.base_object_class).toBe("Dataset")
        expect(latest.obj.leaf_object_class).toBe("Dataset")
        const v0 = (yield* readObj(project, "ds", "v0")).json as { obj: Obj }
        expect(v0.obj).toMatchObject({ digest: d1, version_index: 0, is_latest: 0, project_id: project })
        expect(v0.obj.val).toEqual({
          _type: "Dataset",
          _class_name: "Dataset",
          rows: 1,
          _bases: ["Object", "BaseModel"]
        })
        const byDigest = (yield* readObj(project, "ds", d1)).json as { obj: Obj }
        expect(byDigest.obj.version_index).toBe(0)

        const op = yield* create(project, "solve", { _type: "CustomWeaveType", weave_type: { type: "Op" }, files: {} })
        const opRead = (yield* readObj(project, "solve", (op.json as Obj).digest as string)).json as { obj: Obj }
        expect(opRead.obj.kind).toBe("op")

        const missing = yield* readObj(project, "ds", "v7")
        expect(missing.status).toBe(404)
        expect(typeof (missing.json as Obj).reason).toBe("string")
        expect(clean(missing.text)).toBe(true)
        expect((yield* readObj(project, "nothing", "latest")).status).toBe(404)
      })
    )

    it.effect("objs/query: filters, sort, limit and offset", () =>
      Effect.gen(function* () {
        const project = "ent/query"
        yield* create(project, "b-model", { _class_name: "Model", _bases: ["Object", "BaseModel"], n: 1 })
        yield* create(project, "a-data", { _class_name: "Dataset", _bases: ["Object", "BaseModel"], n: 1 })
        yield* create(project, "a-data", { _class_name: "Dataset", _bases: ["Object", "BaseModel"], n: 2 })
        yield* create(project, "c-op", { _type: "CustomWeaveType", weave_type: { type: "Op" } })
        const query = (body: Obj) =>
          Effect.map(post("/objs/query", { project_id: project, ...body }), (reply) => {
            expect(reply.status).toBe(200)
            return (reply.json as { objs: ReadonlyArray<Obj> }).objs
          })
        const all = yield* query({})
        expect(all.map((o) => o.object_id)).toEqual(["b-model", "a-data", "a-data", "c-op"])
        const latest = yield* query({ filter: { latest_only: true } })
        expect(latest.map((o) => [o.object_id, o.version_index])).toEqual([
          ["b-model", 0],
          ["a-data", 1],
          ["c-op", 0]
        ])
        expect((yield* query({ filter: { is_op: true } })).map((o) => o.object_id)).toEqual(["c-op"])
        expect((yield* query({ filter: { is_op: false, base_object_classes: ["Dataset"] } })).length).toBe(2)
        expect((yield* query({ filter: { object_ids: ["b-model"] } })).map((o) => o.object_id)).toEqual(["b-model"])
        const sorted = yield* query({ sort_by: [{ field: "object_id", direction: "desc" }], limit: 2, offset: 1 })
        expect(sorted.map((o) => o.object_id)).toEqual(["b-model", "a-data"])
        const bad = yield* post("/objs/query", { project_id: project, sort_by: [{ field: "val.n", direction: "asc" }] })
        expect(bad.status).toBe(400)
      })
    )

    it.effect("obj/delete: given versions, all, 404 when nothing or not all match, deleted reads", () =>
      Effect.gen(function* () {
        const project = "ent/delete"
        const d0 = ((yield* create(project, "thing", { n: 0 })).json as Obj).digest as string
        const d1 = ((yield* create(project, "thing", { n: 1 })).json as Obj).digest as string
        const d2 = ((yield* create(project, "thing", { n: 2 })).json as Obj).digest as string

        const partial = yield* post("/obj/delete", { project_id: project, object_id: "thing", digests: [d2, "nope"] })
        expect(partial.status).toBe(404)
        expect((yield* readObj(project, "thing", d2)).status).toBe(200)

        const one = yield* post("/obj/delete", { project_id: project, object_id: "thing", digests: [d2] })
        expect(one.status).toBe(200)
        expect((one.json as Obj).num_deleted).toBe(1)
        const gone = yield* readObj(project, "thing", d2)
        expect(gone.status).toBe(404)
        expect(typeof (gone.json as Obj).deleted_at).toBe("string")
        expect((yield* readObj(project, "thing", "v2")).status).toBe(404)
        // The latest is now the highest live version.
        expect(((yield* readObj(project, "thing", "latest")).json as { obj: Obj }).obj.digest).toBe(d1)

        // Re-creating a deleted digest makes a new version.
        const back = yield* create(project, "thing", { n: 2 })
        expect((back.json as Obj).digest).toBe(d2)
        expect(((yield* readObj(project, "thing", "latest")).json as { obj: Obj }).obj.version_index).toBe(3)

        const all = yield* post("/obj/delete", { project_id: project, object_id: "thing" })
        expect((all.json as Obj).num_deleted).toBe(3)
        const latest = yield* readObj(project, "thing", "latest")
        expect(latest.status).toBe(404)
        expect(typeof (latest.json as Obj).deleted_at).toBe("string")
        expect((yield* readObj(project, "thing", d0)).status).toBe(404)
        expect((yield* post("/obj/delete", { project_id: project, object_id: "thing" })).status).toBe(404)
        expect((yield* post("/obj/delete", { project_id: project, object_id: "never" })).status).toBe(404)
      })
    )

    it.effect("dataset delete: digests given, all versions, 404 (nothing, or not a dataset), 422 and auth", () =>
      Effect.gen(function* () {
        const project = "ent/datasets"
        const dataset = (n: number) => ({
          _type: "Dataset",
          _class_name: "Dataset",
          _bases: ["Object", "BaseModel"],
          n
        })
        const d0 = ((yield* create(project, "evals", dataset(0))).json as Obj).digest as string
        const d1 = ((yield* create(project, "evals", dataset(1))).json as Obj).digest as string
        yield* create(project, "evals", dataset(2))

        const some = yield* del(`/v2/ent/datasets/datasets/evals?digests=${d0}&digests=${d1}`)
        expect(some.status).toBe(200)
        expect(some.json).toEqual({ num_deleted: 2 })
        expect((yield* readObj(project, "evals", d0)).status).toBe(404)
        expect(((yield* readObj(project, "evals", "latest")).json as { obj: Obj }).obj.version_index).toBe(2)

        const rest = yield* del("/v2/ent/datasets/datasets/evals")
        expect(rest.json).toEqual({ num_deleted: 1 })
        const none = yield* del("/v2/ent/datasets/datasets/evals")
        expect(none.status).toBe(404)
        expect((yield* del("/v2/ent/datasets/datasets/unknown?digests=abc")).status).toBe(404)
        // An object of another class is not a dataset: 404, and it stays.
        yield* create(project, "notes", { _type: "Model", _class_name: "Model", _bases: ["Object", "BaseModel"] })
        const notDataset = yield* del("/v2/ent/datasets/datasets/notes")
        expect(notDataset.status).toBe(404)
        expect(notDataset.json).toEqual({ reason: "Dataset notes not found" })
        expect((yield* readObj(project, "notes", "latest")).status).toBe(200)

        const invalid = yield* del("/v2/ent/datasets/datasets/bad%20name")
        expect(invalid.status).toBe(422)
        const body = invalid.json as {
          detail: ReadonlyArray<{ loc: ReadonlyArray<unknown>; msg: string; type: string }>
        }
        expect(body.detail[0]?.loc).toEqual(["path", "object_id"])
        expect(typeof body.detail[0]?.msg).toBe("string")

        const unauthorized = yield* call("/v2/ent/datasets/datasets/evals", { method: "DELETE" })
        expect(unauthorized.status).toBe(401)
      })
    )

    it.effect("tables: create with the Python vectors, update, query, stream and stats", () =>
      Effect.gen(function* () {
        const project = "ent/tables"
        const fixture = vectors.tables.find((t) => t.name === "rows")
        if (fixture === undefined) throw new Error("no table vector")
        const created = yield* post(
          "/table/create",
          `{"table": {"project_id": "${project}", "rows": [${fixture.rows.join(", ")}]}}`
        )
        expect(created.status).toBe(200)
        expect(created.json).toEqual({ digest: fixture.digest, row_digests: fixture.row_digests })
        expect(Digest.ofTable(fixture.row_digests)).toBe(fixture.digest)

        const rows = [
          { x: 3, s: "c" },
          { x: 1, s: "a" },
          { x: 2, s: "b" }
        ]
        const table = (yield* post("/table/create", { table: { project_id: project, rows } })).json as {
          digest: string
          row_digests: ReadonlyArray<string>
        }
        expect(table.row_digests).toEqual(rows.map((row) => Digest.ofValue(row)))
        expect(table.digest).toBe(Digest.ofTable(table.row_digests))

        const updated = yield* post("/table/update", {
          project_id: project,
          base_digest: table.digest,
          updates: [
            { append: { row: { x: 4, s: "d" } } },
            { pop: { index: 0 } },
            { insert: { index: 0, row: { x: 0 } } }
          ]
        })
        expect(updated.status).toBe(200)
        const next = updated.json as { digest: string; updated_row_digests: ReadonlyArray<string> }
        const d = (row: unknown) => Digest.ofValue(row as Digest.Canonical)
        expect(next.updated_row_digests).toEqual([d({ x: 4, s: "d" }), d({ x: 0 })])
        const expectedOrder = [{ x: 0 }, rows[1], rows[2], { x: 4, s: "d" }]
        expect(next.digest).toBe(Digest.ofTable(expectedOrder.map(d)))
        const badPop = yield* post("/table/update", {
          project_id: project,
          base_digest: table.digest,
          updates: [{ pop: { index: 3 } }]
        })
        expect(badPop.status).toBe(400)

        const query = (body: Obj) =>
          Effect.map(post("/table/query", { project_id: project, digest: next.digest, ...body }), (reply) => {
            expect(reply.status).toBe(200)
            return (reply.json as { rows: ReadonlyArray<Obj> }).rows
          })
        const all = yield* query({})
        expect(all.map((r) => r.val)).toEqual(expectedOrder)
        expect(all.map((r) => r.original_index)).toEqual([0, 1, 2, 3])
        expect(all.map((r) => r.digest)).toEqual(expectedOrder.map(d))
        const filtered = yield* query({ filter: { row_digests: [d(rows[2]), d({ x: 0 })] } })
        expect(filtered.map((r) => r.original_index)).toEqual([0, 2])
        const sorted = yield* query({ sort_by: [{ field: "val.x", direction: "desc" }], limit: 2, offset: 1 })
        expect(sorted.map((r) => r.val)).toEqual([rows[2], rows[1]])

        const stream = yield* post("/table/query_stream", { project_id: project, digest: next.digest, offset: 2 })
        expect(stream.status).toBe(200)
        expect(stream.contentType).toContain("application/jsonl")
        expect(lines(stream.text).map((r) => r.val)).toEqual(expectedOrder.slice(2))

        const stats = yield* post("/table/query_stats", { project_id: project, digest: next.digest })
        expect(stats.json).toEqual({ count: 4 })
        const unknown = yield* post("/table/query", { project_id: project, digest: "0".repeat(64) })
        expect(unknown.status).toBe(404)
      })
    )

    it.effect("files: multipart create answers the byte digest, content gives the bytes back, aliases too", () =>
      Effect.gen(function* () {
        const project = "ent/files"
        for (const vector of vectors.files) {
          const bytes = new Uint8Array(Buffer.from(vector.base64, "base64"))
          const created = yield* upload("/file/create", project, bytes)
          expect(created.status).toBe(200)
          expect(created.json).toEqual({ digest: vector.digest })
          expect(Digest.ofBytes(bytes)).toBe(vector.digest)
          const back = yield* content("/file/content", project, vector.digest)
          expect(back.status).toBe(200)
          expect(Buffer.from(back.bytes).equals(Buffer.from(bytes))).toBe(true)
        }
        const bytes = new TextEncoder().encode("plural ✓")
        const alias = yield* upload("/files/create", project, bytes, Digest.ofBytes(bytes))
        expect(alias.json).toEqual({ digest: Digest.ofBytes(bytes) })
        const viaAlias = yield* content("/files/content", project, Digest.ofBytes(bytes))
        expect(new TextDecoder().decode(viaAlias.bytes)).toBe("plural ✓")
        const mismatch = yield* upload("/file/create", project, bytes, "X".repeat(43))
        expect(mismatch.status).toBe(400)
        expect((yield* content("/file/content", project, "Y".repeat(43))).status).toBe(404)
        expect((yield* content("/file/content", "ent/other", Digest.ofBytes(bytes))).status).toBe(404)
      })
    )

    it.effect("refs/read_batch: objects, ops, tables, calls, extras, deleted objects", () =>
      Effect.gen(function* () {
        const project = "ent/refs"
        const base = `weave:///${project}`
        const table = (yield* post("/table/create", {
          table: {
            project_id: project,
            rows: [
              { q: "a", n: 1 },
              { q: "b", n: 2 }
            ]
          }
        })).json as { digest: string; row_digests: ReadonlyArray<string> }
        const dsVal = { _class_name: "Dataset", _bases: ["Object", "BaseModel"], rows: `${base}/table/${table.digest}` }
        const ds = ((yield* create(project, "ds", dsVal)).json as Obj).digest as string
        const cfgVal = { nested: { list: [10, 20, 30] }, "a/b": true }
        const cfg = ((yield* create(project, "cfg", cfgVal)).json as Obj).digest as string
        const opVal = { _type: "CustomWeaveType", weave_type: { type: "Op" }, name: "solve" }
        const op = ((yield* create(project, "solve", opVal)).json as Obj).digest as string
        const callId = "0190a000-0000-7000-8000-0000000000aa"
        yield* post("/call/start", {
          start: {
            project_id: project,
            id: callId,
            op_name: `${base}/op/solve:${op}`,
            started_at: "2026-01-01T00:00:00.000Z",
            inputs: { x: 1 },
            attributes: {}
          }
        })

        const refs = [
          `${base}/object/cfg:${cfg}`,
          `${base}/object/cfg:latest/key/nested/key/list/index/1`,
          `${base}/object/cfg:v0/attr/${encodeURIComponent("a/b")}`,
          `${base}/op/solve:${op}`,
          `${base}/table/${table.digest}`,
          `${base}/table/${table.digest}/index/1`,
          `${base}/object/ds:${ds}/attr/rows/id/${table.row_digests[0]}`,
          `${base}/object/ds:${ds}/attr/rows/index/1/key/q`,
          `${base}/call/${callId}/key/inputs`,
          `${base}/object/cfg:${cfg}/key/missing`
        ]
        const reply = yield* post("/refs/read_batch", { refs })
        expect(reply.status).toBe(200)
        expect((reply.json as { vals: ReadonlyArray<unknown> }).vals).toEqual([
          cfgVal,
          20,
          true,
          opVal,
          [
            { q: "a", n: 1 },
            { q: "b", n: 2 }
          ],
          { q: "b", n: 2 },
          { q: "a", n: 1 },
          "b",
          { x: 1 },
          null
        ])

        yield* post("/obj/delete", { project_id: project, object_id: "cfg" })
        const after = yield* post("/refs/read_batch", { refs: [`${base}/object/cfg:${cfg}`, `${base}/op/solve:${op}`] })
        expect((after.json as { vals: ReadonlyArray<unknown> }).vals).toEqual([null, opVal])

        const bad = yield* post("/refs/read_batch", { refs: ["not-a-ref"] })
        expect(bad.status).toBe(400)
        expect(clean(bad.text)).toBe(true)
      })
    )
  })
})
