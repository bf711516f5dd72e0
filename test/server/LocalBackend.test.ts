import { existsSync } from "node:fs"
import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import * as LocalBackend from "../../src/LocalBackend.js"

/** The fields of the answers the memo-map test reads. */
interface Reply {
  readonly id: string
  readonly status: string
  readonly step: number
  readonly data: ReadonlyArray<{ readonly type: string }>
}

describe("LocalBackend", () => {
  it.live("starts on a free loopback port over a temporary data dir, and stops and cleans up when released", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(LocalBackend.layer(), scope)
      const backend = Context.get(context, LocalBackend.LocalBackend)
      expect(backend.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
      expect(Redacted.value(backend.apiKey)).toMatch(/^erl-[\w-]{32}$/)
      expect(existsSync(backend.dataDir)).toBe(true)
      const ok = yield* Effect.promise(() =>
        fetch(`${backend.url}/v1/health`, {
          headers: { authorization: `Bearer ${Redacted.value(backend.apiKey)}` }
        })
      )
      expect(ok.status).toBe(200)
      yield* Scope.close(scope, Exit.void)
      expect(existsSync(backend.dataDir)).toBe(false)
      const after = yield* Effect.either(Effect.tryPromise(() => fetch(`${backend.url}/v1/health`)))
      expect(after._tag).toBe("Left")
    })
  )

  it.live("two backends run side by side, each with its own key", () =>
    Effect.gen(function* () {
      const scope = yield* Effect.scope
      const start = Effect.map(Layer.buildWithScope(LocalBackend.layer(), scope), (context) =>
        Context.get(context, LocalBackend.LocalBackend)
      )
      const [a, b] = yield* Effect.all([start, start])
      expect(a.url).not.toBe(b.url)
      expect(Redacted.value(a.apiKey)).not.toBe(Redacted.value(b.apiKey))
    }).pipe(Effect.scoped)
  )

  it.live(
    "two backends built with one memo map each keep to their own store (a model made on the second trains there)",
    () =>
      Effect.gen(function* () {
        const scope = yield* Effect.scope
        // What two `it.layer`s of one file, or one runtime building two backends, do: share a memo map.
        const memoMap = yield* Layer.makeMemoMap
        const start = () =>
          Effect.map(Layer.buildWithMemoMap(LocalBackend.layer(), memoMap, scope), (context) =>
            Context.get(context, LocalBackend.LocalBackend)
          )
        const first = yield* start()
        const second = yield* start()
        const call = (path: string, body?: unknown) =>
          Effect.promise(async () => {
            const response = await fetch(`${second.url}${path}`, {
              method: body === undefined ? "GET" : "POST",
              headers: { authorization: `Bearer ${Redacted.value(second.apiKey)}`, "content-type": "application/json" },
              ...(body === undefined ? {} : { body: JSON.stringify(body) })
            })
            return { status: response.status, json: (await response.json()) as Reply }
          })
        expect(first.dataDir).not.toBe(second.dataDir)
        const model = yield* call("/v1/preview/models", { project: "p", name: "m", base_model: "effect-rl/tiny" })
        expect(model.status).toBe(200)
        const hi = { messages_and_choices: [{ role: "user", content: "hi" }], reward: 1 }
        const job = yield* call("/v1/preview/training-jobs", {
          model_id: model.json.id,
          trajectory_groups: [{ trajectories: [hi, hi] }]
        })
        expect(job.status).toBe(200)
        let events: ReadonlyArray<{ readonly type: string }> = []
        for (let i = 0; i < 100 && events.at(-1)?.type !== "training_ended"; i++) {
          const page = yield* call(`/v1/preview/training-jobs/${job.json.id}/events?wait_ms=200`)
          expect(page.status).toBe(200)
          events = page.json.data
        }
        expect(events.map((e) => e.type)).toEqual(["training_started", "training_ended"])
        const record = yield* call(`/v1/preview/training-jobs/${job.json.id}`)
        expect(record.json).toMatchObject({ status: "succeeded", step: 1 })
      }).pipe(Effect.scoped)
  )
})
