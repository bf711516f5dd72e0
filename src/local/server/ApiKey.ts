/**
 * The embedded backend's API key: from `--api-key`, else `EFFECT_RL_API_KEY`, else the key stored in the
 * data directory (`api-key`, mode 0600), else a freshly generated one, stored there so a restart reuses it.
 *
 * @since 0.1.0
 */
import { randomBytes } from "node:crypto"
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"

/** The name of the key file inside the data directory. */
export const KEY_FILE = "api-key"

/** Where the key came from; `generated` means it is new and the caller should show it once. */
export type Source = "flag" | "env" | "file" | "generated"

/** A resolved key and where it came from. */
export interface Resolved {
  readonly apiKey: Redacted.Redacted<string>
  readonly source: Source
}

/** What the key is resolved from. */
export interface ResolveOptions {
  readonly flag?: string | undefined
  readonly env?: string | undefined
  readonly dataDir: string
}

/** A new random key: `erl-` and 32 url-safe base64 characters (192 bits). */
export const generate = (): string => `erl-${randomBytes(24).toString("base64url")}`

/** Resolves the key; a generated key is written to `<dataDir>/api-key` with mode 0600 before it is returned. */
export const resolve = (
  options: ResolveOptions
): Effect.Effect<Resolved, PlatformError, FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function* () {
    if (options.flag !== undefined && options.flag !== "")
      return { apiKey: Redacted.make(options.flag), source: "flag" }
    if (options.env !== undefined && options.env !== "") return { apiKey: Redacted.make(options.env), source: "env" }
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const file = path.join(options.dataDir, KEY_FILE)
    if (yield* fs.exists(file)) {
      const stored = (yield* fs.readFileString(file)).trim()
      if (stored !== "") return { apiKey: Redacted.make(stored), source: "file" }
    }
    yield* fs.makeDirectory(options.dataDir, { recursive: true, mode: 0o700 })
    const key = generate()
    yield* fs.writeFileString(file, `${key}\n`, { mode: 0o600 })
    yield* fs.chmod(file, 0o600)
    return { apiKey: Redacted.make(key), source: "generated" }
  })
