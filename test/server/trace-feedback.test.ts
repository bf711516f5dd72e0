/**
 * The trace surface's feedback and costs on the real server, through the real `TraceClient` (and plain `fetch`
 * where the client's own schema would refuse a body first): feedback create with every validation rule of the
 * service (refs, reactions and their aliases, notes, annotations, runnables, scorer fields, queues, the payload
 * limit), query with fields, payload paths, the query language, sorting and paging, id-only purges, replace;
 * cost create, query, purge; and the feedback and costs the calls server can attach to calls.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import type { JsonObject } from "../../src/api/Json.js"
import type { Query } from "../../src/api/TraceCall.js"
import type { FeedbackCreateReq, FeedbackQueryReq } from "../../src/api/TraceMisc.js"
import type { ApiError } from "../../src/client/ApiError.js"
import * as TraceClient from "../../src/client/TraceClient.js"
import * as LocalBackend from "../../src/LocalBackend.js"
import { API_KEY } from "../support/clients.js"
import { Backend, clean, send } from "./support.js"

/** The backend under test, and the platform HTTP client (undici) the trace client runs over. */
const Live = Layer.mergeAll(Backend, NodeHttpClient.layerUndici)

/** The real trace client against the running backend. */
const client = Effect.flatMap(LocalBackend.LocalBackend, ({ url }) =>
  TraceClient.make({ apiKey: Redacted.make(API_KEY), baseUrl: url })
)

/**
 * A failing call's status and the service's reason; the body never leaks internals or the key. A success fails
 * the test with a short message (not the value, which may be a 1 MiB payload).
 */
const rejected = <A>(effect: Effect.Effect<A, ApiError>) =>
  Effect.flatMap(Effect.either(effect), (result) => {
    if (Either.isRight(result)) return Effect.dieMessage("expected the call to be rejected, it succeeded")
    expect(clean(result.left.description)).toBe(true)
    return Effect.succeed({ status: result.left.status, reason: result.left.description })
  })

const ref = (project: string, tail = "object/thing:abc123") => `weave:///${project}/${tail}`

const feedbackOf = (project: string, fields: Partial<FeedbackCreateReq> = {}): FeedbackCreateReq => ({
  project_id: project,
  weave_ref: ref(project),
  feedback_type: "custom",
  payload: { score: 1 },
  ...fields
})

const idEq = (id: string): Query => ({ $expr: { $eq: [{ $getField: "id" }, { $literal: id }] } })

const uuid = (n: number) => `0190a000-0000-7000-8000-${n.toString(16).padStart(12, "0")}`

