/**
 * `drain()` itself (test/Drain.ts): it returns only when what was sent has gone through every queue it
 * leads to — so the stored state can be asserted at once — and it names the queue it is still waiting on.
 */
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { QueueGroups } from "@factline/core/runtime"
import { drain, type QueueTraffic, snapshot } from "./Drain.js"
import { callCompleted, deadMessages, postEvents, readStream, unique } from "./helpers.js"

const budget = (buyer: string) =>
  env.DB.prepare("SELECT spent_cents, charges, refunds FROM buyer_budgets WHERE tenant_id = 'tenant-a' AND buyer_id = ?").bind(buyer).first()

const envelope = (message_type: string, payload: Record<string, unknown>) => ({
  schema_version: 1, message_type, message_id: unique("msg"), idempotency_key: unique("key"), correlation_id: unique("corr"),
  tenant_id: "tenant-a", subject: unique("subject"), source: "test", created_at: new Date().toISOString(), payload
})

describe("drain()", () => {
  it("returns once an event posted over HTTP has been through events, fact-processing and projections", async () => {
    const buyer = unique("buyer")
    const event = callCompleted({}, { buyer_id: buyer, duration_s: 90, price_cents: 420 })
    expect((await postEvents(event)).status).toBe(202)
    await drain()
    expect((await readStream("tenant-a", event.subject)).facts.map((f) => f.type)).toEqual(["outcome", "qualification", "charge"])
    expect(await budget(buyer)).toEqual({ spent_cents: 420, charges: 1, refunds: 0 })
    const traffic = snapshot()
    for (const purpose of ["factline-events", "factline-fact-processing", "factline-projections"]) {
      // A purpose's traffic is its group queues' (factline-events-0 …) added up.
      const groups = Object.entries(traffic).filter(([queue]) => QueueGroups.purposeOf(queue) === purpose && queue !== purpose)
      expect(groups.length, purpose).toBeGreaterThan(0)
      const sum = (field: keyof QueueTraffic) => groups.reduce((n, [, t]) => n + t[field], 0)
      expect({ inFlight: sum("inFlight"), unaccounted: sum("unaccounted") }, purpose).toEqual({ inFlight: 0, unaccounted: 0 })
      expect(sum("acked"), purpose).toBeGreaterThan(0)
    }
  })

  it("waits for a message the consumer dead-letters until its dead-letter queue has stored it", async () => {
    const refused = envelope("test.refused.happened", {})
    await env.EVENTS_QUEUE.send(refused)
    await drain()
    const rows = await deadMessages(refused.idempotency_key)
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({ reason: "permanent_failure", queue: "factline-events", attempts: 1 })
  })

  it("keeps a retried message in flight until its redelivery succeeds", async () => {
    const flaky = envelope("test.flaky.happened", { fail_times: 2 })
    await env.EVENTS_QUEUE.send(flaky)
    await drain()
    expect((await readStream("tenant-a", flaky.subject)).facts.map((f) => [f.type, f.data])).toEqual([["flaky_done", { after_failures: 2 }]])
  })

  it("names the queue it is still waiting on when it gives up", async () => {
    const event = callCompleted()
    await env.EVENTS_QUEUE.send(event, { delaySeconds: 1 })
    // It names the queue the message was sent to: EVENTS_QUEUE's (a group queue, factline-events-0).
    const queue = env.TEST_QUEUE_PRODUCERS.EVENTS_QUEUE
    expect(QueueGroups.purposeOf(queue!)).toBe("factline-events")
    await expect(drain({ timeoutMs: 200 })).rejects.toThrow(`${queue}: 1 in flight`)
    await drain()
    expect((await readStream("tenant-a", event.subject)).facts[0]).toMatchObject({ type: "outcome", causation_id: event.idempotency_key })
  })
})
