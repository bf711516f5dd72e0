/**
 * The dashboard's read endpoints (`/v1/local/...`, see `DashboardApi`) and its static files at `/ui/`, on the
 * real server: what they answer after real logs, that a page of a model with 10,000 trajectories is bounded,
 * and that bad cursors, unknown models and a wrong key are refused by name.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as LocalBackend from "../../src/LocalBackend.js"
import { API_KEY, training } from "../support/clients.js"
import { Backend, call, send } from "./support.js"

const base = "effect-rl/tiny"
const client = Effect.flatMap(LocalBackend.LocalBackend, ({ url }) => training(url))

const trajectory = (reward: number, text = `answer ${reward}`) => ({
  messages_and_choices: [
    { role: "system" as const, content: "Be brief." },
    { role: "user" as const, content: "2+2?" },
    {
      role: "assistant" as const,
      content: null,
      tool_calls: [{ id: "c1", type: "function" as const, function: { name: "add", arguments: '{"a":2,"b":2}' } }]
    },
    { role: "tool" as const, tool_call_id: "c1", content: "4" },
    { role: "assistant" as const, content: text }
  ],
  reward,
  metrics: { correct: reward > 0.5 }
})

interface Page {
  readonly total: number
  readonly data: ReadonlyArray<{ group: number; index: number; reward: number; tool_calls: number; preview: string }>
  readonly next_cursor: string | null
  readonly groups: ReadonlyArray<{ size: number; min: number; max: number }>
}

describe("dashboard reads", () => {
  it.layer(Backend)("on the real server", (it) => {
    it.scoped("the overview holds the logged steps as stored, and pages list trajectories sorted", () =>
      Effect.gen(function* () {
        const c = yield* client
        const model = yield* c.createModel({ project: "dash", name: "overview", base_model: base })
        const logged = yield* c.log(model.id, {
          split: "train",
          trajectory_groups: [{ trajectories: [trajectory(0.2), trajectory(0.9), trajectory(0.5)] }]
        })
        // A val step whose trajectories carry what a rollout measures of itself, beside the agent's own metric,
        // and a group metric; and one metric named like a computed one (the computed value wins).
        yield* c.log(model.id, {
          split: "val",
          trajectory_groups: [
            {
              trajectories: [
                {
                  ...trajectory(1),
                  metrics: { correct: true, right_tool: 0.5, duration_seconds: 2, prompt_tokens: 30, reward: 7 }
                }
              ],
              metrics: { solved: 1 }
            }
          ]
        })

        const list = yield* send("GET", "/v1/local/models")
        expect(list.status).toBe(200)
        const row = (list.json as { data: ReadonlyArray<Record<string, unknown>> }).data.find((m) => m.id === model.id)
        expect(row).toMatchObject({ name: "overview", project: "dash", latest_step: 0, last_val_reward: 1 })
        expect(row?.last_reward).toBeCloseTo(logged?.metrics?.reward ?? Number.NaN)

        const overview = yield* send("GET", `/v1/local/models/${model.id}/overview`)
        expect(overview.status).toBe(200)
        const body = overview.json as { logs: ReadonlyArray<{ id: string; split: string; metrics: unknown }> }
        expect(body.logs.map((l) => l.split)).toEqual(["train", "val"])
        expect(body.logs[0]?.metrics).toEqual(logged?.metrics)
        // The agent's own metrics (in the order first logged) apart from those computed and those measured.
        const names = overview.json as { agent_metrics: ReadonlyArray<string>; rollout_metrics: ReadonlyArray<string> }
        expect(names.agent_metrics).toEqual(["correct", "right_tool", "group_solved"])
        expect(names.rollout_metrics).toEqual(["duration_seconds", "prompt_tokens"])
        expect(body.logs[1]?.metrics).toMatchObject({ correct: 1, right_tool: 0.5, group_solved: 1, reward: 1 })

        const logId = body.logs[0]!.id
        const sorted = yield* send("GET", `/v1/local/logs/${logId}/trajectories?sort=reward_desc&limit=2`)
        const page = sorted.json as Page
        expect(page.total).toBe(3)
        // The step page's trail names the model.
        expect((sorted.json as { log: unknown }).log).toMatchObject({ model_id: model.id, model_name: "overview" })
        expect(page.data.map((t) => t.reward)).toEqual([0.9, 0.5])
        expect(page.data[0]).toMatchObject({ group: 0, index: 1, tool_calls: 1, preview: "answer 0.9" })
        expect(page.groups[0]).toMatchObject({ size: 3, min: 0.2, max: 0.9 })
        const next = (yield* send(
          "GET",
          `/v1/local/logs/${logId}/trajectories?sort=reward_desc&limit=2&cursor=${page.next_cursor}`
        )).json as Page
        expect(next.data.map((t) => t.reward)).toEqual([0.2])
        expect(next.next_cursor).toBeNull()

        const one = yield* send("GET", `/v1/local/logs/${logId}/trajectories/0/1`)
        expect(one.status).toBe(200)
        expect((one.json as { trajectory: unknown }).trajectory).toMatchObject({ reward: 0.9 })
      })
    )

    it.scoped("a page of a model with 10,000 trajectories is bounded", () =>
      Effect.gen(function* () {
        const c = yield* client
        const model = yield* c.createModel({ project: "dash", name: "large", base_model: base })
        // 10,000 trajectories in 10 logged steps of 10 groups x 100 (one request each stays under the body limit).
        for (let step = 0; step < 10; step++) {
          const groups = Array.from({ length: 10 }, (_, g) => ({
            trajectories: Array.from({ length: 100 }, (_, i) => trajectory(((g * 100 + i) % 97) / 97, "x".repeat(200)))
          }))
          yield* c.log(model.id, { split: "train", trajectory_groups: groups })
        }
        const overview = yield* send("GET", `/v1/local/models/${model.id}/overview`)
        expect(overview.text.length).toBeLessThan(20_000)
        const logs = (overview.json as { logs: ReadonlyArray<{ id: string }> }).logs
        expect(logs).toHaveLength(10)
        const logId = logs[0]!.id
        const first = yield* send("GET", `/v1/local/logs/${logId}/trajectories?sort=reward_asc`)
        const page = first.json as Page
        expect(page.total).toBe(1000)
        expect(page.data).toHaveLength(50)
        // The rows carry no messages: 50 of them stay small whatever a trajectory holds.
        expect(first.text.length).toBeLessThan(30_000)
        const largest = yield* send("GET", `/v1/local/logs/${logId}/trajectories?limit=200&cursor=900`)
        expect((largest.json as Page).data).toHaveLength(100)
        expect((largest.json as Page).next_cursor).toBeNull()
      })
    )

    it.effect("an unknown model, log entry or trajectory is a 404 naming it", () =>
      Effect.gen(function* () {
        const missing = "00000000-0000-4000-8000-000000000000"
        const model = yield* send("GET", `/v1/local/models/${missing}/overview`)
        expect(model.status).toBe(404)
        expect(model.json).toEqual({ detail: `model ${missing} not found` })
        const live = yield* send("GET", `/v1/local/models/${missing}/live`)
        expect(live.status).toBe(404)
        const log = yield* send("GET", "/v1/local/logs/nope/trajectories")
        expect(log.json).toEqual({ detail: "log entry nope not found" })
      })
    )

    it.scoped("a bad cursor, limit or sort is a 400 naming it", () =>
      Effect.gen(function* () {
        const c = yield* client
        const model = yield* c.createModel({ project: "dash", name: "cursor", base_model: base })
        yield* c.log(model.id, { split: "train", trajectory_groups: [{ trajectories: [trajectory(1)] }] })
        const overview = yield* send("GET", `/v1/local/models/${model.id}/overview`)
        const logId = (overview.json as { logs: ReadonlyArray<{ id: string }> }).logs[0]!.id
        for (const [query, named] of [
          ["cursor=abc", "invalid cursor 'abc'"],
          ["cursor=5", "invalid cursor '5'"],
          ["limit=0", "invalid limit '0'"],
          ["limit=201", "invalid limit '201'"],
          ["sort=size", "invalid sort 'size'"]
        ] as const) {
          const reply = yield* send("GET", `/v1/local/logs/${logId}/trajectories?${query}`)
          expect(reply.status).toBe(400)
          expect((reply.json as { detail: string }).detail).toContain(named)
        }
      })
    )

    it.effect("the reads need the key; the page's static files do not, and carry no data", () =>
      Effect.gen(function* () {
        const wrong = yield* call("/v1/local/models", { headers: { authorization: "Bearer wrong" } })
        expect(wrong.status).toBe(401)
        const none = yield* call("/v1/local/models")
        expect(none.status).toBe(401)
        const page = yield* call("/ui/")
        expect(page.status).toBe(200)
        expect(page.contentType).toContain("text/html")
        expect(page.text).not.toContain(API_KEY)
        const redirect = yield* call("/ui", { redirect: "manual" })
        expect(redirect.status).toBe(301)
        const outside = yield* call("/ui/..%2Fpackage.json")
        expect(outside.status).toBe(404)
      })
    )
  })
})
