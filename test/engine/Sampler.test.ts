import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type { ChatCompletion, ChatCompletionChunk, ChatCompletionRequest } from "../../src/api/ChatCompletion.js"
import {
  GENERATION_PROMPT,
  renderOptionsOf,
  renderPrompt,
  renderTrajectory
} from "../../src/local/engine/ChatTemplate.js"
import { ByteAutomaton } from "../../src/local/engine/constraint/Automaton.js"
import { compileJsonSchema } from "../../src/local/engine/constraint/JsonSchema.js"
import { EngineError } from "../../src/local/engine/EngineError.js"
import type { DecodeState, LanguageModel } from "../../src/local/engine/LanguageModel.js"
import { complete, completeEffect, completeStream, DEFAULT_LIMITS } from "../../src/local/engine/Sampler.js"
import { plan } from "../../src/local/engine/sampler/RequestPlan.js"
import { encode, IM_END, IM_START, idsOfChoice, PAD, VOCAB_SIZE } from "../../src/local/engine/Tokenizer.js"
import { accepts, validates } from "../support/schemas.js"
import { wellFormed, wellFormedPrefix } from "../support/utf8.js"
import { logSoftmax, peaked, TableModel } from "./support/TableModel.js"

type Fields = Omit<Partial<ChatCompletionRequest>, "messages"> & { messages?: ChatCompletionRequest["messages"] }

const request = (fields: Fields = {}): ChatCompletionRequest => ({
  messages: [{ role: "user", content: "Hi" }],
  ...fields
})
const run = (model: TableModel, fields: Fields = {}): ChatCompletion =>
  complete(model, request(fields), { modelName: "test", now: 1_700_000_000_000, requestId: "r1" })
const content = (response: ChatCompletion, i = 0): string => response.choices[i]!.message.content ?? ""
const stream = (model: TableModel, fields: Fields): Array<ChatCompletionChunk> => [
  ...completeStream(model, request({ ...fields, stream: true }), { modelName: "test", requestId: "r1" })
]
const refusal = (model: TableModel, fields: Fields): EngineError => {
  try {
    run(model, fields)
  } catch (error) {
    if (error instanceof EngineError) return error
    throw error
  }
  throw new Error("expected an EngineError")
}

/** The number of tokens after the last generation prompt. */
const sampledSoFar = (ids: ReadonlyArray<number>): number => {
  for (let i = ids.length - 1; i >= 0; i--) if (ids[i] === IM_START) return ids.length - i - GENERATION_PROMPT.length
  return ids.length
}

/** A model that writes `script` (peaked logits: 5 on the next token, 0 elsewhere), then ends the turn. */
const scripted = (script: string | ReadonlyArray<number>) => {
  const tokens = typeof script === "string" ? encode(script) : [...script]
  return new TableModel((ids) => {
    const k = sampledSoFar(ids)
    return peaked({ [k < tokens.length ? tokens[k]! : IM_END]: 5 }, 0)
  })
}

const keyed = TableModel.keyed(7, 2)

/**
 * Whether the sampler may choose `id` after the output `bytes` with `left` tokens to go (this one included),
 * by the well-formed UTF-8 rule: a byte keeps the output a well-formed prefix and, at a character boundary,
 * starts no character longer than `left`; a special token comes only at a boundary. (Where that rules out
 * every token the rule gives way; the tests using this avoid that edge.)
 */
const utf8Allows = (bytes: ReadonlyArray<number>, id: number, left: number): boolean => {
  if (id >= 256) return wellFormed(bytes)
  if (!wellFormedPrefix([...bytes, id])) return false
  const length = id < 0x80 ? 1 : id >= 0xf0 ? 4 : id >= 0xe0 ? 3 : 2
  return !wellFormed(bytes) || length <= left
}

describe("Sampler: response shape", () => {
  it("returns a chat.completion with id, created, model, usage and one choice per n", () => {
    const response = run(keyed, { seed: 1, max_tokens: 5, n: 2, ignore_eos: true })
    expect(response).toMatchObject({
      id: "chatcmpl-r1",
      object: "chat.completion",
      created: 1_700_000_000,
      model: "test"
    })
    expect(response.choices.map((c) => c.index)).toEqual([0, 1])
    expect(response.choices[0]!.message.role).toBe("assistant")
    const prompt = renderPrompt(request().messages).ids.length
    expect(response.usage).toEqual({ prompt_tokens: prompt, completion_tokens: 10, total_tokens: prompt + 10 })
    expect(response.choices[0]!.logprobs).toBeNull()
    expect(response.choices[0]!.token_ids).toBeUndefined()
    expect(response.prompt_token_ids).toBeUndefined()
  })

  it("completeEffect fails with the EngineError of a refused request", async () => {
    const exit = await Effect.runPromiseExit(completeEffect(keyed, request({ priority: 1 }), { modelName: "m" }))
    expect(Exit.isFailure(exit)).toBe(true)
    // Decoding runs on the decoding scheduler: asynchronous, even for a short completion.
    const ok = await Effect.runPromise(completeEffect(keyed, request({ seed: 1, max_tokens: 2 }), { modelName: "m" }))
    expect(ok.choices).toHaveLength(1)
  })
})

