import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Store from "../../src/local/store/Store.js"

/** A fresh data directory, removed when the scope closes. */
export const tempDir: Effect.Effect<string, never, Scope.Scope> = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "effect-rl-store-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

/** Runs an effect against the store of a data directory: opens it, runs, closes it. */
export const withStore =
  (dataDir: string, options: { readonly recoverOnStart?: boolean } = {}) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.provide(effect, Store.layer({ dataDir, ...options }))

/** A model creation request. */
export const modelRequest = (name: string, extra: { readonly return_existing?: boolean } = {}) => ({
  project: "proj",
  name,
  base_model: "tiny",
  ...extra
})

/** Some bytes standing for weights. */
export const bytes = (...values: ReadonlyArray<number>): Uint8Array => Uint8Array.from(values)
