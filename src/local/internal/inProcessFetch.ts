/**
 * A `fetch` for the program that embeds the backend: requests under the backend's own URL are answered
 * in-process (`Server.InProcess`: the same routes and checks, no socket), anything else goes to the global
 * `fetch`.
 *
 * @internal
 */
import type { LightRequest, LightResponse } from "../server/internal/inProcess.js"
import { lightRequest, toWebResponse } from "../server/internal/inProcess.js"

/**
 * The `fetch` of a backend listening at `url` (`http://127.0.0.1:<port>`), answering its own requests with
 * `exchange` (a body of text or bytes, or none: no Web `Request` built) or `handle` (any other). Either way the
 * request gets the `Host` and `Content-Length` the wire would give it (`lightRequest`).
 */
export const inProcessFetch = (
  url: string,
  handle: (request: Request) => Promise<Response>,
  exchange: (request: LightRequest) => Promise<LightResponse | Response>
): typeof globalThis.fetch => {
  const prefix = `${new URL(url).origin}/`
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
    // Any other body, or a `Request`: read whole by `handle`, as the server would before answering anyway.
    if (bytes === null || (typeof input !== "string" && !(input instanceof URL))) {
      return handle(new Request(input, init))
    }
    // A body of text or bytes (what clients send): no Web `Request` built, as `httpClient` does.
    const method = (init?.method ?? "GET").toUpperCase()
    if (bytes !== undefined && (method === "GET" || method === "HEAD")) {
      throw new TypeError("Request with GET/HEAD method cannot have body.")
    }
    const headers: Record<string, string> = {}
    // Web `Headers` check and lower-case the names, as `fetch` would.
    for (const [name, value] of new Headers(init?.headers)) headers[name] = value
    const signal = init?.signal ?? undefined
    return toWebResponse(await exchange(lightRequest(method, new URL(target), headers, bytes, signal)))
  }
}

const encoder = new TextEncoder()