describe("Sampler: choosing tokens", () => {
  it("top_k: 1 is greedy, and temperature 0 is greedy, along the model's argmax path (of well-formed UTF-8)", () => {
    const greedy = run(keyed, { temperature: 0, max_tokens: 20, return_token_ids: true })
    for (const seed of [1, 2, 3]) {
      const topK1 = run(keyed, { top_k: 1, temperature: 1.5, seed, max_tokens: 20, return_token_ids: true })
      expect(topK1.choices[0]!.token_ids).toEqual(greedy.choices[0]!.token_ids)
    }
    const ids = [...(greedy.prompt_token_ids ?? renderPrompt(request().messages).ids)]
    const output: Array<number> = []
    const sampled = greedy.choices[0]!.token_ids ?? []
    expect(sampled.length).toBeGreaterThan(0)
    for (const id of sampled) {
      const logits = keyed.logits(keyed.prefill(ids))
      let best = -1
      for (let t = 0; t < logits.length; t++) {
        if (t !== PAD && utf8Allows(output, t, 20 - output.length) && (best < 0 || logits[t]! > logits[best]!)) best = t
      }
      expect(id).toBe(best)
      ids.push(id)
      if (id < 256) output.push(id)
    }
  })

  it("samples from the model's distribution at temperature 1", () => {
    const logits = peaked({ 65: 1, 66: 0 }, Number.NEGATIVE_INFINITY)
    const model = TableModel.constant(logits)
    let a = 0
    const total = 4000
    const response = run(model, { seed: 9, max_tokens: total, ignore_eos: true, temperature: 1 })
    for (const ch of content(response)) if (ch === "A") a++
    expect(a / total).toBeCloseTo(Math.E / (Math.E + 1), 1)
    // Temperature 0.25 sharpens it: p(A) = e^4 / (e^4 + 1).
    let sharp = 0
    for (const ch of content(run(model, { seed: 9, max_tokens: total, temperature: 0.25 }))) if (ch === "A") sharp++
    expect(sharp / total).toBeGreaterThan(0.97)
  })

  it("min_p drops tokens less likely than min_p times the most likely one", () => {
    const model = TableModel.constant(peaked({ 65: 0, 66: -1, 67: -0.5 }, Number.NEGATIVE_INFINITY))
    const text = content(run(model, { seed: 4, max_tokens: 300, min_p: 0.5 }))
    expect(new Set(text)).toEqual(new Set(["A", "C"]))
  })

  it("top_p keeps the smallest most-likely set reaching it; top_k the k most likely", () => {
    // p(A) = 0.665, p(B) = 0.245, p(C) = 0.09.
    const model = TableModel.constant(peaked({ 65: 2, 66: 1, 67: 0 }, Number.NEGATIVE_INFINITY))
    expect(new Set(content(run(model, { seed: 4, max_tokens: 300, top_p: 0.6 })))).toEqual(new Set(["A"]))
    expect(new Set(content(run(model, { seed: 4, max_tokens: 300, top_p: 0.8 })))).toEqual(new Set(["A", "B"]))
    expect(new Set(content(run(model, { seed: 4, max_tokens: 300, top_k: 2 })))).toEqual(new Set(["A", "B"]))
    expect(new Set(content(run(model, { seed: 4, max_tokens: 300, top_k: -1 })))).toEqual(new Set(["A", "B", "C"]))
    expect(new Set(content(run(model, { seed: 4, max_tokens: 300, top_k: 0 })))).toEqual(new Set(["A", "B", "C"]))
  })

  it("logit_bias forces a token (and is clamped to [-100, 100])", () => {
    const response = run(keyed, { seed: 2, max_tokens: 8, logit_bias: { "90": 100 } })
    expect(content(response)).toBe("ZZZZZZZZ")
    const clamped = TableModel.constant(peaked({ 65: 150, 66: 0 }, -1000))
    expect(content(run(clamped, { temperature: 0, max_tokens: 3, logit_bias: { "65": -1e6 } }))).toBe("AAA")
    expect(content(run(clamped, { temperature: 0, max_tokens: 3, logit_bias: { "66": 1e6 } }))).toBe("AAA")
  })

  it("allowed_token_ids is always obeyed", () => {
    const allowed = [0x61, 0x62, 0x63]
    for (let seed = 0; seed < 10; seed++) {
      const response = run(keyed, {
        seed,
        temperature: 2,
        max_tokens: 30,
        allowed_token_ids: allowed,
        return_token_ids: true
      })
      expect(response.choices[0]!.token_ids!.every((id) => allowed.includes(id))).toBe(true)
      expect(response.choices[0]!.finish_reason).toBe("length")
    }
  })

  it("bad_words: a word's token sequence is never completed", () => {
    const model = scripted("hello world")
    expect(content(run(model, { temperature: 0 }))).toBe("hello world")
    const banned = content(run(model, { temperature: 0, max_tokens: 20, bad_words: ["wor"] }))
    expect(banned).not.toContain("wor")
    expect(banned.startsWith("hello wo")).toBe(true)
    expect(content(run(model, { temperature: 0, max_tokens: 12, bad_words: ["l"] }))).not.toContain("l")
    for (let seed = 0; seed < 5; seed++) {
      expect(content(run(keyed, { seed, temperature: 3, max_tokens: 200, bad_words: ["a", "bc"] }))).not.toMatch(/a|bc/)
    }
  })

  it("presence and frequency penalties lower the logits of tokens already in the output", () => {
    const model = TableModel.constant(peaked({ 65: 1, 66: 0.5 }, -10))
    expect(content(run(model, { temperature: 0, max_tokens: 5 }))).toBe("AAAAA")
    // presence 1: A=1 → A=0 < B=0.5 → B; then A=0 > B=-0.5 → A ...
    expect(content(run(model, { temperature: 0, max_tokens: 5, presence_penalty: 1 }))).toBe("ABAAA")
    // frequency 0.3: A 1, 0.7, 0.4 < 0.5 → B; A 0.4 > B 0.2 → A; A 0.1 < B 0.2 → B ...
    expect(content(run(model, { temperature: 0, max_tokens: 6, frequency_penalty: 0.3 }))).toBe("AABABA")
    // Negative penalties reward repetition.
    expect(content(run(model, { temperature: 0, max_tokens: 4, presence_penalty: -2 }))).toBe("AAAA")
  })

  it("repetition_penalty divides positive and multiplies negative logits of prompt and output tokens", () => {
    const positive = TableModel.constant(peaked({ 65: 1, 66: 0.8 }, -10))
    const fields = { messages: [{ role: "user" as const, content: "A" }], temperature: 0, max_tokens: 3 }
    expect(content(run(positive, fields))).toBe("AAA")
    // A is in the prompt: 1 / 1.5 < 0.8 → B; then B is in the output too: 0.8 / 1.5 = 0.53 < 0.667 → A, A.
    expect(content(run(positive, { ...fields, repetition_penalty: 1.5 }))).toBe("BAA")
    const negative = TableModel.constant(peaked({ 65: -1, 66: -1.2 }, -10))
    expect(content(run(negative, { ...fields, max_tokens: 1 }))).toBe("A")
    expect(content(run(negative, { ...fields, max_tokens: 1, repetition_penalty: 1.5 }))).toBe("B")
    // Tokens not seen are untouched: no B in the prompt, so B=-1.2 beats A=-1.5 after the penalty.
  })
})

