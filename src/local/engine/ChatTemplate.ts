/**
 * The local engine's chat template: renders a conversation (every message kind of chat completions) into the token
 * ids the policy reads, and renders a trajectory into a `TrainingSequence` whose context is exactly what the
 * sampler saw as prompt.
 *
 * The built-in format, one block per message:
 *
 * ```text
 * <|im_start|>{role}[ name={name}]\n{body}<|im_end|>\n
 * ```
 *
 * - The body of a message is its content: a string, or its parts in order (a text part is its text, a
 *   refusal part its refusal; an image, audio or file part is a placeholder `[image_url: {url}]`,
 *   `[input_audio: {format}]`, `[file: {filename | file_id}]`; another part with a `text` is that text, else
 *   `[{type}]`). An assistant's `reasoning` (or `reasoning_content`) comes first as
 *   `<think>\n{reasoning}\n</think>\n\n`; a `refusal` stands for empty content; each tool call (and a
 *   deprecated `function_call`) follows as `<tool_call>\n{"name":…,"arguments":…}\n</tool_call>` (a custom
 *   tool call has `"input"`), on its own line; arguments that are JSON are written verbatim (as sampled). A custom-role message's own `tools` follow as a tools section.
 * - The generic (author-based) message has the author's role, `name=` the author's name, and the attributes
 *   ` channel=`, ` recipient=`, ` content_type=` when set; each content object is its `text`, else its JSON.
 * - `tools` and `documents`, when given, come first in a block of their own:
 *   `<|im_start|>system\n# Tools\n{tool JSON per line}\n\n# Documents\n{document JSON per line}<|im_end|>\n`.
 * - `add_generation_prompt` (default true) appends `<|im_start|>assistant\n`; `continue_final_message`
 *   leaves the last message open (no `<|im_end|>\n`, no generation prompt); `add_special_tokens` prepends
 *   `<|bos|>`. Text of messages is tokenized literally (`encode`): special-token texts in content are text.
 *
 * A caller's Jinja `chat_template` is rendered by `@huggingface/jinja` with the variables `messages`,
 * `tools`, `documents`, `add_generation_prompt`, `bos_token`, `eos_token`, then `chat_template_kwargs` (which
 * override them, as the convention's engine does); the output text is tokenized with `encodeWithSpecials`.
 * With `continue_final_message`, the output is cut after the final message's content. A template that does
 * not parse or fails to render is an `EngineError` (`BadRequest`, param `chat_template`).
 *
 * @since 0.1.0
 */
import { Template } from "@huggingface/jinja"
import type { Choice } from "../../api/ChatCompletion.js"
import type { Message, Tool } from "../../api/ChatMessage.js"
import type { JsonObject } from "../../api/Json.js"
import type { EntryChoice, TrajectoryChoice } from "../../api/Trajectory.js"
import { badRequest, type EngineError } from "./EngineError.js"
import type { TrainingSequence } from "./LanguageModel.js"
import {
  BOS,
  EOS,
  encode,
  encodeWithSpecials,
  IM_END,
  IM_START,
  idsOfChoice,
  SPECIAL_TOKENS,
  UnmappableTokenError
} from "./Tokenizer.js"

/** How to render a conversation: the request fields that concern the prompt. */
export interface RenderOptions {
  /** Tools offered to the model: rendered in the leading block. */
  readonly tools?: ReadonlyArray<Tool> | null | undefined
  /** Documents for retrieval-augmented generation: rendered in the leading block. */
  readonly documents?: ReadonlyArray<{ readonly [key: string]: string }> | null | undefined
  /** Append the generation prompt `<|im_start|>assistant\n` (default true). */
  readonly addGenerationPrompt?: boolean | undefined
  /** Leave the final message open so the model continues it (needs `addGenerationPrompt: false`). */
  readonly continueFinalMessage?: boolean | undefined
  /** Prepend `<|bos|>` (default false). */
  readonly addSpecialTokens?: boolean | undefined
  /** A Jinja chat template to use instead of the built-in format. */
  readonly chatTemplate?: string | null | undefined
  /** Extra variables of the Jinja template. */
  readonly chatTemplateKwargs?: JsonObject | null | undefined
}

