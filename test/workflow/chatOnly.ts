/**
 * A backend that serves chat completions only, as the hosted training service does: the real embedded
 * backend behind a loopback proxy that answers every `/v1/responses` path with a 404 (and counts them), with
 * the package's hosted clients pointed at the proxy. A rollout whose agent speaks the Responses API must still
 * work over it: the rollout translates onto chat completions itself.
 */
import { createServer, request as httpRequest } from "node:http"
import type { AddressInfo } from "node:net"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Backend from "../../src/Backend.js"
import * as LocalBackend from "../../src/LocalBackend.js"
import { API_KEY } from "../support/clients.js"

/** The paths the proxy refused (`/v1/responses...`): a Responses request that reached the backend. */
export const refusedPaths: Array<string> = []

const proxy = (target: URL) =>
  Effect.acquireRelease(
    Effect.async<{ readonly url: string; readonly close: () => void }>((resume) => {
      const server = createServer((req, res) => {
        if ((req.url ?? "").startsWith("/v1/responses")) {
          refusedPaths.push(req.url ?? "")
          res.writeHead(404, { "content-type": "application/json" })
          res.end(JSON.stringify({ detail: "Not Found" }))
          return
        }
        const upstream = httpRequest(
          { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers },
          (answer) => {
            res.writeHead(answer.statusCode ?? 502, answer.headers)
            answer.pipe(res)
          }
        )
        upstream.on("error", () => res.destroy())
        req.pipe(upstream)
      })
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as AddressInfo
        resume(Effect.succeed({ url: `http://127.0.0.1:${port}`, close: () => server.close() }))
      })
    }),
    ({ close }) => Effect.sync(close)
  )

/** The hosted clients against the chat-only proxy of a fresh embedded backend. */
export const ChatOnlyBackend = Layer.unwrapScoped(
  Effect.gen(function* () {
    const backend = yield* LocalBackend.LocalBackend
    const { url } = yield* proxy(new URL(backend.url))
    const apiKey = Redacted.make(API_KEY)
    return Backend.hosted({
      training: { apiKey, baseUrl: url },
      inference: { apiKey, baseUrl: url },
      trace: { apiKey, baseUrl: url }
    })
  })
).pipe(Layer.provide(LocalBackend.layer({ apiKey: Redacted.make(API_KEY) })), Layer.orDie)
