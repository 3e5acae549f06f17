/**
 * The workflows panel (`#workflows`): workflow instances (Cloudflare Workflows) from `GET /v1/workflows`, the
 * most recently updated first — workflow and instance, subject, tenant, status, the step it is on and its
 * attempts, what it waits for and until when, how many facts it appended, started and updated — filtered by
 * workflow, status and subject, paged by cursor. Details (`GET /v1/workflows/:id`) shows the row with
 * Cloudflare's own status, its error and the facts it appended (id, type, sequence, trace); Retry runs a failed
 * or terminated instance again from its start, Terminate stops one that has not ended (both confirmed first).
 */
import { Workflows as WorkflowsApi } from "@factline/core/api"
import * as Api from "./Api.js"
import * as Dialog from "./Dialog.js"
import { byId, clear, h } from "./Dom.js"
import { badge, count, shorten, when } from "./Format.js"
import * as Toast from "./Toast.js"

/** The statuses an instance has (the status filter's choices): the API's own list. */
const statuses = WorkflowsApi.statuses
/** Statuses after which the instance runs no more (until retried). */
const ended = new Set(["complete", "failed", "terminated"])

/** A detail row: loading (null), loaded, or the error that stopped it. */
type Detail = null | { readonly record: Api.WorkflowDetail } | { readonly error: string }

let filters: Api.WorkflowFilters = { workflow: "", status: "", subject: "" }
let rows: ReadonlyArray<Api.WorkflowInstance> = []
let next: string | null = null
const expanded = new Map<string, Detail>()

/** In how many seconds, minutes or hours an ISO time is ("in 42 s"), or "due" once passed. */
const until = (iso: string | null): string => {
  if (!iso) return ""
  const seconds = Math.round((Date.parse(iso) - Date.now()) / 1_000)
  if (!Number.isFinite(seconds)) return iso
  if (seconds <= 0) return "due"
  if (seconds < 120) return `in ${seconds} s`
  if (seconds < 7_200) return `in ${Math.round(seconds / 60)} min`
  return `in ${Math.round(seconds / 3_600)} h`
}

/** The trace id of a W3C traceparent (`00-<trace id>-<span id>-<flags>`). */
const traceId = (traceparent: string | null): string => traceparent?.split("-")[1] ?? ""

/** Loads the first page (or the next one, `more`) and renders it; an error is shown above the table. Never rejects. */
export const load = (more: boolean): Promise<void> =>
  Api.workflows(filters, more ? next : null).then((page) => {
    rows = more ? [...rows, ...page.data] : page.data
    next = page.next_cursor
    byId("workflows-error").hidden = true
    render()
  }, (error: unknown) => {
    const element = byId("workflows-error")
    element.hidden = false
    element.textContent = `Could not load workflow instances: ${Api.errorText(error)}`
  })

const render = () => {
  const tbody = clear(byId("workflows-rows"))
  byId("workflows-empty").hidden = rows.length > 0
  byId("workflows-table").hidden = rows.length === 0
  byId("workflows-more").hidden = !next
  const failed = rows.filter((r) => r.status === "failed").length
  const waiting = rows.filter((r) => r.status === "waiting" || r.status === "sleeping").length
  byId("workflows-sub").textContent = rows.length === 0 ? "" : `${rows.length}${next ? "+" : ""} shown · ${failed} failed · ${waiting} waiting or sleeping`
  for (const r of rows) {
    tbody.appendChild(h("tr", { "data-instance": r.instance_id, "data-status": r.status },
      h("td", {}, when(r.updated_at)),
      h("td", {}, h("div", { class: "mono", text: r.workflow }), h("div", { class: "mono checks", text: shorten(r.instance_id, 44), title: r.instance_id })),
      h("td", { class: "mono subject", text: shorten(r.subject, 40), title: r.subject }),
      h("td", { class: "mono", text: r.tenant_id }),
      h("td", { class: "wf-status" }, badge(r.status)),
      h("td", { class: "mono", "data-step": r.step ?? "", text: r.step ?? "—" }),
      h("td", { class: "num", "data-attempts": r.attempts, text: String(r.attempts) }),
      h("td", { class: "wf-wait" }, r.waiting_for ? h("div", { class: "mono", text: r.waiting_for }) : null,
        r.wait_until ? h("div", { class: "checks", title: r.wait_until, text: `until ${r.wait_until.replace("T", " ").slice(0, 19)} (${until(r.wait_until)})` }) : null,
        !r.waiting_for && !r.wait_until ? "—" : null),
      h("td", { class: "num", "data-facts": r.facts.length, text: count(r.facts.length) }),
      h("td", {}, when(r.started_at)),
      h("td", { class: "wrap error-text wf-error-cell", text: shorten(r.error ?? "", 100), title: r.error ?? "" }),
      h("td", {}, h("div", { class: "actions" },
        h("button", { "data-action": "details", "aria-expanded": expanded.has(r.instance_id) ? "true" : "false", onclick: () => void toggle(r.instance_id) }, expanded.has(r.instance_id) ? "Hide" : "Details"),
        r.status === "failed" || r.status === "terminated" ? h("button", { "data-action": "retry", class: "primary", title: "Run it again from its start: each step keeps its idempotency key, nothing done is done twice", onclick: () => askRetry(r) }, "Retry") : null,
        ended.has(r.status) ? null : h("button", { "data-action": "terminate", class: "danger", title: "Stop it where it is (no compensation)", onclick: () => askTerminate(r) }, "Terminate")))))
    if (expanded.has(r.instance_id)) tbody.appendChild(detailRow(r.instance_id, expanded.get(r.instance_id) ?? null))
  }
}

