import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { Effect } from "effect"
import { FactId, Ledger, LedgerProtocol, LedgerTopology, Maintenance, Shards, Sql } from "@factline/core/runtime"
import type { LedgerShard, PlatformEnv } from "@factline/workers"
import { drain } from "./Drain.js"
import { ledger, unique } from "./helpers.js"
import { platform } from "./worker.js"

const draft = async (cause: string, position: number, data: Record<string, unknown>, tenantId = "tenant-a"): Promise<LedgerProtocol.FactDraft> => ({
  fact_id: await FactId.make({ tenantId, cause, decidedBy: "test", position }),
  type: "noted",
  data,
  causation_id: cause,
  correlation_id: cause,
  caused_by: "test",
  created_at: new Date().toISOString()
})

/** A LedgerShard of its own, addressed directly by a shard key no tenant's topology uses. */
const ownShard = () => {
  const key = `tenant-a/#${unique("test")}`
  const stub = env.LEDGER.get(env.LEDGER.idFromName(key))
  return { key, stub: stub as DurableObjectStub<LedgerShard>, rpc: stub as unknown as LedgerProtocol.LedgerShardRpc }
}

const storage = (stub: DurableObjectStub<LedgerShard>) =>
  runInDurableObject(stub, (_instance, state) => {
    const tables = state.storage.sql.exec<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table'").toArray().map((t) => t.name)
    return {
      tables,
      facts: tables.includes("facts") ? state.storage.sql.exec("SELECT stream, fact_id, sequence FROM facts ORDER BY stream, sequence").toArray() : [],
      outbox: tables.includes("outbox") ? state.storage.sql.exec("SELECT fact_id, destination FROM outbox ORDER BY id").toArray() : []
    }
  })

