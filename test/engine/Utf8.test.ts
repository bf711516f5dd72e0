import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import { completeEnd, maskNext, sequenceLength, Utf8State } from "../../src/local/engine/Utf8.js"
import { wellFormed, wellFormedPrefix } from "../support/utf8.js"

// The reference is the platform's fatal decoder: whole, it accepts exactly the well-formed sequences that end
// at a character boundary; streaming, it throws at the first byte no well-formed sequence can have there.
/** The state after `bytes`, or null when one of them may not come where it is. */
const stateAfter = (bytes: ReadonlyArray<number>): Utf8State | null => {
  const state = new Utf8State()
  for (const b of bytes) if (!state.push(b)) return null
  return state
}

/** The longest well-formed prefix ending at a boundary, by brute force. */
const longestWellFormed = (bytes: ReadonlyArray<number>): number => {
  for (let k = bytes.length; k > 0; k--) if (wellFormed(bytes.slice(0, k))) return k
  return 0
}

/** A special token id after the 256 bytes (the mask treats every id from 256 on as one). */
const SPECIAL = 256
const VOCAB = 261

/** Whether the state machine and the cut agree with the decoder on one byte sequence. */
const agrees = (bytes: ReadonlyArray<number>): boolean => {
  const state = stateAfter(bytes)
  return (
    (state !== null) === wellFormedPrefix(bytes) &&
    (state?.complete === true) === wellFormed(bytes) &&
    completeEnd(bytes, bytes.length) === longestWellFormed(bytes)
  )
}

describe("Utf8", () => {
  it("sequenceLength: the length a lead byte announces, 0 for a byte that leads nothing", () => {
    for (let b = 0; b < 256; b++) {
      const expected = b < 0x80 ? 1 : b < 0xc2 ? 0 : b < 0xe0 ? 2 : b < 0xf0 ? 3 : b < 0xf5 ? 4 : 0
      expect(sequenceLength(b)).toBe(expected)
    }
  })

  it("agrees with the fatal TextDecoder on every byte sequence of length 0, 1 and 2", () => {
    const disagreements: Array<ReadonlyArray<number>> = []
    const check = (bytes: ReadonlyArray<number>) => {
      if (!agrees(bytes)) disagreements.push(bytes)
    }
    check([])
    for (let a = 0; a < 256; a++) {
      check([a])
      for (let b = 0; b < 256; b++) check([a, b])
    }
    expect(disagreements).toEqual([])
  })

  it("agrees with the fatal TextDecoder on random longer sequences", () => {
    // Bytes biased to the edges of the ranges, where the rules of the table are, and to valid text.
    const edges = [0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1]
    const edges2 = [0xec, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xf7, 0xf8, 0xfe, 0xff]
    const byte = FastCheck.oneof(
      FastCheck.integer({ min: 0, max: 255 }),
      FastCheck.constantFrom(...edges, ...edges2),
      FastCheck.integer({ min: 0x80, max: 0xbf })
    )
    const text = FastCheck.string({ unit: "binary", maxLength: 6 }).map((s) => Array.from(new TextEncoder().encode(s)))
    const sequence = FastCheck.oneof(
      FastCheck.array(byte, { minLength: 3, maxLength: 12 }),
      FastCheck.tuple(text, FastCheck.array(byte, { maxLength: 3 }), text).map(([a, b, c]) => [...a, ...b, ...c])
    )
    FastCheck.assert(
      FastCheck.property(sequence, (bytes) => agrees(bytes)),
      { seed: 12, numRuns: 20_000 }
    )
  })

  it("accepts is push without the change", () => {
    for (let a = 0; a < 256; a++) {
      const after = stateAfter([a])
      if (after === null) continue
      for (let b = 0; b < 256; b++) {
        const accepted = after.accepts(b)
        const copy = stateAfter([a])!
        expect(copy.push(b)).toBe(accepted)
      }
    }
  })

  it("maskNext allows exactly the bytes that keep the sequence well-formed, and special tokens only at a boundary", () => {
    const prefixes: Array<Array<number>> = [[]]
    for (let a = 0; a < 256; a++) {
      prefixes.push([a])
      for (const b of [0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf]) prefixes.push([a, b])
    }
    const wrong: Array<string> = []
    for (const prefix of prefixes) {
      const state = stateAfter(prefix)
      if (state === null) continue
      const ok = new Uint8Array(VOCAB).fill(1)
      maskNext(state, ok, 4)
      for (let b = 0; b < 256; b++) if ((ok[b] === 1) !== wellFormedPrefix([...prefix, b])) wrong.push(`${prefix} ${b}`)
      for (let id = SPECIAL; id < VOCAB; id++) if ((ok[id] === 1) !== wellFormed(prefix)) wrong.push(`${prefix} ${id}`)
    }
    expect(wrong).toEqual([])
  })

  it("maskNext starts no character that cannot be finished within the tokens left, unless nothing else is allowed", () => {
    for (const left of [1, 2, 3, 4, 5]) {
      const ok = new Uint8Array(VOCAB).fill(1)
      maskNext(new Utf8State(), ok, left)
      for (let b = 0; b < 256; b++) {
        const length = sequenceLength(b)
        expect(ok[b] === 1, `left ${left}, byte ${b}`).toBe(length > 0 && length <= left)
      }
    }
    // Only 3-byte leads and continuations allowed, 2 tokens left: the leads stay (the limit cuts the character).
    const only = new Uint8Array(VOCAB)
    only[0xe2] = 1
    only[0x82] = 1
    maskNext(new Utf8State(), only, 2)
    expect([...only.keys()].filter((i) => only[i] === 1)).toEqual([0xe2])
    // ... but a special token allowed is preferred to a character the limit would cut.
    const withEnd = new Uint8Array(VOCAB)
    withEnd[0xe2] = 1
    withEnd[SPECIAL + 1] = 1
    maskNext(new Utf8State(), withEnd, 2)
    expect([...withEnd.keys()].filter((i) => withEnd[i] === 1)).toEqual([SPECIAL + 1])
  })

  it("maskNext inside a character keeps the special tokens when no continuation is allowed, and never sets a flag", () => {
    const state = stateAfter([0xe2])!
    const ok = new Uint8Array(VOCAB)
    ok[0x41] = 1
    ok[SPECIAL + 1] = 1
    maskNext(state, ok, 10)
    expect([...ok.keys()].filter((i) => ok[i] === 1)).toEqual([SPECIAL + 1])
    const none = new Uint8Array(VOCAB)
    maskNext(state, none, 10)
    expect(none.every((v) => v === 0)).toBe(true)
  })

  it("completeEnd cuts at an earlier end, and reset abandons an open character", () => {
    const bytes = [0x61, 0xe2, 0x82, 0xac, 0x62, 0xf0, 0x9f]
    expect([0, 1, 2, 3, 4, 5, 6, 7].map((end) => completeEnd(bytes, end))).toEqual([0, 1, 1, 1, 4, 5, 5, 5])
    const state = stateAfter([0xf0, 0x9f])!
    expect(state.complete).toBe(false)
    state.reset()
    expect(state.complete).toBe(true)
    expect(state.accepts(0x9f)).toBe(false)
  })
})
