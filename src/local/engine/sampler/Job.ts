/**
 * A chat-completions request being decoded (a job) and the step that advances a batch of jobs of one model
 * together.
 *
 * A job runs its prompt a piece at a time (see `PrefixCache.promptWork`), then its choices a token per step. One
 * step of a batch of jobs ({@link stepJobs}) runs, in one forward pass of the model, every row the jobs need: the
 * next piece of each prompt still running (chunked prefill) and the token each choice sampled last; then it
 * computes the next-token logits of every choice still decoding with one matrix product, and each choice samples
 * its token from its own row. A job joins a step or sits it out freely: each choice decodes with its own state and
 * random stream, and the model computes each row the same bits whatever rows it is batched with, so what a job
 * samples does not depend on which jobs shared its steps.
 *
 * @since 0.1.0
 */
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionRequest,
  Choice,
  ChunkChoice,
  Delta,
  PromptLogprob,
  Usage
} from "../../../api/ChatCompletion.js"
import type { DecodeState, LanguageModel } from "../LanguageModel.js"
import { type ExtendableModel, type PromptStates, type PromptWork, promptWork } from "../PrefixCache.js"
import { engineFloat32 } from "../policy/Wasm.js"
import { tokenString } from "../Tokenizer.js"
import { newCallId, parseToolCalls, ToolCallStream } from "../ToolCallText.js"
import { ChoiceRun, clampLogprob, logSumExp, topIds, Workspace } from "./ChoiceRun.js"
import type { Plan } from "./RequestPlan.js"

/** What a job needs of the options of a completion. */
export interface JobOptions {
  /** The model name written in the response. */
  readonly modelName: string
  /** The time of the request in milliseconds since the epoch (default `Date.now()`). */
  readonly now?: number
  /** The request id (default the request's `request_id`, else a random UUID). */
  readonly requestId?: string
  /** Where the prompt's state comes from (default: prefilled from nothing). */
  readonly promptStates?: PromptStates | undefined
}

/** A model that runs rows of many states in one forward pass (the local policy does). */
export interface BatchModel<S extends DecodeState> extends ExtendableModel<S> {
  /** Consume `ids[i]` into `states[i]` for i < count, distinct states, in one forward pass. */
  readonly extendMany: (states: ReadonlyArray<S>, ids: ReadonlyArray<ArrayLike<number>>, count?: number) => void
  /** The next-token logits of `count` states, row i at `i * vocabSize` of `out`. */
  readonly logitsMany: (states: ReadonlyArray<S>, out: Float32Array, count?: number) => Float32Array
}

const isBatchModel = <S extends DecodeState>(model: LanguageModel<S>): model is BatchModel<S> =>
  typeof (model as Partial<BatchModel<S>>).extendMany === "function" &&
  typeof (model as Partial<BatchModel<S>>).logitsMany === "function"

const decoder = new TextDecoder("utf-8", { fatal: false })
const textOf = (bytes: ReadonlyArray<number>, from: number, to: number): string =>
  from >= to ? "" : decoder.decode(Uint8Array.from(bytes.slice(from, to)))

/** A request being decoded: its prompt, then its choices, as a whole response or as the chunks of a stream. */
export class Job<S extends DecodeState> {
  /** The choices' runs (empty while the prompt runs). */
  runs: Array<ChoiceRun<S>> = []
  /** The response's `created`, in seconds. */
  readonly created: number
  /** The response's id, `chatcmpl-{request id}`. */
  readonly id: string
  /** The prompt's logprobs, once the prompt has run, when asked for. */
  promptLogprobs: Array<{ [id: string]: PromptLogprob } | null> | null = null
  /** The chunks decoded and not yet taken (a streamed job). */
  readonly chunks: Array<ChatCompletionChunk> = []
  /** What a batched step that included this job threw, if one did. */
  failure: { readonly error: unknown } | null = null
  private prompt: Generator<PromptWork<S>, S> | null
  private piece: PromptWork<S> | null = null
  private calls: Map<ChoiceRun<S>, ToolCallStream | null> = new Map()
  private ended = false

