/**
 * A `fetch` for the program that embeds the backend: requests under the backend's own URL are answered
 * in-process (`Server.InProcess`: the same routes and checks, no socket), anything else goes to the global
 * `fetch`.
 *
 * @internal
 */
import type { LightRequest, LightResponse } from "../server/internal/inProcess.js"
import { toWebResponse } from "../server/internal/inProcess.js"

/**
 * The `fetch` of a backend listening at `url` (`http://127.0.0.1:<port>`), answering its own requests with
 * `exchange` (a body of text or bytes, or none: no Web `Request` built) or `handle` (any other). Such a request gets
 * what the wire would give it: a `Host` header (the server reports its origin from it, in file URLs) and a
 * `Content-Length` (the server's size checks read it; a streamed body is read whole first, as the server would
 * before answering anyway).
 */
export const inProcessFetch = (
  url: string,
  handle: (request: Request) => Promise<Response>,
  exchange: (request: LightRequest) => Promise<LightResponse | Response>
): typeof globalThis.fetch => {
  const own = new URL(url)
  const prefix = `${own.origin}/`
  const host = own.host
  return async (input, init) => {
    const target = typeof input === "string" ? input : input instanceof URL ? input.href : input.url
    if (!target.startsWith(prefix)) return globalThis.fetch(input, init)
    const body = init?.body
    const bytes =
      body === undefined || body === null
        ? undefined
        : typeof body === "string"
          ? encoder.encode(body)
          : body instanceof Uint8Array
            ? body
            : null
    if (typeof input !== "string" && !(input instanceof URL)) return handle(await wired(new Request(input, init), host))
    if (bytes === null) return handle(await wired(new Request(target, init), host))
    // A body of text or bytes (what clients send): no Web `Request` built, as `httpClient` does.
    const method = (init?.method ?? "GET").toUpperCase()
    if (bytes !== undefined && (method === "GET" || method === "HEAD")) {
      throw new TypeError("Request with GET/HEAD method cannot have body.")
    }
    const headers: Record<string, string> = {}
    // Web `Headers` check and lower-case the names, as `fetch` would.
    for (const [name, value] of new Headers(init?.headers)) headers[name] = value
    headers.host = host
    if (bytes !== undefined) headers["content-length"] = String(bytes.byteLength)
    const { pathname, search } = new URL(target)
    const signal = init?.signal ?? undefined
    return toWebResponse(await exchange({ method, url: `${pathname}${search}`, headers, body: bytes, signal }))
  }
}

const encoder = new TextEncoder()

/** The request with its body read whole and its length and `Host` set. */
const wired = async (request: Request, host: string): Promise<Request> => {
  const headers = new Headers(request.headers)
  headers.set("host", host)
  if (request.body === null) return new Request(request, { headers })
  const body = new Uint8Array(await request.arrayBuffer())
  headers.set("content-length", String(body.byteLength))
  return new Request(request.url, { method: request.method, headers, body, signal: request.signal })
}
