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
 * Batched decoding: on the decoding scheduler (`runRounds`, a stream's chunks pulled by the server), the
 * completions in flight on a model decode together (`sampler/Batcher.ts`, `sampler/Job.ts`): one forward pass
 * per step runs every choice's last token and a piece of each prompt still running, and the next-token logits
 * of every choice are one matrix product. A request's choices decode together even alone (`complete`). Each
 * choice keeps its own state and random stream, and the policy computes each row the same bits whatever rows
 * share its pass, so a completion is the same, bit for bit, batched or not, whatever it was batched with.
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
import type { ChatCompletion, ChatCompletionChunk, ChatCompletionRequest } from "../../api/ChatCompletion.js"
import { EngineError } from "./EngineError.js"
import type { DecodeState, LanguageModel } from "./LanguageModel.js"
import type { PrefixCache, PromptStates } from "./PrefixCache.js"
import { decoding, runToEnd, type Task } from "./Scheduler.js"
import { batching } from "./sampler/Batcher.js"
import { Job, stepJobs } from "./sampler/Job.js"
import { DEFAULT_LIMITS, plan, type RequestLimits } from "./sampler/RequestPlan.js"

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
): Prepared => preparing(model, request, options, false)

/** `prepare`; `alone`: the job always steps alone (run to its end at once, never through the batcher). */
const preparing = <S extends DecodeState>(
  model: LanguageModel<S>,
  request: ChatCompletionRequest,
  options: CompleteOptions,
  alone: boolean
): Prepared => {
  const checked = plan(model, request, options.limits ?? DEFAULT_LIMITS)
  return {
    tokens: checked.n * checked.maxTokens,
    // Nothing runs (no prefill) until the generator is first pulled: on the server that is on the decoding
    // scheduler, in turn with the others, not in the request's handler.
    rounds: function* () {
      const job = new Job(model, request, checked, options, false)
      while (!job.finished) yield* step(job, alone)
      return job.response()
    },
    stream: function* () {
      const job = new Job(model, request, checked, options, true)
      for (;;) {
        const chunk = job.chunks.shift()
        if (chunk !== undefined) yield chunk
        else if (job.finished) return
        else yield* step(job, alone)
      }
    }
  }
}

/**
 * One step of a job. Pulled on the decoding scheduler (inside its task's step), the job asks the batcher for
 * its step (or, with batching off, steps alone) and pauses; `alone`, or elsewhere, it steps alone at once and
 * pauses only while its prompt still runs. True when a pause was yielded.
 */
function* step<S extends DecodeState>(job: Job<S>, alone: boolean): Generator<undefined, boolean> {
  if (job.failure !== null) throw job.failure.error
  if (!alone && batching.scheduler.running) {
    // A step of the scheduler's task: a pause after it, so that the task gives the other tasks their turn.
    if (batching.enabled) batching.request(job)
    else stepJobs(job.model, [job])
    yield
    return true
  }
  stepJobs(job.model, [job])
  if (!job.decoding) {
    yield
    return true
  }
  return false
}

/**
 * Serve a chat-completions request as a whole response. Throws `EngineError` for a request it refuses
 * (before any decoding).
 */
export const complete = <S extends DecodeState>(
  model: LanguageModel<S>,
  request: ChatCompletionRequest,
  options: CompleteOptions
): ChatCompletion => runToEnd(preparing(model, request, options, true).rounds())

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
): Generator<ChatCompletionChunk> => withoutPauses(preparing(model, request, options, true).stream())

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
