/**
 * A model's page: reward per step (and validation reward, when there is any), the agents' own metrics per step
 * (one small chart each: the mean over the step's trajectories), what the rollouts measured, the training
 * metrics per gradient step, its steps, checkpoints and jobs with their events; kept current by the live stream.
 */
import { useEffect, useState } from "preact/hooks"
import { follow, get } from "./api.js"
import { Chart } from "./chart.js"
import { html, num, short, time } from "./html.js"
import { Status } from "./models.js"
import type { JobEvent, JobSummary, LogPoint, Overview } from "./types.js"

/** One point per step: the last log entry of the split at that step. */
const perStep = (logs: ReadonlyArray<LogPoint>, split: string, steps: ReadonlyArray<number>, metric: string) => {
  const last = new Map<number, number>()
  for (const log of logs) {
    const value = log.metrics[metric]
    if (log.split === split && value !== undefined) last.set(log.step, value)
  }
  return steps.map((step) => last.get(step) ?? null)
}

const TRAIN_COLOR = "#2563eb"
const VAL_COLOR = "#db2777"

/**
 * A metric's series per step, `train` and `val`, each only when some entry of its split has the metric (no
 * empty series, and no legend for one); `train` when neither has.
 */
const splitSeries = (logs: ReadonlyArray<LogPoint>, steps: ReadonlyArray<number>, metric: string) => {
  const has = (split: string) => logs.some((log) => log.split === split && log.metrics[metric] !== undefined)
  const train = { label: `train ${metric}`, color: TRAIN_COLOR, values: perStep(logs, "train", steps, metric) }
  const val = { label: `val ${metric}`, color: VAL_COLOR, values: perStep(logs, "val", steps, metric) }
  const shown = [...(has("train") ? [train] : []), ...(has("val") ? [val] : [])]
  return shown.length === 0 ? [train] : shown
}

/** One small chart per metric, train and (when logged) val, per step. */
const PerStep = ({
  logs,
  steps,
  names
}: {
  readonly logs: ReadonlyArray<LogPoint>
  readonly steps: ReadonlyArray<number>
  readonly names: ReadonlyArray<string>
}) =>
  html`<div class="grid small">
    ${names.map(
      (name) =>
        html`<${Chart} key=${name} id=${`metric:${name}`} title=${name} xLabel="step" xs=${steps} height=${140}
          series=${splitSeries(logs, steps, name)} />`
    )}
  </div>`

const TRAINING = [
  ["loss", "Loss", "#c2410c"],
  ["entropy", "Entropy", "#7c3aed"],
  ["grad_norm", "Gradient norm", "#0f766e"],
  ["learning_rate", "Learning rate", "#1d4ed8"]
] as const

const Events = ({ job }: { readonly job: JobSummary }) => {
  const [events, setEvents] = useState<ReadonlyArray<JobEvent> | null>(null)
  const [error, setError] = useState<string | null>(null)
  useEffect(() => {
    const load = async () => {
      const all: Array<JobEvent> = []
      let after: string | undefined
      for (;;) {
        const query = `limit=100${after === undefined ? "" : `&after=${encodeURIComponent(after)}`}`
        const page = await get<{ data: ReadonlyArray<JobEvent>; has_more: boolean }>(
          `/v1/preview/training-jobs/${job.id}/events?${query}`
        )
        all.push(...page.data)
        after = page.data.at(-1)?.id
        if (!page.has_more || after === undefined) break
      }
      setEvents(all)
    }
    load().catch((e: Error) => setError(e.message))
  }, [job.id, job.status])
  if (error !== null) return html`<p class="error">${error}</p>`
  if (events === null) return html`<p class="muted">Loading events…</p>`
  return html`<ol class="events">
    ${events.map(
      (event) => html`<li class=${`event ${event.type}`}>
        <strong>${event.type.replace(/_/g, " ")}</strong>
        ${Object.entries(event.data).map(
          ([key, value]) =>
            html` <span class="kv"><span class="k">${key}</span> ${typeof value === "number" ? num(value) : String(value)}</span>`
        )}
      </li>`
    )}
  </ol>`
}

const Jobs = ({ jobs }: { readonly jobs: ReadonlyArray<JobSummary> }) => {
  const [open, setOpen] = useState<string | null>(null)
  if (jobs.length === 0) return html`<p class="empty">No training jobs yet.</p>`
  return html`<ul class="jobs">
    ${[...jobs].reverse().map(
      (job) => html`<li class="job">
        <button class="row" aria-expanded=${open === job.id} onClick=${() => setOpen(open === job.id ? null : job.id)}>
          <span class="mono" title=${job.id}>${short(job.id)}</span>
          <span class="tag">${job.kind}</span>
          <${Status} status=${job.status} />
          <span>${job.step === null ? "" : `→ step ${job.step}`}</span>
          ${job.status === "RUNNING" && job.progress !== null ? html`<span class="muted">${Math.round(job.progress * 100)}%</span>` : null}
          <span class="muted">${time(job.training_start ?? job.created_at)}</span>
        </button>
        ${job.error_message === null ? null : html`<p class="error">${job.error_message}</p>`}
        ${open === job.id ? html`<${Events} job=${job} />` : null}
      </li>`
    )}
  </ul>`
}

