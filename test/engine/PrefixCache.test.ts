/**
 * The prefix cache: completions from cached prompt states are the completions without it, bit for bit
 * (choices, logprobs, token ids), for a repeated prompt, a prompt that continues an earlier one (the next
 * turn of a conversation), and one that shares only part of it; and the cache stays within its bound. A long
 * prompt runs a chunk at a time, pausing between chunks (so the server's event loop gets turns), into the same
 * state, bit for bit, as one prefill.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { ChatCompletion, ChatCompletionRequest } from "../../src/api/ChatCompletion.js"
import {
  DEFAULT_CHUNK,
  MIN_SHARED_TOKENS,
  PrefixCache,
  PromptBudget,
  runPrompt
} from "../../src/local/engine/PrefixCache.js"
import { Policy } from "../../src/local/engine/policy/Policy.js"
import { DEFAULT_POLICY_CONFIG } from "../../src/local/engine/policy/PolicyConfig.js"
import { complete, completeEffect, completeStream, prepare } from "../../src/local/engine/Sampler.js"

const policy = Policy.create({ ...DEFAULT_POLICY_CONFIG, contextLength: 2048 }, { seed: 3 })

const tools: ChatCompletionRequest["tools"] = [
  {
    type: "function",
    function: {
      name: "weather",
      parameters: {
        type: "object",
        required: ["city"],
        properties: { city: { type: "string", enum: ["Oslo", "Lima"] } }
      }
    }
  }
]

const request = (messages: ChatCompletionRequest["messages"], seed: number): ChatCompletionRequest => ({
  messages,
  tools,
  tool_choice: "required",
  n: 3,
  seed,
  logprobs: true,
  return_token_ids: true,
  max_completion_tokens: 100
})

/**
 * The test policy with its `release` and `snapshot` counted: the cache releases what it drops (a released state is
 * emptied) and keeps snapshots; a job releases its choices' states.
 */
const watchedPolicy = () => {
  const counts = { released: 0, snapshots: 0 }
  const model: typeof policy = Object.create(policy, {
    release: {
      value: (state: Parameters<typeof policy.release>[0]) => {
        counts.released += 1
        policy.release(state)
        expect(state.length).toBe(0)
      }
    },
    snapshot: {
      value: (state: Parameters<typeof policy.snapshot>[0]) => {
        counts.snapshots += 1
        return policy.snapshot(state)
      }
    }
  })
  return { model, counts }
}

