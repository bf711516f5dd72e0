/**
 * The chunks of a streamed chat completion joined into the `ChatCompletion` the same request returns unstreamed:
 * what `ChatStream.collect` gives a client, and what the embedded trace server records for a streamed
 * `completions/create_stream` call. Pure: chunks in, one completion out.
 *
 * @internal
 */
import type {
  ChatCompletion,
  ChatCompletionChunk,
  Choice,
  ChoiceLogprobs,
  ChunkChoice,
  ResponseToolCall,
  TokenLogprob,
  Usage
} from "../ChatCompletion.js"

/** `items` added to the end of `list` (made when undefined); the list. */
const appended = <T>(list: Array<T> | undefined, items: ReadonlyArray<T>): Array<T> => {
  const out = list ?? []
  for (const item of items) out.push(item)
  return out
}

/** A tool call being joined. */
interface JoinedToolCall {
  id: string | undefined
  name: string
  arguments: string
}

/** A choice being joined. */
class JoinedChoice {
  role: string | undefined
  content: Array<string> | undefined
  refusal: Array<string> | undefined
  reasoning: Array<string> | undefined
  reasoningContent: Array<string> | undefined
  readonly toolCalls = new Map<number, JoinedToolCall>()
  logprobs: { content: Array<TokenLogprob> | undefined; refusal: Array<TokenLogprob> | undefined } | undefined
  tokenIds: Array<number> | undefined
  finishReason: string | null = null
  stopReason: number | string | null | undefined

  constructor(readonly index: number) {}

  add(choice: ChunkChoice): void {
    const delta = choice.delta
    if (delta.role != null) this.role = delta.role
    if (delta.content != null) this.content = appended(this.content, [delta.content])
    if (delta.refusal != null) this.refusal = appended(this.refusal, [delta.refusal])
    if (delta.reasoning != null) this.reasoning = appended(this.reasoning, [delta.reasoning])
    if (delta.reasoning_content != null) {
      this.reasoningContent = appended(this.reasoningContent, [delta.reasoning_content])
    }
    for (const call of delta.tool_calls ?? []) {
      let joined = this.toolCalls.get(call.index)
      if (joined === undefined) {
        joined = { id: undefined, name: "", arguments: "" }
        this.toolCalls.set(call.index, joined)
      }
      if (call.id != null) joined.id = call.id
      if (call.function?.name != null) joined.name = call.function.name
      if (call.function?.arguments != null) joined.arguments += call.function.arguments
    }
    if (choice.logprobs != null) {
      // (Mutation testing: `{}` here is an equivalent mutant: an absent key reads as undefined, and this object never
      // leaves the class, `choice()` builds its own.)
      const logprobs = this.logprobs ?? { content: undefined, refusal: undefined }
      this.logprobs = logprobs
      if (choice.logprobs.content != null) logprobs.content = appended(logprobs.content, choice.logprobs.content)
      if (choice.logprobs.refusal != null) logprobs.refusal = appended(logprobs.refusal, choice.logprobs.refusal)
    }
    if (choice.token_ids != null) this.tokenIds = appended(this.tokenIds, choice.token_ids)
    if (choice.finish_reason != null) this.finishReason = choice.finish_reason
    // (Mutation testing: `if (true)` here is an equivalent mutant for streams as servers send them, where the stop
    // reason comes on a choice's last chunk, with its finish reason.)
    if (choice.stop_reason !== undefined) this.stopReason = choice.stop_reason
  }

  /** The content: null when no delta had any, or when a message of tool calls has no text (as unstreamed). */
  private text(calls: boolean): string | null {
    if (this.content === undefined) return null
    const text = this.content.join("")
    return text === "" && calls ? null : text
  }

  choice(): Choice {
    const toolCalls = [...this.toolCalls]
      .sort(([a], [b]) => a - b)
      .map(
        ([, call]): ResponseToolCall => ({
          ...(call.id === undefined ? {} : { id: call.id }),
          type: "function",
          function: { name: call.name, arguments: call.arguments }
        })
      )
    const logprobs: ChoiceLogprobs | null =
      this.logprobs === undefined
        ? null
        : { content: this.logprobs.content ?? null, refusal: this.logprobs.refusal ?? null }
    return {
      index: this.index,
      message: {
        role: this.role ?? "assistant",
        content: this.text(toolCalls.length > 0),
        refusal: this.refusal === undefined ? null : this.refusal.join(""),
        ...(this.reasoning === undefined ? {} : { reasoning: this.reasoning.join("") }),
        ...(this.reasoningContent === undefined ? {} : { reasoning_content: this.reasoningContent.join("") }),
        ...(toolCalls.length === 0 ? {} : { tool_calls: toolCalls })
      },
      logprobs,
      finish_reason: this.finishReason,
      ...(this.stopReason === undefined ? {} : { stop_reason: this.stopReason }),
      ...(this.tokenIds === undefined ? {} : { token_ids: this.tokenIds })
    }
  }
}

const NO_USAGE: Usage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 }

/** The chunks of one streamed completion, joined as they are added. */
export class ChunkJoin {
  private first: ChatCompletionChunk | undefined
  private lastUsage: Usage | undefined
  private promptTokenIds: ReadonlyArray<number> | undefined
  private readonly choices = new Map<number, JoinedChoice>()

  /** The usage chunk's usage, once one came. */
  get usage(): Usage | undefined {
    return this.lastUsage
  }

  /** Adds the next chunk. */
  add(chunk: ChatCompletionChunk): void {
    this.first ??= chunk
    if (chunk.usage != null) this.lastUsage = chunk.usage
    if (chunk.prompt_token_ids != null) this.promptTokenIds = chunk.prompt_token_ids
    for (const choice of chunk.choices) {
      let joined = this.choices.get(choice.index)
      if (joined === undefined) {
        joined = new JoinedChoice(choice.index)
        this.choices.set(choice.index, joined)
      }
      joined.add(choice)
    }
  }

  /** The completion the chunks so far make; `undefined` before the first chunk. */
  completion(): ChatCompletion | undefined {
    const first = this.first
    if (first === undefined) return undefined
    return {
      id: first.id,
      object: "chat.completion",
      created: first.created,
      model: first.model,
      choices: [...this.choices.values()].sort((a, b) => a.index - b.index).map((choice) => choice.choice()),
      usage: this.lastUsage ?? NO_USAGE,
      ...(this.promptTokenIds === undefined ? {} : { prompt_token_ids: this.promptTokenIds })
    }
  }
}