  constructor(
    readonly model: LanguageModel<S>,
    readonly request: ChatCompletionRequest,
    readonly plan: Plan,
    readonly options: JobOptions,
    /** Whether the job makes the chunks of a stream (else a whole response). */
    readonly streamed: boolean
  ) {
    const states = options.promptStates
    this.prompt =
      states === undefined ? promptWork(model, null, plan.promptIds) : states.prefillWork(model, plan.promptIds)
    this.created = Math.floor((options.now ?? Date.now()) / 1000)
    this.id = `chatcmpl-${options.requestId ?? request.request_id ?? crypto.randomUUID()}`
  }

  /** Whether the prompt has run (the choices decode). */
  get decoding(): boolean {
    return this.prompt === null
  }

  /** Whether every choice has ended (and, streamed, every chunk is made). */
  get finished(): boolean {
    return this.ended
  }

  /**
   * The piece of the prompt to run in the next forward pass, or null once the prompt has run (pulling the
   * prompt's generator as needed; the choices start when it ends).
   */
  nextPiece(): PromptWork<S> | null {
    if (this.prompt === null) return null
    if (this.piece === null) {
      const next = this.prompt.next()
      if (next.done === true) this.begin(next.value)
      else this.piece = next.value
    }
    return this.piece
  }

  /** After a forward pass that ran this job's rows: the piece or the sampled tokens are in the states. */
  ran(): void {
    if (this.prompt !== null) {
      this.piece = null
      this.nextPiece()
    } else for (const run of this.runs) run.pending = -1
  }

