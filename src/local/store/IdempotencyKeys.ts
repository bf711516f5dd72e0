/**
 * Idempotency keys of POST requests (`Idempotency-Key`): the first response to a key is stored with the
 * SHA-256 of the raw request body, and
 * - the same key within 24 hours with the same body gets that first response again;
 * - the same key with a different body is a `Conflict` (the HTTP layer answers 409);
 * - a key older than 24 hours has expired and counts as new.
 *
 * Keys are scoped by request (`"POST /v1/preview/training-jobs"`). `run` serialises idempotent requests in
 * the process, so two concurrent requests with one key run the handler once.
 *
 * @since 0.1.0
 */
import { createHash } from "node:crypto"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { decodeRows, nowIso, orDieSql } from "./internal/sql.js"
import { conflict, type StoreError } from "./StoreError.js"

/** How long a key is remembered: 24 hours. */
export const TTL_MILLIS = 24 * 60 * 60 * 1000

/** A stored response: its status and body text. */
export interface StoredResponse {
  /** The HTTP status. */
  readonly status: number
  /** The body, as sent. */
  readonly body: string
}

/** The SHA-256 (hex) of a raw request body. */
export const bodyHash = (body: string | Uint8Array): string => createHash("sha256").update(body).digest("hex")

/** The idempotency keys repository. */
export interface Service {
  /**
   * The stored response of a key for a request with this body: `None` when new or expired, `Conflict` when
   * the key was used with a different body.
   */
  readonly lookup: (
    key: string,
    request: string,
    body: string | Uint8Array
  ) => Effect.Effect<Option.Option<StoredResponse>, StoreError>
  /** Stores the first response of a key (replacing an expired one); `Conflict` as in `lookup`. */
  readonly remember: (
    key: string,
    request: string,
    body: string | Uint8Array,
    response: StoredResponse
  ) => Effect.Effect<void, StoreError>
  /**
   * Runs a handler once per key: returns the stored response when there is one, else runs the handler and
   * remembers its response (a failed handler is not remembered).
   */
  readonly run: <E, R>(
    key: string,
    request: string,
    body: string | Uint8Array,
    handler: Effect.Effect<StoredResponse, E, R>
  ) => Effect.Effect<StoredResponse, StoreError | E, R>
}

/** The idempotency keys repository service. */
export class IdempotencyKeys extends Context.Tag("effect-rl/local/store/IdempotencyKeys")<IdempotencyKeys, Service>() {}

const Row = Schema.Struct({
  body_hash: Schema.String,
  status: Schema.Int,
  response: Schema.String,
  created_at: Schema.String
})
const decode = decodeRows(Row, "idempotency key")

/** Builds the idempotency keys repository over the `SqlClient`. */
export const make: Effect.Effect<Service, never, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const lock = yield* Effect.makeSemaphore(1)

  /** The live (unexpired) entry of a key, checked against the body's hash. */
  const live = (key: string, request: string, hash: string) =>
    Effect.gen(function* () {
      const rows = yield* sql`SELECT body_hash, status, response, created_at FROM idempotency_keys
        WHERE key = ${key} AND request = ${request}`.pipe(Effect.flatMap(decode))
      const row = rows[0]
      if (row === undefined) return Option.none<StoredResponse>()
      const now = yield* Clock.currentTimeMillis
      if (now - Date.parse(row.created_at) >= TTL_MILLIS) return Option.none<StoredResponse>()
      if (row.body_hash !== hash) {
        return yield* conflict(`idempotency key ${key} was already used with a different request body`)
      }
      return Option.some({ status: row.status, body: row.response })
    })

  const lookup = (key: string, request: string, body: string | Uint8Array) =>
    orDieSql(live(key, request, bodyHash(body)))

  const remember = (key: string, request: string, body: string | Uint8Array, response: StoredResponse) =>
    Effect.gen(function* () {
      const hash = bodyHash(body)
      if (Option.isSome(yield* live(key, request, hash))) return
      const now = yield* Clock.currentTimeMillis
      yield* sql`DELETE FROM idempotency_keys WHERE created_at <= ${new Date(now - TTL_MILLIS).toISOString()}`
      yield* sql`INSERT OR REPLACE INTO idempotency_keys ${sql.insert({
        key,
        request,
        body_hash: hash,
        status: response.status,
        response: response.body,
        created_at: yield* nowIso
      })}`
    }).pipe(sql.withTransaction, orDieSql, Effect.withSpan("IdempotencyKeys.remember"))

  const run = <E, R>(
    key: string,
    request: string,
    body: string | Uint8Array,
    handler: Effect.Effect<StoredResponse, E, R>
  ): Effect.Effect<StoredResponse, StoreError | E, R> =>
    lock.withPermits(1)(
      Effect.gen(function* () {
        const stored = yield* lookup(key, request, body)
        if (Option.isSome(stored)) return stored.value
        const response = yield* handler
        yield* remember(key, request, body, response)
        return response
      })
    )

  return { lookup, remember, run }
})

/** The idempotency keys repository layer. */
export const layer: Layer.Layer<IdempotencyKeys, never, SqlClient.SqlClient> = Layer.effect(IdempotencyKeys, make)
