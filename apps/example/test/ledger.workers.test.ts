import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { FactId, LedgerStorage, type LedgerProtocol } from "@factline/core"
import { type LedgerShard, type PlatformEnv, sweepStaleRelays } from "@factline/workers"
import { eventually, shard, unique } from "./helpers.js"

const draft = async (cause: string, position: number, data: Record<string, unknown>): Promise<LedgerProtocol.FactDraft> => ({
  fact_id: await FactId.make({ tenantId: "tenant-a", cause, decidedBy: "test", position }),
  type: "noted",
  data,
  causation_id: cause,
  correlation_id: cause,
  caused_by: "test",
  created_at: new Date().toISOString()
})

const rows = (stream: string) => {
  const stub = env.LEDGER.get(env.LEDGER.idFromName(`tenant-a/${stream}`)) as DurableObjectStub<LedgerShard>
  return runInDurableObject(stub, (_instance, state) => ({
    facts: state.storage.sql.exec("SELECT fact_id, sequence FROM facts ORDER BY sequence").toArray(),
    outbox: state.storage.sql.exec("SELECT fact_id, destination FROM outbox ORDER BY id").toArray()
  }))
}

describe("LedgerShard", () => {
  it("appends facts and their outbox rows together, with gap-free sequences", async () => {
    const stream = unique("s")
    const facts = [await draft("c1", 0, { a: 1 }), await draft("c1", 1, { a: 2 })]
    const stub = env.LEDGER.get(env.LEDGER.idFromName(`tenant-a/${stream}`)) as DurableObjectStub<LedgerShard>
    // Look at storage in the same synchronous step as the append, before the relay alarm can drain the outbox.
    const stored = await runInDurableObject(stub, (_instance, state) => {
      const result = LedgerStorage.make(state.storage).append({ tenant_id: "tenant-a", stream, facts })
      return {
        result,
        facts: state.storage.sql.exec("SELECT fact_id, sequence FROM facts ORDER BY sequence").toArray(),
        outbox: state.storage.sql.exec("SELECT fact_id, destination FROM outbox ORDER BY id").toArray()
      }
    })
    expect(stored.result).toMatchObject({ status: "appended", version: 2 })
    expect(stored.facts.map((r) => r.sequence)).toEqual([1, 2])
    expect(stored.outbox).toEqual(facts.flatMap((f) => [
      { fact_id: f.fact_id, destination: "factline-projections" },
      { fact_id: f.fact_id, destination: "factline-fact-processing" }
    ]))
  })

  it("an append relays its outbox downstream and then empties it", async () => {
    const stream = unique("s")
    const ledger = shard("tenant-a", stream)
    const [fact] = [await draft(unique("c"), 0, { a: 1 })]
    await ledger.append([{ tenant_id: "tenant-a", stream, facts: [fact] }])
    await eventually(async () => ((await rows(stream)).outbox.length === 0 ? true : undefined), 10_000, "the relay")
    const copied = await eventually(() =>
      env.DB.prepare("SELECT * FROM facts WHERE tenant_id = 'tenant-a' AND fact_id = ?").bind(fact.fact_id).first<Record<string, any>>().then((r) => r ?? undefined)
    )
    expect(copied).toMatchObject({ stream, sequence: 1, type: "noted", body: JSON.stringify({ a: 1 }) })
    // Nothing failed, so nothing was marked pending and no alarm is left behind.
    const pending = await env.DB.prepare("SELECT * FROM ledger_shards WHERE shard_key = ? AND relay_pending_since IS NOT NULL").bind(`tenant-a/${stream}`).first()
    expect(pending).toBe(null)
    const stub = env.LEDGER.get(env.LEDGER.idFromName(`tenant-a/${stream}`)) as DurableObjectStub<LedgerShard>
    expect(await runInDurableObject(stub, (_i, state) => state.storage.getAlarm())).toBe(null)
  })

  it("re-appending the same facts is a no-op that returns the stored facts", async () => {
    const stream = unique("s")
    const facts = [await draft("c2", 0, { a: 1, b: { c: [1, 2] } })]
    const ledger = shard("tenant-a", stream)
    const [first] = await ledger.append([{ tenant_id: "tenant-a", stream, facts }])
    // Same body with its keys in another order is the same fact.
    const [again] = await ledger.append([{ tenant_id: "tenant-a", stream, facts: [{ ...facts[0]!, data: { b: { c: [1, 2] }, a: 1 } }] }])
    expect(again).toEqual({ ...first, status: "duplicate" })
    expect((await rows(stream)).facts).toHaveLength(1)
  })

  it("a fact id that exists with a different body is an idempotency conflict", async () => {
    const stream = unique("s")
    const ledger = shard("tenant-a", stream)
    const fact = await draft("c3", 0, { amount: 1 })
    await ledger.append([{ tenant_id: "tenant-a", stream, facts: [fact] }])
    const [conflict] = await ledger.append([{ tenant_id: "tenant-a", stream, facts: [{ ...fact, data: { amount: 2 } }] }])
    expect(conflict).toMatchObject({ status: "idempotency_conflict", fact_id: fact.fact_id })
    expect((await rows(stream)).facts).toHaveLength(1)
  })

  it("expected_version guards a stream; each group of a call is atomic on its own", async () => {
    const stream = unique("s")
    const ledger = shard("tenant-a", stream)
    const results = await ledger.append([
      { tenant_id: "tenant-a", stream, expected_version: 0, facts: [await draft("c4", 0, {})] },
      { tenant_id: "tenant-a", stream, expected_version: 0, facts: [await draft("c5", 0, {})] },
      { tenant_id: "tenant-a", stream, expected_version: 1, facts: [await draft("c6", 0, {})] }
    ])
    expect(results.map((r) => r.status)).toEqual(["appended", "version_conflict", "appended"])
    expect(results[1]).toMatchObject({ version: 1, expected_version: 0 })
    const read = await ledger.read({ tenant_id: "tenant-a", stream }, { after: 1, limit: 10 })
    expect(read.facts.map((f) => [f.sequence, f.causation_id])).toEqual([[2, "c6"]])
  })

  it("a failed relay keeps the rows, re-arms with backoff, and the sweep re-arms a stale shard", async () => {
    const stream = unique("s")
    const shardKey = `tenant-a/${stream}`
    const stub = env.LEDGER.get(env.LEDGER.idFromName(shardKey)) as DurableObjectStub<LedgerShard>
    const fact = await draft(unique("c"), 0, { a: 1 })
    // The queues are down for this object: every send fails.
    const failed = await runInDurableObject(stub, async (instance, state) => {
      const realEnv = (instance as any).env as PlatformEnv
      const down = { send: async () => { throw new Error("queue unavailable") }, sendBatch: async () => { throw new Error("queue unavailable") } }
      ;(instance as any).env = { ...realEnv, PROJECTIONS_QUEUE: down, FACT_PROCESSING_QUEUE: down }
      const before = Date.now()
      await instance.append([{ tenant_id: "tenant-a", stream, facts: [fact] }])
      const alarm = await state.storage.getAlarm()
      const result = {
        outbox: state.storage.sql.exec("SELECT COUNT(*) AS n FROM outbox").one().n,
        alarmInMs: alarm === null ? null : alarm - before
      }
      ;(instance as any).env = realEnv
      return result
    })
    expect(failed.outbox).toBe(2)
    // First failure: retry after about 1 s, not the 30 s safety alarm.
    expect(failed.alarmInMs).toBeGreaterThanOrEqual(0)
    expect(failed.alarmInMs).toBeLessThanOrEqual(2_000)
    const pending = await env.DB.prepare("SELECT relay_pending_since FROM ledger_shards WHERE shard_key = ?").bind(shardKey).first<{ relay_pending_since: string }>()
    expect(pending?.relay_pending_since).toEqual(expect.any(String))

    // Pretend the alarm was lost long ago: the sweep finds the stale shard and re-arms it.
    await runInDurableObject(stub, (_i, state) => state.storage.deleteAlarm())
    await env.DB.prepare("UPDATE ledger_shards SET relay_pending_since = '2000-01-01T00:00:00.000Z' WHERE shard_key = ?").bind(shardKey).run()
    expect(await sweepStaleRelays(env as unknown as PlatformEnv)).toBeGreaterThanOrEqual(1)
    expect(await runDurableObjectAlarm(stub)).toBe(true)
    expect((await rows(stream)).outbox).toEqual([])
    const cleared = await env.DB.prepare("SELECT relay_pending_since FROM ledger_shards WHERE shard_key = ?").bind(shardKey).first<{ relay_pending_since: string | null }>()
    expect(cleared?.relay_pending_since).toBe(null)
    await eventually(() =>
      env.DB.prepare("SELECT 1 AS ok FROM facts WHERE tenant_id = 'tenant-a' AND fact_id = ?").bind(fact.fact_id).first().then((r) => r ?? undefined)
    )
  })
})
