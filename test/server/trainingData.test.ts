/**
 * Issue 18's hostile-client findings on the real server (in-process), parts 5 and 6: an SFT job's
 * `training_data_url` reads only what the owner allows (`file://` under `allowDirs` with symlinks and `..`
 * resolved, http(s) only with `allowHttp`, the backend's own uploads by id whatever port the URL names), its
 * failure messages never quote the data; and one backend per data directory.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { basename, join } from "node:path"
import { pathToFileURL } from "node:url"
import { afterAll, describe, expect, it, layer } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import * as LocalBackend from "../../src/LocalBackend.js"
import { API_KEY } from "../support/clients.js"

const dirs: Array<string> = []
const tempDir = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  dirs.push(dir)
  return dir
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

/** A line no failure message may show: it stands for `/etc/passwd` and the like. */
const CANARY = "root:x:0:0:CANARY-7f3a:/root:/bin/bash"

const good = `${["red", "blue"]
  .map((word) =>
    JSON.stringify({
      messages: [
        { role: "user", content: `Colour ${word}?` },
        { role: "assistant", content: word }
      ]
    })
  )
  .join("\n")}\n`

const allowed = tempDir("effect-rl-allowed-")
const secret = tempDir("effect-rl-secret-")
writeFileSync(join(secret, "passwd"), `${CANARY}\n`)
writeFileSync(join(secret, "good.jsonl"), good)
writeFileSync(join(allowed, "good.jsonl"), good)
writeFileSync(join(allowed, "passwd"), `${CANARY}\n`)
writeFileSync(
  join(allowed, "field.jsonl"),
  `${JSON.stringify({ messages: [{ role: "user", content: "hi" }] })}\n${JSON.stringify({ messages: CANARY })}\n`
)
symlinkSync(join(secret, "good.jsonl"), join(allowed, "link.jsonl"))
symlinkSync(secret, join(allowed, "linked-dir"))
mkdirSync(join(allowed, "sub"))

interface Job {
  readonly id: string
  readonly status: string
  readonly error_message: string | null
}

/** A JSON request with the test key against a backend's URL. */
const api = <A>(url: string, method: string, path: string, body?: unknown) =>
  Effect.promise(async () => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${API_KEY}`,
        "content-type": body instanceof Uint8Array ? "application/jsonl" : "application/json"
      },
      ...(body === undefined ? {} : { body: body instanceof Uint8Array ? body : JSON.stringify(body) })
    })
    return { status: response.status, json: (await response.json()) as A }
  })

/** Creates a model and an SFT job on `dataUrl`, and waits for the job to end; its record. */
const sftJob = (url: string, dataUrl: string) =>
  Effect.gen(function* () {
    const model = yield* api<{ readonly id: string }>(url, "POST", "/v1/preview/models", {
      project: "data",
      name: `m-${crypto.randomUUID()}`,
      base_model: "effect-rl/tiny"
    })
    expect(model.status).toBe(200)
    const created = yield* api<Job>(url, "POST", "/v1/preview/sft-training-jobs", {
      model_id: model.json.id,
      training_data_url: dataUrl
    })
    expect(created.status).toBe(200)
    for (let i = 0; i < 200; i++) {
      const job = yield* api<Job>(url, "GET", `/v1/preview/training-jobs/${created.json.id}`)
      if (job.json.status === "COMPLETED" || job.json.status === "FAILED") return job.json
      yield* Effect.sleep("100 millis")
    }
    throw new Error(`job ${created.json.id} did not end`)
  })

const backendOf = (options: LocalBackend.Options) => LocalBackend.layer({ apiKey: Redacted.make(API_KEY), ...options })

/** A local HTTP server answering the good data, counting its requests. */
const dataServer = Effect.acquireRelease(
  Effect.async<{ readonly url: string; readonly requests: () => number; readonly close: () => void }>((resume) => {
    let requests = 0
    const server = createServer((_, response) => {
      requests++
      response.writeHead(200, { "content-type": "application/jsonl" }).end(good)
    })
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resume(
        Effect.succeed({
          url: `http://127.0.0.1:${port}/train.jsonl`,
          requests: () => requests,
          close: () => server.close()
        })
      )
    })
  }),
  (served) => Effect.sync(served.close)
)

