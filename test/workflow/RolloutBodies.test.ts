/**
 * Hostile bodies sent to a rollout's endpoint (in process through `RolloutFetch`, and over HTTP through the
 * gateway). Nested too deep for a schema: a 400 naming the field that nests too deep, at any depth, never a 500;
 * the same limit as the embedded backend's (`MAX_JSON_DEPTH`); deep bodies once overflowed the stack while their
 * decoding error was being formatted. Larger than the limit (4 MiB by default): a 413 before the body is parsed
 * (before it is read, over HTTP, when it declares its length). Either way the rollout, and another one, answer
 * the next request as before (issue 35).
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Redacted from "effect/Redacted"
import * as TestServices from "effect/TestServices"
import { MAX_JSON_DEPTH, TOO_DEEP } from "../../src/api/internal/jsonDepth.js"
import * as Rollout from "../../src/workflow/Rollout.js"
import * as RolloutFetch from "../../src/workflow/RolloutFetch.js"
import * as RolloutGateway from "../../src/workflow/RolloutGateway.js"
import { instant } from "./support.js"

const policy = instant("instant", "ok")

/** JSON text of arrays nested `depth` deep. */
const nested = (depth: number) => `${"[".repeat(depth)}${"]".repeat(depth)}`

/**
 * Bodies with `deep` (JSON text) in one field, each with the top-level field it is under and how many levels
 * that field's place adds around it.
 */
const CASES: ReadonlyArray<{
  readonly path: string
  readonly field: string
  readonly around: number
  readonly body: (deep: string) => string
}> = [
  {
    path: "chat/completions",
    field: "messages",
    around: 3,
    body: (d) => `{"model":"m","messages":[{"role":"user","content":${d}}]}`
  },
  {
    path: "chat/completions",
    field: "tools",
    around: 5,
    body: (d) =>
      `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":${d}}}}]}`
  },
  {
    path: "chat/completions",
    field: "response_format",
    around: 2,
    body: (d) =>
      `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":${d}}}`
  },
  {
    path: "chat/completions",
    field: "chat_template_kwargs",
    around: 2,
    body: (d) => `{"model":"m","messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"x":${d}}}`
  },
  {
    path: "responses",
    field: "input",
    around: 3,
    body: (d) => `{"model":"m","input":[{"role":"user","content":${d}}]}`
  },
  { path: "responses", field: "metadata", around: 2, body: (d) => `{"model":"m","input":"hi","metadata":{"x":${d}}}` },
  {
    path: "responses",
    field: "text",
    around: 3,
    body: (d) => `{"model":"m","input":"hi","text":{"format":{"type":"json_schema","name":"x","schema":${d}}}}`
  }
]

