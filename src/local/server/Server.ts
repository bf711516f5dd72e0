/**
 * The embedded backend's HTTP server: the routes of {@link LocalApi} (derived from the contract in
 * `src/api/`) on `@effect/platform-node`'s `NodeHttpServer`, behind bearer auth (the trace surface's routes
 * also take HTTP Basic with the key as the password), with FastAPI-shaped errors.
 *
 * Error bodies, per surface:
 * - a request failing its schema: 422 `{"detail": [{"loc", "msg", "type"}]}` on every route;
 * - missing or wrong key: 401, `{"detail": "..."}` on the training surface and
 *   `{"error": {"message", "type": "AuthenticationError", "param": null, "code": 401}}` on the OpenAI-compatible
 *   one (`/v1/chat/...`, `/v1/models`), as the clients of each expect;
 * - a body over `maxBodySize`: 413 in the same per-surface shape; a body it cannot read (`internal/admit.ts`):
 *   415 for a media type the route does not take, 400 for JSON nested deeper than 512 levels or a multipart
 *   body that does not parse, 422 for a missing multipart part; a request not arriving whole within
 *   `requestTimeoutMs`: 408 from Node, connection closed;
 * - a completion over the per-request bounds: 400 naming `n`; over the bound on queued sampling work
 *   (`internal/sampling.ts`): 429 with `retry-after`;
 * - an unknown model on the training surface: 404 `{"detail": "Model not found"}`; a taken model name or an
 *   `Idempotency-Key` reused with a different body: 409 `{"detail": ...}`;
 * - an unknown route: 404 `{"detail": "Not Found"}`; a known path under another method: 405 `{"detail":
 *   "Method Not Allowed"}` with an `Allow` header listing the path's methods;
 * - the trace surface's calls (`/call/...`, `/calls/...`): `{"reason": "..."}` with 400 (a malformed id,
 *   project id or timestamp), 403 (a query or sort naming an unknown field) and 404 (an unknown call);
 * - a write refused for want of space (`SQLITE_FULL`, `ENOSPC`): 507 in the surface's shape, naming the data
 *   directory and the space left; the server stays up, reads go on, writes succeed again once space is freed;
 * - a defect: 500 `{"detail": "Internal Server Error"}`, the cause logged server-side. No body ever carries a
 *   stack trace or the key.
 *
 * Every response, error or not, carries `x-request-id`: the client's own when it sent a sane one (1 to 200
 * printable ASCII characters), else a generated one; the server's logs of the request carry it too. Every
 * response also carries `x-idempotency-keys: honoured`: the creates and logs of the training surface honour
 * `Idempotency-Key`, and clients learn from this header that they may retry them.
 *
 * Extension (not in the hosted contract): `POST /v1/local/files` stores raw JSONL training data and answers
 * its URL on this server, `GET /v1/local/files/{id}/content` serves it (see `LocalApi`).
 *
 * An SFT job's `training_data_url` is read only as the owner allows:
 * - a URL with the path `/v1/local/files/{id}/content`, whatever its host and port, is this backend's own
 *   upload, read from the store by id (no HTTP, no key; the port may have changed since, with `port: 0`);
 * - a `file://` URL only when the file is inside one of `allowDirs` (symlinks and `..` resolved first);
 * - any other http(s) URL only with `allowHttp` (then fetched as is, wherever it points, loopback included).
 * Anything else fails the job with a message saying so; no failure message quotes the data it could not
 * parse (a bad line is named by its number and field).
 *
 * @since 0.1.0
 */
import { createServer } from "node:http"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import type { ServeError } from "@effect/platform/HttpServerError"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Redacted from "effect/Redacted"
import { DEFAULT_LIMITS } from "../engine/Sampler.js"
import * as Files from "../store/Files.js"
import type * as Store from "../store/Store.js"
import * as StoredResponses from "../store/StoredResponses.js"
import { makeVerifier } from "./Auth.js"
import { multipartPaths } from "./internal/admit.js"
import { ownFilesReader } from "./internal/files.js"
import { HandlersLive } from "./internal/handlers.js"
import { type LightRequest, type LightResponse, type Served, serveInProcess } from "./internal/inProcess.js"
import { edge, errors } from "./internal/middleware.js"
import * as Sampling from "./internal/sampling.js"
import { routes } from "./internal/validate.js"
import * as Worker from "./internal/worker.js"
import { makeReader } from "./internal/workerData.js"
import { LocalApi } from "./LocalApi.js"
import * as SignIn from "./SignIn.js"

/** The default host: loopback only. */
export const DEFAULT_HOST = "127.0.0.1"

/** The default body size limit: 64 MiB. */
export const DEFAULT_MAX_BODY_SIZE = 64 * 1024 * 1024

