/**
 * The sampler writes well-formed UTF-8 (issue 12): over many seeds, temperatures, `n`, token limits and the
 * fields that mask or end a choice, every choice's content is well-formed (no U+FFFD from a partial or
 * invalid sequence), the streamed deltas are too and concatenate to it, and the token ids round-trip.
 */
import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import type { ChatCompletionRequest, Choice } from "../../src/api/ChatCompletion.js"
import type { DecodeState, LanguageModel } from "../../src/local/engine/LanguageModel.js"
import { Policy } from "../../src/local/engine/policy/Policy.js"
import { DEFAULT_POLICY_CONFIG } from "../../src/local/engine/policy/PolicyConfig.js"
import { complete, completeStream } from "../../src/local/engine/Sampler.js"
import { EOS, IM_END, IM_START, idsOfChoice, tokenBytes, VOCAB_SIZE } from "../../src/local/engine/Tokenizer.js"
import { wellFormed, wellFormedPrefix } from "../support/utf8.js"
import { TableModel } from "./support/TableModel.js"

type Fields = Omit<ChatCompletionRequest, "messages">

const fatal = new TextDecoder("utf-8", { fatal: true })
const lenient = new TextDecoder("utf-8", { fatal: false })
const encoder = new TextEncoder()

/** The longest prefix of a well-formed prefix that ends at a character boundary. */
const wholeCharacters = (bytes: ReadonlyArray<number>): Array<number> => {
  for (let k = bytes.length; k > 0; k--) if (wellFormed(bytes.slice(0, k))) return bytes.slice(0, k)
  return []
}

/** How many times U+FFFD is written as its own well-formed bytes (EF BF BD) in bytes. */
const replacementsIn = (bytes: ReadonlyArray<number>): number => {
  let count = 0
  for (let i = 0; i + 2 < bytes.length; i++)
    if (bytes[i] === 0xef && bytes[i + 1] === 0xbf && bytes[i + 2] === 0xbd) count++
  return count
}

/** Text is valid when its UTF-8 decodes fatally, and each U+FFFD in it was sampled as such. */
const expectValidText = (text: string, sampled: ReadonlyArray<number>): void => {
  const bytes = encoder.encode(text)
  expect(fatal.decode(bytes)).toBe(text)
  expect(text.split("\uFFFD").length - 1).toBeLessThanOrEqual(replacementsIn(sampled))
}

/** Check one choice of a response and its streamed twin. */
const checkChoice = (fields: Fields, choice: Choice, deltas: ReadonlyArray<string>, streamedIds: Array<number>) => {
  const content = choice.message.content ?? ""
  const ids = choice.token_ids ?? []
  const bytes = ids.filter((id) => id < 256)
  const max = fields.max_tokens!
  expectValidText(content, bytes)

  // Token ids and logprobs list every sampled token; they round-trip.
  expect(ids.length).toBeLessThanOrEqual(max)
  if (choice.finish_reason === "length") expect(ids.length).toBe(max)
  const entries = choice.logprobs?.content ?? []
  expect(entries).toHaveLength(ids.length)
  expect(idsOfChoice({ logprobs: { content: entries } })).toEqual(ids)
  expect(entries.flatMap((e) => e.bytes ?? [])).toEqual(ids.flatMap(tokenBytes))
  if (fields.allowed_token_ids != null) for (const id of ids) expect(fields.allowed_token_ids).toContain(id)

  if (fields.allowed_token_ids == null) {
    // Nothing rules out every way on: the sampled bytes are well-formed, and end at a character boundary
    // unless a byte of stop_token_ids (which may come inside a character) ended the choice.
    expect(wellFormedPrefix(bytes)).toBe(true)
    const byteStop = typeof choice.stop_reason === "number" && choice.stop_reason < 256
    if (!byteStop) expect(wellFormed(bytes)).toBe(true)
    if (fields.stop == null && fields.skip_special_tokens !== false) {
      // The content is the sampled text (the stop byte only with include_stop_str_in_output), whole characters.
      const text = byteStop && fields.include_stop_str_in_output !== true ? bytes.slice(0, -1) : bytes
      expect(content).toBe(lenient.decode(Uint8Array.from(wholeCharacters(text))))
    }
  }

  // Streaming: the deltas are valid text each, never a split character, and make the content.
  for (const delta of deltas) expectValidText(delta, bytes)
  expect(deltas.join("")).toBe(content)
  expect(streamedIds).toEqual(ids)
}

