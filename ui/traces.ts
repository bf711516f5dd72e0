/**
 * The traces pages' lists: the traced projects, and a project's traces (root calls), latest first, a page at
 * a time; plus the small parts the trace page shares (latency, tokens, status, reward).
 */
import { useEffect, useState } from "preact/hooks"
import { get } from "./api.js"
import { html, num, time } from "./html.js"
import type { CallSummary, ModelUsage, TraceProject, TraceRoot } from "./types.js"

const PAGE = 50

/** A latency for reading: ms under a second, else seconds. */
export const latency = (ms: number | null): string =>
  ms === null ? "—" : ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`

/** The tokens of a usage, all models added up. */
export const tokens = (usage: CallSummary["usage"]) => {
  if (usage === null) return null
  const all = Object.values(usage).reduce<ModelUsage>(
    (a, u) => ({
      prompt_tokens: a.prompt_tokens + u.prompt_tokens,
      completion_tokens: a.completion_tokens + u.completion_tokens,
      total_tokens: a.total_tokens + (u.total_tokens || u.prompt_tokens + u.completion_tokens),
      requests: a.requests + u.requests
    }),
    { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, requests: 0 }
  )
  return all
}

export const Tokens = ({ usage }: { readonly usage: CallSummary["usage"] }) => {
  const t = tokens(usage)
  if (t === null) return html`<span class="muted">—</span>`
  return html`<span class="tokens-used" title=${`${t.prompt_tokens} prompt + ${t.completion_tokens} completion tokens, ${t.requests} request${t.requests === 1 ? "" : "s"}`}
    >${t.total_tokens} tok</span>`
}

export const CallStatus = ({ call }: { readonly call: CallSummary }) =>
  html`<span class=${`status ${call.status === "success" ? "succeeded" : call.status === "error" ? "failed" : "running"}`}
    title=${call.exception ?? ""}>${call.status}</span>`

/** The reward feedback on a call (the workflow's `reward`), if any. */
export const rewardOf = (call: CallSummary): number | null => {
  const found = [...call.feedback].reverse().find((f) => f.feedback_type === "reward")
  const reward = (found?.payload as { reward?: unknown } | undefined)?.reward
  return typeof reward === "number" ? reward : null
}

export const nameOf = (call: CallSummary): string => call.display_name ?? call.op_name

/** The link to a trace, by any of its calls. */
export const traceHref = (project: string, callId: string): string =>
  `#/trace/${encodeURIComponent(project)}/${encodeURIComponent(callId)}`

export const TraceProjects = () => {
  const [projects, setProjects] = useState<ReadonlyArray<TraceProject> | null>(null)
  const [error, setError] = useState<string | null>(null)
  useEffect(() => {
    get<{ data: ReadonlyArray<TraceProject> }>("/v1/local/trace/projects")
      .then((body) => setProjects(body.data))
      .catch((e: Error) => setError(e.message))
  }, [])
  if (error !== null) return html`<p class="error" role="alert">${error}</p>`
  if (projects === null) return html`<p class="muted">Loading…</p>`
  return html`<h1>Traces</h1>
    ${
      projects.length === 0
        ? // htm drops a text's leading or trailing whitespace that holds a line break: the space is a value.
          html`<p class="empty">No traces yet: trace a loop into this server (<code>Tracing.layer</code>, or${" "}
            <code>effect-rl train minimal --trace my-team/minimal</code>).</p>`
        : html`<section class="card"><div class="scroll-x"><table class="trace-projects">
          <thead><tr><th>Project</th><th class="n">Traces</th><th class="n">Calls</th><th>Latest call</th></tr></thead>
          <tbody>${projects.map(
            (p) => html`<tr>
              <td><a href=${`#/traces/${encodeURIComponent(p.project_id)}`}>${p.project_id}</a></td>
              <td class="n">${p.traces}</td><td class="n">${p.calls}</td><td>${time(p.latest_started_at)}</td>
            </tr>`
          )}</tbody>
        </table></div></section>`
    }`
}

export const TraceList = ({ project }: { readonly project: string }) => {
  // The cursors of the pages seen so far: the first page has none.
  const [cursors, setCursors] = useState<ReadonlyArray<string | null>>([null])
  const [page, setPage] = useState<{ data: ReadonlyArray<TraceRoot>; next_cursor: string | null } | null>(null)
  const [error, setError] = useState<string | null>(null)
  const cursor = cursors[cursors.length - 1] ?? null
  useEffect(() => {
    const abort = new AbortController()
    const query = `project=${encodeURIComponent(project)}&limit=${PAGE}${cursor === null ? "" : `&cursor=${cursor}`}`
    get<{ data: ReadonlyArray<TraceRoot>; next_cursor: string | null }>(`/v1/local/trace/traces?${query}`, abort.signal)
      .then(setPage)
      .catch((e: Error) => abort.signal.aborted || setError(e.message))
    return () => abort.abort()
  }, [project, cursor])
  if (error !== null) return html`<p class="error" role="alert">${error}</p>`
  if (page === null) return html`<p class="muted">Loading…</p>`
  const first = (cursors.length - 1) * PAGE
  return html`<nav class="crumbs"><a href="#/traces">Traces</a> / ${project}</nav>
    <header class="title"><h1>${project}</h1><span class="muted">traces, latest first</span></header>
    <section class="card list">
      <div class="toolbar">
        <span class="muted">${page.data.length === 0 ? "none" : `${first + 1}–${first + page.data.length}`}</span>
        <button disabled=${cursors.length === 1} onClick=${() => setCursors(cursors.slice(0, -1))}>‹ Newer</button>
        <button disabled=${page.next_cursor === null} onClick=${() => setCursors([...cursors, page.next_cursor])}>Older ›</button>
      </div>
      <div class="scroll-x"><table class="traces">
        <thead><tr><th>Trace</th><th>Started</th><th class="n">Latency</th><th class="n">Calls</th><th class="n">Tokens</th>
          <th>Status</th></tr></thead>
        <tbody>${page.data.map(
          (root) => html`<tr data-call=${root.id}>
            <td><a href=${traceHref(project, root.id)}>${nameOf(root)}</a> <span class="muted mono">${root.op_name}</span></td>
            <td>${time(root.started_at)}</td>
            <td class="n">${latency(root.latency_ms)}</td>
            <td class="n">${root.calls}</td>
            <td class="n"><${Tokens} usage=${root.usage} /></td>
            <td><${CallStatus} call=${root} />${rewardOf(root) === null ? null : html` <span class="tag">reward ${num(rewardOf(root))}</span>`}</td>
          </tr>`
        )}</tbody>
      </table></div>
    </section>`
}
