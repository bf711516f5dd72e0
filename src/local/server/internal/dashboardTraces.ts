/**
 * The handlers of the traces pages' reads and of the sign-in endpoint (see `DashboardApi`): the store's
 * `DashboardTraces` reads, with `project`, `limit` and `cursor` checked here so that a bad one is a 400
 * naming it; and `SignIn`'s tokens redeemed for the key.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import type { RootPageAnswer } from "../../store/DashboardShapes.js"
import * as DashboardTraces from "../../store/DashboardTraces.js"
import type { StoreError } from "../../store/StoreError.js"
import { LocalApi } from "../LocalApi.js"
import { SignIn } from "../SignIn.js"
import { answer, limitOf } from "./dashboard.js"
import { detail } from "./responses.js"
import { isProjectId } from "./trace/ids.js"

/** The project of a query, or the 400 naming what is wrong with it. */
const projectOf = (project: string | undefined): string | HttpServerResponse.HttpServerResponse =>
  project === undefined
    ? detail(400, "missing project: pass ?project=entity/project")
    : isProjectId(project)
      ? project
      : detail(400, `invalid project '${project.slice(0, 80)}': expected entity/project`)

/** A cursor is the `started_key` and id of the last root of the page before, `<started_key>_<id>`. */
const CURSOR = /^(\d{1,16})_([\w-]{1,64})$/

/** The page of traces a query asks for, or the 400 naming its bad value. */
export const rootsOptions = (params: {
  readonly project?: string | undefined
  readonly limit?: string | undefined
  readonly cursor?: string | undefined
}) => {
  const project = projectOf(params.project)
  if (HttpServerResponse.isServerResponse(project)) return project
  const limit = limitOf(params.limit)
  if (HttpServerResponse.isServerResponse(limit)) return limit
  if (params.cursor === undefined) return { project, limit, after: undefined }
  const match = CURSOR.exec(params.cursor)
  if (match === null) {
    return detail(400, `invalid cursor '${params.cursor.slice(0, 40)}': pass the next_cursor of the page before`)
  }
  return { project, limit, after: { started_key: Number(match[1]), id: match[2]! } }
}

const roots = (params: Parameters<typeof rootsOptions>[0]) =>
  Effect.suspend(() => {
    const options = rootsOptions(params)
    if (HttpServerResponse.isServerResponse(options)) {
      return Effect.succeed<HttpServerResponse.HttpServerResponse | RootPageAnswer>(options)
    }
    return Effect.map(DashboardTraces.roots(options.project, options), ({ data, next }) => ({
      data,
      next_cursor: next === null ? null : `${next.started_key}_${next.id}`
    }))
  })

const inProject = <A, R>(
  project: string | undefined,
  read: (project: string) => Effect.Effect<A, StoreError, R>
): Effect.Effect<A | HttpServerResponse.HttpServerResponse, never, R> => {
  const checked = projectOf(project)
  return HttpServerResponse.isServerResponse(checked) ? Effect.succeed(checked) : answer(read(checked))
}

/** The traces pages' handlers (the store's `SqlClient` in context). */
export const DashboardTracesLive = HttpApiBuilder.group(LocalApi, "dashboardTraces", (handlers) =>
  handlers
    .handle("traceProjects", () => Effect.map(DashboardTraces.projects, (data) => ({ data })))
    .handle("traceRoots", ({ urlParams }) => roots(urlParams))
    .handle("traceTree", ({ path, urlParams }) =>
      inProject(urlParams.project, (project) => DashboardTraces.tree(project, path.id))
    )
    .handle("traceCall", ({ path, urlParams }) =>
      inProject(urlParams.project, (project) => DashboardTraces.call(project, path.id))
    )
)

/** The sign-in endpoint's handler: the key for a good token, else a 401 saying why. */
export const SignInLive = HttpApiBuilder.group(LocalApi, "signIn", (handlers) =>
  handlers.handle("signIn", ({ payload }) =>
    Effect.flatMap(SignIn, (tokens) => tokens.redeem(payload.token)).pipe(
      Effect.map((key) =>
        HttpServerResponse.unsafeJson(
          { api_key: Redacted.value(key) },
          { headers: { "cache-control": "no-store", pragma: "no-cache" } }
        )
      ),
      Effect.catchTag("SignInError", (error) => Effect.succeed(detail(401, error.message)))
    )
  )
)