/** Run a request whole and streamed and check every choice. */
const checkRequest = <S extends DecodeState>(model: LanguageModel<S>, fields: Fields): void => {
  const request: ChatCompletionRequest = {
    messages: [{ role: "user", content: "Write something in any script: é, €, 😀." }],
    ...fields,
    logprobs: true,
    return_token_ids: true
  }
  const whole = complete(model, request, { modelName: "test" })
  const chunks = [...completeStream(model, { ...request, stream: true }, { modelName: "test" })]
  expect(whole.choices).toHaveLength(fields.n ?? 1)
  for (const choice of whole.choices) {
    const mine = chunks.flatMap((chunk) => chunk.choices.filter((c) => c.index === choice.index))
    checkChoice(
      fields,
      choice,
      mine.map((c) => c.delta.content ?? ""),
      mine.flatMap((c) => c.token_ids ?? [])
    )
  }
}

// Models that write many non-ASCII bytes: seeded tables (one steep), all tokens equally likely, and one that
// prefers the bytes 0x80..0xFF (continuations and leads, valid or not).
const models: ReadonlyArray<TableModel> = [
  TableModel.keyed(7, 2),
  TableModel.keyed(3, 4),
  TableModel.constant(new Float32Array(VOCAB_SIZE)),
  TableModel.constant(Float32Array.from({ length: VOCAB_SIZE }, (_, id) => (id >= 0x80 && id < 256 ? 3 : 0)))
]

const ascii = Array.from({ length: 0x7f - 0x20 }, (_, i) => 0x20 + i)
const allowedSets: ReadonlyArray<ReadonlyArray<number>> = [
  [0xc3, 0xa9, 0x41, IM_END],
  [0xe2, 0x82, 0xac, 0x20],
  [0xe2, 0x82, EOS],
  [0xc3],
  [0x80, 0xbf, 0x61],
  [0xf0, 0x9f, 0x98, 0x80, 0x20],
  [0xed, 0xa0, 0x9f, 0x80, 0x41],
  [...ascii, 0xc3, 0xa9, IM_START, IM_END]
]

const fieldsArbitrary: FastCheck.Arbitrary<{ readonly model: number; readonly fields: Fields }> = FastCheck.record({
  model: FastCheck.integer({ min: 0, max: models.length - 1 }),
  seed: FastCheck.integer({ min: 0, max: 1_000_000 }),
  temperature: FastCheck.constantFrom(0, 0.7, 1, 1.5, 2, 3),
  n: FastCheck.integer({ min: 1, max: 4 }),
  max_tokens: FastCheck.integer({ min: 1, max: 40 }),
  ignore_eos: FastCheck.boolean(),
  min_tokens: FastCheck.option(FastCheck.integer({ min: 0, max: 6 }), { nil: undefined }),
  stop: FastCheck.option(FastCheck.subarray(["é", "€", "ab", "\u00ff", "😀", "\u0101"], { minLength: 1 }), {
    nil: undefined
  }),
  stop_token_ids: FastCheck.option(FastCheck.subarray([0xc3, 0xa9, 0xe2, 0x82, 0x41, 0xf0, IM_START]), {
    nil: undefined
  }),
  include_stop_str_in_output: FastCheck.boolean(),
  skip_special_tokens: FastCheck.option(FastCheck.constant(false), { nil: undefined }),
  allowed: FastCheck.option(FastCheck.integer({ min: 0, max: allowedSets.length - 1 }), { nil: undefined, freq: 3 }),
  bad_words: FastCheck.option(FastCheck.subarray(["é", "a", "€x", "\u00e9t"], { minLength: 1 }), { nil: undefined }),
  logit_bias: FastCheck.option(
    FastCheck.constantFrom({ "195": 50 }, { "160": 100 }, { "237": 20, "160": 20 }, { [String(IM_END)]: 5 }),
    { nil: undefined }
  )
}).map(({ allowed, max_tokens, min_tokens, model, ...rest }) => {
  const fields: { -readonly [K in keyof Fields]: Fields[K] } = { max_tokens }
  for (const [key, value] of Object.entries(rest)) if (value !== undefined) Object.assign(fields, { [key]: value })
  if (min_tokens !== undefined) fields.min_tokens = Math.min(min_tokens, max_tokens)
  if (allowed !== undefined) fields.allowed_token_ids = [...allowedSets[allowed]!]
  return { model, fields }
})

