/**
 * The server's app answered in-process with light objects: a request as its method, path, headers and body bytes,
 * a response as its status, headers and body bytes, with no Web `Request` or `Response` built on either side (their
 * construction, header validation and body streams were most of what a loopback-free exchange still cost; see
 * `bench/inProcess.ts`). The platform reads a request through `HttpServerRequest.fromWeb` and a response through
 * `HttpClientResponse.fromWeb`, which take only the members given here (`@effect/platform` 0.97: a request's
 * `method`, `url`, `headers`, `body`, `text()`, `arrayBuffer()`; a response's `status`, `headers` (iterated, and
 * `getSetCookie()`), `body`, `text()`, `arrayBuffer()`, `formData()`); `test/server/in-process.test.ts` holds them to
 * the network's answers. A streamed or form response is a real Web `Response`, as `HttpApp.toWebHandlerRuntime`
 * makes it. The Web handler of the backend's `fetch` goes through the same exchange, so that the requests of both
 * are known, and answered before the server stops, as Node's server drains its own.
 *
 * @internal
 */

import * as Cookies from "@effect/platform/Cookies"
import * as HttpApp from "@effect/platform/HttpApp"
import type * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpServerError from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Runtime from "effect/Runtime"

/** A request as the in-process exchange takes it. */
export interface LightRequest {
  /** The method, upper case. */
  readonly method: string
  /** The path and query (`/v1/chat/completions?x=1`). */
  readonly url: string
  /** The headers, names in lower case, `host` and `content-length` among them as the wire would have them. */
  readonly headers: Readonly<Record<string, string>>
  /** The body's bytes, if it has one. */
  readonly body: Uint8Array | undefined
  /** Aborted when the caller no longer waits: the request's work is interrupted, as a closed connection's is. */
  readonly signal: AbortSignal | undefined
}

/**
 * A request to `target` as the wire would carry it: `headers` (names in lower case) with the `Host` of `target`
 * (the server reports its origin from it, in file URLs) and, with a body, its `Content-Length` (the server's size
 * checks read it).
 */
export const lightRequest = (
  method: string,
  target: URL,
  headers: Readonly<Record<string, string>>,
  body: Uint8Array | undefined,
  signal: AbortSignal | undefined
): LightRequest => ({
  method,
  url: `${target.pathname}${target.search}`,
  headers:
    body === undefined
      ? { ...headers, host: target.host }
      : { ...headers, host: target.host, "content-length": String(body.byteLength) },
  body,
  signal
})

/** A response's headers as `HttpClientResponse.fromWeb` reads them: iterated as pairs, and their `set-cookie`s. */
export class LightHeaders {
  constructor(
    private readonly pairs: ReadonlyArray<readonly [string, string]>,
    private readonly cookies: ReadonlyArray<string>
  ) {}
  [Symbol.iterator](): Iterator<readonly [string, string]> {
    return this.pairs[Symbol.iterator]()
  }
  /** The `set-cookie` headers. */
  getSetCookie(): Array<string> {
    return [...this.cookies]
  }
}

/** A response whose body is bytes, read the way a Web `Response` is. */
export class LightResponse {
  constructor(
    readonly status: number,
    readonly headers: LightHeaders,
    /** The body. */
    readonly bytes: Uint8Array
  ) {}
  /** The body as a stream, made when asked for (null when empty). */
  get body(): ReadableStream<Uint8Array> | null {
    return this.bytes.length === 0 ? null : (new Blob([this.bytes]).stream() as ReadableStream<Uint8Array>)
  }
  text(): Promise<string> {
    return Promise.resolve(decoder.decode(this.bytes))
  }
  arrayBuffer(): Promise<ArrayBuffer> {
    const { buffer, byteOffset, byteLength } = this.bytes
    return Promise.resolve(buffer.slice(byteOffset, byteOffset + byteLength) as ArrayBuffer)
  }
  formData(): Promise<FormData> {
    return new Response(this.bytes, { headers: [...this.headers] as Array<[string, string]> }).formData()
  }
}

const decoder = new TextDecoder()
const encoder = new TextEncoder()
const EMPTY = new Uint8Array(0)

/** Where a request's resolver is kept, on the platform's request object (as `toWebHandlerRuntime` does). */
const RESOLVE = Symbol.for("effect-rl/local/server/inProcess/resolve")

/** The request's source as `HttpServerRequest.fromWeb` reads it (see the module comment). */
const sourceOf = (request: LightRequest) => {
  const bytes = request.body
  return {
    method: request.method,
    url: request.url,
    headers: request.headers,
    get body(): ReadableStream<Uint8Array> | null {
      return bytes === undefined ? null : (new Blob([bytes]).stream() as ReadableStream<Uint8Array>)
    },
    text: () => Promise.resolve(bytes === undefined ? "" : decoder.decode(bytes)),
    arrayBuffer: () =>
      Promise.resolve(
        bytes === undefined
          ? new ArrayBuffer(0)
          : (bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer)
      ),
    signal: request.signal
  }
}

