/**
 * The local engine's sampler: serves a chat-completions request from a `LanguageModel`, as a
 * whole `ChatCompletion` (`complete`) or as the ordered `ChatCompletionChunk`s of a stream (`completeStream`).
 * It follows the conventions of the vLLM OpenAI-compatible engine.
 *
 * Per step and choice, the next-token logits go through, in this order: the hard masks (`<|pad|>` never;
 * `allowed_token_ids`; the constraint of `structured_outputs` / `response_format`), the soft masks
 * (`bad_words`: a word's last token is banned where it would complete the word in the output; `min_tokens`:
 * the stop tokens and `stop_token_ids` are banned until reached — dropped if they would leave nothing),
 * `logit_bias` (added, clamped to [-100, 100]), the penalties (`repetition_penalty` over prompt and output
 * tokens: positive logits divided, negative multiplied; `frequency_penalty` times the count and
 * `presence_penalty` once per token seen in the output), then the token is chosen: greedily (argmax, lowest
 * id on ties) when `temperature` is 0 (below 1e-5), else from softmax(logits / temperature) restricted by
 * `min_p` (relative to the most likely token), then `top_k` (-1, 0 or null: all), then `top_p` (the smallest
 * set of most likely tokens whose mass reaches it), by one uniform draw of the choice's generator.
 *
 * Logprobs (`logprobs`, `top_logprobs`) are those of the raw model distribution (log-softmax of the
 * unprocessed logits), vLLM's default `raw_logprobs` mode: what the policy assigned, which is what training
 * needs; `top_logprobs` lists the most likely tokens of that distribution in descending order.
 *
 * Stops: `<|eos|>` and `<|im_end|>` end a choice (`stop_reason` null) unless `ignore_eos`; a token of
 * `stop_token_ids` ends it (`stop_reason` the id); a stop string (`stop`) ends it once the output text
 * contains it (`stop_reason` the string) and cuts the text before it (after it with
 * `include_stop_str_in_output`). Stop tokens are part of `token_ids` and of the logprobs but not of the text
 * (unless `include_stop_str_in_output`). Stop strings are looked for once the output has more than
 * `min_tokens` tokens. Reaching the token limit gives `finish_reason` `length` (but see below).
 *
 * Constrained decoding: a request whose token limit (`max_tokens` / `max_completion_tokens`, or what the
 * context leaves after the prompt) cannot hold the shortest output the constraint allows is refused up front
 * (`EngineError` naming the limit, or `messages`, with the tokens needed). A byte whose cost (the fewest
 * bytes to a complete output after it) exceeds the tokens left is masked, so the output completes within
 * the limit; the stop tokens are allowed only where the output is complete, other special tokens never.
 * With `ignore_eos` they are allowed only where the output cannot go on (and then end the choice). An output
 * complete at the token limit ends with `stop` (with `ignore_eos`: only if it could not go on), so a client
 * that parses it on `stop` gets a valid value. Where `allowed_token_ids` rule out every way to a complete
 * output within the limit, the choice keeps to the constraint and ends with `length` on a prefix of a valid
 * output. When masks leave no token at all, the choice ends (`stop`, `stop_reason` null; `length` if its
 * constrained output is incomplete).
 *
 * Well-formed UTF-8: the tokens are bytes, so outside a constraint (which keeps its output well-formed
 * itself) the bytes that would make the output ill-formed UTF-8 are masked (see `Utf8.maskNext`): a
 * continuation byte where none is due, a lead byte where one is, 0xC0, 0xC1, 0xF5..0xFF, overlong forms,
 * surrogates and code points above U+10FFFF. Inside a character the special tokens are masked too, unless no
 * continuation byte is allowed (then a special token abandons the character). A character is not started
 * unless it can be finished within the token limit, unless nothing else is allowed. Where a choice still
 * ends inside a character (a stop token id in it, or the limit), `content` leaves the open character out;
 * `token_ids` and the logprobs keep every sampled token. Streamed deltas never split a character.
 *
 * Seeds: choice `i` draws from a generator seeded with `seed + i` (int64 wrap-around); without `seed`, the
 * base seed is drawn from `crypto.getRandomValues`. Greedy steps draw nothing.
 *
 * Accepted without effect, as the convention's engine does: `length_penalty` (beam search only),
 * `spaces_between_special_tokens` (used, with `skip_special_tokens: false`), `include_reasoning`,
 * `reasoning_effort`, `user`, `cache_salt`, `kv_transfer_params`, `mm_processor_kwargs`, `vllm_xargs`,
 * `disable_fallback`, `_backend`.
 * Tools: with `tools` and a `tool_choice` other than `none` (`auto` by default), decoding follows the grammar of
 * `constraint/ToolCalls.ts` and the text is parsed into `message.tool_calls` (`ToolCallText.ts`;
 * `finish_reason: "tool_calls"`), streamed as `delta.tool_calls`; a tools grammar does not combine with another
 * constraint (`response_format`, `structured_outputs`: a 400).
 * Refused (`EngineError` naming the field): `use_beam_search`, `logits_processors`,
 * `structured_outputs.grammar` / `structural_tag` / `whitespace_pattern`, a `structural_tag` response format, a
 * tool's `parameters` outside the JSON-schema subset, `priority` other than 0.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionRequest,
  Choice,
  ChunkChoice,
  Delta,
  PromptLogprob,
  TokenLogprob,
  TopLogprob,
  Usage
} from "../../api/ChatCompletion.js"
import { renderOptionsOf, renderPrompt } from "./ChatTemplate.js"
import { type ByteAutomaton, Matcher } from "./constraint/Automaton.js"
import { compileConstraint, type RequestConstraint } from "./constraint/Constraint.js"
import { toolModeOf } from "./constraint/ToolCalls.js"
import { badRequest, EngineError, unsupported } from "./EngineError.js"
import type { DecodeState, LanguageModel } from "./LanguageModel.js"
import { type PrefixCache, type PromptStates, runPrompt } from "./PrefixCache.js"
import { Rng } from "./Random.js"
import { decoding, runToEnd, type Task } from "./Scheduler.js"
import { EOS, encode, IM_END, isSpecial, PAD, STOP_IDS, tokenBytes, tokenString } from "./Tokenizer.js"
import { newCallId, parseToolCalls, ToolCallStream } from "./ToolCallText.js"
import { completeEnd, maskNext, Utf8State } from "./Utf8.js"

/** Options of a completion that are not request fields. */
export interface CompleteOptions {
  /** The model name written in the response. */
  readonly modelName: string
  /** The time of the request in milliseconds since the epoch (default `Date.now()`); `created` is in seconds. */
  readonly now?: number
  /**
   * The request id, e.g. from an `X-Request-Id` header (wins over the request's `request_id`, as in vLLM;
   * default a random UUID); the response id is `chatcmpl-{id}`.
   */
  readonly requestId?: string
  /** The bounds on the work one request may ask for (default {@link DEFAULT_LIMITS}). */
  readonly limits?: RequestLimits | undefined
  /**
   * Where the prompt's state comes from: a {@link PrefixCache} of the model reuses the states of prompts it
   * saw (the result is the same, bit for bit); by default the prompt is prefilled from nothing.
   */
  readonly promptStates?: PromptStates | undefined
}

