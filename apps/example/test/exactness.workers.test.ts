/**
 * Exactness as a property (fast-check): for any set of calls and any delivery schedule — each event
 * delivered 1–3 times, shuffled, in batches of any size, with the relay's queues refusing sends so that
 * facts take the shard-outbox fallback — the final `buyer_budgets` equal the model computed from the
 * distinct events, and stay equal.
 */
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import fc from "fast-check"
import type { PlatformEnv } from "@factline/workers"
import { callCompleted, drainWithOutboxes, shuffle, unique } from "./helpers.js"
import { platform } from "./worker.js"

const testEnv = env as unknown as PlatformEnv

/** A queue binding that refuses every other `sendBatch` call: the relay must hand those facts to their shard. */
const flaky = (queue: Queue): Queue => {
  let calls = 0
  return {
    send: (body: unknown, options?: QueueSendOptions) => queue.send(body, options),
    sendBatch: async (messages: Iterable<MessageSendRequest>, options?: QueueSendBatchOptions) => {
      if (calls++ % 2 === 0) throw new Error("queue refused the send")
      return queue.sendBatch(messages, options)
    }
  } as unknown as Queue
}

/** Delivers bodies in batches of `size` until every delivery is acked; retried messages come back in a later batch. */
const deliverAll = async (bodies: ReadonlyArray<unknown>, size: number, runEnv: PlatformEnv) => {
  let pending = [...bodies]
  for (let round = 0; pending.length > 0; round++) {
    if (round > 10) throw new Error(`${pending.length} deliveries never acked`)
    const next: Array<unknown> = []
    for (let i = 0; i < pending.length; i += size) {
      const chunk = pending.slice(i, i + size)
      const batch = createMessageBatch("factline-events", chunk.map((body) => ({ id: unique("qm"), timestamp: new Date(), attempts: round + 1, body })))
      const ctx = createExecutionContext()
      await platform.queue(batch, runEnv, ctx)
      const result = await getQueueResult(batch, ctx)
      const retried = new Set(result.retryMessages.map((r) => r.msgId))
      batch.messages.forEach((m, j) => retried.has(m.id) && next.push(chunk[j]))
    }
    pending = next
  }
}

/** A reproducible random sequence in [0, 1) from a seed (the property's shrinking needs the same order again). */
const seeded = (seed: number) => {
  let s = seed >>> 0 || 1
  return () => (s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32
}

const budgets = async (buyers: ReadonlyArray<string>) => {
  const { results } = await env.DB.prepare(
    "SELECT buyer_id, spent_cents, charges FROM buyer_budgets WHERE tenant_id = 'tenant-a' AND buyer_id IN (SELECT value FROM json_each(?)) ORDER BY buyer_id"
  ).bind(JSON.stringify(buyers)).all<{ buyer_id: string; spent_cents: number; charges: number }>()
  return results
}

describe("exactness under any delivery schedule", () => {
  it("budgets equal the model of the distinct events, whatever the duplicates, order, batch sizes and refused relay sends", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            duration_s: fc.integer({ min: 0, max: 180 }),
            price_cents: fc.integer({ min: 1, max: 1_000 }),
            buyer: fc.integer({ min: 0, max: 3 }),
            copies: fc.integer({ min: 1, max: 3 })
          }),
          { minLength: 1, maxLength: 20 }
        ),
        fc.integer(),
        fc.integer({ min: 1, max: 12 }),
        fc.boolean(),
        async (calls, seed, batchSize, refuseSends) => {
          const run = unique("prop")
          const buyers = [0, 1, 2, 3].map((b) => `${run}_b${b}`)
          const events = calls.map((c, i) => ({
            event: callCompleted({}, { call_id: `${run}_c${i}`, buyer_id: buyers[c.buyer]!, duration_s: c.duration_s, price_cents: c.price_cents, currency: "USD" }),
            copies: c.copies
          }))
          const deliveries = shuffle(events.flatMap(({ event, copies }) => Array.from({ length: copies }, () => ({ ...event, message_id: unique("msg") }))), seeded(seed))
          const runEnv = refuseSends
            ? { ...testEnv, PROJECTIONS_QUEUE: flaky(testEnv.PROJECTIONS_QUEUE as Queue), FACT_PROCESSING_QUEUE: flaky(testEnv.FACT_PROCESSING_QUEUE as Queue) }
            : testEnv
          await deliverAll(deliveries, batchSize, runEnv as PlatformEnv)

          const model = new Map<string, { spent_cents: number; charges: number }>()
          for (const c of calls) {
            if (c.duration_s < 60) continue
            const m = model.get(buyers[c.buyer]!) ?? { spent_cents: 0, charges: 0 }
            model.set(buyers[c.buyer]!, { spent_cents: m.spent_cents + c.price_cents, charges: m.charges + 1 })
          }
          const expected = [...model].map(([buyer_id, m]) => ({ buyer_id, ...m })).sort((a, b) => a.buyer_id.localeCompare(b.buyer_id))
          // Everything delivered, the facts handed to shards relayed by their alarms, late duplicates included.
          await drainWithOutboxes("tenant-a")
          expect((await budgets(buyers)).filter((r) => r.charges > 0)).toEqual(expected)
        }
      ),
      { numRuns: 6 }
    )
  }, 240_000)
})

