/**
 * The dead letters panel (`#dlq`): the records matching the filters (open by default), paged by cursor, each
 * with Replay, Skip (a required reason, through the dialog) and Details (the failure context, history and
 * original message, with Escalate); and "Replay all matching" by the queue, type and reason filters. A record
 * this operator just resolved stays in the list with its new status until the filters change.
 */
import * as Api from "./Api.js"
import * as Dialog from "./Dialog.js"
import { byId, clear, h } from "./Dom.js"
import { ago, badge, count, shorten, when } from "./Format.js"
import * as Toast from "./Toast.js"

/** The platform's queues (the queue filter's choices). */
const queues = ["factline-events", "factline-projections", "factline-fact-processing", "factline-webhooks", "factline-batch"]

/** A detail row: loading (null), loaded, or the error that stopped it. */
type Detail = null | { readonly record: Api.DeadLetterDetail } | { readonly error: string }

let filters: Api.DeadLetterFilters = { status: "open", queue: "", type: "", reason: "" }
let rows: ReadonlyArray<Api.DeadLetter> = []
let next: string | null = null
const resolved = new Map<string, Api.DeadLetter>()
const expanded = new Map<string, Detail>()

/** What the page does after a change here (set by `setup`). */
let hooks: { readonly healthChanged: () => void; readonly refresh: () => Promise<void> } = { healthChanged: () => {}, refresh: async () => {} }

/** Loads the first page (or the next one, `more`) and renders it; an error is shown above the table. Never rejects. */
export const load = (more: boolean): Promise<void> =>
  Api.deadLetters(filters, more ? next : null).then((page) => {
    rows = more ? [...rows, ...page.data] : page.data
    next = page.next_cursor
    byId("dlq-error").hidden = true
    render()
  }, (error: unknown) => {
    const element = byId("dlq-error")
    element.hidden = false
    element.textContent = `Could not load dead letters: ${Api.errorText(error)}`
  })

const render = () => {
  const tbody = clear(byId("dlq-rows"))
  const ids = new Set(rows.map((r) => r.id))
  const shown = rows.map((r) => resolved.get(r.id) ?? r)
  for (const [id, r] of resolved) if (!ids.has(id)) shown.push(r)
  byId("dlq-empty").hidden = shown.length > 0
  byId("dlq-table").hidden = shown.length === 0
  byId("dlq-more").hidden = !next
  byId("dlq-count").textContent = shown.length === 0 ? "" : `${shown.length}${next ? "+" : ""} shown`
  for (const r of shown) {
    const open = r.status === "open"
    tbody.appendChild(h("tr", { "data-id": r.id, class: resolved.has(r.id) && !open ? "resolved" : "" },
      h("td", {}, when(r.received_at)),
      h("td", {}, h("div", { class: "mono", text: r.queue }), h("div", { class: "mono checks", text: r.message_type || "—" })),
      h("td", { class: "mono subject", text: shorten(r.subject || "—", 40), title: r.subject || "" }),
      h("td", { class: "mono", text: r.tenant_id || "—" }),
      h("td", {}, h("div", { text: r.reason }), h("div", { class: "checks", text: `${count(r.attempts)}${r.attempts === 1 ? " attempt" : " attempts"}` })),
      h("td", { class: "wrap error-text", text: shorten(r.last_error, 200), title: r.last_error }),
      h("td", { class: "dl-status" }, badge(r.status), r.resolved_by && !open ? h("div", { class: "checks", text: `by ${r.resolved_by} · ${ago(r.resolved_at)}` }) : null),
      h("td", {}, h("div", { class: "actions" },
        open ? h("button", { "data-action": "replay", class: "primary", title: `Send it back to ${r.queue} with the same idempotency key`, onclick: (e) => void replay(r, e.currentTarget as HTMLButtonElement) }, "Replay") : null,
        open ? h("button", { "data-action": "skip", onclick: () => askSkip(r) }, "Skip") : null,
        h("button", { "data-action": "details", "aria-expanded": expanded.has(r.id) ? "true" : "false", onclick: () => void toggle(r.id) }, expanded.has(r.id) ? "Hide" : "Details")))))
    if (expanded.has(r.id)) tbody.appendChild(detailRow(r.id, expanded.get(r.id) ?? null))
  }
}

const detailRow = (id: string, detail: Detail) => {
  const td = h("td", { colspan: 8 })
  const tr = h("tr", { class: "detail", "data-detail": id }, td)
  if (detail === null) {
    td.appendChild(h("div", { class: "checks", text: "Loading…" }))
    return tr
  }
  if ("error" in detail) {
    td.appendChild(h("div", { class: "error", text: detail.error }))
    return tr
  }
  const d = detail.record
  const fields: ReadonlyArray<readonly [string, unknown]> = [
    ["id", d.id], ["queue", d.queue], ["status", d.status], ["reason", d.reason], ["last error", d.last_error], ["attempts", d.attempts],
    ["first attempted", d.first_attempted_at], ["last attempted", d.last_attempted_at], ["received", d.received_at],
    ["tenant", d.tenant_id], ["message type", d.message_type], ["idempotency key", d.idempotency_key], ["subject", d.subject],
    ["resolved by", d.resolved_by], ["resolved at", d.resolved_at], ["replay operation", d.replay_operation_id]
  ]
  td.appendChild(h("dl", {}, fields.filter(([, value]) => value !== null && value !== undefined && value !== "").map(([label, value]) =>
    [h("dt", { text: label }), h("dd", { class: "mono", text: String(value) })])))
  td.appendChild(h("div", { class: "checks", text: "History" }))
  td.appendChild(d.history?.length
    ? h("ol", {}, d.history.map((e) => h("li", { text: `${e.at} — ${e.action} by ${e.by}${e.note ? ` (${e.note})` : ""}${e.operation_id ? ` · ${e.operation_id}` : ""}` })))
    : h("div", { class: "checks", text: "no actions yet" }))
  // A defect's stack (reason `defect`): where product code threw.
  if (typeof d.stack === "string" && d.stack !== "") {
    td.appendChild(h("div", { class: "checks", text: "Stack" }))
    td.appendChild(h("pre", { text: d.stack }))
  }
  const json = JSON.stringify(d.original_message, null, 2) || "null"
  td.appendChild(h("div", { class: "checks", text: `Original message${json.length > 65_536 ? " (first 64 KiB)" : ""}` }))
  td.appendChild(h("pre", { text: json.slice(0, 65_536) }))
  if (d.status === "open") td.appendChild(h("div", { class: "actions" }, h("button", { "data-action": "escalate", onclick: () => askEscalate(d) }, "Escalate…")))
  return tr
}

