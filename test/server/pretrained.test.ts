/**
 * The pretrained base model `effect-rl/base-2k`: its shipped weights are the ones the script's run recorded (the
 * SHA-256 beside them, and the record's options are the script's), the first steps of that run reproduce the
 * checksum it recorded after them, the embedded backend serves it from the file beside the random-init models,
 * and it copies a tool's result into its answer and writes ASCII where the random-init model of the same shape
 * guesses and writes noise. The corpus is seeded and printable ASCII, and marks the values its answers copy.
 */
import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import { describe, expect, it } from "@effect/vitest"
import { Corpus, render } from "../../scripts/pretrain/Corpus.js"
import {
  PREFIX_STEPS,
  pretrain,
  RUNS,
  SHIPPED_RUN,
  WIDE_RUN,
  weightsChecksum
} from "../../scripts/pretrain/Pretrain.js"
import { loadCheckpoint } from "../../src/local/engine/policy/Checkpoint.js"
import type { Policy } from "../../src/local/engine/policy/Policy.js"
import { complete } from "../../src/local/engine/Sampler.js"
import { decode } from "../../src/local/engine/Tokenizer.js"
import {
  baseModelNames,
  basePolicy,
  initialWeights,
  LONG_CONTEXT_MODEL,
  PRETRAINED_MODEL,
  PRETRAINED_WEIGHTS_URL,
  WIDE_PRETRAINED_MODEL,
  WIDE_PRETRAINED_WEIGHTS_URL
} from "../../src/local/server/internal/baseModels.js"

const shipped = new Uint8Array(readFileSync(PRETRAINED_WEIGHTS_URL))
const record = JSON.parse(readFileSync(new URL(`${PRETRAINED_WEIGHTS_URL.href}.json`), "utf8")) as {
  readonly sha256: string
  readonly options: unknown
  readonly prefix: { readonly steps: number; readonly sha256: string }
}

/** The checksum of the weights after the shipped run's first `PREFIX_STEPS` steps. */
const PREFIX_SHA256 = "6cfe8a8c0039740ba4aaa6433fe19515a0e2fc7509e5a076b8f50800d095af3f"
/** The same of the wider base's run. */
const WIDE_PREFIX_SHA256 = "f1747b3c27fe66ea3fa6e10772a79ddbc274def4fd0a97f2796f510b3508e011"

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex")

/** The share of printable ASCII bytes (and newlines) in a policy's free text at temperature 1. */
const printableShare = (policy: Policy): number => {
  const response = complete(
    policy,
    { messages: [{ role: "user", content: "Tell me about your day." }], n: 4, max_tokens: 40, temperature: 1, seed: 3 },
    { modelName: "test" }
  )
  const bytes = response.choices.flatMap((c) => [...new TextEncoder().encode(c.message.content ?? "")])
  return bytes.filter((b) => (b >= 0x20 && b < 0x7f) || b === 0x0a).length / bytes.length
}

/** How many of eight held-out tool results a policy copies into an answer constrained to the eight values. */
const copiedChoices = (policy: Policy): number => {
  const cities = ["Oslo", "Paris", "Lima", "Cairo"]
  const values = ["sunny", "rainy", "windy", "foggy", "1am", "3pm", "7am", "9pm"]
  const parameters = { type: "object", required: ["city"], properties: { city: { type: "string", enum: cities } } }
  const tools = [
    { type: "function", function: { name: "weather", description: "Weather in a city", parameters } },
    { type: "function", function: { name: "clock", description: "Time in a city", parameters } }
  ] as const
  let right = 0
  values.forEach((value, i) => {
    const city = cities[i % 4]!
    const name = i < 4 ? "weather" : "clock"
    const response = complete(
      policy,
      {
        messages: [
          { role: "user", content: i < 4 ? `What is the weather in ${city}?` : `What time is it in ${city}?` },
          {
            role: "assistant",
            content: null,
            tool_calls: [{ id: "c", type: "function", function: { name, arguments: JSON.stringify({ city }) } }]
          },
          { role: "tool", tool_call_id: "c", content: value }
        ],
        tools: [...tools],
        tool_choice: "none",
        structured_outputs: { choice: values },
        temperature: 1,
        seed: 10 + i
      },
      { modelName: "test" }
    )
    if (response.choices[0]?.message.content === value) right++
  })
  return right
}