/** A queue binding that keeps what is sent, so a test can deliver it onward itself (and inject a crash there). */
const capturing = () => {
  const sent: Array<unknown> = []
  const queue = {
    send: async (body: unknown) => void sent.push(body),
    sendBatch: async (messages: Iterable<MessageSendRequest>) => void sent.push(...[...messages].map((m) => m.body))
  } as unknown as Queue
  return { queue, sent }
}

/** The real namespace, but `append` answers with an error after the shard committed: the reply is lost. */
const appendReplyLost = <N extends { get(id: DurableObjectId): unknown }>(ns: N): N =>
  new Proxy(ns, {
    get(target, prop) {
      if (prop !== "get") return (target as any)[prop]?.bind?.(target) ?? (target as any)[prop]
      return (id: DurableObjectId) => {
        const stub = target.get(id) as any
        return new Proxy(stub, {
          get: (s, m) => (m === "append" ? async (...args: Array<unknown>) => { await s.append(...args); throw new Error("connection reset after commit") } : s[m])
        })
      }
    }
  })

/** The real database, but a `batch()` answers with an error after it committed. */
const batchReplyLost = (db: D1Database): D1Database =>
  new Proxy(db, {
    get(target, prop) {
      if (prop === "batch") return async (statements: Array<D1PreparedStatement>) => { await target.batch(statements); throw new Error("D1 reply lost after commit") }
      const value = (target as any)[prop]
      return typeof value === "function" ? value.bind(target) : value
    }
  })

/** A queue binding whose `sendBatch` delivers and then reports a failure (the worker "died" right after). */
const sentThenFailed = (queue: Queue): Queue => ({
  send: (body: unknown, options?: QueueSendOptions) => queue.send(body, options),
  sendBatch: async (messages: Iterable<MessageSendRequest>, options?: QueueSendBatchOptions) => {
    await queue.sendBatch(messages, options)
    throw new Error("worker died after the send")
  }
}) as unknown as Queue

const deliverOnce = async (queue: string, bodies: ReadonlyArray<unknown>, runEnv: PlatformEnv, attempts = 1) => {
  const batch = createMessageBatch(queue, bodies.map((body) => ({ id: unique("qm"), timestamp: new Date(), attempts, body })))
  const ctx = createExecutionContext()
  await platform.queue(batch, runEnv, ctx)
  return getQueueResult(batch, ctx)
}

