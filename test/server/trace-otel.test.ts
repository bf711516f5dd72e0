/**
 * The OTel export of the local trace server (`/otel/v1/traces`, `/otel/v1/trace`), on the real server.
 *
 * The protobuf and JSON bodies come from an independent encoder: `@effect/opentelemetry`'s `OtlpTracer` with
 * `OtlpSerialization.layerProtobuf` / `layerJson`, exporting real `Effect.withSpan` spans over HTTP; the calls
 * are read back through `TraceClient`. The decoder's field numbers are also checked directly against that
 * encoder's output for a request that sets every field. Hand-built OTLP/JSON covers the service's conventional
 * attributes, rejected spans and bad input.
 */
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import * as OtlpTracer from "@effect/opentelemetry/OtlpTracer"
import type * as HttpBody from "@effect/platform/HttpBody"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { describe, expect, it, layer } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import type * as Tracer from "effect/Tracer"
import type { Call } from "../../src/api/TraceCall.js"
import * as TraceClient from "../../src/client/TraceClient.js"
import * as LocalBackend from "../../src/LocalBackend.js"
import * as Otlp from "../../src/local/server/internal/trace/otlp.js"
import { API_KEY } from "../support/clients.js"
import { Backend, call, clean } from "./support.js"

const bearer = `Bearer ${API_KEY}`

/** A trace client against the running backend. */
const traceClient = Effect.flatMap(LocalBackend.LocalBackend, ({ url }) =>
  TraceClient.make({ apiKey: Redacted.make(API_KEY), baseUrl: url })
)

/** The live calls of a trace, through `TraceClient`. */
const callsOf = (projectId: string, traceId: string) =>
  Effect.flatMap(traceClient, (client) =>
    client.callsStreamQuery({ project_id: projectId, filter: { trace_ids: [traceId] } }).pipe(Stream.runCollect)
  ).pipe(
    Effect.map((calls) => new Map(Chunk.toReadonlyArray(calls).map((c): [string, Call] => [c.op_name, c]))),
    Effect.orDie
  )

/** Unix nanoseconds as ISO 8601 to the microsecond (the digits below a microsecond dropped). */
const isoOf = (nanos: bigint) =>
  `${new Date(Number(nanos / 1_000_000n)).toISOString().slice(0, 23)}${((nanos / 1000n) % 1000n)
    .toString()
    .padStart(3, "0")}Z`

const timesOf = (span: Tracer.Span) => {
  if (span.status._tag !== "Ended") throw new Error(`span ${span.name} has not ended`)
  return { started_at: isoOf(span.status.startTime), ended_at: isoOf(span.status.endTime) }
}

const noStack = { captureStackTrace: false } as const

/**
 * A small traced program: a root with the service's conventional attributes, a child with plain attributes of
 * every kind and a grandchild, and a failing child. Each span is recorded by name as it runs.
 */
const program = (spans: Map<string, Tracer.Span>) => {
  const mark = Effect.flatMap(Effect.orDie(Effect.currentSpan), (span) =>
    Effect.sync(() => {
      spans.set(span.name, span)
    })
  )
  const leaf = Effect.zipRight(mark, Effect.sleep("2 millis")).pipe(
    Effect.withSpan("otel.leaf", { attributes: { step: 3 }, ...noStack })
  )
  const generic = Effect.zipRight(mark, leaf).pipe(
    Effect.withSpan("otel.generic", {
      attributes: { "app.label": "alpha", "app.count": 3, "app.ratio": 0.25, "app.ok": true, "app.tags": ["x", "y"] },
      ...noStack
    })
  )
  const failing = Effect.zipRight(mark, Effect.fail(new Error("boom"))).pipe(
    Effect.withSpan("otel.failing", { attributes: { step: 2 }, ...noStack }),
    Effect.ignore
  )
  return Effect.all([mark, generic, failing], { discard: true }).pipe(
    Effect.withSpan("otel.root", {
      attributes: {
        "input.value": JSON.stringify({ question: "2+2" }),
        "output.value": "4",
        "gen_ai.request.model": "tiny-policy",
        "gen_ai.usage.prompt_tokens": 7,
        "gen_ai.usage.completion_tokens": 3
      },
      ...noStack
    })
  )
}

