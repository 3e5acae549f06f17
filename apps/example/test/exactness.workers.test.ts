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
import { callCompleted, eventually, unique } from "./helpers.js"
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
  } as Queue
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

const shuffle = <T>(items: ReadonlyArray<T>, seed: number): Array<T> => {
  const out = [...items]
  let s = seed >>> 0 || 1
  for (let i = out.length - 1; i > 0; i--) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0
    const j = s % (i + 1)
    ;[out[i], out[j]] = [out[j]!, out[i]!]
  }
  return out
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
          const deliveries = shuffle(events.flatMap(({ event, copies }) => Array.from({ length: copies }, () => ({ ...event, message_id: unique("msg") }))), seed)
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
          const same = (rows: ReadonlyArray<{ buyer_id: string; spent_cents: number; charges: number }>) =>
            JSON.stringify(rows.filter((r) => r.charges > 0)) === JSON.stringify(expected)
          await eventually(async () => (same(await budgets(buyers)) ? true : undefined), 30_000, `budgets of ${run}`)
          // Late duplicates (a second relay of the same facts) must not move them.
          await new Promise((r) => setTimeout(r, 1_500))
          expect((await budgets(buyers)).filter((r) => r.charges > 0)).toEqual(expected)
        }
      ),
      { numRuns: 6 }
    )
  }, 240_000)
})