describe("the pretrained base model", () => {
  it("ships the weights whose SHA-256 is written beside them and recorded by the run", () => {
    const written = readFileSync(new URL(`${PRETRAINED_WEIGHTS_URL.href}.sha256`), "utf8")
    expect(written).toBe(`${sha256(shipped)}  base-2k.erlp\n`)
    expect(record.sha256).toBe(sha256(shipped))
    expect(record.options).toEqual(SHIPPED_RUN)
    expect(shipped.length).toBeLessThan(4_000_000)
  })

  it("re-running the first steps of the shipped run reproduces their recorded checksum, bit for bit", () => {
    expect(record.prefix).toEqual({ steps: PREFIX_STEPS, sha256: PREFIX_SHA256 })
    const policy = pretrain(SHIPPED_RUN, undefined, PREFIX_STEPS)
    expect(weightsChecksum(policy)).toBe(PREFIX_SHA256)
  }, 120_000)

  it("is served from the shipped file beside the random-init models, at 2,048 tokens", () => {
    expect(baseModelNames).toEqual(["effect-rl/tiny", LONG_CONTEXT_MODEL, PRETRAINED_MODEL, WIDE_PRETRAINED_MODEL])
    expect(sha256(initialWeights(PRETRAINED_MODEL)!)).toBe(sha256(shipped))
    const policy = basePolicy(PRETRAINED_MODEL)!
    expect(policy.contextLength).toBe(2048)
    const bytesOf = (a: Float32Array | Float64Array) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength)
    expect(sha256(bytesOf(policy.params))).toBe(sha256(bytesOf(loadCheckpoint(shipped).policy.params)))
  })

  it("copies a tool's result into a constrained answer, where the random-init model of its shape guesses", () => {
    expect(copiedChoices(basePolicy(PRETRAINED_MODEL)!)).toBeGreaterThanOrEqual(7)
    expect(copiedChoices(basePolicy(LONG_CONTEXT_MODEL)!)).toBeLessThanOrEqual(3)
  })

  it("writes printable ASCII where the random-init model of its shape writes noise", () => {
    expect(printableShare(basePolicy(PRETRAINED_MODEL)!)).toBeGreaterThan(0.95)
    expect(printableShare(basePolicy(LONG_CONTEXT_MODEL)!)).toBeLessThan(0.5)
  })
})

