/**
 * `call/upsert_batch` on the real server takes two ways: a compact body (as `JSON.stringify` writes it) is stored
 * from its text, an indented one (as Python's `json.dumps` writes it) goes through the parse and the schema. The
 * same batch either way gets the same answer, the same stored calls and the same refusals.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { readBatchText } from "../../src/local/server/internal/trace/batchText.js"
import { storedItems } from "../../src/local/server/internal/trace/upsertBatch.js"
import { API_KEY } from "../support/clients.js"
import { Backend, call } from "./support.js"

const basic = `Basic ${Buffer.from(`api:${API_KEY}`).toString("base64")}`

const postText = (path: string, body: string) =>
  call(path, { method: "POST", headers: { authorization: basic, "content-type": "application/json" }, body })

const uuid = (n: number) => `0190a000-0000-7000-8000-${n.toString(16).padStart(12, "0")}`

const batchOf = (project: string) => ({
  batch: [
    {
      mode: "start",
      req: {
        start: {
          project_id: project,
          id: uuid(1),
          trace_id: uuid(100),
          op_name: "weave:///e/p/op/rollout:abc",
          started_at: "2026-01-01T00:00:00.000123Z",
          attributes: { effect_rl: { version: "0.1.0" }, list: [1.5, -2, 1e21, null, true] },
          inputs: { text: 'caf\u00e9 \u{1f600} "q" \\ \n', nested: { a: [{ b: {} }, []] } },
          extra: { ignored: true }
        }
      }
    },
    {
      mode: "start",
      req: {
        start: {
          project_id: project,
          id: uuid(2),
          trace_id: uuid(100),
          parent_id: uuid(1),
          op_name: "chat",
          started_at: "2026-01-01T00:00:01Z",
          attributes: {},
          inputs: { messages: [{ role: "user", content: "hi" }] }
        }
      }
    },
    {
      mode: "end",
      req: {
        end: {
          project_id: project,
          id: uuid(2),
          ended_at: "2026-01-01T00:00:02.5Z",
          output: { choices: [{ index: 0, message: { role: "assistant", content: "5" } }] },
          summary: {
            other: 1,
            usage: { m: { total_tokens: 3, requests: 1, cost: 0.5, prompt_tokens: 2 } },
            status_counts: { success: 1 }
          }
        }
      }
    },
    {
      mode: "end",
      req: { end: { project_id: project, id: uuid(1), ended_at: "2026-01-01T00:00:03Z", output: null, summary: {} } }
    }
  ]
})

/** The project's calls as stream_query answers them, without the project id. */
const callsOf = (project: string) =>
  Effect.map(postText("/calls/stream_query", JSON.stringify({ project_id: project })), (reply) => {
    expect(reply.status).toBe(200)
    return reply.text
      .split("\n")
      .filter((line) => line.length > 0)
      .map((line) => ({ ...(JSON.parse(line) as Record<string, unknown>), project_id: "-" }))
  })

describe("call/upsert_batch from its text and through the schema", () => {
  it.layer(Backend)("on the real server", (it) => {
    it.effect("the same batch compact and indented: the same answer and the same calls", () =>
      Effect.gen(function* () {
        // The compact body is read from its text; the indented one is not.
        const read = readBatchText(JSON.stringify(batchOf("ent/text")))
        expect(read === undefined ? undefined : typeof storedItems(read)).toBe("object")
        expect(readBatchText(JSON.stringify(batchOf("ent/schema"), null, 2))).toBeUndefined()
        const compact = yield* postText("/call/upsert_batch", JSON.stringify(batchOf("ent/text")))
        const indented = yield* postText("/call/upsert_batch", JSON.stringify(batchOf("ent/schema"), null, 2))
        expect(compact.status).toBe(200)
        expect(compact.contentType).toBe(indented.contentType)
        expect(compact.text).toBe(indented.text)
        expect(compact.json).toEqual({
          res: [{ id: uuid(1), trace_id: uuid(100) }, { id: uuid(2), trace_id: uuid(100) }, {}, {}]
        })
        const stored = yield* callsOf("ent/text")
        expect(stored).toHaveLength(2)
        expect(stored).toEqual(yield* callsOf("ent/schema"))
        // Storage sizes count the stored JSON: the same bytes either way.
        const sizes = (project: string) =>
          Effect.map(
            postText(
              "/calls/stream_query",
              JSON.stringify({ project_id: project, include_storage_size: true, columns: ["id"] })
            ),
            (reply) => reply.text
          )
        expect(yield* sizes("ent/text")).toBe((yield* sizes("ent/schema")).replaceAll("ent/schema", "ent/text"))
      })
    )

    it.effect("the same refusals: a bad item named, a body too deep, a body that is not JSON", () =>
      Effect.gen(function* () {
        const bad = batchOf("ent/refused")
        const end = bad.batch[2]!.req as { end: Record<string, unknown> }
        end.end = { ...end.end, ended_at: "yesterday" }
        const compact = yield* postText("/call/upsert_batch", JSON.stringify(bad))
        const indented = yield* postText("/call/upsert_batch", JSON.stringify(bad, null, 2))
        expect(compact.status).toBe(400)
        expect(compact.text).toBe(indented.text)
        expect(compact.text).toContain("yesterday")
        // Nothing of a refused batch is stored.
        expect(yield* callsOf("ent/refused")).toEqual([])

        const deep = `{"batch":[${"[".repeat(600)}${"]".repeat(600)}]}`
        const tooDeep = yield* postText("/call/upsert_batch", deep)
        expect(tooDeep.status).toBe(400)
        expect(tooDeep.text).toBe((yield* postText("/call/start", deep)).text)

        const notJson = yield* postText("/call/upsert_batch", '{"batch": [')
        expect(notJson.status).toBe(422)
        expect(notJson.text).toBe((yield* postText("/call/start", '{"batch": [')).text)

        const wrong = yield* postText("/call/upsert_batch", JSON.stringify({ batch: [{ mode: "start", req: {} }] }))
        expect(wrong.status).toBe(422)
        expect(wrong.text).toContain("start")
      })
    )
  })
})
