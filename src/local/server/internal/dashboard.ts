/**
 * The handlers of the dashboard's read endpoints (see `DashboardApi`), over the store's `Dashboard` reads.
 * Query values are checked here, so that a bad one is a 400 naming it rather than a generic 422.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import * as Dashboard from "../../store/Dashboard.js"
import type { Sort, TrajectoryPage } from "../../store/DashboardShapes.js"
import type { StoreError } from "../../store/StoreError.js"
import { LocalApi } from "../LocalApi.js"
import { detail } from "./responses.js"

/** The largest page of trajectories. */
export const MAX_PAGE = 200

/** The page size when none is asked. */
export const DEFAULT_PAGE = 50

const SORTS: ReadonlyArray<Sort> = ["position", "reward_desc", "reward_asc"]

/** A store failure as an answer: `NotFound` is a 404 with the store's message (naming what); else a defect. */
export const answer = <A, R>(
  effect: Effect.Effect<A, StoreError, R>
): Effect.Effect<A | HttpServerResponse.HttpServerResponse, never, R> =>
  Effect.catchTag(effect, "StoreError", (error) =>
    error.reason === "NotFound" ? Effect.succeed(detail(404, error.message)) : Effect.die(error)
  )

/** A page's `limit` (default {@link DEFAULT_PAGE}), or the 400 naming it when it is no whole number in range. */
export const limitOf = (raw: string | undefined): number | HttpServerResponse.HttpServerResponse => {
  const limit = raw === undefined ? DEFAULT_PAGE : Number(raw)
  return /^\d+$/.test(raw ?? "1") && limit >= 1 && limit <= MAX_PAGE
    ? limit
    : detail(400, `invalid limit '${raw}': a whole number from 1 to ${MAX_PAGE}`)
}

/** A `limit`, `cursor` and `sort` checked, or the 400 naming the bad one. */
export const pageOptions = (params: {
  readonly limit?: string | undefined
  readonly cursor?: string | undefined
  readonly sort?: string | undefined
}): Dashboard.PageOptions | HttpServerResponse.HttpServerResponse => {
  const limit = limitOf(params.limit)
  if (HttpServerResponse.isServerResponse(limit)) return limit
  const cursor = params.cursor
  if (cursor !== undefined && !/^\d{1,9}$/.test(cursor)) {
    return detail(400, `invalid cursor '${cursor.slice(0, 40)}': pass the next_cursor of the page before`)
  }
  const sort = (params.sort ?? "position") as Sort
  if (!SORTS.includes(sort)) return detail(400, `invalid sort '${params.sort}': one of ${SORTS.join(", ")}`)
  return { limit, offset: cursor === undefined ? 0 : Number(cursor), sort }
}

const page = (logId: string, params: Parameters<typeof pageOptions>[0]) =>
  Effect.gen(function* () {
    const options = pageOptions(params)
    if (HttpServerResponse.isServerResponse(options)) return options
    const result = yield* Dashboard.trajectoryPage(logId, options)
    if (options.offset > 0 && options.offset >= result.total) {
      return detail(400, `invalid cursor '${params.cursor}': log entry ${logId} has ${result.total} trajectories`)
    }
    const { next_offset, ...rest } = result
    return { ...rest, next_cursor: next_offset === null ? null : String(next_offset) } satisfies TrajectoryPage
  })

const index = (name: string, raw: string): number | HttpServerResponse.HttpServerResponse =>
  /^\d{1,9}$/.test(raw) ? Number(raw) : detail(400, `invalid ${name} '${raw.slice(0, 40)}': a whole number`)

const one = (path: { readonly log_id: string; readonly group: string; readonly index: string }) =>
  Effect.suspend(() => {
    const group = index("group", path.group)
    if (HttpServerResponse.isServerResponse(group)) return Effect.succeed(group)
    const position = index("index", path.index)
    if (HttpServerResponse.isServerResponse(position)) return Effect.succeed(position)
    return answer(Dashboard.trajectory(path.log_id, group, position))
  })

/** How often the live stream looks for a change, and sends a comment to keep the connection open. */
const POLL = "1 second"
const HEARTBEAT = "15 seconds"
/** How long one live stream lasts; the page reconnects. */
const LIFETIME = "10 minutes"

/**
 * The live overview of a model as server-sent events: the overview at once, then each time it changes
 * (looked at every second), a comment every 15 s, ended after 10 minutes; a 404 when the model is unknown.
 */
export const live = (modelId: string) =>
  Effect.gen(function* () {
    const overview = Effect.map(Dashboard.overview(modelId), (o) => JSON.stringify(o))
    const first = yield* overview
    const sql = yield* SqlClient.SqlClient
    const later = Stream.fromSchedule(Schedule.spaced(POLL)).pipe(
      Stream.mapEffect(() => overview),
      // A model deleted while watched ends the stream.
      Stream.catchAll(() => Stream.empty)
    )
    const overviews = Stream.concat(Stream.make(first), later).pipe(
      Stream.changes,
      Stream.map((data) => `event: overview\ndata: ${data}\n\n`)
    )
    const heartbeat = Stream.repeatEffectWithSchedule(Effect.succeed(": keep-alive\n\n"), Schedule.spaced(HEARTBEAT))
    const events = Stream.merge(overviews, heartbeat, { haltStrategy: "left" }).pipe(
      Stream.interruptAfter(LIFETIME),
      Stream.encodeText,
      Stream.provideService(SqlClient.SqlClient, sql)
    )
    return HttpServerResponse.stream(events, {
      contentType: "text/event-stream",
      headers: { "cache-control": "no-cache", "x-accel-buffering": "no" }
    })
  }).pipe(answer)

/** The dashboard group's handlers (the store's `SqlClient` in context). */
export const DashboardLive = HttpApiBuilder.group(LocalApi, "dashboard", (handlers) =>
  handlers
    .handle("listModelSummaries", () => Effect.map(Dashboard.models, (data) => ({ data })))
    .handle("modelOverview", ({ path }) => answer(Dashboard.overview(path.model_id)))
    .handle("modelLive", ({ path }) => live(path.model_id))
    .handle("trajectoryPage", ({ path, urlParams }) => answer(page(path.log_id, urlParams)))
    .handle("getTrajectory", ({ path }) => one(path))
)
