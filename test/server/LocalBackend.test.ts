import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import { vi } from "vitest"
import * as LocalBackend from "../../src/LocalBackend.js"

/** What `console.log` printed while the effect ran (it is the default `Console`'s). */
const printed = <A, E, R>(body: (lines: Array<string>) => Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const lines: Array<string> = []
      const spy = vi.spyOn(console, "log").mockImplementation((...args: Array<unknown>) => {
        lines.push(args.map(String).join(" "))
      })
      return { lines, spy }
    }),
    ({ lines }) => body(lines),
    ({ spy }) => Effect.sync(() => spy.mockRestore())
  )

/** The backend's health endpoint answers (the server is up). */
const healthy = (backend: LocalBackend.Service) =>
  Effect.promise(() =>
    fetch(`${backend.url}/v1/health`, { headers: { authorization: `Bearer ${Redacted.value(backend.apiKey)}` } }).then(
      (response) => response.status === 200,
      () => false
    )
  )

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

  it.live("printSignInLink prints a one-time link, and where the key is only while it is there", () =>
    printed((lines) =>
      Effect.gen(function* () {
        // A temporary data directory: the key goes with it when the program ends, and the note says so.
        const scope = yield* Scope.make()
        const context = yield* Layer.buildWithScope(LocalBackend.layer({ printSignInLink: true }), scope)
        const backend = Context.get(context, LocalBackend.LocalBackend)
        const keyFile = join(backend.dataDir, "api-key")
        expect(lines).toEqual([
          `dashboard: ${backend.url}/ui/#token=${lines[0]?.match(/#token=([\w-]+)/)?.[1]}\n` +
            `  (a one-time sign-in link, good for 10 minutes; after that, sign in with the key in ${keyFile}, ` +
            "while this program runs: its data directory is temporary, removed when it ends)\n"
        ])
        expect(lines[0]).toMatch(/#token=[\w-]{43}\n/)
        expect(lines[0]).not.toContain(Redacted.value(backend.apiKey))
        expect(existsSync(keyFile)).toBe(true)
        yield* Scope.close(scope, Exit.void)
        expect(existsSync(keyFile)).toBe(false)

        // A data directory of the caller's (and a shorter link life): the key file it names stays.
        lines.length = 0
        const dir = mkdtempSync(join(tmpdir(), "effect-rl-kept-"))
        yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
        const kept = yield* Scope.make()
        yield* Layer.buildWithScope(
          LocalBackend.layer({ dataDir: dir, printSignInLink: true, signInTtl: "90 seconds" }),
          kept
        )
        yield* Scope.close(kept, Exit.void)
        expect(lines).toHaveLength(1)
        expect(lines[0]).toContain(
          `(a one-time sign-in link, good for 90 seconds; after that, sign in with the key in ${join(dir, "api-key")})`
        )
        expect(existsSync(join(dir, "api-key"))).toBe(true)
      })
    ).pipe(Effect.scoped)
  )

  it.live("keepServing keeps the backend up after the program succeeds, until it is interrupted", () =>
    printed((lines) =>
      Effect.gen(function* () {
        // A program on the backend that hands it out and succeeds (or fails), run as `NodeRuntime.runMain` runs one.
        const program = (outcome: Effect.Effect<void, string>) =>
          Effect.gen(function* () {
            const started = yield* Deferred.make<LocalBackend.Service>()
            const fiber = yield* Effect.fork(
              Effect.provide(
                Effect.flatMap(LocalBackend.LocalBackend, (backend) =>
                  Effect.zipRight(Deferred.succeed(started, backend), outcome)
                ),
                LocalBackend.layer({ keepServing: true })
              )
            )
            return { fiber, backend: yield* Deferred.await(started) }
          })
        const { fiber, backend } = yield* program(Effect.void)
        while (!lines.some((line) => line.includes("until you press Ctrl-C"))) yield* Effect.sleep("20 millis")
        // Still serving after the program's end, with a fresh link and the key file it names still there.
        expect(lines.join("\n")).toContain(
          `the dashboard stays at ${backend.url}/ui/ until you press Ctrl-C; a fresh sign-in link:`
        )
        expect(lines.at(-1)).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/ui\/#token=[\w-]{43}\n {2}\(a one-time sign-in link/)
        expect(lines.at(-1)).toContain(`sign in with the key in ${join(backend.dataDir, "api-key")})`)
        expect(existsSync(join(backend.dataDir, "api-key"))).toBe(true)
        yield* Effect.sleep("200 millis")
        expect(yield* healthy(backend)).toBe(true)
        expect(fiber.unsafePoll()).toBeNull()
        // Ctrl-C (the main fiber interrupted): the wait ends, the server stops and the temporary directory goes.
        yield* Fiber.interrupt(fiber)
        expect(yield* healthy(backend)).toBe(false)
        expect(existsSync(backend.dataDir)).toBe(false)

        // A program that fails stops at once, its failure its own.
        lines.length = 0
        const failed = yield* program(Effect.fail("the loop failed"))
        expect(yield* Fiber.await(failed.fiber)).toEqual(Exit.fail("the loop failed"))
        expect(yield* healthy(failed.backend)).toBe(false)
        expect(lines).toEqual([])
      })
    )
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
        expect(record.json).toMatchObject({ status: "COMPLETED", step: 1 })
      }).pipe(Effect.scoped)
  )
})
