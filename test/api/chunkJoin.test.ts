/**
 * The chunk joiner behind `ChatStream.collect` and the trace server's streamed calls, on chunks cut as any server
 * may cut them (the engine's own cut is tested against the real server in test/client/ChatStream.test.ts): a
 * completion of several choices, each with text, tool calls and logprobs, sent as a stream whose content and tool
 * arguments are split at random places and whose choices are interleaved at random, joins back into it.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Arbitrary from "effect/Arbitrary"
import * as FastCheck from "effect/FastCheck"
import type { ChatCompletion, ChatCompletionChunk, Choice, ChunkChoice } from "../../src/api/ChatCompletion.js"
import { TokenLogprob } from "../../src/api/ChatCompletion.js"
import { ChunkJoin } from "../../src/api/internal/chunkJoin.js"

/** One choice as a server means it, and how its stream is cut. */
interface Plan {
  readonly text: string | undefined
  readonly roleChunkContent: boolean
  readonly calls: ReadonlyArray<{ readonly id: string; readonly name: string; readonly arguments: string }>
  readonly logprobs: ReadonlyArray<TokenLogprob> | undefined
  readonly tokenIds: ReadonlyArray<number> | undefined
  readonly finish: string
  readonly stop: string | null | undefined
  /** Where the text and each call's arguments are cut (fractions of their length). */
  readonly cuts: ReadonlyArray<number>
}

const plan: FastCheck.Arbitrary<Plan> = FastCheck.record({
  text: FastCheck.option(FastCheck.string({ minLength: 1, maxLength: 20 }), { nil: undefined }),
  roleChunkContent: FastCheck.boolean(),
  calls: FastCheck.array(
    FastCheck.record({
      id: FastCheck.stringMatching(/^call_[a-z0-9]{4}$/),
      name: FastCheck.constantFrom("price", "stock", "lookup"),
      arguments: FastCheck.json()
    }),
    { maxLength: 2 }
  ),
  logprobs: FastCheck.option(FastCheck.array(Arbitrary.make(TokenLogprob), { maxLength: 4 }), { nil: undefined }),
  tokenIds: FastCheck.option(FastCheck.array(FastCheck.nat(300), { maxLength: 6 }), { nil: undefined }),
  finish: FastCheck.constantFrom("stop", "length", "tool_calls"),
  stop: FastCheck.constantFrom(undefined, null, "</s>"),
  cuts: FastCheck.array(FastCheck.double({ min: 0, max: 1, noNaN: true }), { maxLength: 4 })
})

/** `text` cut at the fractions `cuts` (pieces may be empty). */
const pieces = (text: string, cuts: ReadonlyArray<number>): Array<string> => {
  const at = [...new Set(cuts.map((c) => Math.floor(c * text.length)))].sort((a, b) => a - b)
  const out: Array<string> = []
  let from = 0
  for (const cut of at) {
    out.push(text.slice(from, cut))
    from = cut
  }
  out.push(text.slice(from))
  return out
}

/** A choice's stream: role, content pieces (logprobs spread over them), each call in fragments, the finish. */
const choiceChunks = (index: number, p: Plan): Array<ChunkChoice> => {
  const out: Array<ChunkChoice> = [
    { index, delta: { role: "assistant", ...(p.roleChunkContent ? { content: "" } : {}) } }
  ]
  if (p.text !== undefined) {
    const parts = pieces(p.text, p.cuts)
    const entries = p.logprobs ?? []
    parts.forEach((content, i) => {
      // The logprob entries, spread over the pieces in order (the last piece takes what is left).
      const share = i === parts.length - 1 ? entries.slice(i) : entries.slice(i, i + 1)
      out.push({ index, delta: { content }, ...(p.logprobs === undefined ? {} : { logprobs: { content: share } }) })
    })
  }
  p.calls.forEach((call, i) => {
    const [head = "", ...rest] = pieces(call.arguments, p.cuts)
    out.push({
      index,
      delta: {
        tool_calls: [{ index: i, id: call.id, type: "function", function: { name: call.name, arguments: head } }]
      }
    })
    for (const fragment of rest)
      out.push({ index, delta: { tool_calls: [{ index: i, function: { arguments: fragment } }] } })
  })
  out.push({
    index,
    delta: {},
    finish_reason: p.finish,
    ...(p.stop === undefined ? {} : { stop_reason: p.stop }),
    ...(p.tokenIds === undefined ? {} : { token_ids: p.tokenIds })
  })
  return out
}

/** The completion a server means by the plans. */
const completionOf = (plans: ReadonlyArray<Plan>, usage: ChatCompletion["usage"] | undefined): ChatCompletion => ({
  id: "chatcmpl-1",
  object: "chat.completion",
  created: 7,
  model: "m",
  choices: plans.map((p, index): Choice => {
    const calls = p.calls.map((c) => ({
      id: c.id,
      type: "function" as const,
      function: { name: c.name, arguments: c.arguments }
    }))
    const content = p.text ?? (p.roleChunkContent && calls.length === 0 ? "" : null)
    return {
      index,
      message: { role: "assistant", content, refusal: null, ...(calls.length === 0 ? {} : { tool_calls: calls }) },
      logprobs: p.logprobs === undefined || p.text === undefined ? null : { content: [...p.logprobs], refusal: null },
      finish_reason: p.finish,
      ...(p.stop === undefined ? {} : { stop_reason: p.stop }),
      ...(p.tokenIds === undefined ? {} : { token_ids: [...p.tokenIds] })
    }
  }),
  usage: usage ?? { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 }
})

const usage = FastCheck.option(
  FastCheck.record({
    prompt_tokens: FastCheck.nat(),
    completion_tokens: FastCheck.nat(),
    total_tokens: FastCheck.nat()
  }),
  { nil: undefined }
)

describe("ChunkJoin", () => {
  it("joins a completion's chunks, however they are cut and interleaved, back into the completion", () => {
    FastCheck.assert(
      FastCheck.property(
        FastCheck.array(plan, { minLength: 1, maxLength: 3 }),
        usage,
        FastCheck.array(FastCheck.nat(2), { maxLength: 60 }),
        (plans, usage, picks) => {
          // The choices' streams interleaved: each pick takes the next chunk of a choice that has one left.
          const queues = plans.map((p, index) => choiceChunks(index, p))
          const order: Array<ChunkChoice> = []
          let pick = 0
          while (queues.some((q) => q.length > 0)) {
            const open = queues.filter((q) => q.length > 0)
            order.push(open[(picks[pick++] ?? 0) % open.length]!.shift()!)
          }
          const base = { id: "chatcmpl-1", object: "chat.completion.chunk" as const, created: 7, model: "m" }
          const chunks: Array<ChatCompletionChunk> = order.map((choice) => ({ ...base, choices: [choice] }))
          if (usage !== undefined) chunks.push({ ...base, choices: [], usage })
          const join = new ChunkJoin()
          for (const chunk of chunks) join.add(chunk)
          expect(join.completion()).toEqual(completionOf(plans, usage))
          expect(join.usage).toEqual(usage)
        }
      ),
      { numRuns: 300 }
    )
  })

  it("is undefined before the first chunk", () => {
    expect(new ChunkJoin().completion()).toBeUndefined()
  })
})
