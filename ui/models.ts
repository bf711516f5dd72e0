/** The projects page: every model, grouped by project, with its latest step, last rewards and job status. */
import { useEffect, useState } from "preact/hooks"
import { get } from "./api.js"
import { html, num, time } from "./html.js"
import type { ModelSummary } from "./types.js"

/** The colour of a job status (the published names: PENDING, RUNNING, COMPLETED, FAILED, CANCELLED). */
const tone: Readonly<Record<string, string>> = {
  RUNNING: "running",
  COMPLETED: "succeeded",
  FAILED: "failed",
  CANCELLED: "failed"
}

export const Status = ({ status }: { readonly status: string | null }) =>
  status === null
    ? html`<span class="muted">no jobs</span>`
    : html`<span class=${`status ${tone[status] ?? ""}`}>${status}</span>`

export const Models = () => {
  const [models, setModels] = useState<ReadonlyArray<ModelSummary> | null>(null)
  const [error, setError] = useState<string | null>(null)
  useEffect(() => {
    const load = () =>
      get<{ data: ReadonlyArray<ModelSummary> }>("/v1/local/models")
        .then((body) => setModels(body.data))
        .catch((e: Error) => setError(e.message))
    void load()
    const timer = setInterval(load, 5000)
    return () => clearInterval(timer)
  }, [])
  if (error !== null) return html`<p class="error" role="alert">${error}</p>`
  if (models === null) return html`<p class="muted">Loading…</p>`
  if (models.length === 0) {
    return html`<p class="empty">No models yet: run a training loop against this server (for example <code>effect-rl train minimal</code>).</p>`
  }
  const projects = [...new Set(models.map((m) => `${m.entity}/${m.project}`))]
  return html`<h1>Projects and models</h1>
    ${projects.map(
      (project) => html`<section class="card">
        <h2>${project}</h2>
        <div class="scroll-x">
          <table class="models">
            <thead><tr><th>Model</th><th>Base model</th><th class="n">Latest step</th><th class="n">Last reward</th>
              <th class="n">Last val reward</th><th>Latest job</th><th>Created</th></tr></thead>
            <tbody>
              ${models
                .filter((m) => `${m.entity}/${m.project}` === project)
                .map(
                  (m) => html`<tr>
                    <td><a href=${`#/models/${m.id}`}>${m.name}</a></td>
                    <td>${m.base_model}</td>
                    <td class="n">${m.latest_step ?? "—"}</td>
                    <td class="n">${num(m.last_reward)}</td>
                    <td class="n">${num(m.last_val_reward)}</td>
                    <td><${Status} status=${m.job_status} /> <span class="muted">(${m.jobs})</span></td>
                    <td>${time(m.created_at)}</td>
                  </tr>`
                )}
            </tbody>
          </table>
        </div>
      </section>`
    )}`
}
