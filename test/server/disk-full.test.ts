/**
 * A full disk where no tmpfs can be mounted (`disk-full.slow.test.ts` mounts one where it can): the real server
 * over the real store of a data directory, with the store's SQLite connection unable to grow its database. A
 * write refused for want of space is a 507 in each surface's error shape naming the data directory (not to be
 * retried), `effect-rl train` against it ends with one sentence saying what to free, nothing accepted before is
 * lost, a refused write leaves nothing half-written, reads go on, writes succeed again once space is back, and
 * the database passes the full check.
 *
 * The fault is made at the store's boundary, its SQLite connection, the one place a stand-in is right here (the
 * filesystem cannot be filled): `PRAGMA max_page_count` caps the database at the pages it has, so SQLite itself
 * refuses a write that needs a new page with `SQLITE_FULL` ("database or disk is full"), the error it gives when
 * the disk is full (it reports the `ENOSPC` of its own writes so). Nothing above the connection is replaced.
 */
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Server from "../../src/local/server/Server.js"
import * as Database from "../../src/local/store/Database.js"
import * as Integrity from "../../src/local/store/Integrity.js"
import * as Store from "../../src/local/store/Store.js"
import { cliArgs } from "../support/cli.js"
import { API_KEY } from "../support/clients.js"

/** SQLite's largest page count, the default cap: the disk as big as it gets. */
const NO_CAP = 4294967294

/**
 * The real server over the real store of `dataDir`, built as `LocalBackend` builds it (the store first, then the
 * server over it), in the current scope; with the store's connection to make the disk full and to free it.
 */
const serve = (dataDir: string) =>
  Effect.gen(function* () {
    const store = yield* Layer.build(Store.layer({ dataDir }))
    const server = yield* Layer.build(
      Server.layer({ apiKey: Redacted.make(API_KEY), port: 0, dataDir }).pipe(
        Layer.provide(Layer.succeedContext(store))
      )
    )
    const url = yield* Effect.provide(Server.url, server)
    const sql = Context.get(store, SqlClient.SqlClient)
    const pages = (pragma: string) =>
      Effect.map(sql.unsafe<Record<string, number>>(`PRAGMA ${pragma}`), (rows) => Object.values(rows[0]!)[0]!)
    /**
     * Caps the database at the pages it has; a page on the free list would still take a write, so none may be
     * (the migrations that rebuild a table leave some: vacuumed first).
     */
    const fill = Effect.gen(function* () {
      yield* sql.unsafe("VACUUM")
      expect(yield* pages("freelist_count")).toBe(0)
      const count = yield* pages("page_count")
      expect(yield* pages(`max_page_count = ${count}`)).toBe(count)
    })
    const free = Effect.asVoid(pages(`max_page_count = ${NO_CAP}`))
    return { url, fill, free }
  }).pipe(Effect.orDie)

/** A JSON request with the test key: the status, the retry header and the body. */
const send = (url: string, method: string, path: string, body?: unknown) =>
  Effect.promise(async () => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    const text = await response.text()
    return { status: response.status, retry: response.headers.get("x-should-retry"), text, json: JSON.parse(text) }
  })

const model = (name: string) => ({ entity: "disk", project: "full", name, base_model: "effect-rl/tiny" })

/** A trace call's start with `inputs`. */
const traceStart = (inputs: Record<string, unknown>) => ({
  start: { project_id: "disk/full", op_name: "op", started_at: new Date().toISOString(), attributes: {}, inputs }
})

