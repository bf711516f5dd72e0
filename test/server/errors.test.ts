import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { errors } from "../../src/local/server/internal/middleware.js"
import { routes } from "../../src/local/server/internal/validate.js"
import { LocalApi } from "../../src/local/server/LocalApi.js"
import { auth, Backend, call, clean, MAX_BODY, send } from "./support.js"

const MODEL = "00000000-0000-4000-8000-000000000001"
const trajectory = (reward: unknown) => ({ messages_and_choices: [{ role: "user", content: "hi" }], reward })

describe("errors", () => {
  it.layer(Backend)("on the real server", (it) => {
    it.effect("a bad body field is 422 with FastAPI's body and loc down to the field", () =>
      Effect.gen(function* () {
        const reply = yield* send("POST", `/v1/preview/models/${MODEL}/log`, {
          split: "train",
          trajectory_groups: [{ trajectories: [trajectory(1), trajectory("high")] }]
        })
        expect(reply.status).toBe(422)
        expect(reply.json).toEqual({
          detail: [
            {
              loc: ["body", "trajectory_groups", 0, "trajectories", 1, "reward"],
              msg: "Input should be a valid number, unable to parse string as a number",
              type: "float_parsing"
            }
          ]
        })
      })
    )

    it.effect("every failing field is reported, missing ones as `missing`", () =>
      Effect.gen(function* () {
        const reply = yield* send("POST", "/v1/preview/models", { project: "p", name: 3 })
        expect(reply.status).toBe(422)
        expect(reply.json).toEqual({
          detail: [
            { loc: ["body", "name"], msg: "Input should be a valid string", type: "string_type" },
            { loc: ["body", "base_model"], msg: "Field required", type: "missing" }
          ]
        })
      })
    )

    it.effect("a bad path id is 422 at [path, <param>]", () =>
      Effect.gen(function* () {
        const reply = yield* send("GET", "/v1/preview/training-jobs/not-a-uuid")
        expect(reply.status).toBe(422)
        expect(reply.json).toEqual({
          detail: [{ loc: ["path", "training_job_id"], msg: "Input should be a valid UUID", type: "uuid_parsing" }]
        })
        const model = yield* send("DELETE", "/v1/preview/models/42")
        expect(model.json).toEqual({
          detail: [{ loc: ["path", "model_id"], msg: "Input should be a valid UUID", type: "uuid_parsing" }]
        })
      })
    )

    it.effect("a bad query parameter is 422 at [query, <name>]", () =>
      Effect.gen(function* () {
        const reply = yield* send("GET", `/v1/preview/models/${MODEL}/checkpoints?limit=0`)
        expect(reply.status).toBe(422)
        expect(reply.json).toEqual({
          detail: [
            { loc: ["query", "limit"], msg: "Input should be greater than or equal to 1", type: "greater_than_equal" }
          ]
        })
        const more = yield* send("GET", `/v1/preview/models/${MODEL}/checkpoints?limit=abc&order=up`)
        expect(more.json).toEqual({
          detail: [
            {
              loc: ["query", "limit"],
              msg: "Input should be a valid number, unable to parse string as a number",
              type: "float_parsing"
            },
            { loc: ["query", "order"], msg: "Input should be 'asc' or 'desc'", type: "literal_error" }
          ]
        })
      })
    )

    it.effect("path, query and body errors are reported together", () =>
      Effect.gen(function* () {
        const reply = yield* send("GET", "/v1/preview/training-jobs/nope/events?limit=101")
        expect(reply.json).toEqual({
          detail: [
            { loc: ["path", "training_job_id"], msg: "Input should be a valid UUID", type: "uuid_parsing" },
            { loc: ["query", "limit"], msg: "Input should be less than or equal to 100", type: "less_than_equal" }
          ]
        })
      })
    )

    it.effect("a bad path id and a bad body field of one request are both reported", () =>
      Effect.gen(function* () {
        const reply = yield* send("POST", "/v1/preview/models/bad/log", { split: 1, trajectory_groups: [] })
        expect(reply.json).toEqual({
          detail: [
            { loc: ["path", "model_id"], msg: "Input should be a valid UUID", type: "uuid_parsing" },
            { loc: ["body", "split"], msg: "Input should be a valid string", type: "string_type" }
          ]
        })
      })
    )

    it.effect("a body that is not JSON is 422 json_invalid", () =>
      Effect.gen(function* () {
        const reply = yield* send("POST", "/v1/preview/training-jobs", "{not json")
        expect(reply.status).toBe(422)
        expect(reply.json).toEqual({ detail: [{ loc: ["body", 0], msg: "JSON decode error", type: "json_invalid" }] })
      })
    )

    it.effect("unknown fields are tolerated (the request reaches its handler)", () =>
      Effect.gen(function* () {
        const reply = yield* send("POST", "/v1/preview/models", {
          project: "p",
          name: "n",
          base_model: "effect-rl/tiny",
          something_new: { nested: true }
        })
        expect(reply.status).toBe(200)
        expect(reply.json).toMatchObject({ project: "p", name: "n", base_model: "effect-rl/tiny", entity: "local" })
      })
    )

    it.effect("a body over the limit is 413 JSON (declared length)", () =>
      Effect.gen(function* () {
        const reply = yield* send("POST", `/v1/preview/models/${MODEL}/log`, "x".repeat(MAX_BODY + 1))
        expect(reply.status).toBe(413)
        expect(reply.json).toEqual({ detail: `Request body exceeds the limit of ${MAX_BODY} bytes` })
      })
    )

    it.effect("a chunked body over the limit is 413 JSON (counted while reading)", () =>
      Effect.gen(function* () {
        const chunk = new TextEncoder().encode(`${"x".repeat(64 * 1024)}`)
        let sent = 0
        const body = new ReadableStream<Uint8Array>({
          pull(controller) {
            if (sent > MAX_BODY + chunk.length) return controller.close()
            sent += chunk.length
            controller.enqueue(chunk)
          }
        })
        const reply = yield* call(`/v1/preview/models/${MODEL}/log`, {
          method: "POST",
          headers: { ...auth, "content-type": "application/json" },
          body,
          duplex: "half"
        } as RequestInit)
        expect(reply.status).toBe(413)
        expect(reply.json).toEqual({ detail: `Request body exceeds the limit of ${MAX_BODY} bytes` })
      })
    )

    it.effect("an unknown route is a JSON 404", () =>
      Effect.gen(function* () {
        for (const [method, path] of [
          ["GET", "/v1/nothing"],
          ["GET", "/"],
          ["PUT", "/v1/nothing"]
        ] as const) {
          const reply = yield* send(method, path)
          expect(reply.status).toBe(404)
          expect(reply.contentType).toContain("application/json")
          expect(reply.json).toEqual({ detail: "Not Found" })
        }
      })
    )

    it.effect("no error body carries a stack trace or the key", () =>
      Effect.gen(function* () {
        const replies = [
          yield* send("POST", "/v1/preview/training-jobs", "{not json"),
          yield* send("POST", "/v1/preview/models", [1, 2]),
          yield* send("GET", "/v1/preview/training-jobs/x"),
          yield* send("GET", "/v1/nothing"),
          yield* call("/v1/health", { headers: { authorization: "Bearer wrong" } })
        ]
        for (const reply of replies) {
          expect(reply.status).toBeGreaterThanOrEqual(400)
          expect(clean(reply.text)).toBe(true)
        }
      })
    )
  })

  describe("the error middleware", () => {
    const handler = (app: HttpApp.Default) => HttpApp.toWebHandler(errors(routes(LocalApi), 1024)(app))

    it("turns a defect into a 500 with no detail of the cause", async () => {
      const response = await handler(Effect.die(new Error("secret internals")))(new Request("http://x/v1/health"))
      expect(response.status).toBe(500)
      const text = await response.text()
      expect(JSON.parse(text)).toEqual({ detail: "Internal Server Error" })
      expect(text).not.toContain("secret internals")
    })

    it("leaves successful responses alone", async () => {
      const response = await handler(HttpServerResponse.text("fine"))(new Request("http://x/v1/health"))
      expect(response.status).toBe(200)
      expect(await response.text()).toBe("fine")
    })
  })
})
