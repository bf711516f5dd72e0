/**
 * The embedded backend's start-up, loaded by `LocalBackend.layer` when it is built (so that importing the
 * package loads no server, store or engine).
 *
 * @internal
 */
import { resolve } from "node:path"
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import type { ServeError } from "@effect/platform/HttpServerError"
import * as NodeContext from "@effect/platform-node/NodeContext"
import type { ConfigError } from "effect/ConfigError"
import * as Console from "effect/Console"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
// Types only: the shapes this implementation of `LocalBackend.layer` takes and gives, defined (and documented) there.
import type { Options, Service } from "../../LocalBackend.js"
import * as ApiKey from "../server/ApiKey.js"
import { UI_PATH } from "../server/DashboardApi.js"
import * as Server from "../server/Server.js"
import * as SignIn from "../server/SignIn.js"
import * as DataDir from "../store/DataDir.js"
import type { DataDirError } from "../store/DataDirError.js"
import * as Store from "../store/Store.js"
import { inProcessHttpClient } from "./inProcessClient.js"
import { inProcessFetch } from "./inProcessFetch.js"

/**
 * Starts the embedded backend in the current scope (stopped, draining, when it closes), on `127.0.0.1` and a
 * free port. Its layers are built with a memo map of their own (`Layer.build`): the server's handlers and the
 * store's repositories are module-level layers, which a memo map shared by two backends would otherwise hand
 * the second one bound to the first one's store.
 */
export const start = (
  options: Options
): Effect.Effect<Service, PlatformError | ServeError | ConfigError | DataDirError, Scope.Scope> =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const dataDir = options.dataDir ?? (yield* fs.makeTempDirectoryScoped({ prefix: "effect-rl-" }))
    // The store first: it takes the data directory's lock, so a refused start writes nothing (not even a key).
    const store = yield* Layer.build(Store.layer({ dataDir }))
    const flag = options.apiKey === undefined ? undefined : Redacted.value(options.apiKey)
    const { apiKey } = yield* ApiKey.resolve({ flag, dataDir })
    const { dataDir: _, apiKey: __, printSignInLink, keepServing, ...bounds } = options
    const server = Server.layer({ ...bounds, apiKey, port: 0, dataDir }).pipe(
      Layer.provide(Layer.succeedContext(store))
    )
    const context = yield* Layer.build(server)
    const url = yield* Effect.provide(Server.url, context)
    yield* DataDir.announce(dataDir, url)
    const signInLink = Effect.provide(Server.signInLink, context)
    const inProcess = Context.get(context, Server.InProcess)
    const fetch = inProcessFetch(url, inProcess.handle, inProcess.exchange)
    const httpClient = inProcessHttpClient(url, inProcess.exchange, fetch)
    // While the program runs the key file is there; a temporary data directory (and the key) goes when it ends.
    const note = signInNote({
      ttl: options.signInTtl ?? SignIn.DEFAULT_TTL,
      keyFile: resolve(dataDir, ApiKey.KEY_FILE),
      removedAtEnd: options.dataDir === undefined && keepServing !== true
    })
    if (printSignInLink === true) yield* Console.log(`dashboard: ${yield* signInLink}\n  ${note}\n`)
    // Added after the server's own finalizers, so it runs before them: the server is still up while it waits.
    if (keepServing === true) {
      yield* Effect.addFinalizer((exit) =>
        Exit.isSuccess(exit)
          ? Effect.gen(function* () {
              yield* Console.log(
                `\nthe dashboard stays at ${url}${UI_PATH} until you press Ctrl-C; a fresh sign-in link:`
              )
              yield* Console.log(`${yield* signInLink}\n  ${note}`)
              // Finalizers run uninterruptibly: the wait alone is interruptible, so Ctrl-C ends it.
              return yield* Effect.interruptible(Effect.never)
            })
          : Effect.void
      )
    }
    return { url, apiKey, dataDir, signInLink, fetch, httpClient }
  }).pipe(Effect.provide(NodeContext.layer))

/** What a printed sign-in link says of itself: how long it lasts, and where the key is for after. */
export const signInNote = (options: {
  readonly ttl: Duration.DurationInput
  readonly keyFile: string
  readonly removedAtEnd: boolean
}): string => {
  const seconds = Math.round(Duration.toSeconds(options.ttl))
  const life =
    seconds % 60 === 0
      ? `${seconds / 60} minute${seconds === 60 ? "" : "s"}`
      : `${seconds} second${seconds === 1 ? "" : "s"}`
  return options.removedAtEnd
    ? `(a one-time sign-in link, good for ${life}; after that, sign in with the key in ${options.keyFile}, ` +
        "while this program runs: its data directory is temporary, removed when it ends)"
    : `(a one-time sign-in link, good for ${life}; after that, sign in with the key in ${options.keyFile})`
}
