/**
 * Authentication of the embedded backend: every request must carry `Authorization: Bearer <key>`; the trace
 * surface's routes also take HTTP Basic with any user and the key as the password
 * (`Basic base64("api:" + key)`), as the trace service's SDKs send it. The presented token and the key are
 * both hashed with SHA-256 and the two digests compared with `crypto.timingSafeEqual`, so the comparison
 * takes the same time whatever the token's length or content. Neither the key nor the presented token is ever logged or echoed in a response.
 *
 * @since 0.1.0
 */
import { createHash, timingSafeEqual } from "node:crypto"
import * as Redacted from "effect/Redacted"

/** Compares two equal-length buffers; `crypto.timingSafeEqual` unless a test substitutes it. */
export type Compare = (a: Uint8Array, b: Uint8Array) => boolean

const digest = (value: string): Buffer => createHash("sha256").update(value, "utf8").digest()

/** The token of an `Authorization: Bearer <token>` header, or undefined when there is none. */
export const bearerToken = (header: string | undefined): string | undefined => {
  if (header === undefined) return undefined
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header)
  return match?.[1]
}

/** The password of an `Authorization: Basic base64(user:password)` header, or undefined when there is none. */
export const basicPassword = (header: string | undefined): string | undefined => {
  if (header === undefined) return undefined
  const match = /^Basic[ \t]+([A-Za-z0-9+/]+={0,2})[ \t]*$/i.exec(header)
  if (match?.[1] === undefined) return undefined
  const decoded = Buffer.from(match[1], "base64").toString("utf8")
  const colon = decoded.indexOf(":")
  return colon < 0 ? undefined : decoded.slice(colon + 1)
}

/**
 * A verifier of `Authorization` header values against `apiKey`, comparing SHA-256 digests in constant time.
 * With `allowBasic`, HTTP Basic credentials whose password is the key pass too (any user).
 */
export const makeVerifier = (
  apiKey: Redacted.Redacted<string>,
  compare: Compare = timingSafeEqual
): ((authorization: string | undefined, allowBasic?: boolean) => boolean) => {
  const expected = digest(Redacted.value(apiKey))
  return (authorization, allowBasic = false) => {
    const token = bearerToken(authorization) ?? (allowBasic ? basicPassword(authorization) : undefined)
    // A missing token is still compared, against a digest of nothing, to keep one code path.
    const ok = compare(digest(token ?? ""), expected)
    return token !== undefined && ok
  }
}