/** A rendered prompt, and what the sampler needs for `echo`. */
export interface RenderedPrompt {
  /** The prompt's token ids. */
  readonly ids: Array<number>
  /**
   * The role of the response message: `assistant` with the generation prompt, else the last message's role
   * (the model continues that message).
   */
  readonly role: string
  /**
   * What `echo` prepends to each choice's content: the last message's content text when its role is the
   * response role, else `""`.
   */
  readonly echo: string
}

/** The special-token texts the Jinja template receives as `bos_token` and `eos_token`. */
const BOS_TEXT = SPECIAL_TOKENS[0]
const EOS_TEXT = SPECIAL_TOKENS[1]

type Loose = { readonly [key: string]: unknown }

const asLoose = (value: unknown): Loose =>
  value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Loose) : {}

const str = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)

/** The text of one content part (see the module comment for placeholders). */
const partText = (part: unknown): string => {
  if (typeof part === "string") return part
  const p = asLoose(part)
  const type = str(p.type) ?? "part"
  if (type === "text") return str(p.text) ?? ""
  if (type === "refusal") return str(p.refusal) ?? ""
  if (type === "image_url") return `[image_url: ${str(asLoose(p.image_url).url) ?? ""}]`
  if (type === "input_audio") return `[input_audio: ${str(asLoose(p.input_audio).format) ?? ""}]`
  if (type === "file") {
    const file = asLoose(p.file)
    return `[file: ${str(file.filename) ?? str(file.file_id) ?? ""}]`
  }
  const text = str(p.text)
  return text ?? `[${type}]`
}

/** The text of a message's content: a string, or its parts in order. */
const contentOf = (content: unknown): string => {
  if (typeof content === "string") return content
  if (Array.isArray(content)) return content.map(partText).join("")
  return ""
}

/** The text of a generic message's content objects: each one's `text`, else its JSON. */
const genericContentOf = (content: unknown): string => {
  if (!Array.isArray(content)) return ""
  return content
    .map((part) => {
      const text = str(asLoose(part).text)
      return text ?? JSON.stringify(part)
    })
    .join("")
}

/**
 * A call's arguments as written in its block: verbatim when they are JSON (so a call the engine sampled is
 * rendered back byte for byte, and the next turn's prompt holds exactly the tokens the model wrote), else as
 * a JSON string.
 */
const argumentsText = (json: string): string => {
  try {
    JSON.parse(json)
    return json.trim()
  } catch {
    return JSON.stringify(json)
  }
}

const toolCallText = (call: unknown): string => {
  const c = asLoose(call)
  if (c.type === "custom") {
    const custom = asLoose(c.custom)
    return `<tool_call>\n${JSON.stringify({ name: str(custom.name) ?? "", input: str(custom.input) ?? "" })}\n</tool_call>`
  }
  const fn = asLoose(c.function)
  const args = argumentsText(str(fn.arguments) ?? "")
  return `<tool_call>\n{"name":${JSON.stringify(str(fn.name) ?? "")},"arguments":${args}}\n</tool_call>`
}

/** The tools and documents section text (without the block's header and end). */
const toolsSection = (
  tools: ReadonlyArray<unknown> | null | undefined,
  documents: ReadonlyArray<unknown> | null | undefined
): string => {
  const sections: Array<string> = []
  if (tools != null && tools.length > 0) sections.push(`# Tools\n${tools.map((t) => JSON.stringify(t)).join("\n")}`)
  if (documents != null && documents.length > 0) {
    sections.push(`# Documents\n${documents.map((d) => JSON.stringify(d)).join("\n")}`)
  }
  return sections.join("\n\n")
}

const isGeneric = (message: Loose): boolean => !("role" in message) && "author" in message