/** The bounds on the work one request may ask for; beyond them the request is refused with a 400. */
export interface RequestLimits {
  /** The most choices (`n`) a request may ask for. */
  readonly maxN: number
  /** The most tokens a request may sample in all: `n` times its token limit. */
  readonly maxRequestTokens: number
}

/** Temperatures below this are greedy. */
const GREEDY_EPSILON = 1e-5
/** The logprob written for a token of probability zero. */
const MIN_LOGPROB = -9999

/** A request checked and prepared for decoding. */
interface Plan {
  readonly promptIds: Array<number>
  readonly role: string
  readonly echo: string
  readonly n: number
  readonly maxTokens: number
  readonly minTokens: number
  readonly seed: bigint
  readonly temperature: number
  readonly topP: number
  readonly topK: number
  readonly minP: number
  readonly frequencyPenalty: number
  readonly presencePenalty: number
  readonly repetitionPenalty: number
  readonly biasIds: Int32Array
  readonly biasValues: Float64Array
  readonly allowed: Uint8Array | null
  readonly badWords: ReadonlyArray<ReadonlyArray<number>>
  readonly stopStrings: ReadonlyArray<{ readonly text: string; readonly bytes: Uint8Array }>
  readonly stopTokenIds: ReadonlySet<number>
  readonly includeStop: boolean
  readonly ignoreEos: boolean
  readonly skipSpecial: boolean
  readonly spacesBetween: boolean
  readonly logprobs: boolean
  readonly topLogprobs: number
  readonly promptLogprobs: number | null
  readonly returnTokenIds: boolean
  readonly tokensAsIds: boolean
  readonly constraint: ByteAutomaton | null
  /** Whether the output is parsed for tool calls (`tool_choice` other than `none`, with tools). */
  readonly parsesToolCalls: boolean
  readonly includeUsage: boolean
  readonly continuousUsage: boolean
}