describe("Sampler: stopping", () => {
  const model = scripted("hello world. bye")

  it("ends at the end of turn with stop_reason null; the stop token is in token_ids, not the text", () => {
    const response = run(model, { temperature: 0, return_token_ids: true })
    expect(response.choices[0]).toMatchObject({ finish_reason: "stop", stop_reason: null })
    expect(content(response)).toBe("hello world. bye")
    expect(response.choices[0]!.token_ids!.at(-1)).toBe(IM_END)
  })

  it("stop cuts before the string and reports it; include_stop_str_in_output keeps it", () => {
    for (const stop of ["wor", ["zzz", "wor"]]) {
      const response = run(model, { temperature: 0, stop })
      expect(content(response)).toBe("hello ")
      expect(response.choices[0]).toMatchObject({ finish_reason: "stop", stop_reason: "wor" })
    }
    expect(content(run(model, { temperature: 0, stop: "wor", include_stop_str_in_output: true }))).toBe("hello wor")
    // The first string of the list that matches wins.
    expect(run(model, { temperature: 0, stop: ["o w", "lo"] }).choices[0]!.stop_reason).toBe("lo")
  })

  it("stop_token_ids ends with stop_reason the id", () => {
    const response = run(model, { temperature: 0, stop_token_ids: [46], return_token_ids: true })
    expect(content(response)).toBe("hello world")
    expect(response.choices[0]).toMatchObject({ finish_reason: "stop", stop_reason: 46 })
    expect(response.choices[0]!.token_ids!.at(-1)).toBe(46)
    expect(content(run(model, { temperature: 0, stop_token_ids: [46], include_stop_str_in_output: true }))).toBe(
      "hello world."
    )
  })

  it("min_tokens suppresses the end of turn and stop strings until reached", () => {
    const short = scripted("ab")
    const response = run(short, { temperature: 0, min_tokens: 5, return_token_ids: true })
    const ids = response.choices[0]!.token_ids!
    expect(ids.length).toBe(6)
    expect(ids.slice(0, 5)).not.toContain(IM_END)
    expect(ids[5]).toBe(IM_END)
    expect(response.choices[0]!.finish_reason).toBe("stop")
    // "he" is complete at token 2: not looked for before min_tokens; "or" at token 9 is.
    const stopped = run(model, { temperature: 0, min_tokens: 3, stop: ["he", "or"] })
    expect(content(stopped)).toBe("hello w")
    expect(stopped.choices[0]!.stop_reason).toBe("or")
    expect(run(model, { temperature: 0, min_tokens: 5, stop_token_ids: [0x6f] }).choices[0]!.stop_reason).toBe(0x6f)
    // The "o" of "hello" is the fifth token: suppressed (the next best, id 0, instead); the next "o" stops.
    expect(content(run(model, { temperature: 0, min_tokens: 5, stop_token_ids: [0x6f] }))).toBe("hell\u0000 w")
  })

  it("ignore_eos keeps going to the limit", () => {
    const response = run(scripted("ab"), { temperature: 0, ignore_eos: true, max_tokens: 6, return_token_ids: true })
    expect(response.choices[0]).toMatchObject({ finish_reason: "length", stop_reason: null })
    expect(response.choices[0]!.token_ids).toEqual([0x61, 0x62, IM_END, IM_END, IM_END, IM_END])
    expect(content(response)).toBe("ab")
  })

  it("skip_special_tokens: false writes special tokens, spaced unless spaces_between_special_tokens is false", () => {
    const fields = { temperature: 0, ignore_eos: true, max_tokens: 4, skip_special_tokens: false }
    expect(content(run(scripted("ab"), fields))).toBe("ab <|im_end|> <|im_end|>")
    expect(content(run(scripted("ab"), { ...fields, spaces_between_special_tokens: false }))).toBe(
      "ab<|im_end|><|im_end|>"
    )
  })

  it("max tokens ends with length; max_completion_tokens wins over max_tokens; without either, the context left", () => {
    expect(run(model, { temperature: 0, max_tokens: 3 }).choices[0]).toMatchObject({
      finish_reason: "length",
      message: { content: "hel" }
    })
    expect(content(run(model, { temperature: 0, max_tokens: 3, max_completion_tokens: 5 }))).toBe("hello")
    const small = TableModel.constant(peaked({ 65: 1 }, 0), { contextLength: 40 })
    const response = run(small, { seed: 1, ignore_eos: true })
    expect(response.usage.total_tokens).toBe(40)
    expect(response.choices[0]!.finish_reason).toBe("length")
  })
})