describe("Sampler: well-formed UTF-8 (issue 12)", () => {
  it("every choice's content and every delta is well-formed UTF-8, and the ids round-trip, over seeds and fields", () => {
    FastCheck.assert(
      FastCheck.property(fieldsArbitrary, ({ fields, model }) => checkRequest(models[model]!, fields)),
      { seed: 12, numRuns: 400 }
    )
  })

  it("at a high temperature a model that prefers high bytes writes whole characters, and reaches the limit", () => {
    const wild = models[3]!
    for (let seed = 0; seed < 20; seed++) {
      const fields: Fields = { seed, temperature: 2, n: 3, max_tokens: 30, ignore_eos: true }
      checkRequest(wild, fields)
      const response = complete(wild, { messages: [{ role: "user", content: "x" }], ...fields }, { modelName: "t" })
      for (const choice of response.choices) {
        expect(choice.finish_reason).toBe("length")
        // Mostly non-ASCII: the mask shapes the text, it does not turn it into ASCII.
        expect(encoder.encode(choice.message.content ?? "").length).toBeGreaterThan(15)
      }
    }
  })

  it("a character is not started where the token limit cannot finish it", () => {
    // Only the bytes of U+10000 (F0 90 80 80) and a space are allowed, F0 the most likely (ties go to the
    // lowest id): with 1..3 tokens left no new character starts.
    const emoji = [0xf0, 0x90, 0x80]
    const model = TableModel.constant(Float32Array.from({ length: VOCAB_SIZE }, (_, id) => (id === 0xf0 ? 10 : 0)))
    for (const max_tokens of [1, 2, 3, 4, 5, 6, 7, 8, 9]) {
      const response = complete(
        model,
        {
          messages: [{ role: "user", content: "x" }],
          temperature: 0,
          max_tokens,
          ignore_eos: true,
          allowed_token_ids: [...emoji, 0x20],
          return_token_ids: true
        },
        { modelName: "t" }
      )
      const choice = response.choices[0]!
      expect(choice.token_ids).toHaveLength(max_tokens)
      expect(wellFormed(choice.token_ids!)).toBe(true)
      const whole = Math.floor(max_tokens / 4)
      expect(choice.message.content).toBe("\u{10000}".repeat(whole) + " ".repeat(max_tokens - 4 * whole))
    }
  })

  it("where nothing else is allowed, the limit cuts a character: content leaves it out, token_ids keep it", () => {
    const response = complete(
      TableModel.constant(new Float32Array(VOCAB_SIZE)),
      {
        messages: [{ role: "user", content: "x" }],
        temperature: 0,
        max_tokens: 6,
        allowed_token_ids: [0xe2, 0x82, 0xac],
        return_token_ids: true,
        logprobs: true
      },
      { modelName: "t" }
    )
    // Greedy over equal logits takes the lowest id allowed: E2 82 82 is U+2082.
    const choice = response.choices[0]!
    expect(choice.token_ids).toEqual([0xe2, 0x82, 0x82, 0xe2, 0x82, 0x82])
    expect(choice.message.content).toBe("\u2082\u2082")
    const cut = complete(
      TableModel.constant(new Float32Array(VOCAB_SIZE)),
      {
        messages: [{ role: "user", content: "x" }],
        temperature: 0,
        max_tokens: 5,
        allowed_token_ids: [0xe2, 0x82, 0xac],
        return_token_ids: true,
        logprobs: true
      },
      { modelName: "t" }
    ).choices[0]!
    expect(cut.token_ids).toEqual([0xe2, 0x82, 0x82, 0xe2, 0x82])
    expect(cut.finish_reason).toBe("length")
    expect(cut.message.content).toBe("\u2082")
    expect(idsOfChoice({ logprobs: cut.logprobs })).toEqual(cut.token_ids)
  })

  it("a stop token id inside a character ends the choice; content leaves the open character out", () => {
    const model = TableModel.constant(
      Float32Array.from({ length: VOCAB_SIZE }, (_, id) => (id === 0xc3 ? 10 : id === 0xa9 ? 5 : 0))
    )
    for (const include of [false, true]) {
      const choice = complete(
        model,
        {
          messages: [{ role: "user", content: "x" }],
          temperature: 0,
          max_tokens: 10,
          stop_token_ids: [0xc3],
          include_stop_str_in_output: include,
          return_token_ids: true
        },
        { modelName: "t" }
      ).choices[0]!
      expect(choice).toMatchObject({ finish_reason: "stop", stop_reason: 0xc3, token_ids: [0xc3] })
      expect(choice.message.content).toBe("")
    }
  })

  it("inside a character with no continuation allowed, a special token abandons it (also with ignore_eos)", () => {
    const model = TableModel.constant(
      Float32Array.from({ length: VOCAB_SIZE }, (_, id) => (id === 0xc3 ? 10 : id === 0x41 ? 5 : 0))
    )
    const ask = (fields: Fields) =>
      complete(
        model,
        {
          messages: [{ role: "user", content: "x" }],
          temperature: 0,
          max_tokens: 5,
          allowed_token_ids: [0xc3, 0x41, IM_END],
          return_token_ids: true,
          ...fields
        },
        { modelName: "t" }
      ).choices[0]!
    expect(ask({})).toMatchObject({ finish_reason: "stop", token_ids: [0xc3, IM_END], message: { content: "" } })
    // With ignore_eos the choice goes on after it; with one token left no character starts (A instead). The
    // space written after a special token stays when the character after it is abandoned (a streamed delta
    // may already have carried it).
    const on = ask({ ignore_eos: true, skip_special_tokens: false })
    expect(on.token_ids).toEqual([0xc3, IM_END, 0xc3, IM_END, 0x41])
    expect(on.message.content).toBe("<|im_end|>  <|im_end|> A")
    checkRequest(model, { temperature: 0, max_tokens: 5, allowed_token_ids: [0xc3, 0x41, IM_END], ignore_eos: true })
    // Without a special token allowed, nothing can follow: the choice ends there.
    const none = ask({ allowed_token_ids: [0xc3, 0x41] })
    expect(none).toMatchObject({ finish_reason: "stop", token_ids: [0xc3], message: { content: "" } })
  })

  it("the real policy (untrained, so mostly noise) writes well-formed UTF-8 at any temperature", () => {
    const policy = Policy.create(DEFAULT_POLICY_CONFIG, { seed: 1 })
    for (const temperature of [0, 1, 2]) {
      for (let seed = 0; seed < 4; seed++) {
        checkRequest(policy, { seed, temperature, n: 2, max_tokens: 24, ignore_eos: seed % 2 === 0 })
      }
    }
  })
})