describe("PrefixCache", () => {
  it("gives the completions an uncached prefill gives, reusing the states of earlier prompts", () => {
    const cache = new PrefixCache()
    const first: ChatCompletionRequest["messages"] = [{ role: "user", content: "What is the weather in Lima?" }]
    const cached = (r: ChatCompletionRequest) => complete(policy, r, { modelName: "m", promptStates: cache, now: 0 })
    const plain = (r: ChatCompletionRequest) => complete(policy, r, { modelName: "m", now: 0 })
    const same = (r: ChatCompletionRequest) => {
      const a = cached(r)
      const b = plain(r)
      // Call ids are random; everything else is the same.
      const idless = (c: typeof a) => JSON.stringify(c.choices).replace(/call_[0-9a-f]+/g, "call")
      expect(idless(a)).toBe(idless(b))
      expect(a.usage).toEqual(b.usage)
      return a
    }

    const one = same(request(first, 1))
    expect([cache.hits, cache.misses]).toEqual([0, 1])
    // The same prompt again (another rollout of the group): from the cache, nothing prefilled.
    same(request(first, 2))
    expect(cache.hits).toBe(1)
    expect(cache.savedTokens).toBe(one.usage.prompt_tokens)
    // The next turn: the first prompt, the call, its result.
    const call = one.choices[0]!.message.tool_calls![0]!
    const next = same(
      request(
        [
          ...first,
          {
            role: "assistant",
            content: null,
            tool_calls: [{ id: call.id!, type: "function", function: call.function }]
          },
          { role: "tool", tool_call_id: call.id!, content: "foggy" }
        ],
        3
      )
    )
    expect(cache.hits).toBe(2)
    expect(cache.savedTokens).toBe(2 * one.usage.prompt_tokens)
    expect(next.usage.prompt_tokens).toBeGreaterThan(one.usage.prompt_tokens)
    // A prompt that shares only the first part of the others (the tools block and the start of the question): no
    // entry is a prefix of it, and that part is copied from the longest match, the rest run from there.
    const saved = cache.savedTokens
    same(request([{ role: "user", content: "What is the weather in Oslo?" }], 4))
    expect([cache.hits, cache.partialHits, cache.misses]).toEqual([2, 1, 1])
    expect(cache.savedTokens - saved).toBeGreaterThanOrEqual(MIN_SHARED_TOKENS)
    expect(cache.savedTokens - saved).toBeLessThan(one.usage.prompt_tokens)
  })

  it("reuses the shared first part of an agent's prompts (system prompt, tools), bit for bit", () => {
    const cache = new PrefixCache()
    const system = { role: "system" as const, content: "You answer questions about the weather, with a tool." }
    const questions = ["Is it raining in Lima?", "How cold is Oslo tonight?", "Wind in Lima?", "Is it"]
    for (const [i, question] of questions.entries()) {
      const r = request([system, { role: "user", content: question }], 10 + i)
      const a = complete(policy, r, { modelName: "m", promptStates: cache, now: 0 })
      const b = complete(policy, r, { modelName: "m", now: 0 })
      const idless = (c: typeof a) => JSON.stringify(c.choices).replace(/call_[0-9a-f]+/g, "call")
      expect(idless(a)).toBe(idless(b))
    }
    // The first prompt from nothing, the others from its first part (the last one is shorter than an earlier one).
    expect([cache.hits, cache.partialHits, cache.misses]).toEqual([0, 3, 1])
  })

  it.live("prompts in flight together share their first part: the later wait for the first's state, bit for bit", () =>
    Effect.gen(function* () {
      const cache = new PrefixCache()
      const system = { role: "system" as const, content: "You answer questions about the weather, with a tool." }
      const questions = [
        "Is it raining in Lima?",
        "How cold is Oslo tonight?",
        "Wind in Lima?",
        "Is it raining in Lima?"
      ]
      const requests = questions.map((question, i) => request([system, { role: "user", content: question }], 20 + i))
      const options = (i: number) => ({ modelName: "m", now: 0, requestId: `f${i}` })
      const alone = requests.map((r, i) => complete(policy, r, options(i)))
      // All four at once, as a step's groups start: none is kept before the others begin.
      const together = yield* Effect.all(
        requests.map((r, i) => completeEffect(policy, r, { ...options(i), promptStates: cache })),
        { concurrency: "unbounded" }
      )
      const idless = (cs: ReadonlyArray<ChatCompletion>) =>
        JSON.stringify(cs.map((c) => c.choices)).replace(/call_[0-9a-f]+/g, "call")
      expect(idless(together)).toBe(idless(alone))
      // The first from nothing; the other three from its state (the last, the same prompt, from all but its last token).
      expect([cache.hits, cache.partialHits, cache.misses]).toEqual([0, 3, 1])
    })
  )

  it("forkPrefix: the first tokens of a state, extended by the rest, are the state of the whole prefill", () => {
    const whole = policy.prefill(prompt.slice(0, 300))
    for (const length of [1, 17, 299]) {
      const part = policy.forkPrefix(whole, length)
      expect(part.length).toBe(length)
      policy.extend(part, prompt.slice(length, 300))
      expect(logitsOf(part)).toEqual(logitsOf(whole))
    }
    // Its hidden state is not kept: logits read before an extend are NaN, not another token's.
    expect(logitsOf(policy.forkPrefix(whole, 10)).every(Number.isNaN)).toBe(true)
    expect(() => policy.forkPrefix(whole, 0)).toThrow(RangeError)
    expect(() => policy.forkPrefix(whole, 301)).toThrow(RangeError)
  })

  it("snapshot: a copy with no room to grow, whose forks and prefixes are the original's", () => {
    const whole = policy.prefill(prompt.slice(0, 72))
    const kept = policy.snapshot(whole)
    expect(kept.length).toBe(72)
    expect(logitsOf(kept)).toEqual(logitsOf(whole))
    // A fork keeps 16 rows of room; a snapshot only what its blocks hold past the rows (here: half a fork's memory).
    expect(kept.capacity).toBeLessThan(policy.fork(whole).capacity)
    expect(kept.capacity).toBeGreaterThanOrEqual(72)
    for (const from of [policy.fork(kept), policy.forkPrefix(kept, 40)]) {
      policy.extend(from, prompt.slice(from.length, 120))
      const direct = policy.prefill(prompt.slice(0, 120))
      expect(logitsOf(from)).toEqual(logitsOf(direct))
    }
  })

  it("keeps at most its bound of prompt tokens, dropping the least recently used", () => {
    const cache = new PrefixCache(300)
    const ask = (content: string) =>
      complete(
        policy,
        { messages: [{ role: "user", content }], max_completion_tokens: 1, seed: 0 },
        { modelName: "m", promptStates: cache }
      )
    const a = ask("a".repeat(100))
    ask("b".repeat(100))
    ask("a".repeat(100)) // a is used again: b is now the oldest
    ask("c".repeat(100))
    expect(cache.tokens).toBeLessThanOrEqual(300)
    expect(cache.tokens).toBe(2 * a.usage.prompt_tokens)
    const hits = cache.hits
    ask("a".repeat(100))
    expect(cache.hits).toBe(hits + 1)
    ask("b".repeat(100))
    expect(cache.hits).toBe(hits + 1)
    // A prompt longer than the whole bound is prefilled and not kept.
    ask("d".repeat(400))
    expect(cache.tokens).toBeLessThanOrEqual(300)
  })

  it("gives an evicted state and a finished completion's states back to the model at once", () => {
    // The policy, with its `release` watched: the cache calls it for what it drops, a job for its choices' states.
    const { model, counts } = watchedPolicy()
    const cache = new PrefixCache(300)
    const ask = (content: string) => {
      const before = counts.released
      complete(
        model,
        { messages: [{ role: "user", content }], max_completion_tokens: 1, seed: 0, n: 2 },
        { modelName: "m", promptStates: cache }
      )
      return counts.released - before
    }
    // Each completion gives back its two choices' states; a prompt that pushes the cache past its bound, the
    // state it drops too.
    expect(ask("a".repeat(100))).toBe(2)
    expect(ask("b".repeat(100))).toBe(2)
    expect(ask("c".repeat(100))).toBe(3)
    expect(cache.tokens).toBeLessThanOrEqual(300)
  })

  it("shares a bound with other caches: the least recently used entry of any goes first, its state given back", () => {
    // Two caches (say, two checkpoints' policies) under one budget of 300 prompt tokens, each bounded at 1,000.
    const { model: watched, counts } = watchedPolicy()
    const budget = new PromptBudget(300)
    const older = new PrefixCache(1_000, budget)
    const newer = new PrefixCache(1_000, budget)
    const ask = (cache: PrefixCache, content: string) =>
      complete(
        watched,
        { messages: [{ role: "user", content }], max_completion_tokens: 1, seed: 0 },
        { modelName: "m", promptStates: cache }
      )
    const a = ask(older, "a".repeat(100))
    // What a cache keeps is a snapshot (no room to grow), not a fork.
    expect(counts.snapshots).toBe(1)
    ask(older, "b".repeat(100))
    expect(budget.tokens).toBe(older.tokens)
    ask(older, "a".repeat(100)) // a is used again: b is now the oldest of both caches
    const before = counts.released
    ask(newer, "c".repeat(100))
    // The newer cache's prompt pushed the pair past 300: the older cache's b went (its state given back), a stayed.
    expect(counts.released - before).toBe(2) // b's kept state, and the finished completion's choice
    expect([older.size, newer.size]).toEqual([1, 1])
    expect(budget.tokens).toBe(2 * a.usage.prompt_tokens)
    expect(budget.tokens).toBe(older.tokens + newer.tokens)
    const hits = older.hits
    ask(older, "a".repeat(100))
    expect(older.hits).toBe(hits + 1)
    ask(older, "b".repeat(100))
    expect(older.hits).toBe(hits + 1)
    // Now c is the oldest: the older cache's b evicted it, from the other cache.
    expect([older.size, newer.size]).toEqual([2, 0])
    expect(budget.tokens).toBeLessThanOrEqual(300)
    // Evicted and kept again, the cached completions are still an uncached prefill's.
    const plain = complete(
      policy,
      { messages: [{ role: "user", content: "c".repeat(100) }], max_completion_tokens: 4, seed: 5 },
      { modelName: "m" }
    )
    const again = complete(
      watched,
      { messages: [{ role: "user", content: "c".repeat(100) }], max_completion_tokens: 4, seed: 5 },
      { modelName: "m", promptStates: newer }
    )
    expect(again.choices).toEqual(plain.choices)
    // A cache cleared (its model no longer served) gives every state back and leaves the budget.
    const [kept, entries] = [counts.released, older.size]
    expect(entries).toBeGreaterThan(0)
    older.clear()
    expect(counts.released - kept).toBe(entries)
    expect(older.size).toBe(0)
    expect(budget.tokens).toBe(newer.tokens)
  })

  /** Runs a generator to its end; its value and the number of pauses on the way. */
  const drive = <A>(steps: Generator<void, A>): { readonly value: A; readonly pauses: number } => {
    let pauses = 0
    for (;;) {
      const next = steps.next()
      if (next.done === true) return { value: next.value, pauses }
      pauses += 1
    }
  }
  const prompt = Array.from({ length: 1500 }, (_, i) => 32 + ((i * 7) % 90))
  const logitsOf = (state: ReturnType<typeof policy.prefill>) =>
    Array.from(policy.logits(state, new Float32Array(policy.vocabSize)))

  it("runs a long prompt a chunk at a time, pausing between chunks, into the state of one prefill", () => {
    const whole = policy.prefill(prompt)
    const { value: chunked, pauses } = drive(runPrompt(policy, null, prompt))
    expect(chunked.length).toBe(prompt.length)
    expect(logitsOf(chunked)).toEqual(logitsOf(whole))
    // 64 tokens a chunk at the start, fewer as each token attends to more: more pauses than 1500 / 64.
    expect(DEFAULT_CHUNK(0)).toBe(64)
    expect(DEFAULT_CHUNK(1400)).toBeLessThan(DEFAULT_CHUNK(0))
    expect(pauses).toBeGreaterThan(Math.ceil(prompt.length / 64))
    // A short prompt is one chunk: no pause.
    expect(drive(runPrompt(policy, null, prompt.slice(0, 40))).pauses).toBe(0)
  })

  it("from a cached prefix, runs only the rest in chunks, and keeps the state once complete", () => {
    const cache = new PrefixCache()
    const first = drive(cache.prefillSteps(policy, prompt.slice(0, 1000)))
    const again = drive(cache.prefillSteps(policy, prompt))
    expect([cache.hits, cache.misses]).toEqual([1, 1])
    expect(again.pauses).toBeLessThan(first.pauses)
    expect(again.value.length).toBe(prompt.length)
    expect(logitsOf(again.value)).toEqual(logitsOf(policy.prefill(prompt)))
    // A prefill dropped half way (a client gone) keeps nothing.
    const dropped = cache.prefillSteps(policy, [...prompt, 33, 34, 35].reverse())
    dropped.next()
    dropped.return(undefined as never)
    expect(cache.tokens).toBe(1000 + prompt.length)
  })

  it("a streamed completion of a long prompt pauses before its first chunk; the chunks are those without pauses", () => {
    const req: ChatCompletionRequest = {
      messages: [{ role: "user", content: "x".repeat(1200) }],
      max_completion_tokens: 4,
      seed: 5,
      stream: true
    }
    const options = { modelName: "m", now: 0, requestId: "r" }
    const pulled = [...prepare(policy, req, options).stream()]
    const firstChunk = pulled.findIndex((c) => c !== undefined)
    expect(firstChunk).toBeGreaterThan(10)
    expect(pulled.slice(firstChunk).every((c) => c !== undefined)).toBe(true)
    expect(pulled.filter((c) => c !== undefined)).toEqual([...completeStream(policy, req, options)])
    // The same content as the whole response.
    const text = (
      pulled.filter((c) => c !== undefined) as Array<{ choices: ReadonlyArray<{ delta: { content?: string | null } }> }>
    )
      .flatMap((c) => c.choices.map((x) => x.delta.content ?? ""))
      .join("")
    expect(text).toBe(complete(policy, { ...req, stream: false }, options).choices[0]!.message.content)
  })
})
