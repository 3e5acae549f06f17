/**
 * Operations: the dead-letter workflow (list, show, replay with the same key, bulk replay, skip with a
 * reconciliation fact, escalate; tenant-scoped), the per-batch metrics rollup and the health view, and the
 * retention the cron runs.
 */
import { createExecutionContext, createScheduledController, waitOnExecutionContext } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { afterEach, describe, expect, it } from "vitest"
import { Maintenance, Metrics } from "@factline/core/runtime"
import type { PlatformEnv } from "@factline/workers"
import * as CountingBindings from "@factline/core/testing/bindings"
import { createMessageBatch } from "cloudflare:test"
import { newCounts } from "./instrument.js"
import { drain } from "./Drain.js"
import { callCompleted, postEvents, readStream, request, tokenA, tokenB, tokenPlatform, unique } from "./helpers.js"
import { brokenKeys } from "./TestModule.js"
import { platform } from "./worker.js"

const api = async (method: string, path: string, body?: unknown, token = tokenA) => {
  const response = await request(path, { method, token, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
  return { status: response.status, body: await response.json<any>() }
}

const fixable = (n: number, tenant = "tenant-a") => {
  const subject = unique("fix")
  return {
    schema_version: 1, message_type: "test.fixable.happened", idempotency_key: `fixable:${subject}`, subject, tenant_id: tenant, payload: { n }
  }
}

/** Posts events whose handler is broken for them; returns them once each is a dead letter. */
const deadLettered = async (events: ReadonlyArray<ReturnType<typeof fixable>>, token = tokenA) => {
  for (const e of events) brokenKeys.add(e.idempotency_key)
  expect((await postEvents({ events }, token)).status).toBe(202)
  await drain()
  return events
}

const recordsOf = async (key: string, token = tokenA) =>
  (await api("GET", `/v1/dlq?type=test.fixable.happened&status=open&limit=200`, undefined, token)).body.data.filter((r: any) => r.idempotency_key === key)

afterEach(() => brokenKeys.clear())

describe("dead-letter workflow", () => {
  it("a permanent failure is one open record with full context; after the fix, replay processes it once; twice sends it once", async () => {
    const [event] = await deadLettered([fixable(7)])
    const [record] = await recordsOf(event!.idempotency_key)
    expect(record).toMatchObject({
      queue: "factline-events", status: "open", reason: "permanent_failure", attempts: 1, tenant_id: "tenant-a",
      message_type: "test.fixable.happened", subject: event!.subject, last_error: `bug #42: cannot handle ${event!.idempotency_key}`
    })
    const shown = await api("GET", `/v1/dlq/${record.id}`)
    expect(shown.body.original_message).toMatchObject({ idempotency_key: event!.idempotency_key, payload: { n: 7 } })
    expect(shown.body.history).toEqual([])
    expect((await readStream("tenant-a", event!.subject)).version).toBe(0)

    brokenKeys.clear()                                                      // the fix is deployed
    const replayed = await api("POST", `/v1/dlq/${record.id}/replay`)
    expect(replayed.status).toBe(202)
    expect(replayed.body).toMatchObject({ status: "replayed", resolved_by: "dev-tenant-a" })
    expect(replayed.body.history.map((h: any) => h.action)).toEqual(["replayed"])
    const again = await api("POST", `/v1/dlq/${record.id}/replay`)
    expect(again.status).toBe(409)
    expect(again.body.error.message).toMatch(/is replayed \(by dev-tenant-a at .*\); only an open one can be replayed/)
    await drain()
    const stream = await readStream("tenant-a", event!.subject)
    expect(stream.facts.map((f) => [f.type, f.data])).toEqual([["fixable_done", { n: 7 }]])
  })

  it("replaying a record whose work already succeeded changes nothing (same idempotency key)", async () => {
    const call = callCompleted()
    expect((await postEvents(call)).status).toBe(202)
    await drain()
    const before = await readStream("tenant-a", call.subject)
    expect(before.version).toBe(3)
    // A dead letter of the same message (as if an earlier delivery had failed), replayed after it succeeded.
    const id = unique("dlq")
    await env.DB.prepare(
      `INSERT INTO dead_messages (id, queue, reason, last_error, attempts, first_attempted_at, last_attempted_at, tenant_id, message_type, idempotency_key, subject, original_message, status, received_at)
       VALUES (?, 'factline-events', 'retries_exhausted', 'timeout', 6, ?, ?, 'tenant-a', 'call.completed', ?, ?, ?, 'open', ?)`
    ).bind(id, new Date().toISOString(), new Date().toISOString(), call.idempotency_key, call.subject,
      JSON.stringify({ ...call, message_id: unique("m"), source: "test" }), new Date().toISOString()).run()
    expect((await api("POST", `/v1/dlq/${id}/replay`)).status).toBe(202)
    await drain()
    const after = await readStream("tenant-a", call.subject)
    expect(after.facts).toEqual(before.facts)
  })

  it("bulk replay of 50 records sends each once; a second bulk replay finds none", async () => {
    const events = await deadLettered(Array.from({ length: 50 }, (_, i) => fixable(i)))
    brokenKeys.clear()
    const bulk = await api("POST", "/v1/dlq/replay?type=test.fixable.happened")
    expect(bulk.status).toBe(202)
    expect(bulk.body).toMatchObject({ count: 50, waves: 1, operation_id: expect.stringMatching(/^rp_/) })
    const second = await api("POST", "/v1/dlq/replay?type=test.fixable.happened")
    expect(second.body.count).toBe(0)
    await drain()
    const streams = await Promise.all(events.map((e) => readStream("tenant-a", e.subject)))
    expect(streams.map((s) => s.facts.length)).toEqual(events.map(() => 1))
    const replayed = (await api("GET", "/v1/dlq?type=test.fixable.happened&status=replayed&limit=200")).body.data
    expect(replayed.filter((r: any) => r.replay_operation_id === bulk.body.operation_id)).toHaveLength(50)
  })

  it("skip appends one reconciliation fact naming who and why; escalate records who; tenant B sees none of it", async () => {
    const [skipped, escalated] = await deadLettered([fixable(1), fixable(2)])
    const [a] = await recordsOf(skipped!.idempotency_key)
    const [b] = await recordsOf(escalated!.idempotency_key)

    // Tenant B: not in its list, and every action on A's record is a 404 with nothing of A's.
    const asB = await api("GET", "/v1/dlq?limit=200", undefined, tokenB)
    expect(asB.body.data.some((r: any) => r.tenant_id === "tenant-a")).toBe(false)
    for (const [method, path, body] of [["GET", `/v1/dlq/${a.id}`], ["POST", `/v1/dlq/${a.id}/replay`], ["POST", `/v1/dlq/${a.id}/skip`, { reason: "x" }], ["POST", `/v1/dlq/${a.id}/escalate`]] as const) {
      const r = await api(method, path, body, tokenB)
      expect(r.status, `${method} ${path}`).toBe(404)
      expect(JSON.stringify(r.body)).not.toContain(skipped!.subject)
    }
    expect((await api("POST", "/v1/dlq/replay", undefined, tokenB)).body.count).toBe(0)

    expect((await api("POST", `/v1/dlq/${a.id}/skip`, {})).status).toBe(400)
    const skip = await api("POST", `/v1/dlq/${a.id}/skip`, { reason: "customer cancelled the order" })
    expect(skip.status).toBe(200)
    expect(skip.body).toMatchObject({ status: "skipped", resolved_by: "dev-tenant-a" })
    expect((await api("POST", `/v1/dlq/${a.id}/skip`, { reason: "again" })).status).toBe(409)
    const facts = (await readStream("tenant-a", skipped!.subject)).facts
    expect(facts.map((f) => [f.type, f.data])).toEqual([["reconciliation", {
      action: "dead_letter_skipped", dead_letter_id: a.id, queue: "factline-events", failure_reason: "permanent_failure",
      idempotency_key: skipped!.idempotency_key, message_type: "test.fixable.happened", note: "customer cancelled the order", by: "dev-tenant-a"
    }]])

    const esc = await api("POST", `/v1/dlq/${b.id}/escalate`, { note: "needs the billing team" })
    expect(esc.body).toMatchObject({ status: "escalated", resolved_by: "dev-tenant-a" })
    expect(esc.body.history).toEqual([expect.objectContaining({ action: "escalated", by: "dev-tenant-a", note: "needs the billing team" })])
    // The platform scope sees every tenant's records.
    expect((await api("GET", `/v1/dlq/${b.id}`, undefined, tokenPlatform)).status).toBe(200)
    expect((await api("GET", "/v1/dlq?status=maybe")).status).toBe(400)
  })

  it("a skip whose reconciliation fact cannot be appended leaves the record open; retried, it skips once with one fact", async () => {
    const [event] = await deadLettered([fixable(3)])
    const [record] = await recordsOf(event!.idempotency_key)
    // Every LedgerShard RPC fails during the first skip (the namespace is shared by the Worker and the test).
    const namespace = env.LEDGER
    const original = namespace.get.bind(namespace)
    namespace.get = (() => {
      throw new Error("injected: the ledger is unavailable")
    }) as never
    let failed: Awaited<ReturnType<typeof api>>
    try {
      failed = await api("POST", `/v1/dlq/${record.id}/skip`, { reason: "refunded by hand" })
    } finally {
      namespace.get = original as never
    }
    expect(failed.status).toBe(503)
    expect(failed.body.error.message).toContain("retry the skip")
    const reopened = await api("GET", `/v1/dlq/${record.id}`)
    expect(reopened.body).toMatchObject({ status: "open", resolved_by: null })
    expect(reopened.body.history.map((h: any) => h.action)).toEqual(["skipped", "skip_failed"])

    const retried = await api("POST", `/v1/dlq/${record.id}/skip`, { reason: "refunded by hand" })
    expect(retried.status).toBe(200)
    expect(retried.body).toMatchObject({ status: "skipped" })
    const facts = (await readStream("tenant-a", event!.subject)).facts
    expect(facts.map((f) => [f.type, f.fact_id])).toEqual([["reconciliation", retried.body.reconciliation_fact_id]])
    // Relayed like any fact: the facts read model has it.
    await drain()
    const listed = await api("GET", `/v1/facts?subject=${encodeURIComponent(event!.subject)}`)
    expect(listed.body.data.map((f: any) => [f.type, f.fact_id])).toEqual([["reconciliation", retried.body.reconciliation_fact_id]])
  })
})

describe("metrics and health", () => {
  it("recording a batch's metrics costs one D1 statement, for 10 messages as for 100", async () => {
    const measure = async (n: number) => {
      const counts = newCounts()
      const batch = createMessageBatch("factline-projections", Array.from({ length: n }, (_, i) => ({ id: unique("m"), timestamp: new Date(), attempts: 1, body: { created_at: new Date(Date.now() - i * 10).toISOString() } })))
      await platform.runtime(CountingBindings.env(env as unknown as PlatformEnv, counts)).runPromise(Metrics.record(Metrics.sampleOf(batch, { acked: n, retried: 0, deadLettered: 0 }, 12, Date.now())))
      return counts
    }
    const [ten, hundred] = [await measure(10), await measure(100)]
    expect([ten.d1RoundTrips, ten.d1Statements, hundred.d1RoundTrips, hundred.d1Statements]).toEqual([1, 1, 1, 1])
  })

  it("one rollup statement per consumer batch; health reports received, acked, dead-lettered and open DLQ records per queue", async () => {
    const before = (await env.DB.prepare("SELECT COALESCE(SUM(received), 0) AS n, COALESCE(SUM(batches), 0) AS b FROM queue_metrics WHERE queue = 'factline-events'").first<{ n: number; b: number }>())!
    await deadLettered([fixable(3)])
    expect((await postEvents({ events: [callCompleted(), callCompleted()] })).status).toBe(202)
    await drain()
    const after = (await env.DB.prepare("SELECT COALESCE(SUM(received), 0) AS n, COALESCE(SUM(batches), 0) AS b FROM queue_metrics WHERE queue = 'factline-events'").first<{ n: number; b: number }>())!
    expect(after.n - before.n).toBe(3)
    expect(after.b - before.b).toBeGreaterThanOrEqual(1)

    const health = await api("GET", "/v1/queues/health?window=1h", undefined, tokenPlatform)
    expect(health.status).toBe(200)
    expect(health.body.queues.map((q: any) => q.queue)).toEqual(["factline-events", "factline-projections", "factline-fact-processing", "factline-webhooks", "factline-batch"])
    const events = health.body.queues[0]
    expect(events.received).toBeGreaterThanOrEqual(3)
    expect(events.dead_lettered).toBeGreaterThanOrEqual(1)
    expect(events.dlq_open).toBeGreaterThanOrEqual(1)
    expect(events.checks.dlq_open).toBe("warning")                       // > 0 open: seed 001's warning
    expect(events.status).not.toBe("ok")
    expect(events.lag_p50_ms).toEqual(expect.any(Number))
    expect(health.body.thresholds.retry_rate).toEqual({ warning: 0.05, critical: 0.2 })
    expect((await api("GET", "/v1/queues/health")).status).toBe(403)                     // a tenant's admin: platform-wide data
    expect((await api("GET", "/v1/queues/health?window=7d", undefined, tokenPlatform)).status).toBe(400)
  })
})

describe("seed 001's metrics and liveness", () => {
  const rollup = (queue: string) =>
    env.DB.prepare("SELECT COALESCE(SUM(sent), 0) AS sent, COUNT(depth_max) AS depths FROM queue_metrics WHERE queue = ?").bind(queue).first<{ sent: number; depths: number }>()

  it("messages sent to a queue and the depth its batches were delivered with are recorded", async () => {
    const before = (await rollup("factline-events"))!
    expect((await postEvents({ events: [callCompleted(), callCompleted(), callCompleted()] })).status).toBe(202)
    await drain()
    const after = (await rollup("factline-events"))!
    expect(after.sent - before.sent).toBeGreaterThanOrEqual(3)           // sent at the edge, written with the next rollup
    expect(after.depths).toBeGreaterThanOrEqual(1)                       // the backlog each batch came with
    expect((await rollup("factline-projections"))!.sent).toBeGreaterThanOrEqual(1)   // the events consumer's fan-out
    const health = await api("GET", "/v1/queues/health?window=15m", undefined, tokenPlatform)
    const events = health.body.queues.find((q: any) => q.queue === "factline-events")
    expect(events.sent).toBeGreaterThanOrEqual(3)
    expect(events.series.some((m: any) => m.depth !== null)).toBe(true)
  })

  it("dead letters are counted by reason (dlq_total{queue, reason})", async () => {
    const before = (await api("GET", "/v1/queues/health?window=15m", undefined, tokenPlatform)).body.queues[0].dead_lettered_by_reason.permanent_failure ?? 0
    await deadLettered([fixable(1), fixable(2)])
    const after = (await api("GET", "/v1/queues/health?window=15m", undefined, tokenPlatform)).body.queues[0].dead_lettered_by_reason.permanent_failure
    expect(after - before).toBe(2)
  })

  it("GET /health answers without a token, reads no store and says nothing of a tenant", async () => {
    const counts = newCounts()
    const ctx = createExecutionContext()
    const response = await platform.fetch(new Request("http://factline.test/health"), CountingBindings.env(env as unknown as PlatformEnv, counts), ctx)
    await waitOnExecutionContext(ctx)
    expect(response.status).toBe(200)
    expect(response.headers.get("cache-control")).toBe("no-store")
    expect(await response.json()).toEqual({ status: "ok", version: expect.any(String) })
    expect([counts.d1RoundTrips, counts.doRpcs]).toEqual([0, 0])
    // Every other route still authenticates.
    expect((await request("/v1/queues/health", { method: "GET" })).status).toBe(401)
  })
})

describe("retention", () => {
  it("prunes resolved dead letters after 30 days and rollups after 14 days; never an open dead letter", async () => {
    const old = new Date(Date.now() - 40 * 24 * 3600 * 1000).toISOString()
    const recent = new Date().toISOString()
    const row = (id: string, status: string, resolvedAt: string | null) =>
      env.DB.prepare(
        `INSERT INTO dead_messages (id, queue, reason, last_error, attempts, first_attempted_at, last_attempted_at, original_message, status, received_at, resolved_at)
         VALUES (?, 'factline-events', 'decode_error', 'x', 1, ?, ?, '{}', ?, ?, ?)`
      ).bind(id, old, old, status, old, resolvedAt)
    const ids = { openOld: unique("d"), replayedOld: unique("d"), skippedOld: unique("d"), replayedRecent: unique("d") }
    await env.DB.batch([
      row(ids.openOld, "open", null), row(ids.replayedOld, "replayed", old), row(ids.skippedOld, "skipped", old), row(ids.replayedRecent, "replayed", recent),
      env.DB.prepare("INSERT INTO queue_metrics (queue, minute) VALUES ('factline-batch', ?)").bind(new Date(Date.now() - 20 * 24 * 3600 * 1000).toISOString()),
      env.DB.prepare("INSERT INTO queue_metrics (queue, minute) VALUES ('factline-batch', ?)").bind(new Date(Date.now() - 2 * 24 * 3600 * 1000).toISOString())
    ])
    const ctx = createExecutionContext()
    await platform.scheduled(createScheduledController(), env as unknown as PlatformEnv, ctx)
    const left = (await env.DB.prepare("SELECT id FROM dead_messages WHERE id IN (?, ?, ?, ?)").bind(...Object.values(ids)).all<{ id: string }>()).results.map((r) => r.id).sort()
    expect(left).toEqual([ids.openOld, ids.replayedRecent].sort())
    const minutes = (await env.DB.prepare("SELECT minute FROM queue_metrics WHERE queue = 'factline-batch' AND batches = 0").all<{ minute: string }>()).results
    expect(minutes).toHaveLength(1)
    expect(Date.now() - Date.parse(minutes[0]!.minute)).toBeLessThan(3 * 24 * 3600 * 1000)
    expect(await platform.runtime(env as unknown as PlatformEnv).runPromise(Maintenance.pruneOperations())).toEqual({ deadLetters: 0, metrics: 0 })
  })
})