/** Options of the server. */
export interface Options {
  /** The API key every request must present as `Authorization: Bearer <key>` (or Basic, on trace routes). */
  readonly apiKey: Redacted.Redacted<string>
  /** The interface to bind (default `127.0.0.1`). */
  readonly host?: string | undefined
  /** The port (default 0: a free port). */
  readonly port?: number | undefined
  /** The largest request body accepted, in bytes (default 64 MiB); larger bodies get 413. */
  readonly maxBodySize?: number | undefined
  /** How long the job worker's `claimNext` waits for a job before asking again, in ms (default 1000). */
  readonly workerPollMs?: number | undefined
  /** The most choices (`n`) one completion may ask for (default 128); beyond, a 400 naming `n`. */
  readonly maxN?: number | undefined
  /** The most tokens one completion may sample, `n` times its token limit (default 16,384); beyond, a 400. */
  readonly maxRequestTokens?: number | undefined
  /**
   * The most tokens all admitted completions may still sample together (default 262,144); a completion that
   * would go over is refused with a 429 and `retry-after: 1`.
   */
  readonly maxQueuedTokens?: number | undefined
  /**
   * How long a request may take to arrive whole, headers and body, in ms (default 60,000); a slower one is
   * answered 408 and its connection closed. Checked every second or so.
   */
  readonly requestTimeoutMs?: number | undefined
  /** How long an idle keep-alive connection is kept open, in ms (default 5,000). */
  readonly idleTimeoutMs?: number | undefined
  /**
   * Directories whose files an SFT job's `training_data_url` may name as `file://` URLs (symlinks and `..`
   * resolved first, so nothing outside them is read). Default: none.
   */
  readonly allowDirs?: ReadonlyArray<string> | undefined
  /** Whether an SFT job's `training_data_url` may be any http(s) URL, fetched by the server (default false). */
  readonly allowHttp?: boolean | undefined
  /** How long a one-time sign-in link to the dashboard is good for (default 10 minutes; see `SignIn`). */
  readonly signInTtl?: Duration.DurationInput | undefined
  /** The data directory the store is in, named when its disk is full (a 507, a failed job). */
  readonly dataDir?: string | undefined
}

/** The default time a request may take to arrive whole: 60 s. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 60_000

/** The default time an idle keep-alive connection stays open: 5 s. */
export const DEFAULT_IDLE_TIMEOUT_MS = 5_000

/** The Node HTTP server with the time-outs of the options. */
const nodeServer = (options: Options) => () => {
  const requestTimeout = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS
  return createServer({
    requestTimeout,
    headersTimeout: requestTimeout,
    keepAliveTimeout: options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS,
    // How often Node looks for requests past their time-out (its default, 30 s, would let them run long).
    connectionsCheckingInterval: Math.max(10, Math.min(1_000, Math.floor(requestTimeout / 4)))
  })
}

/**
 * A running server's routes reached in the same process, without a socket: {@link layer} provides it beside the
 * listening server, so a program that embeds the backend can skip the loopback round trip (its HTTP parsing,
 * streams and sockets cost more CPU than many of the requests themselves).
 */
export interface InProcessService {
  /**
   * Answers a Web `Request` as the server answers the same request over the network: the same routes, edge
   * checks (key, body bounds) and errors. The request's URL path is what is routed; it reaches the server with
   * the `Host` of its URL (what the server reports as its own origin, in file URLs) and its body's length, as the
   * wire would carry them. Once the server has stopped
   * it rejects, as `fetch` does when nothing listens (a `TypeError` whose cause has code `ECONNREFUSED`).
   * Aborting the request's `signal` interrupts the request's work, as a closed connection does.
   */
  readonly handle: (request: Request) => Promise<Response>
  /**
   * The same as {@link InProcessService.handle}, with no Web objects: the request as its method, path, headers
   * and body bytes; the response as its status, headers and bytes (a Web `Response` when streamed). What
   * `LocalBackend`'s `httpClient` sends through (`internal/inProcess.ts`).
   */
  readonly exchange: (request: LightRequest) => Promise<LightResponse | Response>
}

/** The running server's routes in-process (see {@link InProcessService}). */
export class InProcess extends Context.Tag("effect-rl/local/server/Server/InProcess")<InProcess, InProcessService>() {}

/** What `InProcess.handle` rejects with once the server has stopped: `fetch`'s failure when nothing listens. */
const stopped = (): TypeError =>
  new TypeError("fetch failed", {
    cause: Object.assign(new Error("the embedded backend has stopped"), { code: "ECONNREFUSED" })
  })

/**
 * Node's server, and beside it the same app in-process: whatever the platform serves on the one is served on the
 * other (`internal/inProcess.ts`, in the serving effect's own runtime, so both run the handlers with the same
 * services and fiber refs). The in-process side ends when the layer's scope closes, before the Node server stops.
 */
