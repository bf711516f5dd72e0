/**
 * A trajectory as a conversation: system, user, assistant, tool calls and tool results each shown as such;
 * the sampled assistant turns with their tokens coloured by logprob (redder is less likely); a button copies
 * the whole text.
 */
import { useState } from "preact/hooks"
import { html, num } from "./html.js"
import type { Choice, Message, TokenLogprob, Trajectory } from "./types.js"

const isChoice = (entry: Message | Choice): entry is Choice =>
  typeof (entry as Choice).message === "object" && (entry as Choice).message !== null

/** The text of a message's content: a string, or the text of its parts. */
const textOf = (content: unknown): string => {
  if (typeof content === "string") return content
  if (Array.isArray(content)) {
    return content
      .map((part: unknown) =>
        typeof part === "object" && part !== null && typeof (part as { text?: unknown }).text === "string"
          ? (part as { text: string }).text
          : ""
      )
      .join("")
  }
  return ""
}

const prettyArguments = (raw: string | undefined): string => {
  if (raw === undefined) return ""
  try {
    return JSON.stringify(JSON.parse(raw), null, 2)
  } catch {
    return raw
  }
}

/** The conversation as plain text, for the clipboard. */
export const transcript = (trajectory: Trajectory): string =>
  (trajectory.messages_and_choices ?? [])
    .map((entry) => {
      const message = isChoice(entry) ? entry.message : entry
      const calls = (message.tool_calls ?? []).map(
        (call) => `  -> ${call.function?.name ?? "?"}(${call.function?.arguments ?? ""})`
      )
      const head = message.role === "tool" ? `tool result (${message.tool_call_id ?? ""})` : (message.role ?? "?")
      return [`${head}: ${textOf(message.content)}`, ...calls].join("\n")
    })
    .join("\n\n")

const shade = (logprob: number): string => {
  const p = Math.exp(logprob)
  return `rgba(220, 38, 38, ${(Math.min(1, Math.max(0, 1 - p)) * 0.55).toFixed(3)})`
}

const Tokens = ({ tokens }: { readonly tokens: ReadonlyArray<TokenLogprob> }) =>
  html`<div class="tokens" aria-label="sampled tokens coloured by logprob">
    ${tokens.map(
      (t) =>
        html`<span class="token" style=${{ background: shade(t.logprob) }} title=${`logprob ${t.logprob.toFixed(3)} (p ${Math.exp(t.logprob).toFixed(3)})`}>${t.token}</span>`
    )}
  </div>`

const Entry = ({ entry }: { readonly entry: Message | Choice }) => {
  const sampled = isChoice(entry)
  const message = sampled ? entry.message : entry
  const role = message.role ?? "unknown"
  const tokens = sampled ? (entry.logprobs?.content ?? null) : null
  const text = textOf(message.content)
  const [showTokens, setShowTokens] = useState(true)
  return html`<li class=${`message ${role}${sampled ? " sampled" : ""}`} data-role=${role}>
    <div class="who">
      ${role === "tool" ? `tool result` : role}
      ${message.tool_call_id ? html` <span class="mono muted">${message.tool_call_id}</span>` : null}
      ${sampled ? html` <span class="tag">sampled${entry.finish_reason ? `, ${entry.finish_reason}` : ""}</span>` : null}
      ${
        tokens !== null && tokens.length > 0
          ? html` <span class="muted legend">tokens: redder is less likely (hover for the logprob)</span>
            <button class="link" onClick=${() => setShowTokens(!showTokens)}>${showTokens ? "plain text" : "tokens"}</button>`
          : null
      }
    </div>
    ${
      tokens !== null && tokens.length > 0 && showTokens
        ? html`<${Tokens} tokens=${tokens} />`
        : text === ""
          ? null
          : html`<div class="text">${text}</div>`
    }
    ${(message.tool_calls ?? []).map(
      (call) => html`<div class="tool-call" data-tool=${call.function?.name ?? ""}>
        <div class="who">tool call <strong>${call.function?.name ?? "?"}</strong> <span class="mono muted">${call.id ?? ""}</span></div>
        <pre>${prettyArguments(call.function?.arguments)}</pre>
      </div>`
    )}
  </li>`
}

export const Conversation = ({ trajectory }: { readonly trajectory: Trajectory }) => {
  const [copied, setCopied] = useState(false)
  const copy = async () => {
    await navigator.clipboard.writeText(transcript(trajectory))
    setCopied(true)
    setTimeout(() => setCopied(false), 1500)
  }
  const metrics = Object.entries(trajectory.metrics ?? {})
  const metadata = Object.entries(trajectory.metadata ?? {})
  return html`<div class="conversation">
    <div class="toolbar">
      <span>reward <strong class="reward">${num(trajectory.reward)}</strong></span>
      ${metrics.map(([k, v]) => html`<span class="kv"><span class="k">${k}</span> ${typeof v === "number" ? num(v) : String(v)}</span>`)}
      <button class="copy" onClick=${copy}>${copied ? "Copied" : "Copy text"}</button>
    </div>
    ${
      metadata.length === 0
        ? null
        : html`<details class="metadata"><summary>metadata</summary><pre>${JSON.stringify(trajectory.metadata, null, 2)}</pre></details>`
    }
    <ol class="messages">
      ${(trajectory.messages_and_choices ?? []).map((entry) => html`<${Entry} entry=${entry} />`)}
    </ol>
    ${(trajectory.logs ?? []).length === 0 ? null : html`<details><summary>logs</summary><pre>${trajectory.logs?.join("\n")}</pre></details>`}
  </div>`
}