describe("LedgerShard", () => {
  it("holds many streams, each with its own gap-free sequence; an append writes facts only — no outbox row, no alarm", async () => {
    const { stub, rpc } = ownShard()
    const [a, b] = [unique("s"), unique("s")]
    const results = await rpc.append([
      { tenant_id: "tenant-a", stream: a, facts: [await draft(unique("c"), 0, { n: 1 }), await draft(unique("c"), 0, { n: 2 })] },
      { tenant_id: "tenant-a", stream: b, facts: [await draft(unique("c"), 0, { n: 3 })] }
    ])
    expect(results.map((r) => [r.status, "version" in r ? r.version : null])).toEqual([["appended", 2], ["appended", 1]])
    const stored = await storage(stub)
    expect(stored.facts.map((f) => [f.stream, f.sequence])).toEqual([[a, 1], [a, 2], [b, 1]].sort((x, y) => String(x[0]).localeCompare(String(y[0]))))
    expect(stored.outbox).toEqual([])
    expect(await runInDurableObject(stub, (_i, state) => state.storage.getAlarm())).toBe(null)
    // The first append records the shard's tenant, once.
    await rpc.append([{ tenant_id: "tenant-a", stream: a, facts: [await draft(unique("c"), 0, { n: 4 })] }])
    expect(await runInDurableObject(stub, (_i, state) => state.storage.sql.exec("SELECT key, value FROM meta").toArray())).toEqual([{ key: "tenant_id", value: "tenant-a" }])
    const read = await rpc.read({ tenant_id: "tenant-a", stream: b })
    expect(read.facts.map((f) => f.data)).toEqual([{ n: 3 }])
  })

  it("reading a stream, a shard or an unknown tenant creates no storage", async () => {
    const { stub, rpc } = ownShard()
    expect(await rpc.read({ tenant_id: "tenant-a", stream: unique("s") })).toMatchObject({ version: 0, facts: [] })
    expect(await rpc.readShard(undefined, 100)).toEqual([])
    expect((await storage(stub)).tables).toEqual([])
    // A tenant that never appended has no shards: the read answers without reaching a Durable Object.
    const tenant = unique("nobody").replace(/_/g, "-")
    const state = await Effect.runPromise(ledger().read({ tenant_id: tenant, stream: "x" }))
    expect(state).toEqual({ tenant_id: tenant, stream: "x", version: 0, facts: [] })
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM ledger_tenants WHERE tenant_id = ?").bind(tenant).first("n")).toBe(0)
  })

  it("re-appending the same facts is a no-op that returns the stored facts", async () => {
    const { stub, rpc } = ownShard()
    const stream = unique("s")
    const facts = [await draft(unique("c"), 0, { a: 1, b: { c: [1, 2] } })]
    const [first] = await rpc.append([{ tenant_id: "tenant-a", stream, facts }])
    // The shard answers an append with the new version only: its facts are the drafts sent, numbered (toResult).
    expect(first).toEqual({ status: "appended", version: 1 })
    const stored = LedgerProtocol.toResult({ tenant_id: "tenant-a", stream, facts }, first as Exclude<LedgerProtocol.AppendAnswer, LedgerProtocol.ShardRefusal>)
    expect(stored).toMatchObject({ facts: [{ ...facts[0], tenant_id: "tenant-a", stream, sequence: 1, schema_version: 1 }] })
    expect((await rpc.read({ tenant_id: "tenant-a", stream })).facts).toEqual("facts" in stored ? stored.facts : [])
    // Same body with its keys in another order is the same fact: a duplicate answers with the stored facts.
    const [again] = await rpc.append([{ tenant_id: "tenant-a", stream, facts: [{ ...facts[0]!, data: { b: { c: [1, 2] }, a: 1 } }] }])
    expect(again).toEqual({ ...stored, status: "duplicate" })
    expect((await storage(stub)).facts).toHaveLength(1)
  })

  it("a fact id that exists with a different body is an idempotency conflict", async () => {
    const { stub, rpc } = ownShard()
    const stream = unique("s")
    const fact = await draft(unique("c"), 0, { amount: 1 })
    await rpc.append([{ tenant_id: "tenant-a", stream, facts: [fact] }])
    const [conflict] = await rpc.append([{ tenant_id: "tenant-a", stream, facts: [{ ...fact, data: { amount: 2 } }] }])
    expect(conflict).toMatchObject({ status: "idempotency_conflict", fact_id: fact.fact_id })
    expect((await storage(stub)).facts).toHaveLength(1)
  })

  it("expected_version guards a stream; each group of a call is atomic on its own", async () => {
    const { stub, rpc } = ownShard()
    const stream = unique("s")
    const results = await rpc.append([
      { tenant_id: "tenant-a", stream, expected_version: 0, facts: [await draft("c4", 0, {})] },
      { tenant_id: "tenant-a", stream, expected_version: 0, facts: [await draft("c5", 0, {})] },
      { tenant_id: "tenant-a", stream, expected_version: 1, facts: [await draft("c6", 0, {})] }
    ])
    expect(results.map((r) => r.status)).toEqual(["appended", "version_conflict", "appended"])
    expect(results[1]).toMatchObject({ version: 1, expected_version: 0 })
    const read = await rpc.read({ tenant_id: "tenant-a", stream }, { after: 1, limit: 10 })
    expect(read.facts.map((f) => [f.sequence, f.causation_id])).toEqual([[2, "c6"]])
  })

  it("one call's groups are judged in turn against what the groups before them appended, and every field reads back as sent", async () => {
    const { stub, rpc } = ownShard()
    // Stream names and data that need escaping in the call's JSON parameters.
    const stream = `${unique("s")} "quoted" 'ü' \\ \n end`
    const other = unique("s")
    const traced = { ...(await draft(unique("c"), 0, { text: "ü \"x\" \u2028", nested: { list: [1, 2.5, null, true] } })), traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", schema_version: 2 }
    const plain = await draft(unique("c"), 0, { n: 1 })
    const results = await rpc.append([
      { tenant_id: "tenant-a", stream, facts: [traced] },
      { tenant_id: "tenant-a", stream: other, facts: [plain] },
      // The same decision again within the call: a duplicate of what the first group appended.
      { tenant_id: "tenant-a", stream, facts: [{ ...traced, data: { nested: { list: [1, 2.5, null, true] }, text: "ü \"x\" \u2028" } }] },
      // Part of it plus a new fact: the same cause deciding a different set.
      { tenant_id: "tenant-a", stream, facts: [traced, await draft(unique("c"), 0, {})] },
      // The first group's append moved the stream to version 1.
      { tenant_id: "tenant-a", stream, expected_version: 1, facts: [await draft(unique("c"), 0, { n: 2 })] }
    ])
    expect(results.map((r) => r.status)).toEqual(["appended", "appended", "duplicate", "idempotency_conflict", "appended"])
    expect(results[2]).toEqual({ status: "duplicate", version: 1, facts: [{ ...traced, tenant_id: "tenant-a", stream, sequence: 1 }] })
    expect(results[4]).toMatchObject({ version: 2 })
    const read = await rpc.read({ tenant_id: "tenant-a", stream })
    expect(read.version).toBe(2)
    expect(read.facts[0]).toEqual({ ...traced, tenant_id: "tenant-a", stream, sequence: 1 })
    expect(read.facts[1]).toMatchObject({ sequence: 2, data: { n: 2 } })
    expect((await rpc.read({ tenant_id: "tenant-a", stream: other })).facts).toEqual([{ ...plain, tenant_id: "tenant-a", stream: other, sequence: 1, schema_version: 1 }])
    expect((await storage(stub)).facts).toHaveLength(3)
  })

  it("a call whose facts together pass the 2 MB a Durable Object allows per value is written whole, each fact within it", async () => {
    const { stub, rpc } = ownShard()
    const stream = unique("s")
    // Six facts of ≈ 600 KB each: ≈ 3.6 MB in one call, more than one bound value may hold.
    const big = (i: number) => ({ blob: `${i}`.repeat(1).padEnd(600_000, "é") })
    const facts = await Promise.all([0, 1, 2, 3, 4, 5].map((i) => draft(unique("c"), 0, big(i))))
    const results = await rpc.append([
      { tenant_id: "tenant-a", stream, facts: facts.slice(0, 3) },
      { tenant_id: "tenant-a", stream, facts: facts.slice(3) }
    ])
    expect(results).toEqual([{ status: "appended", version: 3 }, { status: "appended", version: 6 }])
    // The same call again: every fact found, nothing written twice.
    const again = await rpc.append([{ tenant_id: "tenant-a", stream, facts: facts.slice(0, 3) }, { tenant_id: "tenant-a", stream, facts: facts.slice(3) }])
    expect(again.map((r) => r.status)).toEqual(["duplicate", "duplicate"])
    const read = await rpc.read({ tenant_id: "tenant-a", stream })
    expect(read.facts.map((f) => [f.sequence, (f.data as { blob: string }).blob.length, (f.data as { blob: string }).blob[0]])).toEqual([0, 1, 2, 3, 4, 5].map((i) => [i + 1, 600_000, `${i}`]))
    expect((await storage(stub)).facts).toHaveLength(6)
  })

  it("handed-over facts are relayed by the alarm: with backoff while the queues are down, and the sweep re-arms a stale shard", async () => {
    const { key, stub, rpc } = ownShard()
    const stream = unique("s")
    const fact = await draft(unique("c"), 0, { a: 1 })
    await rpc.append([{ tenant_id: "tenant-a", stream, facts: [fact] }])
    const before = Date.now()
    expect(await rpc.handover([{ fact_id: fact.fact_id, destinations: ["factline-projections", "factline-fact-processing"] }], key)).toBe(2)
    // Handing over twice writes nothing new.
    expect(await rpc.handover([{ fact_id: fact.fact_id, destinations: ["factline-projections"] }], key)).toBe(0)
    const alarm = await runInDurableObject(stub, (_i, state) => state.storage.getAlarm())
    expect(alarm! - before).toBeLessThanOrEqual(2_000)

    // The queues are down for this object: the alarm's relay fails, keeps the rows and re-arms with backoff.
    const failed = await runInDurableObject(stub, async (instance, state) => {
      const realEnv = (instance as any).env as PlatformEnv
      const down = { send: async () => { throw new Error("queue unavailable") }, sendBatch: async () => { throw new Error("queue unavailable") } }
      ;(instance as any).env = { ...realEnv, PROJECTIONS_QUEUE: down, FACT_PROCESSING_QUEUE: down }
      const at = Date.now()
      await instance.alarm()
      const next = await state.storage.getAlarm()
      ;(instance as any).env = realEnv
      return { outbox: state.storage.sql.exec("SELECT COUNT(*) AS n FROM outbox").one().n, alarmInMs: next === null ? null : next - at }
    })
    expect(failed.outbox).toBe(2)
    expect(failed.alarmInMs).toBeGreaterThanOrEqual(0)
    expect(failed.alarmInMs).toBeLessThanOrEqual(2_000)
    const pending = await env.DB.prepare("SELECT relay_pending_since FROM ledger_shards WHERE shard_key = ?").bind(key).first<{ relay_pending_since: string }>()
    expect(pending?.relay_pending_since).toEqual(expect.any(String))

    // Pretend the alarm was lost long ago: the sweep finds the stale shard and re-arms it.
    await runInDurableObject(stub, (_i, state) => state.storage.deleteAlarm())
    await env.DB.prepare("UPDATE ledger_shards SET relay_pending_since = '2000-01-01T00:00:00.000Z' WHERE shard_key = ?").bind(key).run()
    expect(await platform.runtime(env as unknown as PlatformEnv).runPromise(Maintenance.sweepStaleRelays())).toBeGreaterThanOrEqual(1)
    expect(await runDurableObjectAlarm(stub)).toBe(true)
    expect((await storage(stub)).outbox).toEqual([])
    const cleared = await env.DB.prepare("SELECT relay_pending_since FROM ledger_shards WHERE shard_key = ?").bind(key).first<{ relay_pending_since: string | null }>()
    expect(cleared?.relay_pending_since).toBe(null)
    await drain()
    expect(await env.DB.prepare("SELECT 1 AS ok FROM facts WHERE tenant_id = 'tenant-a' AND fact_id = ?").bind(fact.fact_id).first()).toEqual({ ok: 1 })
  })
})

describe("hashed shards", () => {
  it("a tenant's shard count is recorded when it is first seen and kept (only a reshard raises it); all its shards are registered", async () => {
    const tenant = unique("t").replace(/_/g, "-")
    const four = LedgerTopology.make(Sql.make("platform", env.DB), 4)
    expect(await Effect.runPromise(four.register([tenant]))).toEqual(new Map([[tenant, { shards: 4 }]]))
    // Another isolate configured differently (a fresh cache per binding object) still sees 4.
    const sixteen = LedgerTopology.make(Sql.make("platform", { ...env.DB, prepare: env.DB.prepare.bind(env.DB), batch: env.DB.batch.bind(env.DB) } as D1Database), 16)
    expect(await Effect.runPromise(sixteen.register([tenant]))).toEqual(new Map([[tenant, { shards: 4 }]]))
    const shards = await env.DB.prepare("SELECT shard_key FROM ledger_shards WHERE tenant_id = ? ORDER BY shard_key").bind(tenant).all<{ shard_key: string }>()
    expect(shards.results.map((r) => r.shard_key)).toEqual([0, 1, 2, 3].map((i) => Shards.shardKey(tenant, i)))
  })

  it("streams spread over the tenant's shards, and each stream reads back only its own facts", async () => {
    const tenant = unique("t").replace(/_/g, "-")
    const live = Ledger.make(env.LEDGER, LedgerTopology.make(Sql.make("platform", env.DB), 4))
    const streams = Array.from({ length: 40 }, () => unique("s"))
    const groups = await Promise.all(streams.map(async (stream) => ({ tenant_id: tenant, stream, facts: [await draft(stream, 0, { stream }, tenant)] })))
    const results = await Effect.runPromise(live.append(groups))
    expect(results.every((r) => r.status === "appended")).toBe(true)
    expect(new Set(streams.map((s) => Shards.shardOf({ tenant_id: tenant, stream: s }, 4))).size).toBe(4)
    const states = await Effect.runPromise(live.readStreams(streams.map((stream) => ({ tenant_id: tenant, stream }))))
    expect(states.map((s) => s.facts.map((f) => f.data.stream))).toEqual(streams.map((s) => [s]))
  })
})
