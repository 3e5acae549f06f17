/**
 * Operator alerts end to end against a real HTTP receiver (scripts/Receiver.mjs): alert endpoints over the
 * platform-scoped API, a dead letter opening announced once — signed per Standard Webhooks and verified with
 * the `standardwebhooks` package — health level changes, de-duplication under concurrent evaluations, the
 * quiet period, an alert left pending by a failed hand-over finished by the next evaluation, a workflow
 * instance failing (the crm-sync, its deal refused by the CRM stand-in) announced once, and tenants kept out.
 *
 * Health and dead letters are platform-wide: each test first brings the platform to `ok` (its open dead
 * letters resolved, the metrics window emptied) and announces that, before registering its own endpoint.
 */
import { createExecutionContext, createScheduledController, waitOnExecutionContext } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { Webhook } from "standardwebhooks"
import { afterEach, describe, expect, it } from "vitest"
import { Alerts } from "@factline/core/runtime"
import type { PlatformEnv } from "@factline/workers"
import * as TokenConfig from "@factline/workers/tokens"
import { drain } from "./Drain.js"
import * as Faults from "./faults.js"
import { callCompleted, eventually, postEvents, request, tokenA, tokenPlatform, unique } from "./helpers.js"
import { holdQueue, overrideSettings, platform } from "./worker.js"

interface Received {
  readonly headers: Record<string, string>
  readonly body: string
  readonly status: number
}
interface AlertBody {
  readonly type: string
  readonly timestamp: string
  readonly data: Record<string, any>
}

