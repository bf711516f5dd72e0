import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import * as LocalBackend from "../../src/LocalBackend.js"
import * as Server from "../../src/local/server/Server.js"
import * as Database from "../../src/local/store/Database.js"
import * as Store from "../../src/local/store/Store.js"
import { API_KEY, training } from "../support/clients.js"
import { Backend, call, send } from "./support.js"

/** A SQL client whose database has been closed: every query fails, as a broken database would. */
const ClosedDatabase = Layer.effect(
  SqlClient.SqlClient,
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(SqliteClient.layer({ filename: ":memory:" }), scope)
    yield* Scope.close(scope, Exit.void)
    return Context.get(context, SqlClient.SqlClient)
  }).pipe(Effect.orDie)
)

/** A working store whose `SqlClient` (what the database check queries) is the closed one. */
const BrokenStore = Layer.merge(Store.layerWith(Database.layerMemory), ClosedDatabase)

/** The server over the closed database, exposed as a LocalBackend for the test helpers. */
const BrokenBackend = Layer.effect(
  LocalBackend.LocalBackend,
  Effect.map(Server.url, (url) => ({
    url,
    apiKey: Redacted.make(API_KEY),
    dataDir: "",
    signInLink: Effect.die("no sign-in links in this test"),
    // Over the network: the helpers' clients take the URL.
    fetch: globalThis.fetch,
    httpClient: Effect.runSync(Effect.provide(HttpClient.HttpClient, FetchHttpClient.layer))
  }))
).pipe(Layer.provide(Server.layer({ apiKey: Redacted.make(API_KEY) })), Layer.provide(BrokenStore), Layer.orDie)

describe("health", () => {
  it.layer(Backend)("with a working database", (it) => {
    it.effect("GET /v1/health is 200 {status: ok}", () =>
      Effect.gen(function* () {
        const reply = yield* send("GET", "/v1/health")
        expect(reply.status).toBe(200)
        expect(reply.json).toEqual({ status: "ok" })
      })
    )

    it.effect("GET /v1/system-check is 200 with every check passing", () =>
      Effect.gen(function* () {
        const reply = yield* send("GET", "/v1/system-check")
        expect(reply.status).toBe(200)
        expect(reply.json).toMatchObject({
          api: true,
          database: true,
          cpu_queue: { success: true, errors: [] },
          gpu_queue: { success: true, errors: [] }
        })
      })
    )

    it.scoped("the repo's training client reads both through the shared contract", () =>
      Effect.gen(function* () {
        const { url } = yield* LocalBackend.LocalBackend
        const client = yield* training(url)
        expect(yield* client.health).toEqual({ status: "ok" })
        expect(yield* client.systemCheck).toMatchObject({ api: true, database: true })
      })
    )

    it.effect("no endpoint is a stub: an unknown training job is a JSON 404", () =>
      Effect.gen(function* () {
        const reply = yield* send("GET", "/v1/preview/training-jobs/00000000-0000-4000-8000-000000000000")
        expect(reply.status).toBe(404)
        expect(reply.json).toEqual({ detail: "Training job not found" })
      })
    )
  })

  it.layer(BrokenBackend)("with a broken database", (it) => {
    it.effect("GET /v1/system-check is 503 with database: false", () =>
      Effect.gen(function* () {
        const reply = yield* send("GET", "/v1/system-check")
        expect(reply.status).toBe(503)
        expect(reply.json).toMatchObject({ api: true, database: false, cpu_queue: { success: true } })
      })
    )

    it.effect("GET /v1/health still answers 200", () =>
      Effect.gen(function* () {
        expect((yield* call("/v1/health", { headers: { authorization: `Bearer ${API_KEY}` } })).status).toBe(200)
      })
    )
  })
})