describe("Sampler: seeds", () => {
  it("the same seed and request give the same output; choice i of n uses seed + i", () => {
    const fields = { temperature: 1.2, max_tokens: 30, return_token_ids: true }
    const a = run(keyed, { ...fields, seed: 42, n: 3 })
    const b = run(keyed, { ...fields, seed: 42, n: 3 })
    expect(b.choices).toEqual(a.choices)
    for (let i = 0; i < 3; i++) {
      expect(run(keyed, { ...fields, seed: 42 + i }).choices[0]!.token_ids).toEqual(a.choices[i]!.token_ids)
    }
    expect(a.choices[0]!.token_ids).not.toEqual(a.choices[1]!.token_ids)
    // int64 seeds wrap around.
    expect(run(keyed, { ...fields, seed: -5 }).choices[0]!.token_ids).toEqual(
      run(keyed, { ...fields, seed: -6, n: 2 }).choices[1]!.token_ids
    )
  })

  it("without a seed, a random one is drawn", () => {
    const fields = { temperature: 1.2, max_tokens: 30, return_token_ids: true }
    expect(run(keyed, fields).choices[0]!.token_ids).not.toEqual(run(keyed, fields).choices[0]!.token_ids)
  })

  it("without a seed, every request draws its own, across refills of the drawn words", () => {
    // The words are drawn from the system's generator 512 seeds at a time: 1,500 requests span three refills.
    const request = { model: "m", messages: [{ role: "user" as const, content: "hi" }] }
    const seeds = Array.from({ length: 1500 }, () => plan(keyed, request, DEFAULT_LIMITS).seed)
    expect(new Set(seeds).size).toBe(seeds.length)
  })
})

describe("Sampler: logprobs and token ids", () => {
  it("logprobs are the raw model distribution's; top_logprobs its most likely tokens in order", () => {
    const response = run(keyed, {
      seed: 5,
      max_tokens: 6,
      temperature: 0.7,
      logit_bias: { "70": 3 },
      logprobs: true,
      top_logprobs: 5,
      return_token_ids: true
    })
    const choice = response.choices[0]!
    const entries = choice.logprobs!.content!
    expect(entries).toHaveLength(6)
    const ids = [...response.prompt_token_ids!]
    entries.forEach((entry, i) => {
      const id = choice.token_ids![i]!
      const expected = logSoftmax(keyed.logits(keyed.prefill(ids)))
      expect(entry.logprob).toBeCloseTo(expected[id]!, 5)
      expect(entry.bytes).toEqual([id])
      expect(entry.top_logprobs).toHaveLength(5)
      const sorted = [...expected].map((lp, t) => [lp, t] as const).sort((x, y) => y[0] - x[0])
      entry.top_logprobs!.forEach((top, k) => {
        expect(top.logprob).toBeCloseTo(sorted[k]![0], 5)
        expect(idsOfChoice({ logprobs: { content: [{ ...top, logprob: 0 }] } })).toEqual([sorted[k]![1]])
      })
      ids.push(id)
    })
  })

  it("top_logprobs over the whole vocabulary sum to probability 1; logprobs without top_logprobs have none", () => {
    const response = run(keyed, { seed: 5, max_tokens: 3, logprobs: true, top_logprobs: VOCAB_SIZE })
    for (const entry of response.choices[0]!.logprobs!.content!) {
      expect(entry.top_logprobs).toHaveLength(VOCAB_SIZE)
      expect(entry.top_logprobs!.reduce((s, t) => s + Math.exp(t.logprob), 0)).toBeCloseTo(1, 5)
    }
    expect(
      run(keyed, { seed: 5, max_tokens: 2, logprobs: true }).choices[0]!.logprobs!.content![0]!.top_logprobs
    ).toEqual([])
    expect(refusal(keyed, { top_logprobs: 2 }).param).toBe("top_logprobs")
    expect(refusal(keyed, { logprobs: true, top_logprobs: VOCAB_SIZE + 1 }).param).toBe("top_logprobs")
  })

  it("prompt_logprobs: one entry per prompt token, the first null, from scoreTokens, with alternatives and rank", () => {
    const response = run(keyed, { seed: 1, max_tokens: 1, prompt_logprobs: 2, return_token_ids: true })
    const prompt = response.prompt_token_ids!
    const entries = response.prompt_logprobs!
    expect(entries).toHaveLength(prompt.length)
    expect(entries[0]).toBeNull()
    const scores = keyed.scoreTokens(prompt, 1)
    for (let t = 1; t < prompt.length; t++) {
      const entry = entries[t]!
      const own = entry[String(prompt[t])]!
      expect(own.logprob).toBeCloseTo(scores[t - 1]!, 5)
      const expected = logSoftmax(keyed.logits(keyed.prefill(prompt.slice(0, t))))
      expect(own.rank).toBe(1 + [...expected].filter((lp) => lp > expected[prompt[t]!]!).length)
      const others = Object.keys(entry).filter((k) => k !== String(prompt[t]))
      expect(Object.keys(entry).length).toBeGreaterThanOrEqual(2)
      expect(Object.keys(entry).length).toBeLessThanOrEqual(3)
      for (const k of others) expect(entry[k]!.rank).toBeLessThanOrEqual(2)
    }
    const plain = run(keyed, { seed: 1, max_tokens: 1, prompt_logprobs: 0 }).prompt_logprobs!
    expect(plain.slice(1).every((e) => Object.keys(e!).length === 1)).toBe(true)
    expect(refusal(keyed, { prompt_logprobs: 1, stream: true }).param).toBe("prompt_logprobs")
  })

  it("return_token_ids gives the choice's and the prompt's ids; return_tokens_as_token_ids writes token_id:<id>", () => {
    const response = run(keyed, { seed: 3, max_tokens: 8, logprobs: true, top_logprobs: 2, return_token_ids: true })
    expect(response.prompt_token_ids).toEqual(renderPrompt(request().messages).ids)
    expect(response.choices[0]!.token_ids).toHaveLength(8)
    const asIds = run(keyed, {
      seed: 3,
      max_tokens: 8,
      logprobs: true,
      top_logprobs: 2,
      return_tokens_as_token_ids: true
    })
    const entries = asIds.choices[0]!.logprobs!.content!
    expect(entries.map((e) => e.token)).toEqual(response.choices[0]!.token_ids!.map((id) => `token_id:${id}`))
    expect(entries[0]!.top_logprobs![0]!.token).toMatch(/^token_id:\d+$/)
    expect(idsOfChoice(asIds.choices[0]!)).toEqual(response.choices[0]!.token_ids)
  })
})

