/**
 * A trace: its calls as a tree (expand and collapse; arrow keys move, Right and Left open and close, Enter
 * toggles), each with its latency (and a bar placing it in the trace's time), tokens, status and reward; the
 * chosen call in full beside it: exception, times, usage per model, feedback, and its inputs, output,
 * attributes and summary as JSON.
 */
import { useEffect, useMemo, useRef, useState } from "preact/hooks"
import { get } from "./api.js"
import { html, num, time } from "./html.js"
import { Json } from "./json.js"
import { CallStatus, latency, nameOf, rewardOf, Tokens } from "./traces.js"
import type { CallDetail, CallSummary, TraceTree } from "./types.js"

/** Every call of a small trace starts open; in a big one, the root and the way to the chosen call. */
const OPEN_ALL = 60

const Detail = ({ project, id }: { readonly project: string; readonly id: string }) => {
  const [call, setCall] = useState<CallDetail | null>(null)
  const [error, setError] = useState<string | null>(null)
  useEffect(() => {
    const abort = new AbortController()
    setCall(null)
    get<CallDetail>(
      `/v1/local/trace/calls/${encodeURIComponent(id)}?project=${encodeURIComponent(project)}`,
      abort.signal
    )
      .then(setCall)
      .catch((e: Error) => abort.signal.aborted || setError(e.message))
    return () => abort.abort()
  }, [project, id])
  if (error !== null) return html`<p class="error" role="alert">${error}</p>`
  if (call === null) return html`<p class="muted">Loading…</p>`
  const usage = Object.entries(call.usage ?? {})
  return html`<div class="call-detail" data-call=${call.id}>
    <h2>${nameOf(call)} <span class="muted mono">${call.op_name}</span></h2>
    <div class="facts">
      <${CallStatus} call=${call} />
      <span class="kv"><span class="k">latency</span> ${latency(call.latency_ms)}</span>
      <span class="kv"><span class="k">started</span> ${time(call.started_at)}</span>
      <span class="kv"><span class="k">tokens</span> <${Tokens} usage=${call.usage} /></span>
      <span class="kv mono muted" title="call id">${call.id}</span>
    </div>
    ${call.exception === null ? null : html`<pre class="exception" role="alert">${call.exception}</pre>`}
    ${
      usage.length === 0
        ? null
        : html`<ul class="usage" aria-label="token usage by model">${usage.map(
            ([model, u]) => html`<li><span class="mono model">${model}</span>
              <span>${`${u.prompt_tokens} prompt · ${u.completion_tokens} completion · ${u.total_tokens} tokens · ${u.requests} request${u.requests === 1 ? "" : "s"}`}</span></li>`
          )}</ul>`
    }
    ${
      call.feedback.length === 0
        ? null
        : html`<div class="feedback">${call.feedback.map(
            (f) => html`<div class="fb" data-feedback=${f.feedback_type}>
              <strong>${f.feedback_type}</strong>
              ${f.feedback_type === "reward" ? html` <span class="reward-value">${num(rewardOf(call))}</span>` : null}
              <${Json} title=${`${f.feedback_type} feedback`} value=${f.payload} />
            </div>`
          )}</div>`
    }
    <${Json} title="inputs" value=${call.inputs} />
    <${Json} title="output" value=${call.output} />
    <${Json} title="attributes" value=${call.attributes} />
    <${Json} title="summary" value=${call.summary} />
  </div>`
}

