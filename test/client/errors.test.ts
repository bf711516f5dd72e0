import * as net from "node:net"
import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"
import { ModelId } from "../../src/api/Model.js"
import { TrainingJobId } from "../../src/api/TrainingJob.js"
import type { ApiError, ApiErrorReason } from "../../src/client/ApiError.js"
import { parseRetryAfter } from "../../src/client/internal/http.js"
import { API_KEY, training } from "../support/clients.js"
import * as FakeService from "../support/FakeService.js"
import { failure } from "../support/failure.js"

const jobId = TrainingJobId.make(FakeService.ids.job)
const jobPath = `/v1/preview/training-jobs/${FakeService.ids.job}`

/** A port nothing listens on: bound once to learn a free one, then released. */
const freePort = Effect.async<number>((resume) => {
  const probe = net.createServer()
  probe.listen(0, "127.0.0.1", () => {
    const { port } = probe.address() as net.AddressInfo
    probe.close(() => resume(Effect.succeed(port)))
  })
})

interface StatusCase {
  readonly status: number
  readonly reason: ApiErrorReason
  readonly reply: { readonly json?: unknown; readonly body?: string }
  readonly description: string
  readonly extra?: Partial<Pick<ApiError, "errorType" | "code" | "param" | "retryable">>
}

const statusCases: ReadonlyArray<StatusCase> = [
  {
    status: 400,
    reason: "BadRequest",
    reply: {
      json: {
        error: {
          message: "top_logprobs must be at most 20",
          type: "BadRequestError",
          code: 400,
          param: "top_logprobs"
        }
      }
    },
    description: "top_logprobs must be at most 20",
    extra: { errorType: "BadRequestError", code: 400, param: "top_logprobs", retryable: false }
  },
  {
    status: 401,
    reason: "Unauthorized",
    reply: { json: { detail: "Invalid API key" } },
    description: "Invalid API key",
    extra: { retryable: false }
  },
  {
    status: 402,
    reason: "PaymentRequired",
    reply: { json: { detail: "Quota exceeded" } },
    description: "Quota exceeded",
    extra: { retryable: false }
  },
  {
    status: 403,
    reason: "Forbidden",
    reply: { json: { error: { message: "Region not supported", type: "PermissionDeniedError", code: "region" } } },
    description: "Region not supported",
    extra: { errorType: "PermissionDeniedError", code: "region", retryable: false }
  },
  {
    status: 404,
    reason: "NotFound",
    reply: { json: { detail: "Training job not found" } },
    description: "Training job not found",
    extra: { retryable: false }
  },
  {
    status: 408,
    reason: "Timeout",
    reply: { json: { detail: "Request timed out" } },
    description: "Request timed out",
    extra: { retryable: true }
  },
  {
    status: 409,
    reason: "Conflict",
    reply: { json: { detail: "Another job of this model is running" } },
    description: "Another job of this model is running",
    extra: { retryable: true }
  },
  {
    status: 418,
    reason: "BadRequest",
    reply: { json: { message: "I am a teapot" } },
    description: "I am a teapot",
    extra: { retryable: false }
  },
  {
    status: 500,
    reason: "ServerError",
    reply: { json: { detail: "Failed to create model due to workflow error." } },
    description: "Failed to create model due to workflow error.",
    extra: { retryable: true }
  },
  {
    status: 503,
    reason: "ServerError",
    reply: { body: "upstream connect error or disconnect/reset before headers" },
    description: "upstream connect error or disconnect/reset before headers",
    extra: { retryable: true }
  },
  {
    status: 507,
    reason: "InsufficientStorage",
    // The embedded backend's form when its disk is full (the trace service's `{"reason": ...}`).
    reply: { json: { reason: "the disk of /data is full: 10 MB left; free space to go on" } },
    description: "the disk of /data is full: 10 MB left; free space to go on",
    extra: { retryable: true }
  },
  {
    status: 524,
    reason: "ServerError",
    reply: { body: "" },
    description: "HTTP 524",
    extra: { retryable: true }
  }
]