describe("Sampler: prompt", () => {
  it("truncate_prompt_tokens keeps the last k prompt tokens", () => {
    const full = renderPrompt(request().messages).ids
    const response = run(keyed, { seed: 1, max_tokens: 2, truncate_prompt_tokens: 5, return_token_ids: true })
    expect(response.prompt_token_ids).toEqual(full.slice(-5))
    expect(response.usage.prompt_tokens).toBe(5)
    expect(run(keyed, { seed: 1, max_tokens: 2, truncate_prompt_tokens: -1 }).usage.prompt_tokens).toBe(full.length)
  })

  it("renders through the chat template options (tools, add_special_tokens, chat_template)", () => {
    const fields: Fields = {
      max_tokens: 1,
      seed: 1,
      return_token_ids: true,
      add_special_tokens: true,
      chat_template: "{% for m in messages %}{{ m.content }}{{ sep }}{% endfor %}",
      chat_template_kwargs: { sep: "|" }
    }
    const response = run(keyed, fields)
    expect(response.prompt_token_ids).toEqual(renderPrompt(request().messages, renderOptionsOf(request(fields))).ids)
    expect(response.prompt_token_ids).toEqual([256, ...encode("Hi|")])
    expect(refusal(keyed, { chat_template: "{% if %}" })).toMatchObject({ kind: "BadRequest", param: "chat_template" })
  })

  it("echo prepends the last message when its role is the response's", () => {
    const model = scripted(" 42.")
    const messages = [
      { role: "user" as const, content: "Answer?" },
      { role: "assistant" as const, content: "The answer is" }
    ]
    const continued = run(model, {
      messages,
      add_generation_prompt: false,
      continue_final_message: true,
      echo: true,
      temperature: 0
    })
    expect(continued.choices[0]!.message).toEqual({
      role: "assistant",
      content:
        "The answer is" +
        content(run(model, { messages, add_generation_prompt: false, continue_final_message: true, temperature: 0 })),
      refusal: null
    })
    // With the generation prompt, the response role is assistant; a final user message is not echoed.
    expect(content(run(model, { echo: true, temperature: 0 }))).toBe(" 42.")
    expect(run(model, { add_generation_prompt: false, echo: true, temperature: 0 }).choices[0]!.message.role).toBe(
      "user"
    )
  })

  it("refuses a prompt that leaves no room, with the convention's message", () => {
    const small = TableModel.constant(peaked({ 65: 1 }, 0), { contextLength: 30 })
    const prompt = renderPrompt(request().messages).ids.length
    const error = refusal(small, { max_tokens: 20 })
    expect(error.kind).toBe("ContextOverflow")
    expect(error.message).toBe(
      `This model's maximum context length is 30 tokens. However, you requested ${prompt + 20} tokens (${prompt} in the messages, 20 in the completion). Please reduce the length of the messages or completion.`
    )
    const long = refusal(small, { messages: [{ role: "user", content: "x".repeat(40) }] })
    expect(long.message).toContain("maximum context length")
    // Truncation makes it fit.
    expect(
      run(small, {
        messages: [{ role: "user", content: "x".repeat(40) }],
        truncate_prompt_tokens: 10,
        max_tokens: 20,
        seed: 1
      }).usage.prompt_tokens
    ).toBe(10)
  })
})

describe("Sampler: refusals", () => {
  it("refuses fields it cannot honour, naming them", () => {
    const cases: ReadonlyArray<readonly [Fields, string, string]> = [
      [{ use_beam_search: true }, "Unsupported", "use_beam_search"],
      [{ use_beam_search: true, n: 3 }, "Unsupported", "use_beam_search"],
      [{ logits_processors: ["my.module.Processor"] }, "Unsupported", "logits_processors"],
      [{ structured_outputs: { grammar: "root ::= 'x'" } }, "Unsupported", "structured_outputs.grammar"],
      [{ structured_outputs: { structural_tag: "{}" } }, "Unsupported", "structured_outputs.structural_tag"],
      [{ response_format: { type: "structural_tag", format: {} } }, "Unsupported", "response_format"],
      [
        {
          tools: [{ type: "function", function: { name: "f", parameters: { type: "string", pattern: "a+" } } }],
          tool_choice: "required"
        },
        "Unsupported",
        "tools[0].function.parameters"
      ],
      [
        { tools: [{ type: "function", function: { name: "f" } }], response_format: { type: "json_object" } },
        "BadRequest",
        "tool_choice"
      ],
      [{ structured_outputs: { json: { type: "string", pattern: "a+" } } }, "Unsupported", "structured_outputs.json"],
      [{ stream_options: { include_usage: true } }, "BadRequest", "stream_options"],
      [{ temperature: -1 }, "BadRequest", "temperature"],
      [{ top_p: 0 }, "BadRequest", "top_p"],
      [{ top_k: -2 }, "BadRequest", "top_k"],
      [{ min_p: 2 }, "BadRequest", "min_p"],
      [{ presence_penalty: 3 }, "BadRequest", "presence_penalty"],
      [{ repetition_penalty: 0 }, "BadRequest", "repetition_penalty"],
      [{ max_tokens: 0 }, "BadRequest", "max_tokens"],
      [{ max_completion_tokens: -1 }, "BadRequest", "max_completion_tokens"],
      [{ min_tokens: 10, max_tokens: 5 }, "BadRequest", "min_tokens"],
      [{ logit_bias: { "9999": 1 } }, "BadRequest", "logit_bias"],
      [{ logit_bias: { abc: 1 } }, "BadRequest", "logit_bias"],
      [{ allowed_token_ids: [] }, "BadRequest", "allowed_token_ids"],
      [{ allowed_token_ids: [5000] }, "BadRequest", "allowed_token_ids"],
      [{ stop: [""] }, "BadRequest", "stop"],
      [{ continue_final_message: true }, "BadRequest", "continue_final_message"]
    ]
    for (const [fields, kind, param] of cases) {
      const error = refusal(keyed, fields)
      expect({ kind: error.kind, param: error.param }, JSON.stringify(fields)).toEqual({ kind, param })
      expect(error.message).toContain(param.split(".")[0]!)
    }
  })

  it("priority other than 0 gives the convention's message", () => {
    expect(refusal(keyed, { priority: 3 })).toMatchObject({
      kind: "BadRequest",
      param: "priority",
      message: "Got priority 3 but Priority scheduling is not enabled."
    })
    expect(run(keyed, { priority: 0, max_tokens: 1, seed: 1 }).choices).toHaveLength(1)
  })

  it("accepts fields that have no effect here without complaint", () => {
    const response = run(keyed, {
      max_tokens: 2,
      seed: 1,
      length_penalty: 2,
      include_reasoning: false,
      reasoning_effort: "low",
      parallel_tool_calls: false,
      user: "u",
      cache_salt: "salt",
      vllm_xargs: { a: 1 },
      tools: [{ type: "function", function: { name: "f" } }],
      tool_choice: "none",
      structured_outputs: { regex: "[ab]+", disable_fallback: true, disable_any_whitespace: true }
    })
    expect(content(response)).toMatch(/^[ab]+$/)
  })
})

