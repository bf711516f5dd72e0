import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientError from "@effect/platform/HttpClientError"
import { describe, expect, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Random from "effect/Random"
import * as TestClock from "effect/TestClock"
import * as TestServices from "effect/TestServices"
import * as Tracer from "effect/Tracer"
import { ModelId } from "../../src/api/Model.js"
import { TrainingJobId } from "../../src/api/TrainingJob.js"
import type { ApiError, ApiErrorReason } from "../../src/client/ApiError.js"
import * as TrainingClient from "../../src/client/TrainingClient.js"
import { training } from "../support/clients.js"
import * as FakeService from "../support/FakeService.js"

const modelId = ModelId.make(FakeService.ids.model)
const jobId = TrainingJobId.make(FakeService.ids.job)
const jobPath = `/v1/preview/training-jobs/${FakeService.ids.job}`
const jobRoute = "/v1/preview/training-jobs/:id"
const jobOk = (r: FakeService.Received): FakeService.Reply => ({ json: FakeService.jobRecord(r.path.split("/")[4]!) })

/** A short pause in real time: the network IO of the forked call goes on while the test clock stands still. */
const tick = TestServices.provideLive(Effect.sleep("2 millis"))

/** The retry waits pending on the test clock, as delays from now (an attempt's 10 min time-out is not one). */
const pendingRetries = Effect.gen(function* () {
  const now = yield* Clock.currentTimeMillis
  const sleeps = Chunk.toReadonlyArray(yield* TestClock.sleeps())
  return sleeps.filter((wake) => wake > now && wake <= now + 60_000).map((wake) => wake - now)
})

/** Poll (in real time) until the fiber ended or waits to retry; the delay of that wait, if any. */
const settle = <A, E>(fiber: Fiber.RuntimeFiber<A, E>) =>
  Effect.gen(function* () {
    for (let i = 0; i < 1500; i++) {
      if (Option.isSome(yield* Fiber.poll(fiber))) return Option.none<number>()
      const pending = yield* pendingRetries
      if (pending.length > 0) return Option.some(Math.min(...pending))
      yield* tick
    }
    return yield* Effect.dieMessage("the call neither ended nor waited to retry within 3 s")
  })

/** Poll (in real time) until `condition` holds. */
const until = (condition: () => boolean, what: string) =>
  Effect.gen(function* () {
    for (let i = 0; i < 1500; i++) {
      if (condition()) return
      yield* tick
    }
    return yield* Effect.dieMessage(`timed out waiting for ${what}`)
  })

interface Recorded {
  readonly logs: Array<{ readonly level: string; readonly message: string }>
  readonly events: Array<{ readonly span: string; readonly name: string; readonly attributes: Record<string, unknown> }>
}

/** Record debug logs and span events of an effect: a logger in place of the default one, a tracer around the native. */
const recording = <A, E, R>(effect: Effect.Effect<A, E, R>, recorded: Recorded) =>
  Effect.flatMap(Effect.tracer, (base) => {
    const tracer = Tracer.make({
      span: (name, parent, context, links, startTime, kind, options) => {
        const span = base.span(name, parent, context, links, startTime, kind, options)
        const event = span.event.bind(span)
        return Object.assign(span, {
          event: (eventName: string, time: bigint, attributes?: Record<string, unknown>) => {
            recorded.events.push({ span: name, name: eventName, attributes: attributes ?? {} })
            event(eventName, time, attributes)
          }
        })
      },
      context: (f, fiber) => base.context(f, fiber)
    })
    const logger = Logger.make(({ logLevel, message }) => {
      const text = Array.isArray(message) ? message.map(String).join(" ") : String(message)
      recorded.logs.push({ level: logLevel.label, message: text })
    })
    return effect.pipe(
      Effect.withTracer(tracer),
      Logger.withMinimumLogLevel(LogLevel.Debug),
      Effect.provide(Logger.replace(Logger.defaultLogger, logger))
    )
  })

/** No jitter: the backoff waits exactly 0.5 s, 1 s, 2 s... (`Random.next` is 0). */
const noJitter = Random.fixed([0])

/**
 * Run a call under the test clock: fork it, and each time it waits to retry, move the clock to the end of the
 * wait. The exit, the waits (ms) and what it logged and recorded on its spans.
 */
const drive = <A>(effect: Effect.Effect<A, ApiError>, random: Random.Random = noJitter) =>
  Effect.gen(function* () {
    const recorded: Recorded = { logs: [], events: [] }
    const fiber = yield* Effect.fork(recording(effect, recorded).pipe(Effect.withRandom(random)))
    const delays: Array<number> = []
    for (;;) {
      const delay = yield* settle(fiber)
      if (Option.isNone(delay)) break
      delays.push(delay.value)
      yield* TestClock.adjust(delay.value)
    }
    const exit = yield* Fiber.await(fiber)
    const retryLines = recorded.logs.filter((l) => l.message.includes("retrying"))
    return { exit, delays, recorded, retryLines }
  })

const failureOf = <A>(exit: Exit.Exit<A, ApiError>): ApiError => {
  if (Exit.isSuccess(exit)) throw new Error(`expected a failure, got ${JSON.stringify(exit.value)}`)
  const error = Cause.failureOption(exit.cause)
  if (Option.isNone(error)) throw new Error(`expected an ApiError, got ${Cause.pretty(exit.cause)}`)
  return error.value
}

/** The attempt numbers named in retry log lines. */
const attemptsLogged = (lines: ReadonlyArray<{ readonly message: string }>) =>
  lines.map((l) => Number(/\(attempt (\d+) of \d+\)/.exec(l.message)?.[1]))

/** The first `n` attempts answer `reply`, the next ones `ok`. */
const failFirst =
  (n: number, reply: FakeService.Reply, ok: FakeService.Handler): FakeService.Handler =>
  (r, attempt) =>
    attempt < n ? reply : ok(r, attempt)

describe("retries of GET calls, on the test clock", () => {
  it.scoped("a 500 is retried with backoff until the call succeeds; each retry is logged and on the span", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      server.route("GET", jobRoute, failFirst(2, { status: 500, json: { detail: "busy" } }, jobOk))
      const { exit, delays, recorded, retryLines } = yield* drive(client.getTrainingJob(jobId))
      expect(Exit.isSuccess(exit) && exit.value.id).toBe(FakeService.ids.job)
      expect(server.count("GET", jobPath)).toBe(3)
      // min(0.5 * 2^n, 8) s (no jitter here).
      expect(delays).toEqual([500, 1000])

      expect(retryLines).toHaveLength(2)
      expect(retryLines.every((l) => l.level === "DEBUG")).toBe(true)
      expect(attemptsLogged(retryLines)).toEqual([2, 3])
      expect(retryLines[0]?.message).toContain(`retrying GET ${jobPath} (attempt 2 of 4)`)
      expect(retryLines[0]?.message).toContain("ServerError 500")

      const retries = recorded.events.filter((e) => e.name === "effect-rl.retry")
      expect(retries.map((e) => e.span)).toEqual(["TrainingClient.getTrainingJob", "TrainingClient.getTrainingJob"])
      expect(retries.map((e) => e.attributes.attempt)).toEqual([2, 3])
      expect(retries[0]?.attributes).toMatchObject({ reason: "ServerError", status: 500 })
      expect(retries.map((e) => e.attributes.delay_ms)).toEqual(delays)
    })
  )

  it.scoped("the backoff doubles up to 8 s and jitter takes up to 25% off it", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url, { maxRetries: 6 })
      server.route("GET", jobRoute, failFirst(6, { status: 503, json: { detail: "down" } }, jobOk))
      const full = yield* drive(client.getTrainingJob(jobId), Random.fixed([1]))
      expect(Exit.isSuccess(full.exit)).toBe(true)
      expect(full.delays).toEqual([375, 750, 1500, 3000, 6000, 6000])
      expect(server.count("GET", jobPath)).toBe(7)
    })
  )

  // Fails today: the jittered backoff is a fractional number of milliseconds (484.567901 ms here). The test clock
  // then passes through fractional instants, where `Clock.currentTimeNanos` (read for the retry's span event) can
  // throw "RangeError: The number 1336407771.0000002 cannot be converted to a BigInt": the call dies instead of
  // retrying. Seen about once in 8 runs of this file before the other tests pinned `Random` to whole waits.
  it.scoped("a jittered wait is a whole number of milliseconds, so the test clock can be moved to its end", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      server.route("GET", jobRoute, failFirst(2, { status: 500, json: { detail: "busy" } }, jobOk))
      const { exit, delays } = yield* drive(client.getTrainingJob(jobId), Random.fixed([0.123456789]))
      expect(delays.every(Number.isInteger), `waits: ${delays.join(", ")}`).toBe(true)
      expect(Exit.isSuccess(exit), Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "").toBe(true)
    })
  )

  const retried: ReadonlyArray<readonly [string, FakeService.Reply]> = [
    ["408", { status: 408, json: { detail: "request timeout" } }],
    ["409", { status: 409, json: { detail: "conflict" } }],
    ["429", { status: 429, json: { detail: "Concurrency limit reached for requests" } }],
    ["503", { status: 503, body: "engine overloaded" }],
    ["524", { status: 524, body: "" }],
    ["a reset connection", { destroy: true }],
    ["x-should-retry: true on a 400", { status: 400, headers: { "x-should-retry": "true" }, json: { detail: "x" } }]
  ]
  for (const [name, reply] of retried) {
    it.scoped(`${name} is retried`, () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        const client = yield* training(server.url)
        server.route("GET", jobRoute, failFirst(1, reply, jobOk))
        const { exit, delays, retryLines } = yield* drive(client.getTrainingJob(jobId))
        expect(Exit.isSuccess(exit)).toBe(true)
        expect(server.count("GET", jobPath)).toBe(2)
        expect(delays).toHaveLength(1)
        expect(attemptsLogged(retryLines)).toEqual([2])
      })
    )
  }

  const notRetried: ReadonlyArray<readonly [number, ApiErrorReason]> = [
    [400, "BadRequest"],
    [401, "Unauthorized"],
    [402, "PaymentRequired"],
    [403, "Forbidden"],
    [404, "NotFound"],
    [422, "Validation"]
  ]
  for (const [status, reason] of notRetried) {
    it.scoped(`${status} is not retried`, () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        const client = yield* training(server.url)
        server.route("GET", jobRoute, failFirst(1, { status, json: { detail: "no" } }, jobOk))
        const { exit, delays, retryLines } = yield* drive(client.getTrainingJob(jobId))
        expect(failureOf(exit).reason).toBe(reason)
        expect(server.count("GET", jobPath)).toBe(1)
        expect(delays).toEqual([])
        expect(retryLines).toEqual([])
      })
    )
  }

  it.scoped("stops after maxRetries (default 3: 4 attempts) with the last error", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      server.route("GET", jobRoute, (_, attempt) => ({
        status: 500,
        headers: { "x-request-id": `req-${attempt}` },
        json: { detail: `attempt ${attempt}` }
      }))
      const { exit, delays, retryLines, recorded } = yield* drive(client.getTrainingJob(jobId))
      const error = failureOf(exit)
      expect(error).toMatchObject({ reason: "ServerError", description: "attempt 3", requestId: "req-3" })
      expect(server.count("GET", jobPath)).toBe(4)
      expect(delays).toEqual([500, 1000, 2000])
      expect(attemptsLogged(retryLines)).toEqual([2, 3, 4])
      expect(recorded.events.filter((e) => e.name === "effect-rl.retry").map((e) => e.attributes.attempt)).toEqual([
        2, 3, 4
      ])
    })
  )

  it.scoped("maxRetries: 1 makes 2 attempts, maxRetries: 0 one", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      server.route("GET", jobRoute, () => ({ status: 503, json: { detail: "down" } }))
      const once = yield* training(server.url, { maxRetries: 1 })
      const first = yield* drive(once.getTrainingJob(jobId))
      expect(failureOf(first.exit).reason).toBe("ServerError")
      expect(server.count("GET", jobPath)).toBe(2)
      expect(attemptsLogged(first.retryLines)).toEqual([2])
      expect(first.retryLines[0]?.message).toContain("(attempt 2 of 2)")

      const never = yield* training(server.url, { maxRetries: 0 })
      const second = yield* drive(never.getTrainingJob(jobId))
      expect(failureOf(second.exit).reason).toBe("ServerError")
      expect(server.count("GET", jobPath)).toBe(3)
      expect(second.delays).toEqual([])
    })
  )

  it.scoped("a 429 with retry-after: 5 waits exactly 5 s of the clock", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      server.route(
        "GET",
        jobRoute,
        failFirst(1, { status: 429, headers: { "retry-after": "5" }, json: { detail: "slow down" } }, jobOk)
      )
      const fiber = yield* Effect.fork(client.getTrainingJob(jobId))
      expect(yield* settle(fiber)).toEqual(Option.some(5000))
      yield* TestClock.adjust("4999 millis")
      // Give a premature retry every chance to reach the server.
      for (let i = 0; i < 25; i++) yield* tick
      expect(server.count("GET", jobPath)).toBe(1)
      expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
      yield* TestClock.adjust("1 millis")
      const job = yield* Fiber.join(fiber)
      expect(job.id).toBe(FakeService.ids.job)
      expect(server.count("GET", jobPath)).toBe(2)
    })
  )

  it.scoped("retry-after-ms is waited to the millisecond", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      server.route(
        "GET",
        jobRoute,
        failFirst(1, { status: 429, headers: { "retry-after-ms": "250" }, json: { detail: "slow down" } }, jobOk)
      )
      const { exit, delays } = yield* drive(client.getTrainingJob(jobId))
      expect(Exit.isSuccess(exit)).toBe(true)
      expect(delays).toEqual([250])
    })
  )

  it.scoped("a retry-after of 60 s is honoured; one above 60 s falls back to the backoff", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      server.route(
        "GET",
        jobRoute,
        failFirst(1, { status: 503, headers: { "retry-after": "60" }, json: { detail: "wait" } }, jobOk)
      )
      const honoured = yield* drive(client.getTrainingJob(jobId))
      expect(Exit.isSuccess(honoured.exit)).toBe(true)
      expect(honoured.delays).toEqual([60_000])

      server.route(
        "GET",
        jobRoute,
        failFirst(1, { status: 503, headers: { "retry-after": "61" }, json: { detail: "wait" } }, jobOk)
      )
      const fallback = yield* drive(client.getTrainingJob(jobId))
      expect(Exit.isSuccess(fallback.exit)).toBe(true)
      expect(fallback.delays).toEqual([500])
    })
  )

  it.scoped("an attempt that times out is retried; the timed-out request is aborted", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url, { timeout: "1 second" })
      server.route("GET", jobRoute, failFirst(1, { hang: true }, jobOk))
      const fiber = yield* Effect.fork(client.getTrainingJob(jobId).pipe(Effect.withRandom(noJitter)))
      // The first attempt's time-out is the only wait, until it fires.
      expect(yield* settle(fiber)).toEqual(Option.some(1000))
      yield* until(() => server.count("GET", jobPath) === 1, "the first request")
      yield* TestClock.adjust("1 second")
      expect(yield* settle(fiber)).toEqual(Option.some(500))
      yield* TestClock.adjust("500 millis")
      // The second attempt answers at once: wait for it in real time, not by moving the clock past its time-out.
      yield* until(() => server.count("GET", jobPath) === 2, "the second request")
      const job = yield* Fiber.join(fiber)
      expect(job.id).toBe(FakeService.ids.job)
      yield* until(() => server.aborted() === 1, "the timed-out request to be aborted")
    })
  )
})