const toggle = (id: string): Promise<void> => {
  if (expanded.has(id)) {
    expanded.delete(id)
    render()
    return Promise.resolve()
  }
  expanded.set(id, null)
  render()
  return Api.deadLetter(id).then((record) => {
    if (expanded.has(id)) expanded.set(id, { record })
  }, (error: unknown) => {
    if (expanded.has(id)) expanded.set(id, { error: Api.errorText(error) })
  }).then(render)
}

/** A record this operator resolved: shown with its new status, the open count refreshed. */
const markResolved = (record: Api.DeadLetterDetail, message: string) => {
  resolved.set(record.id, record)
  if (expanded.has(record.id)) expanded.set(record.id, { record })
  render()
  Toast.show(message)
  hooks.healthChanged()
}

const replay = (r: Api.DeadLetter, button: HTMLButtonElement) => {
  button.disabled = true
  button.textContent = "Replaying…"
  return Api.replay(r.id).then((record) => markResolved(record, `Replayed to ${record.queue} (${record.replay_operation_id ?? ""})`), (error: unknown) => {
    Toast.show(`Replay failed: ${Api.errorText(error)}`, true)
    return load(false)
  })
}

const askSkip = (r: Api.DeadLetter) =>
  Dialog.open({
    title: "Skip this dead letter?",
    text: `Its work will not be done. The decision is recorded as a reconciliation fact in the ledger, with your reason. (${r.queue} · ${r.message_type || "?"} · ${shorten(r.subject || r.id, 60)})`,
    input: true, required: true, placeholder: "Why is this work given up? (required)", ok: "Skip",
    run: (reason) => Api.skip(r.id, reason).then((record) => markResolved(record, `Skipped; reconciliation fact ${record.reconciliation_fact_id ?? ""} appended`))
  })

const askEscalate = (r: Api.DeadLetter) =>
  Dialog.open({
    title: "Escalate this dead letter?", text: "It leaves the open list, marked escalated, for someone to take over. A note is optional.",
    input: true, required: false, placeholder: "Note (optional)", ok: "Escalate",
    run: (note) => Api.escalate(r.id, note).then((record) => markResolved(record, "Escalated"))
  })

const askReplayAll = () => {
  const chosen = filters
  const named = (["queue", "type", "reason"] as const).filter((k) => chosen[k]).map((k) => `${k} = ${chosen[k]}`)
  Dialog.open({
    title: "Replay every open dead letter matching?",
    text: `${named.length ? named.join(", ") : "No filter: every open dead letter this token can see"}. Up to 1,000 records, sent back to their queues in waves of 100, 2 s apart.`,
    input: false, ok: "Replay all",
    run: () => Api.replayMatching(chosen).then((result) => {
      Toast.show(`Replaying ${result.count} dead letter(s) in ${result.waves} wave(s) — operation ${result.operation_id}`)
      return hooks.refresh()
    })
  })
}

const filtersChanged = () => {
  filters = {
    status: byId<HTMLSelectElement>("f-status").value,
    queue: byId<HTMLSelectElement>("f-queue").value,
    type: byId<HTMLInputElement>("f-type").value.trim(),
    reason: byId<HTMLInputElement>("f-reason").value.trim()
  }
  resolved.clear()
  expanded.clear()
  next = null
  void load(false)
}

/** Shows the open dead letters of this queue and message type (the runs panel's "Open dead letter"), scrolled into view. */
export const show = (chosen: { readonly queue: string; readonly type: string }): void => {
  byId<HTMLSelectElement>("f-status").value = "open"
  byId<HTMLSelectElement>("f-queue").value = chosen.queue
  byId<HTMLInputElement>("f-type").value = chosen.type
  byId<HTMLInputElement>("f-reason").value = ""
  filtersChanged()
  byId("dlq").scrollIntoView({ behavior: "smooth", block: "start" })
}

/** Nothing of the previous session stays. */
export const reset = (): void => {
  rows = []
  next = null
  resolved.clear()
  expanded.clear()
  clear(byId("dlq-rows"))
  byId("dlq-count").textContent = ""
  byId("dlq-empty").hidden = true
  byId("dlq-error").hidden = true
}

export const setup = (page: typeof hooks): void => {
  hooks = page
  for (const queue of queues) byId("f-queue").appendChild(h("option", { value: queue, text: queue }))
  for (const id of ["f-status", "f-queue"]) byId(id).addEventListener("change", filtersChanged)
  byId("filters").addEventListener("submit", (event) => {
    event.preventDefault()
    filtersChanged()
  })
  byId("dlq-more").addEventListener("click", () => void load(true))
  byId("replay-all").addEventListener("click", askReplayAll)
}
