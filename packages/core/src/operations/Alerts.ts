/**
 * Operator alerts: what seeds 001–003 ask to be told without asking — the platform's health changing level
 * (`ok → warning → critical → ok`: dead letters open, depth, processing p99, retry rate over the last
 * `windowMinutes`, a pending relay), dead letters opening and workflow instances failing — pushed as signed
 * webhook deliveries to the operators' endpoints.
 *
 * The endpoints are webhook endpoints of a reserved tenant (`alertsTenantId`, which no token can be bound
 * to) subscribed to the alert event types; an alert is handed to the webhooks queue as ordinary delivery
 * messages (`WebhookConsumer.deliveryMessage`), so it is signed (Standard Webhooks), SSRF-guarded, retried,
 * logged and recoverable like any delivery.
 *
 * `evaluate` (the cron, every 5 minutes; `POST /v1/alerts/evaluate`) grades health as `GET /v1/queues/health`
 * does and compares EACH QUEUE's level with the level last announced for that queue (`alert_state`, platform
 * database: one key per queue, `health:factline-events` …, and `health:ledger` for a pending relay) and emits
 * on a change of that key — so a second queue turning critical while another already is, is announced too;
 * new dead letters are claimed per evaluation (`dead_messages.alert_id`, each record by exactly one alert)
 * and announced as one alert with counts by queue and reason, not one per message; failed workflow instances
 * likewise (`workflow_instances.alert_id`, `alerted_at`: each failure by one alert, an instance that fails
 * again after a retry once more), one alert by tenant and workflow naming the instance ids.
 *
 * - De-duplication: an alert's id derives from its key, the row's version and the time it was decided, and
 *   the `webhook-id` of each delivery from the alert id and the endpoint; the decision is a compare-and-swap
 *   on `version`, so of concurrent evaluations exactly one emits a given alert.
 * - Quiet period (`FACTLINE_ALERT_QUIET_MINUTES`, default 15), per key: after an alert of a key, a better level,
 *   new dead letters and newly failed instances wait until the period since it has passed (then one alert says where things stand); a
 *   worse level than the one announced goes at once. A flap therefore sends at most one recovery per period.
 * - Nothing lost: the alert is written as `pending` in the same statement that decides it and cleared once
 *   handed to the queue; a pending alert older than `pendingRetryMs` is handed over again by the next
 *   evaluation, under the same ids (the delivery consumer does not send a delivery recorded as succeeded).
 *
 * It does not grade (Metrics does), deliver (WebhookConsumer does) or store endpoints (WebhookStore does).
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Result from "effect/Result"
import { alertsTenantId } from "@factline/schemas"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import * as Failure from "../failures/Failure.js"
import * as Placement from "../placement/Placement.js"
import * as Sql from "../platform/Sql.js"
import * as Time from "../platform/Time.js"
import { Queues } from "../platform/Queues.js"
import * as WebhookConsumer from "../webhooks/WebhookConsumer.js"
import * as WebhookStore from "../webhooks/WebhookStore.js"
import * as Metrics from "./Metrics.js"
import * as AlertClaims from "./AlertClaims.js"
import { type EventType, type Key, alertId, catalog, eventTypes, factType, healthKey, keys, ledgerKey, pendingRetryMs, stream, windowMinutes } from "./AlertCatalog.js"

export { alertsTenantId as tenant }

export { type EventType, type Key, alertId, catalog, claimLimit, descriptions, eventTypes, factType, failedInstanceLimit, healthKey, keys, ledgerKey, pendingRetryMs, stream, windowMinutes } from "./AlertCatalog.js"

/** An alert as decided: its id, type and data (null: what it claimed — dead letters, failed instances — read back by the alert id). */
interface Alert {
  readonly alert_id: string
  readonly event_type: EventType
  readonly occurred_at: string
  readonly data: Record<string, unknown> | null
}

export const StateRow = Schema.Struct({
  key: Schema.Literals(keys),
  state: Schema.String,
  changed_at: Schema.String,
  sent_state: Schema.NullOr(Schema.String),
  sent_at: Schema.NullOr(Schema.String),
  version: Schema.Number,
  pending: Schema.NullOr(Schema.String),
  pending_since: Schema.NullOr(Schema.String)
})
export type StateRow = typeof StateRow.Type

