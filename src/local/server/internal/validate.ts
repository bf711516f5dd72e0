/**
 * Why a request failed its endpoint's schemas, with every failing field located: `HttpApiBuilder` reports a
 * decode failure as an `HttpApiDecodeError` that no longer says which part of the request (path, query or
 * body) failed, and stops at the first issue. On such a failure the request is matched again against the
 * api's endpoints and each part decoded on its own with all errors, as FastAPI reports them.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import type * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { ValidationError } from "../../../api/HttpValidationError.js"
import { details, type Part } from "./issues.js"

type AnySchema = Schema.Schema<never, unknown, never>

/** A route of the api: its method, its path as a pattern, and the schemas of its parts. */
export interface Route {
  readonly method: string
  readonly pattern: RegExp
  readonly names: ReadonlyArray<string>
  readonly path: Option.Option<AnySchema>
  readonly urlParams: Option.Option<AnySchema>
  readonly payload: Option.Option<AnySchema>
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

const compile = (method: string, path: string) => {
  const names: Array<string> = []
  const source = path
    .split("/")
    .map((segment) => {
      if (!segment.startsWith(":")) return escapeRegExp(segment)
      names.push(segment.slice(1))
      return "([^/]+)"
    })
    .join("/")
  return { method, pattern: new RegExp(`^${source}$`), names }
}

/** The endpoints of an api, for matching a request again. */
export const routes = <Id extends string, Groups extends HttpApiGroup.HttpApiGroup.Any, E, R>(
  api: HttpApi.HttpApi<Id, Groups, E, R>
): ReadonlyArray<Route> => {
  const out: Array<Route> = []
  HttpApi.reflect(api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      out.push({
        ...compile(endpoint.method, endpoint.path),
        path: endpoint.pathSchema,
        urlParams: endpoint.urlParamsSchema,
        payload: endpoint.payloadSchema
      })
    }
  })
  return out
}

const check = (part: Part, schema: Option.Option<AnySchema>, input: unknown): Array<ValidationError> => {
  if (Option.isNone(schema)) return []
  const result = Schema.decodeUnknownEither(schema.value, { errors: "all" })(input)
  return Either.isLeft(result) ? details(part, result.left.issue) : []
}

const searchParams = (url: URL): Record<string, string | Array<string>> => {
  const out: Record<string, string | Array<string>> = {}
  for (const [k, v] of url.searchParams) {
    const prev = out[k]
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v]
  }
  return out
}

/** The JSON body could not be parsed. */
export const jsonInvalid: ValidationError = { loc: ["body", 0], msg: "JSON decode error", type: "json_invalid" }

/**
 * Every validation error of a request against the endpoint it matches (path, then query, then body), or an
 * empty array when it matches none or passes.
 */
export const validate = (
  table: ReadonlyArray<Route>,
  request: HttpServerRequest.HttpServerRequest
): Effect.Effect<ReadonlyArray<ValidationError>> =>
  Effect.gen(function* () {
    const url = new URL(request.url, "http://localhost")
    for (const route of table) {
      if (route.method !== request.method) continue
      const match = route.pattern.exec(url.pathname)
      if (match === null) continue
      const params: Record<string, string> = {}
      route.names.forEach((name, i) => {
        params[name] = decodeURIComponent(match[i + 1] ?? "")
      })
      const out = [...check("path", route.path, params)]
      out.push(...check("query", route.urlParams, searchParams(url)))
      if (Option.isSome(route.payload)) {
        const body = yield* Effect.either(request.json)
        out.push(...(Either.isLeft(body) ? [jsonInvalid] : check("body", route.payload, body.right)))
      }
      return out
    }
    return []
  })
