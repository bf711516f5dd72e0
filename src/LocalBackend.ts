/**
 * The embedded backend inside the caller's program: a layer that starts the local server on a free
 * loopback port (over a data directory, by default a temporary one removed when the layer is released) and
 * provides its base URL and API key, for pointing the client layers at it in tests, examples and
 * `npm start`. The server stops, draining its requests, when the layer's scope closes.
 *
 * One backend per data directory: building the layer on a directory another backend (in this process or
 * another, e.g. `effect-rl serve`) holds fails with `DataDirError` `InUse`, naming it. The directory is made
 * mode 0700 and its files 0600. An SFT job's `training_data_url` is read from the backend's own uploads, and
 * from `file://` or other http(s) URLs only as {@link Options} allow (by default neither).
 *
 * Watching a run on the dashboard: the data directory is locked while the program runs, so a separate
 * `effect-rl serve` cannot open it; the program's own backend serves the dashboard instead. Ask it to print a
 * one-time sign-in link when it starts (`printSignInLink`), and to stay up after the program succeeds until
 * Ctrl-C (`keepServing`), as `effect-rl train` does in a terminal:
 *
 * ```ts
 * program.pipe(Effect.provide(Backend.local({ printSignInLink: true, keepServing: true })), NodeRuntime.runMain)
 * ```
 *
 * Importing this module is cheap: the server, the store (SQLite) and the engine load when the layer is built,
 * so a program that only talks to the hosted service never loads them.
 *
 * @since 0.1.0
 */
import type { PlatformError } from "@effect/platform/Error"
import type * as HttpClient from "@effect/platform/HttpClient"
import type { ServeError } from "@effect/platform/HttpServerError"
import type { ConfigError } from "effect/ConfigError"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Redacted from "effect/Redacted"
import type { Options as ServerOptions } from "./local/server/Server.js"
import type { DataDirError } from "./local/store/DataDirError.js"

/**
 * The data directory could not be used (tag `DataDirError`): `InUse` when another server (another
 * `effect-rl serve`, or a backend in another program) holds it, its message naming that server's pid and URL;
 * `Inaccessible` when it cannot be created, locked or made private. A type only: importing this module loads
 * nothing of the backend; catch it with `Effect.catchTag("DataDirError", ...)`.
 */
export type { DataDirError, DataDirErrorReason } from "./local/store/DataDirError.js"

/** The running backend: where it listens and the key it expects. */
export interface Service {
  /** The base URL of all three surfaces, e.g. `http://127.0.0.1:53211` (clients append `/v1/...`). */
  readonly url: string
  /** The API key to send as `Authorization: Bearer <key>`. */
  readonly apiKey: Redacted.Redacted<string>
  /** The data directory the backend stores into. */
  readonly dataDir: string
  /**
   * Mints a one-time sign-in link to the backend's dashboard, `<url>/ui/#token=<token>`: opened within 10
   * minutes, it signs the browser tab in without the key (the page trades the token, once, for the key).
   * Print the link, never the key; each evaluation mints a new link.
   */
  readonly signInLink: Effect.Effect<string>
  /**
   * A `fetch` that answers requests under {@link Service.url} in this process, without a socket: the same
   * routes, checks and errors as over the network, for less CPU a request (other URLs go to the global `fetch`).
   * Hand it to any client that takes a `fetch`, e.g. the `openai` package's
   * `new OpenAI({ baseURL: url + "/v1", apiKey: Redacted.value(apiKey), fetch })` (`Backend.local`'s own clients
   * use {@link Service.httpClient}). Other programs reach the backend at `url`.
   */
  readonly fetch: typeof globalThis.fetch
  /**
   * An `HttpClient` (`@effect/platform`) that reaches this backend in-process as {@link Service.fetch} does, and
   * more cheaply still: a request of bytes goes to the server with no Web `Request` or `Response` built (other
   * URLs and bodies go through `fetch`). What `Backend.local` provides its clients.
   */
  readonly httpClient: HttpClient.HttpClient
}

/** The running embedded backend. */
export class LocalBackend extends Context.Tag("effect-rl/LocalBackend")<LocalBackend, Service>() {}

/**
 * Options of {@link layer}: the data directory and key, and the server's bounds (body size, the work one
 * completion and all of them may ask for, time-outs), as `effect-rl serve` takes them.
 */
export interface Options
  extends Pick<
    ServerOptions,
    "maxBodySize" | "maxN" | "maxRequestTokens" | "maxQueuedTokens" | "requestTimeoutMs" | "idleTimeoutMs" | "signInTtl"
  > {
  /** The data directory (default: a fresh temporary directory, removed when the layer is released). */
  readonly dataDir?: string | undefined
  /** The key (default: the one stored in the data directory, else a generated one stored there). */
  readonly apiKey?: Redacted.Redacted<string> | undefined
  /**
   * Directories whose files an SFT job's `training_data_url` may name as `file://` URLs (symlinks and `..`
   * resolved first, so nothing outside them is read). Default: none, so `file://` URLs fail the job; upload
   * the data to the backend's `/v1/local/files` instead, or list its directory here.
   */
  readonly allowDirs?: ReadonlyArray<string> | undefined
  /**
   * Whether an SFT job's `training_data_url` may be any http(s) URL, fetched by the backend (default false).
   * The backend's own file URLs (`/v1/local/files/{id}/content`) are read from its store either way.
   */
  readonly allowHttp?: boolean | undefined
  /**
   * Print a one-time sign-in link to the dashboard once the backend has started (`dashboard: <url>/ui/#token=...`,
   * with how to sign in after it expires); default false. The key itself is never printed.
   */
  readonly printSignInLink?: boolean | undefined
  /**
   * When the program using the backend succeeds, keep the backend and its dashboard up (printing the address and
   * a fresh sign-in link) until the program is interrupted: Ctrl-C under `NodeRuntime.runMain`. Default false;
   * a program that fails or is interrupted stops at once. Only for a program someone watches: one in a CI job
   * would wait for ever (`process.stdout.isTTY === true` tells whether someone can press Ctrl-C).
   */
  readonly keepServing?: boolean | undefined
}

/**
 * The embedded backend, started in-process on `127.0.0.1` and a free port. Each backend is its own: two
 * built side by side (even with one memo map) share nothing.
 */
export const layer = (
  options: Options = {}
): Layer.Layer<LocalBackend, PlatformError | ServeError | ConfigError | DataDirError> =>
  Layer.scoped(
    LocalBackend,
    Effect.flatMap(
      Effect.promise(() => import("./local/internal/start.js")),
      (implementation) => implementation.start(options)
    )
  )