describe("retries of DELETE and chat completions", () => {
  it.scoped("DELETE is retried", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      server.route(
        "DELETE",
        "/v1/preview/models/:id",
        failFirst(1, { status: 503, json: { detail: "down" } }, (r) => ({
          json: { model_id: r.path.split("/")[4], deleted_checkpoints: 0, deleted_run: false }
        }))
      )
      const { exit, delays } = yield* drive(client.deleteModel(modelId))
      expect(Exit.isSuccess(exit) && exit.value.model_id).toBe(FakeService.ids.model)
      expect(server.count("DELETE", `/v1/preview/models/${FakeService.ids.model}`)).toBe(2)
      expect(delays).toHaveLength(1)
    })
  )

  it.scoped("a chat completion (POST) is retried on 500", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      server.route("POST", "/v1/chat/completions", (_, attempt) =>
        attempt === 0
          ? { status: 500, json: { error: { message: "boom", type: "InternalServerError", code: 500 } } }
          : {
              json: {
                model: "base",
                choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop" }],
                usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 }
              }
            }
      )
      const { exit, retryLines } = yield* drive(
        client.createChatCompletion({ model: "base", messages: [{ role: "user", content: "hi" }] })
      )
      expect(Exit.isSuccess(exit) && exit.value.choices[0]?.message.content).toBe("hi")
      expect(server.count("POST", "/v1/chat/completions")).toBe(2)
      expect(new Set(server.received.map((r) => r.body)).size).toBe(1)
      expect(attemptsLogged(retryLines)).toEqual([2])
      expect(retryLines[0]?.message).toContain("retrying POST /v1/chat/completions")
    })
  )
})

