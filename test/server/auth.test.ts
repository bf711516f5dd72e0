import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { bearerToken, makeVerifier } from "../../src/local/server/Auth.js"
import { API_KEY } from "../support/clients.js"
import { auth, Backend, call, clean } from "./support.js"

describe("auth", () => {
  it.layer(Backend)("on the real server", (it) => {
    it.effect("a missing key is 401 with a JSON detail", () =>
      Effect.gen(function* () {
        const reply = yield* call("/v1/health")
        expect(reply.status).toBe(401)
        expect(reply.contentType).toContain("application/json")
        expect(reply.json).toEqual({ detail: "Invalid or missing API key" })
      })
    )

    it.effect("a wrong key is 401, and neither key shows in the body", () =>
      Effect.gen(function* () {
        const reply = yield* call("/v1/preview/base-models", { headers: { authorization: "Bearer sk-wrong-key" } })
        expect(reply.status).toBe(401)
        expect(reply.json).toEqual({ detail: "Invalid or missing API key" })
        expect(reply.text).not.toContain("sk-wrong-key")
        expect(clean(reply.text)).toBe(true)
      })
    )

    it.effect("a key that is a prefix of the right one, or another scheme, is 401", () =>
      Effect.gen(function* () {
        for (const header of [`Bearer ${API_KEY.slice(0, -1)}`, `Bearer ${API_KEY}x`, `Basic ${API_KEY}`, API_KEY]) {
          const reply = yield* call("/v1/health", { headers: { authorization: header } })
          expect(reply.status).toBe(401)
        }
      })
    )

    it.effect("the OpenAI-compatible routes answer 401 in the OpenAI error shape", () =>
      Effect.gen(function* () {
        for (const [path, method] of [
          ["/v1/models", "GET"],
          ["/v1/chat/completions", "POST"]
        ] as const) {
          const reply = yield* call(path, { method, headers: { authorization: "Bearer nope" } })
          expect(reply.status).toBe(401)
          expect(reply.json).toEqual({
            error: { message: "Invalid or missing API key", type: "AuthenticationError", param: null, code: 401 }
          })
        }
      })
    )

    it.effect("the right key passes (the scheme is case-insensitive)", () =>
      Effect.gen(function* () {
        expect((yield* call("/v1/health", { headers: auth })).status).toBe(200)
        expect((yield* call("/v1/health", { headers: { authorization: `bearer ${API_KEY}` } })).status).toBe(200)
      })
    )

    it.effect("auth comes before routing: an unknown route without a key is 401", () =>
      Effect.gen(function* () {
        expect((yield* call("/v1/nothing-here")).status).toBe(401)
      })
    )
  })

  describe("the verifier", () => {
    it("compares equal-length SHA-256 digests with the constant-time compare, whatever the token", () => {
      const seen: Array<readonly [number, number]> = []
      const verify = makeVerifier(Redacted.make("the-key"), (a, b) => {
        seen.push([a.length, b.length])
        return Buffer.compare(a, b) === 0
      })
      expect(verify("Bearer the-key")).toBe(true)
      expect(verify("Bearer x")).toBe(false)
      expect(verify(`Bearer ${"y".repeat(10_000)}`)).toBe(false)
      expect(verify(undefined)).toBe(false)
      expect(verify("Bearer")).toBe(false)
      expect(seen).toEqual(Array.from({ length: 5 }, () => [32, 32]))
    })

    it("uses crypto.timingSafeEqual by default (which throws on unequal lengths, so digests are compared)", () => {
      const verify = makeVerifier(Redacted.make("k"))
      expect(verify("Bearer k")).toBe(true)
      expect(verify(`Bearer ${"k".repeat(1000)}`)).toBe(false)
    })

    it("reads the bearer token", () => {
      expect(bearerToken("Bearer abc")).toBe("abc")
      expect(bearerToken("bearer  abc ")).toBe("abc")
      expect(bearerToken("Bearer a b")).toBeUndefined()
      expect(bearerToken("Token abc")).toBeUndefined()
      expect(bearerToken(undefined)).toBeUndefined()
    })
  })
})
