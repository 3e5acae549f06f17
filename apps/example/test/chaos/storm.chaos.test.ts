/**
 * The heavier fault cases (`npm run chaos`): a duplicate storm of 1,000 events delivered 1–5 times,
 * shuffled, in concurrent batches; poison messages mixed into live traffic. Each case asserts stored
 * state and prints a `SCORECARD` line: messages sent, facts expected vs found, duplicates, lost, DLQ
 * records expected vs found.
 */
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import type { PlatformEnv } from "@factline/workers"
import { callCompleted, eventually, shuffle, unique } from "../helpers.js"
import { platform } from "../worker.js"

const testEnv = env as unknown as PlatformEnv

const score = (fields: Record<string, unknown>) => console.log(`SCORECARD ${JSON.stringify(fields)}`)

const deliverBatch = async (bodies: ReadonlyArray<unknown>, attempts = 1) => {
  const batch = createMessageBatch("factline-events", bodies.map((body) => ({ id: unique("qm"), timestamp: new Date(), attempts, body })))
  const ctx = createExecutionContext()
  await platform.queue(batch, testEnv, ctx)
  const result = await getQueueResult(batch, ctx)
  const retried = new Set(result.retryMessages.map((r) => r.msgId))
  return batch.messages.flatMap((m, i) => (retried.has(m.id) ? [bodies[i]] : []))
}

/** Facts per type for a run's streams, in the `facts` copy (D1), and how many distinct fact ids. */
const factCounts = async (run: string) => {
  const row = await env.DB.prepare(
    "SELECT COUNT(*) AS n, COUNT(DISTINCT fact_id) AS distinct_ids, SUM(type = 'charge') AS charges FROM facts WHERE tenant_id = 'tenant-a' AND stream >= ? AND stream < ?"
  ).bind(`${run}_c`, `${run}_d`).first<{ n: number; distinct_ids: number; charges: number }>()
  return row!
}

describe("chaos", () => {
  it("duplicate storm: 1,000 events delivered 1-5 times, shuffled, in concurrent batches", async () => {
    const run = unique("storm")
    const n = 1_000
    const buyers = 20
    const events = Array.from({ length: n }, (_, i) =>
      callCompleted({}, { call_id: `${run}_c${i}`, buyer_id: `${run}_b${i % buyers}`, duration_s: (i * 37) % 180, price_cents: 100 + ((i * 53) % 900), currency: "USD" }))
    const deliveries = shuffle(events.flatMap((e) => Array.from({ length: 1 + Math.floor(Math.random() * 5) }, () => ({ ...e, message_id: unique("msg") }))))
    // Batches of 100, four at a time (as concurrent consumer invocations would be); retried ones come back later.
    let pending = deliveries
    for (let attempt = 1; pending.length > 0 && attempt <= 6; attempt++) {
      const batches = []
      for (let i = 0; i < pending.length; i += 100) batches.push(pending.slice(i, i + 100))
      const retried: Array<unknown> = []
      for (let i = 0; i < batches.length; i += 4) {
        const results = await Promise.all(batches.slice(i, i + 4).map((b) => deliverBatch(b, attempt)))
        retried.push(...results.flat())
      }
      pending = retried as typeof deliveries
    }
    const qualifying = events.filter((e) => e.payload.duration_s >= 60)
    const expectedFacts = n * 2 + qualifying.length
    const spent = qualifying.reduce((s, e) => s + e.payload.price_cents, 0)
    const found = await eventually(async () => {
      const counts = await factCounts(run)
      return counts.n >= expectedFacts ? counts : undefined
    }, 180_000, "every fact in the facts copy")
    await new Promise((r) => setTimeout(r, 3_000))
    const settled = await factCounts(run)
    const budgets = await env.DB.prepare("SELECT COALESCE(SUM(spent_cents), 0) AS spent, COALESCE(SUM(charges), 0) AS charges FROM buyer_budgets WHERE tenant_id = 'tenant-a' AND buyer_id >= ? AND buyer_id < ?")
      .bind(`${run}_b`, `${run}_c`).first<{ spent: number; charges: number }>()
    const passed = settled.n === expectedFacts && settled.distinct_ids === expectedFacts && budgets?.spent === spent && budgets?.charges === qualifying.length && pending.length === 0
    score({
      case: "duplicate storm", passed, messages_sent: deliveries.length, facts_expected: expectedFacts, facts_found: settled.n,
      duplicates_found: settled.n - settled.distinct_ids, messages_lost: Math.max(0, expectedFacts - found.n), dlq_expected: 0, dlq_found: 0,
      budgets_exact: budgets?.spent === spent && budgets?.charges === qualifying.length
    })
    expect(passed).toBe(true)
  })

  it("poison messages in live traffic: each dead-lettered once with its reason, siblings unaffected, no retries burnt", async () => {
    const run = unique("poison")
    const good = Array.from({ length: 200 }, (_, i) => callCompleted({}, { call_id: `${run}_c${i}`, buyer_id: `${run}_b`, duration_s: 90, price_cents: 10, currency: "USD" }))
    const poison = [
      ...Array.from({ length: 10 }, (_, i) => callCompleted({}, { call_id: `${run}_p${i}`, duration_s: "long" })),
      ...Array.from({ length: 10 }, (_, i) => ({ ...callCompleted({}, { call_id: `${run}_u${i}` }), message_type: "nobody.handles_this" })),
      ...Array.from({ length: 10 }, (_, i) => callCompleted({ schema_version: 9 }, { call_id: `${run}_v${i}` }))
    ]
    const deliveries = shuffle([...good, ...poison])
    const retried: Array<unknown> = []
    for (let i = 0; i < deliveries.length; i += 100) retried.push(...(await deliverBatch(deliveries.slice(i, i + 100))))
    const keys = poison.map((p) => p.idempotency_key)
    const dead = await eventually(async () => {
      const { results } = await env.DB.prepare("SELECT idempotency_key, reason FROM dead_messages WHERE idempotency_key IN (SELECT value FROM json_each(?))")
        .bind(JSON.stringify(keys)).all<{ idempotency_key: string; reason: string }>()
      return results.length >= keys.length ? results : undefined
    }, 60_000, "the poison dead letters")
    const found = await eventually(async () => {
      const counts = await factCounts(run)
      return counts.n >= good.length * 3 ? counts : undefined
    }, 60_000, "the good calls' facts")
    await new Promise((r) => setTimeout(r, 2_000))
    const deadAgain = (await env.DB.prepare("SELECT COUNT(*) AS n FROM dead_messages WHERE idempotency_key IN (SELECT value FROM json_each(?))").bind(JSON.stringify(keys)).first<{ n: number }>())!.n
    const reasons = Object.fromEntries(["decode_error", "unknown_message_type", "unsupported_version"].map((r) => [r, dead.filter((d) => d.reason === r).length]))
    const passed = retried.length === 0 && deadAgain === keys.length && reasons.decode_error === 10 && reasons.unknown_message_type === 10 &&
      reasons.unsupported_version === 10 && found.n === good.length * 3
    score({
      case: "poison messages", passed, messages_sent: deliveries.length, facts_expected: good.length * 3, facts_found: found.n,
      duplicates_found: found.n - found.distinct_ids, messages_lost: Math.max(0, good.length * 3 - found.n), dlq_expected: keys.length, dlq_found: deadAgain,
      retries_burnt: retried.length
    })
    expect(passed).toBe(true)
  })
})
