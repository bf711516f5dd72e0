/**
 * The chunk joiner behind `ChatStream.collect` and the trace server's streamed calls, on chunks cut as any server
 * may cut them (the engine's own cut is tested against the real server in test/client/ChatStream.test.ts): a
 * completion of several choices, each with text, a refusal, reasoning, tool calls, logprobs and token ids, sent as
 * a stream whose strings are split at random places, whose fragments (of the text, the refusal, the reasoning and
 * each tool call) are interleaved at random within a choice and sometimes share a delta, and whose choices are
 * interleaved at random and sometimes share a chunk, joins back into it; and any prefix of the stream joins into a
 * valid completion (what the trace server records when a stream breaks off).
 */
import { describe, expect, it } from "@effect/vitest"
import * as Arbitrary from "effect/Arbitrary"
import * as FastCheck from "effect/FastCheck"
import * as Schema from "effect/Schema"
import type {
  ChatCompletion,
  ChatCompletionChunk,
  Choice,
  ChunkChoice,
  Delta,
  DeltaToolCall,
  ResponseToolCall
} from "../../src/api/ChatCompletion.js"
import { ChatCompletion as ChatCompletionSchema, TokenLogprob } from "../../src/api/ChatCompletion.js"
import { ChunkJoin } from "../../src/api/internal/chunkJoin.js"

/** One tool call as a server means it, and how its first fragments carry its id and name. */
interface Call {
  readonly id: string | undefined
  readonly name: string | undefined
  readonly arguments: string
  /**
   * `whole`: id, name and the first piece of the arguments in one fragment; `name`: id and name, then the
   * arguments; `apart`: the id, then the name, then the arguments.
   */
  readonly header: "whole" | "name" | "apart"
}

/** One choice as a server means it, and how its stream is cut. */
interface Plan {
  /** The role of the first chunk (vLLM's `--response-role` names it); none: the joiner's default, `assistant`. */
  readonly role: string | undefined
  /** What the role chunk carries besides the role: nothing, an empty content, or every string key as null. */
  readonly opening: "bare" | "empty" | "nulls"
  /** Whether every chunk of the choice carries its absent `logprobs`, `finish_reason` and `token_ids` as null. */
  readonly nulls: boolean
  readonly text: string | undefined
  readonly refusal: string | undefined
  readonly reasoning: string | undefined
  readonly reasoningContent: string | undefined
  readonly calls: ReadonlyArray<Call>
  /** The text's logprob entries, spread over its pieces. */
  readonly logprobs: ReadonlyArray<TokenLogprob> | undefined
  /** The refusal's logprob entries, spread over its pieces. */
  readonly refusalLogprobs: ReadonlyArray<TokenLogprob> | undefined
  /** The sampled token ids, spread over the text's pieces and the finish chunk. */
  readonly tokenIds: ReadonlyArray<number> | undefined
  readonly finish: string
  readonly stop: string | null | undefined
  /** Where each string is cut (fractions of its length). */
  readonly cuts: ReadonlyArray<number>
  /** Which fragment comes next: each pick takes the next fragment of one string that has fragments left. */
  readonly picks: ReadonlyArray<number>
  /** Whether a fragment shares the delta before it (when their keys and tool call indexes differ). */
  readonly merges: ReadonlyArray<boolean>
}

const logprobEntries = FastCheck.option(FastCheck.array(Arbitrary.make(TokenLogprob), { maxLength: 4 }), {
  nil: undefined
})

