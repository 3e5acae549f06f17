/**
 * A consumer stops before the platform stops it (seed 003, "Consumer with CPU-Time Awareness"), in workerd with
 * the real local D1 databases: with its time budget spent (`FACTLINE_CONSUMER_BUDGET_MS=0`: every unit after the
 * first), a projections batch of facts on two read databases writes the first database's, acks those messages,
 * and hands the other's back at once (`delaySeconds: 0`) unwritten; the next delivery writes them. Each fact is
 * applied once. And the log line of a processing attempt carries the envelope's `source` and the queue delay.
 */
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { afterEach, describe, expect, it, vi } from "vitest"
import { FactMessage } from "@factline/core/runtime"
import type { PlatformEnv } from "@factline/workers"
import { callCompleted, request, storedFact, tokenPlatform, unique } from "./helpers.js"
import { recordingBatch } from "./instrument.js"
import { platform } from "./worker.js"

const testEnv = env as unknown as PlatformEnv

afterEach(() => void vi.restoreAllMocks())

/** One batch through the platform's queue handler: what was acked, what was retried and with which delay. */
const deliver = async (queue: string, messages: ReadonlyArray<{ readonly id: string; readonly body: unknown; readonly attempts?: number; readonly timestamp?: Date }>, settings: Record<string, string> = {}) => {
  const batch = createMessageBatch(queue, messages.map((m) => ({ id: m.id, timestamp: m.timestamp ?? new Date(), attempts: m.attempts ?? 1, body: m.body })))
  const ctx = createExecutionContext()
  const recording = recordingBatch(batch)
  await platform.queue(recording.batch, { ...testEnv, ...settings } as PlatformEnv, ctx)
  const result = await getQueueResult(batch, ctx)
  return { acked: [...result.explicitAcks].sort(), retried: result.retryMessages.map((r) => ({ id: r.msgId, delaySeconds: recording.retries.get(r.msgId)?.delaySeconds })) }
}

const budgetOf = async (database: D1Database, tenant: string, buyer: string) =>
  await database.prepare("SELECT spent_cents, charges FROM buyer_budgets WHERE tenant_id = ? AND buyer_id = ?").bind(tenant, buyer).first<{ spent_cents: number; charges: number }>()

describe("a consumer invocation's time budget", () => {
  it("a projections batch over two read databases that spends its budget writes one database, hands the other back at once, and the next delivery writes it: each fact applied once", async () => {
    // tenant-a reads from database 0 (the platform database); a new tenant is placed on database 1.
    const other = `tenant-budget-${Date.now().toString(36)}`
    expect((await request(`/v1/tenants/${other}/placement`, { method: "PUT", token: tokenPlatform, body: JSON.stringify({ read_database: 1 }) })).status).toBe(200)
    const onA = { tenant: "tenant-a", database: env.DB, buyer: unique("buyer"), id: unique("qm") }
    const onOther = { tenant: other, database: env.FACTLINE_READ_DB_1, buyer: unique("buyer"), id: unique("qm") }
    const messageOf = async (side: typeof onA) => {
      const call = unique("call")
      const fact = await storedFact(call, 1, "charge", { call_id: call, buyer_id: side.buyer, amount_cents: 250, currency: "USD" }, side.tenant)
      return { id: side.id, body: FactMessage.make([fact]) }
    }
    const messages = [await messageOf(onA), await messageOf(onOther)]

    const warned: Array<string> = []
    vi.spyOn(console, "warn").mockImplementation((line: unknown) => void warned.push(String(line)))
    const first = await deliver("factline-projections", messages, { FACTLINE_CONSUMER_BUDGET_MS: "0" })
    vi.restoreAllMocks()

    // One database's message written and acked; the other's handed back at once, nothing written for it.
    expect(first.acked).toHaveLength(1)
    expect(first.retried).toHaveLength(1)
    expect(first.retried[0]!.delaySeconds).toBe(0)
    const [done, back] = first.acked[0] === onA.id ? [onA, onOther] : [onOther, onA]
    expect(first.retried[0]!.id).toBe(back.id)
    expect(await budgetOf(done.database, done.tenant, done.buyer)).toEqual({ spent_cents: 250, charges: 1 })
    expect(await budgetOf(back.database, back.tenant, back.buyer)).toBeNull()
    const line = warned.map((l) => JSON.parse(l)).find((l) => l.message === "queue batch handed messages back before its time limit")
    expect(line).toMatchObject({ level: "warn", queue: "factline-projections", messages: 2, handed_back: 1, budget_ms: 0 })

    // The next delivery of the handed-back message (the default budget) writes it; a redelivery of both changes nothing.
    const second = await deliver("factline-projections", messages.filter((m) => m.id === back.id).map((m) => ({ ...m, attempts: 2 })))
    expect(second).toEqual({ acked: [back.id], retried: [] })
    const third = await deliver("factline-projections", messages.map((m) => ({ ...m, attempts: 3 })))
    expect(third.retried).toEqual([])
    for (const side of [onA, onOther]) expect(await budgetOf(side.database, side.tenant, side.buyer)).toEqual({ spent_cents: 250, charges: 1 })
  })
})

describe("a processing attempt's log line", () => {
  it("carries the envelope's source and how long the message waited on the queue (source, queue_timestamp, processing_delay_ms)", async () => {
    const call = callCompleted({ source: "billing-service" })
    const sentAt = new Date(Date.now() - 90_000)
    const logged: Array<string> = []
    vi.spyOn(console, "log").mockImplementation((line: unknown) => void logged.push(String(line)))
    const { acked } = await deliver("factline-events", [{ id: unique("qm"), body: call, timestamp: sentAt }], { FACTLINE_LOG_ATTEMPTS: "all" })
    vi.restoreAllMocks()
    expect(acked).toHaveLength(1)
    const line = logged.flatMap((l) => {
      try {
        return [JSON.parse(l)]
      } catch {
        return []
      }
    }).find((l) => l.message === "queue message processed" && l.idempotency_key === call.idempotency_key)
    expect(line).toMatchObject({ outcome: "acked", source: "billing-service", queue_timestamp: sentAt.toISOString() })
    // Waited 90 s on the queue before this batch started (plus the moments the test took to deliver it).
    expect(line.processing_delay_ms).toBeGreaterThanOrEqual(90_000)
    expect(line.processing_delay_ms).toBeLessThan(120_000)
  })
})