describe("ApiError: every status and body form, against a real server", () => {
  for (const c of statusCases) {
    it.scoped(`${c.status} → ${c.reason} with the service's message and the request id`, () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        const client = yield* training(server.url, { maxRetries: 0 })
        server.route("GET", "/v1/preview/training-jobs/:id", () => ({
          status: c.status,
          headers: { "x-request-id": `req-${c.status}` },
          ...c.reply
        }))
        const error = yield* failure(client.getTrainingJob(jobId))
        expect(error._tag).toBe("ApiError")
        expect(error).toMatchObject({
          reason: c.reason,
          method: "GET",
          path: jobPath,
          status: c.status,
          description: c.description,
          requestId: `req-${c.status}`,
          ...c.extra
        })
        expect(error.message).toBe(
          `GET ${jobPath}: ${c.status} ${c.reason}: ${c.description} (request id req-${c.status})`
        )
        expect(server.count("GET", jobPath)).toBe(1)
        // The key was sent, so its absence from the error is not for want of it.
        expect(server.received[0]?.headers.authorization).toBe(`Bearer ${API_KEY}`)
      })
    )
  }

  it.scoped("422 → Validation with the detail list decoded (loc, msg, type)", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url, { maxRetries: 0 })
      const detail = [
        {
          loc: ["body", "trajectory_groups", 0, "reward"],
          msg: "Input should be a valid number",
          type: "float_parsing"
        },
        { loc: ["body", "model_id"], msg: "Field required", type: "missing" }
      ]
      server.route("POST", "/v1/preview/training-jobs", () => ({
        status: 422,
        headers: { "x-request-id": "req-422" },
        json: { detail }
      }))
      const error = yield* failure(
        client.createTrainingJob({ model_id: ModelId.make(FakeService.ids.model), trajectory_groups: [] })
      )
      expect(error).toMatchObject({
        reason: "Validation",
        method: "POST",
        path: "/v1/preview/training-jobs",
        status: 422,
        requestId: "req-422",
        retryable: false
      })
      expect(error.detail).toEqual(detail)
      expect(error.description).toBe(
        "body.trajectory_groups.0.reward: Input should be a valid number; body.model_id: Field required"
      )
    })
  )

  it.scoped("429 → RateLimited with retry-after in seconds as the Duration", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url, { maxRetries: 0 })
      server.route("GET", "/v1/preview/training-jobs/:id", () => ({
        status: 429,
        headers: { "retry-after": "7", "x-request-id": "req-429" },
        json: { detail: "Concurrency limit reached for requests" }
      }))
      const error = yield* failure(client.getTrainingJob(jobId))
      expect(error).toMatchObject({
        reason: "RateLimited",
        status: 429,
        description: "Concurrency limit reached for requests",
        requestId: "req-429",
        retryable: true
      })
      expect(error.retryAfter && Duration.toMillis(error.retryAfter)).toBe(7000)
    })
  )

  it.scoped("429 → retry-after-ms wins over retry-after", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url, { maxRetries: 0 })
      server.route("GET", "/v1/preview/training-jobs/:id", () => ({
        status: 429,
        headers: { "retry-after-ms": "1500", "retry-after": "9" },
        json: { detail: "slow down" }
      }))
      const error = yield* failure(client.getTrainingJob(jobId))
      expect(error.reason).toBe("RateLimited")
      expect(error.retryAfter && Duration.toMillis(error.retryAfter)).toBe(1500)
    })
  )

  it.scoped("429 → an HTTP-date retry-after is read relative to the clock", () =>
    Effect.gen(function* () {
      const now = Date.UTC(2025, 0, 2, 3, 4, 5)
      yield* TestClock.setTime(now)
      const server = yield* FakeService.make
      const client = yield* training(server.url, { maxRetries: 0 })
      server.route("GET", "/v1/preview/training-jobs/:id", () => ({
        status: 429,
        headers: { "retry-after": new Date(now + 30_000).toUTCString() },
        json: { detail: "slow down" }
      }))
      const error = yield* failure(client.getTrainingJob(jobId))
      expect(error.reason).toBe("RateLimited")
      expect(error.retryAfter && Duration.toMillis(error.retryAfter)).toBe(30_000)
    })
  )

  it.scoped("a 429 without retry-after has no retryAfter", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url, { maxRetries: 0 })
      server.route("GET", "/v1/preview/training-jobs/:id", () => ({ status: 429, json: { detail: "slow down" } }))
      const error = yield* failure(client.getTrainingJob(jobId))
      expect(error.reason).toBe("RateLimited")
      expect(error.retryAfter).toBeUndefined()
      expect(error.requestId).toBeUndefined()
    })
  )
})