/** The most choices one request may ask for (the hosted engine's own bound). */
export const MAX_N = 128

/**
 * The most tokens one request may ask to sample, over all its choices (`n` times the token limit). A request
 * is sampled as a whole, so this bounds how long one request can keep the server from answering others.
 */
export const MAX_REQUEST_TOKENS = 16_384

const isInt = (v: number): boolean => Number.isInteger(v)

const randomSeed = (): bigint => {
  const words = new Uint32Array(2)
  crypto.getRandomValues(words)
  return BigInt.asIntN(64, (BigInt(words[0]!) << 32n) | BigInt(words[1]!))
}

const checkRange = (param: string, value: number, ok: boolean, expected: string): void => {
  if (!ok) throw badRequest(param, `${param} must be ${expected}, got ${value}`)
}

const tokenIdIn = (vocabSize: number, id: number): boolean => isInt(id) && id >= 0 && id < vocabSize

/**
 * Refuse a constrained request whose token limit cannot hold the shortest output the constraint allows (a
 * token is a byte, so that output takes `minLength` tokens; the end of turn after it is not needed): a 400
 * naming the limit the client set (`maxParam`), or, without one, a context overflow naming `messages`, with
 * the number of tokens needed. Decoding it could only end cut short of a valid output.
 */
const checkConstraintBudget = (
  constraint: RequestConstraint,
  maxTokens: number,
  maxParam: string | null,
  promptTokens: number,
  context: number
): void => {
  const needed = constraint.automaton.minLength
  if (maxTokens >= needed) return
  const shortest = `the shortest output ${constraint.param} allows takes ${needed} tokens`
  if (maxParam !== null) {
    throw badRequest(maxParam, `${maxParam} is ${maxTokens}, but ${shortest}: ${maxParam} must be at least ${needed}`)
  }
  throw new EngineError({
    kind: "ContextOverflow",
    param: "messages",
    message: `This model's maximum context length is ${context} tokens. However, your request has ${promptTokens} input tokens, which leaves ${maxTokens} for the completion, and ${shortest}. Please reduce the length of the messages.`
  })
}