const testEnv = env as unknown as PlatformEnv
const received = async (path: string): Promise<Array<Received>> => (await fetch(`${env.TEST_RECEIVER_URL}/received?path=${encodeURIComponent(path)}`)).json()
const api = async (method: string, path: string, body?: unknown, token = tokenPlatform) => {
  const response = await request(path, { method, token, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
  return { status: response.status, body: response.status === 204 ? null : await response.json<any>() }
}
const created: Array<string> = []
const createEndpoint = async (path: string, eventTypes: ReadonlyArray<string>) => {
  const { status, body } = await api("POST", "/v1/alerts/endpoints", { url: `${env.TEST_RECEIVER_URL}${path}`, event_types: eventTypes })
  expect(status, JSON.stringify(body)).toBe(201)
  created.push(body.id)
  return body as { id: string; secret: string }
}
afterEach(async () => {
  overrideSettings(undefined)
  for (const id of created.splice(0)) await api("DELETE", `/v1/alerts/endpoints/${id}`)
})

/** One evaluation through the API (what the cron runs), with the quiet period the test sets. */
const evaluate = async (quietMinutes: number): Promise<ReadonlyArray<Alerts.Sent>> => {
  overrideSettings({ FACTLINE_ALERT_QUIET_MINUTES: String(quietMinutes) })
  const { status, body } = await api("POST", "/v1/alerts/evaluate")
  expect(status, JSON.stringify(body)).toBe(200)
  return body.sent
}
const verify = (secret: string, r: Received) => new Webhook(secret).verify(r.body, r.headers) as AlertBody

const databases = () => [env.DB, env.FACTLINE_READ_DB_1]
/** Resolves every open dead letter, empties the metrics window and announces `ok` (no endpoint is registered yet). */
const settleToOk = async () => {
  await drain()
  for (const db of databases()) await db.prepare("UPDATE dead_messages SET status = 'skipped', resolved_at = ?, alert_id = COALESCE(alert_id, 'settled') WHERE status = 'open'").bind(new Date().toISOString()).run()
  await env.DB.prepare("UPDATE workflow_instances SET alert_id = COALESCE(alert_id, 'settled'), alerted_at = updated_at WHERE status = 'failed'").run()
  await env.DB.prepare("DELETE FROM queue_metrics").run()
  await evaluate(0)
  const state = await api("GET", "/v1/alerts")
  const health = state.body.data.filter((s: any) => s.key.startsWith("health:"))
  expect(health.map((s: any) => s.key).sort()).toEqual([...Alerts.keys].filter((k) => k.startsWith("health:")).sort())
  for (const key of health) expect(key, key.key).toMatchObject({ state: "ok", announced: "ok", pending: false })
}
/** Opens `n` dead letters of `queue` directly in the store (already counted by an alert: only health sees them). */
const openDeadLetters = async (n: number, run: string, queue = "factline-batch") => {
  const now = new Date().toISOString()
  for (let i = 0; i < n; i += 10) {
    const rows = Array.from({ length: Math.min(10, n - i) }, (_, j) => `${run}_${i + j}`)
    await env.DB.prepare(
      `INSERT INTO dead_messages (id, queue, reason, last_error, attempts, first_attempted_at, last_attempted_at, original_message, status, received_at, alert_id)
       SELECT value, ?3, 'test', 'test', 1, ?1, ?1, '{}', 'open', ?1, 'counted' FROM json_each(?2)`
    ).bind(now, JSON.stringify(rows), queue).run()
  }
}
const resolveDeadLetters = (run: string) =>
  env.DB.prepare("UPDATE dead_messages SET status = 'skipped', resolved_at = ? WHERE id LIKE ? AND status = 'open'").bind(new Date().toISOString(), `${run}_%`).run()
/** Moves the last alert of every key `minutes` into the past (time passing, without waiting for it). */
const age = (minutes: number) =>
  env.DB.prepare("UPDATE alert_state SET sent_at = ? WHERE sent_at IS NOT NULL").bind(new Date(Date.now() - minutes * 60_000).toISOString()).run()

/** A message nobody handles, through the events queue: dead-lettered at once (unknown_message_type). */
const poison = async () => {
  const event = callCompleted({ message_type: "nobody.handles_this" })
  await env.EVENTS_QUEUE.send(event)
  await drain()
  return event
}

describe("alerts", () => {
  it("a dead letter opening reaches the receiver within one evaluation (the cron's), signed, once only; evaluating again sends nothing", async () => {
    await settleToOk()
    const path = `/hooks/ok-${unique("dlq")}`
    const endpoint = await createEndpoint(path, [Alerts.eventTypes.deadLettersOpened])
    expect(endpoint.secret).toMatch(/^whsec_/)
    const event = await poison()
    // No alert before an evaluation: health is graded when the cron runs.
    expect(await received(path)).toEqual([])

    // One evaluation: the cron's (its quiet period the default 15 minutes; no dead-letter alert was sent before in this run).
    await age(60)
    const ctx = createExecutionContext()
    await platform.scheduled(createScheduledController({ scheduledTime: new Date(), cron: "*/5 * * * *" }), testEnv, ctx)
    await waitOnExecutionContext(ctx)
    await drain()
    const deliveries = await received(path)
    expect(deliveries).toHaveLength(1)
    const alert = verify(endpoint.secret, deliveries[0]!)
    expect(alert.type).toBe("factline.dead_letter.opened")
    expect(alert.data).toMatchObject({
      count: 1,
      by_queue: { "factline-events": 1 },
      by_queue_and_reason: [{ queue: "factline-events", reason: "unknown_message_type", count: 1 }]
    })
    expect(deliveries[0]!.headers["webhook-id"]).toMatch(/^wd_[0-9a-f]{32}$/)
    const row = await env.DB.prepare("SELECT alert_id FROM dead_messages WHERE idempotency_key = ?").bind(event.idempotency_key).first<{ alert_id: string }>()
    expect(row?.alert_id).toBe(alert.data.alert_id)

    // Evaluating again, five at once and with no quiet period: nothing new is sent.
    const again = await Promise.all(Array.from({ length: 5 }, () => evaluate(0)))
    expect(again.flat().filter((s) => s.key === "dead_letters")).toEqual([])
    await drain()
    expect(await received(path)).toHaveLength(1)
    // The delivery is in the endpoint's log, as any webhook's.
    const attempts = await api("GET", `/v1/alerts/endpoints/${endpoint.id}/attempts`)
    expect(attempts.body.data).toEqual([expect.objectContaining({ succeeded: true, status_code: 200, event_type: "factline.dead_letter.opened", attempt: 1 })])
  })

  it("dead letters opening together are one alert, decided by exactly one of five concurrent evaluations", async () => {
    await settleToOk()
    const path = `/hooks/ok-${unique("dlq")}`
    const endpoint = await createEndpoint(path, [Alerts.eventTypes.deadLettersOpened])
    const events = [callCompleted({ message_type: "nobody.handles_this" }), callCompleted({ message_type: "nobody.handles_this" }), callCompleted({ schema_version: 9 })]
    for (const e of events) await env.EVENTS_QUEUE.send(e)
    await drain()
    await age(60)
    const sent = (await Promise.all(Array.from({ length: 5 }, () => evaluate(0)))).flat().filter((s) => s.key === "dead_letters")
    expect(sent).toHaveLength(1)
    await drain()
    const deliveries = await received(path)
    expect(deliveries).toHaveLength(1)
    const alert = verify(endpoint.secret, deliveries[0]!)
    expect(alert.data.count).toBe(3)
    expect(alert.data.by_queue_and_reason).toEqual([
      { queue: "factline-events", reason: "unknown_message_type", count: 2 },
      { queue: "factline-events", reason: "unsupported_version", count: 1 }
    ])
  })

  it("a workflow instance that fails (the crm-sync, its deal refused for good) is announced by the cron once, by tenant and workflow, naming the instance; failing again after a retry announces it again", async () => {
    await settleToOk()
    const path = `/hooks/ok-${unique("workflow")}`
    const endpoint = await createEndpoint(path, [Alerts.eventTypes.workflowFailed])
    const callId = `crm-alert-${crypto.randomUUID()}`
    const refused = await fetch(`${env.CRM_URL}/control`, { method: "POST", body: JSON.stringify({ call_id: callId, operation: "deals", status: 422, times: null }) })
    expect(refused.ok).toBe(true)
    const qualified = callCompleted({ idempotency_key: `completed-${callId}` }, { call_id: callId, buyer_id: "buyer-crm", duration_s: 120, price_cents: 450, currency: "USD" })
    expect((await postEvents({ events: [qualified] })).status).toBe(202)
    const failed = await eventually(async () => {
      await drain()
      const row = await env.DB.prepare("SELECT instance_id, status, error, alert_id FROM workflow_instances WHERE tenant_id = 'tenant-a' AND workflow = 'crm-sync' AND subject = ?")
        .bind(callId).first<{ instance_id: string; status: string; error: string | null; alert_id: string | null }>()
      return row?.status === "failed" ? row : undefined
    }, 40_000, "the crm-sync instance to fail")
    expect(failed.alert_id).toBeNull()
    // No alert before an evaluation.
    expect(await received(path)).toEqual([])

    // The cron's evaluation (its default quiet period; no such alert sent in this run before).
    await age(60)
    const ctx = createExecutionContext()
    await platform.scheduled(createScheduledController({ scheduledTime: new Date(), cron: "*/5 * * * *" }), testEnv, ctx)
    await waitOnExecutionContext(ctx)
    await drain()
    const deliveries = await received(path)
    expect(deliveries).toHaveLength(1)
    const alert = verify(endpoint.secret, deliveries[0]!)
    expect(alert.type).toBe("factline.workflow.failed")
    expect(alert.data).toMatchObject({
      count: 1,
      by_tenant: { "tenant-a": 1 },
      by_tenant_and_workflow: [{ tenant_id: "tenant-a", workflow: "crm-sync", count: 1, instance_ids: [failed.instance_id] }],
      inspect: "GET /v1/workflows?status=failed"
    })
    expect(alert.data.by_tenant_and_workflow[0].last_error).toContain("422")
    const claimed = await env.DB.prepare("SELECT alert_id FROM workflow_instances WHERE tenant_id = 'tenant-a' AND instance_id = ?").bind(failed.instance_id).first<{ alert_id: string }>()
    expect(claimed?.alert_id).toBe(alert.data.alert_id)
    const state = await api("GET", "/v1/alerts")
    expect(state.body.data.find((s: any) => s.key === "workflows_failed")).toMatchObject({ pending: false, alerts: expect.any(Number) })

    // Evaluating again, five at once and with no quiet period: nothing new is sent.
    const again = await Promise.all(Array.from({ length: 5 }, () => evaluate(0)))
    expect(again.flat().filter((s) => s.key === "workflows_failed")).toEqual([])
    await drain()
    expect(await received(path)).toHaveLength(1)

    // The instance retried and failed again (its row written again as failed, later): announced once more.
    await env.DB.prepare("UPDATE workflow_instances SET updated_at = ? WHERE tenant_id = 'tenant-a' AND instance_id = ?").bind(new Date(Date.now() + 1_000).toISOString(), failed.instance_id).run()
    const second = (await Promise.all(Array.from({ length: 3 }, () => evaluate(0)))).flat().filter((s) => s.key === "workflows_failed")
    expect(second).toHaveLength(1)
    await drain()
    const all = await received(path)
    expect(all).toHaveLength(2)
    expect(verify(endpoint.secret, all[1]!).data).toMatchObject({ alert_id: second[0]!.alert_id, count: 1, by_tenant_and_workflow: [{ instance_ids: [failed.instance_id] }] })
  })

  it("health ok → critical → ok sends two alerts, each signed, with the level before and after", async () => {
    await settleToOk()
    const path = `/hooks/ok-${unique("health")}`
    const endpoint = await createEndpoint(path, [Alerts.eventTypes.healthChanged])
    const run = unique("crit")
    await openDeadLetters(101, run)
    expect((await evaluate(0)).map((s) => s.event_type)).toEqual(["factline.health.changed"])
    await resolveDeadLetters(run)
    expect((await evaluate(0)).map((s) => s.event_type)).toEqual(["factline.health.changed"])
    expect(await evaluate(0)).toEqual([])
    await drain()
    const deliveries = await received(path)
    expect(deliveries).toHaveLength(2)
    const alerts = deliveries.map((d) => verify(endpoint.secret, d))
    expect(alerts.map((a) => [a.type, a.data.previous_status, a.data.status])).toEqual([
      ["factline.health.changed", "ok", "critical"],
      ["factline.health.changed", "critical", "ok"]
    ])
    expect(alerts[0]!.data).toMatchObject({ queue: "factline-batch", platform_status: "critical" })
    expect(alerts[0]!.data.reasons).toEqual(["factline-batch: dlq_open critical"])
    expect(alerts[0]!.data.queues.find((q: any) => q.queue === "factline-batch")).toMatchObject({ status: "critical", dlq_open: 101 })
    expect(new Set(deliveries.map((d) => d.headers["webhook-id"])).size).toBe(2)
  })

  it("the quiet period holds a flap: one alert for ok → critical → ok → critical → ok, then the recovery once the period has passed", async () => {
    await settleToOk()
    await age(60)
    const path = `/hooks/ok-${unique("flap")}`
    const endpoint = await createEndpoint(path, [Alerts.eventTypes.healthChanged])
    const flap = async () => {
      const run = unique("flap")
      await openDeadLetters(101, run)
      const worse = await evaluate(15)
      await resolveDeadLetters(run)
      const better = await evaluate(15)
      return [...worse, ...better]
    }
    // Worse than announced: at once. Better: held by the quiet period; worse again than announced: no.
    expect((await flap()).map((s) => s.event_type)).toEqual(["factline.health.changed"])
    expect(await flap()).toEqual([])
    expect((await api("GET", "/v1/alerts")).body.data.find((s: any) => s.key === "health:factline-batch")).toMatchObject({ state: "ok", announced: "critical" })
    await drain()
    expect(await received(path)).toHaveLength(1)
    // The period over, the next evaluation announces where things stand: ok.
    await age(16)
    expect((await evaluate(15)).map((s) => s.event_type)).toEqual(["factline.health.changed"])
    await drain()
    const alerts = (await received(path)).map((d) => verify(endpoint.secret, d))
    expect(alerts.map((a) => [a.data.previous_status, a.data.status])).toEqual([["ok", "critical"], ["critical", "ok"]])
  })

  it("each queue is graded on its own: a second queue turning critical while the first still is sends its own alert, and each recovers on its own", async () => {
    await settleToOk()
    const path = `/hooks/ok-${unique("per-queue")}`
    const endpoint = await createEndpoint(path, [Alerts.eventTypes.healthChanged])
    const batchRun = unique("crit-batch")
    const webhooksRun = unique("crit-webhooks")
    await openDeadLetters(101, batchRun, "factline-batch")
    expect((await evaluate(15)).map((s) => s.key)).toEqual(["health:factline-batch"])
    // The platform's level is critical already: the webhooks queue turning critical is still announced, at once.
    await openDeadLetters(101, webhooksRun, "factline-webhooks")
    expect((await evaluate(15)).map((s) => s.key)).toEqual(["health:factline-webhooks"])
    expect(await evaluate(15)).toEqual([])                       // nothing changed: nothing sent (each key de-duplicated)
    // Both recover: each key's own quiet period holds its recovery, then each is announced once.
    await resolveDeadLetters(batchRun)
    await resolveDeadLetters(webhooksRun)
    expect(await evaluate(15)).toEqual([])
    await age(16)
    expect((await evaluate(15)).map((s) => s.key).sort()).toEqual(["health:factline-batch", "health:factline-webhooks"])
    await drain()
    const alerts = (await received(path)).map((d) => verify(endpoint.secret, d))
    expect(alerts.map((a) => [a.data.queue, a.data.previous_status, a.data.status, a.data.platform_status]).sort()).toEqual([
      ["factline-batch", "critical", "ok", "ok"],
      ["factline-batch", "ok", "critical", "critical"],
      ["factline-webhooks", "critical", "ok", "ok"],
      ["factline-webhooks", "ok", "critical", "critical"]
    ])
    expect(new Set(alerts.map((a) => a.data.alert_id)).size).toBe(4)
  })

  it("4 queue groups, a backlog of 10,100 messages in group 3 only: health sums the groups (depth warning), lists group 3's backlog, and the events queue's alert goes out", async () => {
    await settleToOk()
    const path = `/hooks/ok-${unique("groups")}`
    const endpoint = await createEndpoint(path, [Alerts.eventTypes.healthChanged])
    const group3 = "factline-events-3"
    const hold = holdQueue(group3)
    try {
      // The first batch is delivered and held; everything sent after it waits on the local broker: a real backlog.
      const queue3 = env.EVENTS_QUEUE_3 as Queue
      await queue3.send({ filler: 0 })
      await eventually(async () => hold.batchesHeld() > 0 ? true : undefined, 10_000, "group 3's first batch held")
      for (let i = 0; i < 101; i++) await queue3.sendBatch(Array.from({ length: 100 }, (_, j) => ({ body: { filler: i * 100 + j + 1 } })))
      const backlog = (await queue3.metrics()).backlogCount
      expect(backlog).toBeGreaterThan(10_000)
      expect((await env.EVENTS_QUEUE.metrics()).backlogCount).toBe(0)            // group 0: what health read before
      overrideSettings({ FACTLINE_QUEUE_GROUPS: "4" })
      const { body } = await api("GET", "/v1/queues/health?window=15m")
      const events = body.queues.find((q: any) => q.queue === "factline-events")
      expect(events).toMatchObject({ depth: backlog, status: "warning", checks: expect.objectContaining({ depth: "warning", backlog_age_ms: "ok" }) })
      expect(events.groups.map((g: any) => [g.queue, g.depth])).toEqual([["factline-events-0", 0], ["factline-events-1", 0], ["factline-events-2", 0], [group3, backlog]])
      expect(events.groups[3].backlog_age_ms).toBeGreaterThanOrEqual(0)
      expect(body.status).toBe("warning")
      const sent = await evaluate(15)
      expect(sent.map((s) => s.key)).toEqual(["health:factline-events"])
    } finally {
      hold.release()
      await drain().finally(hold.end)
    }
    const [alert] = (await received(path)).map((d) => verify(endpoint.secret, d))
    expect(alert!.data).toMatchObject({ queue: "factline-events", previous_status: "ok", status: "warning", reasons: ["factline-events: depth warning"] })
    expect(alert!.data.queues.find((q: any) => q.queue === "factline-events").groups[3]).toMatchObject({ queue: group3 })
  })

  it("an alert whose hand-over to the webhooks queue failed is handed over by a later evaluation, under the same webhook-id, once", async () => {
    await settleToOk()
    await age(60)
    const path = `/hooks/ok-${unique("pending")}`
    const endpoint = await createEndpoint(path, [Alerts.eventTypes.deadLettersOpened])
    await poison()
    // The webhooks queue refuses every send of this evaluation: the alert is decided, stays pending.
    const { env: refusing } = Faults.env(testEnv as unknown as Record<string, unknown>, { queues: 1 })
    const runtime = platform.runtime(refusing as unknown as PlatformEnv)
    await expect(runtime.runPromise(Alerts.evaluate({ quietPeriodMs: 0 }))).rejects.toThrow()
    const pending = (await api("GET", "/v1/alerts")).body.data.find((s: any) => s.key === "dead_letters")
    expect(pending.pending).toBe(true)
    // Too soon to be taken for lost: nothing yet. Past `pendingRetryMs`: handed over.
    expect((await evaluate(0)).filter((s) => s.key === "dead_letters")).toEqual([])
    await env.DB.prepare("UPDATE alert_state SET pending_since = ? WHERE pending IS NOT NULL").bind(new Date(Date.now() - Alerts.pendingRetryMs - 1_000).toISOString()).run()
    const retried = (await evaluate(0)).filter((s) => s.key === "dead_letters")
    expect(retried).toHaveLength(1)
    expect(await evaluate(0)).toEqual([])
    expect((await api("GET", "/v1/alerts")).body.data.map((s: any) => s.pending)).toEqual(Alerts.keys.map(() => false))
    await drain()
    const deliveries = await received(path)
    expect(deliveries).toHaveLength(1)
    expect(verify(endpoint.secret, deliveries[0]!).data).toMatchObject({ alert_id: retried[0]!.alert_id, count: 1 })
  })

  it("only the platform scope reaches alert endpoints; tenants never see them or subscribe to alert types; no token may be bound to the alert tenant", async () => {
    const endpoint = await createEndpoint(`/hooks/ok-${unique("scope")}`, [Alerts.eventTypes.healthChanged])
    for (const [method, path] of [["GET", "/v1/alerts/endpoints"], ["POST", "/v1/alerts/endpoints"], ["GET", `/v1/alerts/endpoints/${endpoint.id}`], ["GET", "/v1/alerts"], ["POST", "/v1/alerts/evaluate"]] as const) {
      const response = await api(method, path, method === "POST" ? { url: "https://hooks.example.com/a", event_types: ["factline.health.changed"] } : undefined, tokenA)
      expect(response.status, `${method} ${path}`).toBe(403)
    }
    const tenantList = await api("GET", "/v1/webhooks/endpoints", undefined, tokenA)
    expect(JSON.stringify(tenantList.body)).not.toContain(endpoint.id)
    expect((await api("GET", `/v1/webhooks/endpoints/${endpoint.id}`, undefined, tokenA)).status).toBe(404)
    const subscribe = await api("POST", "/v1/webhooks/endpoints", { url: "https://hooks.example.com/a", event_types: ["factline.health.changed"] }, tokenA)
    expect(subscribe.status).toBe(400)
    expect(JSON.stringify(subscribe.body)).toContain("not in the webhook event catalog")
    // The alert endpoints' own checks: alert types only, the URL guard.
    const wrongType = await api("POST", "/v1/alerts/endpoints", { url: "https://hooks.example.com/a", event_types: ["charge.created"] })
    expect(wrongType.status).toBe(400)
    const privateUrl = await api("POST", "/v1/alerts/endpoints", { url: "https://169.254.169.254/latest", event_types: ["factline.health.changed"] })
    expect(privateUrl.status).toBe(400)
    const listed = await api("GET", "/v1/alerts/endpoints")
    expect(listed.body.data.map((e: any) => e.id)).toContain(endpoint.id)
    expect(JSON.stringify(listed.body)).not.toContain(endpoint.secret.slice(6))
    const parsed = TokenConfig.parse(JSON.stringify([{ sha256: "a".repeat(64), tenant_id: Alerts.tenant, scopes: ["admin"] }]))
    expect(parsed._tag).toBe("Failure")
  })

  it("an alert endpoint is changed, its secret rotated and it is deleted through its routes; a change with no field or a field it does not have is a 400 naming it", async () => {
    const endpoint = await createEndpoint(`/hooks/ok-${unique("crud")}`, [Alerts.eventTypes.healthChanged])
    const changed = await api("PATCH", `/v1/alerts/endpoints/${endpoint.id}`, { description: "on-call" })
    expect(changed).toMatchObject({ status: 200, body: { id: endpoint.id, description: "on-call" } })
    expect((await api("PATCH", `/v1/alerts/endpoints/${endpoint.id}`, {})).status).toBe(400)
    const foreign = await api("PATCH", `/v1/alerts/endpoints/${endpoint.id}`, { fact_types: ["charge.created"] })
    expect(foreign.status).toBe(400)
    expect(foreign.body.error.details.problems.map((p: { path: string }) => p.path)).toContain("fact_types")
    const rotated = await api("POST", `/v1/alerts/endpoints/${endpoint.id}/rotate-secret`)
    expect(rotated.status).toBe(200)
    expect(rotated.body.secret).not.toBe(endpoint.secret)
    expect(await api("DELETE", `/v1/alerts/endpoints/${endpoint.id}`)).toEqual({ status: 204, body: null })
    expect((await api("GET", `/v1/alerts/endpoints/${endpoint.id}`)).status).toBe(404)
  })
})