describe("retry-after as the service sends it", () => {
  const now = Date.UTC(2025, 0, 2, 3, 4, 5)
  const cases: ReadonlyArray<readonly [string, Readonly<Record<string, string>>, number | undefined]> = [
    ["seconds", { "retry-after": "7" }, 7000],
    ["fractional seconds, rounded up to the millisecond", { "retry-after": "0.0015" }, 2],
    ["0 seconds", { "retry-after": "0" }, 0],
    ["negative seconds: none", { "retry-after": "-1" }, undefined],
    ["blank: none", { "retry-after": "  " }, undefined],
    ["neither a number nor a date: none", { "retry-after": "soon" }, undefined],
    ["an HTTP date, from now", { "retry-after": new Date(now + 30_000).toUTCString() }, 30_000],
    ["an HTTP date in the past: 0", { "retry-after": new Date(now - 30_000).toUTCString() }, 0],
    ["retry-after-ms wins", { "retry-after-ms": "1500", "retry-after": "9" }, 1500],
    ["retry-after-ms 0 wins", { "retry-after-ms": "0", "retry-after": "9" }, 0],
    ["retry-after-ms fractional, rounded up", { "retry-after-ms": "2.5" }, 3],
    ["a blank retry-after-ms gives way to retry-after", { "retry-after-ms": " ", "retry-after": "9" }, 9000],
    ["a negative retry-after-ms gives way to retry-after", { "retry-after-ms": "-5", "retry-after": "9" }, 9000],
    ["a retry-after-ms that is no number gives way", { "retry-after-ms": "soon", "retry-after": "9" }, 9000],
    ["no header: none", {}, undefined]
  ]
  for (const [name, headers, expected] of cases) {
    it(`${name}: ${expected === undefined ? "undefined" : `${expected} ms`}`, () => {
      const parsed = parseRetryAfter(headers, now)
      expect(parsed === undefined ? undefined : Duration.toMillis(parsed)).toBe(expected)
    })
  }
})

describe("ApiError: transport, time-out and decode failures", () => {
  it.scoped("a refused connection → Transport", () =>
    Effect.gen(function* () {
      const port = yield* freePort
      const client = yield* training(`http://127.0.0.1:${port}`, { maxRetries: 0 })
      const error = yield* failure(client.getTrainingJob(jobId))
      expect(error).toMatchObject({ reason: "Transport", method: "GET", path: jobPath, retryable: true })
      expect(error.status).toBeUndefined()
      expect(error.description).toMatch(/ECONNREFUSED/)
    })
  )

  it.scoped("a connection reset before the response → Transport", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url, { maxRetries: 0 })
      server.route("GET", "/v1/preview/training-jobs/:id", () => ({ destroy: true }))
      const error = yield* failure(client.getTrainingJob(jobId))
      expect(error).toMatchObject({ reason: "Transport", method: "GET", path: jobPath, retryable: true })
      expect(error.status).toBeUndefined()
      expect(server.count("GET", jobPath)).toBe(1)
    })
  )

  it.scopedLive("an attempt that gets no response within `timeout` → Timeout", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url, { maxRetries: 0, timeout: "200 millis" })
      server.route("GET", "/v1/preview/training-jobs/:id", () => ({ hang: true }))
      const start = Date.now()
      const error = yield* failure(client.getTrainingJob(jobId))
      const elapsed = Date.now() - start
      expect(error).toMatchObject({ reason: "Timeout", method: "GET", path: jobPath, retryable: true })
      expect(error.description).toBe("no complete response within 200ms")
      expect(elapsed).toBeGreaterThanOrEqual(190)
      expect(elapsed).toBeLessThan(5000)
      expect(server.count("GET", jobPath)).toBe(1)
    })
  )

  it.scoped("a 200 body that does not match the schema → Decode with the start of the body", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url, { maxRetries: 0 })
      const body = JSON.stringify({ id: "not-a-uuid", padding: "x".repeat(2000) })
      server.route("GET", "/v1/preview/training-jobs/:id", () => ({
        headers: { "content-type": "application/json", "x-request-id": "req-decode" },
        body
      }))
      const error = yield* failure(client.getTrainingJob(jobId))
      expect(error).toMatchObject({
        reason: "Decode",
        method: "GET",
        path: jobPath,
        status: 200,
        requestId: "req-decode",
        retryable: false
      })
      expect(error.description).toContain("TrainingJob")
      expect(error.excerpt?.startsWith('{"id":"not-a-uuid","padding":"xxx')).toBe(true)
      expect(error.excerpt).toBe(`${body.slice(0, 512)}... (${body.length} characters)`)
      expect(server.count("GET", jobPath)).toBe(1)
    })
  )

  it.scoped("a 200 body that is not JSON → Decode with the body as excerpt", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url, { maxRetries: 0 })
      server.route("GET", "/v1/health", () => ({ body: "<html>maintenance</html>" }))
      const error = yield* failure(client.health)
      expect(error).toMatchObject({ reason: "Decode", path: "/v1/health", status: 200 })
      expect(error.description).toContain("not JSON")
      expect(error.excerpt).toBe("<html>maintenance</html>")
    })
  )

  it.live("x-should-retry: false on a 500 → not retried, and not retryable", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const server = yield* FakeService.make
        // Default retries: if the header were ignored, the second attempt would succeed after ~0.5 s.
        const client = yield* training(server.url)
        server.route("GET", "/v1/preview/training-jobs/:id", (r, attempt) =>
          attempt === 0
            ? { status: 500, headers: { "x-should-retry": "false" }, json: { detail: "do not repeat" } }
            : { json: { id: r.path.split("/")[4] } }
        )
        const error = yield* failure(client.getTrainingJob(jobId))
        expect(error).toMatchObject({ reason: "ServerError", status: 500, description: "do not repeat" })
        expect(error.retryable).toBe(false)
        expect(server.count("GET", jobPath)).toBe(1)
      })
    )
  )
})

