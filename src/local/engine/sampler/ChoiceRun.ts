/**
 * The per-choice decoding step of the local engine's sampler: a {@link ChoiceRun} turns the model's next-token
 * logits into one sampled token of one choice (hard and soft masks, bias, penalties, the draw, logprobs, stops)
 * and keeps the choice's output, text and finish. See `Sampler.ts` for the conventions it follows.
 *
 * @since 0.1.0
 */
import type { TokenLogprob, TopLogprob } from "../../../api/ChatCompletion.js"
import { Matcher } from "../constraint/Automaton.js"
import type { DecodeState, LanguageModel } from "../LanguageModel.js"
import { Rng } from "../Random.js"
import { EOS, IM_END, isSpecial, PAD, STOP_IDS, tokenBytes, tokenString } from "../Tokenizer.js"
import { completeEnd, maskNext, Utf8State } from "../Utf8.js"
import type { Plan } from "./RequestPlan.js"

/** Temperatures below this are greedy. */
const GREEDY_EPSILON = 1e-5
/** The logprob written for a token of probability zero. */
const MIN_LOGPROB = -9999

/** Buffers shared by the choices of one request (they step one at a time). */
export class Workspace {
  readonly raw: Float32Array
  readonly work: Float64Array
  readonly probs: Float64Array
  readonly order: Int32Array
  readonly sorted: Float64Array
  readonly ok: Uint8Array
  readonly soft: Uint8Array

  constructor(vocab: number) {
    this.raw = new Float32Array(vocab)
    this.work = new Float64Array(vocab)
    this.probs = new Float64Array(vocab)
    this.order = new Int32Array(vocab)
    this.sorted = new Float64Array(vocab)
    this.ok = new Uint8Array(vocab)
    this.soft = new Uint8Array(vocab)
  }
}

/** One sampled token, as a choice's step reports it. */
export interface Sampled {
  readonly id: number
  readonly logprob: TokenLogprob | null
}

/** Whether a token id ends a turn (`<|eos|>`, `<|im_end|>`). */
export const isStopId = (id: number): boolean => id === EOS || id === IM_END

/** The log-sum-exp of logits. */
export const logSumExp = (logits: Float32Array): number => {
  let max = Number.NEGATIVE_INFINITY
  for (let i = 0; i < logits.length; i++) if (logits[i]! > max) max = logits[i]!
  if (max === Number.NEGATIVE_INFINITY) return max
  let sum = 0
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i]! - max)
  return max + Math.log(sum)
}

/** A logprob as written: finite, or {@link MIN_LOGPROB} for a token of probability zero. */
export const clampLogprob = (v: number): number => (Number.isFinite(v) ? v : MIN_LOGPROB)

/**
 * The `k` ids of the largest values, in descending order (lowest id first on ties), written into `order`.
 * Small `k` by insertion (no allocation), large `k` by sorting.
 */
export const topIds = (values: ArrayLike<number>, k: number, order: Int32Array): Int32Array => {
  const n = values.length
  const m = Math.min(k, n)
  if (m > 32) {
    for (let i = 0; i < n; i++) order[i] = i
    const all = order.subarray(0, n)
    all.sort((a, b) => values[b]! - values[a]! || a - b)
    return all.subarray(0, m)
  }
  let size = 0
  for (let i = 0; i < n; i++) {
    const v = values[i]!
    if (size === m && !(v > values[order[m - 1]!]!)) continue
    let j = size < m ? size++ : m - 1
    while (j > 0 && v > values[order[j - 1]!]!) {
      order[j] = order[j - 1]!
      j--
    }
    order[j] = i
  }
  return order.subarray(0, size)
}

/** The decoding of one choice. */
export class ChoiceRun<S extends DecodeState> {
  readonly output: Array<number> = []
  /** The bytes of the visible output text (before any cut). */
  readonly text: Array<number> = []
  readonly logprobs: Array<TokenLogprob> = []
  finished = false
  finishReason: "stop" | "length" = "length"
  stopReason: string | number | null = null
  /** Where the text ends (a stop string cuts it), once finished. */
  textEnd = 0
  /** Bytes of text already streamed. */
  streamed = 0
  /** The choice's decoding state: its prompt and every token sampled, but {@link pending}. */
  readonly state: S
  /**
   * The token sampled last and not yet consumed by the state (-1 when none): whoever steps the choice runs it
   * through the model (alone by `advance`, or as a row of a batched forward pass) before the next step.
   */
  pending = -1
  private readonly rng: Rng
  private readonly counts: Int32Array
  private readonly seen: Array<number> = []
  private readonly outSeen: Array<number> = []
  private readonly promptMark: Uint8Array
  private readonly matcher: Matcher | null
  /** Where the sampled bytes stand in UTF-8 (the matcher keeps a constrained output well-formed itself). */
  private readonly utf8 = new Utf8State()
  private lastSpecial = false

