/**
 * An `HttpClient` for the program that embeds the backend: requests under the backend's own URL with a body of
 * bytes (or none) go to the server's in-process exchange (`Server.InProcess`'s `exchange`: no socket, no Web
 * `Request` or `Response`); any other request goes through `fetch` (the backend's in-process `fetch`, which sends
 * other URLs to the network).
 *
 * @internal
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { type LightRequest, type LightResponse, lightRequest } from "../server/internal/inProcess.js"

const encoder = new TextEncoder()

/**
 * The client of a backend at `url` (`http://127.0.0.1:<port>`): `exchange` for its own requests (see the module
 * comment), `fetch` for the rest.
 */
export const inProcessHttpClient = (
  url: string,
  exchange: (request: LightRequest) => Promise<LightResponse | Response>,
  fetch: typeof globalThis.fetch
): HttpClient.HttpClient => {
  const own = new URL(url)
  // The `Fetch` the client uses is the one in the context its layer was built in.
  const viaFetch = Effect.runSync(
    Effect.provide(
      HttpClient.HttpClient,
      FetchHttpClient.layer.pipe(Layer.provide(Layer.succeed(FetchHttpClient.Fetch, fetch)))
    )
  )
  return HttpClient.make((request, target, signal) => {
    const body = request.body
    const bytes =
      body._tag === "Empty"
        ? undefined
        : body._tag === "Uint8Array"
          ? body.body
          : body._tag === "Raw" && typeof body.body === "string"
            ? encoder.encode(body.body)
            : body._tag === "Raw" && body.body instanceof Uint8Array
              ? body.body
              : null
    if (target.origin !== own.origin || bytes === null) return viaFetch.execute(request)
    return Effect.map(
      Effect.tryPromise({
        try: () => exchange(lightRequest(request.method, target, request.headers, bytes, signal)),
        catch: (cause) => new HttpClientError.RequestError({ request, reason: "Transport", cause })
      }),
      // `fromWeb` reads only what a `LightResponse` has (see `internal/inProcess.ts`).
      (response) => HttpClientResponse.fromWeb(request, response as Response)
    )
  })
}
