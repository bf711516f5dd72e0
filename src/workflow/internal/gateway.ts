/**
 * The rollout gateway's listener: one `node:http` server, a table of registered rollouts by id, and for each
 * request the owner's key checked (`rolloutKeys.ts`: a wrong key is a 401, an ended rollout's own key a 410),
 * then the rollout's own HTTP surface (`rolloutHttp.ts`) answering it.
 */
import { randomBytes } from "node:crypto"
import { setMaxListeners } from "node:events"
import * as http from "node:http"
import { hostname } from "node:os"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import type { Policy } from "../Policy.js"
import * as Rollout from "../Rollout.js"
import { Recorder } from "./recorder.js"
import {
  DEFAULT_MAX_BODY_SIZE,
  errorResponse,
  type Handler,
  json,
  type Options,
  handler as rolloutHandler,
  tooLarge
} from "./rolloutHttp.js"
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

interface Entry {
  readonly controller: AbortController
  readonly handler: Handler
  readonly fixed: ReadonlyMap<string, Handler>
  readonly policyName: string
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

/** Request headers not passed on to the rollout's surface (the key among them). */
const DROPPED = new Set([
  "authorization",
  "api-key",
  "host",
  "connection",
  "keep-alive",
  "transfer-encoding",
  "content-length",
  "expect",
  "upgrade"
])

class TooLarge extends Error {}

const readBody = (request: http.IncomingMessage, limit: number): Promise<Buffer> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    let size = 0
    request.on("data", (chunk: Buffer) => {
      size += chunk.length
      if (size > limit) {
        reject(new TooLarge())
        request.resume()
        return
      }
      chunks.push(chunk)
    })
    request.once("end", () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)))
    request.once("error", reject)
  })

/** The model a JSON body names, when it names one. */
const modelOf = (body: Buffer): string | undefined => {
  try {
    const parsed = JSON.parse(body.toString("utf8")) as unknown
    return typeof parsed === "object" && parsed !== null && typeof (parsed as { model?: unknown }).model === "string"
      ? (parsed as { model: string }).model
      : undefined
  } catch {
    return undefined
  }
}

const send = async (response: Response, res: http.ServerResponse): Promise<void> => {
  const headers: Record<string, string> = {}
  response.headers.forEach((value, name) => {
    headers[name] = value
  })
  const streamed = (headers["content-type"] ?? "").startsWith("text/event-stream")
  if (!streamed || response.body === null) {
    const body = Buffer.from(await response.arrayBuffer())
    headers["content-length"] = String(body.length)
    res.writeHead(response.status, headers)
    res.end(body)
    return
  }
  res.writeHead(response.status, headers)
  res.flushHeaders()
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    if (res.destroyed) return
    res.write(chunk)
  }
  res.end()
}

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

const advertised = (options: ListenOptions, host: string): string => {
  const name =
    options.advertisedHost ?? (host === "0.0.0.0" || host === "::" || host === "" ? hostname() : (host as string))
  return name.includes(":") && !name.startsWith("[") ? `[${name}]` : name
}