/** Runs the program under an `OtlpTracer` exporting to `path`; closing its scope flushes the spans. */
const exportProgram = (
  path: string,
  serialization: Layer.Layer<OtlpSerialization.OtlpSerialization>,
  options: { readonly headers: Record<string, string>; readonly resource?: Record<string, unknown> }
) =>
  Effect.gen(function* () {
    const { url } = yield* LocalBackend.LocalBackend
    const spans = new Map<string, Tracer.Span>()
    const tracer = OtlpTracer.layer({
      url: `${url}${path}`,
      headers: options.headers,
      resource: { serviceName: "otel-test", attributes: options.resource ?? {} },
      exportInterval: "1 hour",
      shutdownTimeout: "30 seconds"
    }).pipe(Layer.provide(serialization), Layer.provide(NodeHttpClient.layerUndici))
    yield* program(spans).pipe(Effect.provide(tracer))
    return spans
  })

/** Asserts every field of the mapping for the program's four spans. */
const checkProgram = (projectId: string, spans: Map<string, Tracer.Span>) =>
  Effect.gen(function* () {
    const root = spans.get("otel.root")
    const generic = spans.get("otel.generic")
    const leaf = spans.get("otel.leaf")
    const failing = spans.get("otel.failing")
    if (root === undefined || generic === undefined || leaf === undefined || failing === undefined) {
      throw new Error("the program did not run every span")
    }
    const calls = yield* callsOf(projectId, root.traceId)
    expect([...calls.keys()].sort()).toEqual(["otel.failing", "otel.generic", "otel.leaf", "otel.root"])
    for (const span of [root, generic, leaf, failing]) {
      const c = calls.get(span.name)
      expect(c?.id).toBe(span.spanId)
      expect(c?.id).toMatch(/^[0-9a-f]{16}$/)
      expect(c?.trace_id).toBe(root.traceId)
      expect(c?.trace_id).toMatch(/^[0-9a-f]{32}$/)
      expect(c?.project_id).toBe(projectId)
      expect({ started_at: c?.started_at, ended_at: c?.ended_at }).toEqual(timesOf(span))
    }
    const rootCall = calls.get("otel.root")
    expect(rootCall?.parent_id ?? null).toBeNull()
    expect(calls.get("otel.generic")?.parent_id).toBe(root.spanId)
    expect(calls.get("otel.failing")?.parent_id).toBe(root.spanId)
    expect(calls.get("otel.leaf")?.parent_id).toBe(generic.spanId)

    // The root: the conventional keys of the service fill inputs, output, attributes and usage.
    expect(rootCall?.inputs).toEqual({ "input.value": { question: "2+2" } })
    expect(rootCall?.output).toEqual({ "output.value": "4" })
    expect(rootCall?.attributes).toEqual({ model: "tiny-policy", model_parameters: { model: "tiny-policy" } })
    expect(rootCall?.summary?.usage).toEqual({
      "tiny-policy": { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 }
    })
    expect(rootCall?.exception ?? null).toBeNull()
    expect(rootCall?.summary?.weave?.status).toBe("descendant_error")

    // Plain attributes of every kind, nested by their dotted keys.
    const genericCall = calls.get("otel.generic")
    expect(genericCall?.attributes).toEqual({
      app: { label: "alpha", count: 3, ratio: 0.25, ok: true, tags: ["x", "y"] }
    })
    expect(genericCall?.inputs).toEqual({})
    expect(genericCall?.output).toEqual({})
    expect(genericCall?.summary?.usage).toBeUndefined()
    expect(genericCall?.summary?.weave?.status).toBe("success")
    expect(calls.get("otel.leaf")?.attributes).toEqual({ step: 3 })
    expect(calls.get("otel.leaf")?.exception ?? null).toBeNull()

    // The error status becomes the exception, with its message.
    const failingCall = calls.get("otel.failing")
    expect(failingCall?.exception).toBe("boom")
    expect(failingCall?.attributes.step).toBe(2)
    expect(failingCall?.summary?.weave?.status).toBe("error")

    // call/read answers the same call.
    const client = yield* traceClient
    const read = yield* Effect.orDie(client.callRead({ project_id: projectId, id: leaf.spanId }))
    expect(read.call?.op_name).toBe("otel.leaf")
    expect(read.call?.parent_id).toBe(generic.spanId)
  })

