/**
 * A rollout gateway in a process of its own, for the benches that measure it from outside (its memory, its
 * answers to hostile bodies): `--rollouts <n>` rollouts of the instant policy, each with its endpoint, printed as
 * one JSON line `{"pid", "endpoints": [{"baseUrl", "apiKey"}]}` on stdout once they are registered; then it
 * waits until its stdin closes.
 *
 *   npx tsx bench/gateway/serve.ts --rollouts 2
 */
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Rollout from "../../src/workflow/Rollout.js"
import * as RolloutGateway from "../../src/workflow/RolloutGateway.js"
import { instant } from "./instant.js"

const at = process.argv.indexOf("--rollouts")
const ROLLOUTS = at === -1 ? 2 : Number(process.argv[at + 1])

const stdinClosed = Effect.async<void>((resume) => {
  process.stdin.resume()
  process.stdin.once("end", () => resume(Effect.void))
  process.stdin.once("close", () => resume(Effect.void))
})

const program = Effect.gen(function* () {
  const endpoints: Array<{ baseUrl: string; apiKey: string }> = []
  const all = Effect.forEach(
    Array.from({ length: ROLLOUTS }, (_, i) => i),
    () =>
      Rollout.run(
        instant,
        RolloutGateway.withEndpoint((endpoint) =>
          Effect.zipRight(
            Effect.sync(() => {
              endpoints.push({ baseUrl: endpoint.baseUrl, apiKey: Redacted.value(endpoint.apiKey) })
              if (endpoints.length === ROLLOUTS) {
                process.stdout.write(`${JSON.stringify({ pid: process.pid, endpoints })}\n`)
              }
            }),
            stdinClosed
          )
        )
      ),
    { concurrency: "unbounded", discard: true }
  )
  yield* all
}).pipe(Effect.provide(RolloutGateway.layer()))

Effect.runPromise(program).then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
