/**
 * What an alert is, before any state is read: the event types operators subscribe to and their catalog, the
 * keys graded (each queue's health, the ledger's relay, the dead letters, the failed workflow instances), the
 * timing constants, an alert's id and the dead-letter and failed-instance summaries an alert carries. Pure;
 * Alerts re-exports what it exported.
 */
import * as Described from "../api/Alerts.js"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import type * as WebhookStore from "../webhooks/WebhookStore.js"

/** The alert event types operators subscribe their endpoints to, as the API describes them (`@factline/core/api`'s Alerts). */
export const eventTypes = Described.eventTypes
export type EventType = (typeof eventTypes)[keyof typeof eventTypes]

/** The catalog alert endpoints are validated against: the alert event types, and no fact type. */
export const catalog: WebhookStore.Catalog = {
  eventTypes: new Set(Object.values(eventTypes)),
  eventTypesOfFact: () => []
}

export const descriptions: Readonly<Record<EventType, string>> = {
  "factline.health.changed": "A queue's health level changed (ok, warning, critical; each queue, and the ledger's relay, announced on its own): its graded checks over the last 15 minutes, with every queue's beside them.",
  "factline.dead_letter.opened": "Dead letters opened since the last such alert: how many, by queue and reason.",
  "factline.workflow.failed": "Workflow instances that failed since the last such alert: how many, by tenant and workflow, with their instance ids."
}

/** The window health is graded over: retry rate and processing p99 sustained for this long. */
export const windowMinutes = 15
/** A pending alert older than this was left by a crash or a failed send: the next evaluation hands it over again. */
export const pendingRetryMs = 60_000
/** Dead letters one alert claims per database at most (the rest go to the next). */
export const claimLimit = 10_000
/** Failed workflow instances one alert claims at most (the rest go to the next). */
export const failedInstanceLimit = 1_000
/** Instance ids a failed-instance alert names per tenant and workflow at most (its counts are whole). */
export const instanceIdsNamed = 100
/** The stream of the alert tenant that delivery outcome facts (`webhook_sent`) are appended to. */
export const stream = "alerts"
/** The fact type an alert stands for in its deliveries (`fact_type`); alerts are not appended to the ledger. */
export const factType = "factline.alert"

/** A queue's health key (`health:factline-events`), the ledger's relay (`health:ledger`), the dead letters' or the failed workflow instances'. */
export type Key = `health:${string}` | "dead_letters" | "workflows_failed"
/** The health key of a platform queue (a grouped purpose is one queue: its groups are summed by Metrics). */
export const healthKey = (queue: string): Key => `health:${queue}`
/** The health key of the ledger's relay: warning while a shard's relay is pending. */
export const ledgerKey: Key = "health:ledger"
export const keys: ReadonlyArray<Key> = [...RetryPolicy.all.map((p) => healthKey(p.queue)), ledgerKey, "dead_letters", "workflows_failed"]

const hex = (bytes: ArrayBuffer) => [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, "0")).join("")

/** The id of the alert a key's row decides at `version` and `at`: the same decision, the same id. */
export const alertId = async (key: Key, version: number, at: string) =>
  `al_${hex(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(`${key}\u0000${version}\u0000${at}`))).slice(0, 32)}`

/** One alert's dead-letter counts from every database, merged: by queue, by queue and reason, first and last received. */
export const summarize = (alert: string, rows: ReadonlyArray<{ queue: string; reason: string; n: number; first: string; last: string }>) => {
  const merged = new Map<string, { queue: string; reason: string; count: number }>()
  for (const r of rows) {
    const key = `${r.queue}\u0000${r.reason}`
    const current = merged.get(key) ?? { queue: r.queue, reason: r.reason, count: 0 }
    merged.set(key, { ...current, count: current.count + r.n })
  }
  const byQueue: Record<string, number> = {}
  for (const m of merged.values()) byQueue[m.queue] = (byQueue[m.queue] ?? 0) + m.count
  const count = [...merged.values()].reduce((n, m) => n + m.count, 0)
  return {
    alert_id: alert,
    count,
    by_queue: byQueue,
    by_queue_and_reason: [...merged.values()].sort((a, b) => b.count - a.count || a.queue.localeCompare(b.queue) || a.reason.localeCompare(b.reason)),
    first_received_at: rows.length === 0 ? null : rows.map((r) => r.first).sort()[0]!,
    last_received_at: rows.length === 0 ? null : rows.map((r) => r.last).sort().at(-1)!,
    inspect: "GET /v1/dlq?status=open"
  }
}

/** One failed instance an alert claimed. */
export interface FailedInstance {
  readonly tenant_id: string
  readonly workflow: string
  readonly instance_id: string
  readonly subject: string
  readonly error: string | null
  readonly updated_at: string
}

/** The failed workflow instances one alert claimed: how many, by tenant, by tenant and workflow (naming the instance ids), first and last failed. */
export const summarizeFailedInstances = (alert: string, rows: ReadonlyArray<FailedInstance>) => {
  const groups = new Map<string, { tenant_id: string; workflow: string; count: number; instance_ids: Array<string>; last_error: string | null }>()
  const byTenant: Record<string, number> = {}
  for (const r of [...rows].sort((a, b) => a.updated_at.localeCompare(b.updated_at))) {
    const key = `${r.tenant_id}\u0000${r.workflow}`
    const group = groups.get(key) ?? { tenant_id: r.tenant_id, workflow: r.workflow, count: 0, instance_ids: [], last_error: null }
    group.count++
    if (group.instance_ids.length < instanceIdsNamed) group.instance_ids.push(r.instance_id)
    group.last_error = r.error ?? group.last_error
    groups.set(key, group)
    byTenant[r.tenant_id] = (byTenant[r.tenant_id] ?? 0) + 1
  }
  const failedAt = rows.map((r) => r.updated_at).sort()
  return {
    alert_id: alert,
    count: rows.length,
    by_tenant: byTenant,
    by_tenant_and_workflow: [...groups.values()].sort((a, b) => b.count - a.count || a.tenant_id.localeCompare(b.tenant_id) || a.workflow.localeCompare(b.workflow)),
    first_failed_at: failedAt[0] ?? null,
    last_failed_at: failedAt.at(-1) ?? null,
    inspect: "GET /v1/workflows?status=failed"
  }
}
