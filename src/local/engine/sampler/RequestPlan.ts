/**
 * Request planning for the local engine's sampler: a chat-completions request checked field by field against
 * the model and the server's limits (refused with `EngineError` naming the field), its prompt rendered, and
 * everything decoding needs gathered into a {@link Plan}. See `Sampler.ts` for the conventions.
 *
 * @since 0.1.0
 */
import type { ChatCompletionRequest } from "../../../api/ChatCompletion.js"
import { renderOptionsOf, renderPrompt } from "../ChatTemplate.js"
import type { ByteAutomaton } from "../constraint/Automaton.js"
import { compileConstraint, type RequestConstraint } from "../constraint/Constraint.js"
import { toolModeOf } from "../constraint/ToolCalls.js"
import { badRequest, EngineError, unsupported } from "../EngineError.js"
import type { DecodeState, LanguageModel } from "../LanguageModel.js"
import { encode } from "../Tokenizer.js"

/** The bounds on the work one request may ask for; beyond them the request is refused with a 400. */
export interface RequestLimits {
  /** The most choices (`n`) a request may ask for. */
  readonly maxN: number
  /** The most tokens a request may sample in all: `n` times its token limit. */
  readonly maxRequestTokens: number
}

/** A request checked and prepared for decoding. */
export interface Plan {
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

/**
 * Random words for the seeds of requests that give none, drawn from the system's generator a block at a time:
 * one `crypto.getRandomValues` a request was about 0.7% of `npm start`'s main thread (a profile), one per 512
 * requests is nothing. Each seed still takes fresh words, never used by another request.
 */
const seedWords = { words: new Uint32Array(1024), next: 1024 }

const randomSeed = (): bigint => {
  if (seedWords.next + 2 > seedWords.words.length) {
    crypto.getRandomValues(seedWords.words)
    seedWords.next = 0
  }
  const { words, next } = seedWords
  seedWords.next = next + 2
  return BigInt.asIntN(64, (BigInt(words[next]!) << 32n) | BigInt(words[next + 1]!))
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
export const plan = <S extends DecodeState>(
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
      // A limit that no prompt leaves room for is the limit's fault; otherwise the messages take the room.
      param: requested !== null && requested >= context ? maxParam : "messages",
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

/** The bounds on a request's work when the options give none: `n` at most 128, 16,384 tokens in all. */
export const DEFAULT_LIMITS: RequestLimits = { maxN: MAX_N, maxRequestTokens: MAX_REQUEST_TOKENS }