/** The role of a message (the author's role for the generic message). */
export const roleOf = (message: Message): string => {
  const m = asLoose(message)
  return isGeneric(m) ? (str(asLoose(m.author).role) ?? "user") : (str(m.role) ?? "user")
}

/** The header of a message's block: its role and attributes, as written after `<|im_start|>`. */
const headerOf = (m: Loose): string => {
  if (isGeneric(m)) {
    const author = asLoose(m.author)
    let header = str(author.role) ?? "user"
    const name = str(author.name)
    if (name !== undefined) header += ` name=${name}`
    for (const key of ["channel", "recipient", "content_type"] as const) {
      const value = str(m[key])
      if (value !== undefined) header += ` ${key}=${value}`
    }
    return header
  }
  let header = str(m.role) ?? "user"
  const name = str(m.name)
  if (name !== undefined) header += ` name=${name}`
  // A tool result's `tool_call_id` is not written (as in the Hermes format, results follow their calls in
  // order): the ids are random, so the model could learn nothing from them, and the same conversation would
  // render differently each time it is sampled.
  return header
}

/**
 * The body of a message (or of a choice's message) in the built-in format: reasoning, content (or refusal),
 * tool calls, and a custom-role message's tools.
 */
export const messageBody = (message: unknown): string => {
  const m = asLoose(message)
  if (isGeneric(m)) return genericContentOf(m.content)
  let body = ""
  const reasoning = str(m.reasoning) ?? str(m.reasoning_content)
  if (reasoning !== undefined && reasoning !== "") body += `<think>\n${reasoning}\n</think>\n\n`
  let content = contentOf(m.content)
  if (content === "") content = str(m.refusal) ?? ""
  body += content
  const calls: Array<string> = []
  if (Array.isArray(m.tool_calls)) for (const call of m.tool_calls) calls.push(toolCallText(call))
  if (m.function_call != null) calls.push(toolCallText({ type: "function", function: m.function_call }))
  for (const call of calls) body += body === "" ? call : `\n${call}`
  if (Array.isArray(m.tools) && m.tools.length > 0) {
    const section = toolsSection(m.tools, undefined)
    body += body === "" ? section : `\n\n${section}`
  }
  return body
}

/** The content text `echo` would prepend: a message's content (text parts), without reasoning or tool calls. */
const echoTextOf = (message: Message): string => {
  const m = asLoose(message)
  return isGeneric(m) ? genericContentOf(m.content) : contentOf(m.content)
}

const newline = encode("\n")

/** Append a message block's tokens; `open` leaves it unterminated (`continue_final_message`). */
const pushMessage = (out: Array<number>, message: unknown, open: boolean): void => {
  const m = asLoose(message)
  out.push(IM_START)
  for (const b of encode(`${headerOf(m)}\n${messageBody(m)}`)) out.push(b)
  if (!open) out.push(IM_END, ...newline)
}

/** Append the leading tools/documents block, if there is anything to put in it. */
const pushToolsBlock = (
  out: Array<number>,
  tools: ReadonlyArray<unknown> | null | undefined,
  documents: ReadonlyArray<unknown> | null | undefined
): void => {
  const section = toolsSection(tools, documents)
  if (section === "") return
  out.push(IM_START)
  for (const b of encode(`system\n${section}`)) out.push(b)
  out.push(IM_END, ...newline)
}

/** The generation prompt's tokens: `<|im_start|>assistant\n`. */
export const GENERATION_PROMPT: ReadonlyArray<number> = [IM_START, ...encode("assistant\n")]

const templateError = (stage: string, cause: unknown): EngineError =>
  badRequest(
    "chat_template",
    `The chat template could not be ${stage}: ${cause instanceof Error ? cause.message : String(cause)}`
  )

