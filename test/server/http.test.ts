/**
 * HTTP behaviour of the real server across routes: `x-request-id` on every response (the client's own when
 * sane, else a generated one) and in the client's `ApiError`; 405 with `Allow` for a known path under
 * another method, 404 for an unknown path.
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { TrainingJobId } from "../../src/api/TrainingJob.js"
import * as LocalBackend from "../../src/LocalBackend.js"
import { training } from "../support/clients.js"
import { auth, Backend, clean, MAX_BODY } from "./support.js"

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const MISSING = "00000000-0000-4000-8000-000000000000" as TrainingJobId

interface Reply {
  readonly status: number
  readonly headers: Headers
  readonly text: string
}

/** `fetch` against the running backend, keeping the response headers. */
const request = (path: string, init: RequestInit = {}) =>
  Effect.gen(function* () {
    const { url } = yield* LocalBackend.LocalBackend
    return yield* Effect.promise(async (): Promise<Reply> => {
      const response = await fetch(`${url}${path}`, init)
      return { status: response.status, headers: response.headers, text: await response.text() }
    })
  })

const json = (reply: Reply): unknown => JSON.parse(reply.text)

describe("http", () => {
  it.layer(Backend)("x-request-id on the real server", (it) => {
    it.effect("a sane incoming x-request-id is echoed, on a success and on an error", () =>
      Effect.gen(function* () {
        const ok = yield* request("/v1/health", { headers: { ...auth, "x-request-id": "trace-42 abc/def" } })
        expect(ok.status).toBe(200)
        expect(ok.headers.get("x-request-id")).toBe("trace-42 abc/def")
        const longest = "r".repeat(200)
        const missing = yield* request(`/v1/preview/training-jobs/${MISSING}`, {
          headers: { ...auth, "x-request-id": longest }
        })
        expect(missing.status).toBe(404)
        expect(missing.headers.get("x-request-id")).toBe(longest)
      })
    )

    it.effect("without one, or with one too long or not printable ASCII, a fresh id is generated", () =>
      Effect.gen(function* () {
        const first = yield* request("/v1/health", { headers: auth })
        const second = yield* request("/v1/health", { headers: auth })
        const a = first.headers.get("x-request-id")
        const b = second.headers.get("x-request-id")
        expect(a).toMatch(UUID)
        expect(b).toMatch(UUID)
        expect(a).not.toBe(b)
        for (const bad of ["r".repeat(201), "tab\there", "caf\u00e9"]) {
          const reply = yield* request("/v1/health", { headers: { ...auth, "x-request-id": bad } })
          expect(reply.status).toBe(200)
          expect(reply.headers.get("x-request-id")).toMatch(UUID)
        }
      })
    )

    it.effect("the edge's own answers (401, 413, 404, 422, 405) carry it, their bodies unchanged", () =>
      Effect.gen(function* () {
        const id = { "x-request-id": "edge-1" }
        const unauthorized = yield* request("/v1/health", { headers: id })
        expect(unauthorized.status).toBe(401)
        expect(unauthorized.headers.get("x-request-id")).toBe("edge-1")
        expect(json(unauthorized)).toEqual({ detail: "Invalid or missing API key" })
        const openAi = yield* request("/v1/models", { headers: id })
        expect(openAi.headers.get("x-request-id")).toBe("edge-1")
        expect(json(openAi)).toEqual({
          error: { message: "Invalid or missing API key", type: "AuthenticationError", param: null, code: 401 }
        })

        const tooLarge = yield* request("/v1/preview/models", {
          method: "POST",
          headers: { ...auth, ...id, "content-type": "application/json" },
          body: "x".repeat(MAX_BODY + 1)
        })
        expect(tooLarge.status).toBe(413)
        expect(tooLarge.headers.get("x-request-id")).toBe("edge-1")
        expect(json(tooLarge)).toEqual({ detail: `Request body exceeds the limit of ${MAX_BODY} bytes` })

        const notFound = yield* request("/v1/nothing-here", { headers: { ...auth, ...id } })
        expect(notFound.status).toBe(404)
        expect(notFound.headers.get("x-request-id")).toBe("edge-1")
        expect(json(notFound)).toEqual({ detail: "Not Found" })

        const invalid = yield* request("/v1/preview/models", {
          method: "POST",
          headers: { ...auth, ...id, "content-type": "application/json" },
          body: JSON.stringify({ project: "p", name: "n" })
        })
        expect(invalid.status).toBe(422)
        expect(invalid.headers.get("x-request-id")).toBe("edge-1")
        expect(json(invalid)).toEqual({
          detail: [{ loc: ["body", "base_model"], msg: "Field required", type: "missing" }]
        })

        const notAllowed = yield* request("/v1/preview/models", { method: "PUT", headers: { ...auth, ...id } })
        expect(notAllowed.status).toBe(405)
        expect(notAllowed.headers.get("x-request-id")).toBe("edge-1")
      })
    )

    it.scoped("the client's ApiError carries the request id of the server's error response", () =>
      Effect.gen(function* () {
        const { url } = yield* LocalBackend.LocalBackend
        // The client sends no request id of its own: the error carries the one the server generated.
        const plain = yield* training(url)
        const generated = yield* Effect.flip(plain.getTrainingJob(MISSING))
        expect(generated._tag).toBe("ApiError")
        expect(generated.status).toBe(404)
        expect(generated.requestId).toMatch(UUID)
        expect(generated.message).toContain(`request id ${generated.requestId}`)
        expect(clean(generated.message)).toBe(true)

        // A caller that tags its requests (through the client's hook) finds its own id in the error.
        const tagged = yield* training(url, {
          transformClient: HttpClient.mapRequest(HttpClientRequest.setHeader("x-request-id", "caller-7"))
        })
        const echoed = yield* Effect.flip(tagged.getTrainingJob(MISSING))
        expect(echoed.status).toBe(404)
        expect(echoed.requestId).toBe("caller-7")
        const invalid = yield* Effect.flip(
          tagged.createModel({ project: "p", name: "n", base_model: "no-such-base-model" })
        )
        expect(invalid.status).toBeGreaterThanOrEqual(400)
        expect(invalid.requestId).toBe("caller-7")
      })
    )
  })

  it.layer(Backend)("405 on the real server", (it) => {
    it.effect("a known path under another method is 405 with Allow (HEAD with GET) and FastAPI's JSON body", () =>
      Effect.gen(function* () {
        const cases: ReadonlyArray<readonly [method: string, path: string, allow: string]> = [
          ["PUT", "/v1/preview/models", "POST"],
          ["GET", "/v1/chat/completions", "POST"],
          ["GET", "/v1/chat/completions/", "POST"],
          ["PATCH", `/v1/preview/models/${MISSING}`, "DELETE"],
          ["POST", `/v1/preview/models/${MISSING}/checkpoints`, "DELETE, GET, HEAD"],
          ["DELETE", "/v1/health", "GET, HEAD"],
          ["OPTIONS", "/v1/health", "GET, HEAD"],
          ["POST", "/v1/models", "GET, HEAD"],
          ["GET", "/v1/local/files", "POST"]
        ]
        for (const [method, path, allow] of cases) {
          const reply = yield* request(path, { method, headers: auth })
          expect({ method, path, status: reply.status }).toEqual({ method, path, status: 405 })
          expect(reply.headers.get("allow")).toBe(allow)
          expect(reply.headers.get("content-type")).toContain("application/json")
          expect(json(reply)).toEqual({ detail: "Method Not Allowed" })
        }
      })
    )

    it.effect("an unknown path stays 404, whatever the method; a right method still answers", () =>
      Effect.gen(function* () {
        for (const [method, path] of [
          ["GET", "/v1/nothing-here"],
          ["PUT", "/v1/preview/models/x/y/z"],
          ["GET", "/v1/chat/completions/extra"],
          ["POST", "/v1/preview"]
        ] as const) {
          const reply = yield* request(path, { method, headers: auth })
          expect({ method, path, status: reply.status }).toEqual({ method, path, status: 404 })
          expect(reply.headers.get("allow")).toBeNull()
          expect(json(reply)).toEqual({ detail: "Not Found" })
        }
        expect((yield* request("/v1/health", { headers: auth })).status).toBe(200)
        expect((yield* request("/v1/health", { method: "HEAD", headers: auth })).status).toBe(200)
      })
    )
  })
})