/** The calls that create or log: sent once unless the caller gives an idempotency key. */
const writes: ReadonlyArray<{
  readonly name: string
  readonly path: string
  readonly ok: FakeService.Handler
  readonly call: (
    client: TrainingClient.Service,
    options: TrainingClient.WriteOptions | undefined
  ) => Effect.Effect<unknown, ApiError>
}> = [
  {
    name: "createTrainingJob",
    path: "/v1/preview/training-jobs",
    ok: () => ({ json: FakeService.jobRecord(FakeService.ids.job) }),
    call: (client, options) => client.createTrainingJob({ model_id: modelId, trajectory_groups: [] }, options)
  },
  {
    name: "createModel",
    path: "/v1/preview/models",
    ok: () => ({ json: { id: FakeService.ids.model, entity: "me", project: "p", name: "m", base_model: "base" } }),
    call: (client, options) => client.createModel({ project: "p", name: "m", base_model: "base" }, options)
  },
  {
    name: "createSftTrainingJob",
    path: "/v1/preview/sft-training-jobs",
    ok: () => ({ json: FakeService.jobRecord(FakeService.ids.job) }),
    call: (client, options) =>
      client.createSftTrainingJob({ model_id: modelId, training_data_url: "file:///tmp/data.jsonl" }, options)
  },
  {
    name: "log",
    path: `/v1/preview/models/${FakeService.ids.model}/log`,
    ok: () => ({ body: "" }),
    call: (client, options) => client.log(modelId, { split: "val", trajectory_groups: [] }, options)
  }
]

