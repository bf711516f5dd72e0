/**
 * A `fetch` for the program that embeds the backend: requests under the backend's own URL are answered
 * in-process (`Server.InProcess`: the same routes and checks, no socket), anything else goes to the global
 * `fetch`.
 *
 * @internal
 */

/**
 * The `fetch` of a backend listening at `url` (`http://127.0.0.1:<port>`), answering its own requests with
 * `handle`. Such a request gets what the wire would give it: a `Host` header (the server reports its origin
 * from it, in file URLs) and a `Content-Length` (the server's size checks read it; a streamed body is read
 * whole first, as the server would before answering anyway).
 */
export const inProcessFetch = (
  url: string,
  handle: (request: Request) => Promise<Response>
): typeof globalThis.fetch => {
  const own = new URL(url)
  const prefix = `${own.origin}/`
  const host = own.host
  return async (input, init) => {
    const target = typeof input === "string" ? input : input instanceof URL ? input.href : input.url
    if (!target.startsWith(prefix)) return globalThis.fetch(input, init)
    if (typeof input !== "string" && !(input instanceof URL)) return handle(await wired(new Request(input, init), host))
    const headers = new Headers(init?.headers)
    headers.set("host", host)
    const body = init?.body
    if (body === undefined || body === null) return handle(new Request(target, { ...init, headers }))
    if (typeof body === "string") {
      headers.set("content-length", String(Buffer.byteLength(body)))
      return handle(new Request(target, { ...init, headers }))
    }
    if (body instanceof Uint8Array) {
      headers.set("content-length", String(body.byteLength))
      return handle(new Request(target, { ...init, headers }))
    }
    return handle(await wired(new Request(target, { ...init, headers }), host))
  }
}

/** The request with its body read whole and its length and `Host` set. */
const wired = async (request: Request, host: string): Promise<Request> => {
  const headers = new Headers(request.headers)
  headers.set("host", host)
  if (request.body === null) return new Request(request, { headers })
  const body = new Uint8Array(await request.arrayBuffer())
  headers.set("content-length", String(body.byteLength))
  return new Request(request.url, { method: request.method, headers, body, signal: request.signal })
}
