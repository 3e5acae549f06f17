/**
 * The metrics rollup's deferral in workerd (`FACTLINE_METRICS_FLUSH_SECONDS`, production default 10): a clean
 * consumer batch's metrics wait in the isolate's tally — no D1 round trip of its own — and go with the next
 * write: the first batch after the interval, or at once with a batch that dead-letters or retries. The other
 * test files run with the setting at 0 (every batch written at once).
 */
import { createExecutionContext, createMessageBatch, getQueueResult, runDurableObjectAlarm } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import type { PlatformEnv } from "@factline/workers"
import * as CountingBindings from "@factline/core/testing/bindings"
import type { LedgerShard } from "@factline/workers"
import { drain } from "./Drain.js"
import { callCompleted, shardKeyOf, unique } from "./helpers.js"
import { newCounts } from "./instrument.js"
import { holdQueue, platform } from "./worker.js"

const testEnv = env as unknown as PlatformEnv

/** Messages and batches the rollup holds for the events queue. */
const rollup = async () =>
  (await env.DB.prepare("SELECT COALESCE(SUM(batches), 0) AS batches, COALESCE(SUM(received), 0) AS received, COALESCE(SUM(dead_lettered), 0) AS dead FROM queue_metrics WHERE queue = 'factline-events'")
    .first<{ batches: number; received: number; dead: number }>())!

/** One batch of `bodies` through the platform's queue handler on `runEnv` (its own runtime, so its own tally). */
const deliver = async (bodies: ReadonlyArray<unknown>, runEnv: PlatformEnv) => {
  const batch = createMessageBatch("factline-events", bodies.map((body) => ({ id: unique("qm"), timestamp: new Date(), attempts: 1, body })))
  const ctx = createExecutionContext()
  await platform.queue(batch, runEnv, ctx)
  return getQueueResult(batch, ctx)
}

describe("metrics: clean batches wait in the isolate", () => {
  it("with a 60 s interval, clean batches after the first write nothing; a dead letter writes them all, in one round trip", async () => {
    const counts = newCounts()
    const runEnv = CountingBindings.env({ ...testEnv, FACTLINE_METRICS_FLUSH_SECONDS: "60" } as PlatformEnv, counts)
    const before = await rollup()
    expect((await deliver([callCompleted(), callCompleted()], runEnv)).explicitAcks).toHaveLength(2)
    expect(await rollup()).toEqual({ batches: before.batches + 1, received: before.received + 2, dead: before.dead })   // the isolate's first: written

    const tripsBefore = counts.d1RoundTrips
    await deliver([callCompleted(), callCompleted()], runEnv)
    const cleanTrips = counts.d1RoundTrips - tripsBefore
    await deliver([callCompleted(), callCompleted(), callCompleted()], runEnv)
    expect(await rollup()).toEqual({ batches: before.batches + 1, received: before.received + 2, dead: before.dead })   // waiting

    const dirtyBefore = counts.d1RoundTrips
    const result = await deliver([callCompleted(), { not: "an envelope" }], runEnv)
    expect(result.explicitAcks).toHaveLength(2)                                          // the bad one dead-lettered, not retried
    expect(await rollup()).toEqual({ batches: before.batches + 4, received: before.received + 9, dead: before.dead + 1 })
    // The dead-lettering batch does what a clean one does, plus its dead letter's record and the one rollup write.
    expect(counts.d1RoundTrips - dirtyBefore).toBeGreaterThan(cleanTrips)
  })

  it("with a 1 s interval, the first clean batch past it writes the ones that waited", async () => {
    const runEnv = { ...testEnv, FACTLINE_METRICS_FLUSH_SECONDS: "1" } as PlatformEnv
    const before = await rollup()
    await deliver([callCompleted()], runEnv)
    await deliver([callCompleted()], runEnv)
    expect((await rollup()).batches).toBe(before.batches + 1)
    await new Promise((resolve) => setTimeout(resolve, 1_100))
    await deliver([callCompleted()], runEnv)
    expect(await rollup()).toEqual({ batches: before.batches + 3, received: before.received + 3, dead: before.dead })
  })
})

describe("metrics: messages_sent_total counts the ledger shard's outbox relay", () => {
  const sentTo = async (queue: string) =>
    (await env.DB.prepare("SELECT COALESCE(SUM(sent), 0) AS n FROM queue_metrics WHERE queue = ?").bind(queue).first<{ n: number }>())!.n

  it("facts handed to a shard after a refused relay are counted as sent when its alarm relays them, under each destination", async () => {
    const buyer = unique("buyer")
    const event = callCompleted({}, { buyer_id: buyer, duration_s: 90, price_cents: 654, currency: "USD" })
    const down = { send: async () => { throw new Error("queue unavailable") }, sendBatch: async () => { throw new Error("queue unavailable") }, metrics: async () => ({ backlogCount: 0, backlogBytes: 0 }) }
    expect((await deliver([event], { ...testEnv, PROJECTIONS_QUEUE: down, FACT_PROCESSING_QUEUE: down } as unknown as PlatformEnv)).explicitAcks).toHaveLength(1)
    // The relayed messages wait on their queues while counted, so that nothing consumed downstream sends meanwhile.
    const holds = ["factline-projections-0", "factline-fact-processing-0"].map((queue) => holdQueue(queue, { process: true }))
    try {
      const before = { projections: await sentTo("factline-projections"), processing: await sentTo("factline-fact-processing") }
      const stub = env.LEDGER.get(env.LEDGER.idFromName(await shardKeyOf("tenant-a", event.subject))) as DurableObjectStub<LedgerShard>
      await runDurableObjectAlarm(stub)
      // One fact (the outcome) to each destination: one message each, counted by the shard itself.
      expect({ projections: await sentTo("factline-projections"), processing: await sentTo("factline-fact-processing") })
        .toEqual({ projections: before.projections + 1, processing: before.processing + 1 })
    } finally {
      for (const hold of holds) hold.release()
      await drain().finally(() => holds.forEach((hold) => hold.end()))
    }
    expect(await env.DB.prepare("SELECT spent_cents FROM buyer_budgets WHERE tenant_id = 'tenant-a' AND buyer_id = ?").bind(buyer).first()).toEqual({ spent_cents: 654 })
  })
})
