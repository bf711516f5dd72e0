/**
 * The real embedded server for the server tests: started in-process on port 0 over a temporary data
 * directory, with the test key and {@link DATA_ROOT} as the one directory it may read `file://` training
 * data from; and small `fetch` helpers.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as LocalBackend from "../../src/LocalBackend.js"
import { API_KEY } from "../support/clients.js"

/** The body size limit the tests use (1 MiB), small enough to exceed cheaply. */
export const MAX_BODY = 1024 * 1024

/**
 * The directory the test backends may read `file://` training data from (their `allowDirs`): tests that
 * train from a file write it in a directory made under it with {@link dataFilesDir}. Removed at exit.
 */
export const DATA_ROOT = mkdtempSync(join(tmpdir(), "effect-rl-allowed-"))
process.once("exit", () => rmSync(DATA_ROOT, { recursive: true, force: true }))

/** A fresh directory under {@link DATA_ROOT} (so the test backend may read it), named with `prefix`. */
export const dataFilesDir = (prefix: string): string => mkdtempSync(join(DATA_ROOT, prefix))

/** A backend under test: the test key, {@link MAX_BODY}, {@link DATA_ROOT} allowed, and `options`. */
export const backendWith = (options: LocalBackend.Options = {}) =>
  LocalBackend.layer({ apiKey: Redacted.make(API_KEY), maxBodySize: MAX_BODY, allowDirs: [DATA_ROOT], ...options })

/** The backend under test (no http(s) training data: the server's default). */
export const Backend = backendWith()

/** The authorization header of the test key. */
export const auth = { authorization: `Bearer ${API_KEY}` }

/** A response read in full. */
export interface Reply {
  readonly status: number
  readonly contentType: string | null
  readonly text: string
  readonly json: unknown
}

/** `fetch` against the running backend, reading the whole body. */
export const call = (path: string, init: RequestInit = {}) =>
  Effect.gen(function* () {
    const { url } = yield* LocalBackend.LocalBackend
    return yield* Effect.promise(async (): Promise<Reply> => {
      const response = await fetch(`${url}${path}`, init)
      const text = await response.text()
      let json: unknown
      try {
        json = JSON.parse(text)
      } catch {
        json = undefined
      }
      return { status: response.status, contentType: response.headers.get("content-type"), text, json }
    })
  })

/** A JSON request with the test key. */
export const send = (method: string, path: string, body?: unknown) =>
  call(path, {
    method,
    headers: { ...auth, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) })
  })

/** No error body may carry a stack trace or the key. */
export const clean = (text: string): boolean => !/\n\s+at |Error:|\.ts:\d+/.test(text) && !text.includes(API_KEY)
