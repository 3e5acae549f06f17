/**
 * The queue health panel (`#health`): overall cards, throughput and lag charts, and a row per queue with its
 * status, counters, latencies and two small charts — from `GET /v1/queues/health` for the chosen window. A
 * token without the platform scope gets a notice instead (queue health spans every tenant).
 */
import * as Api from "./Api.js"
import * as Charts from "./Charts.js"
import { byId, clear, h } from "./Dom.js"
import { badge, count, duration, percent } from "./Format.js"

let selectedWindow: Api.HealthWindow = "1h"

const isWindow = (value: string): value is Api.HealthWindow => (Api.healthWindows as ReadonlyArray<string>).includes(value)

const card = (label: string, value: Node | string, id?: string) =>
  h("div", { class: "card" }, h("div", { class: "label", text: label }), typeof value === "string" ? h("div", { class: "value", id, text: value }) : h("div", { class: "value" }, value))

const render = (health: Api.Health) => {
  const body = clear(byId("health-body"))
  const queues = health.queues ?? []
  const totals = queues.reduce((t, q) => ({ open: t.open + q.dlq_open, received: t.received + q.received, dead: t.dead + q.dead_lettered }), { open: 0, received: 0, dead: 0 })
  byId("health-sub").textContent = `window ${health.window} · since ${new Date(health.since).toLocaleTimeString()}`
  body.appendChild(h("div", { class: "cards" },
    card("Overall", badge(health.status)),
    card(`Received (${health.window})`, count(totals.received)),
    card(`Dead-lettered (${health.window})`, count(totals.dead)),
    card("Open dead letters", count(totals.open), "open-total"),
    card("Ledger shards with relay pending", count(health.ledger ? health.ledger.relay_pending_shards : null)),
    card("Dead letters spilled to R2", count(health.spilled_dead_letters), "spilled-total")))

  const overall = Charts.buckets(queues.flatMap((q) => q.series ?? []), selectedWindow)
  const per = overall.size === 1 ? "min" : `${overall.size} min`
  const throughput = overall.points.map((p) => p.received)
  const lag = overall.points.map((p) => p.lag)
  const peak = Math.max(0, ...throughput)
  const worstLag = lag.reduce<number>((a, b) => (b === null ? a : Math.max(a, b)), 0)
  body.appendChild(h("div", { class: "charts" },
    h("div", { class: "chart", id: "chart-throughput" },
      h("div", { class: "label" }, h("span", { text: `Throughput, all queues (messages per ${per})` }), h("span", { text: `peak ${count(peak)}` })),
      Charts.chart(throughput, "throughput", "big", `messages received per ${per} over the last ${health.window}; peak ${peak}`), Charts.axis(health.window)),
    h("div", { class: "chart", id: "chart-lag" },
      h("div", { class: "label" }, h("span", { text: "Lag p99, worst queue (created → processed)" }), h("span", { text: `max ${worstLag ? duration(worstLag) : "—"}` })),
      Charts.chart(lag, "lag", "big", `lag p99 per ${per} over the last ${health.window}`), Charts.axis(health.window))))

  const labels = ["Queue", "Status", "Received", "Acked", "Retried", "Dead-lettered", "Retry rate", "DLQ open", "Depth", "Lag p50", "Lag p99", "Processing p99", "Throughput", "Lag"]
  const thead = h("thead", {}, h("tr", {}, labels.map((label, i) => h("th", { class: i >= 2 && i <= 11 ? "num" : "", text: label }))))
  const tbody = h("tbody")
  for (const q of queues) {
    const b = Charts.buckets(q.series ?? [], selectedWindow)
    const checks = q.checks ?? {}
    const failing = Object.keys(checks).filter((k) => checks[k] !== "ok")
    const reasons = Object.entries(q.dlq_by_reason ?? {}).map(([reason, n]) => `${reason} ${n}`).join(", ")
    tbody.appendChild(h("tr", { "data-queue": q.queue, "data-status": q.status },
      h("td", { class: "mono" }, q.queue),
      h("td", {}, badge(q.status), failing.length ? h("div", { class: "checks", text: failing.map((k) => `${k} ${checks[k]}`).join(", ") }) : null),
      h("td", { class: "num", text: count(q.received) }),
      h("td", { class: "num", text: count(q.acked) }),
      h("td", { class: "num", text: count(q.retried) }),
      h("td", { class: "num", text: count(q.dead_lettered), title: reasons || null }),
      h("td", { class: "num", text: percent(q.retry_rate) }),
      h("td", { class: "num", text: count(q.dlq_open) }),
      h("td", { class: "num", text: q.depth === null ? "n/a" : count(q.depth), title: q.depth === null ? "queue depth is not available here" : null }),
      h("td", { class: "num", text: duration(q.lag_p50_ms) }),
      h("td", { class: "num", text: duration(q.lag_p99_ms) }),
      h("td", { class: "num", text: duration(q.processing_p99_ms) }),
      h("td", {}, Charts.chart(b.points.map((p) => p.received), "throughput", "spark", `${q.queue}: messages received per ${b.size === 1 ? "minute" : `${b.size} minutes`}, last ${health.window}`)),
      h("td", {}, Charts.chart(b.points.map((p) => p.lag), "lag", "spark", `${q.queue}: lag p99, last ${health.window}`))))
  }
  body.appendChild(h("table", { id: "health-table" }, thead, tbody))
}

/** Loads and renders the panel; an error (or a missing scope) is shown in its place. Never rejects. */
export const load = (): Promise<void> =>
  Api.queueHealth(selectedWindow).then(render, (error: unknown) => {
    const body = clear(byId("health-body"))
    byId("health-sub").textContent = ""
    if (error instanceof Api.ApiError && error.status === 403) {
      body.appendChild(h("div", { class: "notice", id: "health-forbidden", text: "Queue health needs a token with the platform scope (the queues are shared by every tenant). This token sees its own tenant's dead letters and batch jobs." }))
    } else body.appendChild(h("div", { class: "error", text: `Could not load queue health: ${Api.errorText(error)}` }))
  })

/** Nothing of the previous session stays. */
export const reset = (): void => {
  clear(byId("health-body"))
  byId("health-sub").textContent = ""
}

export const setup = (): void => {
  byId<HTMLSelectElement>("window").addEventListener("change", (event) => {
    const value = (event.currentTarget as HTMLSelectElement).value
    if (isWindow(value)) {
      selectedWindow = value
      void load()
    }
  })
}
