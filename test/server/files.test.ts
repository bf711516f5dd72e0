/**
 * The uploaded files extension on the real server: upload raw JSONL and read it back byte for byte, auth,
 * unknown ids, the body limit, media types, and an SFT job trained from an uploaded file's URL (which the
 * worker reads from the store by id, whatever host and port the URL names: fetched over HTTP without a key it
 * would be a 401 and the job would fail).
 */
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as TestServices from "effect/TestServices"
import type { ModelId } from "../../src/api/Model.js"
import type { TrainingJobId } from "../../src/api/TrainingJob.js"
import * as LocalBackend from "../../src/LocalBackend.js"
import { fileIdOfPath } from "../../src/local/server/LocalApi.js"
import { training } from "../support/clients.js"
import { auth, Backend, call, clean, MAX_BODY } from "./support.js"

const WORDS = ["red", "blue", "green", "gold"]

/** JSONL of `{messages}` examples, with non-ASCII text so a byte-level mangling would show. */
const jsonl = WORDS.map((word) =>
  JSON.stringify({
    messages: [
      { role: "user", content: `Colour ${word}? (café ☕)` },
      { role: "assistant", content: word }
    ]
  })
)
  .join("\n")
  .concat("\n")

const upload = (body: Uint8Array | string, contentType = "application/jsonl", headers: Record<string, string> = auth) =>
  call("/v1/local/files", { method: "POST", headers: { ...headers, "content-type": contentType }, body })

interface Uploaded {
  readonly id: string
  readonly url: string
  readonly bytes: number
}

/** `fetch` a URL with the key, answering the status, content type and raw bytes. */
const fetchBytes = (url: string, headers: Record<string, string> = auth) =>
  Effect.promise(async () => {
    const response = await fetch(url, { headers })
    return {
      status: response.status,
      contentType: response.headers.get("content-type"),
      bytes: new Uint8Array(await response.arrayBuffer())
    }
  })

const client = Effect.flatMap(LocalBackend.LocalBackend, ({ url }) => training(url))

