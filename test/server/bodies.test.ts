/**
 * Bodies the server cannot read get a 4xx at once (issue 18, part 2), against the real server: each request
 * below answered a 500 or was never answered before. Multipart bodies on JSON routes hung (even a well-formed
 * one, `curl -F x=1 .../call/start`); a multipart `Content-Type` without a boundary was a 500; JSON nested
 * 3,000 deep was a 500 (stack overflow) and a value nested 2,000 deep a 500 on `obj/create` (recursion in the
 * digest); `file/create` hung on an empty body, a body with no `file` or `project_id` part and 10,000 form
 * fields, and answered 500 to a boundary mismatch and a 100,000-character file name. A request whose
 * `content-length` promised more than it sent was held for good (now 408 after the request time-out).
 */
import { Socket } from "node:net"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { MAX_JSON_DEPTH } from "../../src/api/internal/jsonDepth.js"
import * as LocalBackend from "../../src/LocalBackend.js"
import { MAX_FORM_NAME } from "../../src/local/server/internal/admit.js"
import { API_KEY } from "../support/clients.js"
import { auth, Backend, call, clean } from "./support.js"

const json = { ...auth, "content-type": "application/json" }
const nested = (depth: number) => `${"[".repeat(depth)}${"]".repeat(depth)}`
const basic = `Basic ${Buffer.from(`api:${API_KEY}`).toString("base64")}`

/** A hand-made multipart body (the runtime's `FormData` would not make the broken ones). */
const multipart = (boundary: string, parts: ReadonlyArray<{ name: string; filename?: string; value: string }>) =>
  `${parts.map((part) => formPart(boundary, part)).join("")}--${boundary}--\r\n`

const formPart = (boundary: string, part: { name: string; filename?: string; value: string }) =>
  `--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"${part.filename === undefined ? "" : `; filename="${part.filename}"`}\r\n\r\n${part.value}\r\n`

const postForm = (body: string, contentType = "multipart/form-data; boundary=xyz") =>
  call("/file/create", { method: "POST", headers: { ...auth, "content-type": contentType }, body })