const nodeAndInProcess = (options: Options) =>
  Layer.merge(
    Layer.scopedContext(
      Effect.gen(function* () {
        const server = yield* NodeHttpServer.make(nodeServer(options), {
          host: options.host ?? DEFAULT_HOST,
          port: options.port ?? 0
        })
        let served: Served | undefined
        // Before the Node server stops (finalizers run last first): new in-process requests are refused, and those
        // running are answered first, as Node's server drains its connections.
        yield* Effect.addFinalizer(() =>
          Effect.suspend(() => {
            const closing = served
            served = undefined
            return closing === undefined ? Effect.void : closing.close
          })
        )
        const both = HttpServer.make({
          address: server.address,
          serve: (app, middleware) =>
            Effect.flatMap(Effect.runtime<never>(), (runtime) => {
              served = serveInProcess(runtime, app, middleware)
              return middleware === undefined ? server.serve(app) : server.serve(app, middleware)
            })
        })
        const inProcess: InProcessService = {
          handle: (request) => (served === undefined ? Promise.reject(stopped()) : served.handle(request)),
          exchange: (request) => (served === undefined ? Promise.reject(stopped()) : served.exchange(request))
        }
        return Context.make(HttpServer.HttpServer, both).pipe(Context.add(InProcess, inProcess))
      })
    ),
    NodeHttpServer.layerContext
  )

/** The api with its handlers and the error middleware. */
const apiLayer = (maxBodySize: number, dataDir: string | undefined) =>
  Layer.mergeAll(
    HttpApiBuilder.api(LocalApi).pipe(Layer.provide(HandlersLive)),
    HttpApiBuilder.middleware(LocalApi, errors(routes(LocalApi), maxBodySize, dataDir))
  )

/**
 * The server, listening once the layer is built and closed (in-flight requests drained) when its scope
 * closes, with the job worker (`internal/worker.ts`) running the queued training jobs. It reads and writes
 * through the store in context (build `Store.layer({ dataDir })` once and provide it); it provides the
 * platform's `HttpServer`, whose `address` is the bound port.
 *
 * Order: the worker starts before the server listens; on release the server stops and drains first, then the
 * worker (a running job is failed with the store's interrupted message), and the store provided from outside
 * is torn down last. The uploaded files repository (`Files`) is built here over the same `SqlClient`. It also
 * provides the server's one-time sign-in tokens (`SignIn`), for {@link signInLink}.
 */
export const layer = (
  options: Options
): Layer.Layer<HttpServer.HttpServer | InProcess | SignIn.SignIn, ServeError, Store.Services | SqlClient.SqlClient> =>
  Layer.unwrapEffect(
    Effect.gen(function* () {
      const maxBodySize = options.maxBodySize ?? DEFAULT_MAX_BODY_SIZE
      const sampling = Sampling.layer({
        limits: {
          maxN: options.maxN ?? DEFAULT_LIMITS.maxN,
          maxRequestTokens: options.maxRequestTokens ?? DEFAULT_LIMITS.maxRequestTokens
        },
        maxQueuedTokens: options.maxQueuedTokens
      })
      const serve = HttpApiBuilder.serve(
        edge({
          verify: makeVerifier(options.apiKey),
          maxBodySize,
          isMultipart: multipartPaths(routes(LocalApi))
        })
      ).pipe(
        Layer.provide(apiLayer(maxBodySize, options.dataDir)),
        Layer.provide(sampling),
        // The contract has both `/v1/chat/completions` and `/v1/chat/completions/`: keep them distinct routes.
        Layer.provide(HttpRouter.setRouterConfig({ ignoreTrailingSlash: false })),
        // No server span a request (the platform's default): nothing reads them, and making one (the URL parsed,
        // the headers redacted into attributes) was about a tenth of the rollout gateway's CPU per request in a
        // profile (bench:gateway-agents); not measured here on its own.
        HttpMiddleware.withTracerDisabledWhen(() => true)
      )
      const node = nodeAndInProcess(options)
      const worker = Layer.unwrapEffect(
        Effect.map(Files.Files, (files) =>
          Worker.layer({
            pollMs: options.workerPollMs,
            dataDir: options.dataDir,
            readTrainingData: ownFilesReader(
              files,
              makeReader({ allowDirs: options.allowDirs, allowHttp: options.allowHttp })
            )
          })
        )
      )
      // A memo map of its own, so that another server built beside it never shares its handler layers.
      const signIn = SignIn.layer(options.apiKey, options.signInTtl)
      return Layer.fresh(
        Layer.provideMerge(serve, Layer.merge(node, signIn)).pipe(
          Layer.provide(worker),
          Layer.provide(Layer.merge(Files.layer, StoredResponses.layer))
        )
      )
    })
  )

/** The base URL of a running server (`http://127.0.0.1:<port>`). */
export const url: Effect.Effect<string, never, HttpServer.HttpServer> = Effect.map(HttpServer.HttpServer, (server) => {
  const address = server.address
  if (address._tag === "UnixAddress") return `http+unix://${address.path}`
  const host = address.hostname.includes(":") ? `[${address.hostname}]` : address.hostname
  return `http://${host}:${address.port}`
})

/**
 * Mints a one-time sign-in link to the dashboard of a running server: `<url>/ui/#token=<token>`, good once
 * within the server's `signInTtl` (see `SignIn`). The link holds no key; print it, never the key.
 */
export const signInLink: Effect.Effect<string, never, HttpServer.HttpServer | SignIn.SignIn> = Effect.flatMap(
  SignIn.SignIn,
  (tokens) => Effect.zipWith(url, tokens.mint, SignIn.linkOf)
)