const Version = Schema.Struct({ version: Schema.Number })

/** What one evaluation handed to the webhooks queue. */
export interface Sent {
  readonly key: Key
  readonly alert_id: string
  readonly event_type: EventType
  readonly endpoints: number
}

export interface Options {
  /** `FACTLINE_ALERT_QUIET_MINUTES` (the Worker passes its setting). */
  readonly quietPeriodMs: number
}

/** `FACTLINE_ALERT_QUIET_MINUTES`' default. */
export const defaultQuietMinutes = 15

const unavailable = Failure.unavailable("the alert state")
const rank: Record<string, number> = { ok: 0, warning: 1, critical: 2 }

/** Every key's row (each created on first read). */
export const readState = Effect.fn("Alerts.readState")(function*() {
  const sql = yield* Sql.PlatformDatabase
  const now = yield* Time.now
  const results = yield* Effect.mapError(sql.batch([
    ...keys.map((key) => Sql.statement("INSERT INTO alert_state (key, state, changed_at, sent_state, version) VALUES (?, 'ok', ?, 'ok', 0) ON CONFLICT (key) DO NOTHING", key, now)),
    // Only today's keys (a row of a key no longer graded — the one platform-wide `health` of before — is left alone).
    Sql.statement(`SELECT * FROM alert_state WHERE key IN (${keys.map(() => "?").join(", ")}) ORDER BY key`, ...keys)
  ], StateRow), unavailable)
  return new Map(results.at(-1)!.rows.map((r) => [r.key, r] as const)) as ReadonlyMap<Key, StateRow>
})

/** Hands an alert to the webhooks queue: one delivery message per enabled endpoint subscribed to its type. */
const deliver = (alert: Alert, data: Record<string, unknown>) =>
  Effect.gen(function*() {
    const store = yield* WebhookStore.WebhookStore
    // Read fresh (an alert is rare): an endpoint registered through another isolate is not missed.
    store.invalidate(alertsTenantId)
    const configs = (yield* store.configsFor([alertsTenantId])).get(alertsTenantId) ?? []
    const endpoints = configs.filter((e) => e.enabled && e.event_types.includes(alert.event_type))
    const now = yield* Time.now
    const fact = { fact_id: alert.alert_id, type: factType, stream, tenant_id: alertsTenantId, correlation_id: alert.alert_id, created_at: alert.occurred_at }
    const messages = yield* Effect.promise(() =>
      Promise.all(endpoints.map((endpoint) => WebhookConsumer.deliveryMessage({ fact, endpoint, eventType: alert.event_type, data, now }))))
    yield* (yield* Queues).send(RetryPolicy.webhooks.queue, messages)
    return endpoints.length
  })

/** Delivers a decided alert and clears it from its row (only the version that decided it). */
const complete = (key: Key, version: number, alert: Alert) =>
  Effect.gen(function*() {
    const sql = yield* Sql.PlatformDatabase
    const claiming = key === "dead_letters" || key === "workflows_failed" ? AlertClaims.byKey[key] : undefined
    const claimed = alert.data === null && claiming !== undefined ? yield* claiming.read(alert.alert_id) : undefined
    const data = alert.data ?? claimed!
    // A claiming alert that found nothing to claim (another evaluation's claim took it) is sent to nobody.
    const endpoints = claimed?.count === 0 ? 0 : yield* deliver(alert, data)
    yield* Effect.mapError(sql.run(Sql.statement("UPDATE alert_state SET pending = NULL, pending_since = NULL WHERE key = ? AND version = ?", key, version)), unavailable)
    if (claimed?.count === 0) return undefined
    return { key, alert_id: alert.alert_id, event_type: alert.event_type, endpoints } satisfies Sent
  })

/**
 * Decides an alert: bumps the row's version if it is still `row.version` (compare-and-swap), recording the
 * alert as pending and what it announces; undefined when another evaluation decided first.
 */