describe("bodies the server cannot read", () => {
  it.layer(Backend)("on the real server", (it) => {
    it.effect("a multipart body on a JSON route is a 415 in the surface's shape, at once", () =>
      Effect.gen(function* () {
        const form = new FormData()
        form.append("x", "1")
        const trace = yield* call("/call/start", { method: "POST", headers: auth, body: form })
        expect(trace.status).toBe(415)
        expect(trace.json).toEqual({
          reason: "Unsupported media type multipart/form-data: send the body as application/json"
        })
        const training = yield* call("/v1/preview/models", { method: "POST", headers: auth, body: form })
        expect(training.status).toBe(415)
        expect((training.json as { detail: string }).detail).toContain("multipart/form-data")
        const chat = yield* call("/v1/chat/completions", { method: "POST", headers: auth, body: form })
        expect(chat.status).toBe(415)
        expect(chat.json).toMatchObject({ error: { type: "UnsupportedMediaTypeError", code: 415 } })
        const noBoundary = yield* call("/call/start", {
          method: "POST",
          headers: { ...auth, "content-type": "multipart/form-data" },
          body: "abc"
        })
        expect(noBoundary.status).toBe(415)
      })
    )

    it.effect("another media type on a JSON route is a 415; JSON with a charset is read", () =>
      Effect.gen(function* () {
        const form = yield* call("/v1/preview/models", {
          method: "POST",
          headers: { ...auth, "content-type": "application/x-www-form-urlencoded" },
          body: '{"entity": "e"}'
        })
        expect(form.status).toBe(415)
        expect(form.json).toEqual({
          detail: "Unsupported media type application/x-www-form-urlencoded: send the body as application/json"
        })
        for (const contentType of ["application/json; charset=utf-8", "Application/JSON"]) {
          const reply = yield* call("/v1/health", { headers: { ...auth, "content-type": contentType } })
          expect(reply.status).toBe(200)
          // A body the schema refuses is still the route's 422, so the body was read as JSON.
          const refused = yield* call("/v1/preview/models", {
            method: "POST",
            headers: { ...auth, "content-type": contentType },
            body: "{}"
          })
          expect(refused.status).toBe(422)
        }
      })
    )

    it.effect(`JSON nested deeper than ${MAX_JSON_DEPTH} levels is a 400 on every surface, never a 500`, () =>
      Effect.gen(function* () {
        for (const depth of [MAX_JSON_DEPTH + 1, 3_000, 100_000]) {
          const training = yield* call("/v1/preview/models", { method: "POST", headers: json, body: nested(depth) })
          expect(training.status).toBe(400)
          expect(training.json).toEqual({
            detail: `The JSON body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`
          })
          const chat = yield* call("/v1/chat/completions", { method: "POST", headers: json, body: nested(depth) })
          expect(chat.status).toBe(400)
          expect(chat.json).toMatchObject({ error: { type: "BadRequestError", code: 400 } })
          const trace = yield* call("/call/start", { method: "POST", headers: json, body: nested(depth) })
          expect(trace.status).toBe(400)
          expect(trace.json).toHaveProperty("reason")
        }
        // Brackets inside strings do not count.
        const text = JSON.stringify({ entity: "[".repeat(5_000), project: "p", name: "n", base_model: "b" })
        const inString = yield* call("/v1/preview/models", { method: "POST", headers: json, body: text })
        expect(inString.status).not.toBe(400)
        expect(inString.status).toBeLessThan(500)
      })
    )

    it.effect("obj/create takes a value nested to the limit and refuses one nested 2,000 deep with a 400", () =>
      Effect.gen(function* () {
        const body = (depth: number) =>
          `{"obj": {"project_id": "me/deep", "object_id": "deep${depth}", "val": ${nested(depth)}}}`
        const within = yield* call("/obj/create", {
          method: "POST",
          headers: { ...json, authorization: basic },
          body: body(MAX_JSON_DEPTH - 2)
        })
        expect(within.status).toBe(200)
        expect(within.json).toHaveProperty("digest")
        const deep = yield* call("/obj/create", {
          method: "POST",
          headers: { ...json, authorization: basic },
          body: body(2_000)
        })
        expect(deep.status).toBe(400)
        expect(deep.json).toHaveProperty("reason")
      })
    )

    it.effect("file/create: a multipart body that does not parse, or lacks a part, is a 4xx naming it", () =>
      Effect.gen(function* () {
        const unparsable = { reason: expect.stringContaining("could not be parsed") }
        const empty = yield* postForm("")
        expect({ status: empty.status, json: empty.json }).toEqual({ status: 400, json: unparsable })
        const mismatch = yield* postForm(multipart("abc", [{ name: "project_id", value: "me/files" }]))
        expect({ status: mismatch.status, json: mismatch.json }).toEqual({ status: 400, json: unparsable })
        const truncated = multipart("xyz", [{ name: "project_id", value: "me/files" }]).slice(0, -12)
        expect((yield* postForm(truncated)).status).toBe(400)
        const noBoundary = yield* postForm("abc", "multipart/form-data")
        expect(noBoundary.json).toEqual({ reason: "The multipart/form-data Content-Type has no boundary" })
        expect(noBoundary.status).toBe(400)
        const json = yield* postForm("{}", "application/json")
        expect(json.status).toBe(415)

        const noFile = yield* postForm(multipart("xyz", [{ name: "project_id", value: "me/files" }]))
        expect({ status: noFile.status, json: noFile.json }).toEqual({
          status: 422,
          json: { detail: [{ loc: ["body", "file"], msg: "Field required", type: "missing" }] }
        })
        const noProject = yield* postForm(multipart("xyz", [{ name: "file", filename: "a.txt", value: "hi" }]))
        expect(noProject.status).toBe(422)
        expect((noProject.json as { detail: Array<{ loc: Array<string> }> }).detail[0]?.loc).toEqual([
          "body",
          "project_id"
        ])
        const fileAsText = yield* postForm(
          multipart("xyz", [
            { name: "project_id", value: "me/files" },
            { name: "file", value: "not a file" }
          ])
        )
        expect(fileAsText.status).toBe(422)
      })
    )

    it.effect("file/create: a long file name is a 400; 10,000 other fields are passed over", () =>
      Effect.gen(function* () {
        const longName = yield* postForm(
          multipart("xyz", [
            { name: "project_id", value: "me/files" },
            { name: "file", filename: "n".repeat(100_000), value: "hello" }
          ])
        )
        expect({ status: longName.status, json: longName.json }).toEqual({
          status: 400,
          json: { reason: `The file name is longer than ${MAX_FORM_NAME} characters` }
        })
        const fields = Array.from({ length: 10_000 }, (_, i) => ({ name: `f${i}`, value: "1" }))
        const many = yield* postForm(
          multipart("xyz", [
            ...fields,
            { name: "project_id", value: "me/files" },
            { name: "file", filename: "a.txt", value: "hello" }
          ])
        )
        expect(many.status).toBe(200)
        // The file stored is the one sent: its content reads back.
        const digest = (many.json as { digest: string }).digest
        const back = yield* call("/file/content", {
          method: "POST",
          headers: json,
          body: JSON.stringify({ project_id: "me/files", digest })
        })
        expect(back.text).toBe("hello")
      })
    )

    it.effect("no error body carries a stack trace or the key", () =>
      Effect.gen(function* () {
        const replies = [
          yield* postForm(""),
          yield* call("/v1/preview/models", { method: "POST", headers: json, body: nested(5_000) }),
          yield* call("/call/start", { method: "POST", headers: { ...auth, "content-type": "text/plain" }, body: "x" })
        ]
        for (const reply of replies) expect(clean(reply.text)).toBe(true)
      })
    )
  })
})