describe("the pretraining corpus", () => {
  it("is the same for the same seed, differs for another, and is printable ASCII in the chat template", () => {
    const take = (seed: number) => {
      const corpus = new Corpus(seed)
      return Array.from({ length: 50 }, () => corpus.nextRendered())
    }
    const a = take(5)
    expect(take(5)).toEqual(a)
    expect(take(6)).not.toEqual(a)
    for (const c of a) {
      const text = decode(c.ids)
      expect(text).toMatch(/^[\x20-\x7e\n]*$/)
      // Every conversation ends with an assistant turn, whose tokens are marked up to its `<|im_end|>`.
      expect(c.assistant[c.assistant.length - 2]).toBe(1)
      expect(decode(c.ids, { skipSpecialTokens: false })).toMatch(/<\|im_start\|>assistant\n[\s\S]*<\|im_end\|>\n$/)
    }
  })

  it("marks the assistant turns: a call, and an answer that uses the tool's result", () => {
    const rendered = render({
      messages: [
        { role: "user", content: "Weather in Oslo?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "c", type: "function", function: { name: "weather", arguments: '{"city":"Oslo"}' } }]
        },
        { role: "tool", tool_call_id: "c", content: "foggy" },
        { role: "assistant", content: "It is foggy in Oslo." }
      ]
    })
    const marked = decode(rendered.ids.filter((_, i) => rendered.assistant[i] === 1))
    expect(marked).toBe('<tool_call>\n{"name":"weather","arguments":{"city":"Oslo"}}\n</tool_call>It is foggy in Oslo.')
  })

  it("marks an assistant turn's copies of the conversation's copied values, and not the values elsewhere", () => {
    const rendered = render({
      messages: [
        { role: "user", content: "The code is bazumo. What is the code?" },
        { role: "assistant", content: '{"answer":"bazumo"}' }
      ],
      copied: ["bazumo"]
    })
    const word = [..."bazumo"].map((ch) => ch.charCodeAt(0))
    const starts = rendered.ids.flatMap((_, i) => (word.every((b, k) => rendered.ids[i + k] === b) ? [i] : []))
    expect(starts).toHaveLength(2)
    const at = starts[1]!
    const marks = [...rendered.assistant]
    expect(marks.slice(at, at + 6)).toEqual([2, 2, 2, 2, 2, 2])
    expect(marks.filter((m) => m === 2)).toHaveLength(6)
    expect(decode(rendered.ids.filter((_, i) => rendered.assistant[i] === 1))).toBe('{"answer":""}')
  })
})

/** The wider base (`effect-rl/base-wide-2k`): the same checks of its own run and file. */
describe("the wider pretrained base model", () => {
  const file = new Uint8Array(readFileSync(WIDE_PRETRAINED_WEIGHTS_URL))
  const wideRecord = JSON.parse(readFileSync(new URL(`${WIDE_PRETRAINED_WEIGHTS_URL.href}.json`), "utf8")) as {
    readonly model: string
    readonly sha256: string
    readonly options: unknown
    readonly prefix: { readonly steps: number; readonly sha256: string }
  }

  it("ships the weights whose SHA-256 is written beside them and recorded by its run", () => {
    const written = readFileSync(new URL(`${WIDE_PRETRAINED_WEIGHTS_URL.href}.sha256`), "utf8")
    expect(written).toBe(`${sha256(file)}  base-wide-2k.erlp\n`)
    expect(wideRecord.sha256).toBe(sha256(file))
    expect(wideRecord.model).toBe(WIDE_PRETRAINED_MODEL)
    expect(wideRecord.options).toEqual(WIDE_RUN)
    expect(RUNS.map((run) => [run.model, run.options])).toEqual([
      [PRETRAINED_MODEL, SHIPPED_RUN],
      [WIDE_PRETRAINED_MODEL, WIDE_RUN]
    ])
    expect(file.length).toBeLessThan(4_000_000)
  })

  it("re-running the first steps of its run reproduces their recorded checksum, bit for bit", () => {
    expect(wideRecord.prefix).toEqual({ steps: PREFIX_STEPS, sha256: WIDE_PREFIX_SHA256 })
    const policy = pretrain(WIDE_RUN, undefined, PREFIX_STEPS)
    expect(weightsChecksum(policy)).toBe(WIDE_PREFIX_SHA256)
  }, 120_000)

  it("is served from its file at 2,048 tokens, twice base-2k's width", () => {
    expect(sha256(initialWeights(WIDE_PRETRAINED_MODEL)!)).toBe(sha256(file))
    const policy = basePolicy(WIDE_PRETRAINED_MODEL)!
    expect(policy.contextLength).toBe(2048)
    expect(policy.config.dModel).toBe(2 * basePolicy(PRETRAINED_MODEL)!.config.dModel)
  })

  it("copies a tool's result into a constrained answer and writes printable ASCII", () => {
    expect(copiedChoices(basePolicy(WIDE_PRETRAINED_MODEL)!)).toBeGreaterThanOrEqual(7)
    expect(printableShare(basePolicy(WIDE_PRETRAINED_MODEL)!)).toBeGreaterThan(0.95)
  })
})
