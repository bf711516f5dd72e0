/**
 * The mutable record a rollout keeps while it runs: its histories (the main conversation first, then any
 * other conversation the agent held, e.g. a sub-agent's), metrics, metadata, logs and usage.
 *
 * Matching a request to a history: a request continues the history whose recorded entries are a prefix of
 * its messages (a recorded choice matches the assistant message the agent sent back: same role, text and
 * tool calls). The longest such history wins; with none, the request starts the main history if that is
 * still empty, else a new additional history.
 */
import * as Data from "effect/Data"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type { ChatCompletion, Choice } from "../../api/ChatCompletion.js"
import type { Message, Tool } from "../../api/ChatMessage.js"
import { contentText } from "../../api/ChatMessage.js"
import type { StoredResponse } from "../../api/ResponsesChat.js"
import type { MessageOrChoice, Metadata } from "../../api/Trajectory.js"
import { entryIssue, FinishReason, isChoice, TRAJECTORY_ROLES } from "../../api/Trajectory.js"

/**
 * A turn the training service would refuse in a trajectory, caught when the rollout records it rather than
 * as a 422 when the step's training job is created, after all of its rollouts were paid for: a sampled
 * choice whose `finish_reason` (or message) it does not take, or a context message of a role it does not
 * take (a custom role, a generic `author` message).
 */
export class InvalidTurn extends Data.TaggedError("InvalidTurn")<{
  /** What was refused: the sampled choice, or a context message. */
  readonly reason: "Choice" | "Message"
  /** The message's index in the request (for `Message`). */
  readonly index?: number | undefined
  /** What was wrong, in words. */
  readonly description: string
}> {
  override get message(): string {
    return this.description
  }
}

const roles: ReadonlySet<string> = new Set(TRAJECTORY_ROLES)

const messageProblem = (message: Message, issue: ParseResult.ParseIssue): string => {
  const role = "role" in message ? message.role : undefined
  if (typeof role !== "string") {
    return "a generic (author) message, which trajectories do not take; send it with a role (system, user, assistant, tool)"
  }
  if (!roles.has(role)) {
    return `role ${JSON.stringify(role)}, which trajectories do not take (only ${TRAJECTORY_ROLES.slice(0, -1).join(", ")} and ${TRAJECTORY_ROLES.at(-1)})`
  }
  return ParseResult.TreeFormatter.formatIssueSync(issue)
}

const choiceProblem = (choice: Choice, issue: ParseResult.ParseIssue): string =>
  Schema.is(FinishReason)(choice.finish_reason)
    ? `its message does not fit a trajectory: ${ParseResult.TreeFormatter.formatIssueSync(issue)}`
    : `finish_reason ${JSON.stringify(choice.finish_reason)}, which trajectories do not take (only ${FinishReason.literals.join(", ")})`

/** Why a message cannot go in a trajectory (`where`: how the error names it), or undefined when it can. */
const refusedMessage = (message: Message, index: number, where: string): InvalidTurn | undefined => {
  const issue = entryIssue(message)
  return issue === undefined
    ? undefined
    : new InvalidTurn({ reason: "Message", index, description: `${where}: ${messageProblem(message, issue)}` })
}

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

/** A request whose messages were checked ({@link Recorder.check}), to record with its choice. */
export interface Checked {
  readonly messages: ReadonlyArray<Message>
  readonly keys: ReadonlyArray<string>
}

/** A running rollout's record. */
export class Recorder {
  readonly histories: Array<History> = [{ entries: [], keys: [], tools: undefined }]
  readonly metrics: Record<string, number | boolean> = {}
  readonly metadata: Record<string, string | number | boolean | null> = {}
  readonly logs: Array<string> = []
  /** The Responses-API responses the agent made with `store` on, by id, for `previous_response_id`. */
  readonly responses = new Map<string, StoredResponse>()
  /**
   * The Responses-API exchanges of the rollout, in order, each the request as the agent sent it and the response
   * it got: the trajectory's `exchanges.responses` (kept beside the chat turns it trains on).
   */
  readonly exchanges: Array<{ readonly request: unknown; readonly response: unknown }> = []
  completions = 0
  promptTokens = 0
  completionTokens = 0