  constructor(
    private readonly model: LanguageModel<S>,
    private readonly plan: Plan,
    private readonly ws: Workspace,
    state: S,
    readonly index: number,
    promptMark: Uint8Array
  ) {
    this.state = state
    this.rng = new Rng(BigInt.asIntN(64, plan.seed + BigInt(index)))
    this.counts = new Int32Array(model.vocabSize)
    this.promptMark = promptMark
    for (let id = 0; id < promptMark.length; id++) if (promptMark[id] === 1) this.seen.push(id)
    this.matcher = plan.constraint === null ? null : new Matcher(plan.constraint)
  }

  /** Fill `ok` (hard masks) and `soft` (soft masks); false when no token is possible. */
  private masks(): boolean {
    const { ok, soft } = this.ws
    const plan = this.plan
    const vocab = ok.length
    const left = plan.maxTokens - this.output.length
    if (plan.allowed !== null) ok.set(plan.allowed)
    else ok.fill(1)
    if (PAD < vocab) ok[PAD] = 0
    const m = this.matcher
    if (m !== null) {
      const costs = m.costs()
      // Whether an allowed byte still leads to a complete output within the tokens left.
      let within = false
      for (let b = 0; b < 256 && b < vocab; b++) if (ok[b] === 1 && costs[b]! <= left) within = true
      const end = m.canEnd()
      // Out of budget (only where allowed_token_ids rule out the shortest way): keep to the constraint, making
      // progress towards a complete output; the choice ends with `length`, on a prefix of one.
      const limit = within || end ? left : Number.MAX_VALUE
      for (let b = 0; b < 256 && b < vocab; b++) if (!(costs[b]! <= limit)) ok[b] = 0
      // The end of turn where the output is complete (with ignore_eos: only where it cannot go on).
      const stops = end && (!plan.ignoreEos || !within)
      for (let id = 256; id < vocab; id++) if (!(stops && isStopId(id))) ok[id] = 0
    } else maskNext(this.utf8, ok, left)
    let anyOk = false
    for (let i = 0; i < vocab; i++) {
      if (ok[i] === 1) {
        anyOk = true
        break
      }
    }
    if (!anyOk) return false
    soft.fill(1)
    const out = this.output
    for (const word of plan.badWords) {
      const last = word.length - 1
      if (last > out.length) continue
      let match = true
      for (let j = 0; j < last; j++) {
        if (out[out.length - last + j] !== word[j]) {
          match = false
          break
        }
      }
      if (match && word[last]! < vocab) soft[word[last]!] = 0
    }
    if (out.length < plan.minTokens) {
      for (const id of STOP_IDS) if (id < vocab) soft[id] = 0
      for (const id of plan.stopTokenIds) if (id >= 0 && id < vocab) soft[id] = 0
    }
    let anyBoth = false
    for (let i = 0; i < vocab; i++) {
      if (ok[i] === 1 && soft[i] === 1) {
        anyBoth = true
        break
      }
    }
    if (anyBoth) for (let i = 0; i < vocab; i++) ok[i] = ok[i]! & soft[i]!
    return true
  }

