/**
 * The bounded tail of a stream of text (an agent's stderr or stdout) in which a secret (the rollout's key) is
 * never shown, whole or in part. The secret is replaced by `<redacted>` before the text is cut: cutting first
 * and redacting after would leave the part of a key that survived the cut in plain sight. A secret still arriving
 * (its start at the very end of what came) is never cut, and no cut splits a `<redacted>`.
 *
 * A secret that overlaps itself ("abab") has no one place in a run of itself; the gateway's keys (32 random bytes)
 * overlap themselves with negligible probability.
 */

/** What stands where the secret was. */
export const REDACTED = "<redacted>"

/** A tail of at most `keep` characters of what was pushed, with `secret` redacted (see the module). */
export class SecretTail {
  private text = ""

  constructor(
    private readonly keep: number,
    private readonly secret: string
  ) {}

  /** Adds a chunk of the stream. */
  push(chunk: string): void {
    this.text += chunk
    // Amortised: trimmed once it holds twice what is needed (the tail, and room for a secret still arriving).
    if (this.text.length > 2 * (this.keep + this.secret.length)) {
      const text = redact(this.text, this.secret)
      this.text = text.slice(uncut(text, text.length - this.keep - this.secret.length, "before"))
    }
  }

  /** The last `keep` characters of the redacted text (fewer where the cut would split a `<redacted>`). */
  value(): string {
    const text = redact(this.text, this.secret)
    return text.slice(uncut(text, text.length - this.keep, "after"))
  }
}

/** `text` with every occurrence of `secret` replaced by {@link REDACTED}. */
export const redact = (text: string, secret: string): string =>
  secret === "" ? text : text.split(secret).join(REDACTED)

/** Where to cut `text` near `at` without splitting a {@link REDACTED}: `before` or `after` one that `at` falls in. */
const uncut = (text: string, at: number, side: "before" | "after"): number => {
  if (at <= 0) return 0
  const marker = text.indexOf(REDACTED, Math.max(0, at - REDACTED.length + 1))
  if (marker === -1 || marker >= at) return at
  return side === "before" ? marker : marker + REDACTED.length
}
