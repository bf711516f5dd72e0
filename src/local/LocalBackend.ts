/**
 * The embedded backend inside the caller's program: a layer that starts the local server on a free
 * loopback port (over a data directory, by default a temporary one removed when the layer is released) and
 * provides its base URL and API key, for pointing the client layers at it in tests, examples and
 * `npm start`. The server stops, draining its requests, when the layer's scope closes.
 *
 * @since 0.1.0
 */
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import type { ServeError } from "@effect/platform/HttpServerError"
import * as NodeContext from "@effect/platform-node/NodeContext"
import type { ConfigError } from "effect/ConfigError"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as ApiKey from "./server/ApiKey.js"
import * as Server from "./server/Server.js"
import * as Store from "./store/Store.js"

/** The running backend: where it listens and the key it expects. */
export interface Service {
  /** The base URL of all three surfaces, e.g. `http://127.0.0.1:53211` (clients append `/v1/...`). */
  readonly url: string
  /** The API key to send as `Authorization: Bearer <key>`. */
  readonly apiKey: Redacted.Redacted<string>
  /** The data directory the backend stores into. */
  readonly dataDir: string
}

/** The running embedded backend. */
export class LocalBackend extends Context.Tag("effect-rl/LocalBackend")<LocalBackend, Service>() {}

/** Options of {@link layer}. */
export interface Options {
  /** The data directory (default: a fresh temporary directory, removed when the layer is released). */
  readonly dataDir?: string | undefined
  /** The key (default: the one stored in the data directory, else a generated one stored there). */
  readonly apiKey?: Redacted.Redacted<string> | undefined
  /** The largest request body accepted, in bytes (default 64 MiB). */
  readonly maxBodySize?: number | undefined
}

/** The embedded backend, started in-process on `127.0.0.1` and a free port. */
export const layer = (options: Options = {}): Layer.Layer<LocalBackend, PlatformError | ServeError | ConfigError> =>
  Layer.unwrapScoped(
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const dataDir = options.dataDir ?? (yield* fs.makeTempDirectoryScoped({ prefix: "effect-rl-" }))
      const flag = options.apiKey === undefined ? undefined : Redacted.value(options.apiKey)
      const { apiKey } = yield* ApiKey.resolve({ flag, dataDir })
      const server = Server.layer({ apiKey, port: 0, maxBodySize: options.maxBodySize }).pipe(
        Layer.provide(Store.layer({ dataDir }))
      )
      // Built with a memo map of its own: the server's handlers and the store's repositories are module-level
      // layers, which a memo map shared by two backends (two `it.layer`s, one runtime building two) would
      // otherwise hand the second backend bound to the first one's store. The layer as a whole memoizes as usual.
      return Layer.fresh(
        Layer.effect(
          LocalBackend,
          Effect.map(Server.url, (url) => ({ url, apiKey, dataDir }))
        ).pipe(Layer.provide(server))
      )
    })
  ).pipe(Layer.provide(NodeContext.layer))