  /** Choose the next token from the processed logits in `work` (masked entries are -Infinity). */
  private choose(): number {
    const { work, probs, order } = this.ws
    const plan = this.plan
    const vocab = work.length
    let best = -1
    let max = Number.NEGATIVE_INFINITY
    for (let i = 0; i < vocab; i++) {
      if (work[i]! > max) {
        max = work[i]!
        best = i
      }
    }
    if (best < 0) {
      // Every allowed token has a logit of -Infinity: take the first allowed one.
      const ok = this.ws.ok
      for (let i = 0; i < vocab; i++) if (ok[i] === 1) return i
      return 0
    }
    if (plan.temperature < GREEDY_EPSILON) return best
    let count = 0
    const inv = 1 / plan.temperature
    for (let i = 0; i < vocab; i++) {
      const p = work[i]! === Number.NEGATIVE_INFINITY ? 0 : Math.exp((work[i]! - max) * inv)
      // min_p: relative to the most likely token, whose unnormalised probability is 1.
      if (p > 0 && p >= plan.minP) {
        probs[i] = p
        order[count++] = i
      } else probs[i] = 0
    }
    if ((plan.topK > 0 && plan.topK < count) || plan.topP < 1) this.restrict(count)
    let total = 0
    for (let j = 0; j < count; j++) total += probs[order[j]!]!
    let u = this.rng.float() * total
    let last = order[0]!
    for (let j = 0; j < count; j++) {
      const id = order[j]!
      const p = probs[id]!
      if (p === 0) continue
      last = id
      u -= p
      if (u < 0) return id
    }
    return last
  }

  /**
   * Apply `top_k` then `top_p` to the `count` candidates in `order` (by id): the kept ones are the most
   * likely (lowest id first on ties); the others get probability 0. Sorts a copy of the values natively.
   */
  private restrict(count: number): void {
    const { probs, order, sorted } = this.ws
    const plan = this.plan
    const values = sorted.subarray(0, count)
    for (let j = 0; j < count; j++) values[j] = probs[order[j]!]!
    values.sort()
    // values ascending: the j-th most likely is values[count - 1 - j].
    let keep = plan.topK > 0 && plan.topK < count ? plan.topK : count
    if (plan.topP < 1) {
      let total = 0
      for (let j = 0; j < keep; j++) total += values[count - 1 - j]!
      let cum = 0
      let k = 0
      while (k < keep && cum < plan.topP * total) cum += values[count - 1 - k++]!
      keep = Math.max(1, k)
    }
    const threshold = values[count - keep]!
    let ties = 0
    for (let j = count - keep; j < count; j++) if (values[j] === threshold) ties++
    for (let j = 0; j < count; j++) {
      const id = order[j]!
      const p = probs[id]!
      if (p > threshold) continue
      if (p === threshold && ties > 0) ties--
      else probs[id] = 0
    }
  }

  private logprobEntry(id: number, logits: Float32Array, lse: number): TokenLogprob {
    const plan = this.plan
    const token = (t: number) => (plan.tokensAsIds ? `token_id:${t}` : tokenString(t))
    const top: Array<TopLogprob> = []
    if (plan.topLogprobs > 0) {
      for (const t of topIds(logits, plan.topLogprobs, this.ws.order)) {
        top.push({ token: token(t), logprob: clampLogprob(logits[t]! - lse), bytes: tokenBytes(t) })
      }
    }
    return { token: token(id), logprob: clampLogprob(logits[id]! - lse), bytes: tokenBytes(id), top_logprobs: top }
  }

  /** Append a token's contribution to the visible text. */
  private appendText(id: number): void {
    const plan = this.plan
    if (!isSpecial(id)) {
      if (id < 256) {
        if (this.lastSpecial && plan.spacesBetween && !plan.skipSpecial) this.text.push(0x20)
        this.lastSpecial = false
        this.text.push(id)
      }
      return
    }
    if (plan.skipSpecial) return
    if (plan.spacesBetween && this.text.length > 0) this.text.push(0x20)
    for (const b of tokenBytes(id)) this.text.push(b)
    this.lastSpecial = true
  }

  private finish(reason: "stop" | "length", stopReason: string | number | null, textEnd: number): void {
    this.finished = true
    this.finishReason = reason
    this.stopReason = stopReason
    // A character left open (a stop token id inside it, or the limit) is left out of the content.
    this.textEnd = completeEnd(this.text, textEnd)
  }

  /**
   * Why a choice ends at the token limit: `stop` when its constrained output is complete there (so a client
   * that parses it gets a valid value), unless `ignore_eos` was set and the output could have gone on; else
   * `length`.
   */
  private endReason(): "stop" | "length" {
    const m = this.matcher
    if (m === null || !m.canEnd()) return "length"
    return this.plan.ignoreEos && m.canContinue() ? "length" : "stop"
  }

