/**
 * A real HTTP server on port 0 standing in for the hosted training and inference services in contract
 * tests: by default it answers every endpoint of seed 4.2 and 4.4 with a body shaped as the OpenAPI
 * document says, and it records every request it receives. Tests script other replies per route (statuses,
 * error bodies, headers, SSE split across writes, connection resets, requests that never answer).
 *
 * The hosted services cannot be reached from here (no network, no account), which is why this stands in.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as Effect from "effect/Effect"

/** A request as the server received it. */
export interface Received {
  readonly method: string
  readonly path: string
  readonly query: URLSearchParams
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
  readonly json: unknown
}

/** What the server answers. */
export type Reply =
  | {
      readonly status?: number
      readonly headers?: Readonly<Record<string, string>>
      readonly json?: unknown
      readonly body?: string
    }
  | {
      readonly status?: number
      readonly headers?: Readonly<Record<string, string>>
      /** Written one by one, `delayMs` apart (each write is its own network read on the other side). */
      readonly chunks: ReadonlyArray<string>
      readonly delayMs?: number
      /** Keep the response open after the last chunk (until the client goes away). */
      readonly hold?: boolean
    }
  | { readonly destroy: true }
  | { readonly hang: true }

/** Answers a request; `attempt` counts the requests this route has received, from 0. */
export type Handler = (request: Received, attempt: number) => Reply

/** The running server. */
export interface FakeService {
  readonly url: string
  readonly received: Array<Received>
  /** Requests whose connection the client closed before the response ended. */
  readonly aborted: () => number
  /** Replace the handler of `method path` (path without query; `:x` segments match anything). */
  readonly route: (method: string, path: string, handler: Handler) => void
  /** Requests received on a route. */
  readonly count: (method: string, path: string) => number
}

const UUID = (n: number) => `00000000-0000-4000-8000-${n.toString(16).padStart(12, "0")}`

/** Ids the default replies use. */
export const ids = {
  model: UUID(1),
  job: UUID(2),
  checkpoint: (step: number) => UUID(100 + step),
  event: (n: number) => UUID(1000 + n)
}

/** A job record as the published `TrainingJobResponse` has it (its nine fields), pending. */
export const jobRecord = (id: string) => ({
  id,
  model_id: ids.model,
  status: "PENDING",
  progress: null,
  error_message: null,
  training_start: null,
  training_end: null,
  created_at: "2026-01-01T00:00:00Z",
  updated_at: "2026-01-01T00:00:00Z"
})

const completion = {
  id: "chatcmpl-1",
  object: "chat.completion",
  created: 1,
  model: "base",
  choices: [
    {
      index: 0,
      message: { role: "assistant", content: "hello" },
      logprobs: { content: [{ token: "hello", logprob: -0.5, bytes: [104, 101, 108, 108, 111], top_logprobs: [] }] },
      finish_reason: "stop",
      stop_reason: null
    }
  ],
  usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 }
}

/** The page of `all` that `after` and `limit` ask for, in the cursor page envelope. */
const cursorPage = <A extends { readonly id: string }>(all: ReadonlyArray<A>, query: URLSearchParams) => {
  const after = query.get("after")
  const start = after === null ? 0 : all.findIndex((item) => item.id === after) + 1
  const limit = Number(query.get("limit") ?? 20)
  const data = all.slice(start, start + limit)
  return {
    object: "list",
    data,
    first_id: data[0]?.id ?? "",
    last_id: data.at(-1)?.id ?? "",
    has_more: start + limit < all.length
  }
}

