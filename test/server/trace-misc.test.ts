/**
 * The trace surface's service routes, threads and completions on the real server through the real
 * `TraceClient`: `/health` and `/server_info`; `threads/stream_query` statistics over turn calls (counts,
 * first/last turn, last update, duration percentiles), its filter, sort and paging; `completions/create` and
 * `create_stream` answered by the engine and traced as calls (inputs, output, usage), untracked when asked,
 * and their 400/404 answers.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { describe, expect, it, layer } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import type { ApiError } from "../../src/client/ApiError.js"
import * as TraceClient from "../../src/client/TraceClient.js"
import * as LocalBackend from "../../src/LocalBackend.js"
import { quantile } from "../../src/local/server/internal/trace/threads.js"
import { API_KEY } from "../support/clients.js"
import { Backend, call, clean } from "./support.js"

const client = Effect.gen(function* () {
  const { url } = yield* LocalBackend.LocalBackend
  return yield* TraceClient.make({ apiKey: Redacted.make(API_KEY), baseUrl: url })
})

const rejected = <A, R>(effect: Effect.Effect<A, ApiError, R>) =>
  Effect.map(Effect.flip(effect), (error) => {
    expect(clean(error.description)).toBe(true)
    return { status: error.status, reason: error.description }
  })

const collect = <A, E, R>(stream: Stream.Stream<A, E, R>) => Effect.map(Stream.runCollect(stream), Chunk.toArray)

const at = (seconds: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, seconds)).toISOString()

let projects = 0
const newProject = () => `misc/p${++projects}`

describe("quantile", () => {
  it("interpolates between the nearest ranks", () => {
    expect(quantile([], 0.5)).toBeNull()
    expect(quantile([7], 0.99)).toBe(7)
    expect(quantile([1, 2, 3, 4], 0.5)).toBe(2.5)
    expect(quantile([0, 100], 0.99)).toBeCloseTo(99)
  })
})

layer(Layer.merge(Backend, NodeHttpClient.layerUndici), { excludeTestServices: true })(
  "trace service routes, threads and completions",
  (it) => {
    it.effect("/health answers ok and /server_info names this server, both behind the key", () =>
      Effect.gen(function* () {
        const trace = yield* client
        expect(yield* trace.health).toEqual({ status: "ok" })
        const info = yield* trace.serverInfo
        expect(info.min_required_weave_python_version).toMatch(/^\d+\.\d+\.\d+$/)
        expect(info.trace_server_version).toMatch(/^effect-rl \d+\.\d+\.\d+/)
        const anonymous = yield* call("/server_info")
        expect(anonymous.status).toBe(401)
      })
    )

    it.effect("threads: statistics over turn calls only, filtered, sorted and paged", () =>
      Effect.gen(function* () {
        const trace = yield* client
        const project = newProject()
        // Thread a: turns of 2 s, 4 s and a running one; a nested call inside a turn does not count.
        // Thread b: one turn of 10 s, starting later. A call with a thread but no turn of its own does not count.
        const turn = (id: string, thread: string, start: number, end?: number) => [
          {
            mode: "start" as const,
            req: {
              start: {
                project_id: project,
                id,
                op_name: "turn",
                started_at: at(start),
                attributes: {},
                inputs: {},
                thread_id: thread,
                turn_id: id
              }
            }
          },
          ...(end === undefined
            ? []
            : [{ mode: "end" as const, req: { end: { project_id: project, id, ended_at: at(end), summary: {} } } }])
        ]
        const ids = Array.from({ length: 6 }, (_, i) => `0190a000-0000-7000-8000-00000000000${i}`)
        yield* trace.callUpsertBatch({
          batch: [
            ...turn(ids[0] ?? "", "a", 0, 2),
            ...turn(ids[1] ?? "", "a", 10, 14),
            ...turn(ids[2] ?? "", "a", 20),
            ...turn(ids[3] ?? "", "b", 30, 40),
            {
              mode: "start",
              req: {
                start: {
                  project_id: project,
                  id: ids[4],
                  parent_id: ids[1],
                  op_name: "inner",
                  started_at: at(11),
                  attributes: {},
                  inputs: {},
                  thread_id: "a",
                  turn_id: ids[1]
                }
              }
            },
            {
              mode: "start",
              req: {
                start: {
                  project_id: project,
                  id: ids[5],
                  op_name: "loose",
                  started_at: at(50),
                  attributes: {},
                  inputs: {},
                  thread_id: "c"
                }
              }
            }
          ]
        })
        const all = yield* collect(trace.threadsStreamQuery({ project_id: project }))
        // Default order: last_updated desc (b ended at 40 s, a's latest is the running turn started at 20 s).
        expect(all.map((t) => t.thread_id)).toEqual(["b", "a"])
        const a = all[1]
        expect(a?.turn_count).toBe(3)
        expect(a?.first_turn_id).toBe(ids[0])
        expect(a?.last_turn_id).toBe(ids[2])
        expect(Date.parse(a?.start_time ?? "")).toBe(Date.parse(at(0)))
        expect(Date.parse(a?.last_updated ?? "")).toBe(Date.parse(at(20)))
        expect(a?.p50_turn_duration_ms).toBe(3000)
        expect(a?.p99_turn_duration_ms).toBeCloseTo(3980)
        const b = all[0]
        expect(b?.turn_count).toBe(1)
        expect(b?.p50_turn_duration_ms).toBe(10000)

        const byCount = yield* collect(
          trace.threadsStreamQuery({ project_id: project, sort_by: [{ field: "turn_count", direction: "desc" }] })
        )
        expect(byCount.map((t) => t.thread_id)).toEqual(["a", "b"])
        const paged = yield* collect(
          trace.threadsStreamQuery({
            project_id: project,
            sort_by: [{ field: "thread_id", direction: "asc" }],
            offset: 1,
            limit: 1
          })
        )
        expect(paged.map((t) => t.thread_id)).toEqual(["b"])
        const named = yield* collect(trace.threadsStreamQuery({ project_id: project, filter: { thread_ids: ["a"] } }))
        expect(named.map((t) => t.thread_id)).toEqual(["a"])
        const after = yield* collect(
          trace.threadsStreamQuery({ project_id: project, filter: { after_datetime: at(5) } })
        )
        expect(after.map((t) => t.thread_id)).toEqual(["b"])
        const before = yield* collect(
          trace.threadsStreamQuery({ project_id: project, filter: { before_datetime: at(30) } })
        )
        expect(before.map((t) => t.thread_id)).toEqual(["a"])
        expect(yield* collect(trace.threadsStreamQuery({ project_id: newProject() }))).toEqual([])

        const badSort = yield* rejected(
          collect(trace.threadsStreamQuery({ project_id: project, sort_by: [{ field: "cost", direction: "asc" }] }))
        )
        expect(badSort.status).toBe(400)
        expect(badSort.reason).toContain("cost")
        const badTime = yield* rejected(
          collect(trace.threadsStreamQuery({ project_id: project, filter: { after_datetime: "yesterday" } }))
        )
        expect(badTime.status).toBe(400)
        expect(badTime.reason).toContain("after_datetime")
      })
    )

    it.effect("completions/create answers from the engine and traces the call with its usage", () =>
      Effect.gen(function* () {
        const trace = yield* client
        const project = newProject()
        const inputs = {
          model: "effect-rl/tiny",
          messages: [{ role: "user", content: "Say something." }],
          max_tokens: 6,
          seed: 3
        }
        const created = yield* trace.completionsCreate({ project_id: project, inputs })
        const response = created.response as {
          readonly model: string
          readonly choices: ReadonlyArray<{ readonly message: { readonly content: string } }>
          readonly usage: { readonly prompt_tokens: number; readonly completion_tokens: number }
        }
        expect(response.model).toBe("effect-rl/tiny")
        expect(response.choices).toHaveLength(1)
        expect(response.usage.completion_tokens).toBeGreaterThan(0)
        expect(response.usage.completion_tokens).toBeLessThanOrEqual(6)
        const id = created.weave_call_id
        expect(typeof id).toBe("string")
        const { call: traced } = yield* trace.callRead({ project_id: project, id: id ?? "" })
        expect(traced?.op_name).toBe("weave.completions_create")
        expect(traced?.inputs).toEqual(inputs)
        expect(traced?.output).toEqual(created.response)
        expect(traced?.summary?.usage).toEqual({
          "effect-rl/tiny": {
            prompt_tokens: response.usage.prompt_tokens,
            completion_tokens: response.usage.completion_tokens,
            total_tokens: response.usage.prompt_tokens + response.usage.completion_tokens,
            requests: 1
          }
        })
        expect(traced?.summary?.weave?.status).toBe("success")

        // Same seed, same text; untracked leaves no call.
        const untracked = yield* trace.completionsCreate({ project_id: project, inputs, track_llm_call: false })
        expect(untracked.weave_call_id).toBeNull()
        expect((untracked.response as typeof response).choices[0]?.message.content).toBe(
          response.choices[0]?.message.content
        )
        expect((yield* trace.callsQueryStats({ project_id: project })).count).toBe(1)
      })
    )

    it.effect(
      "completions/create_stream: the meta line, the chunks, and the call with the response create records",
      () =>
        Effect.gen(function* () {
          const trace = yield* client
          const project = newProject()
          const inputs = {
            model: "effect-rl/tiny",
            messages: [{ role: "user", content: "Go." }],
            max_tokens: 5,
            seed: 9
          }
          const whole = yield* trace.completionsCreate({ project_id: project, inputs, track_llm_call: false })
          const events = yield* collect(trace.completionsCreateStream({ project_id: project, inputs }))
          const [meta, ...rest] = events
          expect(meta?._tag).toBe("Meta")
          const callId = meta?._tag === "Meta" ? meta.meta.weave_call_id : undefined
          expect(typeof callId).toBe("string")
          const chunks = rest.flatMap((event) => (event._tag === "Chunk" ? [event.chunk] : []))
          expect(chunks.length).toBe(rest.length)
          // No usage chunk unless asked for.
          expect(chunks.every((chunk) => chunk.choices.length > 0)).toBe(true)
          const text = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? "").join("")
          const expected = (whole.response as { choices: ReadonlyArray<{ message: { content: string } }> }).choices[0]
          expect(text).toBe(expected?.message.content)
          const { call: traced } = yield* trace.callRead({ project_id: project, id: callId ?? "" })
          const output = traced?.output as { choices: ReadonlyArray<{ message: { content: string } }> }
          expect(output.choices[0]?.message.content).toBe(text)
          // The recorded response is the one `create` answers for the same seed, but for its id and time.
          const { id: _a, created: _b, ...recorded } = (traced?.output ?? {}) as Record<string, unknown>
          const { id: _c, created: _d, ...answered } = whole.response as Record<string, unknown>
          expect(recorded).toEqual(answered)
          expect(traced?.exception ?? null).toBeNull()
          const usage = traced?.summary?.usage?.["effect-rl/tiny"]
          expect(usage?.completion_tokens).toBe(
            (whole.response as { usage: { completion_tokens: number } }).usage.completion_tokens
          )

          const withUsage = yield* collect(
            trace.completionsCreateStream({
              project_id: project,
              inputs: { ...inputs, stream_options: { include_usage: true } },
              track_llm_call: false
            })
          )
          const last = withUsage[withUsage.length - 1]
          expect(last?._tag === "Chunk" && last.chunk.choices.length === 0 && last.chunk.usage !== null).toBe(true)
          expect(withUsage[0]?._tag === "Meta" && withUsage[0].meta.weave_call_id === null).toBe(true)
        })
    )

    it.effect(
      "completions/create_stream: tool calls, logprobs and two choices recorded as create records them, compared whole",
      () =>
        Effect.gen(function* () {
          const trace = yield* client
          const project = newProject()
          const inputs = {
            model: "effect-rl/tiny",
            messages: [{ role: "user", content: "How much is the lamp?" }],
            n: 2,
            seed: 2,
            temperature: 1,
            max_tokens: 100,
            logprobs: true,
            top_logprobs: 2,
            tool_choice: "required",
            parallel_tool_calls: true,
            tools: [
              {
                type: "function",
                function: {
                  name: "price",
                  parameters: {
                    type: "object",
                    required: ["item"],
                    properties: { item: { type: "string", enum: ["lamp", "desk"] } }
                  }
                }
              }
            ]
          }
          const whole = yield* trace.completionsCreate({ project_id: project, inputs, track_llm_call: false })
          const events = yield* collect(trace.completionsCreateStream({ project_id: project, inputs }))
          const callId = events[0]?._tag === "Meta" ? events[0].meta.weave_call_id : undefined
          // The call ids each choice's stream gave, and how many fragments of arguments came.
          const streamedIds: Array<Array<string>> = [[], []]
          let fragments = 0
          for (const event of events) {
            if (event._tag !== "Chunk") continue
            for (const choice of event.chunk.choices) {
              for (const call of choice.delta.tool_calls ?? []) {
                if (call.id != null) streamedIds[choice.index]?.push(call.id)
                if (call.function?.arguments) fragments++
              }
            }
          }
          const { call: traced } = yield* trace.callRead({ project_id: project, id: callId ?? "" })
          expect(traced?.exception ?? null).toBeNull()
          type Recorded = {
            readonly choices: ReadonlyArray<{
              readonly message: { readonly tool_calls?: ReadonlyArray<{ readonly id?: string }> }
              readonly logprobs: { readonly content: ReadonlyArray<unknown> | null } | null
            }>
          } & Record<string, unknown>
          const output = traced?.output as Recorded
          const answered = whole.response as Recorded
          // The comparison covers what a joiner could lose: each choice calls a tool, its arguments streamed in
          // pieces, with logprobs.
          expect(answered.choices).toHaveLength(2)
          for (const choice of answered.choices) {
            expect(choice.message.tool_calls?.length).toBeGreaterThan(0)
            expect(choice.logprobs?.content?.length).toBeGreaterThan(0)
          }
          expect(fragments).toBeGreaterThan(2)
          // The recorded calls carry the ids the stream gave (each request draws its own call ids) ...
          expect(output.choices.map((choice) => choice.message.tool_calls?.map((call) => call.id))).toEqual(streamedIds)
          // ... and the recorded response is the one `create` answers for the same seed, but for its id, time and
          // call ids.
          const comparable = ({ id: _id, created: _created, choices, ...rest }: Recorded) => ({
            ...rest,
            choices: choices.map((choice) => ({
              ...choice,
              message: {
                ...choice.message,
                tool_calls: choice.message.tool_calls?.map(({ id: _call, ...call }) => call)
              }
            }))
          })
          expect(comparable(output)).toStrictEqual(comparable(answered))
        })
    )

    it.effect("completions/create_stream: a client that leaves mid-stream leaves an ended call with an exception", () =>
      Effect.gen(function* () {
        const trace = yield* client
        const { url } = yield* LocalBackend.LocalBackend
        const project = newProject()
        const callId = yield* Effect.promise(async () => {
          const abort = new AbortController()
          const response = await fetch(`${url}/completions/create_stream`, {
            method: "POST",
            headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
            body: JSON.stringify({
              project_id: project,
              inputs: {
                model: "effect-rl/tiny",
                messages: [{ role: "user", content: "Talk." }],
                max_tokens: 400,
                ignore_eos: true
              }
            }),
            signal: abort.signal
          })
          const reader = response.body?.getReader()
          const first = await reader?.read()
          abort.abort()
          const line = new TextDecoder().decode(first?.value).split("\n")[0] ?? ""
          return (JSON.parse(line) as { _meta: { weave_call_id: string } })._meta.weave_call_id
        })
        const ended = yield* trace.callRead({ project_id: project, id: callId }).pipe(
          Effect.map(({ call }) => call),
          Effect.filterOrFail((c) => c?.ended_at !== null && c?.ended_at !== undefined),
          Effect.retry({ times: 100, schedule: Schedule.spaced("50 millis") })
        )
        expect(ended?.exception).toContain("ended before the completion")
        expect(ended?.summary?.weave?.status).toBe("error")
      })
    )

    it.effect("completions: invalid inputs and engine refusals are 400, an unknown model 404, nothing traced", () =>
      Effect.gen(function* () {
        const trace = yield* client
        const project = newProject()
        const badInputs = yield* rejected(
          trace.completionsCreate({
            project_id: project,
            inputs: { model: "effect-rl/tiny", messages: [{ role: "user", content: "x" }], temperature: -1 }
          })
        )
        expect(badInputs.status).toBe(400)
        expect(badInputs.reason).toContain("temperature")
        const unknown = yield* rejected(
          trace.completionsCreate({
            project_id: project,
            inputs: { model: "nobody/nothing", messages: [{ role: "user", content: "x" }] }
          })
        )
        expect(unknown.status).toBe(404)
        expect(unknown.reason).toContain("nobody/nothing")
        const streamUnknown = yield* rejected(
          collect(
            trace.completionsCreateStream({
              project_id: project,
              inputs: { model: "nobody/nothing", messages: [{ role: "user", content: "x" }] }
            })
          )
        )
        expect(streamUnknown.status).toBe(404)
        expect((yield* trace.callsQueryStats({ project_id: project })).count).toBe(0)
      })
    )
  }
)