  /**
   * Sample one token from the next-token logits of the state (given, or computed here); null when the choice
   * ended without one (no token was possible). The token is left {@link pending} unless the choice ended.
   */
  step(given?: Float32Array): Sampled | null {
    if (this.pending !== -1) throw new Error("ChoiceRun.step: the last token was not consumed by the state")
    const plan = this.plan
    const ws = this.ws
    if (!this.masks()) {
      // Nothing may follow: the output is complete (`stop`), or under a constraint cut short of it (`length`).
      const m = this.matcher
      this.finish(m !== null && !m.canEnd() ? "length" : "stop", null, this.text.length)
      return null
    }
    const logits = given ?? this.model.logits(this.state, ws.raw)
    const vocab = logits.length
    const work = ws.work
    const ok = ws.ok
    for (let i = 0; i < vocab; i++) work[i] = ok[i] === 1 ? logits[i]! : Number.NEGATIVE_INFINITY
    for (let j = 0; j < plan.biasIds.length; j++) {
      const id = plan.biasIds[j]!
      work[id] = work[id]! + plan.biasValues[j]!
    }
    const r = plan.repetitionPenalty
    if (r !== 1) {
      for (const id of this.seen) {
        const v = work[id]!
        work[id] = v > 0 ? v / r : v * r
      }
    }
    if (plan.frequencyPenalty !== 0 || plan.presencePenalty !== 0) {
      for (const id of this.outSeen)
        work[id] = work[id]! - plan.frequencyPenalty * this.counts[id]! - plan.presencePenalty
    }
    const id = this.choose()
    const entry = plan.logprobs ? this.logprobEntry(id, logits, logSumExp(logits)) : null
    if (entry !== null) this.logprobs.push(entry)
    this.output.push(id)
    if (this.counts[id] === 0) {
      this.outSeen.push(id)
      if (this.promptMark[id] !== 1) this.seen.push(id)
    }
    this.counts[id]!++
    const m = this.matcher
    const constrainedEnd = m !== null && isStopId(id) && m.canEnd()
    if (m !== null && id < 256) m.advance(id)
    if (id < 256) this.utf8.push(id)
    else if (!this.utf8.complete) {
      // A special token inside a character (only where no continuation byte was allowed) abandons it.
      this.utf8.reset()
      this.text.length = completeEnd(this.text, this.text.length)
    }

    if (isStopId(id) && (!plan.ignoreEos || constrainedEnd)) {
      if (plan.includeStop) this.appendText(id)
      this.finish("stop", null, this.text.length)
    } else if (plan.stopTokenIds.has(id)) {
      if (plan.includeStop) this.appendText(id)
      this.finish("stop", id, this.text.length)
    } else {
      const before = this.text.length
      this.appendText(id)
      if (plan.stopStrings.length > 0 && this.output.length > plan.minTokens) this.findStop(before)
      if (!this.finished && this.output.length >= plan.maxTokens) this.finish(this.endReason(), null, this.text.length)
    }
    if (!this.finished) this.pending = id
    return { id, logprob: entry }
  }

  /** Look for a stop string ending in the text appended after `before` (the first of the list that matches). */
  private findStop(before: number): void {
    const text = this.text
    for (const stop of this.plan.stopStrings) {
      const s = stop.bytes
      const last = text.length - s.length
      for (let at = Math.max(0, before - s.length + 1); at <= last; at++) {
        let match = true
        for (let j = 0; j < s.length; j++) {
          if (text[at + j] !== s[j]) {
            match = false
            break
          }
        }
        if (match) {
          this.finish("stop", stop.text, this.plan.includeStop ? at + s.length : at)
          return
        }
      }
    }
  }

  /**
   * The end of the text that may be streamed now: all of it once finished; else short of a possible stop
   * string's beginning and of an incomplete UTF-8 character.
   */
  streamable(): number {
    if (this.finished) return this.textEnd
    const text = this.text
    let end = text.length
    if (this.plan.stopStrings.length > 0 && !this.plan.includeStop) {
      let longest = 0
      for (const s of this.plan.stopStrings) longest = Math.max(longest, s.bytes.length)
      end = Math.max(0, end - (longest - 1))
    }
    // Back off to a character boundary: the last lead byte before `end` must have its continuations.
    let lead = end - 1
    while (lead >= 0 && (text[lead]! & 0xc0) === 0x80 && end - lead < 4) lead--
    if (lead >= 0) {
      const b = text[lead]!
      const need = b < 0x80 ? 1 : b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1
      if (end - lead < need) end = lead
    }
    return Math.max(end, this.streamed)
  }
}