/** A handler whose replies also say the backend honours idempotency keys, as the embedded backend's do. */
const honouring =
  (handler: FakeService.Handler): FakeService.Handler =>
  (r, attempt) => {
    const reply = handler(r, attempt)
    return "destroy" in reply || "hang" in reply
      ? reply
      : { ...reply, headers: { ...reply.headers, "x-idempotency-keys": "honoured" } }
  }

const workflowError: FakeService.Reply = { status: 500, json: { detail: "workflow error" } }

describe("retries of the POSTs that create or log", () => {
  for (const write of writes) {
    it.scoped(`${write.name}: a 500 without an idempotency key is not retried: Ambiguous, exactly 1 attempt`, () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        const client = yield* training(server.url)
        server.route("POST", write.path, honouring(failFirst(1, workflowError, write.ok)))
        const { exit, delays, retryLines } = yield* drive(write.call(client, undefined))
        const error = failureOf(exit)
        expect(error).toMatchObject({ reason: "Ambiguous", status: 500, method: "POST", path: write.path })
        expect(error.description).toContain("workflow error")
        expect(error.idempotencyKey).toBeUndefined()
        expect(server.count("POST", write.path)).toBe(1)
        expect(server.received[0]?.headers["idempotency-key"]).toBeUndefined()
        expect(delays).toEqual([])
        expect(retryLines).toEqual([])
      })
    )

    it.scoped(`${write.name}: under a key the backend says it honours, retried with the same key every attempt`, () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        const client = yield* training(server.url)
        server.route("POST", write.path, honouring(failFirst(2, workflowError, write.ok)))
        const { exit, delays, retryLines } = yield* drive(write.call(client, { idempotencyKey: `key-${write.name}` }))
        expect(Exit.isSuccess(exit)).toBe(true)
        expect(server.count("POST", write.path)).toBe(3)
        expect(server.received.map((r) => r.headers["idempotency-key"])).toEqual([
          `key-${write.name}`,
          `key-${write.name}`,
          `key-${write.name}`
        ])
        expect(new Set(server.received.map((r) => r.body)).size).toBe(1)
        expect(delays).toHaveLength(2)
        expect(attemptsLogged(retryLines)).toEqual([2, 3])
        expect(yield* client.honoursIdempotencyKeys).toBe(true)
      })
    )

    it.scoped(`${write.name}: under a key a silent backend (the hosted one) may ignore, a 500 is Ambiguous`, () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        const client = yield* training(server.url)
        server.route("POST", write.path, failFirst(1, workflowError, write.ok))
        const { exit, delays } = yield* drive(write.call(client, { idempotencyKey: `key-${write.name}` }))
        const error = failureOf(exit)
        expect(error).toMatchObject({
          _tag: "ApiError",
          reason: "Ambiguous",
          method: "POST",
          path: write.path,
          status: 500,
          idempotencyKey: `key-${write.name}`,
          retryable: false
        })
        expect(error.message).toContain(`Idempotency-Key key-${write.name}`)
        expect(server.count("POST", write.path)).toBe(1)
        // Nothing had been heard of the backend: it was asked once, on the failure.
        expect(server.count("GET", "/v1/health")).toBe(1)
        expect(delays).toEqual([])
        expect(yield* client.honoursIdempotencyKeys).toBe(false)
      })
    )
  }

  it.scoped("createModel with return_existing (an upsert) is retried on a 500 without a key", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      const path = "/v1/preview/models"
      server.route("POST", path, failFirst(1, workflowError, writes[1]!.ok))
      const { exit, delays } = yield* drive(
        client.createModel({ project: "p", name: "m", base_model: "base", return_existing: true })
      )
      expect(Exit.isSuccess(exit)).toBe(true)
      expect(server.count("POST", path)).toBe(2)
      expect(delays).toHaveLength(1)
    })
  )
})

