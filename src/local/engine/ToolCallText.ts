/**
 * Tool calls out of a completion's text (the format of `constraint/ToolCalls.ts`), whole or as it streams.
 *
 * - `parseToolCalls`: the text before the first call (its separating `\n` left out; null when empty) and the
 *   calls, each its name and its arguments exactly as written; or null when the text has no call, or a call
 *   that is not whole (a completion cut short), in which case the whole text is content, as the convention's
 *   Hermes-style parser has it.
 * - `ToolCallStream`: the same as deltas while the text arrives: content up to where an opener might begin,
 *   then per call a first fragment with its id, type and name and arguments fragments as they are decoded.
 *
 * @since 0.2.0
 */
import type { DeltaToolCall } from "../../api/ChatCompletion.js"
import { CALL_CLOSER, CALL_OPENER } from "./constraint/ToolCalls.js"

/** A call parsed out of the text: the function's name and its JSON arguments as written. */
export interface ParsedCall {
  readonly name: string
  readonly arguments: string
}

/** The content before the calls, and the calls. */
export interface ParsedCalls {
  readonly content: string | null
  readonly calls: ReadonlyArray<ParsedCall>
}

/** A new tool-call id, `call_` and 24 random alphanumerics, as the convention's engines write them. */
export const newCallId = (): string => `call_${crypto.randomUUID().replace(/-/g, "").slice(0, 24)}`

const HEADER = /^\{"name":("(?:[^"\\]|\\.)*"),"arguments":/

/** One call block's JSON (`{"name":…,"arguments":…}`) as a call, or null when it is not one. */
const parseBlock = (json: string): ParsedCall | null => {
  const header = HEADER.exec(json)
  if (header === null || !json.endsWith("}")) return null
  const args = json.slice(header[0].length, -1)
  try {
    const name: unknown = JSON.parse(header[1]!)
    const parsed: unknown = JSON.parse(args)
    if (typeof name !== "string" || typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return null
    return { name, arguments: args }
  } catch {
    return null
  }
}

/** The content and calls of a completion's text, or null when it has no whole call (see the module). */
export const parseToolCalls = (text: string): ParsedCalls | null => {
  const start = text.indexOf(CALL_OPENER)
  if (start === -1) return null
  let content = text.slice(0, start)
  if (content.endsWith("\n")) content = content.slice(0, -1)
  const calls: Array<ParsedCall> = []
  const end = CALL_CLOSER.slice(1)
  let at = start
  for (;;) {
    if (!text.startsWith(`${CALL_OPENER}\n`, at)) return null
    const close = text.indexOf(end, at)
    if (close === -1) return null
    const call = parseBlock(text.slice(at + CALL_OPENER.length + 1, close))
    if (call === null) return null
    calls.push(call)
    at = close + end.length
    if (at === text.length) break
    if (!text.startsWith(`\n${CALL_OPENER}`, at)) return null
    at += 1
  }
  return { content: content === "" ? null : content, calls }
}

/** The increment of a stream: content, and call fragments. */
export interface StreamDelta {
  readonly content: string
  readonly toolCalls: ReadonlyArray<DeltaToolCall>
}

/** The length of the longest suffix of `text` that is a proper prefix of `pattern`. */
const partialSuffix = (text: string, pattern: string): number => {
  for (let k = Math.min(pattern.length - 1, text.length); k > 0; k--) {
    if (text.endsWith(pattern.slice(0, k))) return k
  }
  return 0
}

/**
 * Tool calls as a completion's text streams in (the text of a grammar of `constraint/ToolCalls.ts`): feed it
 * the text as decoded, whole characters at a time; it answers what may be sent so far.
 */
export class ToolCallStream {
  private buffer = ""
  private mode: "text" | "header" | "args" | "closer" | "between" = "text"
  private calls = 0
  private depth = 0
  private inString = false
  private escaped = false

  /** Whether a call has begun. */
  get called(): boolean {
    return this.calls > 0
  }

  /** The delta for more text. */
  push(text: string): StreamDelta {
    this.buffer += text
    let content = ""
    const toolCalls: Array<DeltaToolCall> = []
    for (;;) {
      if (this.mode === "text") {
        const start = this.buffer.indexOf(CALL_OPENER)
        if (start === -1) {
          // Hold back what may yet be the separator and opener of a call.
          const hold = Math.max(partialSuffix(this.buffer, `\n${CALL_OPENER}`), partialSuffix(this.buffer, CALL_OPENER))
          content += this.buffer.slice(0, this.buffer.length - hold)
          this.buffer = this.buffer.slice(this.buffer.length - hold)
          break
        }
        let before = this.buffer.slice(0, start)
        if (before.endsWith("\n")) before = before.slice(0, -1)
        content += before
        this.buffer = this.buffer.slice(start + CALL_OPENER.length)
        this.mode = "header"
      } else if (this.mode === "header") {
        const header = HEADER.exec(this.buffer.startsWith("\n") ? this.buffer.slice(1) : "")
        if (header === null) break
        const name = JSON.parse(header[1]!) as string
        toolCalls.push({ index: this.calls, id: newCallId(), type: "function", function: { name, arguments: "" } })
        this.calls++
        this.buffer = this.buffer.slice(1 + header[0].length)
        this.mode = "args"
        this.depth = 0
        this.inString = false
        this.escaped = false
      } else if (this.mode === "args") {
        let end = -1
        for (let i = 0; i < this.buffer.length; i++) {
          const c = this.buffer[i]
          if (this.inString) {
            if (this.escaped) this.escaped = false
            else if (c === "\\") this.escaped = true
            else if (c === '"') this.inString = false
          } else if (c === '"') this.inString = true
          else if (c === "{" || c === "[") this.depth++
          else if (c === "}" || c === "]") {
            this.depth--
            if (this.depth === 0) {
              end = i + 1
              break
            }
          }
        }
        const piece = end === -1 ? this.buffer : this.buffer.slice(0, end)
        if (piece !== "") toolCalls.push({ index: this.calls - 1, function: { arguments: piece } })
        this.buffer = end === -1 ? "" : this.buffer.slice(end)
        if (end === -1) break
        this.mode = "closer"
      } else if (this.mode === "closer") {
        if (this.buffer.length < CALL_CLOSER.length) break
        this.buffer = this.buffer.slice(CALL_CLOSER.length)
        this.mode = "between"
      } else {
        const next = `\n${CALL_OPENER}`
        if (this.buffer.length < next.length) break
        this.buffer = this.buffer.slice(next.length)
        this.mode = "header"
      }
    }
    return { content, toolCalls: mergeFragments(toolCalls) }
  }

  /** The content held back, once the text has ended (outside a call, it was content after all). */
  finish(): string {
    const rest = this.mode === "text" ? this.buffer : ""
    this.buffer = ""
    return rest
  }
}

/** Fragments of one call next to each other joined (a first fragment and its arguments in one entry). */
const mergeFragments = (fragments: ReadonlyArray<DeltaToolCall>): Array<DeltaToolCall> => {
  const out: Array<DeltaToolCall> = []
  for (const fragment of fragments) {
    const last = out[out.length - 1]
    if (last !== undefined && last.index === fragment.index && fragment.id === undefined) {
      out[out.length - 1] = {
        ...last,
        function: {
          ...last.function,
          arguments: `${last.function?.arguments ?? ""}${fragment.function?.arguments ?? ""}`
        }
      }
    } else out.push(fragment)
  }
  return out
}
