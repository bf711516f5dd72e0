import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as TestClock from "effect/TestClock"
import { bodyHash, IdempotencyKeys } from "../../src/local/store/IdempotencyKeys.js"
import { tempDir, withStore } from "./support.js"

const request = "POST /v1/preview/training-jobs"

describe("IdempotencyKeys", () => {
  it.scoped("returns the first response for the same body, conflicts on another, expires after 24 h", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* withStore(dir)(
        Effect.gen(function* () {
          const keys = yield* IdempotencyKeys
          expect(yield* keys.lookup("k", request, "{}")).toEqual(Option.none())
          yield* keys.remember("k", request, "{}", { status: 200, body: '{"id":"1"}' })
          // A second remember of the same key and body keeps the first response.
          yield* keys.remember("k", request, "{}", { status: 200, body: '{"id":"2"}' })
          expect(yield* keys.lookup("k", request, new TextEncoder().encode("{}"))).toEqual(
            Option.some({ status: 200, body: '{"id":"1"}' })
          )
          expect((yield* Effect.flip(keys.lookup("k", request, '{"a":1}'))).reason).toBe("Conflict")
          expect((yield* Effect.flip(keys.remember("k", request, '{"a":1}', { status: 200, body: "" }))).reason).toBe(
            "Conflict"
          )
          // Another request's key space.
          expect(yield* keys.lookup("k", "POST /v1/preview/models", '{"a":1}')).toEqual(Option.none())

          yield* TestClock.adjust("23 hours")
          expect(Option.isSome(yield* keys.lookup("k", request, "{}"))).toBe(true)
          yield* TestClock.adjust("1 hour")
          expect(yield* keys.lookup("k", request, '{"a":1}')).toEqual(Option.none())
          yield* keys.remember("k", request, '{"a":1}', { status: 201, body: "new" })
          expect(yield* keys.lookup("k", request, '{"a":1}')).toEqual(Option.some({ status: 201, body: "new" }))
        })
      )
      // Remembered across reopening.
      const stored = yield* withStore(dir)(
        Effect.flatMap(IdempotencyKeys, (keys) => keys.lookup("k", request, '{"a":1}'))
      )
      expect(Option.isSome(stored)).toBe(true)
    })
  )

  it.scoped("runs the handler once per key, also when requests race", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* withStore(dir)(
        Effect.gen(function* () {
          const keys = yield* IdempotencyKeys
          const runs = yield* Ref.make(0)
          const handler = Effect.map(
            Ref.updateAndGet(runs, (n) => n + 1),
            (n) => ({ status: 200, body: `job ${n}` })
          )
          const responses = yield* Effect.all(
            Array.from({ length: 5 }, () => keys.run("k", request, "body", handler)),
            { concurrency: "unbounded" }
          )
          expect(responses.map((r) => r.body)).toEqual(Array(5).fill("job 1"))
          expect(yield* Ref.get(runs)).toBe(1)
          // A failed handler is not remembered.
          const failed = yield* Effect.flip(keys.run("f", request, "body", Effect.fail("boom" as const)))
          expect(failed).toBe("boom")
          expect((yield* keys.run("f", request, "body", handler)).body).toBe("job 2")
        })
      )
    })
  )

  it("hashes the raw body with SHA-256", () => {
    expect(bodyHash("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
  })
})
