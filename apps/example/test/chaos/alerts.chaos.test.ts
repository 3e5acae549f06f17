/**
 * The alert path under faults (`npm run chaos`): dead letters open in waves through the real events queue
 * and DLQ while concurrent evaluations run — some over a platform database that refuses every 3rd call or
 * loses its reply, and a webhooks queue that refuses every 2nd send or loses its reply — to a receiver that
 * fails the first two attempts of every delivery. Alerts left pending are finished by later evaluations.
 * Asserted and scored: every dead letter counted by exactly one delivered alert (none lost, none counted
 * twice), and no alert delivered successfully twice under one webhook-id (none doubled).
 */
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { Alerts } from "@factline/core/runtime"
import type { PlatformEnv } from "@factline/workers"
import { drain } from "../Drain.js"
import * as Faults from "../faults.js"
import { callCompleted, request, tokenPlatform, unique } from "../helpers.js"
import { platform } from "../worker.js"

const testEnv = env as unknown as PlatformEnv
const score = (fields: Record<string, unknown>) => console.log(`SCORECARD ${JSON.stringify(fields)}`)

interface Received {
  readonly headers: Record<string, string>
  readonly body: string
  readonly status: number
}

/** One evaluation, no quiet period, on `on` (the test's bindings, or faulty ones); a failure is returned, not thrown. */
const evaluate = (on: PlatformEnv) =>
  platform.runtime(on).runPromise(Alerts.evaluate({ quietPeriodMs: 0 })).then(() => "ok" as const, () => "failed" as const)

describe("chaos: the alert path", () => {
  it("dead letters in 8 waves, 4 concurrent evaluations per wave over faulty D1 and queue, a receiver failing twice per delivery: each counted once, nothing doubled", async () => {
    await drain()
    // Start from nothing to announce: earlier dead letters counted, the last alert out of the way.
    for (const db of [env.DB, env.FACTLINE_READ_DB_1]) await db.prepare("UPDATE dead_messages SET alert_id = 'before-chaos' WHERE alert_id IS NULL").run()
    await evaluate(testEnv)
    const path = `/hooks/fail2-${unique("chaos-alerts")}`
    const created = await (await request("/v1/alerts/endpoints", {
      method: "POST", token: tokenPlatform,
      body: JSON.stringify({ url: `${env.TEST_RECEIVER_URL}${path}`, event_types: [Alerts.eventTypes.deadLettersOpened, Alerts.eventTypes.healthChanged] })
    })).json<{ id: string }>()
    expect(created.id).toMatch(/^we_/)

    const run = unique("alertchaos")
    const keys: Array<string> = []
    let evaluations = 0
    let failedEvaluations = 0
    for (let wave = 0; wave < 8; wave++) {
      const size = 1 + ((wave * 7) % 13)
      const events = Array.from({ length: size }, (_, i) => callCompleted({ message_type: "nobody.handles_this" }, { call_id: `${run}_w${wave}_${i}` }))
      keys.push(...events.map((e) => e.idempotency_key))
      await env.EVENTS_QUEUE.sendBatch(events.map((body) => ({ body })))
      await drain()
      // Two evaluations on faulty bindings, two on the real ones, at once.
      const results = await Promise.all([
        evaluate(Faults.env(testEnv as unknown as Record<string, unknown>, { d1: 3, lostReplies: true }).env as unknown as PlatformEnv),
        evaluate(Faults.env(testEnv as unknown as Record<string, unknown>, { queues: 2, lostReplies: true }).env as unknown as PlatformEnv),
        evaluate(testEnv),
        evaluate(testEnv)
      ])
      evaluations += results.length
      failedEvaluations += results.filter((r) => r === "failed").length
      await drain()
      // Time passes (what the cron's 5 minutes would do): an alert left pending is past its retry delay.
      await env.DB.prepare("UPDATE alert_state SET pending_since = ? WHERE pending IS NOT NULL").bind(new Date(Date.now() - Alerts.pendingRetryMs - 1_000).toISOString()).run()
    }
    // Evaluations on the real bindings until nothing is pending and every dead letter of the run is claimed.
    for (let i = 0; i < 5; i++) {
      await evaluate(testEnv)
      evaluations++
      await drain()
      await env.DB.prepare("UPDATE alert_state SET pending_since = ? WHERE pending IS NOT NULL").bind(new Date(Date.now() - Alerts.pendingRetryMs - 1_000).toISOString()).run()
    }

    const deliveries: Array<Received> = await (await fetch(`${env.TEST_RECEIVER_URL}/received?path=${encodeURIComponent(path)}`)).json()
    const succeeded = deliveries.filter((d) => d.status >= 200 && d.status < 300)
    const ids = succeeded.map((d) => d.headers["webhook-id"]!)
    const doubled = ids.length - new Set(ids).size
    const alerts = succeeded.map((d) => JSON.parse(d.body) as { type: string; data: { alert_id: string; count: number } })
    const deadAlerts = alerts.filter((a) => a.type === Alerts.eventTypes.deadLettersOpened)
    const delivered = new Set(deadAlerts.map((a) => a.data.alert_id))
    const { results: rows } = await env.DB.prepare("SELECT alert_id FROM dead_messages WHERE idempotency_key IN (SELECT value FROM json_each(?))")
      .bind(JSON.stringify(keys)).all<{ alert_id: string | null }>()
    const announced = rows.filter((r) => r.alert_id !== null && delivered.has(r.alert_id)).length
    // Alerts of this endpoint count only the run's dead letters (earlier ones were marked before it existed).
    const counted = deadAlerts.reduce((n, a) => n + a.data.count, 0)
    const pending = (await env.DB.prepare("SELECT COUNT(*) AS n FROM alert_state WHERE pending IS NOT NULL").first<{ n: number }>())!.n
    const passed = rows.length === keys.length && announced === keys.length && counted === keys.length && doubled === 0 && pending === 0
    score({
      case: "alert path under D1 and queue faults", passed, messages_sent: keys.length, facts_expected: keys.length, facts_found: counted,
      duplicates_found: doubled, messages_lost: keys.length - announced, dlq_expected: keys.length, dlq_found: rows.length,
      alerts_delivered: new Set(ids).size, dead_letter_alerts: delivered.size, evaluations, evaluations_failed: failedEvaluations, attempts_received: deliveries.length
    })
    expect(failedEvaluations).toBeGreaterThan(0)
    expect(passed).toBe(true)
  })
})