/** Starts the listener; fails with the listen error (e.g. the port is taken). */
export const listen = (options: ListenOptions): Promise<Listener> => {
  const host = options.host ?? "127.0.0.1"
  const maxBody = options.maxBodySize ?? DEFAULT_MAX_BODY_SIZE
  const maxEnded = options.maxEnded ?? 100_000
  const entries = new Map<string, Entry>()
  const keys = new RolloutKeys(maxEnded)

  const answer = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<Response | undefined> => {
    const match = ROUTE.exec(req.url ?? "/")
    if (match === null) {
      return errorResponse(
        404,
        "the rollout gateway serves rollouts at /rollouts/<id>/v1: use the base URL a rollout's endpoint was given",
        "not_found_error"
      )
    }
    const id = match[1]!
    const verdict = keys.check(id, presentedKey(req.headers))
    if (verdict === "Ended") return ended()
    const entry = entries.get(id)
    if (verdict !== "Ok" || entry === undefined) return unauthorized()
    const method = (req.method ?? "GET").toUpperCase()
    const hasBody = method !== "GET" && method !== "HEAD"
    let body: Buffer | undefined
    if (hasBody) {
      // Refused before it is read when it says its size; else as soon as it has passed the limit.
      if (Number(req.headers["content-length"] ?? Number.NaN) > maxBody) return tooLarge(maxBody)
      try {
        body = await readBody(req, maxBody)
      } catch (error) {
        return error instanceof TooLarge ? tooLarge(maxBody) : undefined
      }
    }
    const path = match[2] ?? "/"
    if (entry.fixed.size > 0 && method === "GET" && /\/models\/?$/.test(path)) {
      return json(200, {
        object: "list",
        data: [entry.policyName, ...entry.fixed.keys()].map((id) => ({
          id,
          object: "model",
          created: 0,
          owned_by: "effect-rl"
        }))
      })
    }
    const model = body !== undefined && entry.fixed.size > 0 ? modelOf(body) : undefined
    const handle = (model === undefined ? undefined : entry.fixed.get(model)) ?? entry.handler
    // One signal per request: aborted when the agent hangs up or the rollout ends.
    const aborted = new AbortController()
    const abort = () => aborted.abort()
    entry.controller.signal.addEventListener("abort", abort, { once: true })
    res.once("close", () => {
      entry.controller.signal.removeEventListener("abort", abort)
      if (!res.writableFinished) aborted.abort()
    })
    const headers = new Headers()
    for (const [name, value] of Object.entries(req.headers)) {
      if (DROPPED.has(name) || value === undefined) continue
      headers.set(name, Array.isArray(value) ? value.join(", ") : value)
    }
    const request = new Request(`http://rollout.gateway${path}${match[3] ?? ""}`, {
      method,
      headers,
      ...(body === undefined ? {} : { body }),
      signal: aborted.signal
    })
    try {
      return await handle(request)
    } catch {
      if (entry.controller.signal.aborted) return ended()
      if (aborted.signal.aborted) return undefined
      return errorResponse(500, "the rollout's completion did not finish", "server_error")
    }
  }

  const server = http.createServer((req, res) => {
    answer(req, res).then(
      (response) => {
        if (response === undefined) res.destroy()
        else return send(response, res).catch(() => void res.destroy())
      },
      () => void res.destroy()
    )
  })
  server.keepAliveTimeout = 5_000

  const end = (id: string) => {
    const entry = entries.get(id)
    if (entry === undefined) return
    entries.delete(id)
    keys.end(id)
    entry.controller.abort()
  }

  return new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(options.port ?? 0, host, () => {
      server.off("error", reject)
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : (options.port ?? 0)
      const url = `http://${advertised(options, host)}:${port}`
      resolve({
        url,
        port,
        open: () => entries.size,
        register: (registerOptions = {}) =>
          Effect.gen(function* () {
            const { models, ...surface } = registerOptions
            const handler = yield* rolloutHandler({ ...surface, maxBodySize: maxBody })
            const policy = yield* Rollout.policy
            const fixed = new Map<string, Handler>()
            for (const [name, mapped] of Object.entries(models ?? {})) {
              // A fixed policy's turns are not the trained policy's: they go to a recorder of their own,
              // which nothing reads, so they stay out of the rollout's trajectory.
              const own = yield* Effect.provideService(
                rolloutHandler({ ...surface, maxBodySize: maxBody }),
                Rollout.Current,
                {
                  policy: mapped,
                  recorder: new Recorder()
                }
              )
              fixed.set(name, own)
            }
            const id = randomBytes(12).toString("base64url")
            const controller = new AbortController()
            // Each request in flight listens on it (its own abort follows the rollout's end): no limit.
            setMaxListeners(0, controller.signal)
            const key = yield* Effect.acquireRelease(
              Effect.sync(() => {
                entries.set(id, { controller, handler, fixed, policyName: policy.name })
                return keys.issue(id)
              }),
              () => Effect.sync(() => end(id))
            )
            return { id, baseUrl: `${url}/rollouts/${id}/v1`, apiKey: Redacted.make(key) }
          }),
        close: () =>
          new Promise<void>((done) => {
            for (const id of [...entries.keys()]) end(id)
            server.close(() => done())
            server.closeAllConnections()
          })
      })
    })
  })
}