describe("trace feedback and costs", () => {
  it.layer(Live)("on the real server", (it) => {
    it.effect("create answers id, created_at, wb_user_id and payload; query returns the stored row", () =>
      Effect.gen(function* () {
        const trace = yield* client
        const project = "fb/create"
        const created = yield* trace.feedbackCreate(
          feedbackOf(project, { payload: { score: 0.5, note: "ok" }, creator: "Jane", wb_user_id: "user-1" })
        )
        expect(created.payload).toEqual({ score: 0.5, note: "ok" })
        expect(created.wb_user_id).toBe("user-1")
        expect(Number.isFinite(Date.parse(created.created_at))).toBe(true)
        const chosen = yield* trace.feedbackCreate(feedbackOf(project, { id: "my-own-id" }))
        expect(chosen.id).toBe("my-own-id")
        const defaulted = yield* trace.feedbackCreate(feedbackOf(project))
        expect(defaulted.wb_user_id).toBe("local")

        const { result } = yield* trace.feedbackQuery({ project_id: project })
        expect(result.map((row) => row.id)).toEqual([created.id, "my-own-id", defaulted.id])
        expect(result[0]).toMatchObject({
          id: created.id,
          project_id: project,
          weave_ref: ref(project),
          wb_user_id: "user-1",
          creator: "Jane",
          created_at: created.created_at,
          feedback_type: "custom",
          payload: { score: 0.5, note: "ok" },
          annotation_ref: null,
          runnable_ref: null,
          call_ref: null,
          trigger_ref: null,
          queue_id: null,
          scorer_tags: []
        })
        // Another project sees none of it.
        expect((yield* trace.feedbackQuery({ project_id: "fb/other" })).result).toEqual([])
      })
    )

    it.effect("weave_ref must be a weave:/// ref of the request's project", () =>
      Effect.gen(function* () {
        const trace = yield* client
        const project = "fb/refs"
        for (const weaveRef of [ref("fb/elsewhere"), "not-a-ref", "weave:///fb/refs", "weave:///fb/refs/object"]) {
          const { status, reason } = yield* rejected(trace.feedbackCreate(feedbackOf(project, { weave_ref: weaveRef })))
          expect(status).toBe(400)
          expect(reason).toBe(`Invalid weave_ref: ${weaveRef}, expected a weave:///${project}/... ref`)
        }
        const onCall = yield* trace.feedbackCreate(feedbackOf(project, { weave_ref: ref(project, `call/${uuid(1)}`) }))
        expect(onCall.id.length).toBeGreaterThan(0)
      })
    )

    it.effect("reactions: exactly one emoji, stored with alias, detoned and detoned_alias", () =>
      Effect.gen(function* () {
        const trace = yield* client
        const project = "fb/reactions"
        const reaction = (payload: JsonObject) =>
          trace.feedbackCreate(feedbackOf(project, { feedback_type: "wandb.reaction.1", payload }))
        const plain = yield* reaction({ emoji: "👍" })
        expect(plain.payload).toEqual({
          emoji: "👍",
          alias: ":thumbs_up:",
          detoned: "👍",
          detoned_alias: ":thumbs_up:"
        })
        const toned = yield* reaction({ emoji: "👍🏽" })
        expect(toned.payload).toEqual({
          emoji: "👍🏽",
          alias: ":thumbs_up_medium_skin_tone:",
          detoned: "👍",
          detoned_alias: ":thumbs_up:"
        })
        const heart = yield* reaction({ emoji: "❤️" })
        expect(heart.payload.alias).toBe(":red_heart:")
        // An emoji outside the name table is its own alias.
        const flamingo = yield* reaction({ emoji: "🦩" })
        expect(flamingo.payload).toMatchObject({ alias: "🦩", detoned: "🦩", detoned_alias: "🦩" })
        const stored = yield* trace.feedbackQuery({ project_id: project, query: idEq(toned.id) })
        expect(stored.result[0]?.payload).toEqual(toned.payload)

        for (const emoji of ["👍👎", "no emoji", ""]) {
          const { status, reason } = yield* rejected(reaction({ emoji }))
          expect(status).toBe(400)
          expect(reason).toBe("Value of emoji key in payload must be exactly one emoji")
        }
        const missing = yield* rejected(reaction({ text: "👍" }))
        expect(missing).toEqual({
          status: 400,
          reason: "Invalid payload for feedback_type wandb.reaction.1: emoji: Field required"
        })
        const notText = yield* rejected(reaction({ emoji: 1 }))
        expect(notText.reason).toBe(
          "Invalid payload for feedback_type wandb.reaction.1: emoji: Input should be a valid string"
        )
      })
    )

    it.effect("notes: a string of 1 to 1024 characters", () =>
      Effect.gen(function* () {
        const trace = yield* client
        const project = "fb/notes"
        const note = (payload: JsonObject) =>
          trace.feedbackCreate(feedbackOf(project, { feedback_type: "wandb.note.1", payload }))
        const longest = "é".repeat(1024)
        expect((yield* note({ note: longest })).payload).toEqual({ note: longest })
        const prefix = "Invalid payload for feedback_type wandb.note.1: note: "
        expect(yield* rejected(note({ note: "é".repeat(1025) }))).toEqual({
          status: 400,
          reason: `${prefix}String should have at most 1024 characters`
        })
        expect((yield* rejected(note({ note: "" }))).reason).toBe(`${prefix}String should have at least 1 character`)
        expect((yield* rejected(note({ note: 3 }))).reason).toBe(`${prefix}Input should be a valid string`)
        expect((yield* rejected(note({}))).reason).toBe(`${prefix}Field required`)
      })
    )

    it.effect("annotations: wandb.annotation.<name> with an existing object ref of that name and a value", () =>
      Effect.gen(function* () {
        const trace = yield* client
        const project = "fb/annotations"
        const { digest } = yield* trace.objCreate({
          obj: { project_id: project, object_id: "quality", val: { _type: "AnnotationSpec", name: "quality" } }
        })
        const specRef = ref(project, `object/quality:${digest}`)
        const annotation = (fields: Partial<FeedbackCreateReq>) =>
          trace.feedbackCreate(
            feedbackOf(project, { feedback_type: "wandb.annotation.quality", payload: { value: 4 }, ...fields })
          )
        const ok = yield* annotation({ annotation_ref: specRef })
        expect(ok.payload).toEqual({ value: 4 })
        expect((yield* annotation({ annotation_ref: ref(project, "object/quality:latest") })).payload).toEqual({
          value: 4
        })

        const reasons = [
          [{}, "annotation_ref is required for annotation feedback"],
          [
            { feedback_type: "wandb.annotationquality", annotation_ref: specRef },
            "Invalid annotation feedback type: wandb.annotationquality"
          ],
          [
            { annotation_ref: ref(project, `op/quality:${digest}`) },
            `Invalid ref: ${ref(project, `op/quality:${digest}`)}, expected an object ref`
          ],
          [
            { annotation_ref: ref(project, "object/other:abc") },
            "annotation_ref must point to an object with name quality"
          ],
          [
            { annotation_ref: ref(project, "object/quality:nope") },
            `Annotation ref ${ref(project, "object/quality:nope")} not found`
          ],
          [
            { annotation_ref: ref("fb/x", `object/quality:${digest}`) },
            `Annotation ref ${ref("fb/x", `object/quality:${digest}`)} does not match project id ${project}`
          ],
          [
            { annotation_ref: specRef, payload: { score: 4 } },
            "Invalid payload for feedback_type wandb.annotation.quality: value: Field required"
          ],
          [
            { feedback_type: "custom", annotation_ref: specRef },
            "annotation_ref is not allowed for non-annotation feedback"
          ]
        ] as const
        for (const [fields, reason] of reasons) {
          expect(yield* rejected(annotation(fields))).toEqual({ status: 400, reason })
        }
      })
    )

    it.effect("runnables, agent monitors and the scorer fields", () =>
      Effect.gen(function* () {
        const trace = yield* client
        const project = "fb/runnables"
        const opRef = ref(project, "op/judge:abc")
        const objRef = ref(project, "object/judge:abc")
        const callRef = ref(project, `call/${uuid(7)}`)
        const runnable = (fields: Partial<FeedbackCreateReq>) =>
          trace.feedbackCreate(
            feedbackOf(project, {
              feedback_type: "wandb.runnable.judge",
              payload: { output: { pass: true } },
              ...fields
            })
          )
        yield* runnable({ runnable_ref: objRef })
        const onOp = yield* runnable({
          runnable_ref: opRef,
          call_ref: callRef,
          scorer_tags: ["good"],
          scorer_ratings: { r: 0.5 }
        })
        const [row] = (yield* trace.feedbackQuery({ project_id: project, query: idEq(onOp.id) })).result
        expect(row).toMatchObject({
          runnable_ref: opRef,
          call_ref: callRef,
          scorer_tags: ["good"],
          scorer_ratings: { r: 0.5 }
        })

        const reasons = [
          [{}, "runnable_ref is required for runnable feedback"],
          [
            { feedback_type: "wandb.runnablejudge", runnable_ref: objRef },
            "Invalid runnable feedback type: wandb.runnablejudge"
          ],
          [{ runnable_ref: ref(project, "object/other:abc") }, "runnable_ref must point to an object with name judge"],
          [{ runnable_ref: opRef }, "call_ref is required for runnable feedback on ops"],
          [
            { runnable_ref: ref(project, `call/${uuid(1)}`) },
            `Invalid ref: ${ref(project, `call/${uuid(1)}`)}, expected an op ref or an object ref`
          ],
          [
            { runnable_ref: objRef, payload: { pass: true } },
            "Invalid payload for feedback_type wandb.runnable.judge: output: Field required"
          ],
          [{ runnable_ref: opRef, call_ref: objRef }, `Invalid ref: ${objRef}, expected a call ref`],
          [{ feedback_type: "custom", runnable_ref: objRef }, "runnable_ref is not allowed for non-runnable feedback"],
          [{ feedback_type: "custom", call_ref: callRef }, "call_ref is not allowed for non-runnable feedback"],
          [{ feedback_type: "custom", trigger_ref: objRef }, "trigger_ref is not allowed for non-runnable feedback"],
          [{ feedback_type: "wandb.agent_monitor" }, "runnable_ref is required for agent monitor feedback"],
          [
            { feedback_type: "wandb.agent_monitor", runnable_ref: objRef },
            "call_ref is required for agent monitor feedback"
          ],
          [
            { feedback_type: "wandb.agent_monitor", runnable_ref: objRef, call_ref: callRef },
            "trigger_ref is required for agent monitor feedback"
          ],
          [{ feedback_type: "wandb.agent_user_feedback" }, "scorer_tags is required for agent user feedback"]
        ] as const
        for (const [fields, reason] of reasons) {
          expect(yield* rejected(runnable(fields))).toEqual({ status: 400, reason })
        }
        const monitored = yield* runnable({
          feedback_type: "wandb.agent_monitor",
          runnable_ref: objRef,
          call_ref: callRef,
          trigger_ref: ref(project, "object/monitor:abc"),
          scorer_tags: ["x"]
        })
        expect(monitored.payload).toEqual({ output: { pass: true } })
        expect((yield* runnable({ feedback_type: "wandb.agent_user_feedback", scorer_tags: ["meh"] })).id).toBeTruthy()

        const scorer = yield* rejected(trace.feedbackCreate(feedbackOf(project, { scorer_ratings: { r: 1 } })))
        expect(scorer.status).toBe(400)
        expect(scorer.reason).toContain("are only allowed on wandb.agent_monitor, wandb.agent_user_feedback, or")
        // Empty scorer fields are not set, as the service reads them.
        expect((yield* trace.feedbackCreate(feedbackOf(project, { scorer_tags: [] }))).id).toBeTruthy()
      })
    )

    it.effect("queues, unknown wandb. types, the payload limit and schema rejections", () =>
      Effect.gen(function* () {
        const trace = yield* client
        const project = "fb/misc"
        expect(yield* rejected(trace.feedbackCreate(feedbackOf(project, { queue_id: "q1" })))).toEqual({
          status: 400,
          reason: "Queue q1 not found or has been deleted"
        })
        // The service reserves the prefix but checks only the types it knows.
        const reserved = yield* trace.feedbackCreate(feedbackOf(project, { feedback_type: "wandb.something.2" }))
        expect(reserved.payload).toEqual({ score: 1 })

        // 1 MiB of characters as Python's json.dumps writes them: each "é" is 6 (`\u00e9`), so the body stays
        // under the server's 1 MiB body limit while the payload does not.
        const text = (n: number) => ({ t: "é".repeat(n) })
        const overhead = '{"t": ""}'.length
        const fits = Math.floor((1024 * 1024 - overhead) / 6)
        expect((yield* trace.feedbackCreate(feedbackOf(project, { payload: text(fits) }))).id).toBeTruthy()
        expect(yield* rejected(trace.feedbackCreate(feedbackOf(project, { payload: text(fits + 1) })))).toEqual({
          status: 400,
          reason: "Feedback payload too large"
        })

        const noType = yield* send("POST", "/feedback/create", {
          project_id: project,
          weave_ref: ref(project),
          payload: {}
        })
        expect(noType.status).toBe(422)
        const notObject = yield* send("POST", "/feedback/create", { ...feedbackOf(project), payload: [1] })
        expect(notObject.status).toBe(422)
      })
    )

    it.effect("query: fields with payload paths, the query language, sort_by, limit and offset", () =>
      Effect.gen(function* () {
        const trace = yield* client
        const project = "fb/query"
        const ids: Array<string> = []
        for (const [type, score, note] of [
          ["score", 3, "c"],
          ["score", 1, "a"],
          ["other", 2, "b"],
          ["score", 5, "e"]
        ] as const) {
          ids.push(
            (yield* trace.feedbackCreate(
              feedbackOf(project, { feedback_type: type, payload: { score, note, nested: { n: score } } })
            )).id
          )
        }
        const picked = yield* trace.feedbackQuery({
          project_id: project,
          fields: ["id", "feedback_type", "payload.note", "payload.score", "payload.nested", "payload.missing"],
          limit: 1
        })
        expect(picked.result).toEqual([
          {
            id: ids[0],
            feedback_type: "score",
            "payload.note": "c",
            "payload.score": "3",
            "payload.nested": "",
            "payload.missing": ""
          }
        ])

        const scores = yield* trace.feedbackQuery({
          project_id: project,
          fields: ["id"],
          query: {
            $expr: {
              $and: [
                { $eq: [{ $getField: "feedback_type" }, { $literal: "score" }] },
                { $gt: [{ $getField: "payload.nested.n" }, { $literal: 1 }] }
              ]
            }
          },
          sort_by: [{ field: "payload.score", direction: "desc" }]
        })
        expect(scores.result).toEqual([{ id: ids[3] }, { id: ids[0] }])

        const paged = yield* trace.feedbackQuery({
          project_id: project,
          fields: ["payload"],
          sort_by: [{ field: "payload.note", direction: "asc" }],
          offset: 1,
          limit: 2
        })
        expect(paged.result.map((row) => (row.payload as JsonObject).note)).toEqual(["b", "c"])

        const byTime = yield* trace.feedbackQuery({
          project_id: project,
          fields: ["id"],
          sort_by: [
            { field: "created_at", direction: "desc" },
            { field: "id", direction: "asc" }
          ]
        })
        expect(byTime.result).toHaveLength(4)

        const contains = yield* trace.feedbackQuery({
          project_id: project,
          fields: ["id"],
          query: { $expr: { $in: [{ $getField: "id" }, [{ $literal: ids[1] ?? "" }, { $literal: ids[2] ?? "" }]] } }
        })
        expect(contains.result).toEqual([{ id: ids[1] }, { id: ids[2] }])

        const unknown: ReadonlyArray<Partial<FeedbackQueryReq>> = [
          { fields: ["nope"] },
          { query: { $expr: { $eq: [{ $getField: "nope" }, { $literal: 1 }] } } },
          { sort_by: [{ field: "nope", direction: "asc" }] }
        ]
        for (const request of unknown) {
          expect(yield* rejected(trace.feedbackQuery({ project_id: project, ...request }))).toEqual({
            status: 400,
            reason: "Unknown field: nope"
          })
        }
      })
    )

    it.effect("purge: only $eq of id or $or of those, within the project", () =>
      Effect.gen(function* () {
        const trace = yield* client
        const project = "fb/purge"
        const ids: Array<string> = []
        for (let i = 0; i < 4; i++) ids.push((yield* trace.feedbackCreate(feedbackOf(project))).id)
        const other = yield* trace.feedbackCreate(feedbackOf("fb/purge-other"))

        expect(yield* trace.feedbackPurge({ project_id: project, query: idEq(ids[0] ?? "") })).toEqual({})
        yield* trace.feedbackPurge({
          project_id: project,
          query: { $expr: { $or: [idEq(ids[1] ?? "").$expr, idEq(ids[2] ?? "").$expr] } }
        })
        // Another project's id is not this project's to purge.
        yield* trace.feedbackPurge({ project_id: project, query: idEq(other.id) })
        expect((yield* trace.feedbackQuery({ project_id: project, fields: ["id"] })).result).toEqual([{ id: ids[3] }])
        expect((yield* trace.feedbackQuery({ project_id: "fb/purge-other", fields: ["id"] })).result).toEqual([
          { id: other.id }
        ])

        const message = "Can only purge feedback by specifying one or more feedback ids"
        const invalid: ReadonlyArray<readonly [Query, string]> = [
          [{ $expr: { $in: [{ $getField: "id" }, [{ $literal: ids[3] ?? "" }]] } }, message],
          [{ $expr: { $eq: [{ $getField: "feedback_type" }, { $literal: "custom" }] } }, message],
          [{ $expr: { $eq: [{ $getField: "id" }, { $literal: 3 }] } }, message],
          [{ $expr: { $eq: [{ $literal: ids[3] ?? "" }, { $getField: "id" }] } }, message],
          [{ $expr: { $gt: [{ $getField: "id" }, { $literal: "" }] } }, message],
          [{ $expr: { $and: [idEq(ids[3] ?? "").$expr] } }, message],
          [
            { $expr: { $or: [idEq(ids[3] ?? "").$expr, { $gt: [{ $getField: "id" }, { $literal: "" }] }] } },
            "Can only purge by specifying one or more ids"
          ]
        ]
        for (const [query, reason] of invalid) {
          expect(yield* rejected(trace.feedbackPurge({ project_id: project, query }))).toEqual({ status: 400, reason })
        }
        expect((yield* trace.feedbackQuery({ project_id: project, fields: ["id"] })).result).toEqual([{ id: ids[3] }])
      })
    )

    it.effect("replace: the old feedback goes, the new one has a new id; an invalid replacement changes nothing", () =>
      Effect.gen(function* () {
        const trace = yield* client
        const project = "fb/replace"
        const first = yield* trace.feedbackCreate(
          feedbackOf(project, { feedback_type: "wandb.note.1", payload: { note: "v1" } })
        )
        const second = yield* trace.feedbackReplace({
          ...feedbackOf(project, { feedback_type: "wandb.note.1", payload: { note: "v2" } }),
          feedback_id: first.id
        })
        expect(second.id).not.toBe(first.id)
        expect(second.payload).toEqual({ note: "v2" })
        const bad = yield* rejected(
          trace.feedbackReplace({
            ...feedbackOf(project, { feedback_type: "wandb.note.1", payload: { note: "" } }),
            feedback_id: second.id
          })
        )
        expect(bad.status).toBe(400)
        const rows = (yield* trace.feedbackQuery({ project_id: project, fields: ["id", "payload.note"] })).result
        expect(rows).toEqual([{ id: second.id, "payload.note": "v2" }])
      })
    )

    it.effect("costs: create answers [id, llm_id] pairs; query with defaults, fields, query, sort and paging", () =>
      Effect.gen(function* () {
        const trace = yield* client
        const project = "cost/create"
        const { ids } = yield* trace.costCreate({
          project_id: project,
          costs: {
            "gpt-a": { prompt_token_cost: 0.01, completion_token_cost: 0.03 },
            "gpt-b": {
              prompt_token_cost: 0.5,
              completion_token_cost: 1.5,
              prompt_token_cost_unit: "EUR",
              completion_token_cost_unit: "EUR",
              effective_date: "2026-01-01T00:00:00+00:00",
              provider_id: "openai"
            }
          }
        })
        expect(ids.map(([, llm]) => llm)).toEqual(["gpt-a", "gpt-b"])
        expect(new Set(ids.map(([id]) => id)).size).toBe(2)

        const { results } = yield* trace.costQuery({ project_id: project })
        expect(results).toHaveLength(2)
        expect(results[0]).toMatchObject({
          id: ids[0]?.[0],
          llm_id: "gpt-a",
          prompt_token_cost: 0.01,
          completion_token_cost: 0.03,
          prompt_token_cost_unit: "USD",
          completion_token_cost_unit: "USD",
          provider_id: "default"
        })
        expect(Number.isFinite(Date.parse(results[0]?.effective_date ?? ""))).toBe(true)
        expect(results[1]).toEqual({
          id: ids[1]?.[0],
          llm_id: "gpt-b",
          prompt_token_cost: 0.5,
          completion_token_cost: 1.5,
          prompt_token_cost_unit: "EUR",
          completion_token_cost_unit: "EUR",
          effective_date: "2026-01-01T00:00:00Z",
          provider_id: "openai"
        })

        const picked = yield* trace.costQuery({ project_id: project, fields: ["llm_id", "provider_id", "created_at"] })
        expect(picked.results).toEqual([
          { llm_id: "gpt-a", provider_id: "default" },
          { llm_id: "gpt-b", provider_id: "openai" }
        ])
        const queried = yield* trace.costQuery({
          project_id: project,
          fields: ["llm_id"],
          query: { $expr: { $gt: [{ $getField: "prompt_token_cost" }, { $literal: 0.1 }] } }
        })
        expect(queried.results).toEqual([{ llm_id: "gpt-b" }])
        const sorted = yield* trace.costQuery({
          project_id: project,
          fields: ["llm_id"],
          sort_by: [{ field: "completion_token_cost", direction: "desc" }],
          offset: 1,
          limit: 5
        })
        expect(sorted.results).toEqual([{ llm_id: "gpt-a" }])
        expect((yield* trace.costQuery({ project_id: "cost/none" })).results).toEqual([])

        expect(yield* rejected(trace.costQuery({ project_id: project, fields: ["nope"] }))).toEqual({
          status: 400,
          reason: "Unknown field: nope"
        })
        const badDate = yield* rejected(
          trace.costCreate({
            project_id: project,
            costs: { x: { prompt_token_cost: 1, completion_token_cost: 1, effective_date: "yesterday" } }
          })
        )
        expect(badDate).toEqual({ status: 400, reason: "Invalid effective_date for x: yesterday" })
        const missing = yield* send("POST", "/cost/create", {
          project_id: project,
          costs: { x: { prompt_token_cost: 1 } }
        })
        expect(missing.status).toBe(422)
      })
    )

    it.effect("cost purge: $eq, $in or $or of ids, within the project; anything else is 400", () =>
      Effect.gen(function* () {
        const trace = yield* client
        const project = "cost/purge"
        const costs = Object.fromEntries(
          ["a", "b", "c", "d", "e"].map((llm) => [llm, { prompt_token_cost: 1, completion_token_cost: 2 }])
        )
        const ids = (yield* trace.costCreate({ project_id: project, costs })).ids.map(([id]) => id)
        const [other] = (yield* trace.costCreate({
          project_id: "cost/purge-other",
          costs: { z: { prompt_token_cost: 1, completion_token_cost: 1 } }
        })).ids
        const remaining = () =>
          Effect.map(trace.costQuery({ project_id: project, fields: ["llm_id"] }), (r) =>
            r.results.map((c) => c.llm_id)
          )

        expect(yield* trace.costPurge({ project_id: project, query: idEq(ids[0] ?? "") })).toEqual({})
        yield* trace.costPurge({
          project_id: project,
          query: { $expr: { $in: [{ $getField: "id" }, [{ $literal: ids[1] ?? "" }, { $literal: ids[2] ?? "" }]] } }
        })
        yield* trace.costPurge({ project_id: project, query: { $expr: { $or: [idEq(ids[3] ?? "").$expr] } } })
        yield* trace.costPurge({ project_id: project, query: idEq(other?.[0] ?? "") })
        expect(yield* remaining()).toEqual(["e"])
        expect((yield* trace.costQuery({ project_id: "cost/purge-other" })).results).toHaveLength(1)

        const message = "Can only purge costs by specifying one or more cost ids"
        for (const query of [
          { $expr: { $eq: [{ $getField: "llm_id" }, { $literal: "e" }] } },
          { $expr: { $in: [{ $getField: "id" }, [{ $literal: 1 }]] } },
          { $expr: { $not: [idEq(ids[4] ?? "").$expr] } }
        ] satisfies ReadonlyArray<Query>) {
          expect(yield* rejected(trace.costPurge({ project_id: project, query }))).toEqual({
            status: 400,
            reason: message
          })
        }
        expect(yield* remaining()).toEqual(["e"])
      })
    )

    it.effect(
      "calls can carry their feedback and priced usage (the calls server's include_feedback/include_costs)",
      () =>
        Effect.gen(function* () {
          const trace = yield* client
          const project = "fb/calls"
          const [withUsage, without] = [uuid(101), uuid(102)]
          for (const id of [withUsage, without]) {
            yield* trace.callStart({
              start: {
                project_id: project,
                id,
                op_name: "llm",
                started_at: "2026-03-01T00:00:00.000Z",
                attributes: {},
                inputs: {}
              }
            })
          }
          yield* trace.callEnd({
            end: {
              project_id: project,
              id: withUsage,
              ended_at: "2026-03-01T00:00:01.000Z",
              summary: {
                usage: {
                  "gpt-a": {
                    requests: 2,
                    prompt_tokens: 100,
                    input_tokens: 20,
                    completion_tokens: 10,
                    total_tokens: 130
                  },
                  "no-price": { requests: 1, prompt_tokens: 5 }
                }
              }
            }
          })
          // Prices: one in effect at the call's start, a later one that is not yet, and an older one.
          yield* trace.costCreate({
            project_id: project,
            costs: {
              "gpt-a": { prompt_token_cost: 0.5, completion_token_cost: 2, effective_date: "2026-02-01T00:00:00Z" }
            }
          })
          yield* trace.costCreate({
            project_id: project,
            costs: {
              "gpt-a": { prompt_token_cost: 9, completion_token_cost: 9, effective_date: "2026-04-01T00:00:00Z" }
            }
          })
          yield* trace.costCreate({
            project_id: project,
            costs: {
              "gpt-a": { prompt_token_cost: 1, completion_token_cost: 1, effective_date: "2026-01-01T00:00:00Z" }
            }
          })
          const note = yield* trace.feedbackCreate(
            feedbackOf(project, {
              weave_ref: ref(project, `call/${withUsage}`),
              feedback_type: "wandb.note.1",
              payload: { note: "hi" }
            })
          )
          yield* trace.feedbackCreate(feedbackOf(project, { weave_ref: ref(project, "object/thing:abc") }))

          // Through the calls server: stream_query with both flags, call/read with include_costs.
          const query = (flags: { readonly include_feedback?: boolean; readonly include_costs?: boolean }) =>
            Effect.map(Stream.runCollect(trace.callsStreamQuery({ project_id: project, ...flags })), (chunk) =>
              Chunk.toArray(chunk).map((call) => JSON.parse(JSON.stringify(call)) as JsonObject)
            )
          const decorated = yield* query({ include_feedback: true, include_costs: true })
          expect(decorated.map((call) => call.id)).toEqual([withUsage, without])
          const weave = (i: number) => ((decorated[i]?.summary as JsonObject | undefined)?.weave ?? {}) as JsonObject
          expect(weave(0).status).toBe("success")
          expect(weave(0).feedback).toEqual([
            {
              feedback_type: "wandb.note.1",
              weave_ref: ref(project, `call/${withUsage}`),
              payload: { note: "hi" },
              creator: null,
              created_at: note.created_at,
              wb_user_id: "local",
              runnable_ref: null,
              call_ref: null,
              trigger_ref: null,
              annotation_ref: null
            }
          ])
          expect(weave(0).costs).toEqual({
            "gpt-a": expect.objectContaining({
              prompt_tokens: 120,
              completion_tokens: 10,
              requests: 2,
              total_tokens: 130,
              prompt_token_cost: 0.5,
              completion_token_cost: 2,
              prompt_tokens_total_cost: 60,
              completion_tokens_total_cost: 20,
              prompt_token_cost_unit: "USD",
              effective_date: "2026-02-01T00:00:00Z",
              provider_id: "default",
              pricing_level: "project",
              pricing_level_id: project
            })
          })
          expect(weave(1).feedback).toEqual([])
          expect(weave(1).costs).toBeUndefined()
          const plain = yield* query({})
          const plainWeave = (plain[0]?.summary as JsonObject | undefined)?.weave as JsonObject | undefined
          expect(plainWeave?.status).toBe("success")
          expect(plainWeave?.feedback).toBeUndefined()
          expect(plainWeave?.costs).toBeUndefined()
          const read = yield* trace.callRead({ project_id: project, id: withUsage, include_costs: true })
          const readWeave = (read.call?.summary as JsonObject | undefined)?.weave as JsonObject | undefined
          expect(readWeave?.costs).toEqual(weave(0).costs)
          expect(readWeave?.feedback).toBeUndefined()
        })
    )
  })
})