const Steps = ({ logs }: { readonly logs: ReadonlyArray<LogPoint> }) => {
  const [shown, setShown] = useState(20)
  const rows = [...logs].reverse()
  return html`<div class="scroll-x"><table class="steps">
      <thead><tr><th class="n">Step</th><th>Split</th><th class="n">Reward</th><th class="n">Std dev</th>
        <th class="n">Trajectories</th><th>Rollouts</th></tr></thead>
      <tbody>
        ${rows.slice(0, shown).map(
          (log) => html`<tr data-step=${log.step} data-split=${log.split}>
            <td class="n">${log.step}</td>
            <td>${log.split}</td>
            <td class="n reward">${num(log.metrics.reward)}</td>
            <td class="n">${num(log.metrics.reward_std_dev)}</td>
            <td class="n">${log.metrics.num_trajectories ?? "—"}</td>
            <td>
              <a href=${`#/logs/${log.id}`}>all</a>${" · "}
              <a href=${`#/logs/${log.id}?sort=reward_desc`}>best</a>${" · "}
              <a href=${`#/logs/${log.id}?sort=reward_asc`}>worst</a>
            </td>
          </tr>`
        )}
      </tbody>
    </table></div>
    ${rows.length > shown ? html`<button onClick=${() => setShown(shown + 50)}>Show more (${rows.length - shown} left)</button>` : null}`
}

export const Model = ({ id }: { readonly id: string }) => {
  const [overview, setOverview] = useState<Overview | null>(null)
  const [error, setError] = useState<string | null>(null)
  const [live, setLive] = useState(false)
  useEffect(() => {
    const abort = new AbortController()
    setOverview(null)
    get<Overview>(`/v1/local/models/${id}/overview`, abort.signal)
      .then(setOverview)
      .catch((e: Error) => abort.signal.aborted || setError(e.message))
    follow(`/v1/local/models/${id}/live`, abort.signal, (event, data) => {
      if (event !== "overview") return
      setLive(true)
      setOverview(JSON.parse(data) as Overview)
    })
    return () => abort.abort()
  }, [id])
  if (error !== null) return html`<p class="error" role="alert">${error}</p>`
  if (overview === null) return html`<p class="muted">Loading…</p>`
  const { model, logs, agent_metrics: agentMetrics, rollout_metrics: rolloutMetrics } = overview
  const { gradient_steps: gradients, checkpoints, jobs } = overview
  const steps = [...new Set(logs.map((l) => l.step))].sort((a, b) => a - b)
  const gradientXs = gradients.map((_, i) => i + 1)
  return html`<nav class="crumbs"><a href="#/">Projects</a> / ${model.entity}/${model.project}</nav>
    <header class="title">
      <h1>${model.name}</h1>
      <span class="muted">${model.base_model}</span>
      <span>latest step <strong>${model.latest_step ?? "—"}</strong></span>
      <span>last reward <strong>${num(model.last_reward)}</strong></span>
      <${Status} status=${model.job_status} />
      <span class=${live ? "live on" : "live"} title="updated as training runs">${live ? "● live" : "○ connecting"}</span>
    </header>
    <section class="card">
      <${Chart} id="reward" title="Reward per step" xLabel="step" xs=${steps} height=${260}
        series=${splitSeries(logs, steps, "reward")} />
    </section>
    ${
      agentMetrics.length === 0
        ? null
        : html`<section class="card agent-metrics">
            <h2>The agent's metrics, per step <span class="muted">(mean over the step's trajectories)</span></h2>
            <${PerStep} logs=${logs} steps=${steps} names=${agentMetrics} />
          </section>`
    }
    ${
      rolloutMetrics.length === 0
        ? null
        : html`<details class="card rollout-metrics">
            <summary><h2>Rollouts, per step <span class="muted">(mean duration, completions and tokens)</span></h2></summary>
            <${PerStep} logs=${logs} steps=${steps} names=${rolloutMetrics} />
          </details>`
    }
    <section class="card">
      <h2>Training, per gradient step</h2>
      <div class="grid">
        ${TRAINING.map(
          ([key, label, color]) =>
            html`<${Chart} id=${key} title=${label} xLabel="gradient step" xs=${gradientXs} height=${160}
              series=${[{ label, color, values: gradients.map((g) => g.metrics[key] ?? null) }]} />`
        )}
      </div>
    </section>
    <div class="columns">
      <section class="card">
        <h2>Steps</h2>
        ${logs.length === 0 ? html`<p class="empty">Nothing logged yet.</p>` : html`<${Steps} logs=${logs} />`}
      </section>
      <section class="card">
        <h2>Jobs</h2>
        <${Jobs} jobs=${jobs} />
        <h2>Checkpoints</h2>
        <ul class="checkpoints">
          ${checkpoints.map(
            (
              c
            ) => html`<li class=${c.deleted ? "deleted" : ""} title=${c.deleted ? "deleted by retention" : time(c.created_at)}>
              step ${c.step}${c.deleted ? html` <span class="muted">(deleted)</span>` : null}
            </li>`
          )}
        </ul>
      </section>
    </div>`
}
