/**
 * Stored responses of the Responses API (`POST /v1/responses` with `store` left on): each response with its
 * input items (as `GET /v1/responses/{id}/input_items` lists them) and the response it continued, so that a
 * later request can continue it with `previous_response_id` or refer to one of its items.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { Response, StoredInputItem } from "../../api/Responses.js"
import type { StoredResponse } from "../../api/ResponsesChat.js"
import { json, orDieSql, parseJson } from "./internal/sql.js"

/** A stored response (the type is the contract's, shared with a rollout's). */
export type { StoredResponse }

/** The stored responses repository. */
export interface Service {
  /** Stores a response (replacing one of the same id). */
  readonly put: (stored: StoredResponse) => Effect.Effect<void>
  /** A stored response, or none. */
  readonly get: (id: string) => Effect.Effect<Option.Option<StoredResponse>>
  /** Deletes a stored response: whether there was one. */
  readonly remove: (id: string) => Effect.Effect<boolean>
}

/** The stored responses repository service. */
export class StoredResponses extends Context.Tag("effect-rl/local/store/StoredResponses")<StoredResponses, Service>() {}

interface Row {
  readonly previous_response_id: string | null
  readonly input_items: string
  readonly response: string
}

/** Builds the repository over the `SqlClient`. */
export const make: Effect.Effect<Service, never, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const put = (stored: StoredResponse) =>
    sql`INSERT OR REPLACE INTO responses ${sql.insert({
      id: stored.response.id,
      previous_response_id: stored.previousResponseId,
      input_items: json(stored.inputItems),
      response: json(stored.response),
      created_at: stored.response.created_at
    })}`.pipe(Effect.asVoid, orDieSql, Effect.withSpan("StoredResponses.put"))
  const get = (id: string) =>
    sql<Row>`SELECT previous_response_id, input_items, response FROM responses WHERE id = ${id}`.pipe(
      Effect.map((rows) =>
        Option.map(
          Option.fromNullable(rows[0]),
          (row): StoredResponse => ({
            response: parseJson(row.response) as Response,
            inputItems: parseJson(row.input_items) as ReadonlyArray<StoredInputItem>,
            previousResponseId: row.previous_response_id
          })
        )
      ),
      orDieSql
    )
  const remove = (id: string) =>
    sql<{ readonly id: string }>`DELETE FROM responses WHERE id = ${id} RETURNING id`.pipe(
      Effect.map((rows) => rows.length > 0),
      orDieSql
    )
  return { put, get, remove }
})

/** The stored responses layer. */
export const layer: Layer.Layer<StoredResponses, never, SqlClient.SqlClient> = Layer.effect(StoredResponses, make)
