import { SqlError } from "@effect/sql/SqlError"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { corrupt, type StoreError } from "../StoreError.js"

/** The current time of the `Clock` as an ISO 8601 string. */
export const nowIso: Effect.Effect<string> = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms).toISOString())

/** SQL failures are defects: the store's queries are fixed, so a failure means a broken database. */
export const orDieSql = <A, E, R>(
  effect: Effect.Effect<A, E | SqlError, R>
): Effect.Effect<A, Exclude<E, SqlError>, R> =>
  Effect.catchAll(effect, (error) =>
    error instanceof SqlError ? Effect.die(error) : Effect.fail(error as Exclude<E, SqlError>)
  )

/** Decodes rows with a schema; a row that does not decode is `Corrupt`. */
export const decodeRows =
  <A, I>(schema: Schema.Schema<A, I>, what: string) =>
  (rows: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<A>, StoreError> =>
    Effect.mapError(Schema.decodeUnknown(Schema.Array(schema))(rows), (error) =>
      corrupt(`a stored ${what} does not decode: ${ParseResult.TreeFormatter.formatErrorSync(error)}`)
    )

/** Whether a SQL failure is a uniqueness violation. */
export const isUniqueViolation = (error: SqlError): boolean => String(error.cause).includes("UNIQUE constraint failed")

/** The JSON text of a value. */
export const json = (value: unknown): string => JSON.stringify(value)

/** The value of a stored JSON text; null for null or text that does not parse. */
export const parseJson = (text: string | null): unknown => {
  if (text === null) return null
  try {
    return JSON.parse(text)
  } catch {
    return null
  }
}