/** The response as the client reads it: bytes in a {@link LightResponse}, else a Web `Response`. */
const toClient = (
  response: HttpServerResponse.HttpServerResponse,
  method: string,
  runtime: Runtime.Runtime<never>
): LightResponse | Response => {
  const body = response.body
  const bytes =
    method === "HEAD" || body._tag === "Empty"
      ? EMPTY
      : body._tag === "Uint8Array"
        ? body.body
        : body._tag === "Raw" && typeof body.body === "string"
          ? encoder.encode(body.body)
          : undefined
  if (bytes === undefined) {
    // A stream (server-sent events) or a form: run in the server's runtime after the handler ends, as over Node.
    return HttpServerResponse.toWeb(HttpApp.unsafeEjectStreamScope(response), { runtime })
  }
  const pairs: Array<readonly [string, string]> = []
  const cookies = Cookies.isEmpty(response.cookies) ? [] : Cookies.toSetCookieHeaders(response.cookies)
  for (const [name, value] of Object.entries(response.headers)) {
    if (name === "set-cookie") cookies.push(value)
    else pairs.push([name, value])
  }
  return new LightResponse(response.status, new LightHeaders(pairs, cookies), bytes)
}

/** An app served in-process: its exchange, the same as a Web handler, and the end of both. */
export interface Served {
  /** Answers a light request (see the module comment). */
  readonly exchange: (request: LightRequest) => Promise<LightResponse | Response>
  /** Answers a Web `Request` through {@link Served.exchange} (its body read whole first, as the server would). */
  readonly handle: (request: Request) => Promise<Response>
  /** Waits for the requests still running to be answered, as Node's server drains (new ones are the caller's to refuse). */
  readonly close: Effect.Effect<void>
}

/** Statuses whose responses have no body (a Web `Response` refuses one). */
const NULL_BODY = new Set([101, 103, 204, 205, 304])

/** An exchange's response as a Web `Response` (what `fetch` answers). */
export const toWebResponse = (response: LightResponse | Response): Response => {
  if (!(response instanceof LightResponse)) return response
  const headers = new Headers()
  for (const [name, value] of response.headers) headers.append(name, value)
  for (const cookie of response.headers.getSetCookie()) headers.append("set-cookie", cookie)
  const bytes = response.bytes
  return new Response(NULL_BODY.has(response.status) || bytes.length === 0 ? null : bytes, {
    status: response.status,
    headers
  })
}

/**
 * The in-process exchange of an app served with `middleware`, run in `runtime` (the serving effect's own, so that
 * the handlers see the services and fiber refs they see over Node).
 */
export const serveInProcess = <E>(
  runtime: Runtime.Runtime<never>,
  app: HttpApp.Default<E, never>,
  middleware: HttpMiddleware.HttpMiddleware | undefined
): Served => {
  const handled = HttpApp.toHandled(
    app,
    (request, response) =>
      Effect.sync(() => {
        ;(request as unknown as Record<symbol, (response: HttpServerResponse.HttpServerResponse) => void>)[RESOLVE]?.(
          response
        )
      }),
    middleware
  )
  const run = Runtime.runFork(runtime)
  const running = new Set<Fiber.RuntimeFiber<void>>()
  const exchange = (request: LightRequest) =>
    new Promise<LightResponse | Response>((resolve, reject) => {
      const signal = request.signal
      // As `fetch` does: a request aborted rejects with the signal's reason (an `AbortError`), sent or not.
      if (signal?.aborted === true) return reject(signal.reason)
      const serverRequest = HttpServerRequest.fromWeb(sourceOf(request) as unknown as Request)
      ;(serverRequest as unknown as Record<symbol, (response: HttpServerResponse.HttpServerResponse) => void>)[
        RESOLVE
      ] = (response) => resolve(toClient(response, request.method, runtime))
      const fiber = run(Effect.provideService(handled, HttpServerRequest.HttpServerRequest, serverRequest))
      const onAbort = () => {
        fiber.unsafeInterruptAsFork(HttpServerError.clientAbortFiberId)
        reject(signal?.reason)
      }
      running.add(fiber)
      // The listener goes with the request: a signal shared by many requests keeps none of the finished ones.
      fiber.addObserver(() => {
        running.delete(fiber)
        signal?.removeEventListener("abort", onAbort)
      })
      signal?.addEventListener("abort", onAbort, { once: true })
    })
  const handle = async (request: Request): Promise<Response> => {
    const body = request.body === null ? undefined : new Uint8Array(await request.arrayBuffer())
    const headers: Record<string, string> = {}
    for (const [name, value] of request.headers) headers[name] = value
    const light = lightRequest(request.method.toUpperCase(), new URL(request.url), headers, body, request.signal)
    return toWebResponse(await exchange(light))
  }
  const close = Effect.suspend(() => Fiber.awaitAll([...running]))
  return { exchange, handle, close }
}
