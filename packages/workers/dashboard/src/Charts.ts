/**
 * The health panel's charts: a window's per-minute series bucketed into at most 60 points (an empty minute
 * counts as 0 received and no lag), drawn as an SVG line over a filled area. Titles and labels are set as
 * text. Draws what it is given; knows nothing of queues.
 */
import type { HealthWindow, MinutePoint } from "./Api.js"
import { h, svg } from "./Dom.js"

const windowMinutes: Readonly<Record<HealthWindow, number>> = { "15m": 15, "1h": 60, "6h": 360, "24h": 1_440 }

export interface Buckets {
  readonly points: ReadonlyArray<{ readonly received: number; readonly lag: number | null }>
  /** Minutes per point. */
  readonly size: number
}

/** The window's last minutes, ending now, summed (received) and maxed (lag p99) per point. */
export const buckets = (series: ReadonlyArray<MinutePoint>, window: HealthWindow): Buckets => {
  const minutes = windowMinutes[window] ?? 60
  const size = Math.max(1, Math.ceil(minutes / 60))
  const count = Math.ceil(minutes / size)
  const end = Math.floor(Date.now() / 60_000)
  const start = end - count * size + 1
  const points = Array.from({ length: count }, () => ({ received: 0, lag: null as number | null }))
  for (const p of series) {
    const i = Math.floor((Math.floor(Date.parse(p.minute) / 60_000) - start) / size)
    const point = points[i]
    if (point === undefined) continue
    point.received += p.received
    if (p.lag_p99_ms !== null && p.lag_p99_ms !== undefined) point.lag = Math.max(point.lag ?? 0, p.lag_p99_ms)
  }
  return { points, size }
}

/** "big" is a panel chart, "spark" a table cell's; `kind` (throughput, lag) picks the colour. */
export const chart = (values: ReadonlyArray<number | null>, kind: "throughput" | "lag", size: "big" | "spark", title: string): SVGSVGElement => {
  const width = size === "big" ? 600 : 96
  const height = size === "big" ? 90 : 26
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none", class: `${size} ${kind}`, role: "img", "aria-label": title })
  const label = svg("title")
  label.textContent = title
  root.appendChild(label)
  const max = values.reduce<number>((m, v) => (v !== null && v > m ? v : m), 0)
  const step = values.length > 1 ? width / (values.length - 1) : width
  const y = (v: number) => (max === 0 ? height - 1 : height - 1 - (v / max) * (height - 4))
  root.appendChild(svg("line", { class: "base", x1: 0, x2: width, y1: height - 0.5, y2: height - 0.5 }))
  // Runs of consecutive values (null breaks a run); a run of one point is drawn as a short flat tick.
  const runs: Array<Array<readonly [number, number]>> = []
  let run: Array<readonly [number, number]> | null = null
  values.forEach((v, i) => {
    if (v === null) {
      run = null
      return
    }
    if (run === null) {
      run = []
      runs.push(run)
    }
    run.push([i * step, y(v)])
  })
  const xy = (p: readonly [number, number]) => `${p[0].toFixed(1)} ${p[1].toFixed(1)}`
  let line = ""
  let area = ""
  for (let r of runs) {
    if (r.length === 1) r = [[Math.max(0, r[0]![0] - Math.max(step * 0.8, 3)), r[0]![1]], r[0]!]
    line += ` M${r.map(xy).join(" L")}`
    area += ` M${r[0]![0].toFixed(1)} ${height} L${r.map(xy).join(" L")} L${r[r.length - 1]![0].toFixed(1)} ${height} Z`
  }
  if (area) root.appendChild(svg("path", { class: "area", d: area }))
  if (line) root.appendChild(svg("path", { class: "line", d: line }))
  return root
}

/** The time axis under a panel chart. */
export const axis = (window: string): HTMLDivElement => h("div", { class: "axis" }, h("span", { text: `${window} ago` }), h("span", { text: "now" }))