/** Sends raw bytes on a socket and resolves with what the server answers before it closes the connection. */
const raw = (url: string, request: string) =>
  Effect.promise(
    () =>
      new Promise<{ answer: string; ms: number }>((resolve, reject) => {
        const { hostname, port } = new URL(url)
        const started = Date.now()
        const socket = new Socket()
        let answer = ""
        socket.setEncoding("utf8")
        socket.on("data", (chunk: string) => {
          answer += chunk
        })
        socket.on("close", () => resolve({ answer, ms: Date.now() - started }))
        socket.on("error", reject)
        socket.connect(Number(port), hostname, () => socket.write(request))
      })
  )

/** A real pause (the tests' clock is a test clock). */
const sleep = (ms: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, ms)))

describe("requests that never arrive whole", () => {
  const timeoutMs = 400
  it.layer(LocalBackend.layer({ apiKey: Redacted.make(API_KEY), requestTimeoutMs: timeoutMs }))(
    "with a request time-out",
    (it) => {
      it.effect("a body shorter than its content-length is answered 408 and closed; the server stays healthy", () =>
        Effect.gen(function* () {
          const { url } = yield* LocalBackend.LocalBackend
          const request = [
            "POST /v1/preview/models HTTP/1.1",
            "host: localhost",
            `authorization: Bearer ${API_KEY}`,
            "content-type: application/json",
            "content-length: 1000",
            "",
            '{"entity": '
          ].join("\r\n")
          const [reply, health] = yield* Effect.all(
            [raw(url, request), Effect.zipRight(sleep(100), call("/v1/health", { headers: auth }))],
            { concurrency: 2 }
          )
          expect(reply.answer).toMatch(/^HTTP\/1\.1 408 /)
          expect(reply.ms).toBeGreaterThanOrEqual(timeoutMs)
          expect(health.status).toBe(200)
        })
      )

      it.effect("headers that never end are answered 408 too", () =>
        Effect.gen(function* () {
          const { url } = yield* LocalBackend.LocalBackend
          const reply = yield* raw(url, "GET /v1/health HTTP/1.1\r\nhost: localhost\r\n")
          expect(reply.answer).toMatch(/^HTTP\/1\.1 408 /)
        })
      )
    }
  )
})
