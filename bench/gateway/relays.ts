/**
 * The floors the gateway's streamed relay is measured against (bench/gatewayAgents.ts): two relays that forward
 * a streamed chat completion to the embedded backend and its events back, with nothing of a rollout (no key
 * check, no request schema, no recording):
 *
 * - a raw `node:http` relay: the body read and parsed, sent upstream on a keep-alive `node:http` agent, the
 *   response's bytes written to the agent as they come: what one more hop costs at the least;
 * - a bare `@effect/platform` relay: the same on `NodeHttpServer`, the body read with `request.json`, sent with
 *   the platform's undici client (as `Backend.hosted` sends), the upstream body streamed back with
 *   `HttpServerResponse.stream`: what the platform's own streaming costs, before anything of the gateway.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/** The raw relay to `upstream` (a base URL without `/v1`) for the life of the scope: its base URL with `/v1`. */
export const rawRelay = (upstream: string) =>
  Effect.acquireRelease(
    Effect.promise(
      () =>
        new Promise<http.Server>((resolve) => {
          const target = new URL(upstream)
          const agent = new http.Agent({ keepAlive: true })
          const server = http.createServer((req, res) => {
            const chunks: Array<Buffer> = []
            req.on("data", (chunk: Buffer) => chunks.push(chunk))
            req.on("end", () => {
              const body = Buffer.concat(chunks)
              JSON.parse(body.toString("utf8"))
              const forwarded = http.request(
                {
                  host: target.hostname,
                  port: target.port,
                  path: req.url,
                  method: "POST",
                  agent,
                  headers: {
                    authorization: req.headers.authorization ?? "",
                    "content-type": "application/json",
                    "content-length": body.length
                  }
                },
                (answer) => {
                  res.writeHead(answer.statusCode ?? 502, { "content-type": answer.headers["content-type"] ?? "" })
                  answer.on("data", (chunk: Buffer) => res.write(chunk))
                  answer.on("end", () => res.end())
                }
              )
              forwarded.end(body)
            })
          })
          server.keepAliveTimeout = 5_000
          server.listen(0, "127.0.0.1", () => resolve(server))
        })
    ),
    (server) =>
      Effect.promise(
        () =>
          new Promise<void>((resolve) => {
            server.closeAllConnections()
            server.close(() => resolve())
          })
      )
  ).pipe(Effect.map((server) => `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`))

/** The bare platform relay to `upstream` for the life of the scope: its base URL with `/v1`. */
export const platformRelay = (upstream: string) =>
  Layer.build(
    Layer.provideMerge(
      HttpServer.serve(
        Effect.gen(function* () {
          const request = yield* HttpServerRequest.HttpServerRequest
          const body = yield* Effect.orDie(request.json)
          const client = yield* HttpClient.HttpClient
          const answer = yield* Effect.orDie(
            client.execute(
              HttpClientRequest.post(`${upstream}${request.url}`).pipe(
                HttpClientRequest.setHeader("authorization", request.headers.authorization ?? ""),
                HttpClientRequest.bodyUnsafeJson(body)
              )
            )
          )
          return HttpServerResponse.stream(answer.stream, { contentType: "text/event-stream" })
        })
      ).pipe(HttpMiddleware.withTracerDisabledWhen(() => true)),
      NodeHttpServer.layer(() => http.createServer({ keepAliveTimeout: 5_000 }), { port: 0, host: "127.0.0.1" })
    ).pipe(Layer.provide(NodeHttpClient.layerUndici))
  ).pipe(
    Effect.map((context) => {
      const address = Context.get(context, HttpServer.HttpServer).address
      return `http://127.0.0.1:${address._tag === "TcpAddress" ? address.port : 0}/v1`
    })
  )