describe("ApiError: a request that breaks its schema is not sent", () => {
  it.scoped("createChatCompletion with top_logprobs and no logprobs → InvalidRequest naming the field", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      const error = yield* failure(
        client.createChatCompletion({ model: "base", messages: [{ role: "user", content: "hi" }], top_logprobs: 2 })
      )
      expect(error).toMatchObject({
        reason: "InvalidRequest",
        method: "POST",
        path: "/v1/chat/completions",
        retryable: false
      })
      expect(error.status).toBeUndefined()
      expect(error.detail?.map((d) => d.loc)).toEqual([["body", "top_logprobs"]])
      expect(error.detail?.[0]?.msg).toContain("logprobs")
      expect(error.description).toContain("body.top_logprobs")
      expect(server.received).toEqual([])
    })
  )

  it.scoped("createChatCompletion naming a tool not in tools, or required without tools → InvalidRequest", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      const messages = [{ role: "user" as const, content: "hi" }]
      const tools = [{ type: "function" as const, function: { name: "add" } }]
      const named = yield* failure(
        client.createChatCompletion({
          model: "base",
          messages,
          tools,
          tool_choice: { type: "function", function: { name: "sub" } }
        })
      )
      expect(named).toMatchObject({ reason: "InvalidRequest", retryable: false })
      expect(named.detail?.map((d) => d.loc)).toEqual([["body", "tool_choice"]])
      expect(named.detail?.[0]?.msg).toContain('"sub", which is not in tools')
      const required = yield* failure(client.createChatCompletion({ model: "base", messages, tool_choice: "required" }))
      expect(required.detail?.[0]?.msg).toContain('tool_choice "required" needs tools')
      expect(server.received).toEqual([])
    })
  )

  it.scoped("createTrainingJob with a model_id that is not a UUID → InvalidRequest naming the field", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      const error = yield* failure(
        client.createTrainingJob({ model_id: "not-a-uuid" as ModelId, trajectory_groups: [] }, { idempotencyKey: "k" })
      )
      expect(error).toMatchObject({
        reason: "InvalidRequest",
        method: "POST",
        path: "/v1/preview/training-jobs",
        retryable: false
      })
      expect(error.detail?.map((d) => d.loc)).toEqual([["body", "model_id"]])
      expect(server.received).toEqual([])
    })
  )

  it.scoped("a path parameter that is not a UUID → InvalidRequest in `path`", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      const error = yield* failure(client.getTrainingJob("../models" as TrainingJobId))
      expect(error.reason).toBe("InvalidRequest")
      expect(error.detail?.map((d) => d.loc)).toEqual([["path", "training_job_id"]])
      expect(server.received).toEqual([])
    })
  )
})
