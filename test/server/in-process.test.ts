/**
 * The embedded backend reached in-process (`LocalBackend`'s `fetch`, and its `httpClient`, which `Backend.local`'s
 * clients use): the same answers as over the network, work stopped when its client gives up, its bounds and origin kept, streams whole, no socket opened, and a refused
 * connection's error once the backend has stopped. Sockets are counted with Node's `net.client.socket`
 * diagnostics channel, which every client socket (undici's included) is published on.
 */
import { subscribe, unsubscribe } from "node:diagnostics_channel"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { describe, expect, it, layer } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import OpenAI from "openai"
import * as Backend from "../../src/Backend.js"
import * as TrainingClient from "../../src/client/TrainingClient.js"
import * as LocalBackend from "../../src/LocalBackend.js"
import { BASE_MODEL } from "../../src/local/server/internal/inference.js"
import { API_KEY } from "../support/clients.js"
import { auth, backendWith } from "./support.js"

/** Runs `body`, counting the client sockets opened meanwhile. */
const socketsDuring = <A>(body: () => Promise<A>): Promise<{ readonly value: A; readonly sockets: number }> => {
  let sockets = 0
  const count = () => {
    sockets++
  }
  subscribe("net.client.socket", count)
  return body().then(
    (value) => {
      unsubscribe("net.client.socket", count)
      return { value, sockets }
    },
    (error: unknown) => {
      unsubscribe("net.client.socket", count)
      throw error
    }
  )
}

/** Status, content type and body text of a response (a completion's id and time left out: each has its own). */
const read = async (response: Response) => ({
  status: response.status,
  type: response.headers.get("content-type"),
  text: (await response.text()).replace(/"chatcmpl-[\w-]+"/g, '"chatcmpl-"').replace(/"created":\d+/g, '"created":0')
})

const json = { ...auth, "content-type": "application/json" }

/**
 * Bounds that admit one completion of all the base model's 128 choices x 480 tokens (61,440 tokens, seconds of
 * decoding on a 2-core machine) and nothing beside it: what the tests of work that stops or drains send.
 */
const ROOMY = { maxRequestTokens: 61_440, maxQueuedTokens: 61_440 } as const

/** A backend with {@link ROOMY} bounds in a scope of the test's own (to close in the middle of the test). */
const startRoomy = Effect.gen(function* () {
  const scope = yield* Scope.make()
  const context = yield* Layer.buildWithScope(LocalBackend.layer({ apiKey: Redacted.make(API_KEY), ...ROOMY }), scope)
  return { scope, backend: Context.get(context, LocalBackend.LocalBackend) }
})

/** Requests whose answers do not depend on when they are made (a seeded completion, errors, a list). */
const requests: ReadonlyArray<readonly [string, RequestInit]> = [
  ["/v1/models", { headers: auth }],
  ["/v1/models", {}],
  ["/v1/no-such-route", { headers: auth }],
  ["/v1/health", { method: "DELETE", headers: auth }],
  ["/v1/health", { method: "HEAD", headers: auth }],
  [
    "/v1/chat/completions",
    {
      method: "POST",
      headers: json,
      body: JSON.stringify({ model: BASE_MODEL, messages: [{ role: "user", content: "hi" }], seed: 5, max_tokens: 6 })
    }
  ],
  ["/v1/chat/completions", { method: "POST", headers: json, body: "{not json" }],
  ["/v1/chat/completions", { method: "POST", headers: { ...auth, "content-type": "text/plain" }, body: "{}" }]
]