/** Check a request and prepare its decoding; throws `EngineError`. */
const plan = <S extends DecodeState>(
  model: LanguageModel<S>,
  request: ChatCompletionRequest,
  limits: RequestLimits
): Plan => {
  const vocab = model.vocabSize
  if (request.priority !== undefined && request.priority !== 0) {
    throw badRequest("priority", `Got priority ${request.priority} but Priority scheduling is not enabled.`)
  }
  if (request.use_beam_search === true) throw unsupported("use_beam_search", "beam search is not implemented")
  if (request.logits_processors != null && request.logits_processors.length > 0) {
    throw unsupported("logits_processors", "custom logits processors cannot be loaded")
  }
  if (request.stream_options != null && request.stream !== true) {
    throw badRequest("stream_options", "stream_options is only allowed when stream is true")
  }
  if (request.prompt_logprobs != null && request.stream === true) {
    throw badRequest("prompt_logprobs", "prompt_logprobs is not available when stream is true")
  }
  const n = request.n ?? 1
  checkRange("n", n, isInt(n) && n >= 1, "an integer of at least 1")
  const temperature = request.temperature ?? 1
  checkRange("temperature", temperature, temperature >= 0, "non-negative")
  const topP = request.top_p ?? 1
  checkRange("top_p", topP, topP > 0 && topP <= 1, "in (0, 1]")
  const topK = request.top_k ?? -1
  checkRange("top_k", topK, isInt(topK) && topK >= -1, "-1, 0 (all tokens) or a positive integer")
  const minP = request.min_p ?? 0
  checkRange("min_p", minP, minP >= 0 && minP <= 1, "in [0, 1]")
  const frequencyPenalty = request.frequency_penalty ?? 0
  checkRange("frequency_penalty", frequencyPenalty, Math.abs(frequencyPenalty) <= 2, "in [-2, 2]")
  const presencePenalty = request.presence_penalty ?? 0
  checkRange("presence_penalty", presencePenalty, Math.abs(presencePenalty) <= 2, "in [-2, 2]")
  const repetitionPenalty = request.repetition_penalty ?? 1
  checkRange("repetition_penalty", repetitionPenalty, repetitionPenalty > 0, "greater than 0")
  const logprobs = request.logprobs === true
  const topLogprobs = request.top_logprobs ?? 0
  checkRange(
    "top_logprobs",
    topLogprobs,
    isInt(topLogprobs) && topLogprobs >= 0 && topLogprobs <= vocab,
    `in [0, ${vocab}]`
  )
  if (topLogprobs > 0 && !logprobs) throw badRequest("top_logprobs", "top_logprobs needs logprobs set to true")
  const promptLogprobs = request.prompt_logprobs ?? null
  if (promptLogprobs !== null) {
    checkRange(
      "prompt_logprobs",
      promptLogprobs,
      isInt(promptLogprobs) && promptLogprobs >= -1 && promptLogprobs <= vocab,
      `in [-1, ${vocab}]`
    )
  }
  const minTokens = request.min_tokens ?? 0
  checkRange("min_tokens", minTokens, isInt(minTokens) && minTokens >= 0, "a non-negative integer")

  const biasIds: Array<number> = []
  const biasValues: Array<number> = []
  for (const [key, value] of Object.entries(request.logit_bias ?? {})) {
    const id = Number(key)
    if (!/^\d+$/.test(key) || !tokenIdIn(vocab, id)) {
      throw badRequest(
        "logit_bias",
        `logit_bias: ${JSON.stringify(key)} is not a token id of this model (0..${vocab - 1})`
      )
    }
    biasIds.push(id)
    biasValues.push(Math.min(100, Math.max(-100, value)))
  }
  let allowed: Uint8Array | null = null
  if (request.allowed_token_ids != null) {
    if (request.allowed_token_ids.length === 0) throw badRequest("allowed_token_ids", "allowed_token_ids is empty")
    allowed = new Uint8Array(vocab)
    for (const id of request.allowed_token_ids) {
      if (!tokenIdIn(vocab, id))
        throw badRequest("allowed_token_ids", `allowed_token_ids contains out-of-vocabulary id ${id}`)
      allowed[id] = 1
    }
  }
  const badWords = (request.bad_words ?? []).map((word) => {
    if (word === "") throw badRequest("bad_words", "bad_words may not contain an empty string")
    return encode(word)
  })
  const stopList = request.stop == null ? [] : typeof request.stop === "string" ? [request.stop] : request.stop
  const stopStrings = stopList.map((text) => {
    if (text === "") throw badRequest("stop", "stop may not contain an empty string")
    return { text, bytes: Uint8Array.from(encode(text)) }
  })
  const stopTokenIds = new Set(request.stop_token_ids ?? [])

  const constraint = compileConstraint(request)

  const rendered = renderPrompt(request.messages, renderOptionsOf(request))
  let promptIds = rendered.ids
  const truncate = request.truncate_prompt_tokens
  if (truncate != null) {
    const keep = truncate === -1 ? model.contextLength : truncate
    if (promptIds.length > keep) promptIds = promptIds.slice(promptIds.length - keep)
  }
  if (promptIds.length === 0) throw badRequest("messages", "The prompt is empty: there is nothing to complete")
  const context = model.contextLength
  const requested = request.max_completion_tokens ?? request.max_tokens ?? null
  const maxParam = request.max_completion_tokens != null ? "max_completion_tokens" : "max_tokens"
  if (requested !== null) checkRange(maxParam, requested, isInt(requested) && requested >= 1, "at least 1")
  if (requested === null && promptIds.length >= context) {
    throw new EngineError({
      kind: "ContextOverflow",
      param: "messages",
      message: `This model's maximum context length is ${context} tokens. However, your request has ${promptIds.length} input tokens. Please reduce the length of the input messages.`
    })
  }
  const maxTokens = requested ?? context - promptIds.length
  if (promptIds.length + maxTokens > context) {
    throw new EngineError({
      kind: "ContextOverflow",
      param: "messages",
      message: `This model's maximum context length is ${context} tokens. However, you requested ${promptIds.length + maxTokens} tokens (${promptIds.length} in the messages, ${maxTokens} in the completion). Please reduce the length of the messages or completion.`
    })
  }
  if (constraint !== null)
    checkConstraintBudget(constraint, maxTokens, requested === null ? null : maxParam, promptIds.length, context)
  if (minTokens > maxTokens)
    throw badRequest("min_tokens", `min_tokens (${minTokens}) may not exceed the token limit (${maxTokens})`)
  // The work one request may ask for (the whole of it is sampled before the next request is served).
  checkRange("n", n, n <= limits.maxN, `at most ${limits.maxN}`)
  if (n * maxTokens > limits.maxRequestTokens) {
    throw badRequest(
      "n",
      `n x ${maxParam} may be at most ${limits.maxRequestTokens} tokens per request, got ${n} x ${maxTokens} = ${n * maxTokens}: lower n or ${maxParam}`
    )
  }

  return {
    promptIds,
    role: rendered.role,
    echo: request.echo === true ? rendered.echo : "",
    n,
    maxTokens,
    minTokens,
    seed: request.seed != null ? BigInt(Math.trunc(request.seed)) : randomSeed(),
    temperature,
    topP,
    topK: Math.max(topK, 0),
    minP,
    frequencyPenalty,
    presencePenalty,
    repetitionPenalty,
    biasIds: Int32Array.from(biasIds),
    biasValues: Float64Array.from(biasValues),
    allowed,
    badWords,
    stopStrings,
    stopTokenIds,
    includeStop: request.include_stop_str_in_output === true,
    ignoreEos: request.ignore_eos === true,
    skipSpecial: request.skip_special_tokens ?? true,
    spacesBetween: request.spaces_between_special_tokens ?? true,
    logprobs,
    topLogprobs,
    promptLogprobs,
    returnTokenIds: request.return_token_ids === true,
    tokensAsIds: request.return_tokens_as_token_ids === true,
    constraint: constraint?.automaton ?? null,
    parsesToolCalls: toolModeOf(request) !== null,
    includeUsage: request.stream_options != null && request.stream_options.include_usage !== false,
    continuousUsage: request.stream_options?.continuous_usage_stats === true
  }
}