/** Every case at depths past the limit, sent with `send`; then a healthy request. */
const refusesEveryDeepBody = (
  send: (path: string, body: string) => Effect.Effect<{ readonly status: number; readonly text: string }>
) =>
  Effect.gen(function* () {
    for (const { path, field, around, body } of CASES) {
      for (const depth of [MAX_JSON_DEPTH + 1 - around, 2_500, 10_000, 100_000]) {
        const answer = yield* send(path, body(nested(depth)))
        expect({ path, field, depth, status: answer.status }).toEqual({ path, field, depth, status: 400 })
        expect(JSON.parse(answer.text).error).toMatchObject({
          message: TOO_DEEP,
          type: "invalid_request_error",
          param: field
        })
      }
      // One level less is within the limit: not refused for its depth (whatever its fields make of it).
      const within = yield* send(path, body(nested(MAX_JSON_DEPTH - around)))
      expect(within.status, `${field} at ${MAX_JSON_DEPTH - around}`).toBeLessThan(500)
      expect(within.text, `${field} at ${MAX_JSON_DEPTH - around}`).not.toContain(TOO_DEEP)
    }
    // Text that is not JSON, nested too deep, is refused for its depth too; shallow, as not JSON.
    const broken = yield* send("chat/completions", `{"messages":${nested(3_000)}`)
    expect(broken.status).toBe(400)
    expect(JSON.parse(broken.text).error).toMatchObject({ message: TOO_DEEP, param: null })
    const garbage = yield* send("chat/completions", `{"messages":`)
    expect(garbage.status).toBe(400)
    expect(JSON.parse(garbage.text).error.message).toBe("the request body is not JSON")
    const healthy = yield* send("chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
    expect(healthy.status).toBe(200)
    expect(JSON.parse(healthy.text).choices[0].message.content).toBe("ok")
  })

const answerOf = (response: Response) =>
  Effect.promise(async () => ({ status: response.status, text: await response.text() }))

/** A chat request whose one message is `bytes` long. */
const oversized = (bytes: number) =>
  JSON.stringify({ model: "m", messages: [{ role: "user", content: "x".repeat(bytes) }] })

describe("a rollout's endpoint and hostile bodies", () => {
  it.effect("RolloutFetch: a 400 naming the field, at any depth", () =>
    Rollout.run(
      policy,
      Effect.gen(function* () {
        const fetch = yield* RolloutFetch.fetch()
        yield* refusesEveryDeepBody((path, body) =>
          Effect.flatMap(
            Effect.promise(() => fetch(`${RolloutFetch.BASE_URL}/${path}`, { method: "POST", body })),
            answerOf
          )
        )
      })
    )
  )

  it.effect("RolloutFetch: a body over the limit is a 413; one under it is answered", () =>
    Rollout.run(
      policy,
      Effect.gen(function* () {
        const fetch = yield* RolloutFetch.fetch({ maxBodySize: 64 * 1024 })
        const post = (body: string) =>
          Effect.flatMap(
            Effect.promise(() => fetch(`${RolloutFetch.BASE_URL}/chat/completions`, { method: "POST", body })),
            answerOf
          )
        const over = yield* post(oversized(64 * 1024))
        expect(over.status).toBe(413)
        expect(JSON.parse(over.text).error).toMatchObject({
          message: "the request body is larger than 65536 bytes",
          type: "invalid_request_error"
        })
        // Multi-byte text counts in bytes: 30,000 characters of 3 bytes each are over 64 KiB.
        expect(
          (yield* post(JSON.stringify({ model: "m", messages: [{ role: "user", content: "€".repeat(30_000) }] })))
            .status
        ).toBe(413)
        expect((yield* post(oversized(60 * 1024))).status).toBe(200)
      })
    )
  )

  it.effect("the limit follows from the policy's context: 2,048 tokens take 128 KiB; unknown, 4 MiB", () =>
    Effect.gen(function* () {
      const small = { ...policy, contextTokens: 2048 }
      const limit = 2048 * RolloutFetch.BYTES_PER_TOKEN + RolloutFetch.BODY_MARGIN
      expect(RolloutFetch.bodyLimit(small)).toBe(limit)
      expect(RolloutFetch.bodyLimit(policy)).toBe(RolloutFetch.DEFAULT_MAX_BODY_SIZE)
      const statusOf = (rolloutPolicy: typeof policy, body: string, options?: RolloutFetch.Options) =>
        Rollout.run(
          rolloutPolicy,
          Effect.flatMap(RolloutFetch.fetch(options), (fetch) =>
            Effect.promise(() =>
              fetch(`${RolloutFetch.BASE_URL}/chat/completions`, { method: "POST", body }).then((r) => r.status)
            )
          )
        ).pipe(Effect.map((finished) => finished.value))
      // Just over what a 2,048-token context can hold: refused under that policy, answered under one that does not
      // say its context, and under the small one when the surface is given a larger limit.
      expect(yield* statusOf(small, oversized(limit + 1))).toBe(413)
      expect(yield* statusOf(small, oversized(limit - 1024))).toBe(200)
      expect(yield* statusOf(policy, oversized(limit + 1))).toBe(200)
      expect(yield* statusOf(small, oversized(limit + 1), { maxBodySize: 2 * limit })).toBe(200)
    })
  )

  it.layer(RolloutGateway.layer())((it) => {
    it.effect("the gateway: a 40 MB body is a 413, declared or streamed; the rollout and another go on", () =>
      Effect.gen(function* () {
        const healthy = yield* Effect.fork(
          Rollout.run(
            policy,
            RolloutGateway.withEndpoint((endpoint) =>
              Effect.promise(async () => {
                const statuses: Array<number> = []
                for (let i = 0; i < 20; i++) {
                  const response = await fetch(`${endpoint.baseUrl}/chat/completions`, {
                    method: "POST",
                    headers: { authorization: `Bearer ${Redacted.value(endpoint.apiKey)}` },
                    body: oversized(10)
                  })
                  statuses.push(response.status)
                  await response.text()
                }
                return statuses
              })
            )
          )
        )
        const hostile = yield* Rollout.run(
          policy,
          RolloutGateway.withEndpoint((endpoint) =>
            Effect.promise(async () => {
              const url = `${endpoint.baseUrl}/chat/completions`
              const headers = { authorization: `Bearer ${Redacted.value(endpoint.apiKey)}` }
              const big = oversized(40 * 1024 * 1024)
              const declared = await fetch(url, { method: "POST", headers, body: big })
              // A body without a length (chunked), refused once it passes the limit.
              const chunks = new ReadableStream<Uint8Array>({
                start(controller) {
                  const piece = new TextEncoder().encode("x".repeat(1024 * 1024))
                  for (let i = 0; i < 40; i++) controller.enqueue(piece)
                  controller.close()
                }
              })
              const streamed = await fetch(url, {
                method: "POST",
                headers,
                body: chunks,
                duplex: "half"
              } as RequestInit).catch((error: unknown) => error)
              const after = await fetch(url, { method: "POST", headers, body: oversized(10) })
              return {
                declared: { status: declared.status, text: await declared.text() },
                streamed: streamed instanceof Response ? streamed.status : String(streamed),
                after: after.status
              }
            })
          )
        )
        expect(hostile.value.declared.status).toBe(413)
        expect(JSON.parse(hostile.value.declared.text).error.message).toBe(
          "the request body is larger than 4194304 bytes"
        )
        // Refused while it was still being sent, with a 413 the agent reads (the rest is drained, not reset).
        expect(hostile.value.streamed).toBe(413)
        expect(hostile.value.after).toBe(200)
        const statuses = (yield* Fiber.join(healthy)).value
        expect(statuses).toEqual(Array.from({ length: 20 }, () => 200))
      }).pipe(TestServices.provideLive)
    )

    it.effect("the gateway: a 400 naming the field, at any depth", () =>
      Rollout.run(
        policy,
        RolloutGateway.withEndpoint((endpoint) =>
          refusesEveryDeepBody((path, body) =>
            Effect.flatMap(
              Effect.promise(() =>
                fetch(`${endpoint.baseUrl}/${path}`, {
                  method: "POST",
                  headers: {
                    authorization: `Bearer ${Redacted.value(endpoint.apiKey)}`,
                    "content-type": "application/json"
                  },
                  body
                })
              ),
              answerOf
            )
          )
        )
      )
    )
  })
})
