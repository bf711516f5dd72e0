/**
 * The rollout's key in what an external agent says back, through a real gateway: a command's long stderr (the
 * tail cut wherever it falls in the key), a service's long error body, a function's rejection. The error shows
 * `<redacted>` and no piece of the key. The policy answers at once (no backend): what is tested is the agent's
 * side.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ExternalAgent from "../../src/workflow/ExternalAgent.js"
import * as Rollout from "../../src/workflow/Rollout.js"
import * as RolloutGateway from "../../src/workflow/RolloutGateway.js"
import { instant } from "./support.js"

const policy = instant("echo", "ok")

/** The key as the error may show it: the gateway's keys are `sk-rollout-` and 43 random characters. */
const KEY = /sk-rollout-[A-Za-z0-9_-]{43}/

/** The pieces of 6 characters of the key's random part that `text` shows (the filler around it is dots). */
const pieces = (text: string, key: string) => {
  const secret = key.slice("sk-rollout-".length)
  const found: Array<string> = []
  for (let i = 0; i + 6 <= secret.length; i++)
    if (text.includes(secret.slice(i, i + 6))) found.push(secret.slice(i, i + 6))
  return found
}

describe("ExternalAgent and the rollout's key", () => {
  it.layer(RolloutGateway.layer(), { timeout: 60_000 })((it) => {
    it.effect("a command's stderr tail shows no piece of the key, wherever the cut falls in it", () =>
      Effect.gen(function* () {
        // The key (54 characters), `after` dots and a line repeating the key (59 characters): a tail of 2,000
        // starts inside the first key for after 1888-1940 (1901 is the report's case: 40 of the key's characters
        // were shown when the tail was cut before the redaction).
        for (const after of [1888, 1901, 1920, 1940, 1941]) {
          const agent = ExternalAgent.command<unknown>(
            `printf '%s' "$OPENAI_API_KEY" >&2; printf '%${after}s' '' | tr ' ' '.' >&2; printf 'key %s\\n' "$OPENAI_API_KEY" >&2; exit 3`
          )
          const failure = yield* Effect.flip(Rollout.run(policy, ExternalAgent.rollout(agent)({})))
          expect(failure).toMatchObject({ _tag: "ExternalAgentError", reason: "Exit", exitCode: 3 })
          expect(failure.message).not.toMatch(KEY)
          // The last line repeats the key whole: redacted there too.
          expect(failure.stderr!.endsWith(".key <redacted>")).toBe(true)
          expect(failure.stderr!.length).toBeLessThanOrEqual(2000)
          // Before the dots stands the start of the stderr tail or a `<redacted>`, never a piece of the key.
          expect(failure.message).not.toMatch(/[A-Za-z0-9_-]\.{10}/)
        }
      })
    )

    it.effect("a key in an agent's last line of output, its service's error body or its rejection is not shown", () =>
      Effect.gen(function* () {
        let seenKey = ""
        const server = http.createServer((req, res) => {
          let body = ""
          req.on("data", (chunk) => {
            body += chunk
          })
          req.on("end", () => {
            seenKey = (JSON.parse(body) as { endpoint: { api_key: string } }).endpoint.api_key
            // The key across the 500th character, where the error's excerpt of the body ends.
            res.writeHead(500).end(`${".".repeat(480)}${seenKey}${".".repeat(100)}`)
          })
        })
        yield* Effect.promise(() => new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve)))
        const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/agent`
        const viaService = yield* Effect.flip(
          Rollout.run(policy, ExternalAgent.rollout(ExternalAgent.http<unknown>(url))({}))
        ).pipe(Effect.ensuring(Effect.sync(() => server.close())))
        expect(seenKey).toMatch(KEY)
        expect(viaService.message).toContain("answered 500")
        expect(pieces(viaService.message, seenKey)).toEqual([])

        let givenKey = ""
        const viaFunction = yield* Effect.flip(
          Rollout.run(
            policy,
            ExternalAgent.rollout(
              ExternalAgent.fromFunction<unknown>(async (endpoint) => {
                givenKey = endpoint.apiKey
                throw new Error(`could not use ${endpoint.apiKey}`)
              })
            )({})
          )
        )
        expect(givenKey).toMatch(KEY)
        expect(viaFunction.message).toContain("could not use <redacted>")
        expect(pieces(viaFunction.message, givenKey)).toEqual([])

        // A last line of output (the report) that is not JSON, long, with the key across its 200th character
        // (where the error's excerpt of the line ends): 15 characters of the key's random part before the cut.
        const noisy = ExternalAgent.command<unknown>(
          `printf '{%173s' '' | tr ' ' '.'; printf '%s' "$OPENAI_API_KEY"; printf '%50s\\n' '' | tr ' ' '.'`
        )
        const report = yield* Effect.flip(Rollout.run(policy, ExternalAgent.rollout(noisy)({})))
        expect(report).toMatchObject({ reason: "Report" })
        expect(report.message).toContain(`{${".".repeat(173)}<redacte`)
        expect(report.message).not.toMatch(/\.[A-Za-z0-9_-]/)
      })
    )
  })
})
