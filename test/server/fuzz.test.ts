/**
 * A seeded, bounded fuzz of the embedded backend (issue 18): requests over every route of the api, with
 * bodies generated from each route's payload schema (effect's `Arbitrary`) and then mutated the ways careless
 * and hostile clients do (a field dropped or retyped, values nested deep, huge numbers and strings, bytes
 * that are not UTF-8, truncated JSON, other media types, multipart, chunked uploads). Every request holds
 * the key, so every one reaches the routes. Asserts: no 5xx, no request unanswered within its time limit,
 * no error body with a stack trace or the key, and the server healthy afterwards.
 *
 * The seed is fixed, so a failure reproduces; `FUZZ_SEED` and `FUZZ_REQUESTS` run it wider by hand.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import { describe, expect, it } from "@effect/vitest"
import * as Arbitrary from "effect/Arbitrary"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import type * as Schema from "effect/Schema"
import * as LocalBackend from "../../src/LocalBackend.js"
import { LocalApi } from "../../src/local/server/LocalApi.js"
import { API_KEY } from "../support/clients.js"
import { clean } from "./support.js"

const SEED = Number(process.env.FUZZ_SEED ?? 20261124)
const REQUESTS = Number(process.env.FUZZ_REQUESTS ?? 600)
/** How long one request may take before it counts as a hang. */
const REQUEST_LIMIT_MS = 10_000

/** mulberry32: a small seeded generator, so the run is the same every time. */
const generator = (seed: number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

interface Endpoint {
  readonly method: string
  readonly path: string
  readonly payload: Option.Option<unknown>
}

const endpoints: Array<Endpoint> = []
HttpApi.reflect(LocalApi, {
  onGroup: () => {},
  onEndpoint: ({ endpoint }) => {
    endpoints.push({ method: endpoint.method, path: endpoint.path, payload: endpoint.payloadSchema })
  }
})

/** Samples of a route's valid payloads, from its schema (none when the schema has no arbitrary). */
const samplesOf = (schema: unknown, seed: number): ReadonlyArray<unknown> => {
  try {
    return FastCheck.sample(Arbitrary.make(schema as Schema.Schema<unknown>), { seed, numRuns: 8 })
  } catch {
    return []
  }
}

type Random = () => number
const pick = <A>(random: Random, items: ReadonlyArray<A>): A => items[Math.floor(random() * items.length)] as A

const HOSTILE_VALUES: ReadonlyArray<unknown> = [
  null,
  -1,
  0,
  1e308,
  -1e308,
  2 ** 63,
  1_000_000_000,
  "",
  "x".repeat(100_000),
  "\u0000\uffff\ud800",
  [],
  {},
  true,
  "NaN",
  "../../../../etc/passwd",
  "file:///etc/passwd",
  "http://127.0.0.1:1/",
  { $where: "1" }
]

/** JSON text nested `depth` deep, arrays and objects in turn (written out: `JSON.stringify` would recurse). */
const nested = (depth: number): string => {
  let open = ""
  let close = ""
  for (let i = 0; i < depth; i++) {
    open += i % 2 === 0 ? "[" : '{"a":'
    close = (i % 2 === 0 ? "]" : "}") + close
  }
  return `${open}1${close}`
}

/** One way or another, change a value: a field dropped, retyped or set to a hostile value. */
const mutate = (random: Random, value: unknown, depth = 0): unknown => {
  if (value === null || typeof value !== "object" || depth > 6) return pick(random, HOSTILE_VALUES)
  if (Array.isArray(value)) {
    if (value.length === 0 || random() < 0.3) return [...value, pick(random, HOSTILE_VALUES)]
    const i = Math.floor(random() * value.length)
    return value.map((v, j) => (j === i ? mutate(random, v, depth + 1) : v))
  }
  const record = { ...(value as Record<string, unknown>) }
  const keys = Object.keys(record)
  const roll = random()
  if (keys.length === 0 || roll < 0.15) record[`unknown_${Math.floor(random() * 100)}`] = pick(random, HOSTILE_VALUES)
  else if (roll < 0.35) delete record[pick(random, keys)]
  else {
    const key = pick(random, keys)
    record[key] = random() < 0.5 ? mutate(random, record[key], depth + 1) : pick(random, HOSTILE_VALUES)
  }
  return record
}

interface Body {
  readonly contentType: string | undefined
  readonly body: RequestInit["body"]
  readonly kind: string
}

const json = (value: unknown, kind: string): Body => ({
  contentType: "application/json",
  body: JSON.stringify(value),
  kind
})

/** A body for a request: valid, mutated, or hostile at the byte level. */
const bodyFor = (random: Random, samples: ReadonlyArray<unknown>): Body => {
  const sample = samples.length > 0 ? pick(random, samples) : {}
  const roll = random()
  if (roll < 0.2) return json(sample, "valid")
  if (roll < 0.55) return json(mutate(random, mutate(random, sample)), "mutated")
  if (roll < 0.6)
    return { contentType: "application/json", body: nested(100 + Math.floor(random() * 5_000)), kind: "deep" }
  if (roll < 0.65)
    return { contentType: "application/json", body: JSON.stringify(sample).slice(0, -3), kind: "truncated" }
  if (roll < 0.7)
    return { contentType: "application/json", body: new Uint8Array([0x7b, 0xff, 0xfe, 0x22, 0x7d]), kind: "bytes" }
  if (roll < 0.75) {
    const form = new FormData()
    form.append("x", "1")
    if (random() < 0.5) form.append("file", new Blob(["{}"]), "f.json")
    return { contentType: undefined, body: form, kind: "multipart" }
  }
  if (roll < 0.8)
    return { contentType: "multipart/form-data; boundary=zz", body: "--zz\r\nbroken", kind: "bad-multipart" }
  if (roll < 0.85)
    return {
      contentType: pick(random, ["text/plain", "application/x-www-form-urlencoded", "application/xml"]),
      body: "a=1",
      kind: "media-type"
    }
  if (roll < 0.9) return { contentType: "application/json", body: "", kind: "empty" }
  if (roll < 0.95) {
    // A chunked upload: a stream body has no content-length.
    const text = JSON.stringify(mutate(random, sample))
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(text))
        controller.close()
      }
    })
    return { contentType: "application/json", body: stream, kind: "chunked" }
  }
  return { contentType: "application/json", body: JSON.stringify(pick(random, HOSTILE_VALUES)), kind: "scalar" }
}

