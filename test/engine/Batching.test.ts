/**
 * Batched decoding (issue 26): completions in flight on the decoding scheduler decode together, one forward
 * pass per step over every sequence's row (and the pieces of prompts still running), and each completion is the
 * one it would be decoded alone, bit for bit: choices, logprobs, token ids, prompt logprobs, streamed chunks,
 * with `n`, seeds, constraints, tools, stops and the prefix cache, also when the decoding thread runs part of
 * each step. `Policy.extendMany` leaves each state as `extend` does.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type { ChatCompletionChunk, ChatCompletionRequest } from "../../src/api/ChatCompletion.js"
import { PrefixCache } from "../../src/local/engine/PrefixCache.js"
import { DecodeThread, decodeThread, sharedFloat32 } from "../../src/local/engine/policy/DecodeThread.js"
import { Policy } from "../../src/local/engine/policy/Policy.js"
import { DEFAULT_POLICY_CONFIG } from "../../src/local/engine/policy/PolicyConfig.js"
import { complete, completeEffect, completeStream, prepare } from "../../src/local/engine/Sampler.js"
import { decoding } from "../../src/local/engine/Scheduler.js"
import { batching, STEP_MS } from "../../src/local/engine/sampler/Batcher.js"

const policy = Policy.create({ ...DEFAULT_POLICY_CONFIG, contextLength: 2048 }, { seed: 7 })

const tools: ChatCompletionRequest["tools"] = [
  {
    type: "function",
    function: {
      name: "lookup",
      parameters: { type: "object", required: ["item"], properties: { item: { type: "string", enum: ["pen", "cup"] } } }
    }
  }
]

/** A mix of requests: plain, n > 1, logprobs, stops, a JSON schema, tools, prompt logprobs, a long prompt. */
const requests = (seed: number): Array<ChatCompletionRequest> => [
  { messages: [{ role: "user", content: "hello" }], seed, max_tokens: 24, ignore_eos: true },
  { messages: [{ role: "user", content: "two" }], seed, n: 3, max_tokens: 16, logprobs: true, top_logprobs: 3 },
  { messages: [{ role: "user", content: "stop" }], seed, max_tokens: 40, stop: ["e", "a"], temperature: 1.5 },
  {
    messages: [{ role: "user", content: "json" }],
    seed,
    max_tokens: 60,
    response_format: {
      type: "json_schema",
      json_schema: {
        name: "x",
        schema: { type: "object", required: ["a", "b"], properties: { a: { type: "integer" }, b: { type: "boolean" } } }
      }
    }
  },
  {
    messages: [{ role: "user", content: "which item?" }],
    seed,
    n: 2,
    tools,
    tool_choice: "required",
    max_tokens: 100,
    return_token_ids: true
  },
  { messages: [{ role: "user", content: "prompt logprobs" }], seed, max_tokens: 5, prompt_logprobs: 2 },
  {
    messages: [{ role: "user", content: `${seed} `.padEnd(700, "abc def ") }],
    seed,
    max_tokens: 12,
    top_k: 5,
    top_p: 0.9,
    frequency_penalty: 0.5
  },
  { messages: [{ role: "user", content: "greedy" }], seed, max_tokens: 20, temperature: 0, min_tokens: 4 }
]

/** Call ids are random; everything else is compared. */
const idless = (value: unknown) => JSON.stringify(value).replace(/call_[0-9a-f]+/g, "call")

/** The chunks of a stream pulled on the decoding scheduler (as the server's `chunkStream` does), pauses dropped. */
const streamOnScheduler = (chunks: Generator<ChatCompletionChunk | undefined>) =>
  new Promise<Array<ChatCompletionChunk>>((resolve, reject) => {
    const out: Array<ChatCompletionChunk> = []
    decoding.add({
      step: () => {
        const next = chunks.next()
        if (next.done === true) {
          resolve(out)
          return true
        }
        if (next.value !== undefined) out.push(next.value)
        return false
      },
      fail: reject
    })
  })

