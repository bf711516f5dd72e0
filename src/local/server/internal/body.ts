/**
 * Bodies without a declared length (chunked uploads) under the size limit. The platform's own limit
 * (`MaxBodySize`) destroys the socket when it trips, so the client would see a reset instead of a 413. Such
 * a body is read here instead, counting bytes: over the limit, the rest is drained unread and the caller
 * answers 413 at once; within it, the request is handed on with the buffered body.
 */
import type { IncomingMessage } from "node:http"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import * as Effect from "effect/Effect"
import { type NodeBody, readNodeBody } from "../../../internal/nodeBody.js"

const read = (source: IncomingMessage, limit: number) =>
  Effect.async<Uint8Array | undefined, unknown>((resume) =>
    Effect.sync(
      readNodeBody(source as unknown as NodeBody, limit, (result) =>
        resume(
          "error" in result
            ? Effect.fail(result.error)
            : Effect.succeed(result.chunks === undefined ? undefined : Buffer.concat(result.chunks))
        )
      )
    )
  )

/**
 * The request with its undeclared-length body read into memory, or undefined when that body exceeds
 * `limit`. Requests with a `Content-Length` (checked against the limit before) or without a body are
 * returned as they are.
 */
export const buffered = (
  request: HttpServerRequest.HttpServerRequest,
  limit: number
): Effect.Effect<HttpServerRequest.HttpServerRequest | undefined, unknown> => {
  if (request.headers["content-length"] !== undefined || request.headers["transfer-encoding"] === undefined) {
    return Effect.succeed(request)
  }
  return Effect.map(read(NodeHttpServerRequest.toIncomingMessage(request), limit), (body) => {
    if (body === undefined) return undefined
    const headers = new Headers()
    for (const [name, value] of Object.entries(request.headers)) {
      if (name !== "transfer-encoding") headers.set(name, value)
    }
    // Its length now known: what admits a body (its size, media type and depth checks) sees that it has one.
    headers.set("content-length", String(body.length))
    const web = new Request(`http://localhost${request.url}`, { method: request.method, headers, body })
    return HttpServerRequest.fromWeb(web)
  })
}
