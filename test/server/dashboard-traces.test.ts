/**
 * The traces pages' reads (`/v1/local/trace/...`, see `DashboardApi`) on the real server, over calls and
 * feedback stored through the trace surface itself: the projects, a project's traces latest first a bounded
 * page at a time, a trace's calls with usage added up where a call records none and the feedback on each, one
 * call in full; a trace past 5,000 calls is cut and says so; bad queries and unknown calls are refused by name.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { Backend, call, clean, send } from "./support.js"

const PROJECT = "dash/traces"
const at = (ms: number) => new Date(Date.UTC(2026, 0, 1) + ms).toISOString()
const uuid = (n: number, prefix = "0000") => `${prefix}0000-0000-7000-8000-${n.toString(16).padStart(12, "0")}`
const usage = (prompt: number, completion: number) => ({
  usage: {
    "effect-rl/tiny": {
      prompt_tokens: prompt,
      completion_tokens: completion,
      total_tokens: prompt + completion,
      requests: 1
    }
  }
})

interface Spec {
  readonly id: string
  readonly trace: string
  readonly parent?: string
  readonly op: string
  readonly start: number
  readonly end?: number
  readonly summary?: object
  readonly exception?: string
  readonly output?: unknown
}

const batchOf = (project: string, specs: ReadonlyArray<Spec>) => ({
  batch: specs.flatMap((s) => [
    {
      mode: "start",
      req: {
        start: {
          project_id: project,
          id: s.id,
          trace_id: s.trace,
          parent_id: s.parent ?? null,
          op_name: s.op,
          display_name: `${s.op} ${s.id.slice(-3)}`,
          started_at: at(s.start),
          attributes: { step: 1 },
          inputs: { question: "2+2?" }
        }
      }
    },
    ...(s.end === undefined
      ? []
      : [
          {
            mode: "end",
            req: {
              end: {
                project_id: project,
                id: s.id,
                ended_at: at(s.end),
                exception: s.exception ?? null,
                output: s.output ?? { answer: "4" },
                summary: s.summary ?? {}
              }
            }
          }
        ])
  ])
})

const upsert = (project: string, specs: ReadonlyArray<Spec>) =>
  Effect.flatMap(send("POST", "/call/upsert_batch", batchOf(project, specs)), (reply) =>
    Effect.sync(() => expect(reply.status).toBe(200))
  )

interface Row {
  readonly id: string
  readonly parent_id: string | null
  readonly latency_ms: number | null
  readonly status: string
  readonly exception: string | null
  readonly usage: Record<string, { prompt_tokens: number; completion_tokens: number; requests: number }> | null
  readonly feedback: ReadonlyArray<{ feedback_type: string; payload: unknown }>
  readonly calls?: number
}

const q = encodeURIComponent(PROJECT)

describe("the traces pages' reads", () => {
  it.layer(Backend)("on the real server", (it) => {
    it.effect("a trace's calls: latency, status, usage added up where a call records none, feedback", () =>
      Effect.gen(function* () {
        const step = uuid(1, "aaaa")
        const rollout = uuid(2, "aaaa")
        const chats = [uuid(3, "aaaa"), uuid(4, "aaaa")]
        const failed = uuid(5, "aaaa")
        yield* upsert(PROJECT, [
          { id: step, trace: step, op: "effect-rl.step", start: 0, end: 900 },
          { id: rollout, trace: step, parent: step, op: "effect-rl.rollout", start: 10, end: 500 },
          {
            id: chats[0]!,
            trace: step,
            parent: rollout,
            op: "effect-rl.chat",
            start: 20,
            end: 120,
            summary: usage(7, 2)
          },
          {
            id: chats[1]!,
            trace: step,
            parent: rollout,
            op: "effect-rl.chat",
            start: 130,
            end: 330,
            summary: usage(9, 3)
          },
          { id: failed, trace: step, parent: step, op: "effect-rl.rollout", start: 40, end: 60, exception: "boom" },
          { id: uuid(6, "aaaa"), trace: step, parent: step, op: "effect-rl.rollout", start: 50 }
        ])
        const feedback = yield* send("POST", "/feedback/create", {
          project_id: PROJECT,
          weave_ref: `weave:///${PROJECT}/call/${rollout}`,
          feedback_type: "reward",
          payload: { reward: 0.75, metrics: { correct: true } }
        })
        expect(feedback.status).toBe(200)

        const projects = yield* send("GET", "/v1/local/trace/projects")
        expect(projects.status).toBe(200)
        expect((projects.json as { data: unknown[] }).data).toContainEqual(
          expect.objectContaining({ project_id: PROJECT, calls: 6, traces: 1 })
        )

        // Asked by any call of the trace, the whole trace comes back.
        const tree = yield* send("GET", `/v1/local/trace/calls/${chats[1]}/tree?project=${q}`)
        expect(tree.status).toBe(200)
        const body = tree.json as { trace_id: string; calls: ReadonlyArray<Row>; truncated: boolean }
        expect(body.trace_id).toBe(step)
        expect(body.truncated).toBe(false)
        const byId = new Map(body.calls.map((c) => [c.id, c]))
        expect(body.calls.map((c) => c.id)).toEqual([step, rollout, chats[0], failed, uuid(6, "aaaa"), chats[1]])
        expect(byId.get(chats[0]!)).toMatchObject({ latency_ms: 100, status: "success", parent_id: rollout })
        expect(byId.get(failed)).toMatchObject({ status: "error", exception: "boom", latency_ms: 20 })
        expect(byId.get(uuid(6, "aaaa"))).toMatchObject({ status: "running", latency_ms: null, usage: null })
        // Neither the rollout nor the step recorded usage: each has its completions' added up.
        const summed = { prompt_tokens: 16, completion_tokens: 5, total_tokens: 21, requests: 2 }
        expect(byId.get(rollout)?.usage).toEqual({ "effect-rl/tiny": summed })
        expect(byId.get(step)?.usage).toEqual({ "effect-rl/tiny": summed })
        expect(byId.get(rollout)?.feedback).toEqual([
          expect.objectContaining({ feedback_type: "reward", payload: { reward: 0.75, metrics: { correct: true } } })
        ])
        expect(body.calls.every((c) => !("inputs" in c) && !("output" in c))).toBe(true)

        // One call in full.
        const one = yield* send("GET", `/v1/local/trace/calls/${rollout}?project=${q}`)
        expect(one.status).toBe(200)
        expect(one.json).toMatchObject({
          id: rollout,
          op_name: "effect-rl.rollout",
          inputs: { question: "2+2?" },
          output: { answer: "4" },
          attributes: { step: 1 },
          feedback: [expect.objectContaining({ feedback_type: "reward" })]
        })

        // The list of traces shows the root with its call count and feedback.
        const roots = yield* send("GET", `/v1/local/trace/traces?project=${q}`)
        expect(roots.status).toBe(200)
        expect((roots.json as { data: ReadonlyArray<Row> }).data).toEqual([
          expect.objectContaining({ id: step, calls: 6, latency_ms: 900 })
        ])
      })
    )

    it.effect("traces come latest first, a bounded page at a time; a trace past 5,000 calls is cut", () =>
      Effect.gen(function* () {
        const project = "dash/many"
        // 120 traces of a root and one child each.
        const specs: Array<Spec> = []
        for (let i = 0; i < 120; i++) {
          const root = uuid(i, "bbbb")
          specs.push({ id: root, trace: root, op: "root", start: i * 10, end: i * 10 + 5 })
          specs.push({
            id: uuid(i, "cccc"),
            trace: root,
            parent: root,
            op: "child",
            start: i * 10 + 1,
            end: i * 10 + 2
          })
        }
        yield* upsert(project, specs)
        const seen: Array<string> = []
        let cursor: string | null = null
        let pages = 0
        do {
          const path: string = `/v1/local/trace/traces?project=${encodeURIComponent(project)}&limit=50${cursor === null ? "" : `&cursor=${cursor}`}`
          const reply = yield* send("GET", path)
          expect(reply.status).toBe(200)
          const page = reply.json as { data: ReadonlyArray<Row>; next_cursor: string | null }
          expect(page.data.length).toBeLessThanOrEqual(50)
          expect(page.data.every((r) => r.calls === 2)).toBe(true)
          seen.push(...page.data.map((r) => r.id))
          cursor = page.next_cursor
          pages++
        } while (cursor !== null)
        expect(pages).toBe(3)
        expect(seen).toEqual(Array.from({ length: 120 }, (_, i) => uuid(119 - i, "bbbb")))

        // One trace of 6,000 calls: its first 5,000 answered, `truncated` set.
        const big = uuid(1, "dddd")
        const many: Array<Spec> = [{ id: big, trace: big, op: "root", start: 0, end: 10 }]
        for (let i = 0; i < 5_999; i++)
          many.push({ id: uuid(i, "eeee"), trace: big, parent: big, op: "leaf", start: 1 + i })
        for (let i = 0; i < many.length; i += 1_000) yield* upsert(project, many.slice(i, i + 1_000))
        const tree = yield* send("GET", `/v1/local/trace/calls/${big}/tree?project=${encodeURIComponent(project)}`)
        const body = tree.json as { calls: ReadonlyArray<Row>; truncated: boolean }
        expect(body.calls).toHaveLength(5_000)
        expect(body.truncated).toBe(true)
      })
    )

    it.effect("bad queries, unknown calls and a missing key are refused by name", () =>
      Effect.gen(function* () {
        const cases: ReadonlyArray<readonly [string, number, string]> = [
          ["/v1/local/trace/traces", 400, "missing project"],
          ["/v1/local/trace/traces?project=nope", 400, "invalid project 'nope'"],
          [`/v1/local/trace/traces?project=${q}&limit=0`, 400, "invalid limit '0'"],
          [`/v1/local/trace/traces?project=${q}&limit=201`, 400, "invalid limit '201'"],
          [`/v1/local/trace/traces?project=${q}&cursor=zz`, 400, "invalid cursor 'zz'"],
          [`/v1/local/trace/calls/${uuid(9, "ffff")}/tree?project=${q}`, 404, `call ${uuid(9, "ffff")} not found`],
          [`/v1/local/trace/calls/${uuid(9, "ffff")}?project=${q}`, 404, "not found in project dash/traces"],
          ["/v1/local/trace/calls/x/tree", 400, "missing project"]
        ]
        for (const [path, status, detail] of cases) {
          const reply = yield* send("GET", path)
          expect([path, reply.status]).toEqual([path, status])
          expect((reply.json as { detail: string }).detail).toContain(detail)
          expect(clean(reply.text)).toBe(true)
        }
        expect((yield* call("/v1/local/trace/projects")).status).toBe(401)
      })
    )
  })
})
