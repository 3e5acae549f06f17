/**
 * The projections panel (`#projections`): each registered projection's catch-up, from `GET /v1/projections`
 * (scope platform) — current, catching up (with the replay's progress in shards and facts), not migrated
 * (with the missing table), or not checked yet. A token without the platform scope gets a notice instead.
 */
import * as Api from "./Api.js"
import { byId, clear, h } from "./Dom.js"
import { badge, count, when } from "./Format.js"

const row = (p: Api.ProjectionState) => {
  const r = p.rebuild
  const total = r?.shards_total ?? 0
  const done = r?.shards_done ?? 0
  const fill = h("div", { class: "fill" })
  fill.style.width = `${((total === 0 ? (p.status === "current" ? 1 : 0) : Math.min(1, done / total)) * 100).toFixed(1)}%`
  const version = p.recorded_version === null || p.recorded_version === p.version ? `v${p.version}` : `v${p.recorded_version} → v${p.version}`
  return h("tr", { "data-projection": p.projection, "data-status": p.status },
    h("td", { class: "mono", text: p.projection }),
    h("td", { text: version }),
    h("td", {}, badge(p.status)),
    h("td", {}, r === null ? "—" : h("span", {}, h("div", { class: "bar", role: "progressbar", "aria-valuemin": 0, "aria-valuemax": total, "aria-valuenow": done }, fill),
      " ", h("span", { class: "checks", text: `${done} / ${total} shards · ${count(r.facts_replayed)} facts · ${r.batch_id}` }))),
    h("td", {}, p.updated_at ? when(p.updated_at) : "—"),
    h("td", { class: "wrap", text: p.detail ?? "" }))
}

/** Loads and renders the panel; an error is shown in its place. Never rejects. */
export const load = (): Promise<void> =>
  Api.projections().then((answer) => {
    const body = clear(byId("projections-body"))
    const states = answer.data ?? []
    const catching = states.filter((p) => p.status === "catching_up").length
    const unmigrated = states.filter((p) => p.status === "not_migrated").length
    byId("projections-sub").textContent = `${catching} catching up${unmigrated > 0 ? `, ${unmigrated} not migrated` : ""}`
    const labels = ["Projection", "Version", "Status", "Catch-up", "Updated", "Detail"]
    body.appendChild(h("table", {},
      h("thead", {}, h("tr", {}, labels.map((label) => h("th", { text: label })))),
      h("tbody", {}, states.map(row))))
  }, (error: unknown) => {
    const body = clear(byId("projections-body"))
    if (error instanceof Api.ApiError && error.status === 403) {
      body.appendChild(h("div", { class: "notice", id: "projections-forbidden", text: "Projections' catch-up needs a token with the platform scope (a replay spans every tenant)." }))
      return
    }
    body.appendChild(h("div", { class: "error", text: `Could not load projections: ${Api.errorText(error)}` }))
  })

/** Nothing of the previous session stays. */
export const reset = (): void => {
  clear(byId("projections-body"))
  byId("projections-sub").textContent = ""
}
