/**
 * The runs panel (`#runs`): each message's latest attempt, the most recently updated first — queue, type,
 * subject, tenant, attempts, outcome, error, next retry, trace — from `GET /v1/runs`, reloaded every second
 * while "live" is on (the tab visible, no dialog open). "Retry now" sends a waiting message's copy to its
 * queue at once; "Open dead letter" shows a dead run's dead letters (the panel below, filtered to its queue
 * and type).
 */
import * as Api from "./Api.js"
import * as Dialog from "./Dialog.js"
import { byId, clear, h } from "./Dom.js"
import { badge, shorten, when } from "./Format.js"
import * as Toast from "./Toast.js"

/** How often the panel reloads while live. */
const liveEveryMs = 1_000

let filters: Api.RunFilters = { queue: "", outcome: "", type: "", subject: "" }
let timer: ReturnType<typeof setTimeout> | null = null
let loading = false
/** What the page does for "Open dead letter" (set by `setup`). */
let openDeadLetters: (filters: { readonly queue: string; readonly type: string }) => void = () => {}

const live = () => byId<HTMLInputElement>("runs-live").checked

/** In how many seconds, or how long ago, an ISO time is. */
const until = (iso: string | null): string => {
  if (!iso) return ""
  const seconds = Math.round((Date.parse(iso) - Date.now()) / 1_000)
  return seconds > 0 ? `in ${seconds} s` : "due"
}

const row = (r: Api.Run) =>
  h("tr", { "data-run": r.id, "data-outcome": r.outcome },
    h("td", {}, when(r.updated_at)),
    h("td", {}, h("div", { class: "mono", text: r.queue }), h("div", { class: "mono checks", text: r.message_type || "—" })),
    h("td", { class: "mono subject", text: shorten(r.subject || "—", 40), title: r.subject || "" }),
    h("td", { class: "mono", text: r.tenant_id || "—" }),
    h("td", { class: "num", "data-attempts": r.attempts, text: String(r.attempts), title: `attempt ${r.attempt} of this delivery` }),
    h("td", {}, badge(r.outcome)),
    h("td", { title: r.next_retry_at ?? "", text: until(r.next_retry_at) }),
    h("td", { class: "wrap error-text", text: shorten(r.error ?? "", 200), title: r.error ?? "" }),
    h("td", { class: "mono checks", text: r.trace_id ? shorten(r.trace_id, 12) : "", title: r.trace_id ?? "" }),
    h("td", {}, h("div", { class: "actions" },
      r.can_retry ? h("button", { "data-action": "retry-now", class: "primary", title: "Send a copy to its queue now (its own delayed delivery then finds the work done)", onclick: (e) => void retryNow(r, e.currentTarget as HTMLButtonElement) }, "Retry now") : null,
      r.outcome === "dead" ? h("button", { "data-action": "open-dead-letter", title: "Show its dead letters below: replay, skip or escalate it there", onclick: () => openDeadLetters({ queue: r.queue, type: r.message_type ?? "" }) }, "Open dead letter") : null)))

/** Loads the first page and renders it; an error is shown above the table. Never rejects. */
export const load = (): Promise<void> => {
  if (loading) return Promise.resolve()
  loading = true
  return Api.runs(filters).then((page) => {
    byId("runs-error").hidden = true
    const tbody = clear(byId("runs-rows"))
    byId("runs-empty").hidden = page.data.length > 0
    byId("runs-table").hidden = page.data.length === 0
    const failing = page.data.filter((r) => r.outcome === "retry" || r.outcome === "park" || r.outcome === "rerun").length
    byId("runs-sub").textContent = `${page.data.length} shown · ${failing} waiting to retry · recording ${page.recording === "all" ? "every attempt" : page.recording === "none" ? "nothing" : "failing attempts"}`
    for (const r of page.data) tbody.appendChild(row(r))
  }, (error: unknown) => {
    const element = byId("runs-error")
    element.hidden = false
    element.textContent = `Could not load runs: ${Api.errorText(error)}`
  }).finally(() => {
    loading = false
  })
}

const retryNow = (r: Api.Run, button: HTMLButtonElement) => {
  button.disabled = true
  button.textContent = "Retrying…"
  return Api.retryRun(r.id).then(() => Toast.show(`Retrying ${r.message_type ?? r.id} now`), (error: unknown) => Toast.show(`Retry failed: ${Api.errorText(error)}`, true)).then(load)
}

const tick = () => {
  stop()
  if (!live()) return
  timer = setTimeout(() => {
    if (!document.hidden && !Dialog.isOpen()) void load().then(tick)
    else tick()
  }, liveEveryMs)
}

/** Stops the live reload. */
export const stop = (): void => {
  if (timer !== null) clearTimeout(timer)
  timer = null
}

/** Loads now and keeps reloading while live. */
export const start = (): void => {
  void load().then(tick)
}

/** Nothing of the previous session stays. */
export const reset = (): void => {
  stop()
  // A load of the ended session never settles (Api): the next session starts unblocked.
  loading = false
  clear(byId("runs-rows"))
  byId("runs-sub").textContent = ""
  byId("runs-empty").hidden = true
  byId("runs-error").hidden = true
}

const filtersChanged = () => {
  filters = {
    queue: byId<HTMLSelectElement>("r-queue").value,
    outcome: byId<HTMLSelectElement>("r-outcome").value,
    type: byId<HTMLInputElement>("r-type").value.trim(),
    subject: byId<HTMLInputElement>("r-subject").value.trim()
  }
  void load()
}

export const setup = (page: { readonly openDeadLetters: typeof openDeadLetters }): void => {
  openDeadLetters = page.openDeadLetters
  for (const queue of ["factline-events", "factline-projections", "factline-fact-processing", "factline-webhooks", "factline-batch"]) {
    byId("r-queue").appendChild(h("option", { value: queue, text: queue }))
  }
  for (const id of ["r-queue", "r-outcome"]) byId(id).addEventListener("change", filtersChanged)
  byId("runs-filters").addEventListener("submit", (event) => {
    event.preventDefault()
    filtersChanged()
  })
  byId("runs-live").addEventListener("change", () => (live() ? start() : stop()))
}