  private begin(base: S): void {
    const { model, plan } = this
    this.prompt = null
    const ws = new Workspace(model.vocabSize)
    const promptMark = new Uint8Array(model.vocabSize)
    for (const id of plan.promptIds) if (id >= 0 && id < promptMark.length) promptMark[id] = 1
    for (let i = 0; i < plan.n; i++) {
      const state = i === plan.n - 1 ? base : model.fork(base)
      this.runs.push(new ChoiceRun(model, plan, ws, state, i, promptMark))
    }
    this.promptLogprobs = plan.promptLogprobs === null ? null : this.computePromptLogprobs(plan.promptLogprobs)
    if (this.streamed) this.startStream()
    this.ended = this.runs.every((run) => run.finished)
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

  /** The whole response, once finished. */
  response(): ChatCompletion {
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

  /** The role chunks (and the echo), before any token: one per choice. */
  private startStream(): void {
    const plan = this.plan
    let first = true
    for (const run of this.runs) {
      const extra: Partial<ChatCompletionChunk> =
        first && plan.returnTokenIds ? { prompt_token_ids: [...plan.promptIds] } : {}
      first = false
      this.chunks.push(
        this.chunk(
          [{ index: run.index, delta: { role: plan.role, content: "" }, logprobs: null, finish_reason: null }],
          extra
        )
      )
      if (plan.echo !== "") {
        this.chunks.push(
          this.chunk([{ index: run.index, delta: { content: plan.echo }, logprobs: null, finish_reason: null }])
        )
      }
    }
    // With tools, each choice's text goes through a parser that turns calls into `tool_calls` deltas.
    this.calls = new Map(this.runs.map((run) => [run, plan.parsesToolCalls ? new ToolCallStream() : null]))
  }

  /**
   * One token of every choice still decoding, each from its row of next-token logits (`logitsOf` gives it, or
   * undefined for the choice to ask the model itself); streamed, a chunk per choice, then the usage chunk once
   * every choice has ended.
   */
  sample(logitsOf: (run: ChoiceRun<S>) => Float32Array | undefined): void {
    const plan = this.plan
    for (const run of this.runs) {
      if (run.finished) continue
      const sampled = run.step(logitsOf(run))
      if (!this.streamed) continue
      const end = run.streamable()
      const text = textOf(run.text, run.streamed, end)
      run.streamed = end
      const parser = this.calls.get(run) ?? null
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
        logprobs: plan.logprobs ? { content: sampled?.logprob != null ? [sampled.logprob] : [], refusal: null } : null,
        finish_reason: finishReason
      }
      if (run.finished) choice.stop_reason = run.stopReason
      if (plan.returnTokenIds) choice.token_ids = sampled === null ? [] : [sampled.id]
      this.chunks.push(this.chunk([choice]))
    }
    if (this.runs.every((run) => run.finished)) {
      if (this.streamed && plan.includeUsage) this.chunks.push(this.chunk([], { usage: this.usage() }))
      this.ended = true
      // Nothing reads a choice's state once the job has ended (the prompt cache keeps copies of its own): the
      // model has the memory back now rather than when the states are collected (see `LanguageModel.release`).
      const release = this.model.release
      if (release !== undefined) for (const run of this.runs) release(run.state)
    }
  }
}

let logitsBuffer: Float32Array<ArrayBufferLike> = new Float32Array(0)

/**
 * The cost of running rows at positions `from .. from + n - 1`, in units of about a row's matrix products: 560
 * (a row's products, in units of an attention term) plus one per token it attends to, as `DEFAULT_CHUNK` counts.
 */
const rowsCost = (from: number, n: number): number => n * (560 + from) + (n * (n - 1)) / 2

/**
 * One step of a batch of jobs of one model: one forward pass over the rows they need (the last sampled token of
 * each choice, the next piece of each prompt still running), then one token of every choice still decoding, its
 * logits computed for all of them in one product. Jobs decoding come first, then prompts (as vLLM schedules
 * decodes before prefills), each taken in order while the step's cost (see `rowsCost`; 36,000 is a chunk of
 * `DEFAULT_CHUNK`, some 5-10 ms) fits in `budget`; the first decoding job and the first prompt piece are taken
 * whatever their cost, so both make progress every step. The others wait for a later step. Returns the jobs
 * stepped. A model that cannot batch is run row by row (`extend`, `advance`, `logits`).
 */
export const stepJobs = <S extends DecodeState>(
  model: LanguageModel<S>,
  jobs: Iterable<Job<S>>,
  budget: number = Number.POSITIVE_INFINITY
): Array<Job<S>> => {
  const states: Array<S> = []
  const ids: Array<ArrayLike<number>> = []
  const stepped: Array<Job<S>> = []
  const prompts: Array<Job<S>> = []
  let spent = 0
  for (const job of jobs) {
    if (job.finished) continue
    if (job.nextPiece() !== null) {
      prompts.push(job)
      continue
    }
    let cost = 0
    for (const run of job.runs) if (!run.finished) cost += rowsCost(run.state.length, 1)
    if (stepped.length > 0 && spent + cost > budget) continue
    spent += cost
    for (const run of job.runs) {
      if (run.pending === -1) continue
      states.push(run.state)
      ids.push([run.pending])
    }
    stepped.push(job)
  }
  let pieces = 0
  for (const job of prompts) {
    const piece = job.nextPiece()!
    const cost = rowsCost(piece.state.length, piece.ids.length)
    if (pieces > 0 && spent + cost > budget) continue
    spent += cost
    // A piece of no tokens (a prompt waiting for another's state, see `PrefixCache`) does not take the first slot.
    if (piece.ids.length > 0) pieces += 1
    states.push(piece.state)
    ids.push(piece.ids)
    stepped.push(job)
  }
  const batched = isBatchModel(model)
  if (batched) model.extendMany(states, ids, states.length)
  else {
    for (let i = 0; i < states.length; i++) {
      const piece = ids[i]!
      if (piece.length === 1) model.advance(states[i]!, piece[0]!)
      else (model as ExtendableModel<S>).extend(states[i]!, piece)
    }
  }
  for (const job of stepped) job.ran()
  if (!batched) {
    for (const job of stepped) if (job.decoding && !job.finished) job.sample(() => undefined)
    return stepped
  }
  const sampling: Array<S> = []
  for (const job of stepped) {
    if (!job.decoding || job.finished) continue
    for (const run of job.runs) if (!run.finished) sampling.push(run.state)
  }
  const V = model.vocabSize
  // In the kernels' memory, where the head writes them, shared so that the decoding thread can write some of the
  // rows (see `policy/DecodeThread.ts`).
  if (logitsBuffer.length < sampling.length * V) logitsBuffer = engineFloat32(sampling.length * V * 2)
  const logits = logitsBuffer
  if (sampling.length > 0) model.logitsMany(sampling, logits, sampling.length)
  let row = 0
  for (const job of stepped) {
    if (!job.decoding || job.finished) continue
    // Rows in the order gathered: a choice that ends without a token (masks) still had its row computed.
    job.sample(() => {
      const at = row++
      return logits.subarray(at * V, (at + 1) * V)
    })
  }
  return stepped
}