describe("batched decoding", () => {
  it("Policy.extendMany leaves each state as extend and advance do, bit for bit", () => {
    const a = Array.from({ length: 90 }, (_, i) => 32 + ((i * 11) % 90))
    const b = Array.from({ length: 30 }, (_, i) => 40 + ((i * 3) % 50))
    const alone = [policy.prefill(a.slice(0, 40)), policy.prefill(b.slice(0, 1)), policy.prefill(a.slice(0, 7))]
    const together = alone.map((s) => policy.fork(s))
    const pieces = [a.slice(40, 90), b.slice(1, 2), [a[7]!]]
    policy.extend(alone[0]!, pieces[0]!)
    policy.advance(alone[1]!, pieces[1]![0]!)
    policy.advance(alone[2]!, pieces[2]![0]!)
    policy.extendMany(together, pieces)
    const V = policy.vocabSize
    const batched = policy.logitsMany(together, new Float32Array(3 * V))
    alone.forEach((state, i) => {
      expect(together[i]!.length).toBe(state.length)
      expect(Array.from(batched.subarray(i * V, (i + 1) * V))).toEqual(Array.from(policy.logits(state)))
    })
  })

  it.live("concurrent completions on the scheduler decode in shared steps and equal each decoded alone", () =>
    Effect.gen(function* () {
      const all = [...requests(1), ...requests(2), ...requests(3)]
      const options = (i: number) => ({ modelName: "m", now: 0, requestId: `r${i}` })
      const alone = all.map((r, i) => complete(policy, r, options(i)))
      const before = { ...batching.stats }
      // Steps of the whole budget, however busy the machine (the budget otherwise follows the steps' wall time).
      batching.stepMs = Number.POSITIVE_INFINITY
      const together = yield* Effect.all(
        all.map((r, i) => completeEffect(policy, r, options(i))),
        { concurrency: "unbounded" }
      ).pipe(Effect.ensuring(Effect.sync(() => (batching.stepMs = STEP_MS))))
      expect(idless(together)).toBe(idless(alone))
      // They were batched: steps held several completions, fewer steps than completions' tokens.
      expect(batching.stats.largest).toBeGreaterThan(8)
      const steps = batching.stats.steps - before.steps
      const jobs = batching.stats.jobs - before.jobs
      expect(jobs / steps).toBeGreaterThan(4)
    })
  )

  // The decoding thread is on where the machine has a second core; elsewhere its test is skipped (and reported so),
  // with a warning naming why.
  const noThread = !decodeThread.enabled
  if (noThread) console.warn("SKIPPED the decoding thread's test in Batching.test.ts: one core, no decoding thread")

  it.live.skipIf(noThread)(
    "steps shared with the decoding thread (it runs some of every step) equal each completion alone",
    () =>
      Effect.gen(function* () {
        const thread = decodeThread.get()
        if (thread === undefined) throw new Error("the decoding thread is enabled, yet none started")
        expect(yield* Effect.promise(() => thread.whenReady())).toBe(true)
        const all = [...requests(10), ...requests(11)]
        const options = (i: number) => ({ modelName: "m", now: 0, requestId: `t${i}` })
        const alone = all.map((r, i) => complete(policy, r, options(i)))
        const before = { rows: thread.threadRows, shared: thread.stats.shared }
        thread.waitForThread = true
        batching.stepMs = Number.POSITIVE_INFINITY
        const together = yield* Effect.all(
          all.map((r, i) => completeEffect(policy, r, options(i))),
          { concurrency: "unbounded" }
        ).pipe(
          Effect.ensuring(
            Effect.sync(() => {
              thread.waitForThread = false
              batching.stepMs = STEP_MS
            })
          )
        )
        expect(idless(together)).toBe(idless(alone))
        expect(thread.stats.shared - before.shared).toBeGreaterThan(10)
        expect(thread.threadRows - before.rows).toBeGreaterThan(100)
        // The next-token logits of many states: some rows by the thread, the same bits as on this thread alone.
        const states = Array.from({ length: 40 }, (_, i) => policy.prefill([65 + (i % 26), 66, 67 + (i % 5)]))
        const V = policy.vocabSize
        const shared = sharedFloat32(40 * V)
        const rowsBefore = thread.threadRows
        thread.waitForThread = true
        policy.logitsMany(states, shared)
        thread.waitForThread = false
        expect(thread.threadRows).toBeGreaterThan(rowsBefore)
        decodeThread.enabled = false
        const local = policy.logitsMany(states, new Float32Array(40 * V))
        decodeThread.enabled = true
        expect(Array.from(shared)).toEqual(Array.from(local))
      })
  )

  it.live.skipIf(noThread)(
    "shares steps of each size as measured faster at that size: small ones alone, large ones shared",
    () =>
      Effect.gen(function* () {
        const thread = new DecodeThread()
        yield* Effect.addFinalizer(() => Effect.promise(() => thread.close()))
        // As a server measures it: sharing costs a fixed wake-up, a loss on small steps and a gain on large ones.
        const small = 50_000
        const large = 5_000_000
        for (let i = 0; i < 20; i++) {
          thread.record("alone", small, 0.02)
          thread.record("shared", small, 0.045)
          thread.record("alone", large, 2)
          thread.record("shared", large, 1.4)
        }
        expect(thread.ratesOf(small).shared).toBeGreaterThan(thread.ratesOf(small).alone)
        expect(thread.ratesOf(large).shared).toBeLessThan(thread.ratesOf(large).alone)
        // Fifteen decisions each (the sixteenth tries the other way, to see a change).
        const smallOnes = Array.from({ length: 15 }, () => thread.worthSharing(small))
        const largeOnes = Array.from({ length: 15 }, () => thread.worthSharing(large))
        expect(smallOnes.every((share) => !share)).toBe(true)
        expect(largeOnes.every((share) => share)).toBe(true)
        // A size never measured is tried shared first.
        expect(thread.worthSharing(500_000_000)).toBe(true)
      }).pipe(Effect.scoped)
  )

  it.live("streams and whole responses, with a prefix cache, batched together equal each alone", () =>
    Effect.gen(function* () {
      const all = [...requests(4), ...requests(5)]
      const shared = new PrefixCache()
      const options = (i: number) => ({ modelName: "m", now: 0, requestId: `s${i}`, promptStates: shared })
      const plain = (i: number) => ({ modelName: "m", now: 0, requestId: `s${i}` })
      const streamed = all.filter((r) => r.prompt_logprobs == null).map((r) => ({ ...r, stream: true }))
      const aloneWhole = all.map((r, i) => complete(policy, r, plain(i)))
      const aloneStreams = streamed.map((r, i) => [...completeStream(policy, r, plain(i))])
      // The whole responses first (their prompts kept by the cache), then the streams (from cached prompts).
      const whole = yield* Effect.all(
        all.map((r, i) => completeEffect(policy, r, options(i))),
        { concurrency: "unbounded" }
      )
      // Every stream's prompt is one the whole responses ran: each starts from the cache (the whole responses, in
      // flight together, may share prompts among themselves too).
      const hitsBefore = shared.hits
      const streams = yield* Effect.promise(() =>
        Promise.all(streamed.map((r, i) => streamOnScheduler(prepare(policy, r, options(i)).stream())))
      )
      expect(idless(whole)).toBe(idless(aloneWhole))
      expect(idless(streams)).toBe(idless(aloneStreams))
      expect(shared.hits - hitsBefore).toBe(streamed.length)
    })
  )

  it.live("with batching off, completions on the scheduler are the same", () =>
    Effect.gen(function* () {
      const all = requests(6)
      const options = (i: number) => ({ modelName: "m", now: 0, requestId: `u${i}` })
      batching.enabled = false
      const before = batching.stats.steps
      const unbatched = yield* Effect.all(
        all.map((r, i) => completeEffect(policy, r, options(i))),
        { concurrency: "unbounded" }
      ).pipe(Effect.ensuring(Effect.sync(() => (batching.enabled = true))))
      expect(batching.stats.steps).toBe(before)
      const batched = yield* Effect.all(
        all.map((r, i) => completeEffect(policy, r, options(i))),
        { concurrency: "unbounded" }
      )
      expect(idless(batched)).toBe(idless(unbatched))
    })
  )

  it.live("complete inside a step of the scheduler runs to its end alone (it never waits for the batcher)", () =>
    Effect.gen(function* () {
      const r = requests(9)[1]!
      const inside = yield* Effect.promise(
        () =>
          new Promise<unknown>((resolve, reject) =>
            decoding.add({
              step: () => {
                resolve(complete(policy, r, { modelName: "m", now: 0, requestId: "in" }))
                return true
              },
              fail: reject
            })
          )
      )
      expect(idless(inside)).toBe(idless(complete(policy, r, { modelName: "m", now: 0, requestId: "in" })))
    })
  )

  it.live("an interrupted completion leaves the batch; the others finish", () =>
    Effect.gen(function* () {
      const long = {
        messages: [{ role: "user" as const, content: "long" }],
        max_tokens: 1000,
        ignore_eos: true,
        seed: 1
      }
      const before = batching.stats.steps
      const fiber = yield* Effect.fork(completeEffect(policy, long, { modelName: "m" }))
      yield* Effect.sleep("30 millis")
      expect(batching.stats.steps).toBeGreaterThan(before)
      yield* Fiber.interrupt(fiber)
      // At most one more step after its task is dropped, then no more.
      yield* Effect.sleep("10 millis")
      const after = batching.stats.steps
      yield* Effect.sleep("20 millis")
      expect(batching.stats.steps).toBe(after)
      expect(batching.waiting).toBe(0)
      const done = yield* Effect.all(
        requests(8).map((r) => completeEffect(policy, r, { modelName: "m" })),
        { concurrency: "unbounded" }
      )
      expect(done).toHaveLength(8)
      yield* Effect.sleep("10 millis")
      expect(batching.waiting).toBe(0)
    })
  )
})
