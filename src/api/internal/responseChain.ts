/**
 * Following a `previous_response_id` chain through stored responses, newest first, for both surfaces that store
 * responses (the embedded backend's SQLite store, a rollout's memory): a missing response is named with the one
 * that continued it, a chain that comes back to a response it passed is named a cycle, and a chain longer than
 * the bound is refused by its length, rather than followed until the context overflows.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"

/** The longest `previous_response_id` chain followed. */
export const MAX_CHAIN = 1_000

/** A stored response as the chain sees it: its id and the one it continued. */
export interface Link {
  readonly id: string
  readonly previousResponseId: string | null
}

/** Why a chain could not be followed: the sentence of the 400 that names `previous_response_id`. */
export class ChainError {
  readonly param = "previous_response_id"
  constructor(readonly message: string) {}
}

/**
 * The responses a request continues, from `previousId` back to the first, newest first; `get` reads one by id
 * (none: the store does not have it).
 */
export const follow = <A, E, R>(
  previousId: string | null | undefined,
  get: (id: string) => Effect.Effect<Option.Option<A>, E, R>,
  linkOf: (stored: A) => Link,
  max: number = MAX_CHAIN
): Effect.Effect<Either.Either<Array<A>, ChainError>, E, R> =>
  Effect.gen(function* () {
    const chain: Array<A> = []
    const seen = new Set<string>()
    let id = previousId
    let by: string | undefined
    while (id != null) {
      if (seen.has(id)) {
        return Either.left(
          new ChainError(
            `Previous response with id '${previousId}' continues a cycle: '${by}' continues '${id}', which the chain passed already.`
          )
        )
      }
      if (chain.length === max) {
        return Either.left(
          new ChainError(`Previous response with id '${previousId}' continues a chain longer than ${max} responses.`)
        )
      }
      const stored = yield* get(id)
      if (Option.isNone(stored)) {
        return Either.left(
          new ChainError(
            by === undefined
              ? `Previous response with id '${id}' not found.`
              : `Previous response with id '${id}' (continued by '${by}') not found.`
          )
        )
      }
      seen.add(id)
      chain.push(stored.value)
      by = id
      id = linkOf(stored.value).previousResponseId
    }
    return Either.right(chain)
  })
