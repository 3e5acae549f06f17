import { createExecutionContext, createMessageBatch, getQueueResult, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { FactMessage } from "@factline/core/runtime"
import * as CountingBindings from "@factline/core/testing/bindings"
import type { Fact } from "@factline/schemas"
import type { LedgerShard, PlatformEnv } from "@factline/workers"
import { drain } from "./Drain.js"
import { callCompleted, deadMessages, postEvents, readStream, shardKeyOf, shuffle, storedFact, unique } from "./helpers.js"
import { countingD1, countingNamespace, newCounts } from "./instrument.js"
import { fragileBuyers } from "./TestModule.js"
import { platform } from "./worker.js"

const testEnv = env as unknown as PlatformEnv

const deliver = async (queue: string, bodies: ReadonlyArray<unknown>, runEnv: PlatformEnv = testEnv) => {
  const batch = createMessageBatch(queue, bodies.map((body) => ({ id: unique("qm"), timestamp: new Date(), attempts: 1, body })))
  const ctx = createExecutionContext()
  await platform.queue(batch, runEnv, ctx)
  return getQueueResult(batch, ctx)
}

const budget = (tenant: string, buyer: string) =>
  env.DB.prepare("SELECT spent_cents, charges, refunds FROM buyer_budgets WHERE tenant_id = ? AND buyer_id = ?").bind(tenant, buyer).first<Record<string, number>>()

const callRow = (tenant: string, callId: string) =>
  env.DB.prepare("SELECT call_id, buyer_id, duration_s, currency, qualified, charged_cents, refunded_cents FROM calls WHERE tenant_id = ? AND call_id = ?")
    .bind(tenant, callId).first<Record<string, unknown>>()

describe("facts in motion", () => {
  it("200 calls, each delivered 3 times in shuffled order across batches, give exact budgets and one correct row per call", async () => {
    const run = unique("run")
    const buyers = Array.from({ length: 5 }, (_, i) => `${run}_buyer_${i}`)
    const events = Array.from({ length: 200 }, (_, i) => {
      const call_id = `${run}_call_${i}`
      return callCompleted({}, { call_id, buyer_id: buyers[i % 5], duration_s: (i * 37) % 180, price_cents: 100 + ((i * 53) % 900) })
    })
    const deliveries = shuffle([...events, ...events, ...events].map((e) => ({ ...e, message_id: unique("msg") })))
    for (let i = 0; i < deliveries.length; i += 10) {
      const result = await deliver("factline-events", deliveries.slice(i, i + 10))
      expect(result.retryMessages).toEqual([])
    }
    const expected = new Map(buyers.map((b) => [b, { spent_cents: 0, charges: 0 }]))
    for (const e of events) {
      if (e.payload.duration_s >= 60) {
        const b = expected.get(e.payload.buyer_id as string)!
        b.spent_cents += e.payload.price_cents as number
        b.charges += 1
      }
    }
    // Every relayed fact message (duplicates included) through fact-processing and projections, then the totals to the cent.
    await drain({ timeoutMs: 90_000 })
    for (const buyer of buyers) {
      expect(await budget("tenant-a", buyer)).toEqual({ ...expected.get(buyer)!, refunds: 0 })
    }
    const { results } = await env.DB.prepare("SELECT call_id, buyer_id, duration_s, qualified, charged_cents FROM calls WHERE tenant_id = 'tenant-a' AND call_id LIKE ?")
      .bind(`${run}_call_%`).all<Record<string, any>>()
    expect(results).toHaveLength(200)
    for (const e of events) {
      const row = results.find((r) => r.call_id === e.payload.call_id)
      const qualified = (e.payload.duration_s as number) >= 60
      expect(row).toEqual({
        call_id: e.payload.call_id, buyer_id: e.payload.buyer_id, duration_s: e.payload.duration_s,
        qualified: qualified ? 1 : 0, charged_cents: qualified ? e.payload.price_cents : 0
      })
    }
  }, 180_000)

  it("a relay that dies after sending re-sends on redelivery, and no projection changes", async () => {
    const buyer = unique("buyer")
    const event = callCompleted({}, { buyer_id: buyer, duration_s: 120, price_cents: 777, currency: "USD" })
    const counts = newCounts()
    const counted = CountingBindings.env(testEnv, counts)
    // First delivery: appended and sent, but the worker "dies" before the ack — the queue redelivers it.
    await deliver("factline-events", [event], counted)
    const redelivered = await deliver("factline-events", [{ ...event, message_id: unique("msg") }], counted)
    expect(redelivered.explicitAcks).toHaveLength(1)
    // The redelivery appended nothing and sent the stored outcome again, to both destinations.
    expect(counts.queueSends).toBe(4)
    expect((await readStream("tenant-a", event.subject)).facts.map((f) => f.type)).toEqual(["outcome"])
    // Both sends' fact messages through fact-processing and projections.
    await drain()
    expect(await budget("tenant-a", buyer)).toEqual({ spent_cents: 777, charges: 1, refunds: 0 })
    expect(await callRow("tenant-a", event.subject)).toEqual({
      call_id: event.subject, buyer_id: buyer, duration_s: 120, currency: "USD", qualified: 1, charged_cents: 777, refunded_cents: 0
    })
    expect((await readStream("tenant-a", event.subject)).facts.map((f) => f.type)).toEqual(["outcome", "qualification", "charge"])
    const copies = await env.DB.prepare("SELECT COUNT(*) AS n FROM facts WHERE tenant_id = 'tenant-a' AND stream = ?").bind(event.subject).first<{ n: number }>()
    expect(copies?.n).toBe(3)
  })

  it("when the queues refuse the relay, the facts are handed to their shard and the message is acked; the shard's alarm relays them", async () => {
    const buyer = unique("buyer")
    const event = callCompleted({}, { buyer_id: buyer, duration_s: 90, price_cents: 321, currency: "USD" })
    const down = { send: async () => { throw new Error("queue unavailable") }, sendBatch: async () => { throw new Error("queue unavailable") } }
    const result = await deliver("factline-events", [event], { ...testEnv, PROJECTIONS_QUEUE: down, FACT_PROCESSING_QUEUE: down } as PlatformEnv)
    expect(result.explicitAcks).toHaveLength(1)
    const stub = env.LEDGER.get(env.LEDGER.idFromName(await shardKeyOf("tenant-a", event.subject))) as DurableObjectStub<LedgerShard>
    const handed = await runInDurableObject(stub, (_i, state) => ({
      outbox: state.storage.sql.exec("SELECT destination FROM outbox ORDER BY destination").toArray().map((r) => r.destination),
      alarm: state.storage.getAlarm()
    }))
    expect(handed.outbox).toEqual(expect.arrayContaining(["factline-fact-processing", "factline-projections"]))
    expect(await handed.alarm).not.toBe(null)
    // The alarm relays them (the queues are back): the pipeline completes exactly.
    await runDurableObjectAlarm(stub)
    await drain()
    expect(await runInDurableObject(stub, (_i, state) => state.storage.sql.exec("SELECT COUNT(*) AS n FROM outbox").one().n)).toBe(0)
    expect(await budget("tenant-a", buyer)).toEqual({ spent_cents: 321, charges: 1, refunds: 0 })
  })

  it("when neither the queues nor the shard take the facts, the message is retried, not acked", async () => {
    const event = callCompleted()
    const down = { send: async () => { throw new Error("queue unavailable") }, sendBatch: async () => { throw new Error("queue unavailable") } }
    const ledgerDown = new Proxy(testEnv.LEDGER, {
      get(target, prop) {
        if (prop !== "get") return (target as any)[prop]?.bind?.(target) ?? (target as any)[prop]
        return (id: DurableObjectId) => {
          const real = target.get(id) as any
          return new Proxy(real, { get: (s, m) => (m === "handover" ? async () => { throw new Error("shard unreachable") } : s[m]) })
        }
      }
    })
    const result = await deliver("factline-events", [event], { ...testEnv, PROJECTIONS_QUEUE: down, FACT_PROCESSING_QUEUE: down, LEDGER: ledgerDown } as PlatformEnv)
    expect(result.explicitAcks).toHaveLength(0)
    expect(result.retryMessages).toHaveLength(1)
    // The fact is durable; the redelivery (queues back) re-sends it.
    const again = await deliver("factline-events", [event])
    expect(again.explicitAcks).toHaveLength(1)
    expect((await readStream("tenant-a", event.subject)).facts.map((f) => f.type)).toEqual(["outcome"])
  })

  it("a fact message carries a whole batch's facts; a fact that fails permanently inside it is dead-lettered alone", async () => {
    const good = await Promise.all([1, 2, 3].map(() => storedFact(unique("probe"), 1, "probe", { refuse: false })))
    const bad = await storedFact(unique("probe"), 1, "probe", { refuse: true })
    const message = FactMessage.make([good[0]!, bad, ...good.slice(1)])
    const result = await deliver("factline-fact-processing", [message])
    expect(result.explicitAcks).toHaveLength(1)
    expect(result.retryMessages).toHaveLength(0)
    await drain()
    const rows = await deadMessages(bad.fact_id)
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({ reason: "permanent_failure", queue: "factline-fact-processing", message_type: "fact.probe" })
    // The dead letter holds that fact alone, replayable on its own.
    expect(JSON.parse(rows[0]!.original_message).payload).toEqual({ fact: bad })
    for (const f of good) expect((await readStream("tenant-a", f.stream)).facts.map((d) => d.type)).toEqual(["probed"])
    expect((await readStream("tenant-a", bad.stream)).version).toBe(0)
  })

  it("a fact one projection cannot map is dead-lettered naming that projection, after reaching the facts copy and every other one; replayed after the fix it changes nothing", async () => {
    const buyer = unique("buyer")
    const call_id = unique("call")
    const outcome = await storedFact(call_id, 1, "outcome", { call_id, buyer_id: buyer, duration_s: 90, price_cents: 700, currency: "EUR" })
    const charge = await storedFact(call_id, 3, "charge", { call_id, buyer_id: buyer, amount_cents: 700, currency: "EUR" })
    fragileBuyers.add(buyer)
    const result = await deliver("factline-projections", [FactMessage.make([outcome, charge])])
    expect(result.retryMessages).toHaveLength(0)
    await drain()
    const rows = await deadMessages(charge.fact_id)
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({ reason: "permanent_failure", queue: "factline-projections", attempts: 1 })
    expect(rows[0]!.last_error).toContain('projection "fragile"')
    expect(JSON.parse(rows[0]!.original_message).payload).toEqual({ fact: charge })
    const copies = async () =>
      (await env.DB.prepare("SELECT COUNT(*) AS n FROM facts WHERE tenant_id = 'tenant-a' AND stream = ?").bind(call_id).first<{ n: number }>())?.n
    expect(await copies()).toBe(2)
    expect(await callRow("tenant-a", call_id)).toMatchObject({ buyer_id: buyer, charged_cents: 700 })
    expect(await budget("tenant-a", buyer)).toEqual({ spent_cents: 700, charges: 1, refunds: 0 })

    // The operator fixes the projection and replays the dead letter's original message.
    fragileBuyers.delete(buyer)
    const replay = await deliver("factline-projections", [JSON.parse(rows[0]!.original_message)])
    expect(replay.explicitAcks).toHaveLength(1)
    expect(await copies()).toBe(2)
    expect(await budget("tenant-a", buyer)).toEqual({ spent_cents: 700, charges: 1, refunds: 0 })
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM dead_messages WHERE idempotency_key = ?").bind(charge.fact_id).first<{ n: number }>()).toEqual({ n: 1 })
  })

  it("a stream's facts applied in reverse order give the same rows as in order", async () => {
    const build = async (call_id: string, buyer: string) => [
      await storedFact(call_id, 1, "outcome", { call_id, buyer_id: buyer, duration_s: 90, price_cents: 500, currency: "EUR" }),
      await storedFact(call_id, 2, "qualification", { call_id, qualified: true }),
      await storedFact(call_id, 3, "charge", { call_id, buyer_id: buyer, amount_cents: 500, currency: "EUR" }),
      await storedFact(call_id, 4, "refund", { call_id, buyer_id: buyer, amount_cents: 500, currency: "EUR" })
    ]
    const inOrder = { call: unique("call"), buyer: unique("buyer") }
    const reversed = { call: unique("call"), buyer: unique("buyer") }
    for (const f of await build(inOrder.call, inOrder.buyer)) await deliver("factline-projections", [FactMessage.make(f)])
    const backwards = (await build(reversed.call, reversed.buyer)).reverse()
    for (const f of backwards) await deliver("factline-projections", [FactMessage.make(f)])
    // and everything again, all in one batch, to show re-application changes nothing
    await deliver("factline-projections", backwards.map((f) => FactMessage.make(f)))
    const a = await callRow("tenant-a", inOrder.call)
    const b = await callRow("tenant-a", reversed.call)
    expect({ ...b, call_id: "x", buyer_id: "y" }).toEqual({ ...a, call_id: "x", buyer_id: "y" })
    expect(a).toMatchObject({ duration_s: 90, qualified: 1, charged_cents: 500, refunded_cents: 500 })
    expect(await budget("tenant-a", reversed.buyer)).toEqual(await budget("tenant-a", inOrder.buyer))
    expect(await budget("tenant-a", inOrder.buyer)).toEqual({ spent_cents: 0, charges: 1, refunds: 1 })
  })

  it("a fact re-delivered to the processor appends nothing new", async () => {
    const call_id = unique("call")
    const outcome = await storedFact(call_id, 1, "outcome", { call_id, buyer_id: "b", duration_s: 61, price_cents: 10, currency: "USD" })
    await deliver("factline-fact-processing", [FactMessage.make(outcome)])
    // No inbox on this queue: the ledger's deterministic fact ids are what refuse the duplicates.
    await deliver("factline-fact-processing", [FactMessage.make(outcome)])
    const result = await deliver("factline-fact-processing", [FactMessage.make(outcome), FactMessage.make([outcome])])
    expect(result.explicitAcks).toHaveLength(2)
    const stream = await readStream("tenant-a", call_id)
    expect(stream.facts.map((f) => [f.type, f.causation_id, f.caused_by])).toEqual([
      ["qualification", outcome.fact_id, "qualify-call"],
      ["charge", outcome.fact_id, "qualify-call"]
    ])
    expect(stream.facts.every((f) => f.correlation_id === outcome.correlation_id)).toBe(true)
  })

  it("replayed facts are never processed", async () => {
    const call_id = unique("call")
    const outcome = await storedFact(call_id, 1, "outcome", { call_id, buyer_id: "b", duration_s: 600, price_cents: 10, currency: "USD" })
    const result = await deliver("factline-fact-processing", [FactMessage.make(outcome, { replayed: true })])
    expect(result.explicitAcks).toHaveLength(1)
    expect((await readStream("tenant-a", call_id)).version).toBe(0)
  })

  it("a dispute on a charged call refunds once however often it is sent; on an unqualified call it is rejected with a reason", async () => {
    const buyer = unique("buyer")
    const charged = callCompleted({}, { buyer_id: buyer, duration_s: 90, price_cents: 1234 })
    const unqualified = callCompleted({}, { buyer_id: buyer, duration_s: 12, price_cents: 99 })
    expect((await postEvents({ events: [charged, unqualified] })).status).toBe(202)
    await drain()
    expect((await readStream("tenant-a", charged.subject)).facts.map((f) => f.type)).toEqual(["outcome", "qualification", "charge"])
    expect((await readStream("tenant-a", unqualified.subject)).facts.map((f) => f.type)).toEqual(["outcome", "qualification"])

    const dispute = (call_id: string, key: string) => ({
      schema_version: 1, message_type: "call.dispute", idempotency_key: key, subject: call_id, payload: { call_id, reason: "bad line" }
    })
    const key = unique("dispute")
    for (let i = 0; i < 3; i++) expect((await postEvents(dispute(charged.subject, key))).status).toBe(202)
    const onUnqualified = dispute(unqualified.subject, unique("dispute"))
    expect((await postEvents(onUnqualified)).status).toBe(202)
    await drain()
    expect((await readStream("tenant-a", charged.subject)).facts.map((f) => f.type)).toContain("refund")
    // A second, different dispute after the refund is rejected as already refunded.
    const second = dispute(charged.subject, unique("dispute"))
    expect((await postEvents(second)).status).toBe(202)
    await drain()

    // The calls module's facts (the crm module's CRM sync appends its own to the call's stream: crm-sync.workers.test.ts).
    const types = (await readStream("tenant-a", charged.subject)).facts.filter((f) => !f.type.startsWith("crm_")).map((f) => [f.type, f.data.why ?? null])
    expect(types).toEqual([["outcome", null], ["qualification", null], ["charge", null], ["refund", null], ["dispute_rejected", "already_refunded"]])
    const other = (await readStream("tenant-a", unqualified.subject)).facts
    expect(other.map((f) => [f.type, f.data.why ?? null])).toEqual([["outcome", null], ["qualification", null], ["dispute_rejected", "not_charged"]])
    expect(await budget("tenant-a", buyer)).toEqual({ spent_cents: 0, charges: 1, refunds: 1 })
  }, 120_000)

  it("D1 round trips per projections batch stay constant as the batch grows", async () => {
    const measure = async (size: number) => {
      const counts = newCounts()
      const instrumented = { ...testEnv, DB: countingD1(testEnv.DB, counts), LEDGER: countingNamespace(testEnv.LEDGER, counts) }
      const facts = await Promise.all(Array.from({ length: size }, (_, i) => {
        const call_id = unique("call")
        return storedFact(call_id, 3, "charge", { call_id, buyer_id: `rt_${size}`, amount_cents: 1, currency: "USD" })
      }))
      const result = await deliver("factline-projections", facts.map((f) => FactMessage.make(f)), instrumented)
      expect(result.explicitAcks).toHaveLength(size)
      return counts
    }
    await measure(1) // the isolate learns tenant-a's placement (one platform round trip, then cached)
    const ten = await measure(10)
    const hundred = await measure(100)
    expect(hundred.d1RoundTrips).toBe(ten.d1RoundTrips)
    // Running rebuilds, then one transaction with every write, then the batch's metrics rollup (one upsert).
    expect(hundred.d1RoundTrips).toBe(3)
    expect(await budget("tenant-a", "rt_100")).toMatchObject({ charges: 100, spent_cents: 100 })
  })

  it("D1 round trips and ledger RPCs per fact-processing batch stay constant as the batch grows", async () => {
    const measure = async (size: number, streams: number) => {
      const counts = newCounts()
      const instrumented = CountingBindings.env(testEnv, counts)
      const subjects = Array.from({ length: streams }, () => unique("call"))
      const facts = await Promise.all(Array.from({ length: size }, (_, i) =>
        storedFact(subjects[i % streams]!, Math.floor(i / streams) + 1, "outcome", { call_id: subjects[i % streams], buyer_id: "b", duration_s: 90, price_cents: 1, currency: "USD" })))
      const result = await deliver("factline-fact-processing", [FactMessage.make(facts)], instrumented)
      expect(result.explicitAcks).toHaveLength(1)
      const derived = await Promise.all(subjects.map((s) => readStream("tenant-a", s)))
      expect(derived.reduce((n, s) => n + s.facts.filter((f) => f.type === "charge").length, 0)).toBe(size)
      const shards = new Set(await Promise.all(subjects.map((s) => shardKeyOf("tenant-a", s)))).size
      return { counts, shards }
    }
    const ten = await measure(10, 5)
    const hundred = await measure(100, 5)
    expect(hundred.counts.d1RoundTrips).toBe(ten.counts.d1RoundTrips)
    expect(hundred.counts.d1RoundTrips).toBeLessThanOrEqual(3)
    // One ledger RPC per shard touched; one send per destination: projections, webhooks (charge is published as
    // charge.created) and fact-processing (a qualification starts the crm module's CRM sync; charge has no listener
    // there). Starting that workflow adds no D1 round trip to the batch (the instance records itself).
    expect(ten.counts.doRpcs).toBe(ten.shards)
    expect(hundred.counts.doRpcs).toBe(hundred.shards)
    expect([ten.counts.queueSends, hundred.counts.queueSends]).toEqual([3, 3])
  })
})