describe("Sampler: constrained decoding", () => {
  const hot = { temperature: 2.5, max_tokens: 120 }

  it("regex outputs always match", () => {
    const pattern = "(yes|no|[A-Z][a-z]{1,5}) \\d{2,3}(\\.\\d)?"
    const reference = new RegExp(`^(?:${pattern})$`)
    for (let seed = 0; seed < 40; seed++) {
      const choice = run(keyed, { ...hot, seed, structured_outputs: { regex: pattern } }).choices[0]!
      expect(choice.message.content, `seed ${seed}`).toMatch(reference)
      expect(choice.finish_reason).toBe("stop")
    }
  })

  it("JSON schema outputs always parse and match (structured_outputs.json and response_format)", () => {
    const schema = {
      type: "object",
      properties: {
        city: { type: "string", maxLength: 12 },
        temperature: { type: "number" },
        days: { type: "integer" },
        sunny: { type: "boolean" },
        tags: { type: "array", items: { enum: ["warm", "cold"] }, maxItems: 3 }
      },
      required: ["city", "sunny"]
    }
    for (let seed = 0; seed < 30; seed++) {
      for (const fields of [
        { structured_outputs: { json: seed % 2 === 0 ? schema : JSON.stringify(schema) } },
        { response_format: { type: "json_schema" as const, json_schema: { name: "weather", schema } } }
      ]) {
        const text = content(run(keyed, { ...hot, seed, ...fields }))
        const value = JSON.parse(text) as Record<string, unknown>
        expect(typeof value.city).toBe("string")
        expect([...(value.city as string)].length).toBeLessThanOrEqual(12)
        expect(typeof value.sunny).toBe("boolean")
        if ("days" in value) expect(Number.isInteger(value.days)).toBe(true)
        if ("temperature" in value) expect(typeof value.temperature).toBe("number")
        if ("tags" in value) {
          expect((value.tags as Array<string>).every((t) => t === "warm" || t === "cold")).toBe(true)
          expect((value.tags as Array<string>).length).toBeLessThanOrEqual(3)
        }
        expect(Object.keys(value).every((k) => k in schema.properties)).toBe(true)
      }
    }
  })

  it("json_object outputs are always JSON objects", () => {
    for (let seed = 0; seed < 30; seed++) {
      for (const fields of [
        { structured_outputs: { json_object: true } },
        { response_format: { type: "json_object" as const } }
      ]) {
        const value: unknown = JSON.parse(content(run(keyed, { ...hot, max_tokens: 200, seed, ...fields })))
        expect(typeof value === "object" && value !== null && !Array.isArray(value)).toBe(true)
      }
    }
  })

  it("choice outputs are always one of the strings, even when the model prefers the end of turn", () => {
    const choices = ["red", "green", "blue", "grün"]
    const ender = TableModel.constant(peaked({ [IM_END]: 10 }, 0))
    for (let seed = 0; seed < 40; seed++) {
      expect(choices).toContain(content(run(keyed, { ...hot, seed, structured_outputs: { choice: choices } })))
      expect(choices).toContain(content(run(ender, { seed, structured_outputs: { choice: choices } })))
    }
  })

  it("completes within a tight token limit, and ends where only the end is allowed", () => {
    for (let seed = 0; seed < 20; seed++) {
      const choice = run(keyed, {
        temperature: 3,
        seed,
        max_tokens: 12,
        structured_outputs: { regex: "[a-z]+@[a-z]+\\.com" }
      }).choices[0]!
      expect(choice.message.content).toMatch(/^[a-z]+@[a-z]+\.com$/)
    }
    // A complete output allows only the end of turn (even with ignore_eos).
    const done = run(keyed, {
      seed: 1,
      max_tokens: 10,
      ignore_eos: true,
      structured_outputs: { choice: ["ok"] },
      return_token_ids: true
    })
    expect(done.choices[0]).toMatchObject({ finish_reason: "stop", token_ids: [0x6f, 0x6b, IM_END] })
    // With ignore_eos an output that can go on does, to the limit.
    const open = run(TableModel.constant(peaked({ [IM_END]: 10 }, 0)), {
      seed: 1,
      max_tokens: 10,
      ignore_eos: true,
      structured_outputs: { regex: "[ab]*" }
    })
    expect(open.choices[0]).toMatchObject({ finish_reason: "length" })
    expect(content(open)).toMatch(/^[ab]{10}$/)
  })

  it("combines with allowed_token_ids, min_tokens and stop", () => {
    const response = run(keyed, {
      ...hot,
      seed: 3,
      structured_outputs: { regex: "[a-c]{3,6}" },
      allowed_token_ids: [0x61, 0x62, IM_END],
      min_tokens: 4
    })
    expect(content(response)).toMatch(/^[ab]{4,6}$/)
  })
})