describe("crash points: a failure injected at each step boundary, then redelivery", () => {
  it("a lost ledger reply (events and fact-processing), a send that succeeded but reported failure, a projection write whose reply was lost: nothing lost, nothing doubled", async () => {
    const run = unique("crash")
    const buyer = `${run}_b`
    const calls = Array.from({ length: 12 }, (_, i) => ({ duration_s: 30 + i * 10, price_cents: 100 + i }))
    const events = calls.map((c, i) => callCompleted({}, { call_id: `${run}_c${i}`, buyer_id: buyer, duration_s: c.duration_s, price_cents: c.price_cents, currency: "USD" }))

    // 1. Events: the shards commit, the reply is lost → every message retried; the redelivery appends nothing new.
    const toProjections = capturing()
    const toProcessing = capturing()
    const downstream = { ...testEnv, PROJECTIONS_QUEUE: toProjections.queue, FACT_PROCESSING_QUEUE: toProcessing.queue } as PlatformEnv
    const lost = await deliverOnce("factline-events", events, { ...downstream, LEDGER: appendReplyLost(testEnv.LEDGER) })
    expect(lost.retryMessages).toHaveLength(events.length)
    expect(toProcessing.sent).toHaveLength(0)
    const again = await deliverOnce("factline-events", events, downstream, 2)
    expect(again.explicitAcks).toHaveLength(events.length)

    // 2. Fact-processing: its appends commit, the reply is lost → retried; then its relay sends but reports a failure
    //    → the facts are handed to the shards too (a double send, by design); then all is acked.
    const derivedToProjections = capturing()
    const processingEnv = { ...testEnv, PROJECTIONS_QUEUE: derivedToProjections.queue } as PlatformEnv
    const lostDerived = await deliverOnce("factline-fact-processing", toProcessing.sent, { ...processingEnv, LEDGER: appendReplyLost(testEnv.LEDGER) })
    expect(lostDerived.explicitAcks).toHaveLength(0)
    const flakyRelay = await deliverOnce("factline-fact-processing", toProcessing.sent, { ...testEnv, PROJECTIONS_QUEUE: sentThenFailed(derivedToProjections.queue) } as PlatformEnv, 2)
    expect(flakyRelay.explicitAcks).toHaveLength(toProcessing.sent.length)

    // 3. Projections: every fact message, plus the duplicates of step 2, written once with the reply lost, then again.
    const factMessages = [...toProjections.sent, ...derivedToProjections.sent]
    const lostWrite = await deliverOnce("factline-projections", factMessages, { ...testEnv, DB: batchReplyLost(testEnv.DB) })
    expect(lostWrite.explicitAcks).toHaveLength(0)
    const written = await deliverOnce("factline-projections", factMessages, testEnv, 2)
    expect(written.explicitAcks).toHaveLength(factMessages.length)

    // Exactly the model: one charge per qualifying call, every fact once in the ledger and once in the facts copy.
    const qualifying = calls.filter((c) => c.duration_s >= 60)
    const budget = await env.DB.prepare("SELECT spent_cents, charges FROM buyer_budgets WHERE tenant_id = 'tenant-a' AND buyer_id = ?").bind(buyer).first()
    expect(budget).toEqual({ spent_cents: qualifying.reduce((n, c) => n + c.price_cents, 0), charges: qualifying.length })
    const copies = await env.DB.prepare("SELECT type, COUNT(*) AS n FROM facts WHERE tenant_id = 'tenant-a' AND stream >= ? AND stream < ? GROUP BY type ORDER BY type")
      .bind(`${run}_c`, `${run}_d`).all<{ type: string; n: number }>()
    expect(copies.results).toEqual([
      { type: "charge", n: qualifying.length },
      { type: "outcome", n: calls.length },
      { type: "qualification", n: calls.length }
    ])
    // The handed-over duplicates (step 2) reach the real projections queue via the shards' alarms: still exact.
    await drainWithOutboxes("tenant-a")
    expect(await env.DB.prepare("SELECT spent_cents, charges FROM buyer_budgets WHERE tenant_id = 'tenant-a' AND buyer_id = ?").bind(buyer).first()).toEqual(budget)
  }, 60_000)
})
