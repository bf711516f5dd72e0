/**
 * The embedded backend's start-up, loaded by `LocalBackend.layer` when it is built (so that importing the
 * package loads no server, store or engine).
 *
 * @internal
 */
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import type { ServeError } from "@effect/platform/HttpServerError"
import * as NodeContext from "@effect/platform-node/NodeContext"
import type { ConfigError } from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
// Types only: the shapes this implementation of `LocalBackend.layer` takes and gives, defined (and documented) there.
import type { Options, Service } from "../../LocalBackend.js"
import * as ApiKey from "../server/ApiKey.js"
import * as Server from "../server/Server.js"
import * as DataDir from "../store/DataDir.js"
import type { DataDirError } from "../store/DataDirError.js"
import * as Store from "../store/Store.js"

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
    const { dataDir: _, apiKey: __, ...bounds } = options
    const server = Server.layer({ ...bounds, apiKey, port: 0 }).pipe(Layer.provide(Layer.succeedContext(store)))
    const context = yield* Layer.build(server)
    const url = yield* Effect.provide(Server.url, context)
    yield* DataDir.announce(dataDir, url)
    return { url, apiKey, dataDir, signInLink: Effect.provide(Server.signInLink, context) }
  }).pipe(Effect.provide(NodeContext.layer))