describe("Sampler: constrained decoding within the token limit (issue 18, part 3)", () => {
  const schema = {
    type: "object",
    properties: { name: { type: "string" }, age: { type: "integer" } },
    required: ["name", "age"]
  }
  // {"name":"","age":0}
  const shortest = 19
  const jsonSchema = { type: "json_schema" as const, json_schema: { name: "person", schema } }

  it("a token limit below the shortest valid output is refused up front, naming the field and the minimum", () => {
    for (const max of [1, 2, 10, shortest - 1]) {
      for (const [field, limit] of [
        ["max_tokens", { max_tokens: max }],
        ["max_completion_tokens", { max_completion_tokens: max }]
      ] as const) {
        expect(refusal(keyed, { seed: 1, ...limit, response_format: jsonSchema })).toMatchObject({
          kind: "BadRequest",
          param: field,
          message: `${field} is ${max}, but the shortest output response_format.json_schema.schema allows takes ${shortest} tokens: ${field} must be at least ${shortest}`
        })
        // Streamed: refused before the first chunk.
        expect(() =>
          completeStream(keyed, request({ seed: 1, ...limit, stream: true, response_format: jsonSchema }), {
            modelName: "m"
          })
        ).toThrow(EngineError)
      }
    }
    expect(refusal(keyed, { max_tokens: 1, response_format: { type: "json_object" } })).toMatchObject({
      param: "max_tokens",
      message: expect.stringContaining("the shortest output response_format allows takes 2 tokens")
    })
    expect(refusal(keyed, { max_tokens: 1, structured_outputs: { choice: ["yes", "no"] } })).toMatchObject({
      param: "max_tokens",
      message: expect.stringContaining("the shortest output structured_outputs.choice allows takes 2 tokens")
    })
  })

  it("without a token limit, a prompt that leaves too little of the context is a context overflow", () => {
    const small = TableModel.keyed(7, 2, { contextLength: 64 })
    const promptTokens = renderPrompt([{ role: "user", content: "x".repeat(40) }]).ids.length
    const error = refusal(small, {
      messages: [{ role: "user", content: "x".repeat(40) }],
      response_format: jsonSchema
    })
    expect(error).toMatchObject({ kind: "ContextOverflow", param: "messages" })
    expect(error.message).toBe(
      `This model's maximum context length is 64 tokens. However, your request has ${promptTokens} input tokens, which leaves ${64 - promptTokens} for the completion, and the shortest output response_format.json_schema.schema allows takes ${shortest} tokens. Please reduce the length of the messages.`
    )
  })

  it("at exactly the shortest limit the output is the shortest valid one, with finish_reason stop", () => {
    for (let seed = 0; seed < 10; seed++) {
      const choice = run(keyed, { temperature: 2, seed, max_tokens: shortest, response_format: jsonSchema }).choices[0]!
      const value = JSON.parse(choice.message.content ?? "") as Record<string, unknown>
      expect(typeof value.name).toBe("string")
      expect(Number.isSafeInteger(value.age)).toBe(true)
      expect(choice.finish_reason).toBe("stop")
      expect(choice.stop_reason).toBeNull()
    }
    const object = run(keyed, { seed: 1, max_tokens: 2, response_format: { type: "json_object" } }).choices[0]!
    expect(object).toMatchObject({ message: { content: "{}" }, finish_reason: "stop" })
  })

  it("JSON that closes on the last token of the limit ends with stop, not length", () => {
    const text = '{"name":"Ada","age":36}'
    const greedy = { temperature: 0, response_format: jsonSchema, return_token_ids: true }
    // With room to spare the model ends its turn; on exactly the limit there is no token left for that.
    for (const [limit, ids] of [
      [text.length, encode(text)],
      [text.length + 5, [...encode(text), IM_END]]
    ] as const) {
      const response = run(scripted(text), { ...greedy, max_tokens: limit })
      expect(response.choices[0]).toMatchObject({ message: { content: text }, finish_reason: "stop", token_ids: ids })
      const chunks = stream(scripted(text), { ...greedy, max_tokens: limit })
      expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe("stop")
    }
    // Without a constraint, reaching the limit is still `length`.
    expect(run(scripted(text), { temperature: 0, max_tokens: text.length }).choices[0]!.finish_reason).toBe("length")
    // With ignore_eos, an output that could go on is cut by the limit: `length`; one that cannot: `stop`.
    const digits = run(scripted("123456"), {
      temperature: 0,
      max_tokens: 3,
      ignore_eos: true,
      response_format: { type: "json_schema", json_schema: { name: "n", schema: { type: "integer" } } }
    })
    expect(digits.choices[0]).toMatchObject({ message: { content: "123" }, finish_reason: "length" })
    const closed = run(scripted(text), {
      temperature: 0,
      max_tokens: text.length,
      ignore_eos: true,
      response_format: jsonSchema
    })
    expect(closed.choices[0]).toMatchObject({ message: { content: text }, finish_reason: "stop" })
  })

  it("where allowed_token_ids rule out the shortest way, the choice ends with length on a constrained prefix", () => {
    // "a{5}|b": only "a" allowed, 3 tokens: the output can never complete; it stays on the way to "aaaaa".
    const cut = run(keyed, {
      seed: 1,
      max_tokens: 3,
      allowed_token_ids: [0x61, IM_END],
      structured_outputs: { regex: "a{5}|b" }
    })
    expect(cut.choices[0]).toMatchObject({ message: { content: "aaa" }, finish_reason: "length" })
    // "ab" with "b" not allowed: after "a" nothing may follow; the output is not complete: length.
    const stuck = run(keyed, {
      seed: 1,
      max_tokens: 5,
      allowed_token_ids: [0x61, IM_END],
      structured_outputs: { regex: "ab" }
    })
    expect(stuck.choices[0]).toMatchObject({ message: { content: "a" }, finish_reason: "length" })
  })

  it("never crashes nor writes text outside the constraint, for any limit (the crash of max_tokens 2 to 10)", () => {
    const automaton = new ByteAutomaton(compileJsonSchema(schema))
    for (let max = 1; max <= 30; max++) {
      for (let seed = 0; seed < 4; seed++) {
        const fields: Fields = { temperature: 1.5, seed, max_tokens: max, response_format: jsonSchema }
        if (max < shortest) {
          expect(refusal(keyed, fields).param).toBe("max_tokens")
          continue
        }
        const choice = run(keyed, { ...fields, return_token_ids: true }).choices[0]!
        expect(choice.finish_reason).toBe("stop")
        expect(
          accepts(
            automaton,
            choice.token_ids!.filter((id) => id < 256)
          )
        ).toBe(true)
        expect(validates(schema, JSON.parse(choice.message.content ?? ""))).toBe(true)
      }
    }
  })
})