const decide = (row: StateRow, now: string, eventType: EventType, announce: { readonly state: string; readonly data: (alert: string) => Record<string, unknown> | null }) =>
  Effect.gen(function*() {
    const sql = yield* Sql.PlatformDatabase
    const id = yield* Effect.promise(() => alertId(row.key, row.version + 1, now))
    const alert: Alert = { alert_id: id, event_type: eventType, occurred_at: now, data: announce.data(id) }
    const won = yield* Effect.mapError(sql.all(Version, Sql.statement(
      `UPDATE alert_state SET state = ?, changed_at = CASE WHEN state = ? THEN changed_at ELSE ? END, sent_state = ?, sent_at = ?,
         version = version + 1, pending = ?, pending_since = ?
       WHERE key = ? AND version = ? AND pending IS NULL RETURNING version`,
      announce.state, announce.state, now, announce.state, now, JSON.stringify(alert), now, row.key, row.version
    )), unavailable)
    return won.length === 0 ? undefined : alert
  })

const quietFor = (row: StateRow, nowMs: number, quietMs: number) => row.sent_at !== null && nowMs - Date.parse(row.sent_at) < quietMs

/**
 * One health key: announces a change of its level (at once when worse, after the quiet period when better);
 * `data` describes the alert. Each key on its own row: its own de-duplication and quiet period.
 */
const evaluateLevel = (row: StateRow, level: Metrics.Level, quietMs: number, nowMs: number, data: (alert: string, previous: string) => Record<string, unknown>) =>
  Effect.gen(function*() {
    const sql = yield* Sql.PlatformDatabase
    const now = new Date(nowMs).toISOString()
    const announced = row.sent_state ?? "ok"
    const worse = (rank[level] ?? 0) > (rank[announced] ?? 0)
    if (row.pending !== null || level === announced || (!worse && quietFor(row, nowMs, quietMs))) {
      // Nothing to announce now (or an alert of this key is being handed over): the graded level is recorded.
      if (level !== row.state) {
        yield* Effect.mapError(sql.run(Sql.statement("UPDATE alert_state SET state = ?, changed_at = ? WHERE key = ? AND version = ? AND state != ?", level, now, row.key, row.version, level)), unavailable)
      }
      return undefined
    }
    const alert = yield* decide(row, now, eventTypes.healthChanged, { state: level, data: (id) => data(id, announced) })
    return alert === undefined ? undefined : yield* complete(row.key, row.version + 1, alert)
  })

/** The health keys: grades every queue once, then announces each queue's (and the ledger relay's) change of level. */
const evaluateHealth = (rows: ReadonlyMap<Key, StateRow>, quietMs: number) =>
  Effect.gen(function*() {
    const nowMs = yield* Time.millis
    const since = new Date(nowMs - windowMinutes * 60_000).toISOString()
    const { queues, relayPendingShards } = yield* Metrics.readHealth(since)
    const platform = Metrics.overall(queues, relayPendingShards)
    const summary = queues.map((q) => ({
      queue: q.queue, status: q.status, checks: q.checks, dlq_open: q.dlq_open, depth: q.depth, backlog_age_ms: q.backlog_age_ms,
      retention_seconds: q.retention_seconds, ...(q.groups === undefined ? {} : { groups: q.groups }), retry_rate: q.retry_rate,
      processing_p99_ms: q.processing_p99_ms, lag_p99_ms: q.lag_p99_ms
    }))
    const common = (alert: string, subject: string, level: Metrics.Level, previous: string, reasons: ReadonlyArray<string>) => ({
      alert_id: alert,
      queue: subject,
      status: level,
      previous_status: previous,
      platform_status: platform,
      window: `${windowMinutes}m`,
      reasons,
      queues: summary,
      relay_pending_shards: relayPendingShards,
      thresholds: Metrics.thresholds,
      inspect: "GET /v1/queues/health"
    })
    const sent: Array<Sent> = []
    for (const q of queues) {
      const row = rows.get(healthKey(q.queue))
      if (row === undefined) continue
      const reasons = Object.entries(q.checks).filter(([, l]) => l !== "ok").map(([check, l]) => `${q.queue}: ${check} ${l}`)
      const done = yield* evaluateLevel(row, q.status, quietMs, nowMs, (id, previous) => common(id, q.queue, q.status, previous, reasons))
      if (done !== undefined) sent.push(done)
    }
    const ledger = rows.get(ledgerKey)
    if (ledger !== undefined) {
      const level: Metrics.Level = relayPendingShards > 0 ? "warning" : "ok"
      const reasons = relayPendingShards > 0 ? [`ledger: ${relayPendingShards} shard(s) with a pending relay`] : []
      const done = yield* evaluateLevel(ledger, level, quietMs, nowMs, (id, previous) => common(id, "ledger", level, previous, reasons))
      if (done !== undefined) sent.push(done)
    }
    return sent
  })