describe("uploaded files", () => {
  it.layer(Backend)("on the real server", (it) => {
    it.effect("an upload answers {id, url, bytes}; its url reads back the same bytes", () =>
      Effect.gen(function* () {
        const { url: origin } = yield* LocalBackend.LocalBackend
        const body = new TextEncoder().encode(jsonl)
        const reply = yield* upload(body)
        expect(reply.status).toBe(200)
        const file = reply.json as Uploaded
        expect(Object.keys(file).sort()).toEqual(["bytes", "id", "url"])
        expect(file.bytes).toBe(body.byteLength)
        expect(file.url).toBe(`${origin}/v1/local/files/${file.id}/content`)

        const back = yield* fetchBytes(file.url)
        expect(back.status).toBe(200)
        expect(back.contentType).toContain("application/jsonl")
        expect(Buffer.from(back.bytes).equals(Buffer.from(body))).toBe(true)

        // Each upload is a file of its own.
        const other = (yield* upload("{}\n", "text/plain")).json as Uploaded
        expect(other.id).not.toBe(file.id)
        expect(other.bytes).toBe(3)
        expect(new TextDecoder().decode((yield* fetchBytes(other.url)).bytes)).toBe("{}\n")
      })
    )

    it.effect("application/octet-stream, text/plain with a charset, and a chunked body are accepted", () =>
      Effect.gen(function* () {
        const bytes = Uint8Array.from([0x7b, 0x7d, 0x0a, 0xff, 0x00])
        const octet = yield* upload(bytes, "application/octet-stream")
        expect(octet.status).toBe(200)
        const back = yield* fetchBytes((octet.json as Uploaded).url)
        expect(Array.from(back.bytes)).toEqual(Array.from(bytes))

        const text = yield* upload(jsonl, "text/plain; charset=utf-8")
        expect(text.status).toBe(200)

        // Without a Content-Length the server buffers the body itself (see `body.ts`).
        const { url } = yield* LocalBackend.LocalBackend
        const chunked = yield* Effect.promise(async () => {
          const parts = [new TextEncoder().encode(jsonl.slice(0, 10)), new TextEncoder().encode(jsonl.slice(10))]
          const stream = new ReadableStream<Uint8Array>({
            pull: (controller) => {
              const next = parts.shift()
              if (next === undefined) controller.close()
              else controller.enqueue(next)
            }
          })
          const response = await fetch(`${url}/v1/local/files`, {
            method: "POST",
            headers: { ...auth, "content-type": "application/jsonl" },
            body: stream,
            duplex: "half"
          } as RequestInit)
          return { status: response.status, json: (await response.json()) as Uploaded }
        })
        expect(chunked.status).toBe(200)
        expect(chunked.json.url.startsWith(url)).toBe(true)
        expect(new TextDecoder().decode((yield* fetchBytes(chunked.json.url)).bytes)).toBe(jsonl)
      })
    )

    it.effect("another media type is 415", () =>
      Effect.gen(function* () {
        const reply = yield* upload(jsonl, "application/xml")
        expect(reply.status).toBe(415)
        expect((reply.json as { detail: string }).detail).toContain("application/jsonl")
      })
    )

    it.effect("both routes need the key: 401 without it, and no key shows", () =>
      Effect.gen(function* () {
        const denied = yield* upload(jsonl, "application/jsonl", {})
        expect(denied.status).toBe(401)
        expect(denied.json).toEqual({ detail: "Invalid or missing API key" })
        const file = (yield* upload(jsonl)).json as Uploaded
        const read = yield* call(`/v1/local/files/${file.id}/content`)
        expect(read.status).toBe(401)
        expect(read.json).toEqual({ detail: "Invalid or missing API key" })
        expect(read.text).not.toContain("café")
        const wrong = yield* fetchBytes(file.url, { authorization: "Bearer sk-wrong" })
        expect(wrong.status).toBe(401)
      })
    )

    it.effect("an unknown id is 404 {detail: File not found}", () =>
      Effect.gen(function* () {
        const reply = yield* call("/v1/local/files/00000000-0000-4000-8000-000000000000/content", { headers: auth })
        expect(reply.status).toBe(404)
        expect(reply.json).toEqual({ detail: "File not found" })
        const odd = yield* call("/v1/local/files/not%20an%20id/content", { headers: auth })
        expect(odd.status).toBe(404)
        expect(odd.json).toEqual({ detail: "File not found" })
      })
    )

    it.effect("a body over the limit is 413 and nothing is stored", () =>
      Effect.gen(function* () {
        const reply = yield* upload(new Uint8Array(MAX_BODY + 1), "application/octet-stream")
        expect(reply.status).toBe(413)
        expect(reply.json).toEqual({ detail: `Request body exceeds the limit of ${MAX_BODY} bytes` })
        expect(clean(reply.text)).toBe(true)
        // Exactly at the limit is accepted.
        const at = yield* upload(new Uint8Array(MAX_BODY), "application/octet-stream")
        expect(at.status).toBe(200)
        expect((at.json as Uploaded).bytes).toBe(MAX_BODY)
      })
    )

    it.scoped(
      "an SFT job whose training_data_url is an uploaded file trains to a new checkpoint",
      () =>
        Effect.gen(function* () {
          const c = yield* client
          const file = (yield* upload(jsonl)).json as Uploaded
          const model = yield* c.createModel({ project: "files", name: "sft", base_model: "effect-rl/tiny" })
          const job = yield* c.createSftTrainingJob({ model_id: model.id as ModelId, training_data_url: file.url })
          expect(job).toMatchObject({ kind: "sft", status: "PENDING" })
          const events = yield* c
            .followTrainingJobEvents(job.id as TrainingJobId, { wait: "5 seconds" })
            .pipe(Stream.runCollect, Effect.map(Chunk.toArray), Effect.timeout("20 seconds"))
          expect(events[0]?.type).toBe("training_started")
          expect(events.at(-1)?.type).toBe("training_ended")
          expect(events.some((event) => event.type === "gradient_step")).toBe(true)
          const checkpoint = yield* c.latestCheckpoint(model.id)
          expect(Option.map(checkpoint, (cp) => cp.step)).toEqual(Option.some(1))
          expect(yield* c.getTrainingJob(job.id)).toMatchObject({ status: "COMPLETED", step: 1 })

          // The same path shape with an id this server does not hold fails the job, naming the id.
          const missing = file.url.replace(file.id, "00000000-0000-4000-8000-00000000beef")
          const bad = yield* c.createSftTrainingJob({ model_id: model.id as ModelId, training_data_url: missing })
          const failed = yield* c
            .followTrainingJobEvents(bad.id as TrainingJobId, { wait: "5 seconds" })
            .pipe(Stream.runCollect, Effect.map(Chunk.toArray), Effect.timeout("20 seconds"))
          expect(failed.at(-1)?.type).toBe("training_failed")
          const record = yield* c.getTrainingJob(bad.id)
          expect(record.error_message).toContain("00000000-0000-4000-8000-00000000beef")
          expect(record.error_message).not.toContain("HTTP 401")
        }).pipe(TestServices.provideLive),
      30_000
    )

    it.scoped(
      "an uploaded file's URL naming another host or port (a restart on port 0) is still read from the store by id",
      () =>
        Effect.gen(function* () {
          const c = yield* client
          const file = (yield* upload(jsonl)).json as Uploaded
          const model = yield* c.createModel({ project: "files", name: "moved", base_model: "effect-rl/tiny" })
          const { url: origin } = yield* LocalBackend.LocalBackend
          const port = Number(new URL(origin).port)
          // Nothing listens on these: fetched over HTTP, the jobs would fail (and http is refused by default).
          for (const moved of [
            file.url.replace(`:${port}/`, `:${port === 1 ? 2 : 1}/`),
            file.url.replace(/^http:\/\/[^/]+/, "https://files.invalid:8443")
          ]) {
            expect(moved).not.toBe(file.url)
            const job = yield* c.createSftTrainingJob({ model_id: model.id as ModelId, training_data_url: moved })
            const events = yield* c
              .followTrainingJobEvents(job.id as TrainingJobId, { wait: "5 seconds" })
              .pipe(Stream.runCollect, Effect.map(Chunk.toArray), Effect.timeout("20 seconds"))
            expect(events.at(-1)?.type, moved).toBe("training_ended")
          }
        }).pipe(TestServices.provideLive),
      30_000
    )
  })

  describe("own file URLs", () => {
    it("a file path shape is recognised, other paths are not", () => {
      expect(fileIdOfPath("/v1/local/files/abc/content")).toBe("abc")
      expect(fileIdOfPath("/v1/local/files/a%20b/content")).toBe("a b")
      expect(fileIdOfPath("/v1/local/files/abc")).toBeUndefined()
      expect(fileIdOfPath("/v1/local/files/a/b/content")).toBeUndefined()
      expect(fileIdOfPath("/x/v1/local/files/abc/content")).toBeUndefined()
    })
  })
})