const plan: FastCheck.Arbitrary<Plan> = FastCheck.record({
  role: FastCheck.constantFrom(undefined, "assistant", "agent"),
  opening: FastCheck.constantFrom("bare", "empty", "nulls"),
  nulls: FastCheck.boolean(),
  text: FastCheck.option(FastCheck.string({ minLength: 1, maxLength: 20 }), { nil: undefined }),
  refusal: FastCheck.option(FastCheck.string({ maxLength: 12 }), { nil: undefined, freq: 2 }),
  reasoning: FastCheck.option(FastCheck.string({ maxLength: 12 }), { nil: undefined, freq: 2 }),
  reasoningContent: FastCheck.option(FastCheck.string({ maxLength: 12 }), { nil: undefined, freq: 2 }),
  calls: FastCheck.array(
    FastCheck.record({
      id: FastCheck.option(FastCheck.stringMatching(/^call_[a-z0-9]{4}$/), { nil: undefined }),
      name: FastCheck.option(FastCheck.constantFrom("price", "stock", "lookup"), { nil: undefined }),
      arguments: FastCheck.json(),
      header: FastCheck.constantFrom("whole", "name", "apart")
    }),
    { maxLength: 3 }
  ),
  logprobs: logprobEntries,
  refusalLogprobs: logprobEntries,
  tokenIds: FastCheck.option(FastCheck.array(FastCheck.nat(300), { maxLength: 6 }), { nil: undefined }),
  finish: FastCheck.constantFrom("stop", "length", "tool_calls"),
  stop: FastCheck.constantFrom(undefined, null, "</s>"),
  cuts: FastCheck.array(FastCheck.double({ min: 0, max: 1, noNaN: true }), { maxLength: 4 }),
  picks: FastCheck.array(FastCheck.nat(5), { maxLength: 30 }),
  merges: FastCheck.array(FastCheck.boolean(), { maxLength: 30 })
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

/** `entries` spread over `n` shares in order: one each, the last share taking what is left. */
const spread = <T>(entries: ReadonlyArray<T>, n: number): Array<Array<T>> =>
  Array.from({ length: n }, (_, i) => (i === n - 1 ? entries.slice(i) : entries.slice(i, i + 1)))

/** A fragment of a choice's stream: the part of one chunk choice past its index. */
type Fragment = Omit<ChunkChoice, "index">

/** `items` taken from `queues` in turn: each pick takes the next item of a queue that has one left. */
const interleave = <T>(queues: ReadonlyArray<ReadonlyArray<T>>, picks: ReadonlyArray<number>): Array<T> => {
  const left = queues.map((q) => [...q])
  const out: Array<T> = []
  let pick = 0
  while (left.some((q) => q.length > 0)) {
    const open = left.filter((q) => q.length > 0)
    out.push(open[(picks[pick++] ?? 0) % open.length]!.shift()!)
  }
  return out
}

const keysOf = (o: object | null | undefined) => Object.keys(o ?? {})
const disjoint = (a: ReadonlyArray<unknown>, b: ReadonlyArray<unknown>) => a.every((x) => !b.includes(x))

/** `b` in the same delta as `a`, when one delta can carry both (no key or tool call index in common). */
const merged = (a: Fragment, b: Fragment): Fragment | undefined => {
  const { tool_calls: aCalls = [], ...aDelta } = a.delta
  const { tool_calls: bCalls = [], ...bDelta } = b.delta
  const together =
    disjoint(keysOf(aDelta), keysOf(bDelta)) &&
    disjoint(
      aCalls.map((c) => c.index),
      bCalls.map((c) => c.index)
    ) &&
    disjoint(keysOf(a.logprobs), keysOf(b.logprobs)) &&
    (a.token_ids === undefined || b.token_ids === undefined)
  if (!together) return undefined
  const calls = [...aCalls, ...bCalls]
  const logprobs =
    a.logprobs === undefined && b.logprobs === undefined ? {} : { logprobs: { ...a.logprobs, ...b.logprobs } }
  const tokenIds = a.token_ids ?? b.token_ids
  return {
    delta: { ...aDelta, ...bDelta, ...(calls.length === 0 ? {} : { tool_calls: calls }) },
    ...logprobs,
    ...(tokenIds === undefined ? {} : { token_ids: tokenIds })
  }
}

/** A call's fragments: its id and name as `header` says, then its arguments in pieces. */
const callFragments = (index: number, call: Call, cuts: ReadonlyArray<number>): Array<Fragment> => {
  const fragment = (c: Omit<DeltaToolCall, "index">): Fragment => ({ delta: { tool_calls: [{ index, ...c }] } })
  const id = call.id === undefined ? {} : { id: call.id }
  const name = call.name === undefined ? {} : { name: call.name }
  const args = pieces(call.arguments, cuts).map((a) => fragment({ function: { arguments: a } }))
  switch (call.header) {
    case "whole": {
      const [head = "", ...rest] = pieces(call.arguments, cuts)
      return [
        fragment({ ...id, type: "function", function: { ...name, arguments: head } }),
        ...rest.map((a) => fragment({ function: { arguments: a } }))
      ]
    }
    case "name":
      return [fragment({ ...id, type: "function", function: name }), ...args]
    case "apart":
      return [fragment({ ...id, type: "function" }), fragment({ function: name }), ...args]
  }
}

/**
 * A choice's stream: the role, the fragments of its text (logprobs and token ids spread over them), refusal
 * (logprobs spread over them), reasoning and tool calls interleaved and sometimes sharing a delta, the finish.
 */
const choiceChunks = (index: number, p: Plan): Array<ChunkChoice> => {
  const opening: Delta =
    p.opening === "bare"
      ? {}
      : p.opening === "empty"
        ? { content: "" }
        : { content: null, refusal: null, reasoning: null, reasoning_content: null }
  const textParts = p.text === undefined ? [] : pieces(p.text, p.cuts)
  const tokenShares = spread(p.tokenIds ?? [], textParts.length + 1)
  const logprobShares = spread(p.logprobs ?? [], textParts.length)
  const text = textParts.map(
    (content, i): Fragment => ({
      delta: { content },
      ...(p.logprobs === undefined ? {} : { logprobs: { content: logprobShares[i]! } }),
      ...(p.tokenIds === undefined ? {} : { token_ids: tokenShares[i]! })
    })
  )
  const refusalParts = p.refusal === undefined ? [] : pieces(p.refusal, p.cuts)
  const refusalShares = spread(p.refusalLogprobs ?? [], refusalParts.length)
  const refusal = refusalParts.map(
    (part, i): Fragment => ({
      delta: { refusal: part },
      ...(p.refusalLogprobs === undefined ? {} : { logprobs: { refusal: refusalShares[i]! } })
    })
  )
  const reasoning =
    p.reasoning === undefined ? [] : pieces(p.reasoning, p.cuts).map((r) => ({ delta: { reasoning: r } }))
  const reasoningContent =
    p.reasoningContent === undefined
      ? []
      : pieces(p.reasoningContent, p.cuts).map((r) => ({ delta: { reasoning_content: r } }))
  const calls = p.calls.map((call, i) => callFragments(i, call, p.cuts))
  const fragments: Array<Fragment> = []
  interleave([text, refusal, reasoning, reasoningContent, ...calls], p.picks).forEach((fragment, i) => {
    const last = fragments[fragments.length - 1]
    const both = p.merges[i] === true && last !== undefined ? merged(last, fragment) : undefined
    if (both === undefined) fragments.push(fragment)
    else fragments[fragments.length - 1] = both
  })
  const finish: Fragment = {
    delta: {},
    finish_reason: p.finish,
    ...(p.stop === undefined ? {} : { stop_reason: p.stop }),
    ...(p.tokenIds === undefined ? {} : { token_ids: tokenShares[textParts.length]! })
  }
  const nulls = p.nulls ? { logprobs: null, finish_reason: null, token_ids: null } : {}
  return [{ delta: { ...(p.role === undefined ? {} : { role: p.role }), ...opening } }, ...fragments, finish].map(
    (fragment) => ({ index, ...nulls, ...fragment })
  )
}

/** The completion a server means by the plans. */
const completionOf = (
  plans: ReadonlyArray<Plan>,
  usage: ChatCompletion["usage"] | undefined,
  promptTokenIds: ReadonlyArray<number> | undefined
): ChatCompletion => ({
  id: "chatcmpl-1",
  object: "chat.completion",
  created: 7,
  model: "m",
  choices: plans.map((p, index): Choice => {
    const calls = p.calls.map(
      (c): ResponseToolCall => ({
        ...(c.id === undefined ? {} : { id: c.id }),
        type: "function",
        function: { name: c.name ?? "", arguments: c.arguments }
      })
    )
    const content = p.text ?? (p.opening === "empty" && calls.length === 0 ? "" : null)
    const textLogprobs = p.logprobs === undefined || p.text === undefined ? null : [...p.logprobs]
    const refusalLogprobs = p.refusalLogprobs === undefined || p.refusal === undefined ? null : [...p.refusalLogprobs]
    return {
      index,
      message: {
        role: p.role ?? "assistant",
        content,
        refusal: p.refusal ?? null,
        ...(p.reasoning === undefined ? {} : { reasoning: p.reasoning }),
        ...(p.reasoningContent === undefined ? {} : { reasoning_content: p.reasoningContent }),
        ...(calls.length === 0 ? {} : { tool_calls: calls })
      },
      logprobs:
        textLogprobs === null && refusalLogprobs === null ? null : { content: textLogprobs, refusal: refusalLogprobs },
      finish_reason: p.finish,
      ...(p.stop === undefined ? {} : { stop_reason: p.stop }),
      ...(p.tokenIds === undefined ? {} : { token_ids: [...p.tokenIds] })
    }
  }),
  usage: usage ?? { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
  ...(promptTokenIds === undefined ? {} : { prompt_token_ids: [...promptTokenIds] })
})

const usage = FastCheck.option(
  FastCheck.record({
    prompt_tokens: FastCheck.nat(),
    completion_tokens: FastCheck.nat(),
    total_tokens: FastCheck.nat()
  }),
  { nil: undefined }
)

/** How the choices' streams become chunks. */
const streamShape = FastCheck.record({
  /** Each pick takes the next chunk choice of a choice that has one left. */
  picks: FastCheck.array(FastCheck.nat(2), { maxLength: 60 }),
  /** Whether a chunk choice joins the chunk before it (when that chunk has none of its choice yet). */
  together: FastCheck.array(FastCheck.boolean(), { maxLength: 60 }),
  /** The prompt's token ids, on the first chunk. */
  promptTokenIds: FastCheck.option(FastCheck.array(FastCheck.nat(300), { maxLength: 4 }), { nil: undefined }),
  /** Whether every chunk before the usage chunk says `usage: null` and `prompt_token_ids: null` (OpenAI, vLLM). */
  nulls: FastCheck.boolean(),
  /** How many chunks the broken-off stream keeps (modulo their number, plus one). */
  kept: FastCheck.nat()
})

/** The chunks of one stream, joined. */
const joined = (chunks: ReadonlyArray<ChatCompletionChunk>) => {
  const join = new ChunkJoin()
  for (const chunk of chunks) join.add(chunk)
  return join
}

describe("ChunkJoin", () => {
  it("joins a completion's chunks, however they are cut and interleaved, back into the completion", () => {
    FastCheck.assert(
      FastCheck.property(
        FastCheck.array(plan, { minLength: 1, maxLength: 3 }),
        usage,
        streamShape,
        (plans, usage, shape) => {
          const order = interleave(
            plans.map((p, index) => choiceChunks(index, p)),
            shape.picks
          )
          const base = { id: "chatcmpl-1", object: "chat.completion.chunk" as const, created: 7, model: "m" }
          const chunks: Array<ChatCompletionChunk> = []
          order.forEach((choice, i) => {
            const last = chunks[chunks.length - 1]
            if (
              shape.together[i] === true &&
              last !== undefined &&
              last.choices.every((c) => c.index !== choice.index)
            ) {
              chunks[chunks.length - 1] = { ...last, choices: [...last.choices, choice] }
              return
            }
            const first = chunks.length === 0 && shape.promptTokenIds !== undefined
            const nulls = shape.nulls ? { usage: null, prompt_token_ids: null } : {}
            chunks.push({
              ...base,
              ...nulls,
              ...(first ? { prompt_token_ids: shape.promptTokenIds } : {}),
              choices: [choice]
            })
          })
          if (usage !== undefined) chunks.push({ ...base, choices: [], usage })
          const join = joined(chunks)
          expect(join.completion()).toStrictEqual(completionOf(plans, usage, shape.promptTokenIds))
          expect(join.usage).toStrictEqual(usage)

          // Broken off: the chunks so far join into a valid completion, with no finish reason for a choice whose
          // last chunk has not come, and no usage before the usage chunk.
          const kept = chunks.slice(0, shape.kept % (chunks.length + 1))
          const partial = joined(kept)
          const completion = partial.completion()
          if (kept.length === 0) {
            expect(completion).toBeUndefined()
            return
          }
          expect(Schema.is(ChatCompletionSchema)(completion)).toBe(true)
          const finished = new Map(
            kept.flatMap((chunk) =>
              chunk.choices.flatMap((c) => (c.finish_reason == null ? [] : [[c.index, c.finish_reason]]))
            )
          )
          expect(completion?.choices.map((c) => c.finish_reason)).toStrictEqual(
            completion?.choices.map((c) => finished.get(c.index) ?? null)
          )
          const usageCame = kept.length === chunks.length && usage !== undefined
          expect(partial.usage).toStrictEqual(usageCame ? usage : undefined)
        }
      ),
      { numRuns: 300 }
    )
  })

  it("is undefined before the first chunk", () => {
    expect(new ChunkJoin().completion()).toBeUndefined()
  })
})