/** Buffers shared by the choices of one request (they step one at a time). */
class Workspace {
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
interface Sampled {
  readonly id: number
  readonly logprob: TokenLogprob | null
}

const isStopId = (id: number): boolean => id === EOS || id === IM_END

/** The log-sum-exp of logits. */
const logSumExp = (logits: Float32Array): number => {
  let max = Number.NEGATIVE_INFINITY
  for (let i = 0; i < logits.length; i++) if (logits[i]! > max) max = logits[i]!
  if (max === Number.NEGATIVE_INFINITY) return max
  let sum = 0
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i]! - max)
  return max + Math.log(sum)
}

const clampLogprob = (v: number): number => (Number.isFinite(v) ? v : MIN_LOGPROB)

/**
 * The `k` ids of the largest values, in descending order (lowest id first on ties), written into `order`.
 * Small `k` by insertion (no allocation), large `k` by sorting.
 */
const topIds = (values: ArrayLike<number>, k: number, order: Int32Array): Int32Array => {
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
class ChoiceRun<S extends DecodeState> {
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
  private state: S
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

  /** Sample one token; null when the choice ended without one (no token was possible). */
  step(): Sampled | null {
    const plan = this.plan
    const ws = this.ws
    if (!this.masks()) {
      // Nothing may follow: the output is complete (`stop`), or under a constraint cut short of it (`length`).
      const m = this.matcher
      this.finish(m !== null && !m.canEnd() ? "length" : "stop", null, this.text.length)
      return null
    }
    const logits = this.model.logits(this.state, ws.raw)
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
    if (!this.finished) this.model.advance(this.state, id)
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

const decoder = new TextDecoder("utf-8", { fatal: false })
const textOf = (bytes: ReadonlyArray<number>, from: number, to: number): string =>
  from >= to ? "" : decoder.decode(Uint8Array.from(bytes.slice(from, to)))

/** A prepared request: the plan, the prompt state and the choices' runs. */
class Job<S extends DecodeState> {
  readonly runs: Array<ChoiceRun<S>>
  readonly created: number
  readonly id: string
  readonly promptLogprobs: Array<{ [id: string]: PromptLogprob } | null> | null

  /**
   * A job whose prompt runs a chunk at a time (see `PrefixCache.runPrompt`), pausing between chunks: a long
   * prompt takes several turns of the decoding scheduler, not one.
   */
  static *start<S extends DecodeState>(
    model: LanguageModel<S>,
    request: ChatCompletionRequest,
    plan: Plan,
    options: CompleteOptions
  ): Generator<undefined, Job<S>> {
    const base =
      options.promptStates === undefined
        ? yield* runPrompt(model, null, plan.promptIds)
        : yield* options.promptStates.prefillSteps(model, plan.promptIds)
    return new Job(model, request, plan, options, base)
  }

  private constructor(
    readonly model: LanguageModel<S>,
    readonly request: ChatCompletionRequest,
    readonly plan: Plan,
    readonly options: CompleteOptions,
    base: S
  ) {
    const ws = new Workspace(model.vocabSize)
    const promptMark = new Uint8Array(model.vocabSize)
    for (const id of plan.promptIds) if (id >= 0 && id < promptMark.length) promptMark[id] = 1
    this.runs = []
    for (let i = 0; i < plan.n; i++) {
      const state = i === plan.n - 1 ? base : model.fork(base)
      this.runs.push(new ChoiceRun(model, plan, ws, state, i, promptMark))
    }
    this.created = Math.floor((options.now ?? Date.now()) / 1000)
    this.id = `chatcmpl-${options.requestId ?? request.request_id ?? crypto.randomUUID()}`
    this.promptLogprobs = plan.promptLogprobs === null ? null : this.computePromptLogprobs(plan.promptLogprobs)
  }

  private computePromptLogprobs(k: number): Array<{ [id: string]: PromptLogprob } | null> {
    const { model, plan } = this
    const ids = plan.promptIds
    const scores = ids.length > 1 ? model.scoreTokens(ids, 1) : new Float32Array(0)
    const token = (t: number) => (plan.tokensAsIds ? `token_id:${t}` : tokenString(t))
    const out: Array<{ [id: string]: PromptLogprob } | null> = [null]
    const top = k === -1 ? model.vocabSize : k
    let state: S | null = top > 0 && ids.length > 1 ? model.prefill([ids[0]!]) : null
    const order = new Int32Array(model.vocabSize)
    const buffer = new Float32Array(model.vocabSize)
    for (let t = 1; t < ids.length; t++) {
      const id = ids[t]!
      const entry: { [id: string]: PromptLogprob } = {}
      if (state !== null) {
        const logits = model.logits(state, buffer)
        const lse = logSumExp(logits)
        let rank = 1
        for (let i = 0; i < logits.length; i++) if (logits[i]! > logits[id]!) rank++
        entry[String(id)] = { logprob: clampLogprob(scores[t - 1]!), rank, decoded_token: token(id) }
        const alternatives = topIds(logits, top, order)
        for (let j = 0; j < alternatives.length; j++) {
          const a = alternatives[j]!
          if (a !== id)
            entry[String(a)] = { logprob: clampLogprob(logits[a]! - lse), rank: j + 1, decoded_token: token(a) }
        }
        if (t < ids.length - 1) model.advance(state, id)
        else state = null
      } else entry[String(id)] = { logprob: clampLogprob(scores[t - 1]!), decoded_token: token(id) }
      out.push(entry)
    }
    return out
  }

  usage(): Usage {
    const prompt = this.plan.promptIds.length
    let completion = 0
    for (const run of this.runs) completion += run.output.length
    return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion }
  }

  choiceOf(run: ChoiceRun<S>): Choice {
    const plan = this.plan
    const generated = textOf(run.text, 0, run.textEnd)
    const content = plan.echo + generated
    const calls = plan.parsesToolCalls ? parseToolCalls(generated) : null
    const choice: {
      -readonly [K in keyof Choice]: Choice[K]
    } = {
      index: run.index,
      // `refusal` is always there, as the hosted engine sends it (generated client schemas require the key).
      message:
        calls === null
          ? { role: plan.role, content, refusal: null }
          : {
              role: plan.role,
              content: plan.echo + (calls.content ?? "") === "" ? null : plan.echo + (calls.content ?? ""),
              refusal: null,
              tool_calls: calls.calls.map((call) => ({
                id: newCallId(),
                type: "function" as const,
                function: { name: call.name, arguments: call.arguments }
              }))
            },
      // `refusal: null` beside `content`, as OpenAI sends it (generated client schemas require the key).
      logprobs: plan.logprobs ? { content: run.logprobs, refusal: null } : null,
      finish_reason: calls === null ? run.finishReason : "tool_calls",
      stop_reason: run.stopReason
    }
    if (plan.returnTokenIds) choice.token_ids = [...run.output]
    return choice
  }

  /**
   * Run every choice to its end, in rounds (one token of each unfinished choice), pausing after each round;
   * the whole response at the end. Each choice decodes with its own state and random stream, so the order of
   * the steps does not change what is sampled.
   */
  *rounds(): Generator<void, ChatCompletion> {
    let active = this.runs.filter((run) => !run.finished)
    while (active.length > 0) {
      for (const run of active) run.step()
      active = active.filter((run) => !run.finished)
      yield
    }
    return this.response()
  }

  private response(): ChatCompletion {
    const response: { -readonly [K in keyof ChatCompletion]: ChatCompletion[K] } = {
      id: this.id,
      object: "chat.completion",
      created: this.created,
      model: this.options.modelName,
      choices: this.runs.map((run) => this.choiceOf(run)),
      usage: this.usage()
    }
    if (this.promptLogprobs !== null) response.prompt_logprobs = this.promptLogprobs
    if (this.plan.returnTokenIds) response.prompt_token_ids = [...this.plan.promptIds]
    return response
  }

  private chunk(choices: Array<ChunkChoice>, extra?: Partial<ChatCompletionChunk>): ChatCompletionChunk {
    const chunk: { -readonly [K in keyof ChatCompletionChunk]: ChatCompletionChunk[K] } = {
      id: this.id,
      object: "chat.completion.chunk",
      created: this.created,
      model: this.options.modelName,
      choices,
      ...extra
    }
    if (this.plan.continuousUsage && chunk.usage === undefined) chunk.usage = this.usage()
    return chunk
  }

  /** Stream the choices in lockstep: role chunks first, then one chunk per sampled token, then usage. */
  *stream(): Generator<ChatCompletionChunk> {
    const plan = this.plan
    let first = true
    for (const run of this.runs) {
      const extra: Partial<ChatCompletionChunk> =
        first && plan.returnTokenIds ? { prompt_token_ids: [...plan.promptIds] } : {}
      first = false
      yield this.chunk(
        [{ index: run.index, delta: { role: plan.role, content: "" }, logprobs: null, finish_reason: null }],
        extra
      )
      if (plan.echo !== "") {
        yield this.chunk([{ index: run.index, delta: { content: plan.echo }, logprobs: null, finish_reason: null }])
      }
    }
    // With tools, each choice's text goes through a parser that turns calls into `tool_calls` deltas.
    const calls = new Map(this.runs.map((run) => [run, plan.parsesToolCalls ? new ToolCallStream() : null]))
    let active = this.runs.filter((run) => !run.finished)
    while (active.length > 0) {
      for (const run of active) {
        const sampled = run.step()
        const end = run.streamable()
        const text = textOf(run.text, run.streamed, end)
        run.streamed = end
        const parser = calls.get(run) ?? null
        let delta: Delta = { content: text }
        let finishReason: string | null = run.finished ? run.finishReason : null
        if (parser !== null) {
          const parsed = parser.push(text)
          const content = run.finished ? parsed.content + parser.finish() : parsed.content
          delta = parsed.toolCalls.length > 0 ? { content, tool_calls: parsed.toolCalls } : { content }
          if (run.finished && parseToolCalls(textOf(run.text, 0, run.textEnd)) !== null) finishReason = "tool_calls"
        }
        const choice: { -readonly [K in keyof ChunkChoice]: ChunkChoice[K] } = {
          index: run.index,
          delta,
          logprobs: plan.logprobs
            ? { content: sampled?.logprob != null ? [sampled.logprob] : [], refusal: null }
            : null,
          finish_reason: finishReason
        }
        if (run.finished) choice.stop_reason = run.stopReason
        if (plan.returnTokenIds) choice.token_ids = sampled === null ? [] : [sampled.id]
        yield this.chunk([choice])
      }
      active = active.filter((run) => !run.finished)
    }
    if (plan.includeUsage) yield this.chunk([], { usage: this.usage() })
  }
}

/**
 * A request checked and ready to decode: the most tokens it may sample, and its decoding, as rounds (see
 * {@link runRounds}) or as the chunks of a stream. Nothing is computed (no prefill) until one is started.
 */
export interface Prepared {
  /** The most tokens the request may sample in all: `n` times its token limit. */
  readonly tokens: number
  /** The decoding as rounds, the whole response at the end. */
  readonly rounds: () => Generator<void, ChatCompletion>
  /**
   * The decoding as the chunks of a stream (see {@link completeStream}); `undefined` is a pause while the
   * prompt still runs (nothing to send yet).
   */
  readonly stream: () => Generator<ChatCompletionChunk | undefined>
}

/** The bounds on a request's work when the options give none: `n` at most 128, 16,384 tokens in all. */
export const DEFAULT_LIMITS: RequestLimits = { maxN: MAX_N, maxRequestTokens: MAX_REQUEST_TOKENS }

/** Check a request and plan its decoding. Throws `EngineError` for a request it refuses. */
export const prepare = <S extends DecodeState>(
  model: LanguageModel<S>,
  request: ChatCompletionRequest,
  options: CompleteOptions
): Prepared => {
  const checked = plan(model, request, options.limits ?? DEFAULT_LIMITS)
  return {
    tokens: checked.n * checked.maxTokens,
    // The job (and its prefill) is made in the generator's first step, not when the generator is made: on the
    // server that step runs on the decoding scheduler, in turn with the others, not in the request's handler.
    rounds: function* () {
      const job = yield* Job.start(model, request, checked, options)
      return yield* job.rounds()
    },
    stream: function* () {
      const job = yield* Job.start(model, request, checked, options)
      yield* job.stream()
    }
  }
}

/**
 * Serve a chat-completions request as a whole response. Throws `EngineError` for a request it refuses
 * (before any decoding).
 */
export const complete = <S extends DecodeState>(
  model: LanguageModel<S>,
  request: ChatCompletionRequest,
  options: CompleteOptions
): ChatCompletion => runToEnd(prepare(model, request, options).rounds())

/**
 * Serve a chat-completions request as the chunks of a stream, in order: one role chunk per choice (the
 * first with `prompt_token_ids` when `return_token_ids`), the echoed text if any, then one chunk per sampled
 * token (choices in lockstep; the last chunk of a choice has `finish_reason`), then, with `stream_options`
 * (`include_usage` not false), a usage chunk with no choices. The request is checked before this returns
 * (throwing `EngineError`); decoding happens as the chunks are pulled. The concatenated `content` deltas
 * equal the non-streamed content for the same seed.
 */
export const completeStream = <S extends DecodeState>(
  model: LanguageModel<S>,
  request: ChatCompletionRequest,
  options: CompleteOptions
): Generator<ChatCompletionChunk> => withoutPauses(prepare(model, request, options).stream())

function* withoutPauses(chunks: Generator<ChatCompletionChunk | undefined>): Generator<ChatCompletionChunk> {
  for (const chunk of chunks) if (chunk !== undefined) yield chunk
}

/**
 * Decoding rounds run as an effect on the process's decoding scheduler (`Scheduler.ts`): a round at a time,
 * in turn with the other completions in flight, at most 10 ms of decoding per turn of the event loop, so that
 * other requests (`/v1/health` among them) are answered however many completions decode, and an interrupted
 * fiber (a client gone) stops decoding. A throw while decoding is a defect.
 */
export const runRounds = <A>(rounds: Generator<void, A>): Effect.Effect<A> =>
  Effect.async<A>((resume) => {
    const task: Task = {
      step: () => {
        const next = rounds.next()
        if (next.done === true) resume(Effect.succeed(next.value))
        return next.done === true
      },
      fail: (error) => resume(Effect.die(error))
    }
    decoding.add(task)
    return Effect.sync(() => decoding.remove(task))
  })

/**
 * `complete` as an effect that decodes cooperatively (see {@link runRounds}): a refused request fails with
 * `EngineError`; anything else is a defect.
 */
export const completeEffect = <S extends DecodeState>(
  model: LanguageModel<S>,
  request: ChatCompletionRequest,
  options: CompleteOptions
): Effect.Effect<ChatCompletion, EngineError> =>
  Effect.suspend(() => {
    try {
      return Effect.succeed(prepare(model, request, options))
    } catch (error) {
      if (error instanceof EngineError) return Effect.fail(error)
      return Effect.die(error)
    }
  }).pipe(Effect.flatMap((prepared) => runRounds(prepared.rounds())))
