/**
 * `effect-rl serve`: the embedded backend until SIGINT or SIGTERM, its URL and a one-time sign-in link to its
 * dashboard (`<url>/ui/#token=<token>`, see `SignIn`) printed once it listens. Loaded by
 * the command only when `serve` runs, so that the other commands (and `--help`) load no server or engine.
 *
 * @since 0.1.0
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as ApiKey from "../local/server/ApiKey.js"
import * as Server from "../local/server/Server.js"
import * as DataDir from "../local/store/DataDir.js"
import * as Store from "../local/store/Store.js"
import { failed } from "./failure.js"

/** The flags of `serve`, validated. */
export interface ServeOptions {
  readonly host: string
  readonly port: number
  readonly dataDir: string
  readonly apiKey: string | undefined
  readonly maxBodySize: number | undefined
  readonly maxN: number | undefined
  readonly maxRequestTokens: number | undefined
  readonly maxQueuedTokens: number | undefined
  readonly requestTimeoutMs: number | undefined
  readonly idleTimeoutMs: number | undefined
  /** Directories `file://` training data may be read from (resolved, existing). */
  readonly allowDirs: ReadonlyArray<string>
  /** Whether http(s) training data URLs are fetched. */
  readonly allowHttp: boolean
}

/**
 * Runs the embedded backend over `dataDir` until interrupted. The data directory's lock comes first (the
 * store's layer takes it): a second `serve` on a directory in use fails naming the first, having written
 * nothing, not even a key.
 */
export const serve = (options: ServeOptions) =>
  Effect.gen(function* () {
    const store = yield* Layer.build(Store.layer({ dataDir: options.dataDir })).pipe(
      Effect.mapError((error) => failed(error.message))
    )
    const { apiKey, source } = yield* ApiKey.resolve({
      flag: options.apiKey,
      env: process.env.EFFECT_RL_API_KEY,
      dataDir: options.dataDir
    }).pipe(Effect.mapError((error) => failed(`cannot use the data directory ${options.dataDir}: ${error.message}`)))
    const keyFile = `${options.dataDir}/${ApiKey.KEY_FILE}`
    if (source === "generated") {
      yield* Console.log(`Generated API key (shown once, stored in ${keyFile}): ${Redacted.value(apiKey)}`)
    } else if (source === "file") {
      yield* Console.log(`Using the API key stored in ${keyFile}`)
    }
    const ready = Layer.effectDiscard(
      Effect.gen(function* () {
        const url = yield* Server.url
        yield* DataDir.announce(options.dataDir, url).pipe(Effect.mapError((error) => failed(error.message)))
        yield* Console.log(`effect-rl serving on ${url}`)
        yield* Console.log(`dashboard: ${yield* Server.signInLink}`)
        yield* Console.log("  (a one-time sign-in link, good for 10 minutes; after that, sign in with the API key)")
      })
    )
    return yield* Layer.launch(
      ready.pipe(Layer.provide(Server.layer({ ...options, apiKey })), Layer.provide(Layer.succeedContext(store)))
    ).pipe(
      Effect.catchTag("ServeError", (error) =>
        Effect.fail(
          failed(
            `cannot listen on ${options.host}:${options.port}: ${error.cause instanceof Error ? error.cause.message : String(error.cause)}`
          )
        )
      )
    )
  }).pipe(Effect.scoped, Effect.provide(NodeContext.layer))