export const Trace = ({ project, callId }: { readonly project: string; readonly callId: string }) => {
  const [tree, setTree] = useState<TraceTree | null>(null)
  const [error, setError] = useState<string | null>(null)
  const [chosen, setChosen] = useState(callId)
  const [open, setOpen] = useState<ReadonlySet<string>>(new Set())
  const treeRef = useRef<HTMLUListElement>(null)

  useEffect(() => {
    const abort = new AbortController()
    get<TraceTree>(
      `/v1/local/trace/calls/${encodeURIComponent(callId)}/tree?project=${encodeURIComponent(project)}`,
      abort.signal
    )
      .then((next) => {
        const byId = new Map(next.calls.map((c) => [c.id, c]))
        const opened = new Set<string>()
        if (next.calls.length <= OPEN_ALL) for (const c of next.calls) opened.add(c.id)
        for (const c of next.calls) if (c.parent_id === null) opened.add(c.id)
        for (let up = byId.get(callId)?.parent_id ?? null; up !== null; up = byId.get(up)?.parent_id ?? null) {
          opened.add(up)
        }
        setOpen(opened)
        setTree(next)
      })
      .catch((e: Error) => abort.signal.aborted || setError(e.message))
    return () => abort.abort()
  }, [project, callId])

  const shape = useMemo(() => {
    const children = new Map<string | null, Array<CallSummary>>()
    const ids = new Set(tree?.calls.map((c) => c.id) ?? [])
    for (const c of tree?.calls ?? []) {
      // A call whose parent is not in the answer (cut, or deleted) shows at the top.
      const parent = c.parent_id !== null && ids.has(c.parent_id) ? c.parent_id : null
      children.set(parent, [...(children.get(parent) ?? []), c])
    }
    const calls = tree?.calls ?? []
    const start = Math.min(...calls.map((c) => Date.parse(c.started_at)))
    const end = Math.max(...calls.map((c) => Date.parse(c.ended_at ?? c.started_at)))
    return { children, byId: new Map(calls.map((c) => [c.id, c])), start, span: Math.max(1, end - start) }
  }, [tree])

  /** The calls shown, in order: each open call's children after it. */
  const visible = useMemo(() => {
    const out: Array<CallSummary> = []
    const walk = (parent: string | null) => {
      for (const c of shape.children.get(parent) ?? []) {
        out.push(c)
        if (open.has(c.id)) walk(c.id)
      }
    }
    walk(null)
    return out
  }, [shape, open])

  useEffect(() => {
    const row = treeRef.current?.querySelector<HTMLElement>(`[data-id="${CSS.escape(chosen)}"]`)
    if (row !== null && row !== undefined && treeRef.current?.contains(document.activeElement)) row.focus()
  }, [chosen, visible])

  if (error !== null) return html`<p class="error" role="alert">${error}</p>`
  if (tree === null) return html`<p class="muted">Loading…</p>`

  const toggle = (id: string, to?: boolean) => {
    const next = new Set(open)
    if (to ?? !next.has(id)) next.add(id)
    else next.delete(id)
    setOpen(next)
  }
  const onKey = (event: KeyboardEvent) => {
    const at = visible.findIndex((c) => c.id === chosen)
    const here = visible[at]
    if (here === undefined) return
    const kids = shape.children.get(here.id) ?? []
    const move = (to: CallSummary | undefined) => to !== undefined && setChosen(to.id)
    const keys: Record<string, () => void> = {
      ArrowDown: () => move(visible[at + 1]),
      ArrowUp: () => move(visible[at - 1]),
      Home: () => move(visible[0]),
      End: () => move(visible[visible.length - 1]),
      ArrowRight: () => (kids.length > 0 && !open.has(here.id) ? toggle(here.id, true) : move(kids[0])),
      ArrowLeft: () =>
        kids.length > 0 && open.has(here.id)
          ? toggle(here.id, false)
          : move(here.parent_id === null ? undefined : shape.byId.get(here.parent_id)),
      Enter: () => kids.length > 0 && toggle(here.id),
      " ": () => kids.length > 0 && toggle(here.id)
    }
    const act = keys[event.key]
    if (act === undefined) return
    event.preventDefault()
    act()
  }

  const bar = (c: CallSummary) => {
    const from = Date.parse(c.started_at) - shape.start
    const to = Date.parse(c.ended_at ?? c.started_at) - shape.start
    return {
      left: `${((from / shape.span) * 100).toFixed(2)}%`,
      width: `max(2px, ${(((to - from) / shape.span) * 100).toFixed(2)}%)`
    }
  }

  // A plain function, not a component: the rows keep their elements (and focus) across renders.
  const item = (call: CallSummary, level: number): unknown => {
    const kids = shape.children.get(call.id) ?? []
    const isOpen = open.has(call.id)
    const reward = rewardOf(call)
    return html`<li key=${call.id} role="treeitem" aria-level=${level} aria-selected=${call.id === chosen}
        aria-expanded=${kids.length === 0 ? undefined : isOpen} data-op=${call.op_name}>
      <div class=${`row${call.id === chosen ? " chosen" : ""}`} data-id=${call.id} tabIndex=${call.id === chosen ? 0 : -1}
        style=${{ paddingLeft: `${(level - 1) * 16 + 4}px` }} onClick=${() => setChosen(call.id)}>
        <span class="twisty" aria-hidden="true" onClick=${(e: Event) => {
          e.stopPropagation()
          if (kids.length > 0) toggle(call.id)
        }}>${kids.length === 0 ? "" : isOpen ? "▾" : "▸"}</span>
        <span class="name">${nameOf(call)}</span>
        ${kids.length > 0 && !isOpen ? html`<span class="muted">(${kids.length})</span>` : null}
        <span class="cells">
          ${reward === null ? null : html`<span class="tag reward-tag" title="reward feedback">reward ${num(reward)}</span>`}
          ${call.status === "success" ? null : html`<${CallStatus} call=${call} />`}
          <span class="tok"><${Tokens} usage=${call.usage} /></span>
          <span class="lat">${latency(call.latency_ms)}</span>
          <span class="wf" aria-hidden="true"><span class=${`wf-bar ${call.status}`} style=${bar(call)}></span></span>
        </span>
      </div>
      ${kids.length > 0 && isOpen ? html`<ul role="group">${kids.map((k) => item(k, level + 1))}</ul>` : null}
    </li>`
  }

  const root = tree.calls.find((c) => c.parent_id === null) ?? tree.calls[0]
  return html`<nav class="crumbs"><a href="#/traces">Traces</a> / <a href=${`#/traces/${encodeURIComponent(project)}`}>${project}</a> / trace</nav>
    <header class="title">
      <h1>${root === undefined ? "Trace" : nameOf(root)}</h1>
      <span>${tree.calls.length} calls</span>
      ${
        root === undefined
          ? null
          : html`<span>latency <strong>${latency(root.latency_ms)}</strong></span>
        <span>tokens <strong><${Tokens} usage=${root.usage} /></strong></span>`
      }
      <span class="muted mono">${tree.trace_id}</span>
    </header>
    ${tree.truncated ? html`<p class="error" role="status">This trace has more calls than are shown: its first ${tree.calls.length}, by start.</p>` : null}
    <div class="split trace-split">
      <section class="card">
        <p class="muted hint">↑ ↓ move, → ← open and close, Enter toggles</p>
        <ul class="call-tree" role="tree" aria-label="calls of the trace" ref=${treeRef} onKeyDown=${onKey}>
          ${(shape.children.get(null) ?? []).map((c) => item(c, 1))}
        </ul>
      </section>
      <section class="card detail" aria-live="polite"><${Detail} key=${chosen} project=${project} id=${chosen} /></section>
    </div>`
}
