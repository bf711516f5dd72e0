/**
 * `Idempotency-Key` for the server's POST routes (model create, log, and job create once it is wired): the
 * handler runs through `IdempotencyKeys.run`, scoped by route, so a repeat of a key within 24 hours gets the
 * first response byte for byte and creates nothing new, and the same key with a different raw body is a 409
 * `{"detail": ...}`. Without the header the handler simply runs.
 *
 * Only successes are remembered: a handler refuses with {@link Refused} (a 404, a 409 for a taken name...),
 * which is answered but not stored, so a corrected retry with the same key is not stuck on the refusal.
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { IdempotencyKeys, type StoredResponse } from "../../store/IdempotencyKeys.js"
import type { StoreError } from "../../store/StoreError.js"
import { detail } from "./responses.js"

/** A handler's refusal: answered as is, never remembered under the key. */
export class Refused extends Data.TaggedError("Refused")<{
  readonly response: HttpServerResponse.HttpServerResponse
}> {}

/** Refuses with `{"detail": message}` and a status. */
export const refuse = (status: number, message: string): Refused => new Refused({ response: detail(status, message) })

/** A success body encoded with its schema, as a stored response (status 200). */
export const encoded = <A, I>(schema: Schema.Schema<A, I>, value: A): Effect.Effect<StoredResponse> =>
  Effect.map(Schema.encode(schema)(value).pipe(Effect.orDie), (body) => ({ status: 200, body: JSON.stringify(body) }))

const toResponse = (stored: StoredResponse): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.text(stored.body, { status: stored.status, contentType: "application/json" })

/**
 * Runs a handler under the request's `Idempotency-Key`, if any, scoped by `route` (e.g.
 * `"POST /v1/preview/models"`), and answers with its response or its refusal.
 */
export const idempotent = <R>(
  route: string,
  handler: Effect.Effect<StoredResponse, Refused | StoreError, R>
): Effect.Effect<
  HttpServerResponse.HttpServerResponse,
  never,
  R | IdempotencyKeys | HttpServerRequest.HttpServerRequest
> =>
  Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    const key = request.headers["idempotency-key"]
    if (key === undefined || key === "") return toResponse(yield* handler)
    const keys = yield* IdempotencyKeys
    const body = yield* Effect.orElseSucceed(request.text, () => "")
    return toResponse(yield* keys.run(key, route, body, handler))
  }).pipe(
    Effect.catchTags({
      Refused: (refused) => Effect.succeed(refused.response),
      StoreError: (error) =>
        error.reason === "Conflict"
          ? Effect.succeed(detail(409, error.message))
          : error.reason === "NotFound"
            ? Effect.succeed(detail(404, error.message))
            : Effect.die(error)
    })
  )