/** A stored response whose metadata (16 values of 500 characters) needs new pages, whatever its answer. */
const bigResponse = {
  model: "effect-rl/tiny",
  input: "hi",
  max_output_tokens: 2,
  metadata: Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`, String(i % 10).repeat(500)]))
}

/** What a refused write says: the data directory, how much is free, what to do. */
const fullSentence = (dataDir: string) =>
  new RegExp(
    `the disk holding the data directory ${dataDir} is full \\(\\d+(\\.\\d)? [KMG]B free\\): free space on it .*nothing already stored was lost`
  )

describe("a full disk, made at the store's connection", () => {
  it.live("a refused write is a 507 in each surface's shape; nothing accepted is lost; writes come back", () =>
    Effect.gen(function* () {
      const dataDir = mkdtempSync(join(tmpdir(), "effect-rl-full-"))
      yield* Effect.gen(function* () {
        const { url, fill, free } = yield* serve(dataDir)
        // Accepted before the disk fills: a model (its step 0's weights), a trace call, a stored response.
        const kept = yield* send(url, "POST", "/v1/preview/models", model("kept"))
        expect(kept.status, kept.text).toBe(200)
        const call = yield* send(url, "POST", "/call/start", traceStart({ q: "kept" }))
        expect(call.status, call.text).toBe(200)
        const response = yield* send(url, "POST", "/v1/responses", { ...bigResponse, metadata: { k: "kept" } })
        expect(response.status, response.text).toBe(200)

        yield* fill
        // The training surface ({detail}), the inference surface ({error}), the trace surface ({reason}).
        const refused = [
          yield* send(url, "POST", "/v1/preview/models", model("m")),
          yield* send(url, "POST", "/v1/responses", bigResponse),
          yield* send(url, "POST", "/call/start", traceStart({ x: "y".repeat(200_000) }))
        ]
        for (const answer of refused) {
          expect(answer.status, answer.text).toBe(507)
          // Trying again at once cannot help.
          expect(answer.retry).toBe("false")
          expect(answer.text).not.toMatch(/\n\s+at |SqlError|SQLITE_FULL/)
        }
        const [training, inference, trace] = refused.map((answer) => answer.json)
        expect(training.detail).toMatch(fullSentence(dataDir))
        expect(inference).toStrictEqual({
          error: {
            message: expect.stringMatching(fullSentence(dataDir)),
            type: "InsufficientStorageError",
            param: null,
            code: 507
          }
        })
        expect(trace.reason).toMatch(fullSentence(dataDir))

        // Reads go on, and what was accepted is there.
        expect((yield* send(url, "GET", "/v1/health")).status).toBe(200)
        const checkpoints = yield* send(url, "GET", `/v1/preview/models/${kept.json.id}/checkpoints`)
        expect(checkpoints.status, checkpoints.text).toBe(200)
        expect(checkpoints.json.data.map((c: { readonly step: number }) => c.step)).toStrictEqual([0])
        const stored = yield* send(url, "GET", `/v1/responses/${response.json.id}`)
        expect(stored.status, stored.text).toBe(200)
        expect(stored.json).toStrictEqual(response.json)
        const read = yield* send(url, "POST", "/call/read", { project_id: "disk/full", id: call.json.id })
        expect(read.json.call).toMatchObject({ id: call.json.id, inputs: { q: "kept" } })

        // Space back: the same writes succeed, the refused model's name free (its refused write left nothing).
        yield* free
        for (const [path, body] of [
          ["/v1/preview/models", model("m")],
          ["/v1/responses", bigResponse],
          ["/call/start", traceStart({ x: "y".repeat(200_000) })]
        ] as const) {
          const again = yield* send(url, "POST", path, body)
          expect(again.status, again.text).toBe(200)
        }
      }).pipe(Effect.scoped)
      // The database passes the full check, the kept model's weights matching their digest.
      expect(yield* Integrity.check(Database.filename(dataDir), "full")).toMatchObject({ _tag: "Ok" })
      rmSync(dataDir, { recursive: true, force: true })
    })
  )

  it.live(
    "effect-rl train against a full disk ends with one sentence saying what to free",
    () =>
      Effect.gen(function* () {
        const dataDir = mkdtempSync(join(tmpdir(), "effect-rl-full-"))
        yield* Effect.gen(function* () {
          const { url, fill } = yield* serve(dataDir)
          yield* fill
          // The command run as a user runs it against a server (the hosted-service settings pointed at this one).
          const { WANDB_API_KEY: _, EFFECT_RL_BASE_MODEL: __, ...env } = process.env
          const run = yield* Effect.async<{ readonly code: number | null; readonly stderr: string }>((resume) => {
            const child = spawn(process.execPath, cliArgs("train", "minimal", "--model", "disk", "--steps", "1"), {
              cwd: new URL("../../", import.meta.url).pathname,
              env: {
                ...env,
                WANDB_API_KEY: API_KEY,
                EFFECT_RL_TRAINING_URL: url,
                EFFECT_RL_INFERENCE_URL: url,
                EFFECT_RL_TRACE_URL: url,
                EFFECT_RL_BASE_MODEL: "effect-rl/tiny"
              },
              stdio: ["ignore", "ignore", "pipe"]
            })
            let stderr = ""
            child.stderr.on("data", (chunk) => {
              stderr += chunk
            })
            child.once("exit", (code) => resume(Effect.succeed({ code, stderr })))
            return Effect.sync(() => child.kill("SIGKILL"))
          })
          expect(run.code, run.stderr).toBe(1)
          const sentence = run.stderr.trim()
          expect(sentence.split("\n")).toHaveLength(1)
          expect(sentence).toMatch(/^effect-rl train: /)
          expect(sentence).toMatch(fullSentence(dataDir))
          expect(sentence).not.toContain("try again later")
        }).pipe(Effect.scoped)
        expect(yield* Integrity.check(Database.filename(dataDir), "full")).toMatchObject({ _tag: "Ok" })
        rmSync(dataDir, { recursive: true, force: true })
      }),
    60_000
  )
})