/** The default replies: shapes of the OpenAPI documents. */
const defaults: ReadonlyArray<readonly [string, string, Handler]> = [
  ["POST", "/v1/chat/completions", () => ({ json: completion })],
  ["POST", "/v1/chat/completions/", () => ({ json: completion })],
  [
    "POST",
    "/v1/preview/models",
    (r) => {
      const body = r.json as Record<string, unknown>
      return {
        json: {
          id: ids.model,
          entity: body.entity ?? "me",
          project: body.project,
          name: body.name,
          base_model: body.base_model,
          run_id: null
        }
      }
    }
  ],
  [
    "DELETE",
    "/v1/preview/models/:id",
    (r) => ({ json: { model_id: r.path.split("/")[4], deleted_checkpoints: 2, deleted_run: true } })
  ],
  [
    "DELETE",
    "/v1/preview/models/:id/checkpoints",
    (r) => {
      const steps = (r.json as { steps: Array<number> }).steps
      return {
        json: { deleted_count: steps.filter((s) => s < 3).length, not_found_steps: steps.filter((s) => s >= 3) }
      }
    }
  ],
  [
    "GET",
    "/v1/preview/models/:id/checkpoints",
    (r) => {
      // Three checkpoints, steps 0..2, paged by `after` and `limit`, in `order`.
      const all = [0, 1, 2].map((step) => ({ id: ids.checkpoint(step), step, metrics: { reward: step / 2 } }))
      if (r.query.get("order") === "desc") all.reverse()
      return { json: cursorPage(all, r.query) }
    }
  ],
  ["POST", "/v1/preview/models/:id/log", () => ({ body: "" })],
  ["POST", "/v1/preview/sft-training-jobs", () => ({ json: jobRecord(ids.job) })],
  ["POST", "/v1/preview/training-jobs", () => ({ json: jobRecord(ids.job) })],
  ["GET", "/v1/preview/training-jobs/:id", (r) => ({ json: jobRecord(r.path.split("/")[4]!) })],
  [
    "GET",
    "/v1/preview/training-jobs/:id/events",
    (r) => {
      const all = [
        { id: ids.event(0), type: "training_started", data: { num_sequences: 2 } },
        { id: ids.event(1), type: "gradient_step", data: { loss: 0.5, grad_norm: 1.5, group_metric_x: 1 } },
        { id: ids.event(2), type: "gradient_step", data: { loss: 0.25, grad_norm: 1.25 } },
        { id: ids.event(3), type: "training_ended", data: {} }
      ]
      return { json: cursorPage(all, r.query) }
    }
  ],
  ["GET", "/v1/health", () => ({ json: { status: "ok" } })],
  [
    "GET",
    "/v1/system-check",
    () => ({
      json: {
        api: true,
        database: true,
        cpu_queue: { success: true, duration: 0.01, errors: [] },
        gpu_queue: { success: true, duration: 0.02, errors: [] }
      }
    })
  ],
  ["GET", "/v1/preview/base-models", () => ({ json: ["Qwen/Qwen3-0.6B", "OpenPipe/Qwen3-14B-Instruct"] })],
  [
    "GET",
    "/v1/models",
    () => ({
      json: {
        object: "list",
        data: [{ id: "base", object: "model", created: 1, owned_by: "me", root: "base" }]
      }
    })
  ]
]

const matches = (pattern: string, path: string): boolean => {
  const a = pattern.split("/")
  const b = path.split("/")
  return a.length === b.length && a.every((segment, i) => segment.startsWith(":") || segment === b[i])
}

/** Start the server on 127.0.0.1, port 0, for the life of the scope. */
export const make = Effect.acquireRelease(
  Effect.async<{ readonly server: http.Server; readonly service: FakeService }>((resume) => {
    const routes: Array<{ method: string; path: string; handler: Handler; seen: number }> = defaults.map(
      ([method, path, handler]) => ({ method, path, handler, seen: 0 })
    )
    const received: Array<Received> = []
    let aborted = 0
    const find = (method: string, path: string) =>
      // Exact patterns win over `:x` ones; later routes (set by tests) win over earlier ones.
      [...routes].reverse().find((r) => r.method === method && r.path === path) ??
      [...routes].reverse().find((r) => r.method === method && matches(r.path, path))

    const server = http.createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        const url = new URL(req.url ?? "/", "http://localhost")
        const body = Buffer.concat(chunks).toString("utf8")
        let json: unknown
        try {
          json = body === "" ? undefined : JSON.parse(body)
        } catch {
          json = undefined
        }
        const request: Received = {
          method: req.method ?? "GET",
          path: url.pathname,
          query: url.searchParams,
          headers: req.headers,
          body,
          json
        }
        received.push(request)
        const route = find(request.method, request.path)
        if (route === undefined) {
          res.writeHead(404, { "content-type": "application/json" })
          res.end(JSON.stringify({ detail: "Not Found" }))
          return
        }
        const reply = route.handler(request, route.seen++)
        res.on("close", () => {
          if (!res.writableFinished) aborted++
        })
        if ("destroy" in reply) {
          req.socket.destroy()
          return
        }
        if ("hang" in reply) return
        if ("chunks" in reply) {
          res.writeHead(reply.status ?? 200, { "content-type": "text/event-stream", ...reply.headers })
          res.flushHeaders()
          let i = 0
          const next = () => {
            if (res.destroyed) return
            if (i < reply.chunks.length) {
              res.write(reply.chunks[i++])
              setTimeout(next, reply.delayMs ?? 5)
            } else if (reply.hold !== true) {
              res.end()
            }
          }
          next()
          return
        }
        const text = reply.json !== undefined ? JSON.stringify(reply.json) : (reply.body ?? "")
        res.writeHead(reply.status ?? 200, {
          ...(reply.json !== undefined ? { "content-type": "application/json" } : {}),
          ...reply.headers
        })
        res.end(text)
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resume(
        Effect.succeed({
          server,
          service: {
            url: `http://127.0.0.1:${port}`,
            received,
            aborted: () => aborted,
            route: (method, path, handler) => {
              routes.push({ method, path, handler, seen: 0 })
            },
            count: (method, path) =>
              received.filter((r) => r.method === method && (r.path === path || matches(path, r.path))).length
          }
        })
      )
    })
  }),
  ({ server }) =>
    Effect.async<void>((resume) => {
      server.closeAllConnections()
      server.close(() => resume(Effect.void))
    })
).pipe(Effect.map(({ service }) => service))