  constructor(metadata?: Metadata | undefined) {
    Object.assign(this.metadata, metadata)
  }

  /** The longest recorded history whose entries the request's messages (by key) continue. */
  private matching(keys: ReadonlyArray<string>): History | undefined {
    let best: History | undefined
    for (const history of this.histories) {
      if (history.keys.length > keys.length || !history.keys.every((key, i) => key === keys[i])) continue
      if (best === undefined || history.keys.length > best.keys.length) best = history
    }
    return best
  }

  /**
   * Checks, before a request is sent, the messages of it that are not recorded yet: the request as a
   * {@link Checked} to {@link record} once its completion comes, or an {@link InvalidTurn} when a message is
   * one a trajectory cannot take. Nothing is recorded here.
   */
  check(messages: ReadonlyArray<Message>): Either.Either<Checked, InvalidTurn> {
    const keys = messages.map((m) => messageKey(m as Message & { readonly role: string }))
    const from = this.matching(keys)?.keys.length ?? 0
    for (let i = from; i < messages.length; i++) {
      const refused = refusedMessage(messages[i]!, i, `message ${i} of the request cannot be recorded in a trajectory`)
      if (refused !== undefined) return Either.left(refused)
    }
    return Either.right({ messages, keys })
  }

  /**
   * Checks a completion's choice as a trajectory takes it: the choice, or an {@link InvalidTurn} naming what
   * the training service would refuse.
   */
  static choiceOf(choice: Choice, completionId: string | undefined): Either.Either<Choice, InvalidTurn> {
    const issue = entryIssue(choice)
    return issue === undefined
      ? Either.right(choice)
      : Either.left(
          new InvalidTurn({
            reason: "Choice",
            description: `the choice of ${completionId === undefined ? "a chat completion" : `chat completion ${completionId}`} cannot be recorded in a trajectory: ${choiceProblem(choice, issue)}`
          })
        )
  }

  /**
   * Records a request and its (checked) choice: the history the request continues (the longest recorded
   * one; the main one while it is still empty; else a new additional history) gets the messages it did not
   * have, then the choice; the completion's usage is counted.
   */
  record(
    request: Checked,
    choice: Choice,
    completion: ChatCompletion,
    tools: ReadonlyArray<Tool> | null | undefined
  ): void {
    let history = this.matching(request.keys)
    if (history === undefined) {
      history = { entries: [], keys: [], tools: undefined }
      this.histories.push(history)
    }
    // Histories only grow, so every message past the one matched now was checked before the request.
    for (let i = history.keys.length; i < request.messages.length; i++) {
      history.entries.push(request.messages[i]!)
      history.keys.push(request.keys[i]!)
    }
    history.entries.push(choice)
    history.keys.push(entryKey(choice))
    if (tools != null) history.tools = tools
    this.completions += 1
    this.promptTokens += completion.usage?.prompt_tokens ?? 0
    this.completionTokens += completion.usage?.completion_tokens ?? 0
  }

  /**
   * Appends messages to the main history (context the model did not see yet, e.g. a final observation); an
   * {@link InvalidTurn} (and nothing appended) when one of them a trajectory cannot take.
   */
  append(messages: ReadonlyArray<Message>): Either.Either<void, InvalidTurn> {
    for (const [i, message] of messages.entries()) {
      const refused = refusedMessage(message, i, `message ${i} cannot be appended to a trajectory`)
      if (refused !== undefined) return Either.left(refused)
    }
    const main = this.histories[0]!
    for (const message of messages) {
      main.entries.push(message)
      main.keys.push(entryKey(message))
    }
    return Either.void
  }
}
