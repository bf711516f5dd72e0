/**
 * Calls derived from the `HttpApi` endpoint definitions of `src/api/`: the method, the path template, and
 * the path, query, body and success schemas all come from the one definition the local server also uses.
 *
 * @internal
 */
import type * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { ApiError } from "../ApiError.js"
import {
  ambiguous,
  type Call,
  decodeJson,
  invalidRequest,
  type RetryMode,
  readText,
  requestIdOf,
  resolveMode,
  send,
  type Transport
} from "./http.js"

/** What one call of an endpoint takes. */
export interface EndpointInput<E extends HttpApiEndpoint.HttpApiEndpoint.Any> {
  readonly path?: HttpApiEndpoint.HttpApiEndpoint.PathParsed<E> | undefined
  readonly urlParams?: HttpApiEndpoint.HttpApiEndpoint.UrlParams<E> | undefined
  readonly payload?: HttpApiEndpoint.HttpApiEndpoint.Payload<E> | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** Whether the convention's retryable failures may be retried for this call (see `RetryMode`). */
  readonly retry: RetryMode
}

const paramsRegex = /:(\w+)/g

/** Substitute encoded path parameters into a `/a/:name/b` template, URL-encoding each. */
export const fillPath = (template: string, params: Readonly<Record<string, unknown>>): string =>
  template.replace(paramsRegex, (_, name: string) => encodeURIComponent(String(params[name] ?? "")))

/** A function calling `endpoint`: encodes the input, sends it under the retry policy, decodes the success. */
export const endpointCall = <E extends HttpApiEndpoint.HttpApiEndpoint.Any>(definition: E) => {
  const endpoint = definition as unknown as HttpApiEndpoint.HttpApiEndpoint.AnyWithProps
  // The api/ schemas need no services; the endpoint's generic context type is `any`, so it is pinned here.
  const encoder = (schema: Schema.Schema<unknown, unknown, unknown>) =>
    Schema.encodeUnknown(schema as Schema.Schema<unknown, unknown, never>)
  const encodePath = Option.map(endpoint.pathSchema, encoder)
  const encodeUrlParams = Option.map(endpoint.urlParamsSchema, encoder)
  const encodePayload = Option.map(endpoint.payloadSchema, encoder)
  const success = endpoint.successSchema as Schema.Schema<HttpApiEndpoint.HttpApiEndpoint.Success<E>, unknown>
  const method = endpoint.method

  const prepare = (input: EndpointInput<E>): Effect.Effect<Call, ApiError> =>
    Effect.gen(function* () {
      const template = { method, path: endpoint.path }
      let path: string = endpoint.path
      if (Option.isSome(encodePath)) {
        const params = yield* encodePath
          .value(input.path)
          .pipe(Effect.mapError((error) => invalidRequest(template, "path", error)))
        path = fillPath(endpoint.path, params as Record<string, unknown>)
      }
      const at = { method, path }
      let urlParams: Record<string, string> | undefined
      if (Option.isSome(encodeUrlParams) && input.urlParams !== undefined) {
        const encoded = yield* encodeUrlParams
          .value(input.urlParams)
          .pipe(Effect.mapError((error) => invalidRequest(at, "query", error)))
        urlParams = {}
        for (const [key, value] of Object.entries(encoded as Record<string, unknown>)) {
          if (value !== undefined) urlParams[key] = String(value)
        }
      }
      let body: string | undefined
      if (Option.isSome(encodePayload)) {
        const encoded = yield* encodePayload
          .value(input.payload)
          .pipe(Effect.mapError((error) => invalidRequest(at, "body", error)))
        body = JSON.stringify(encoded)
      }
      return { method, path, urlParams, body, headers: input.headers, retry: input.retry }
    })

  const run = (transport: Transport, input: EndpointInput<E>) =>
    Effect.flatMap(prepare(input), (call) =>
      send(transport, call, (response) =>
        Effect.map(readText(call, response), (text) => ({ text, status: response.status, headers: response.headers }))
      ).pipe(
        Effect.flatMap(({ text, status, headers }) =>
          decodeJson(call, success, text, status, requestIdOf(headers)).pipe(
            // A create answered with a body that does not say what it created: acted on, but on what is unknown.
            Effect.catchAll((error) =>
              Effect.flatMap(resolveMode(call), (mode) =>
                Effect.fail(mode === "unsent" ? ambiguous(call, error) : error)
              )
            )
          )
        )
      )
    )

  return { endpoint: definition, prepare, run }
}