/** Render a Jinja chat template to text (throws `EngineError` when it fails). */
const renderJinja = (
  source: string,
  messages: ReadonlyArray<Message>,
  options: RenderOptions,
  addGenerationPrompt: boolean
): string => {
  let template: Template
  try {
    template = new Template(source)
  } catch (cause) {
    throw templateError("parsed", cause)
  }
  const variables: Record<string, unknown> = {
    messages,
    tools: options.tools ?? null,
    documents: options.documents ?? null,
    add_generation_prompt: addGenerationPrompt,
    bos_token: BOS_TEXT,
    eos_token: EOS_TEXT,
    ...(options.chatTemplateKwargs ?? {})
  }
  let text: string
  try {
    text = template.render(variables)
  } catch (cause) {
    throw templateError("rendered", cause)
  }
  if (options.continueFinalMessage === true) {
    const last = messages[messages.length - 1]!
    const final = echoTextOf(last).trim()
    const at = text.lastIndexOf(final)
    if (at < 0) {
      throw badRequest(
        "continue_final_message",
        "continue_final_message is set but the final message does not appear in the output of the chat template"
      )
    }
    if (text.slice(at).trim() !== final) text = text.slice(0, at + final.length)
  }
  return text
}

/**
 * Render a conversation into prompt token ids (see the module comment for the format). Throws an
 * `EngineError` for a template that fails, for `continue_final_message` with the generation prompt or
 * without messages.
 */
export const renderPrompt = (messages: ReadonlyArray<Message>, options: RenderOptions = {}): RenderedPrompt => {
  const continueFinal = options.continueFinalMessage === true
  const addGenerationPrompt = options.addGenerationPrompt ?? true
  if (continueFinal && addGenerationPrompt) {
    throw badRequest(
      "continue_final_message",
      "continue_final_message cannot be combined with add_generation_prompt (which defaults to true): set add_generation_prompt to false"
    )
  }
  if (continueFinal && messages.length === 0) {
    throw badRequest("continue_final_message", "continue_final_message needs a final message to continue")
  }
  const ids: Array<number> = []
  if (options.addSpecialTokens === true) ids.push(BOS)
  if (options.chatTemplate != null) {
    for (const id of encodeWithSpecials(renderJinja(options.chatTemplate, messages, options, addGenerationPrompt))) {
      ids.push(id)
    }
  } else {
    pushToolsBlock(ids, options.tools, options.documents)
    messages.forEach((message, i) => {
      pushMessage(ids, message, continueFinal && i === messages.length - 1)
    })
    if (addGenerationPrompt) ids.push(...GENERATION_PROMPT)
  }
  const last = messages[messages.length - 1]
  const role = addGenerationPrompt || last === undefined ? "assistant" : roleOf(last)
  const echo = last !== undefined && roleOf(last) === role ? echoTextOf(last) : ""
  return { ids, role, echo }
}

/**
 * An entry of a trajectory: a context message, or a choice (a sampled, trainable assistant turn; its tool calls
 * function or custom ones).
 */
export type MessageOrChoice = Message | Choice | EntryChoice | TrajectoryChoice

const isChoiceEntry = (entry: MessageOrChoice): entry is Choice | EntryChoice | TrajectoryChoice =>
  "message" in entry && "index" in entry

/** The ids and recorded logprobs of a choice's sampled tokens (logprobs NaN where unknown). */
const sampledOf = (
  choice: Choice | EntryChoice | TrajectoryChoice,
  at: number
): { ids: Array<number>; logprobs: Array<number>; readonly written?: true } => {
  const content = choice.logprobs?.content ?? null
  try {
    if (choice.token_ids != null) {
      const ids = idsOfChoice(choice)
      const aligned = content !== null && content.length === ids.length
      return { ids, logprobs: ids.map((_, i) => (aligned ? content[i]!.logprob : Number.NaN)) }
    }
    if (content !== null && content.length > 0) {
      const ids: Array<number> = []
      const logprobs: Array<number> = []
      for (const entry of content) {
        const entryIds = idsOfChoice({ logprobs: { content: [entry] } })
        for (const id of entryIds) {
          ids.push(id)
          logprobs.push(entryIds.length === 1 ? entry.logprob : Number.NaN)
        }
      }
      return { ids, logprobs }
    }
  } catch (cause) {
    if (cause instanceof UnmappableTokenError) {
      throw badRequest(
        "messages_and_choices",
        `messages_and_choices[${at}].logprobs.content[${cause.index}]: ${cause.message}`
      )
    }
    throw cause
  }
  const ids = encode(messageBody(choice.message))
  return { ids, logprobs: ids.map(() => Number.NaN), written: true }
}

