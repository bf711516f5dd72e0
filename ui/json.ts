/**
 * JSON for reading: objects and arrays as collapsible nodes (open near the top), strings as text that wraps,
 * and a button that copies the whole value as pretty JSON.
 */
import { useState } from "preact/hooks"
import { html } from "./html.js"

const OPEN_DEPTH = 3
const MANY = 30

const Leaf = ({ value }: { readonly value: unknown }) => {
  if (typeof value === "string") return html`<span class="j-str">${JSON.stringify(value)}</span>`
  if (typeof value === "number") return html`<span class="j-num">${String(value)}</span>`
  if (typeof value === "boolean" || value === null) return html`<span class="j-lit">${String(value)}</span>`
  return html`<span class="muted">${String(value)}</span>`
}

const Node = ({ value, depth }: { readonly value: unknown; readonly depth: number }) => {
  if (typeof value !== "object" || value === null) return html`<${Leaf} value=${value} />`
  const entries: ReadonlyArray<readonly [string, unknown]> = Array.isArray(value)
    ? value.map((v, i) => [String(i), v] as const)
    : Object.entries(value)
  const [open, close] = Array.isArray(value) ? ["[", "]"] : ["{", "}"]
  if (entries.length === 0) return html`<span class="j-lit">${open}${close}</span>`
  return html`<details class="j-node" open=${depth < OPEN_DEPTH && entries.length <= MANY}>
    <summary><span class="j-lit">${open}</span><span class="j-more"><span class="j-lit"> … ${close}</span> <span
      class="muted">${entries.length} ${Array.isArray(value) ? (entries.length === 1 ? "item" : "items") : entries.length === 1 ? "key" : "keys"}</span></span></summary>
    <ul class="j-entries">
      ${entries.map(
        ([key, v]) => html`<li><span class="j-key">${Array.isArray(value) ? key : JSON.stringify(key)}</span>: <${Node}
          value=${v} depth=${depth + 1} /></li>`
      )}
    </ul>
    <span class="j-lit">${close}</span>
  </details>`
}

/** A titled, collapsible, copyable JSON value. */
export const Json = ({ title, value }: { readonly title: string; readonly value: unknown }) => {
  const [copied, setCopied] = useState(false)
  const copy = async () => {
    await navigator.clipboard.writeText(JSON.stringify(value, null, 2))
    setCopied(true)
    setTimeout(() => setCopied(false), 1500)
  }
  return html`<details class="json" open data-json=${title}>
    <summary><strong>${title}</strong>
      <button class="link json-copy" onClick=${(e: Event) => {
        e.preventDefault()
        void copy()
      }}>${copied ? "Copied" : "Copy JSON"}</button></summary>
    <div class="j-body mono"><${Node} value=${value} depth=${0} /></div>
  </details>`
}