/** A hand-built OTLP/JSON span. */
const jsonSpan = (fields: Record<string, unknown>) => ({
  traceId: "5b8efff798038103d269b633813fc60c",
  startTimeUnixNano: "1767225600000001999",
  endTimeUnixNano: "1767225602500000000",
  kind: 1,
  ...fields
})

const stringAttr = (key: string, value: string) => ({ key, value: { stringValue: value } })

const postJson = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  call(path, {
    method: "POST",
    headers: { authorization: bearer, "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body)
  })

const postProtobuf = (path: string, bytes: Uint8Array, headers: Record<string, string> = {}) =>
  call(path, {
    method: "POST",
    headers: { authorization: bearer, "content-type": "application/x-protobuf", ...headers },
    body: bytes
  })

const reasonOf = (json: unknown) => (json as { reason?: unknown }).reason

describe("trace OTel export", () => {
  // Live services: the exporter and the clients wait on the real clock.
  layer(Layer.merge(Backend, NodeHttpClient.layerUndici), { timeout: "60 seconds", excludeTestServices: true })(
    "on the real server",
    (it) => {
      it.effect(
        "protobuf from OtlpTracer (project_id header): every span becomes a call, every field mapped",
        () =>
          Effect.gen(function* () {
            const project = "otel/protobuf"
            const spans = yield* exportProgram("/otel/v1/traces", OtlpSerialization.layerProtobuf, {
              headers: { authorization: bearer, project_id: project }
            })
            yield* checkProgram(project, spans)
          }),
        60_000
      )

      it.effect(
        "JSON from OtlpTracer (wandb.entity/wandb.project resource attributes): the same mapping",
        () =>
          Effect.gen(function* () {
            const spans = yield* exportProgram("/otel/v1/traces", OtlpSerialization.layerJson, {
              headers: { authorization: `Basic ${Buffer.from(`api:${API_KEY}`).toString("base64")}` },
              resource: { "wandb.entity": "otel", "wandb.project": "json" }
            })
            yield* checkProgram("otel/json", spans)
          }),
        60_000
      )

      it.effect(
        "/otel/v1/trace (singular) answers the same",
        () =>
          Effect.gen(function* () {
            const project = "otel/singular"
            const spans = yield* exportProgram("/otel/v1/trace", OtlpSerialization.layerProtobuf, {
              headers: { authorization: bearer, project_id: project }
            })
            yield* checkProgram(project, spans)
            const bodyOf = (spanId: string, name: string) => ({
              resourceSpans: [{ scopeSpans: [{ spans: [jsonSpan({ spanId, name })] }] }]
            })
            const singular = yield* postJson("/otel/v1/trace", bodyOf("1111111111111111", "sent-singular"), {
              project_id: project
            })
            const plural = yield* postJson("/otel/v1/traces", bodyOf("2222222222222222", "sent-plural"), {
              project_id: project
            })
            expect([singular.status, singular.json]).toEqual([200, {}])
            expect([plural.status, plural.json]).toEqual([200, {}])
            const calls = yield* callsOf(project, "5b8efff798038103d269b633813fc60c")
            expect([...calls.keys()].sort()).toEqual(["sent-plural", "sent-singular"])
            expect(calls.get("sent-singular")?.id).toBe("1111111111111111")
          }),
        60_000
      )

      it.effect("the service's conventions: prompts, completions, usage, wandb keys, times to the microsecond", () =>
        Effect.gen(function* () {
          const project = "otel/conventions"
          const traceId = "0af7651916cd43dd8448eb211c80319c"
          const body = {
            resourceSpans: [
              {
                resource: { attributes: [stringAttr("service.name", "svc")] },
                scopeSpans: [
                  {
                    scope: { name: "hand" },
                    spans: [
                      jsonSpan({
                        traceId,
                        spanId: "B7AD6B7169203331",
                        parentSpanId: "",
                        name: "chat",
                        attributes: [
                          stringAttr("gen_ai.prompt.0.role", "user"),
                          stringAttr("gen_ai.prompt.0.content", "hi"),
                          stringAttr("gen_ai.prompt.1.role", "assistant"),
                          stringAttr("gen_ai.prompt.1.content", "hello"),
                          stringAttr("gen_ai.completion.0.content", "bye"),
                          stringAttr("gen_ai.system", "local"),
                          stringAttr("gen_ai.response.model", "tiny"),
                          { key: "gen_ai.usage.input_tokens", value: { intValue: "12" } },
                          { key: "gen_ai.usage.output_tokens", value: { stringValue: "5" } },
                          stringAttr("wandb.display_name", "A chat"),
                          stringAttr("wandb.thread_id", "thread-1"),
                          { key: "wandb.is_turn", value: { boolValue: true } },
                          stringAttr("wandb.wb_run_id", "run7"),
                          { key: "wandb.wb_run_step", value: { intValue: 4 } },
                          stringAttr("wandb.attributes", JSON.stringify({ env: "test" }))
                        ],
                        status: { code: "STATUS_CODE_OK" }
                      }),
                      jsonSpan({
                        traceId,
                        spanId: "00f067aa0ba902b7",
                        parentSpanId: "b7ad6b7169203331",
                        name: "tool",
                        kind: "SPAN_KIND_CLIENT",
                        attributes: [
                          stringAttr("input", JSON.stringify({ x: 1, y: [2, 3] })),
                          { key: "output", value: { doubleValue: 1.5 } },
                          { key: "neg", value: { intValue: "-9007199254740993" } }
                        ],
                        status: { code: 2, message: "tool failed" }
                      })
                    ]
                  }
                ]
              }
            ]
          }
          const reply = yield* postJson("/otel/v1/traces", body, { project_id: project })
          expect([reply.status, reply.json]).toEqual([200, {}])
          const calls = yield* callsOf(project, traceId)
          const chat = calls.get("chat")
          expect(chat?.id).toBe("b7ad6b7169203331")
          expect(chat?.parent_id ?? null).toBeNull()
          expect(chat?.started_at).toBe("2026-01-01T00:00:00.000001Z")
          expect(chat?.ended_at).toBe("2026-01-01T00:00:02.500000Z")
          expect(chat?.inputs).toEqual({
            "gen_ai.prompt": [
              { role: "user", content: "hi" },
              { role: "assistant", content: "hello" }
            ]
          })
          expect(chat?.output).toEqual({ "gen_ai.completion": [{ content: "bye" }] })
          expect(chat?.attributes).toEqual({ system: "local", model: "tiny", env: "test" })
          expect(chat?.summary?.usage).toEqual({ tiny: { input_tokens: 12, output_tokens: 5, total_tokens: 17 } })
          expect(chat?.display_name).toBe("A chat")
          expect(chat?.thread_id).toBe("thread-1")
          expect(chat?.turn_id).toBe("b7ad6b7169203331")
          expect(chat?.wb_run_id).toBe(`${project}:run7`)
          expect(chat?.wb_run_step).toBe(4)
          expect(chat?.exception ?? null).toBeNull()
          expect(chat?.summary?.weave?.latency_ms).toBe(2500)

          const tool = calls.get("tool")
          expect(tool?.parent_id).toBe("b7ad6b7169203331")
          expect(tool?.inputs).toEqual({ x: 1, y: [2, 3] })
          expect(tool?.output).toBe(1.5)
          expect(tool?.attributes).toEqual({})
          expect(tool?.exception).toBe("tool failed")
          expect(tool?.summary?.weave?.status).toBe("error")
        })
      )

      it.effect("rejected spans: bad ids, conflicting attribute keys, a resource without a project", () =>
        Effect.gen(function* () {
          const traceId = "4bf92f3577b34da6a3ce929d0e0e4736"
          const good = jsonSpan({ traceId, spanId: "a000000000000001", name: "kept" })
          const body = {
            resourceSpans: [
              {
                resource: { attributes: [stringAttr("wandb.entity", "otel"), stringAttr("wandb.project", "partial")] },
                scopeSpans: [
                  {
                    spans: [
                      good,
                      jsonSpan({ traceId: "abc", spanId: "a000000000000002", name: "short-trace" }),
                      jsonSpan({ traceId, spanId: "0000000000000000", name: "zero-span" }),
                      jsonSpan({
                        traceId,
                        spanId: "a000000000000003",
                        name: "conflict",
                        attributes: [stringAttr("a", "x"), stringAttr("a.b", "y")]
                      })
                    ]
                  }
                ]
              },
              { scopeSpans: [{ spans: [jsonSpan({ traceId, spanId: "a000000000000004", name: "nowhere" })] }] }
            ]
          }
          const reply = yield* postJson("/otel/v1/traces", body)
          expect(reply.status).toBe(200)
          const partial = (reply.json as { partial_success: { rejected_spans: number; error_message: string } })
            .partial_success
          expect(partial.rejected_spans).toBe(4)
          const messages = partial.error_message.split("; ")
          expect(messages).toHaveLength(4)
          expect(messages[0]).toMatch(/^Rejected span \(name='short-trace' trace_id='abc' .*\): trace_id/)
          expect(messages[1]).toMatch(/^Rejected span \(name='zero-span' .*\): span_id/)
          expect(messages[2]).toMatch(/^Rejected span \(name='conflict' .*\): Invalid attribute structure.*'a'/)
          expect(messages[3]).toMatch(/^Rejected span \(name='nowhere' .*\): Missing project/)
          const calls = yield* callsOf("otel/partial", traceId)
          expect([...calls.keys()]).toEqual(["kept"])
        })
      )

      it.effect("empty requests answer {}", () =>
        Effect.gen(function* () {
          const json = yield* postJson("/otel/v1/traces", {})
          expect([json.status, json.json]).toEqual([200, {}])
          const noSpans = yield* postJson("/otel/v1/traces", { resourceSpans: [{ scopeSpans: [{}] }] })
          expect([noSpans.status, noSpans.json]).toEqual([200, {}])
          const protobuf = yield* postProtobuf("/otel/v1/traces", new Uint8Array(0))
          expect([protobuf.status, protobuf.json]).toEqual([200, {}])
        })
      )

      it.effect(
        "bad input is 400 {reason}: undecodable protobuf, JSON of the wrong shape or not JSON, no project",
        () =>
          Effect.gen(function* () {
            // Field 1 (resource_spans), length-delimited, claiming 255 bytes that are not there.
            const truncated = yield* postProtobuf("/otel/v1/traces", new Uint8Array([0x0a, 0xff, 0x01, 0x0a]), {
              project_id: "otel/bad"
            })
            expect(truncated.status).toBe(400)
            expect(reasonOf(truncated.json)).toMatch(/^Invalid OTLP protobuf ExportTraceServiceRequest: /)
            // Wire type 7 does not exist.
            const wireType = yield* postProtobuf("/otel/v1/traces", new Uint8Array([0x0f, 0x01]), {
              project_id: "otel/bad"
            })
            expect(wireType.status).toBe(400)
            expect(reasonOf(wireType.json)).toMatch(/protobuf/)

            const cases: ReadonlyArray<readonly [unknown, RegExp]> = [
              [{ resourceSpans: 5 }, /resourceSpans: expected an array/],
              [[1, 2], /the body: expected an object/],
              [
                { resourceSpans: [{ scopeSpans: [{ spans: [{ spanId: "a000000000000001", name: 7 }] }] }] },
                /resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[0\]\.name: expected a string/
              ],
              [
                {
                  resourceSpans: [
                    { scopeSpans: [{ spans: [jsonSpan({ spanId: "a0", name: "x", kind: "SIDEWAYS" })] }] }
                  ]
                },
                /spans\[0\]\.kind: expected one of SPAN_KIND_UNSPECIFIED/
              ],
              [
                { resourceSpans: [{ scopeSpans: [{ spans: [jsonSpan({ startTimeUnixNano: "soon", name: "x" })] }] }] },
                /spans\[0\]\.startTimeUnixNano: expected an integer/
              ]
            ]
            for (const [body, reason] of cases) {
              const reply = yield* postJson("/otel/v1/traces", body, { project_id: "otel/bad" })
              expect(reply.status).toBe(400)
              expect(reasonOf(reply.json)).toMatch(/^Invalid OTLP JSON ExportTraceServiceRequest: /)
              expect(reasonOf(reply.json)).toMatch(reason)
              expect(clean(reply.text)).toBe(true)
            }

            const text = yield* call("/otel/v1/traces", {
              method: "POST",
              headers: { authorization: bearer, "content-type": "text/plain", project_id: "otel/bad" },
              body: "{}"
            })
            expect(text.status).toBe(400)
            expect(reasonOf(text.json)).toMatch(/^Unsupported Content-Type text\/plain/)
            const notJson = yield* call("/otel/v1/traces", {
              method: "POST",
              headers: { authorization: bearer, "content-type": "application/json", project_id: "otel/bad" },
              body: '{"resourceSpans": ['
            })
            expect(notJson.status).toBe(400)
            expect(reasonOf(notJson.json)).toMatch(/^Invalid JSON body/)

            const spans = {
              resourceSpans: [{ scopeSpans: [{ spans: [jsonSpan({ spanId: "a0000000000000f1", name: "x" })] }] }]
            }
            const missing = yield* postJson("/otel/v1/traces", spans)
            expect(missing.status).toBe(400)
            expect(reasonOf(missing.json)).toMatch(/^Missing project: .*project_id.*wandb\.entity.*wandb\.project/)
            const malformed = yield* postJson("/otel/v1/traces", spans, { project_id: "no-slash" })
            expect(malformed.status).toBe(400)
            expect(reasonOf(malformed.json)).toMatch(/project_id/)
            expect(clean(missing.text) && clean(malformed.text)).toBe(true)
          })
      )

      it.effect("TraceClient.otelExportTrace sends the project of resources without one as project_id", () =>
        Effect.gen(function* () {
          const client = yield* traceClient
          const span = {
            traceId: "5b8efff798038103d269b633813fc60c",
            spanId: "c0000000000000a1",
            name: "client.span",
            startTimeUnixNano: "1767225600000001999",
            endTimeUnixNano: "1767225602500000000"
          }
          const request = { resourceSpans: [{ scopeSpans: [{ spans: [span] }] }] }
          const refused = yield* Effect.flip(client.otelExportTrace(request))
          expect(refused.status).toBe(400)
          expect(yield* client.otelExportTrace(request, { projectId: "otel/by-client" })).toEqual({})
          const read = yield* client.callRead({ project_id: "otel/by-client", id: "c0000000000000a1" })
          expect(read.call?.op_name).toBe("client.span")
        })
      )

      it.effect("401 without a key, or with a wrong one", () =>
        Effect.gen(function* () {
          for (const path of ["/otel/v1/traces", "/otel/v1/trace"]) {
            const none = yield* call(path, {
              method: "POST",
              headers: { "content-type": "application/json", project_id: "otel/auth" },
              body: "{}"
            })
            expect(none.status).toBe(401)
            const wrong = yield* call(path, {
              method: "POST",
              headers: {
                authorization: "Bearer nope",
                "content-type": "application/x-protobuf",
                project_id: "otel/auth"
              },
              body: new Uint8Array(0)
            })
            expect(wrong.status).toBe(401)
            expect(clean(wrong.text)).toBe(true)
          }
        })
      )
    }
  )
})

describe("OTLP protobuf decoding", () => {
  // Every field of the request set, encoded by @effect/opentelemetry's own protobuf encoder: a wrong field
  // number or type in the decoder's message types drops or garbles a field and fails the comparison.
  const kv = (key: string, value: Record<string, unknown>) => ({ key, value })
  const attributes = [
    kv("s", { stringValue: "text é" }),
    kv("b", { boolValue: true }),
    kv("i", { intValue: 42 }),
    kv("big", { intValue: "9007199254740993" }),
    kv("d", { doubleValue: 0.5 }),
    kv("inf", { doubleValue: Number.POSITIVE_INFINITY }),
    kv("arr", { arrayValue: { values: [{ intValue: 1 }, { stringValue: "two" }] } }),
    kv("kv", { kvlistValue: { values: [kv("inner", { boolValue: false })] } }),
    kv("bytes", { bytesValue: new Uint8Array([1, 2, 3]) }),
    kv("empty", {})
  ]
  const request = {
    resourceSpans: [
      {
        resource: { attributes: [kv("service.name", { stringValue: "svc" })], droppedAttributesCount: 2 },
        schemaUrl: "https://example.com/resource",
        scopeSpans: [
          {
            scope: {
              name: "scope",
              version: "1.2.3",
              attributes: [kv("sk", { intValue: 1 })],
              droppedAttributesCount: 3
            },
            schemaUrl: "https://example.com/scope",
            spans: [
              {
                traceId: "0af7651916cd43dd8448eb211c80319c",
                spanId: "b7ad6b7169203331",
                traceState: "vendor=1",
                parentSpanId: "00f067aa0ba902b7",
                flags: 257,
                name: "full",
                kind: 3,
                startTimeUnixNano: "1767225600123456789",
                endTimeUnixNano: "18446744073709551615",
                attributes,
                droppedAttributesCount: 4,
                events: [
                  {
                    timeUnixNano: "1767225600500000000",
                    name: "event",
                    attributes: [kv("e", { stringValue: "v" })],
                    droppedAttributesCount: 5
                  }
                ],
                droppedEventsCount: 6,
                links: [
                  {
                    traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
                    spanId: "a000000000000001",
                    traceState: "link=1",
                    attributes: [kv("l", { doubleValue: 2.25 })],
                    droppedAttributesCount: 7,
                    flags: 1
                  }
                ],
                droppedLinksCount: 8,
                status: { code: 2, message: "bad" }
              }
            ]
          }
        ]
      }
    ]
  }

  const attr = (key: string, value: unknown) => ({ key, value })
  const expected: Otlp.OtlpRequest = {
    resourceSpans: [
      {
        resource: { attributes: [attr("service.name", "svc")], droppedAttributesCount: 2 },
        schemaUrl: "https://example.com/resource",
        scopeSpans: [
          {
            scope: { name: "scope", version: "1.2.3", attributes: [attr("sk", 1)], droppedAttributesCount: 3 },
            schemaUrl: "https://example.com/scope",
            spans: [
              {
                traceId: "0af7651916cd43dd8448eb211c80319c",
                spanId: "b7ad6b7169203331",
                traceState: "vendor=1",
                parentSpanId: "00f067aa0ba902b7",
                flags: 257,
                name: "full",
                kind: 3,
                startTimeUnixNano: 1767225600123456789n,
                endTimeUnixNano: 18446744073709551615n,
                attributes: [
                  attr("s", "text é"),
                  attr("b", true),
                  attr("i", 42),
                  attr("big", "9007199254740993"),
                  attr("d", 0.5),
                  attr("inf", "inf"),
                  attr("arr", [1, "two"]),
                  attr("kv", { inner: false }),
                  attr("bytes", "AQID"),
                  attr("empty", null)
                ],
                droppedAttributesCount: 4,
                events: [
                  {
                    name: "event",
                    timeUnixNano: 1767225600500000000n,
                    attributes: [attr("e", "v")],
                    droppedAttributesCount: 5
                  }
                ],
                droppedEventsCount: 6,
                links: [
                  {
                    traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
                    spanId: "a000000000000001",
                    traceState: "link=1",
                    attributes: [attr("l", 2.25)],
                    droppedAttributesCount: 7,
                    flags: 1
                  }
                ],
                droppedLinksCount: 8,
                status: { code: 2, message: "bad" }
              }
            ]
          }
        ]
      }
    ]
  } as Otlp.OtlpRequest

  it.effect("every field of a request encoded by OtlpSerialization.layerProtobuf decodes to its value", () =>
    Effect.gen(function* () {
      const serialization = yield* OtlpSerialization.OtlpSerialization
      const body = serialization.traces(request) as HttpBody.Uint8Array
      expect(body.contentType).toBe("application/x-protobuf")
      expect(Otlp.fromProtobuf(body.body)).toEqual(expected)
    }).pipe(Effect.provide(OtlpSerialization.layerProtobuf))
  )

  it("the JSON encoding of the same request reads to the same form", () => {
    const json = JSON.parse(
      JSON.stringify(request, (_key, value: unknown) =>
        value instanceof Uint8Array
          ? Buffer.from(value).toString("base64")
          : value === Number.POSITIVE_INFINITY
            ? "Infinity"
            : value
      )
    ) as unknown
    expect(Otlp.fromJson(json)).toEqual(expected)
  })
})
