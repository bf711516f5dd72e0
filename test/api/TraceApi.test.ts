/**
 * The trace service's `HttpApi`: every method and path of seed 4.1 is defined exactly once (the list below is
 * copied from the seed's table), with the aliases; every endpoint declares the 422 body; and the definitions
 * that are not plain JSON (repeated query parameter, OTLP protobuf or JSON, multipart, JSON lines, raw bytes)
 * work through a real server and a derived client.
 */

import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { describe, expect, it, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Digest from "../../src/api/Digest.js"
import * as TraceApi from "../../src/api/TraceApi.js"

/** Seed 4.1, "Trace service (A)": method, path, name. */
const seed41: ReadonlyArray<readonly [string, string, string]> = [
  ["POST", "/call/end", "Call End"],
  ["POST", "/call/read", "Call Read"],
  ["POST", "/call/start", "Call Start"],
  ["POST", "/call/update", "Call Update"],
  ["POST", "/call/upsert_batch", "Call Start Batch"],
  ["POST", "/calls/delete", "Calls Delete"],
  ["POST", "/calls/query_stats", "Calls Query Stats"],
  ["POST", "/calls/stream_query", "Calls Query Stream"],
  ["POST", "/cost/create", "Cost Create"],
  ["POST", "/cost/purge", "Cost Purge"],
  ["POST", "/cost/query", "Cost Query"],
  ["POST", "/feedback/create", "Feedback Create"],
  ["POST", "/feedback/purge", "Feedback Purge"],
  ["POST", "/feedback/query", "Feedback Query"],
  ["POST", "/feedback/replace", "Feedback Replace"],
  ["POST", "/file/content", "File Content"],
  ["POST", "/file/create", "File Create"],
  ["POST", "/obj/create", "Obj Create"],
  ["POST", "/obj/delete", "Obj Delete"],
  ["POST", "/obj/read", "Obj Read"],
  ["POST", "/objs/query", "Objs Query"],
  ["POST", "/otel/v1/trace", "Export Trace"],
  ["POST", "/refs/read_batch", "Refs Read Batch"],
  ["GET", "/health", "Read Root"],
  ["GET", "/server_info", "Server Info"],
  ["POST", "/table/create", "Table Create"],
  ["POST", "/table/query", "Table Query"],
  ["POST", "/table/query_stats", "Table Query Stats"],
  ["POST", "/table/update", "Table Update"],
  ["POST", "/table/query_stream", "Table Query Stream"],
  ["POST", "/threads/stream_query", "Threads Query Stream"],
  ["POST", "/completions/create", "Completions Create"],
  ["POST", "/completions/create_stream", "Completions Create Stream"],
  ["DELETE", "/v2/{entity}/{project}/datasets/{object_id}", "Dataset Delete"]
]

/** The aliases trace-service.md adds: the plural file paths and the standard OTLP path. */
const aliases = ["POST /files/create", "POST /files/content", "POST /otel/v1/traces"]

/** Every endpoint of the api as `METHOD /path` with `{param}` path parameters. */
const defined = (): Array<string> =>
  Object.values(TraceApi.TraceApi.groups).flatMap((group) =>
    Object.values(group.endpoints).map(
      (endpoint) => `${endpoint.method} ${endpoint.path.replace(/:(\w+)/g, (_: string, name: string) => `{${name}}`)}`
    )
  )

describe("TraceApi paths", () => {
  it("defines every seed 4.1 endpoint exactly once", () => {
    expect(seed41).toHaveLength(34)
    const all = defined()
    for (const [method, path, name] of seed41) {
      expect(
        all.filter((entry) => entry === `${method} ${path}`),
        `${name}: ${method} ${path}`
      ).toHaveLength(1)
    }
  })

  it("defines the aliases, and nothing else", () => {
    const all = defined()
    for (const alias of aliases)
      expect(
        all.filter((entry) => entry === alias),
        alias
      ).toHaveLength(1)
    expect(new Set(all).size).toBe(all.length)
    expect([...all].sort()).toEqual([...seed41.map(([m, p]) => `${m} ${p}`), ...aliases].sort())
  })

  it("documents every endpoint with its 422 validation body and the service's error bodies", () => {
    const spec = OpenApi.fromApi(TraceApi.TraceApi)
    let operations = 0
    for (const [path, item] of Object.entries(spec.paths)) {
      for (const [method, operation] of Object.entries(item as Record<string, unknown>)) {
        if (!["get", "post", "delete"].includes(method)) continue
        operations++
        const responses = (operation as { responses: Record<string, unknown> }).responses
        for (const status of ["200", "400", "403", "404", "413", "422"]) {
          expect(responses[status], `${method} ${path} ${status}`).toBeDefined()
        }
      }
    }
    expect(operations).toBe(seed41.length + aliases.length)
    const dataset = spec.paths["/v2/{entity}/{project}/datasets/{object_id}"]?.delete
    expect(dataset?.parameters.map((p) => `${p.in}:${p.name}`).sort()).toEqual([
      "path:entity",
      "path:object_id",
      "path:project",
      "query:digests"
    ])
  })
})

// A server of the raw-bodied endpoints, whose handlers echo what they received, and a client derived from the
// same definitions: the definitions are checked through the real platform on both sides.
class RawGroup extends HttpApiGroup.make("raw")
  .add(TraceApi.datasetDelete)
  .add(TraceApi.otelExportTraces)
  .add(TraceApi.callsStreamQuery)
  .add(TraceApi.fileCreate)
  .add(TraceApi.fileContent) {}
class RawApi extends HttpApi.make("RawApi").add(RawGroup) {}

const RawLive = HttpApiBuilder.group(RawApi, "raw", (handlers) =>
  handlers
    .handle("datasetDelete", ({ path, urlParams }) =>
      Effect.succeed({
        num_deleted: urlParams.digests === undefined ? -1 : urlParams.digests.length * 100 + path.object_id.length
      })
    )
    .handle("otelExportTraces", ({ payload }) =>
      Effect.succeed({
        partial_success:
          payload instanceof Uint8Array
            ? { rejected_spans: payload.length, error_message: "protobuf" }
            : { rejected_spans: payload.resourceSpans?.length ?? 0, error_message: "json" }
      })
    )
    .handle("callsStreamQuery", ({ payload }) =>
      Effect.succeed(
        `${JSON.stringify({ project_id: payload.project_id })}\n${JSON.stringify({ limit: payload.limit })}\n`
      )
    )
    .handle("fileCreate", ({ payload }) =>
      Effect.gen(function* () {
        const fs = yield* FileSystem.FileSystem
        const bytes = yield* Effect.orDie(fs.readFile(payload.file.path))
        return { digest: Digest.ofFile(bytes) }
      })
    )
    .handle("fileContent", ({ payload }) => Effect.succeed(new TextEncoder().encode(payload.digest)))
)

const ServerLive = HttpApiBuilder.serve().pipe(
  Layer.provide(HttpApiBuilder.api(RawApi).pipe(Layer.provide(RawLive))),
  Layer.provideMerge(NodeHttpServer.layerTest)
)

layer(ServerLive)("TraceApi raw bodies through a server and a derived client", (it) => {
  it.effect("dataset delete: digests as a repeated query parameter, one, or none", () =>
    Effect.gen(function* () {
      const client = yield* HttpApiClient.make(RawApi)
      const path = { entity: "e", project: "p", object_id: "ds" }
      const two = yield* client.raw.datasetDelete({ path, urlParams: { digests: ["a", "b"] } })
      expect(two.num_deleted).toBe(202)
      const one = yield* client.raw.datasetDelete({ path, urlParams: { digests: ["a"] } })
      expect(one.num_deleted).toBe(102)
      const none = yield* client.raw.datasetDelete({ path, urlParams: {} })
      expect(none.num_deleted).toBe(-1)
    })
  )

  it.effect("OTel export: a Uint8Array goes as protobuf, an object as JSON", () =>
    Effect.gen(function* () {
      const client = yield* HttpApiClient.make(RawApi)
      const protobuf = yield* client.raw.otelExportTraces({ payload: new Uint8Array([10, 0, 1, 2]) })
      expect(protobuf.partial_success).toEqual({ rejected_spans: 4, error_message: "protobuf" })
      const json = yield* client.raw.otelExportTraces({ payload: { resourceSpans: [{}, { scopeSpans: [] }] } })
      expect(json.partial_success).toEqual({ rejected_spans: 2, error_message: "json" })
    })
  )

  it.effect("JSON lines come back as text, multipart uploads arrive as a file, file content as bytes", () =>
    Effect.gen(function* () {
      const client = yield* HttpApiClient.make(RawApi)
      const lines = yield* client.raw.callsStreamQuery({ payload: { project_id: "e/p", limit: 2 } })
      expect(
        lines
          .trimEnd()
          .split("\n")
          .map((line) => JSON.parse(line) as unknown)
      ).toEqual([{ project_id: "e/p" }, { limit: 2 }])
      const content = new TextEncoder().encode("def f():\n    return '😀'\n")
      const form = new FormData()
      form.append("project_id", "e/p")
      form.append("file", new Blob([content]), "obj.py")
      const created = yield* client.raw.fileCreate({ payload: form })
      expect(created.digest).toBe(Digest.ofFile(content))
      const bytes = yield* client.raw.fileContent({ payload: { project_id: "e/p", digest: "abc" } })
      expect(new TextDecoder().decode(bytes)).toBe("abc")
    })
  )
})

it("the JSON-lines content type is application/jsonl", () => {
  expect(TraceApi.jsonLinesContentType).toBe("application/jsonl")
})