/**
 * Render a trajectory (context messages and choices, in order) for training. Context messages are rendered
 * exactly as `renderPrompt` renders them (mask 0), preceded by the tools block when `tools` are given. Each
 * choice is `<|im_start|>assistant\n` (mask 0), its sampled ids (from `token_ids`, else its logprob tokens;
 * mask 1, logprobs as recorded, NaN when absent), then, when it ended (`finish_reason` other than `length`
 * and null) without its ids ending in `<|im_end|>` or `<|eos|>`, an `<|im_end|>` (mask 0: it was not
 * sampled), then `\n` (mask 0). A choice with neither token ids nor logprobs (a written turn, as in SFT
 * data) falls back to tokenizing its message body, and its `<|im_end|>` is learned with it (mask 1, logprobs
 * NaN), so a model trained on it learns where a turn ends. Throws `EngineError` when a recorded token is not
 * a token of this tokenizer.
 *
 * It assumes the prompts were rendered by the built-in format with the generation prompt, without
 * `add_special_tokens` or a Jinja `chat_template` (the trajectory does not record those).
 */
export const renderTrajectory = (
  messagesAndChoices: ReadonlyArray<MessageOrChoice>,
  tools?: ReadonlyArray<Tool> | null
): TrainingSequence => {
  const ids: Array<number> = []
  const mask: Array<number> = []
  const logprobs: Array<number> = []
  const context = (from: number) => {
    for (let i = from; i < ids.length; i++) {
      mask.push(0)
      logprobs.push(Number.NaN)
    }
  }
  pushToolsBlock(ids, tools, undefined)
  context(0)
  messagesAndChoices.forEach((entry, at) => {
    if (!isChoiceEntry(entry)) {
      const from = ids.length
      pushMessage(ids, entry, false)
      context(from)
      return
    }
    let from = ids.length
    ids.push(...GENERATION_PROMPT)
    context(from)
    const sampled = sampledOf(entry, at)
    for (let i = 0; i < sampled.ids.length; i++) {
      ids.push(sampled.ids[i]!)
      mask.push(1)
      logprobs.push(sampled.logprobs[i]!)
    }
    const last = sampled.ids[sampled.ids.length - 1]
    const ended = entry.finish_reason != null && entry.finish_reason !== "length"
    if (ended && last !== IM_END && last !== EOS) {
      ids.push(IM_END)
      mask.push(sampled.written === true ? 1 : 0)
      logprobs.push(Number.NaN)
    }
    from = ids.length
    ids.push(...newline)
    context(from)
  })
  return { ids: Int32Array.from(ids), mask: Uint8Array.from(mask), logprobs: Float32Array.from(logprobs) }
}

/** The render options of a chat-completions request's fields. */
export const renderOptionsOf = (request: {
  readonly tools?: ReadonlyArray<Tool> | null | undefined
  readonly documents?: ReadonlyArray<{ readonly [key: string]: string }> | null | undefined
  readonly add_generation_prompt?: boolean | undefined
  readonly continue_final_message?: boolean | undefined
  readonly add_special_tokens?: boolean | undefined
  readonly chat_template?: string | null | undefined
  readonly chat_template_kwargs?: JsonObject | null | undefined
}): RenderOptions => ({
  tools: request.tools,
  documents: request.documents,
  addGenerationPrompt: request.add_generation_prompt,
  continueFinalMessage: request.continue_final_message,
  addSpecialTokens: request.add_special_tokens,
  chatTemplate: request.chat_template,
  chatTemplateKwargs: request.chat_template_kwargs
})
