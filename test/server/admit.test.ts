import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import { jsonDepth, nestsDeeper } from "../../src/api/internal/jsonDepth.js"
import { API_KEY } from "../support/clients.js"
import { Backend, call } from "./support.js"

/** A value nested `depth` deep, arrays and objects alternating, with `leaf` innermost. */
const nested = (depth: number, leaf: unknown): unknown => {
  let value = leaf
  for (let i = 0; i < depth; i++) value = i % 2 === 0 ? [value] : { k: value }
  return value
}

describe("admit: the depth of a parsed body", () => {
  it("nestsDeeper tells what jsonDepth tells of the value's text, for any JSON value and limit", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.jsonValue({ maxDepth: 6 }), FastCheck.nat({ max: 8 }), (value, limit) => {
        expect(nestsDeeper(value, limit)).toBe(jsonDepth(JSON.stringify(value), limit) > limit)
      }),
      { numRuns: 2000 }
    )
  })

  it("empty arrays and objects count as a level; around the server's limit", () => {
    for (const depth of [0, 1, 2, 511, 512, 513, 3_000]) {
      for (const leaf of [1, [], {}, "[[[{"]) {
        const value = nested(depth, leaf)
        expect(nestsDeeper(value, 512)).toBe(jsonDepth(JSON.stringify(value), 512) > 512)
      }
    }
  })
})

describe("admit on the real server", () => {
  it.layer(Backend)("a JSON body", (it) => {
    it.effect("is parsed once: the route reads the value admit parsed", () =>
      Effect.gen(function* () {
        const marker = `parse-once-${Date.now()}`
        const parse = JSON.parse
        let parses = 0
        JSON.parse = ((text: string, reviver?: Parameters<typeof JSON.parse>[1]) => {
          if (typeof text === "string" && text.includes(marker)) parses++
          return parse(text, reviver)
        }) as typeof JSON.parse
        const reply = yield* call("/call/start", {
          method: "POST",
          headers: {
            authorization: `Basic ${Buffer.from(`api:${API_KEY}`).toString("base64")}`,
            "content-type": "application/json"
          },
          body: JSON.stringify({
            start: {
              project_id: "me/admit",
              op_name: "op",
              started_at: "2026-01-01T00:00:00.000Z",
              attributes: {},
              inputs: { marker }
            }
          })
        }).pipe(
          Effect.ensuring(
            Effect.sync(() => {
              JSON.parse = parse
            })
          )
        )
        expect(reply.status).toBe(200)
        expect(parses).toBe(1)
      })
    )
  })
})
