import { existsSync } from "node:fs"
import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import * as LocalBackend from "../../src/local/LocalBackend.js"

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
})