describe("Sampler: streaming", () => {
  const fields = { temperature: 1.3, max_tokens: 40, n: 2, seed: 11, logprobs: true, return_token_ids: true }

  it("concatenated deltas equal the non-streamed text for the same seed", () => {
    const cases: ReadonlyArray<Fields> = [
      fields,
      { ...fields, stop: ["e", "ab"], min_tokens: 3 },
      { ...fields, stop: "o", include_stop_str_in_output: true },
      { ...fields, structured_outputs: { json_object: true }, max_tokens: 100 },
      { ...fields, echo: true, messages: [{ role: "assistant", content: "Sure: " }] },
      { ...fields, skip_special_tokens: false, ignore_eos: true }
    ]
    const models = [keyed, scripted("héllo wörld — ok"), TableModel.keyed(3, 4)]
    for (const model of models) {
      for (const c of cases) {
        const whole = run(model, c)
        const chunks = stream(model, c)
        for (const choice of whole.choices) {
          const mine = chunks.flatMap((chunk) => chunk.choices.filter((ch) => ch.index === choice.index))
          expect(mine.map((ch) => ch.delta.content ?? "").join("")).toBe(choice.message.content)
          expect(mine.flatMap((ch) => ch.token_ids ?? [])).toEqual(choice.token_ids)
          expect(mine.flatMap((ch) => ch.logprobs?.content ?? [])).toEqual(choice.logprobs!.content)
          const last = mine.at(-1)!
          expect(last.finish_reason).toBe(choice.finish_reason)
          expect(last.stop_reason).toBe(choice.stop_reason)
          expect(mine.slice(0, -1).every((ch) => ch.finish_reason == null)).toBe(true)
        }
      }
    }
  })

  it("sends the role chunk first per choice, prompt_token_ids in the first chunk only, then usage when asked", () => {
    const chunks = stream(keyed, { ...fields, stream_options: { include_usage: true } })
    expect(
      chunks.every((c) => c.object === "chat.completion.chunk" && c.id === "chatcmpl-r1" && c.model === "test")
    ).toBe(true)
    expect(chunks[0]!.choices[0]!.delta).toEqual({ role: "assistant", content: "" })
    expect(chunks[0]!.prompt_token_ids).toEqual(renderPrompt(request().messages).ids)
    expect(chunks[1]!.choices[0]).toMatchObject({ index: 1, delta: { role: "assistant", content: "" } })
    expect(chunks.slice(1).every((c) => c.prompt_token_ids === undefined)).toBe(true)
    for (const index of [0, 1]) {
      const first = chunks.findIndex((c) => c.choices.some((ch) => ch.index === index))
      expect(chunks[first]!.choices[0]!.delta.role).toBe("assistant")
    }
    const usage = chunks.at(-1)!
    expect(usage.choices).toEqual([])
    expect(usage.usage).toEqual(run(keyed, fields).usage)
    expect(chunks.slice(0, -1).every((c) => c.usage === undefined)).toBe(true)
    // No usage chunk without stream_options, or with include_usage false.
    expect(stream(keyed, fields).at(-1)!.choices).toHaveLength(1)
    expect(stream(keyed, { ...fields, stream_options: { include_usage: false } }).at(-1)!.choices).toHaveLength(1)
  })

  it("continuous_usage_stats puts usage on every chunk", () => {
    const chunks = stream(keyed, {
      ...fields,
      n: 1,
      ignore_eos: true,
      stream_options: { continuous_usage_stats: true }
    })
    expect(chunks.every((c) => c.usage != null)).toBe(true)
    expect(chunks.at(-2)!.usage!.completion_tokens).toBe(40)
  })

  it("checks the request before the first chunk", () => {
    expect(() => completeStream(keyed, request({ stream: true, use_beam_search: true }), { modelName: "m" })).toThrow(
      EngineError
    )
  })
})

describe("Sampler: through the real policy", () => {
  it("serves a request reproducibly, with logprobs the policy's own scores agree with (smoke)", async () => {
    // Probed, not typed: this test must not depend on the policy module's exact API.
    const module = (await import("../../src/local/engine/policy/Policy.js").catch(() => null)) as {
      readonly Policy?: { readonly create?: (config?: undefined, options?: { seed: number }) => unknown }
    } | null
    const create = module?.Policy?.create
    if (create === undefined) return
    const policy = create.call(module!.Policy, undefined, { seed: 1 }) as LanguageModel<DecodeState>
    const fields: Fields = { seed: 3, n: 2, max_tokens: 12, logprobs: true, return_token_ids: true, ignore_eos: true }
    const a = complete(policy, request(fields), { modelName: "policy" })
    const b = complete(policy, request(fields), { modelName: "policy" })
    expect(b.choices).toEqual(a.choices)
    const choice = a.choices[0]!
    const sequence = renderTrajectory([...request().messages, choice])
    const scores = policy.scoreTokens(sequence.ids, 1)
    for (let t = 0; t < sequence.ids.length; t++) {
      if (sequence.mask[t] === 1) expect(scores[t - 1]).toBeCloseTo(sequence.logprobs[t]!, 4)
    }
    const regex = complete(
      policy,
      request({ seed: 1, temperature: 2, structured_outputs: { regex: "\\d{3}-[a-z]{2}" } }),
      {
        modelName: "policy"
      }
    )
    expect(regex.choices[0]!.message.content).toMatch(/^\d{3}-[a-z]{2}$/)
  })
})
