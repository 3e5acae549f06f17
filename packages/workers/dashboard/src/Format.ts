/**
 * How the dashboard writes numbers, durations, rates and times, and the two small elements built from them
 * (a status badge, a relative time with the exact one as its title). Presentation only: no API knowledge.
 */
import { h } from "./Dom.js"

/** A count with thousands separators; "—" when there is none. */
export const count = (value: number | null | undefined): string =>
  value === null || value === undefined ? "—" : Number(value).toLocaleString("en-US")

/** A latency bucket's upper bound ("≤ 250 ms", "≤ 2 s", "≤ 1 min"). */
export const duration = (ms: number | null | undefined): string => {
  if (ms === null || ms === undefined) return "—"
  if (ms < 1_000) return `≤ ${ms} ms`
  if (ms < 60_000) return `≤ ${ms / 1_000} s`
  return `≤ ${ms / 60_000} min`
}

/** A fraction as a percentage with one decimal. */
export const percent = (fraction: number): string => `${Math.round(fraction * 1_000) / 10}%`

/** How long ago an ISO time was ("just now", "5 min ago", "3 d ago"). */
export const ago = (iso: string | null | undefined): string => {
  if (!iso) return "—"
  const seconds = (Date.now() - Date.parse(iso)) / 1_000
  if (!Number.isFinite(seconds)) return String(iso)
  if (seconds < 5) return "just now"
  if (seconds < 60) return `${Math.round(seconds)} s ago`
  if (seconds < 3_600) return `${Math.round(seconds / 60)} min ago`
  if (seconds < 86_400) return `${Math.round(seconds / 3_600)} h ago`
  return `${Math.round(seconds / 86_400)} d ago`
}

/** At most `max` characters, an ellipsis marking a cut. */
export const shorten = (text: string | null | undefined, max: number): string => {
  const value = text === null || text === undefined ? "" : String(text)
  return value.length > max ? `${value.slice(0, max - 1)}…` : value
}

/** A relative time whose title is the exact one. */
export const when = (iso: string | null | undefined): HTMLSpanElement => h("span", { title: iso ?? "", text: ago(iso) })

/** A status in its colour (the stylesheet colours `.badge.<status>`). */
export const badge = (status: string): HTMLSpanElement => h("span", { class: `badge ${status}`, text: status })
