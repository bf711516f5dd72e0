/**
 * A line chart drawn by uPlot, sized to its container (it follows the container's width), with the same
 * numbers in a visually hidden table for screen readers (and tests).
 */
import { useEffect, useRef } from "preact/hooks"
import uPlot from "uplot"
import { html, num } from "./html.js"

export interface Series {
  readonly label: string
  readonly color: string
  /** One value per x, null for a gap. */
  readonly values: ReadonlyArray<number | null>
}

export interface ChartProps {
  readonly title: string
  readonly xLabel: string
  readonly xs: ReadonlyArray<number>
  readonly series: ReadonlyArray<Series>
  readonly height?: number
  readonly id?: string
}

export const Chart = ({ title, xLabel, xs, series, height = 220, id }: ChartProps) => {
  const box = useRef<HTMLDivElement>(null)
  const plot = useRef<uPlot | null>(null)
  const shape = `${series.map((s) => s.label).join("|")}`

  useEffect(() => {
    const element = box.current
    if (element === null) return
    const options: uPlot.Options = {
      width: Math.max(200, element.clientWidth),
      height,
      scales: { x: { time: false } },
      // Steps are whole numbers: ticks at whole steps only.
      axes: [
        { label: xLabel, stroke: "#555", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000], labelSize: 20 },
        { stroke: "#555", size: 56 }
      ],
      series: [
        { label: xLabel },
        ...series.map((s) => ({
          label: s.label,
          stroke: s.color,
          width: 2,
          spanGaps: true,
          points: { show: true, size: 6 }
        }))
      ],
      legend: { show: true, live: false }
    }
    const chart = new uPlot(options, [[], ...series.map(() => [])] as unknown as uPlot.AlignedData, element)
    plot.current = chart
    const resize = new ResizeObserver(() => chart.setSize({ width: Math.max(200, element.clientWidth), height }))
    resize.observe(element)
    return () => {
      resize.disconnect()
      chart.destroy()
      plot.current = null
    }
  }, [shape, height, xLabel])

  useEffect(() => {
    plot.current?.setData([xs as Array<number>, ...series.map((s) => s.values as Array<number | null>)])
  })

  return html`<figure class="chart" data-chart=${id ?? title}>
    <figcaption>${title}</figcaption>
    ${xs.length === 0 ? html`<p class="empty">Nothing yet.</p>` : null}
    <div ref=${box} class="plot" aria-hidden="true"></div>
    <table class="visually-hidden">
      <caption>${title}</caption>
      <thead><tr><th>${xLabel}</th>${series.map((s) => html`<th>${s.label}</th>`)}</tr></thead>
      <tbody>
        ${xs.map(
          (x, i) =>
            html`<tr data-x=${x}><td>${x}</td>${series.map((s) => html`<td data-series=${s.label}>${num(s.values[i] ?? null)}</td>`)}</tr>`
        )}
      </tbody>
    </table>
  </figure>`
}
