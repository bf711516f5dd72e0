/**
 * The dashboard's one-time sign-in links (`SignIn`, `POST /v1/local/sign-in`) on the real server: a minted
 * link's token is good for the key once and without the key; a used, unknown or expired token is a 401 saying
 * which, never echoing the token; the key is in no link.
 */
import { describe, expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as LocalBackend from "../../src/LocalBackend.js"
import { API_KEY } from "../support/clients.js"
import { backendWith, call, clean } from "./support.js"

const TTL_MS = 1_500

const redeem = (token: unknown) =>
  call("/v1/local/sign-in", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ token })
  })

const tokenOf = (link: string): string => {
  const match = /#token=([\w-]+)$/.exec(link)
  expect(match).not.toBeNull()
  return match![1]!
}

describe("sign-in links", () => {
  // The live clock: the expiry is real time on the server.
  layer(backendWith({ signInTtl: `${TTL_MS} millis` }), { excludeTestServices: true })("on the real server", (it) => {
    it.effect("a link's token is good for the key once, without the key; a reused or unknown one is refused", () =>
      Effect.gen(function* () {
        const { signInLink, url } = yield* LocalBackend.LocalBackend
        const link = yield* signInLink
        expect(link.startsWith(`${url}/ui/#token=`)).toBe(true)
        expect(link).not.toContain(API_KEY)
        const token = tokenOf(link)
        expect(tokenOf(yield* signInLink)).not.toBe(token)

        const first = yield* redeem(token)
        expect(first.status).toBe(200)
        expect(first.json).toEqual({ api_key: API_KEY })

        const again = yield* redeem(token)
        expect(again.status).toBe(401)
        expect(again.json).toEqual({ detail: "this sign-in link was used already" })
        expect(again.text).not.toContain(token)

        const unknown = yield* redeem("not-a-token-this-server-made")
        expect(unknown.status).toBe(401)
        expect(unknown.json).toEqual({ detail: "unknown sign-in token" })
        expect(unknown.text).not.toContain("not-a-token")

        // The other routes still want the key; a body that is not `{token}` is a 422 that names the field.
        expect((yield* call("/v1/local/models")).status).toBe(401)
        const bad = yield* redeem(42)
        expect(bad.status).toBe(422)
        expect(clean(bad.text)).toBe(true)
      })
    )

    it.effect("a token past its life is refused as expired", () =>
      Effect.gen(function* () {
        const { signInLink } = yield* LocalBackend.LocalBackend
        const token = tokenOf(yield* signInLink)
        yield* Effect.sleep(`${TTL_MS + 300} millis`)
        const late = yield* redeem(token)
        expect(late.status).toBe(401)
        expect(late.json).toEqual({ detail: "this sign-in link has expired" })
        expect(clean(late.text)).toBe(true)
      })
    )
  })
})
