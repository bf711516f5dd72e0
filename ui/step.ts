/**
 * A step's page (one log entry): its groups' reward spread, its trajectories a page at a time (sortable by
 * reward; arrow keys move through them), and the chosen one as a conversation, with a link to its rollout's
 * trace when the loop was traced. A new sort keeps the chosen trajectory (shown, and marked in the list when
 * it is on the first page of the new order); the first one is chosen only when none is.
 */
import { useEffect, useRef, useState } from "preact/hooks"
import { get } from "./api.js"
import { Conversation } from "./conversation.js"
import { html, num } from "./html.js"
import { traceHref } from "./traces.js"
import type { Trajectory, TrajectoryPage, TrajectoryRow } from "./types.js"

/** The rollout's trace call a traced trajectory names in its metadata (`trace_call`, a `weave:///` ref). */
const traceOf = (trajectory: Trajectory): { readonly project: string; readonly id: string } | null => {
  const ref = trajectory.metadata?.trace_call
  const match = typeof ref === "string" ? /^weave:\/\/\/([^/]+\/[^/]+)\/call\/([^/]+)$/.exec(ref) : null
  return match === null ? null : { project: match[1]!, id: match[2]! }
}

const TraceLink = ({ trajectory }: { readonly trajectory: Trajectory }) => {
  const trace = traceOf(trajectory)
  return trace === null
    ? null
    : html`<a class="trace-link" href=${traceHref(trace.project, trace.id)}>Open the rollout's trace ›</a>`
}

const PAGE = 50
const SORTS = [
  ["position", "in order"],
  ["reward_desc", "best first"],
  ["reward_asc", "worst first"]
] as const

const Spread = ({ page }: { readonly page: TrajectoryPage }) => {
  const groups = page.groups
  const lo = Math.min(0, ...groups.map((g) => g.min))
  const hi = Math.max(1, ...groups.map((g) => g.max))
  const x = (v: number) => `${(((v - lo) / (hi - lo || 1)) * 100).toFixed(1)}%`
  return html`<details class="spread" open=${groups.length <= 12}>
    <summary>${groups.length} groups: reward spread (min, mean, max)</summary>
    <ul>
      ${groups.slice(0, 200).map(
        (g) => html`<li title=${`group ${g.group}: ${g.size} trajectories, mean ${num(g.mean)}, std ${num(g.std)}`}>
          <span class="muted">#${g.group}</span>
          <span class="bar"><span class="range" style=${{ left: x(g.min), width: `calc(${x(g.max)} - ${x(g.min)} + 2px)` }}></span
            ><span class="mean" style=${{ left: x(g.mean) }}></span></span>
          <span class="n">${num(g.min)} · ${num(g.mean)} · ${num(g.max)}</span>
        </li>`
      )}
    </ul>
  </details>`
}