describe("the embedded backend in-process", () => {
  layer(backendWith({ maxBodySize: 4096 }), { excludeTestServices: true })((it) => {
    it.effect("answers as the network does, and opens no socket", () =>
      Effect.gen(function* () {
        const backend = yield* LocalBackend.LocalBackend
        for (const [path, init] of requests) {
          const wire = yield* Effect.promise(() => socketsDuring(() => fetch(`${backend.url}${path}`, init).then(read)))
          const own = yield* Effect.promise(() =>
            socketsDuring(() => backend.fetch(`${backend.url}${path}`, init).then(read))
          )
          expect(own.value, `${init.method ?? "GET"} ${path}`).toEqual(wire.value)
          expect(own.sockets).toBe(0)
          // The counter counts: the network's first request opened a socket (later ones may reuse it).
          if (path === requests[0]?.[0] && init === requests[0]?.[1]) expect(wire.sockets).toBeGreaterThan(0)
        }
      })
    )

    it.effect("its HttpClient answers as the network does too, streams included, and opens no socket", () =>
      Effect.gen(function* () {
        const backend = yield* LocalBackend.LocalBackend
        const viaClient = (path: string, init: RequestInit) =>
          Effect.gen(function* () {
            const headers = (init.headers ?? {}) as Record<string, string>
            let request = HttpClientRequest.make((init.method ?? "GET") as "GET")(`${backend.url}${path}`).pipe(
              HttpClientRequest.setHeaders(headers)
            )
            if (typeof init.body === "string") {
              request = HttpClientRequest.bodyText(request, init.body, headers["content-type"] ?? "text/plain")
            }
            const response = yield* backend.httpClient.execute(request)
            const text = yield* response.text
            return {
              status: response.status,
              type: response.headers["content-type"] ?? null,
              text: text.replace(/"chatcmpl-[\w-]+"/g, '"chatcmpl-"').replace(/"created":\d+/g, '"created":0')
            }
          }).pipe(Effect.scoped)
        const streamed = {
          method: "POST",
          headers: json,
          body: JSON.stringify({
            model: BASE_MODEL,
            messages: [{ role: "user", content: "hi" }],
            seed: 5,
            max_tokens: 6,
            stream: true
          })
        }
        for (const [path, init] of [...requests, ["/v1/chat/completions", streamed] as const]) {
          const wire = yield* Effect.promise(() => fetch(`${backend.url}${path}`, init).then(read))
          let sockets = 0
          const count = () => {
            sockets++
          }
          subscribe("net.client.socket", count)
          const own = yield* Effect.ensuring(
            viaClient(path, init),
            Effect.sync(() => unsubscribe("net.client.socket", count))
          )
          expect(own, `${init.method ?? "GET"} ${path}`).toEqual(wire)
          expect(sockets).toBe(0)
        }
      })
    )

    it.effect("refuses what fetch refuses: a GET with a body, a header value fetch cannot send", () =>
      Effect.gen(function* () {
        const backend = yield* LocalBackend.LocalBackend
        const refusal = (fetch: typeof globalThis.fetch, init: RequestInit) =>
          Effect.promise(() =>
            fetch(`${backend.url}/v1/models`, init).then(
              () => "answered",
              (error: unknown) => (error as Error).constructor.name
            )
          )
        for (const init of [{ method: "GET", body: "x", headers: auth }, { headers: { ...auth, "x-bad": "a\nb" } }]) {
          expect(yield* refusal(backend.fetch, init)).toBe("TypeError")
          expect(yield* refusal(globalThis.fetch, init)).toBe("TypeError")
        }
      })
    )

    it.effect("keeps the body bound, for bodies of known length and streamed ones", () =>
      Effect.gen(function* () {
        const backend = yield* LocalBackend.LocalBackend
        const big = JSON.stringify({ name: "x".repeat(5000) })
        const post = (body: string | ReadableStream<Uint8Array>) =>
          Effect.promise(() =>
            backend
              .fetch(`${backend.url}/v1/models`, { method: "POST", headers: json, body, duplex: "half" } as RequestInit)
              .then(read)
          )
        const known = yield* post(big)
        expect(known.status).toBe(413)
        expect(JSON.parse(known.text)).toMatchObject({
          error: { code: 413, message: "Request body exceeds the limit of 4096 bytes" }
        })
        const streamed = yield* post(new Blob([big]).stream())
        expect(streamed.status).toBe(413)
      })
    )

    it.effect("an upload's URL names the backend's own origin", () =>
      Effect.gen(function* () {
        const backend = yield* LocalBackend.LocalBackend
        const answer = yield* Effect.promise(() =>
          backend
            .fetch(`${backend.url}/v1/local/files`, {
              method: "POST",
              headers: { ...auth, "content-type": "application/jsonl" },
              body: '{"messages":[]}\n'
            })
            .then((response) => response.json() as Promise<{ readonly url: string }>)
        )
        expect(answer.url).toMatch(new RegExp(`^${backend.url}/v1/local/files/[^/]+/content$`))
        const content = yield* Effect.promise(() => backend.fetch(answer.url, { headers: auth }).then(read))
        expect(content).toMatchObject({ status: 200, text: '{"messages":[]}\n' })
      })
    )

    it.effect("streams a completion to the openai SDK whole, without a socket", () =>
      Effect.gen(function* () {
        const backend = yield* LocalBackend.LocalBackend
        const ask = {
          model: BASE_MODEL,
          messages: [{ role: "user" as const, content: "hello" }],
          seed: 9,
          max_tokens: 12
        }
        const over = (fetch: typeof globalThis.fetch) =>
          socketsDuring(async () => {
            const client = new OpenAI({ apiKey: API_KEY, baseURL: `${backend.url}/v1`, maxRetries: 0, fetch })
            const whole = await client.chat.completions.create(ask)
            let streamed = ""
            let chunks = 0
            for await (const chunk of await client.chat.completions.create({ ...ask, stream: true })) {
              streamed += chunk.choices[0]?.delta.content ?? ""
              chunks++
            }
            return { whole: whole.choices[0]?.message.content, streamed, chunks }
          })
        const own = yield* Effect.promise(() => over(backend.fetch))
        expect(own.sockets).toBe(0)
        expect(own.value.chunks).toBeGreaterThan(2)
        expect(own.value.streamed).toBe(own.value.whole)
        const wire = yield* Effect.promise(() => over(globalThis.fetch))
        expect(wire.value).toEqual(own.value)
      })
    )
  })

  layer(backendWith(ROOMY), { excludeTestServices: true })((it) => {
    it.effect("a request its HttpClient gives up on stops its work (its queued tokens given back)", () =>
      Effect.gen(function* () {
        const backend = yield* LocalBackend.LocalBackend
        const post = (body: object) =>
          backend.httpClient
            .execute(
              HttpClientRequest.post(`${backend.url}/v1/chat/completions`).pipe(
                HttpClientRequest.setHeaders(auth),
                HttpClientRequest.bodyUnsafeJson({
                  model: BASE_MODEL,
                  messages: [{ role: "user", content: "hi" }],
                  ...body
                })
              )
            )
            .pipe(
              Effect.map((response) => response.status),
              Effect.scoped
            )
        // 61,440 tokens, all the queue holds: 2.5 s of decoding on a 2-core machine, where a probe is admitted
        // within milliseconds of the large one's interruption (the next decoding step gives its tokens back).
        // Sent again while refused: a probe may hold a reservation when it arrives.
        const large = yield* Effect.fork(
          post({ n: 128, max_tokens: 480, ignore_eos: true }).pipe(Effect.repeat({ while: (code) => code === 429 }))
        )
        let status = 200
        // A pause between probes: the large one's retries find the queue free.
        for (let attempt = 0; attempt < 200 && status !== 429; attempt++) {
          yield* Effect.sleep("5 millis")
          status = yield* post({ max_tokens: 1 })
        }
        expect(status).toBe(429)
        yield* Fiber.interrupt(large)
        const started = Date.now()
        while (status === 429 && Date.now() - started < 500) status = yield* post({ max_tokens: 1 })
        expect(status).toBe(200)
      })
    )
  })

  it.live("a fetch aborted in flight rejects with an AbortError, as fetch does, and its work stops", () =>
    Effect.gen(function* () {
      const { scope, backend } = yield* startRoomy
      const ask = (body: object, signal?: AbortSignal) =>
        backend.fetch(`${backend.url}/v1/chat/completions`, {
          method: "POST",
          headers: json,
          body: JSON.stringify({ model: BASE_MODEL, messages: [{ role: "user", content: "hi" }], ...body }),
          ...(signal === undefined ? {} : { signal })
        })
      const abort = new AbortController()
      const large = ask({ n: 128, max_tokens: 480, ignore_eos: true }, abort.signal).then(
        () => "answered",
        (error: unknown) => (error as Error).name
      )
      yield* Effect.sleep("20 millis")
      expect((yield* Effect.promise(() => ask({ max_tokens: 1 }))).status).toBe(429)
      abort.abort()
      expect(yield* Effect.promise(() => large)).toBe("AbortError")
      let status = 429
      const started = Date.now()
      while (status === 429 && Date.now() - started < 500) {
        status = (yield* Effect.promise(() => ask({ max_tokens: 1 }))).status
      }
      expect(status).toBe(200)
      const already = yield* Effect.promise(() =>
        ask({ max_tokens: 1 }, AbortSignal.abort()).then(
          () => "answered",
          (error: unknown) => (error as Error).name
        )
      )
      expect(already).toBe("AbortError")
      yield* Scope.close(scope, Exit.void)
    })
  )

  it.live("a request in flight when the backend stops is answered before it stops, as Node drains its own", () =>
    Effect.gen(function* () {
      const { scope, backend } = yield* startRoomy
      const body = JSON.stringify({
        model: BASE_MODEL,
        messages: [{ role: "user", content: "hi" }],
        // Seconds of decoding: longer than the rest of the backend takes to stop.
        n: 128,
        max_tokens: 480,
        ignore_eos: true
      })
      let settled = false
      const inFlight = backend
        .fetch(`${backend.url}/v1/chat/completions`, { method: "POST", headers: json, body })
        .then(async (response) => ({
          status: response.status,
          body: (await response.json()) as { choices: Array<unknown> }
        }))
        .finally(() => {
          settled = true
        })
      yield* Effect.sleep("20 millis")
      expect(settled).toBe(false)
      yield* Scope.close(scope, Exit.void)
      // Answered before the backend finished stopping.
      expect(settled).toBe(true)
      const answered = yield* Effect.promise(() => inFlight)
      expect(answered.status).toBe(200)
      expect(answered.body.choices).toHaveLength(128)
    })
  )

  it.live("once stopped, it fails as a refused connection does", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(LocalBackend.layer({ apiKey: Redacted.make(API_KEY) }), scope)
      const backend = Context.get(context, LocalBackend.LocalBackend)
      const up = yield* Effect.promise(() => backend.fetch(`${backend.url}/v1/health`, { headers: auth }))
      expect(up.status).toBe(200)
      yield* Scope.close(scope, Exit.void)
      const down = yield* Effect.flip(
        Effect.tryPromise({ try: () => backend.fetch(`${backend.url}/v1/health`, { headers: auth }), catch: (e) => e })
      )
      expect(down).toBeInstanceOf(TypeError)
      expect((down as { readonly cause?: { readonly code?: string } }).cause?.code).toBe("ECONNREFUSED")
    })
  )

  it.live("Backend.local's clients reach it without a socket", () =>
    Effect.gen(function* () {
      const client = yield* TrainingClient.TrainingClient
      const runtime = yield* Effect.runtime<never>()
      const { value, sockets } = yield* Effect.promise(() =>
        socketsDuring(() => Effect.runPromise(Effect.provide(client.listBaseModels, runtime)))
      )
      expect(value).toContain(BASE_MODEL)
      expect(sockets).toBe(0)
    }).pipe(Effect.provide(Backend.local({ apiKey: Redacted.make(API_KEY) })))
  )
})
