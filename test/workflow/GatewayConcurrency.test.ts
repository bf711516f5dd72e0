/**
 * Many requests in flight on one rollout through the gateway: each is answered, and Node prints no
 * `MaxListenersExceededWarning` (every request in flight listens for the rollout's end on one signal; past 10
 * listeners Node warned).
 */
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as TestServices from "effect/TestServices"
import type { ChatCompletion } from "../../src/api/ChatCompletion.js"
import * as Policy from "../../src/workflow/Policy.js"
import * as Rollout from "../../src/workflow/Rollout.js"
import * as RolloutGateway from "../../src/workflow/RolloutGateway.js"

const IN_FLIGHT = 40

describe("the gateway under many requests of one rollout", () => {
  it.layer(RolloutGateway.layer(), { timeout: 60_000 })((it) => {
    it.effect(`${IN_FLIGHT} requests in flight at once: all answered, no MaxListenersExceededWarning`, () =>
      Effect.gen(function* () {
        const warnings: Array<string> = []
        const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`)
        process.on("warning", onWarning)
        // The policy holds every request until all of them have arrived: they are all in flight together.
        let arrived = 0
        const all = yield* Deferred.make<void>()
        const policy = Policy.make({
          name: "gate",
          complete: (request) =>
            Effect.suspend(() => {
              if (++arrived === IN_FLIGHT) Deferred.unsafeDone(all, Effect.void)
              return Effect.as(Deferred.await(all), {
                id: "chatcmpl-gate",
                object: "chat.completion",
                created: 0,
                model: request.model,
                choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content: "ok" } }],
                usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 }
              } as unknown as ChatCompletion)
            })
        })
        const statuses = yield* Rollout.run(
          policy,
          RolloutGateway.withEndpoint((endpoint) =>
            Effect.promise(() =>
              Promise.all(
                Array.from({ length: IN_FLIGHT }, () =>
                  fetch(`${endpoint.baseUrl}/chat/completions`, {
                    method: "POST",
                    headers: {
                      authorization: `Bearer ${Redacted.value(endpoint.apiKey)}`,
                      "content-type": "application/json"
                    },
                    body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] })
                  }).then((response) => response.status)
                )
              )
            )
          )
        ).pipe(Effect.ensuring(Effect.sync(() => process.off("warning", onWarning))))
        expect(statuses.value).toEqual(Array.from({ length: IN_FLIGHT }, () => 200))
        expect(arrived).toBe(IN_FLIGHT)
        // Warnings are emitted on the next tick.
        yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
        expect(warnings).toEqual([])
      }).pipe(TestServices.provideLive)
    )
  })
})