/** A concrete path for a route: its parameters filled with plausible or hostile ids. */
const pathFor = (random: Random, path: string) =>
  path.replace(/:[A-Za-z_]+/g, () =>
    encodeURIComponent(pick(random, ["1", "0", "abc", "x".repeat(300), "..", "%00", crypto.randomUUID(), "-1"]))
  )

describe("fuzz: no input answers 5xx, hangs, or leaves the server unhealthy", () => {
  // Small bounds on sampling, so a valid chat completion the fuzz makes up stays short.
  const backend = LocalBackend.layer({
    apiKey: Redacted.make(API_KEY),
    maxBodySize: 1024 * 1024,
    maxRequestTokens: 256,
    maxQueuedTokens: 2_048
  })
  it.layer(backend, { timeout: 60_000 })("on the real server", (it) => {
    it.effect(
      `${REQUESTS} seeded requests over ${endpoints.length} routes`,
      () =>
        Effect.gen(function* () {
          const { url } = yield* LocalBackend.LocalBackend
          const random = generator(SEED)
          const samples = new Map(
            endpoints.map((e, i) => [
              e,
              Option.match(e.payload, { onNone: () => [], onSome: (s) => samplesOf(s, SEED + i) })
            ])
          )
          const failures: Array<string> = []
          const kinds = new Map<string, number>()
          const send = async (i: number) => {
            const endpoint = pick(random, endpoints)
            const body = ["GET", "HEAD", "DELETE"].includes(endpoint.method)
              ? undefined
              : bodyFor(random, samples.get(endpoint) ?? [])
            const path = pathFor(random, endpoint.path)
            const headers: Record<string, string> = { authorization: `Bearer ${API_KEY}` }
            if (body?.contentType !== undefined) headers["content-type"] = body.contentType
            const what = `#${i} ${endpoint.method} ${path.slice(0, 80)} (${body?.kind ?? "no body"})`
            kinds.set(body?.kind ?? "none", (kinds.get(body?.kind ?? "none") ?? 0) + 1)
            try {
              const response = await fetch(`${url}${path}`, {
                method: endpoint.method,
                headers,
                body: body?.body,
                signal: AbortSignal.timeout(REQUEST_LIMIT_MS),
                ...(body?.body instanceof ReadableStream ? { duplex: "half" } : {})
              } as RequestInit)
              const text = await response.text()
              if (response.status >= 500) failures.push(`${what}: ${response.status} ${text.slice(0, 200)}`)
              if (!clean(text)) failures.push(`${what}: unclean body ${text.slice(0, 200)}`)
            } catch (error) {
              failures.push(`${what}: ${error instanceof Error ? error.name : "error"} ${String(error).slice(0, 200)}`)
            }
          }
          yield* Effect.promise(async () => {
            // Four at a time, as a few concurrent clients would.
            for (let i = 0; i < REQUESTS; i += 4) {
              await Promise.all([0, 1, 2, 3].map((j) => (i + j < REQUESTS ? send(i + j) : Promise.resolve())))
            }
          })
          expect(failures).toEqual([])
          // Every kind of body was tried.
          expect([...kinds.keys()].sort()).toEqual(
            [
              "bad-multipart",
              "bytes",
              "chunked",
              "deep",
              "empty",
              "media-type",
              "multipart",
              "mutated",
              "none",
              "scalar",
              "truncated",
              "valid"
            ].sort()
          )
          const health = yield* Effect.promise(() =>
            fetch(`${url}/v1/health`, { headers: { authorization: `Bearer ${API_KEY}` } })
          )
          expect(health.status).toBe(200)
        }),
      120_000
    )
  })
})
