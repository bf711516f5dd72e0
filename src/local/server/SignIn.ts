/**
 * One-time sign-in links to the dashboard: the server mints a random single-use token with a short life
 * (10 minutes by default) and prints `<url>/ui/#token=<token>`. The token rides in the URL's fragment, which a
 * browser never sends, so it is in no request line or server log; the page takes it out of the address bar
 * and POSTs it to `/v1/local/sign-in`, which answers the API key once and burns the token.
 *
 * Tokens live in the server's memory only, as SHA-256 digests (a restart forgets them). A token used before,
 * never minted or past its life is refused with a {@link SignInError} naming which, never quoting the token.
 * The key itself is never printed, logged or put in a URL.
 *
 * @since 0.1.0
 */
import { createHash, randomBytes } from "node:crypto"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Redacted from "effect/Redacted"
import { UI_PATH } from "./DashboardApi.js"

/** Why a token was refused: used before, never minted (or forgotten), or past its life. */
export type SignInErrorReason = "Used" | "Unknown" | "Expired"

/** A sign-in token refused; `message` says why without quoting the token. */
export class SignInError extends Data.TaggedError("SignInError")<{
  readonly reason: SignInErrorReason
  readonly message: string
}> {}

/** The sign-in tokens of a server. */
export interface Service {
  /** Mints a token, good once within the life. */
  readonly mint: Effect.Effect<string>
  /** Burns a token and gives the key; a {@link SignInError} when the token is refused. */
  readonly redeem: (token: string) => Effect.Effect<Redacted.Redacted<string>, SignInError>
}

/** The sign-in tokens service. */
export class SignIn extends Context.Tag("effect-rl/local/SignIn")<SignIn, Service>() {}

/** The default life of a token: 10 minutes. */
export const DEFAULT_TTL: Duration.Duration = Duration.minutes(10)

/** The most tokens remembered at once; minting more forgets the oldest. */
export const MAX_TOKENS = 1000

interface Entry {
  readonly expiresAt: number
  used: boolean
}

const digest = (token: string): string => createHash("sha256").update(token, "utf8").digest("hex")

/** Builds the tokens of a server with `apiKey`, each good for `ttl`. */
export const make = (apiKey: Redacted.Redacted<string>, ttl: Duration.DurationInput = DEFAULT_TTL): Service => {
  const life = Duration.toMillis(Duration.decode(ttl))
  const entries = new Map<string, Entry>()
  // A used or expired token is remembered for one more life (to say why it is refused), then forgotten.
  const forget = (now: number) => {
    for (const [key, entry] of entries) if (entry.expiresAt + life < now) entries.delete(key)
    while (entries.size >= MAX_TOKENS) entries.delete(entries.keys().next().value as string)
  }
  return {
    mint: Effect.map(Clock.currentTimeMillis, (now) => {
      forget(now)
      const token = randomBytes(32).toString("base64url")
      entries.set(digest(token), { expiresAt: now + life, used: false })
      return token
    }),
    redeem: (token) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const entry = entries.get(digest(token))
        if (entry === undefined) {
          return Effect.fail(new SignInError({ reason: "Unknown", message: "unknown sign-in token" }))
        }
        if (entry.used) {
          return Effect.fail(new SignInError({ reason: "Used", message: "this sign-in link was used already" }))
        }
        if (now > entry.expiresAt) {
          return Effect.fail(new SignInError({ reason: "Expired", message: "this sign-in link has expired" }))
        }
        entry.used = true
        return Effect.succeed(apiKey)
      })
  }
}

/** The tokens of a server with `apiKey` as a layer. */
export const layer = (
  apiKey: Redacted.Redacted<string>,
  ttl?: Duration.DurationInput | undefined
): Layer.Layer<SignIn> => Layer.sync(SignIn, () => make(apiKey, ttl))

/** The dashboard's sign-in link of a server at `url` for `token`: `<url>/ui/#token=<token>`. */
export const linkOf = (url: string, token: string): string => `${url}${UI_PATH}#token=${token}`
