/**
 * Queue groups with more than one group, on the local broker: the app runs with FACTLINE_QUEUE_GROUPS=4 (the
 * groups wrangler.jsonc declares; the rest of the suite binds 1) through test/worker.ts's `overrideSettings`.
 * Two tenants in different groups: each tenant's event, its facts and their projection writes go through its
 * own group's queues only, and each is processed exactly once. A dead letter names its purpose and is
 * replayed to its tenant's group queue.
 */
import { env } from "cloudflare:workers"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { QueueGroups } from "@factline/core/runtime"
import { drain, type QueueTraffic, snapshot } from "./Drain.js"
import { callCompleted, postEvents, readStream, request, tokenA, tokenB, unique } from "./helpers.js"
import { brokenKeys } from "./TestModule.js"
import { overrideSettings } from "./worker.js"

const groups = 4
const grouped = ["factline-events", "factline-fact-processing", "factline-projections"] as const

beforeAll(() => overrideSettings({ FACTLINE_QUEUE_GROUPS: String(groups) }))
afterAll(() => overrideSettings(undefined))

/** What changed on each queue between two snapshots (queues with no change left out). */
const delta = (before: Record<string, QueueTraffic>, after: Record<string, QueueTraffic>, field: keyof QueueTraffic) =>
  Object.fromEntries(Object.entries(after).flatMap(([queue, t]) => {
    const n = t[field] - (before[queue]?.[field] ?? 0)
    return n === 0 ? [] : [[queue, n]]
  }))

const api = async (method: string, path: string, token: string) => {
  const response = await request(path, { method, token })
  return { status: response.status, body: await response.json<any>() }
}

describe("queue groups (4 groups)", () => {
  const groupA = QueueGroups.groupOf("tenant-a", groups)
  const groupB = QueueGroups.groupOf("tenant-b", groups)

  it("tenant-a and tenant-b hash to different groups", () => {
    expect(groupA).not.toBe(groupB)
    // Every group queue is declared and bound (vitest.config.ts reads wrangler.jsonc's producers).
    for (const purpose of grouped) for (const g of [groupA, groupB]) expect(Object.values(env.TEST_QUEUE_PRODUCERS)).toContain(`${purpose}-${g}`)
  })

  it("two tenants' events go through their own group's queues, every hop, and each is processed exactly once", async () => {
    const before = snapshot()
    const buyerA = unique("buyer")
    const buyerB = unique("buyer")
    const a = callCompleted({}, { buyer_id: buyerA, duration_s: 90, price_cents: 420 })
    const b = callCompleted({ tenant_id: "tenant-b" }, { buyer_id: buyerB, duration_s: 90, price_cents: 310 })
    expect((await postEvents(a, tokenA)).status).toBe(202)
    expect((await postEvents(b, tokenB)).status).toBe(202)
    await drain()
    const after = snapshot()

    // Sent and delivered once each, on the tenant's group queue of each purpose; no other queue of these purposes saw anything.
    const sent = delta(before, after, "sent")
    const delivered = delta(before, after, "delivered")
    const acked = delta(before, after, "acked")
    for (const purpose of grouped) {
      const ofPurpose = (counts: Record<string, number>) => Object.fromEntries(Object.entries(counts).filter(([queue]) => QueueGroups.purposeOf(queue) === purpose))
      const queues = [`${purpose}-${groupA}`, `${purpose}-${groupB}`]
      expect(Object.keys(ofPurpose(sent)).sort(), `${purpose} sent`).toEqual([...queues].sort())
      // The same work for both tenants (the event; its facts, and the facts the processor derived, as fact messages).
      expect(sent[queues[0]!], purpose).toBe(sent[queues[1]!])
      expect(ofPurpose(delivered), `${purpose} delivered once`).toEqual(ofPurpose(sent))
      expect(ofPurpose(acked), `${purpose} acked`).toEqual(ofPurpose(sent))
    }
    expect(sent[`factline-events-${groupA}`]).toBe(1)
    expect(delta(before, after, "retried")).toEqual({})
    expect(delta(before, after, "deadLettered")).toEqual({})

    // Exactly once in storage: each tenant's facts once in its ledger and in the facts read model, one charge in its budget.
    expect((await readStream("tenant-a", a.subject)).facts.map((f) => f.type)).toEqual(["outcome", "qualification", "charge"])
    expect((await readStream("tenant-b", b.subject)).facts.map((f) => f.type)).toEqual(["outcome", "qualification", "charge"])
    for (const [tenant, subject] of [["tenant-a", a.subject], ["tenant-b", b.subject]] as const) {
      expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM facts WHERE tenant_id = ? AND stream = ?").bind(tenant, subject).first(), tenant).toEqual({ n: 3 })
      expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM calls WHERE tenant_id = ? AND call_id = ?").bind(tenant, subject).first(), tenant).toEqual({ n: 1 })
    }
    const budget = (tenant: string, buyer: string) =>
      env.DB.prepare("SELECT spent_cents, charges, refunds FROM buyer_budgets WHERE tenant_id = ? AND buyer_id = ?").bind(tenant, buyer).first()
    expect(await budget("tenant-a", buyerA)).toEqual({ spent_cents: 420, charges: 1, refunds: 0 })
    expect(await budget("tenant-b", buyerB)).toEqual({ spent_cents: 310, charges: 1, refunds: 0 })
  })

  it("a dead letter names its purpose, and its replay goes to the tenant's group queue", async () => {
    const subject = unique("fix")
    const event = { schema_version: 1, message_type: "test.fixable.happened", idempotency_key: `fixable:${subject}`, subject, tenant_id: "tenant-b", payload: { n: 5 } }
    brokenKeys.add(event.idempotency_key)
    try {
      expect((await postEvents(event, tokenB)).status).toBe(202)
      await drain()
    } finally {
      brokenKeys.delete(event.idempotency_key)                              // the fix is deployed
    }
    const listed = await api("GET", "/v1/dlq?queue=factline-events&type=test.fixable.happened&status=open&limit=200", tokenB)
    const [record] = listed.body.data.filter((r: any) => r.idempotency_key === event.idempotency_key)
    expect(record).toMatchObject({ queue: "factline-events", tenant_id: "tenant-b", reason: "permanent_failure", attempts: 1 })

    const before = snapshot()
    expect((await api("POST", `/v1/dlq/${record.id}/replay`, tokenB)).status).toBe(202)
    await drain()
    const sent = delta(before, snapshot(), "sent")
    expect(Object.fromEntries(Object.entries(sent).filter(([queue]) => QueueGroups.purposeOf(queue) === "factline-events"))).toEqual({ [`factline-events-${groupB}`]: 1 })
    expect((await readStream("tenant-b", subject)).facts.map((f) => [f.type, f.data])).toEqual([["fixable_done", { n: 5 }]])
  })
})
