/**
 * The batch jobs panel (`#batches`): the running jobs with progress bars, then the ten latest finished ones —
 * imports, exports, reconciles and rebuilds of the token's tenant, from `GET /v1/batches`.
 */
import * as Api from "./Api.js"
import { byId, clear, h } from "./Dom.js"
import { badge, count, when } from "./Format.js"

const row = (b: Api.BatchJob) => {
  // Every job has offset / total (a rebuild's in shards, an import's in lines); total is unknown until the end of a manifest.
  const rebuild = b.operation === "rebuild"
  const total = b.total ?? 0
  const done = b.offset ?? 0
  const fraction = total === 0 ? (b.status === "running" || b.status === "queued" ? 0 : 1) : Math.min(1, done / total)
  const fill = h("div", { class: "fill" })
  fill.style.width = `${(fraction * 100).toFixed(1)}%`
  const named = (value: unknown) => (typeof value === "string" ? value : "")
  const target = b.operation === "rebuild" ? b.projection : named(b.params.projection) || named(b.params.manifest)
  const firstError = b.operation === "rebuild" ? undefined : b.errors[0]
  return h("tr", { "data-batch": b.batch_id, "data-status": b.status },
    h("td", { class: "mono", text: b.batch_id }),
    // A rebuild the system started (`cu_…`) is a projection catching up.
    h("td", { text: (rebuild && b.batch_id.startsWith("cu_") ? "catch-up" : b.operation) + (target ? ` ${target}` : "") }),
    h("td", {}, badge(b.status)),
    h("td", {}, h("div", { class: "bar", role: "progressbar", "aria-valuemin": 0, "aria-valuemax": total, "aria-valuenow": done }, fill),
      " ", h("span", { class: "checks", text: `${done} / ${b.total === null ? "?" : total}${rebuild ? " shards" : " items"}` })),
    h("td", { class: "num", text: count(b.succeeded) + (b.failed ? ` (${count(b.failed)} failed)` : "") }),
    h("td", {}, when(b.started_at ?? b.created_at)),
    h("td", {}, b.finished_at ? when(b.finished_at) : "—"),
    h("td", { class: "wrap", text: b.error || (firstError ? `line ${firstError.line}: ${firstError.error}` : "") }))
}

/** Loads and renders the panel; an error is shown in its place. Never rejects. */
export const load = (): Promise<void> =>
  Api.batches(20).then((page) => {
    const body = clear(byId("batches-body"))
    const jobs = page.data ?? []
    const running = jobs.filter((b) => b.status === "running")
    const recent = jobs.filter((b) => b.status !== "running").slice(0, 10)
    byId("batches-sub").textContent = `${running.length} running`
    if (jobs.length === 0) {
      body.appendChild(h("div", { class: "empty", id: "batches-empty" }, h("strong", { text: "No batch jobs" }),
        "Imports, exports, reconciles and rebuilds (POST /v1/batches) show here with their progress."))
      return
    }
    const labels = ["Batch", "Operation", "Status", "Progress", "Done", "Started", "Finished", "Error"]
    body.appendChild(h("table", {},
      h("thead", {}, h("tr", {}, labels.map((label, i) => h("th", { class: i === 4 ? "num" : "", text: label })))),
      h("tbody", {}, [...running, ...recent].map(row))))
  }, (error: unknown) => {
    clear(byId("batches-body")).appendChild(h("div", { class: "error", text: `Could not load batch jobs: ${Api.errorText(error)}` }))
  })

/** Nothing of the previous session stays. */
export const reset = (): void => {
  clear(byId("batches-body"))
  byId("batches-sub").textContent = ""
}