describe("training_data_url reads only what the owner allows", () => {
  layer(backendOf({ allowDirs: [allowed] }), { timeout: "60 seconds", excludeTestServices: true })(
    "allowDirs: one directory",
    (it) => {
      it.effect("a file in the allowed directory trains (the control of the refusals below)", () =>
        Effect.gen(function* () {
          const { url } = yield* LocalBackend.LocalBackend
          const job = yield* sftJob(url, pathToFileURL(join(allowed, "good.jsonl")).href)
          expect(job).toMatchObject({ status: "COMPLETED", error_message: null })
        })
      )

      it.effect(
        "file:// outside it is refused, through .., %2e%2e, a symlinked file or directory; nothing is quoted",
        () =>
          Effect.gen(function* () {
            const { url } = yield* LocalBackend.LocalBackend
            const outside = [
              pathToFileURL(join(secret, "good.jsonl")).href,
              pathToFileURL(join(secret, "passwd")).href,
              `${pathToFileURL(allowed).href}/../${basename(secret)}/good.jsonl`,
              `${pathToFileURL(allowed).href}/sub/%2e%2e/%2E%2E/${basename(secret)}/passwd`,
              pathToFileURL(join(allowed, "link.jsonl")).href,
              pathToFileURL(join(allowed, "linked-dir", "good.jsonl")).href,
              pathToFileURL(join(allowed, "linked-dir", "passwd")).href,
              "file:///etc/passwd"
            ]
            for (const dataUrl of outside) {
              const job = yield* sftJob(url, dataUrl)
              expect(job.status, dataUrl).toBe("FAILED")
              expect(job.error_message, dataUrl).toContain("is not under a directory this server may read")
              expect(job.error_message, dataUrl).not.toContain("CANARY")
              expect(job.error_message, dataUrl).not.toContain("root:")
            }
          })
      )

      it.effect("data that does not decode fails naming the line and field, never quoting it", () =>
        Effect.gen(function* () {
          const { url } = yield* LocalBackend.LocalBackend
          const notJson = yield* sftJob(url, pathToFileURL(join(allowed, "passwd")).href)
          expect(notJson.status).toBe("FAILED")
          expect(notJson.error_message).toBe("training data line 1 is not JSON")
          const badField = yield* sftJob(url, pathToFileURL(join(allowed, "field.jsonl")).href)
          expect(badField.status).toBe("FAILED")
          expect(badField.error_message).toBe(
            "training data line 2 is not a {messages, tools?} example: messages is invalid"
          )
          expect(badField.error_message).not.toContain("CANARY")
        })
      )

      it.effect("http(s) is refused by default: nothing is fetched", () =>
        Effect.gen(function* () {
          const { url } = yield* LocalBackend.LocalBackend
          const served = yield* dataServer
          const job = yield* sftJob(url, served.url)
          expect(job.status).toBe("FAILED")
          expect(job.error_message).toContain("--allow-http")
          expect(served.requests()).toBe(0)
        }).pipe(Effect.scoped)
      )
    }
  )

  layer(backendOf({ allowHttp: true }), { timeout: "60 seconds", excludeTestServices: true })("allowHttp", (it) => {
    it.effect("http(s) is fetched; file:// stays refused with no allowDirs", () =>
      Effect.gen(function* () {
        const { url } = yield* LocalBackend.LocalBackend
        const served = yield* dataServer
        expect(yield* sftJob(url, served.url)).toMatchObject({ status: "COMPLETED" })
        expect(served.requests()).toBe(1)
        const file = yield* sftJob(url, pathToFileURL(join(allowed, "good.jsonl")).href)
        expect(file.status).toBe("FAILED")
        expect(file.error_message).toContain("is not under a directory this server may read")
      }).pipe(Effect.scoped)
    )
  })
})

describe("one backend per data directory", () => {
  const start = (dataDir: string, scope: Scope.Scope) =>
    Effect.map(Layer.buildWithScope(backendOf({ dataDir }), scope), (context) =>
      Context.get(context, LocalBackend.LocalBackend)
    )

  it.live("a second backend on a directory in use fails InUse naming the first; once it stops, one starts", () =>
    Effect.gen(function* () {
      const dataDir = tempDir("effect-rl-owner-")
      const firstScope = yield* Scope.make()
      const first = yield* start(dataDir, firstScope)

      const refused = yield* Effect.flip(Effect.scoped(Effect.flatMap(Effect.scope, (scope) => start(dataDir, scope))))
      expect(refused._tag).toBe("DataDirError")
      const error = refused as LocalBackend.DataDirError
      expect(error.reason).toBe("InUse")
      expect(error.owner).toEqual({ pid: process.pid, url: first.url })
      expect(error.message).toContain(`pid ${process.pid}`)
      expect(error.message).toContain(first.url)
      // The first one still serves.
      expect((yield* api<unknown>(first.url, "GET", "/v1/health")).status).toBe(200)

      yield* Scope.close(firstScope, Exit.void)
      const secondScope = yield* Scope.make()
      const second = yield* start(dataDir, secondScope)
      expect((yield* api<unknown>(second.url, "GET", "/v1/health")).status).toBe(200)
      yield* Scope.close(secondScope, Exit.void)
    })
  )

  it.live("an uploaded file's URL still works after a restart on another port", () =>
    Effect.gen(function* () {
      const dataDir = tempDir("effect-rl-restart-port-")
      const firstScope = yield* Scope.make()
      const first = yield* start(dataDir, firstScope)
      const uploaded = yield* api<{ readonly url: string }>(
        first.url,
        "POST",
        "/v1/local/files",
        new TextEncoder().encode(good)
      )
      expect(uploaded.status).toBe(200)
      expect(uploaded.json.url.startsWith(first.url)).toBe(true)
      yield* Scope.close(firstScope, Exit.void)

      const secondScope = yield* Scope.make()
      const second = yield* start(dataDir, secondScope)
      expect(second.url).not.toBe(first.url)
      expect(yield* sftJob(second.url, uploaded.json.url)).toMatchObject({ status: "COMPLETED", error_message: null })
      yield* Scope.close(secondScope, Exit.void)
    })
  )
})
