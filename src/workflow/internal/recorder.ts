/**
 * The mutable record a rollout keeps while it runs: its histories (the main conversation first, then any
 * other conversation the agent held, e.g. a sub-agent's), metrics, metadata, logs and usage.
 *
 * Matching a request to a history: a request continues the history whose recorded entries are a prefix of
 * its messages (a recorded choice matches the assistant message the agent sent back: same role, text and
 * tool calls). The longest such history wins; with none, the request starts the main history if that is
 * still empty, else a new additional history.
 */
import type { ChatCompletion, Choice } from "../../api/ChatCompletion.js"
import type { Message, Tool } from "../../api/ChatMessage.js"
import { contentText } from "../../api/ChatMessage.js"
import type { MessageOrChoice, Metadata } from "../../api/Trajectory.js"
import { isChoice } from "../../api/Trajectory.js"

/** One recorded conversation. */
export interface History {
  readonly entries: Array<MessageOrChoice>
  readonly keys: Array<string>
  tools: ReadonlyArray<Tool> | undefined
}

type ToolCallLike = {
  readonly id?: string | undefined
  readonly function?: { readonly name: string; readonly arguments: string } | undefined
  readonly custom?: { readonly name: string; readonly input: string } | undefined
}

const toolCallKey = (calls: unknown): ReadonlyArray<unknown> =>
  Array.isArray(calls)
    ? (calls as ReadonlyArray<ToolCallLike>).map((call) => [
        call.function?.name ?? call.custom?.name ?? null,
        call.function?.arguments ?? call.custom?.input ?? null
      ])
    : []

/** What identifies a message for prefix matching: role, text, tool calls, tool call id and name. */
export const messageKey = (message: {
  readonly role: string
  readonly content?: unknown
  readonly tool_calls?: unknown
  readonly tool_call_id?: unknown
  readonly name?: unknown
}): string =>
  JSON.stringify([
    message.role,
    contentText(message.content),
    toolCallKey(message.tool_calls),
    typeof message.tool_call_id === "string" ? message.tool_call_id : null,
    message.role === "assistant" ? null : typeof message.name === "string" ? message.name : null
  ])

/** The key of a recorded entry (a choice is keyed by its message). */
export const entryKey = (entry: MessageOrChoice): string =>
  isChoice(entry) ? messageKey(entry.message) : messageKey(entry as Message & { readonly role: string })

/** A running rollout's record. */
export class Recorder {
  readonly histories: Array<History> = [{ entries: [], keys: [], tools: undefined }]
  readonly metrics: Record<string, number | boolean> = {}
  readonly metadata: Record<string, string | number | boolean | null> = {}
  readonly logs: Array<string> = []
  completions = 0
  promptTokens = 0
  completionTokens = 0

  constructor(metadata?: Metadata | undefined) {
    Object.assign(this.metadata, metadata)
  }

  /** The history a request's messages continue (created if none), with how many messages it already has. */
  historyFor(messages: ReadonlyArray<Message>): History {
    const keys = messages.map((m) => messageKey(m as Message & { readonly role: string }))
    // The longest recorded history that the request continues; the main one while it is still empty.
    let best: History | undefined
    for (const history of this.histories) {
      if (history.keys.length > keys.length || !history.keys.every((key, i) => key === keys[i])) continue
      if (best === undefined || history.keys.length > best.keys.length) best = history
    }
    if (best === undefined) {
      best = { entries: [], keys: [], tools: undefined }
      this.histories.push(best)
    }
    for (let i = best.keys.length; i < messages.length; i++) {
      best.entries.push(messages[i]!)
      best.keys.push(keys[i]!)
    }
    return best
  }

  /** Records a completion's first choice in a history, and its usage. */
  record(history: History, completion: ChatCompletion, tools: ReadonlyArray<Tool> | null | undefined): Choice {
    const choice = completion.choices[0]
    if (choice === undefined) throw new Error("a chat completion without choices")
    history.entries.push(choice)
    history.keys.push(entryKey(choice))
    if (tools != null) history.tools = tools
    this.completions += 1
    this.promptTokens += completion.usage?.prompt_tokens ?? 0
    this.completionTokens += completion.usage?.completion_tokens ?? 0
    return choice
  }

  /** Appends messages to the main history (context the model did not see yet, e.g. a final observation). */
  append(messages: ReadonlyArray<Message>): void {
    const main = this.histories[0]!
    for (const message of messages) {
      main.entries.push(message)
      main.keys.push(messageKey(message as Message & { readonly role: string }))
    }
  }
}
