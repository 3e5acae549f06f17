/**
 * Transient infrastructure faults (issue 8, fault suite), fast variants: each
 * consumer stage runs with D1, LedgerShard and queue bindings that fail every
 * k-th call — refused, or done with the reply lost — for its first
 * `maxRetries − 1` delivery attempts (a transient fault clears within the retry
 * budget), and its messages are redelivered as the platform would. Stored state
 * must come out exact: every fact once, `buyer_budgets` to the cent, `calls`
 * rows right, nothing dead-lettered. The heavier variants run in `npm run chaos`.
 */
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import type { PlatformEnv } from "@factline/workers"
import * as FaultCases from "./faultCases.js"
import { callCompleted, readStream, shardKeyOf, unique } from "./helpers.js"
import { platform } from "./worker.js"

const testEnv = env as unknown as PlatformEnv

/** The LedgerShard namespace with one shard whose `methods` (every one if empty) throw: the others are real. */
const sickShard = (shardKey: string, methods: ReadonlyArray<string> = []): typeof env.LEDGER => {
  const sick = env.LEDGER.idFromName(shardKey).toString()
  return new Proxy(env.LEDGER, {
    get(target, prop) {
      if (prop !== "get") {
        const value = (target as any)[prop]
        return typeof value === "function" ? value.bind(target) : value
      }
      return (id: DurableObjectId) => {
        const stub = target.get(id) as any
        if (id.toString() !== sick) return stub
        return new Proxy(stub, {
          get(s, method) {
            if (typeof method !== "string" || method === "then" || (methods.length > 0 && !methods.includes(method))) return s[method]
            return () => Promise.reject(new Error(`shard ${shardKey} is unreachable`))
          }
        })
      }
    }
  })
}

const refusingQueue = { send: () => Promise.reject(new Error("queue down")), sendBatch: () => Promise.reject(new Error("queue down")) } as unknown as Queue

const deliver = async (bodies: ReadonlyArray<{ readonly idempotency_key: string }>, runEnv: PlatformEnv) => {
  const batch = createMessageBatch("factline-events", bodies.map((body) => ({ id: unique("qm"), timestamp: new Date(), attempts: 1, body })))
  const ctx = createExecutionContext()
  await platform.queue(batch, runEnv, ctx)
  const result = await getQueueResult(batch, ctx)
  const keyOf = new Map(batch.messages.map((m, i) => [m.id, bodies[i]!.idempotency_key]))
  return { retried: result.retryMessages.map((r) => keyOf.get(r.msgId)!).sort(), acked: result.explicitAcks.map((id) => keyOf.get(id)!).sort() }
}

/** 24 events over tenant-a's shards, and the ones that live on the shard of the first. */
const spread = async () => {
  await deliver([callCompleted()], testEnv) // tenant-a has a ledger (its shard count recorded)
  const events = Array.from({ length: 24 }, () => callCompleted())
  const shards = await Promise.all(events.map((e) => shardKeyOf("tenant-a", e.subject)))
  const sick = shards[0]!
  const onSick = events.filter((_, i) => shards[i] === sick)
  expect(onSick.length).toBeLessThan(events.length)
  return { events, sick, onSick, healthy: events.filter((_, i) => shards[i] !== sick) }
}

describe("transient infrastructure faults", () => {
  it("events stage: D1 every 7th call, LedgerShard RPCs every 11th, queue sends every 5th (refused or reply lost) → exact facts and budgets", async () => {
    const { card, injected } = await FaultCases.transientEventsStage({ events: 40, batchSize: 10, schedule: { d1: 7, durableObjects: 11, queues: 5, lostReplies: true } })
    // Every kind of binding failed at least once, both ways, and the consumer retried.
    expect(injected.refused.d1 + injected.refused.durableObjects + injected.refused.queues).toBeGreaterThan(0)
    expect(injected.lostReplies.d1 + injected.lostReplies.durableObjects + injected.lostReplies.queues).toBeGreaterThan(0)
    expect([injected.refused.d1 + injected.lostReplies.d1, injected.refused.durableObjects + injected.lostReplies.durableObjects, injected.refused.queues + injected.lostReplies.queues].every((n) => n > 0)).toBe(true)
    expect(card).toMatchObject({ facts_found: card.facts_expected, duplicates_found: 0, messages_lost: 0, dlq_found: 0, budgets_exact: true })
    expect(card.retries).toBeGreaterThan(0)
    expect(card.passed, JSON.stringify(card)).toBe(true)
  }, 180_000)

  it("fact-processing stage: LedgerShard RPCs every 5th call, queue sends every 3rd, D1 every 7th → each derived fact once, exact budgets", async () => {
    const { card, injected } = await FaultCases.transientProcessingStage({ outcomes: 30, batchSize: 3, schedule: { d1: 7, durableObjects: 5, queues: 3, lostReplies: true } })
    expect(injected.refused.durableObjects + injected.lostReplies.durableObjects).toBeGreaterThan(0)
    expect(injected.refused.queues + injected.lostReplies.queues).toBeGreaterThan(0)
    expect(card).toMatchObject({ facts_found: card.facts_expected, duplicates_found: 0, messages_lost: 0, dlq_found: 0, budgets_exact: true })
    expect(card.passed, JSON.stringify(card)).toBe(true)
  }, 180_000)

  it("projections stage: D1 every 3rd call (refused or committed with the reply lost) → exact facts copy, calls rows and budgets", async () => {
    const { card, injected } = await FaultCases.transientProjectionsStage({ calls: 30, batchSize: 8, schedule: { d1: 3, lostReplies: true } })
    expect(injected.refused.d1).toBeGreaterThan(0)
    expect(injected.lostReplies.d1).toBeGreaterThan(0)
    expect(card).toMatchObject({ facts_found: card.facts_expected, duplicates_found: 0, messages_lost: 0, dlq_found: 0, budgets_exact: true, rows_exact: true })
    expect(card.passed, JSON.stringify(card)).toBe(true)
  }, 180_000)

  it("one unreachable ledger shard fails only the messages of its streams: the rest of the batch is appended and acked", async () => {
    const { events, sick, onSick, healthy } = await spread()
    const { retried, acked } = await deliver(events, { ...testEnv, LEDGER: sickShard(sick) })
    expect(retried).toEqual(onSick.map((e) => e.idempotency_key).sort())
    expect(acked).toEqual(healthy.map((e) => e.idempotency_key).sort())
    for (const e of healthy) expect((await readStream("tenant-a", e.subject)).facts.map((f) => f.type)).toContain("outcome")
    // Redelivered once the shard is back, the rest is appended.
    expect((await deliver(onSick, testEnv)).retried).toEqual([])
    for (const e of onSick) expect((await readStream("tenant-a", e.subject)).facts.map((f) => f.type)).toContain("outcome")
  })

  it("when the relay's queues are down and one shard cannot take its facts over, only that shard's messages are retried", async () => {
    const { events, sick, onSick, healthy } = await spread()
    const down = { ...testEnv, LEDGER: sickShard(sick, ["handover"]), PROJECTIONS_QUEUE: refusingQueue, FACT_PROCESSING_QUEUE: refusingQueue }
    const { retried, acked } = await deliver(events, down)
    expect(retried).toEqual(onSick.map((e) => e.idempotency_key).sort())
    expect(acked).toEqual(healthy.map((e) => e.idempotency_key).sort())
  })
})
