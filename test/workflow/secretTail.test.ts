/**
 * The tail of an agent's output with the rollout's key redacted: whatever the text around the key, however the
 * stream is cut into chunks and wherever the tail's cut falls, no piece of the key is shown.
 */
import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import { REDACTED, redact, SecretTail } from "../../src/workflow/internal/secretTail.js"

/** Characters of a key (base64url, as the gateway's keys are); the text around it has none of them. */
const KEY_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
const FILLER = FastCheck.string({ unit: FastCheck.constantFrom(".", " ", "\n", ":", "~"), maxLength: 300 })

/**
 * Whether no proper prefix of `key` is also its suffix. A key that overlaps itself ("AAAA") has no one place in a
 * run of itself, so no stream could say where one ends; the gateway's keys (32 random bytes) overlap themselves
 * with negligible probability.
 */
const overlapsNothing = (key: string) => {
  for (let n = 1; n < key.length; n++) if (key.startsWith(key.slice(-n))) return false
  return true
}

/** Every character of the key alphabet left in `shown` once the redaction markers are taken out. */
const keyCharacters = (shown: string) => [...shown.split(REDACTED).join("")].filter((c) => KEY_ALPHABET.includes(c))

describe("SecretTail", () => {
  it("shows no part of the key, wherever the stream's chunks and the tail's cut fall", () => {
    FastCheck.assert(
      FastCheck.property(
        FastCheck.string({ unit: FastCheck.constantFrom(...KEY_ALPHABET), minLength: 8, maxLength: 60 }).filter(
          overlapsNothing
        ),
        FastCheck.array(FILLER, { minLength: 1, maxLength: 8 }),
        FastCheck.array(FastCheck.integer({ min: 1, max: 97 }), { minLength: 1, maxLength: 20 }),
        FastCheck.integer({ min: 1, max: 400 }),
        (key, fillers, chunkSizes, keep) => {
          // The key between each two fillers; written in chunks of the drawn sizes, in turn.
          const text = fillers.join(key)
          const tail = new SecretTail(keep, key)
          for (let at = 0, i = 0; at < text.length; i++) {
            const size = chunkSizes[i % chunkSizes.length]!
            tail.push(text.slice(at, at + size))
            at += size
          }
          const shown = tail.value()
          expect(keyCharacters(shown)).toEqual([])
          // What is shown is the end of the redacted text, as long as asked (less a marker the cut would split).
          const whole = redact(text, key)
          expect(whole.endsWith(shown)).toBe(true)
          expect(shown.length).toBeLessThanOrEqual(keep)
          expect(shown.length).toBeGreaterThan(Math.min(keep, whole.length) - REDACTED.length)
        }
      ),
      { numRuns: 500 }
    )
  })

  it("keeps the tail when no key is given", () => {
    const tail = new SecretTail(5, "")
    for (const chunk of ["hello ", "there ", "world"]) tail.push(chunk)
    expect(tail.value()).toBe("world")
  })
})
