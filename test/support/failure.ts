/**
 * Reading the failure of a client call in a test, with the check every such test makes: the API key (and any
 * other secret named) shows nowhere in the error, its message, its JSON or the printed cause.
 */
import { expect } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import type { ApiError } from "../../src/client/ApiError.js"
import { API_KEY } from "./clients.js"

/** Run a call that must fail with an `ApiError`; check that no key (`secrets`, the test key) shows in it. */
export const failure = <A>(effect: Effect.Effect<A, ApiError>, secrets: ReadonlyArray<string> = []) =>
  Effect.gen(function* () {
    const exit = yield* Effect.exit(effect)
    if (Exit.isSuccess(exit)) return yield* Effect.dieMessage(`expected a failure, got ${JSON.stringify(exit.value)}`)
    const error = Cause.failureOption(exit.cause)
    if (Option.isNone(error)) return yield* Effect.dieMessage(`expected an ApiError, got ${Cause.pretty(exit.cause)}`)
    for (const text of [
      String(error.value),
      error.value.message,
      JSON.stringify(error.value),
      Cause.pretty(exit.cause)
    ]) {
      for (const secret of [API_KEY, ...secrets]) expect(text).not.toContain(secret)
    }
    return error.value
  })
