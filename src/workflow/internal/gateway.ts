/**
 * The rollout gateway's listener: the platform's Node HTTP server, a table of registered rollouts by id, and for
 * each request under `/rollouts/<id>` the owner's key checked (`rolloutKeys.ts`: a wrong key is a 401, an ended
 * rollout's own key a 410) before the rollout's own surface (`rolloutHttp.ts`, the app built once) answers it in
 * that rollout. A request in flight when its rollout ends is answered 410 (its completion interrupted).
 */
import { randomBytes } from "node:crypto"
import * as http from "node:http"
import { hostname } from "node:os"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Redacted from "effect/Redacted"
import type * as Runtime from "effect/Runtime"
import * as Scope from "effect/Scope"
import type { Policy } from "../Policy.js"
import * as Rollout from "../Rollout.js"
import { Recorder } from "./recorder.js"
import { app, errorResponse, type Options, serve, surfaceOf } from "./rolloutHttp.js"
import { presentedKey, RolloutKeys } from "./rolloutKeys.js"

/** Options of the listener. */
export interface ListenOptions {
  readonly host?: string | undefined
  readonly port?: number | undefined
  readonly advertisedHost?: string | undefined
  readonly maxBodySize?: number | undefined
  readonly maxEnded?: number | undefined
}

/** Options of one rollout's registration. */
export interface RegisterOptions extends Options {
  readonly models?: Readonly<Record<string, Policy>> | undefined
}

/** A registered rollout's endpoint. */
export interface Registered {
  readonly id: string
  readonly baseUrl: string
  readonly apiKey: Redacted.Redacted<string>
}

/** The listener, running. */
export interface Listener {
  readonly url: string
  readonly port: number
  readonly register: (options?: RegisterOptions) => Effect.Effect<Registered, never, Rollout.Current | Scope.Scope>
  readonly open: () => number
  readonly close: () => Promise<void>
}

const ROUTE = /^\/rollouts\/([A-Za-z0-9_-]{1,64})(\/[^?]*)?(\?.*)?$/

const unauthorized = () =>
  errorResponse(
    401,
    "the API key is not this rollout's: use the base URL and key the rollout's endpoint was given",
    "invalid_request_error",
    null,
    "invalid_api_key"
  )

const ended = () =>
  errorResponse(
    410,
    "this rollout has ended: its endpoint takes no more requests (each rollout gets a new base URL and key)",
    "invalid_request_error",
    null,
    "rollout_ended"
  )

const notARollout = () =>
  errorResponse(
    404,
    "the rollout gateway serves rollouts at /rollouts/<id>/v1: use the base URL a rollout's endpoint was given",
    "not_found_error"
  )

const advertised = (options: ListenOptions, host: string): string => {
  const name =
    options.advertisedHost ?? (host === "0.0.0.0" || host === "::" || host === "" ? hostname() : (host as string))
  return name.includes(":") && !name.startsWith("[") ? `[${name}]` : name
}

/** Starts the listener for the life of the scope; fails with the listen error (e.g. the port is taken). */
export const make = (options: ListenOptions) =>
  Effect.gen(function* () {
    const host = options.host ?? "127.0.0.1"
    const keys = new RolloutKeys(options.maxEnded ?? 100_000)
    const entries = new Map<string, { readonly answer: ReturnType<typeof serve>; readonly end: () => void }>()
    let node: http.Server | undefined
    const server = yield* NodeHttpServer.make(
      () => {
        node = http.createServer({ keepAliveTimeout: 5_000 })
        return node
      },
      { port: options.port ?? 0, host }
    )
    // Run first on release: the connections still open (streams to agents) are closed, so the server can stop.
    yield* Effect.addFinalizer(() => Effect.sync(() => node?.closeAllConnections()))
    const built = yield* app
    // No server span a request (the platform's default): nothing here reads them, and making one (the URL parsed,
    // the headers redacted into attributes) was a tenth of the gateway's CPU per request (bench:gateway-agents).
    const serveUntraced = HttpMiddleware.withTracerDisabledWhenEffect(() => true)
    yield* serveUntraced(
      server.serve(
        Effect.gen(function* () {
          const request = yield* HttpServerRequest.HttpServerRequest
          const match = ROUTE.exec(request.url)
          if (match === null) return notARollout()
          const id = match[1]!
          const verdict = keys.check(id, presentedKey(request.headers as Readonly<Record<string, string | undefined>>))
          if (verdict === "Ended") return ended()
          const entry = entries.get(id)
          if (verdict !== "Ok" || entry === undefined) return unauthorized()
          const url = `${match[2] ?? "/"}${match[3] ?? ""}`
          return yield* Effect.provideService(
            entry.answer,
            HttpServerRequest.HttpServerRequest,
            request.modify({ url })
          )
        })
      )
    )
    const address = server.address
    const port = address._tag === "TcpAddress" ? address.port : (options.port ?? 0)
    const url = `http://${advertised(options, host)}:${port}`
    const end = (id: string) => {
      const entry = entries.get(id)
      if (entry === undefined) return
      entries.delete(id)
      keys.end(id)
      entry.end()
    }
    const listener: Omit<Listener, "close"> = {
      url,
      port,
      open: () => entries.size,
      register: (registerOptions = {}) =>
        Effect.gen(function* () {
          const { models, ...surfaceOptions } = registerOptions
          const fixed = new Map<string, Runtime.Runtime<Rollout.Current>>()
          for (const [name, mapped] of Object.entries(models ?? {})) {
            // A fixed policy's turns are not the trained policy's: they go to a recorder of their own, which
            // nothing reads, so they stay out of the rollout's trajectory.
            const own = yield* Effect.provideService(Effect.runtime<Rollout.Current>(), Rollout.Current, {
              policy: mapped,
              recorder: new Recorder()
            })
            fixed.set(name, own)
          }
          // The gateway's limit, when it has one, else what the rollout's policy's context can hold.
          const maxBodySize = surfaceOptions.maxBodySize ?? options.maxBodySize
          const surface = yield* surfaceOf({ ...surfaceOptions, maxBodySize }, fixed)
          const stops = new Set<() => void>()
          let over = false
          const id = randomBytes(12).toString("base64url")
          const key = yield* Effect.acquireRelease(
            Effect.sync(() => {
              entries.set(id, {
                answer: serve(built, {
                  ...surface,
                  ending: {
                    ended: () => over,
                    onEnd: (stop) => {
                      stops.add(stop)
                      return () => void stops.delete(stop)
                    },
                    answer: ended
                  }
                }),
                end: () => {
                  over = true
                  for (const stop of [...stops]) stop()
                  stops.clear()
                }
              })
              return keys.issue(id)
            }),
            () => Effect.sync(() => end(id))
          )
          return { id, baseUrl: `${url}/rollouts/${id}/v1`, apiKey: Redacted.make(key) }
        })
    }
    yield* Effect.addFinalizer(() => Effect.sync(() => [...entries.keys()].forEach(end)))
    return listener
  })

/** Starts the listener (see {@link make}) until its `close`; rejects with the listen error. */
export const listen = async (options: ListenOptions): Promise<Listener> => {
  const scope = Effect.runSync(Scope.make())
  const exit = await Effect.runPromiseExit(Scope.extend(make(options), scope))
  if (Exit.isFailure(exit)) {
    await Effect.runPromise(Scope.close(scope, exit))
    const failure = Cause.failureOption(exit.cause)
    throw failure._tag === "Some" ? failure.value.cause : Cause.squash(exit.cause)
  }
  return { ...exit.value, close: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}
