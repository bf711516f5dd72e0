import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import { Rng } from "../../src/local/engine/Random.js"
import {
  BOS,
  decode,
  EOS,
  encode,
  encodeWithSpecials,
  IM_END,
  IM_START,
  idOfTokenString,
  idsOfChoice,
  isSpecial,
  tokenBytes,
  tokenString,
  UnmappableTokenError,
  VOCAB_SIZE
} from "../../src/local/engine/Tokenizer.js"

describe("Tokenizer", () => {
  it("round-trips any text through its UTF-8 bytes", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.string({ unit: "grapheme" }), (text) => {
        const ids = encode(text)
        expect(ids.every((id) => id >= 0 && id < 256)).toBe(true)
        expect(decode(ids)).toBe(text)
      })
    )
    expect(encode("é")).toEqual([0xc3, 0xa9])
  })

  it("reads special-token texts as special tokens only in templates", () => {
    const text = "<|im_start|>user\nhi<|im_end|>"
    expect(encode(text)).toHaveLength(new TextEncoder().encode(text).length)
    expect(encodeWithSpecials(text)).toEqual([IM_START, ...encode("user\nhi"), IM_END])
    expect(decode(encodeWithSpecials(text))).toBe("user\nhi")
    expect(decode(encodeWithSpecials(text), { skipSpecialTokens: false })).toBe(text)
    expect(VOCAB_SIZE).toBe(261)
    expect([BOS, EOS, IM_START, IM_END].every(isSpecial)).toBe(true)
  })

  it("writes token strings and bytes as logprobs report them, and reads them back", () => {
    for (let id = 0; id < VOCAB_SIZE; id++) {
      expect(idOfTokenString(tokenString(id))).toBe(id)
      expect(idOfTokenString(`token_id:${id}`)).toBe(id)
    }
    expect(tokenString(0x41)).toBe("A")
    expect(tokenString(0xc3)).toBe("<0xC3>")
    expect(tokenBytes(0xc3)).toEqual([0xc3])
    expect(tokenString(IM_END)).toBe("<|im_end|>")
    expect(tokenBytes(IM_END)).toEqual(encode("<|im_end|>"))
  })

  it("maps a recorded choice back to token ids: token_ids first, else the logprob entries", () => {
    expect(idsOfChoice({ token_ids: [1, 2, IM_END] })).toEqual([1, 2, IM_END])
    const entries = [
      { token: "h", logprob: -1 },
      { token: "<0xC3>", logprob: -1, bytes: [0xc3] },
      { token: "token_id:169", logprob: -1 },
      // A decoded multi-byte character, as another tokenizer's output would write it: its bytes decide.
      { token: "é", logprob: -1, bytes: [0xc3, 0xa9] },
      { token: "<|im_end|>", logprob: -1 }
    ]
    expect(idsOfChoice({ logprobs: { content: entries } })).toEqual([0x68, 0xc3, 169, 0xc3, 0xa9, IM_END])
    expect(() => idsOfChoice({ logprobs: { content: [{ token: "hé", logprob: -1 }] } })).toThrow(UnmappableTokenError)
  })
})

describe("Rng", () => {
  it("gives the same stream for the same seed, and different streams for different seeds", () => {
    const take = (seed: number | bigint) => {
      const rng = new Rng(seed)
      return Array.from({ length: 8 }, () => rng.nextUint32())
    }
    expect(take(42)).toEqual(take(42))
    expect(take(42)).not.toEqual(take(43))
    expect(take(-1)).toEqual(take(2n ** 64n - 1n))
    expect(take(9223372036854775807n)).not.toEqual(take(0))
    // Floats stay in [0, 1) and look uniform.
    const rng = new Rng(7)
    let sum = 0
    for (let i = 0; i < 10_000; i++) {
      const x = rng.float()
      expect(x >= 0 && x < 1).toBe(true)
      sum += x
    }
    expect(Math.abs(sum / 10_000 - 0.5)).toBeLessThan(0.02)
  })
})