describe("a job create on a backend that does not say it honours keys", () => {
  const path = "/v1/preview/training-jobs"
  const create = (client: TrainingClient.Service) =>
    client.createTrainingJob({ model_id: modelId, trajectory_groups: [] }, { idempotencyKey: "step-3" })
  const ok = writes[0]!.ok

  const unsent: ReadonlyArray<readonly [string, FakeService.Reply]> = [
    ["a 429", { status: 429, json: { detail: "Concurrency limit reached for requests" } }],
    ["a 503 with retry-after", { status: 503, headers: { "retry-after": "2" }, body: "overloaded" }],
    ["a 503 with x-should-retry: true", { status: 503, headers: { "x-should-retry": "true" }, body: "overloaded" }]
  ]
  for (const [name, reply] of unsent) {
    it.scoped(`${name} proves the request was not acted on: retried`, () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        const client = yield* training(server.url)
        server.route("POST", path, failFirst(1, reply, ok))
        const { exit, delays } = yield* drive(create(client))
        expect(Exit.isSuccess(exit)).toBe(true)
        expect(server.count("POST", path)).toBe(2)
        expect(delays).toHaveLength(1)
      })
    )
  }

  const unknown: ReadonlyArray<readonly [string, FakeService.Reply]> = [
    ["a reset after the body was sent", { destroy: true }],
    ["a bare 503", { status: 503, body: "engine overloaded" }],
    ["a 502 from a proxy", { status: 502, body: "<html>Bad Gateway</html>" }],
    ["a 504 from a proxy", { status: 504, body: "<html>Gateway Timeout</html>" }],
    ["a gateway's 524", { status: 524, body: "" }],
    ["a 200 whose body does not say which job", { json: { created: true } }],
    ["a 408 (the service gave up reading or running it)", { status: 408, json: { detail: "request timeout" } }],
    // Only a 503 with retry-after says the request was not taken in; a 502's may come from a proxy after it was.
    ["a 502 with retry-after", { status: 502, headers: { "retry-after": "2" }, body: "bad gateway" }],
    ["x-should-retry: true on a 500", { status: 500, headers: { "x-should-retry": "true" }, json: { detail: "x" } }],
    ["a 300, neither a success nor a refusal", { status: 300, body: "" }]
  ]
  for (const [name, reply] of unknown) {
    it.scoped(`${name}: Ambiguous after one attempt, never a blind repeat`, () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        const client = yield* training(server.url)
        server.route("POST", path, failFirst(1, reply, ok))
        const { exit, delays } = yield* drive(create(client))
        expect(failureOf(exit)).toMatchObject({ reason: "Ambiguous", idempotencyKey: "step-3", retryable: false })
        expect(server.count("POST", path)).toBe(1)
        expect(delays).toEqual([])
      })
    )
  }

  it.scoped("an attempt that times out: Ambiguous (the job may be being created), not repeated", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url, { timeout: "1 second" })
      server.route("POST", path, failFirst(1, { hang: true }, ok))
      // Not `drive`: after the time-out the client asks whether keys are honoured (GET /v1/health, under the
      // same 1 s time-out). That answer comes in real time; `drive` would take its pending time-out for a wait
      // whenever the answer is slower than a poll (a loaded machine), and run the clock past it.
      const fiber = yield* Effect.fork(create(client).pipe(Effect.withRandom(noJitter)))
      const delays: Array<number> = []
      const wait = yield* settle(fiber)
      if (Option.isSome(wait)) {
        delays.push(wait.value)
        yield* TestClock.adjust(wait.value)
      }
      const exit = yield* Fiber.await(fiber)
      expect(failureOf(exit)).toMatchObject({ reason: "Ambiguous", idempotencyKey: "step-3" })
      expect(failureOf(exit).description).toContain("Timeout")
      expect(delays).toEqual([1000])
      expect(server.count("POST", path)).toBe(1)
    })
  )

  const refused: ReadonlyArray<readonly [string, FakeService.Reply, ApiErrorReason]> = [
    ["400", { status: 400, json: { detail: "bad" } }, "BadRequest"],
    ["404", { status: 404, json: { detail: "Model not found" } }, "NotFound"],
    ["409 (retried where a repeat is safe)", { status: 409, json: { detail: "a job is running" } }, "Conflict"],
    ["422", { status: 422, json: { detail: [] } }, "Validation"],
    ["x-should-retry: true on a 400", { status: 400, headers: { "x-should-retry": "true" }, json: {} }, "BadRequest"]
  ]
  for (const [name, reply, reason] of refused) {
    it.scoped(`a refusal (${name}: nothing was created) is what it is, not Ambiguous, not repeated`, () =>
      Effect.gen(function* () {
        const server = yield* FakeService.make
        const client = yield* training(server.url)
        server.route("POST", path, failFirst(1, reply, ok))
        const { exit, delays } = yield* drive(create(client))
        expect(failureOf(exit)).toMatchObject({
          reason,
          status: (reply as { status: number }).status,
          retryable: false
        })
        expect(server.count("POST", path)).toBe(1)
        expect(delays).toEqual([])
      })
    )
  }

  it.scoped("a 503 with retry-after but x-should-retry: false: the service's word wins, not repeated", () =>
    Effect.gen(function* () {
      const server = yield* FakeService.make
      const client = yield* training(server.url)
      server.route(
        "POST",
        path,
        failFirst(1, { status: 503, headers: { "retry-after": "2", "x-should-retry": "false" }, body: "down" }, ok)
      )
      const { exit, delays } = yield* drive(create(client))
      expect(failureOf(exit)).toMatchObject({ reason: "ServerError", status: 503, retryable: false })
      expect(server.count("POST", path)).toBe(1)
      expect(delays).toEqual([])
    })
  )

  it.scoped("a 200 whose body breaks while it is read: Ambiguous (the job was made), not repeated", () =>
    Effect.gen(function* () {
      // The scripted service cannot break a body half way: a bare server sends the head and part of the body,
      // then drops the connection.
      let posts = 0
      const server = http.createServer((req, res) => {
        posts++
        req.resume()
        res.writeHead(200, { "content-type": "application/json", "content-length": "100" })
        res.write('{"id":"')
        setTimeout(() => res.socket?.destroy(), 20)
      })
      yield* Effect.acquireRelease(
        Effect.async<void>((resume) => void server.listen(0, "127.0.0.1", () => resume(Effect.void))),
        () => Effect.sync(() => server.close())
      )
      const client = yield* training(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, {
        honoursIdempotencyKeys: false
      })
      const { exit, delays } = yield* drive(create(client))
      const error = failureOf(exit)
      expect(error).toMatchObject({ reason: "Ambiguous", status: 200, idempotencyKey: "step-3", retryable: false })
      expect(error.description).toContain("Transport")
      expect(posts).toBe(1)
      expect(delays).toEqual([])
    })
  )

  it.scoped("a base URL that is no URL (a port out of range): InvalidRequest, not Ambiguous, nothing sent", () =>
    Effect.gen(function* () {
      const client = yield* training("http://127.0.0.1:99999", { honoursIdempotencyKeys: false })
      const { exit, delays } = yield* drive(create(client))
      expect(failureOf(exit)).toMatchObject({ reason: "InvalidRequest", retryable: false })
      expect(delays).toEqual([])
    })
  )

  it.scoped("a refused connection (nothing sent) is retried, then a Transport error", () =>
    Effect.gen(function* () {
      // A port that was listening and is closed now: connections to it are refused.
      const closed = yield* Effect.scoped(Effect.map(FakeService.make, (server) => server.url))
      const client = yield* training(closed, { maxRetries: 2, honoursIdempotencyKeys: false })
      const { exit, delays } = yield* drive(create(client))
      const error = failureOf(exit)
      expect(error).toMatchObject({ reason: "Transport", retryable: true })
      expect(error.description).toMatch(/ECONNREFUSED/)
      expect(delays).toHaveLength(2)
    })
  )

  it.scoped("over fetch (the refusal's code one cause down), a refused connection is retried too", () =>
    Effect.gen(function* () {
      const closed = yield* Effect.scoped(Effect.map(FakeService.make, (server) => server.url))
      const client = yield* TrainingClient.make({
        baseUrl: closed,
        maxRetries: 2,
        honoursIdempotencyKeys: false
      }).pipe(Effect.provide(FetchHttpClient.layer))
      const { exit, delays } = yield* drive(create(client))
      expect(failureOf(exit)).toMatchObject({ reason: "Transport", retryable: true })
      expect(delays).toHaveLength(2)
    })
  )

  it.scoped("a transport failure whose cause says nothing of a refusal: Ambiguous, whatever the cause's shape", () =>
    Effect.gen(function* () {
      // Causes no transport here gives (a cycle, a null, a string, none), from a `transformClient` whose attempts
      // fail with them: the search for the socket's code must end, and find none.
      const cyclic: { message: string; cause?: unknown } = { message: "loop" }
      cyclic.cause = cyclic
      const causes: ReadonlyArray<unknown> = [cyclic, { cause: null }, { cause: "socket gone" }, undefined]
      for (const cause of causes) {
        const server = yield* FakeService.make
        server.route("POST", path, ok)
        const client = yield* training(server.url, {
          honoursIdempotencyKeys: false,
          transformClient: HttpClient.transform((_, request) =>
            Effect.fail(new HttpClientError.RequestError({ request, reason: "Transport", cause }))
          )
        })
        const { exit, delays } = yield* drive(create(client))
        expect(failureOf(exit)).toMatchObject({ reason: "Ambiguous", idempotencyKey: "step-3", retryable: false })
        expect(delays).toEqual([])
      }
    })
  )
})