/**
 * A claiming key (the dead letters, the failed workflow instances: AlertClaims): claims what no alert has
 * counted yet and announces it as one alert.
 */
const evaluateClaims = (row: StateRow, quietMs: number, claiming: AlertClaims.Claiming) =>
  Effect.gen(function*() {
    const nowMs = yield* Time.millis
    if (row.pending !== null || quietFor(row, nowMs, quietMs)) return undefined
    // One indexed probe first: the evaluation decides nothing while nothing is new.
    if (!(yield* claiming.fresh)) return undefined
    const alert = yield* decide(row, new Date(nowMs).toISOString(), claiming.eventType, { state: "ok", data: () => null })
    if (alert === undefined) return undefined
    // Each record is claimed by one alert (the UPDATE only takes unclaimed ones); what is read back is the claim's.
    yield* claiming.claim(alert.alert_id)
    return yield* complete(row.key, row.version + 1, alert)
  })

/** Hands over again an alert left pending by a crash or a failed send (claimed by moving `pending_since`). */
const retryPending = (row: StateRow) =>
  Effect.gen(function*() {
    const sql = yield* Sql.PlatformDatabase
    const now = yield* Time.now
    const claimed = yield* Effect.mapError(sql.all(Version, Sql.statement(
      "UPDATE alert_state SET pending_since = ? WHERE key = ? AND version = ? AND pending_since IS ? RETURNING version",
      now, row.key, row.version, row.pending_since
    )), unavailable)
    if (claimed.length === 0) return undefined
    return yield* complete(row.key, row.version, JSON.parse(row.pending!) as Alert)
  })

/**
 * One evaluation: alerts left pending handed over again, then health, then new dead letters, then newly
 * failed workflow instances. Returns what it handed to the webhooks queue.
 */
export const evaluate = Effect.fn("Alerts.evaluate")(function*(options: Options) {
  const quietMs = options.quietPeriodMs
  const nowMs = yield* Time.millis
  const sent: Array<Sent> = []
  for (const row of (yield* readState()).values()) {
    if (row.pending !== null && nowMs - Date.parse(row.pending_since ?? row.changed_at) >= pendingRetryMs) {
      const retried = yield* retryPending(row)
      if (retried !== undefined) sent.push(retried)
    }
  }
  const rows = yield* readState()
  // Each key on its own: health that cannot be read does not hold back the dead letters' alert, nor the reverse.
  const results = [
    yield* Effect.result(evaluateHealth(rows, quietMs)),
    yield* Effect.result(Effect.map(evaluateClaims(rows.get("dead_letters")!, quietMs, AlertClaims.deadLetters), (done) => done === undefined ? [] : [done])),
    yield* Effect.result(Effect.map(evaluateClaims(rows.get("workflows_failed")!, quietMs, AlertClaims.failedInstances), (done) => done === undefined ? [] : [done]))
  ]
  for (const result of results) if (Result.isSuccess(result)) sent.push(...result.success)
  const failed = results.find(Result.isFailure)
  if (failed !== undefined) return yield* Effect.fail(failed.failure)
  return sent as ReadonlyArray<Sent>
})

/**
 * The store of the alert endpoints: the webhook store over the alert tenant, checking event types against
 * the alert catalog. `changed()` drops the delivery side's cached configs of the alert tenant in this isolate.
 */
export const endpoints = Effect.gen(function*() {
  const main = yield* WebhookStore.WebhookStore
  const placement = yield* Placement.TenantPlacement
  return { store: WebhookStore.placed(placement, main.settings, catalog), changed: () => main.invalidate(alertsTenantId) }
})