const detailRow = (id: string, detail: Detail) => {
  const td = h("td", { colspan: 12 })
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
    ["instance", d.instance_id], ["workflow", d.workflow], ["tenant", d.tenant_id], ["subject", d.subject], ["status", d.status],
    ["step", d.step], ["attempts", d.attempts], ["waiting for", d.waiting_for], ["wait until", d.wait_until],
    ["started", d.started_at], ["updated", d.updated_at], ["start fact", d.start_fact_id], ["trace", traceId(d.traceparent)],
    ["cloudflare status", d.cloudflare === null ? "unknown to Cloudflare (not created yet, or gone)" : d.cloudflare.status],
    ["cloudflare error", d.cloudflare?.error]
  ]
  td.appendChild(h("dl", {}, fields.filter(([, value]) => value !== null && value !== undefined && value !== "").map(([label, value]) =>
    [h("dt", { text: label }), h("dd", { class: "mono", text: String(value) })])))
  if (d.error) {
    td.appendChild(h("div", { class: "checks", text: "Error" }))
    td.appendChild(h("pre", { class: "wf-error", text: d.error }))
  }
  td.appendChild(h("div", { class: "checks", text: `Appended facts (${d.facts.length})` }))
  const shown = new Map(d.appended.map((f) => [f.fact_id, f]))
  td.appendChild(d.facts.length === 0
    ? h("div", { class: "checks", text: "none yet" })
    : h("ol", { class: "wf-facts" }, d.facts.map((factId) => {
      const fact = shown.get(factId)
      return h("li", { "data-fact": factId },
        h("span", { class: "mono", text: factId }),
        fact ? h("span", { class: "checks", text: ` · ${fact.type} · #${fact.sequence} · ${fact.created_at}` }) : null,
        fact?.traceparent ? h("span", { class: "mono checks", title: fact.traceparent, text: ` · trace ${shorten(traceId(fact.traceparent), 12)}` }) : null)
    })))
  if (d.cloudflare && "output" in d.cloudflare && d.cloudflare.output !== undefined) {
    td.appendChild(h("div", { class: "checks", text: "Output" }))
    td.appendChild(h("pre", { text: (JSON.stringify(d.cloudflare.output, null, 2) ?? "").slice(0, 65_536) }))
  }
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
  return Api.workflow(id).then((record) => {
    if (expanded.has(id)) expanded.set(id, { record })
  }, (error: unknown) => {
    if (expanded.has(id)) expanded.set(id, { error: Api.errorText(error) })
  }).then(render)
}

/** After an action: the instance's detail (if open) and the list read again. */
const changed = (record: Api.WorkflowDetail, message: string) => {
  if (expanded.has(record.instance_id)) expanded.set(record.instance_id, { record })
  Toast.show(message)
  return load(false)
}

const askRetry = (r: Api.WorkflowInstance) =>
  Dialog.open({
    title: "Retry this workflow instance?",
    text: `It runs again from its start; every step keeps its idempotency key, so what was done is not done twice. (${r.workflow} · ${shorten(r.subject, 60)})`,
    input: false, ok: "Retry",
    run: () => Api.retryWorkflow(r.instance_id).then((record) => changed(record, `Retrying ${record.instance_id}`))
  })

const askTerminate = (r: Api.WorkflowInstance) =>
  Dialog.open({
    title: "Terminate this workflow instance?",
    text: `It stops where it is: no further step runs and nothing is compensated. Retry runs it again. (${r.workflow} · ${shorten(r.subject, 60)})`,
    input: false, ok: "Terminate",
    run: () => Api.terminateWorkflow(r.instance_id).then((record) => changed(record, `Terminated ${record.instance_id}`))
  })

const filtersChanged = () => {
  filters = {
    workflow: byId<HTMLInputElement>("w-workflow").value.trim(),
    status: byId<HTMLSelectElement>("w-status").value,
    subject: byId<HTMLInputElement>("w-subject").value.trim()
  }
  expanded.clear()
  next = null
  void load(false)
}

/** Nothing of the previous session stays. */
export const reset = (): void => {
  rows = []
  next = null
  expanded.clear()
  clear(byId("workflows-rows"))
  byId("workflows-sub").textContent = ""
  byId("workflows-empty").hidden = true
  byId("workflows-error").hidden = true
  byId("workflows-more").hidden = true
}

export const setup = (): void => {
  for (const status of statuses) byId("w-status").appendChild(h("option", { value: status, text: status }))
  byId("w-status").addEventListener("change", filtersChanged)
  byId("workflows-filters").addEventListener("submit", (event) => {
    event.preventDefault()
    filtersChanged()
  })
  byId("workflows-more").addEventListener("click", () => void load(true))
}
