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
  Usage
} from "../../api/ChatCompletion.js"
import { EngineError } from "./EngineError.js"
import type { DecodeState, LanguageModel } from "./LanguageModel.js"
import { type PrefixCache, type PromptStates, runPrompt } from "./PrefixCache.js"
import { decoding, runToEnd, type Task } from "./Scheduler.js"
import { ChoiceRun, clampLogprob, logSumExp, topIds, Workspace } from "./sampler/ChoiceRun.js"
import { DEFAULT_LIMITS, type Plan, plan, type RequestLimits } from "./sampler/RequestPlan.js"
import { tokenString } from "./Tokenizer.js"
import { newCallId, parseToolCalls, ToolCallStream } from "./ToolCallText.js"

export {
  /** The bounds on a request's work when the options give none. */
  DEFAULT_LIMITS,
  /** The most choices one request may ask for. */
  MAX_N,
  /** The most tokens one request may ask to sample, over all its choices. */
  MAX_REQUEST_TOKENS,
  /** The bounds on the work one request may ask for. */
  type RequestLimits
} from "./sampler/RequestPlan.js"

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