export const Step = ({ logId, query }: { readonly logId: string; readonly query: URLSearchParams }) => {
  const [sort, setSort] = useState(query.get("sort") ?? "position")
  const [offset, setOffset] = useState(0)
  const [page, setPage] = useState<TrajectoryPage | null>(null)
  const [chosen, setChosen] = useState<TrajectoryRow | null>(null)
  const [trajectory, setTrajectory] = useState<Trajectory | null>(null)
  const [error, setError] = useState<string | null>(null)
  const list = useRef<HTMLOListElement>(null)

  useEffect(() => {
    const abort = new AbortController()
    get<TrajectoryPage>(
      `/v1/local/logs/${logId}/trajectories?limit=${PAGE}&sort=${sort}${offset > 0 ? `&cursor=${offset}` : ""}`,
      abort.signal
    )
      .then((next) => {
        setPage(next)
        setChosen((current) => current ?? next.data[0] ?? null)
      })
      .catch((e: Error) => abort.signal.aborted || setError(e.message))
    return () => abort.abort()
  }, [logId, sort, offset])

  // The chosen trajectory in view when a page (a new sort, say) shows it.
  useEffect(() => {
    list.current?.querySelector(".item.chosen")?.scrollIntoView({ block: "nearest" })
  }, [page])

  useEffect(() => {
    if (chosen === null) return
    const abort = new AbortController()
    setTrajectory(null)
    get<{ trajectory: Trajectory }>(
      `/v1/local/logs/${logId}/trajectories/${chosen.group}/${chosen.index}`,
      abort.signal
    )
      .then((body) => setTrajectory(body.trajectory))
      .catch((e: Error) => abort.signal.aborted || setError(e.message))
    return () => abort.abort()
  }, [logId, chosen?.group, chosen?.index])

  if (error !== null) return html`<p class="error" role="alert">${error}</p>`
  if (page === null) return html`<p class="muted">Loading…</p>`

  const onKey = (event: KeyboardEvent) => {
    if (event.key !== "ArrowDown" && event.key !== "ArrowUp") return
    const buttons = [...(list.current?.querySelectorAll("button") ?? [])]
    const at = buttons.indexOf(document.activeElement as HTMLButtonElement)
    const next = buttons[Math.max(0, Math.min(buttons.length - 1, at + (event.key === "ArrowDown" ? 1 : -1)))]
    if (next !== undefined) {
      event.preventDefault()
      next.focus()
    }
  }
  const { log } = page
  const last = Math.min(offset + PAGE, page.total)
  return html`<nav class="crumbs"><a href="#/">Projects</a> / <a href=${`#/models/${log.model_id}`}>${log.model_name}</a> / step ${log.step}</nav>
    <header class="title">
      <h1>Step ${log.step} <span class="muted">(${log.split})</span></h1>
      <span>mean reward <strong>${num(log.metrics.reward)}</strong></span>
      <span>std dev <strong>${num(log.metrics.reward_std_dev)}</strong></span>
      <span>${page.total} trajectories</span>
    </header>
    <${Spread} page=${page} />
    <div class="split">
      <section class="card list">
        <div class="toolbar">
          <label>Sort <select value=${sort} onChange=${(e: Event) => {
            setSort((e.target as HTMLSelectElement).value)
            setOffset(0)
          }}>${SORTS.map(([value, label]) => html`<option value=${value}>${label}</option>`)}</select></label>
          <span class="muted">${page.total === 0 ? 0 : offset + 1}–${last} of ${page.total}</span>
          <button disabled=${offset === 0} onClick=${() => setOffset(Math.max(0, offset - PAGE))}>‹ Prev</button>
          <button disabled=${page.next_cursor === null} onClick=${() => setOffset(Number(page.next_cursor))}>Next ›</button>
        </div>
        <ol class="trajectories" ref=${list} onKeyDown=${onKey}>
          ${page.data.map(
            (row) => html`<li>
              <button class=${chosen?.group === row.group && chosen.index === row.index ? "item chosen" : "item"}
                aria-current=${chosen?.group === row.group && chosen.index === row.index}
                onClick=${() => setChosen(row)} data-reward=${row.reward}>
                <span class="reward">${num(row.reward)}</span>
                <span class="muted">g${row.group}·${row.index}</span>
                <span class="preview">${row.preview || "(no text)"}</span>
                ${row.tool_calls > 0 ? html`<span class="tag">${row.tool_calls} tool call${row.tool_calls === 1 ? "" : "s"}</span>` : null}
              </button>
            </li>`
          )}
        </ol>
      </section>
      <section class="card detail" aria-live="polite">
        ${
          chosen === null
            ? html`<p class="empty">Choose a trajectory.</p>`
            : trajectory === null
              ? html`<p class="muted">Loading…</p>`
              : html`<div class="detail-head"><h2>Group ${chosen.group}, trajectory ${chosen.index}</h2>
                  <${TraceLink} trajectory=${trajectory} /></div>
                <${Conversation} trajectory=${trajectory} />`
        }
      </section>
    </div>`
}
