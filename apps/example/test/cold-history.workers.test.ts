/**
 * Cold history (issue 39 part 1) on the real local Durable Objects and R2: a tenant's old facts are tiered from its
 * shards' SQLite to Parquet segments under `<tenant>/ledger/`, under faults — R2 refusing the write, the read back
 * failing after the object was written, the shard stopped right before its recording transaction — and every
 * reader (stream reads and pages, deciders' reads, trace by id, shard walks, recovery windows) answers exactly
 * what it answered before; a re-appended cold fact is a duplicate; a command on a mostly-cold stream gets the
 * stream's right version. Prints the bytes per fact it measures (hot, cold manifest, R2), and the rows written by
 * tiering a segment (`cursor.rowsWritten` of every statement): one per fact and one per stream run, no cold index row.
 */
import { runInDurableObject } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { Effect } from "effect"
import { Bindings, ColdHistory, FactId, type LedgerProtocol, type LedgerStorage, Maintenance, Shards } from "@factline/core/runtime"
import type { Fact } from "@factline/schemas"
import type { LedgerShard, PlatformEnv } from "@factline/workers"
import * as Faults from "./faults.js"
import { ledger, unique } from "./helpers.js"
import { platform } from "./worker.js"

const old = "2020-03-01T10:00:00.000Z"
/** A cutoff after every fact of the test: a hot window of 0 days. */
const cutoff = "2999-01-01T00:00:00.000Z"

const draft = async (tenantId: string, stream: string, n: number): Promise<LedgerProtocol.FactDraft> => ({
  fact_id: await FactId.make({ tenantId, cause: `${stream}:${n}`, decidedBy: "cold-test", position: 0 }),
  type: "noted",
  data: { n, note: `über ${n}`, padding: "x".repeat(40) },
  causation_id: `${stream}:${n}`,
  correlation_id: stream,
  caused_by: "cold-test",
  created_at: old,
  ...(n % 2 === 0 ? { traceparent: `00-${"a".repeat(32)}-${"b".repeat(16)}-01` } : {})
})

const stubOf = (shardKey: string) => env.LEDGER.get(env.LEDGER.idFromName(shardKey)) as DurableObjectStub<LedgerShard>
const rpcOf = (shardKey: string) => stubOf(shardKey) as unknown as LedgerProtocol.LedgerShardRpc

/** `count` streams of one tenant that all land on its shard #0 (16 shards). */
const streamsOnShard0 = (tenantId: string, count: number) => {
  const streams: Array<string> = []
  for (let i = 0; streams.length < count; i++) {
    const stream = `acct-${i}`
    if (Shards.shardOf({ tenant_id: tenantId, stream }, 16) === Shards.shardKey(tenantId, 0)) streams.push(stream)
  }
  return streams
}

/** Everything the readers answer for the tenant's streams and shard #0. */
const everything = async (tenantId: string, streams: ReadonlyArray<string>, ids: ReadonlyArray<string>) => {
  const live = ledger()
  const shardKey = Shards.shardKey(tenantId, 0)
  const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
  const reads: Record<string, unknown> = {}
  for (const stream of streams) {
    const key = { tenant_id: tenantId, stream }
    reads[`stream ${stream}`] = await run(live.read(key))
    for (const [after, limit] of [[0, 3], [3, 4], [6, 100], [11, 2]] as const) reads[`page ${stream} ${after}/${limit}`] = await run(live.read(key, { after, limit }))
  }
  reads.deciders = await run(live.readStreams(streams.map((stream) => ({
    tenant_id: tenantId, stream, snapshots: [{ decider: "d", version: 1, fingerprint: "f" }], decided: ids.slice(0, 3)
  }))))
  reads.shard = await run(live.readShard(shardKey))
  const windows: Array<unknown> = []
  for (let after: LedgerProtocol.ShardCursor | undefined; ;) {
    const window = await run(live.readShardSince(shardKey, after, "2020-01-01T00:00:00.000Z", 17))
    windows.push(window)
    if (window.next === undefined) break
    after = window.next
  }
  reads.recovery = windows
  reads.pages = await run(live.readShardPage(shardKey, { stream: streams[1]!, sequence: 5 }, 23))
  for (const id of ids) reads[`trace ${id}`] = await run(live.findFact(tenantId, id))
  return reads
}

const databaseSize = (shardKey: string) => runInDurableObject(stubOf(shardKey), (_i, state) => state.storage.sql.databaseSize)
const hotCount = (shardKey: string) =>
  runInDurableObject(stubOf(shardKey), (_i, state) => (state.storage.sql.exec("SELECT COUNT(*) AS n FROM facts").one() as { n: number }).n)

/** Runs `tier` inside the object with its cold history over `bucket` (and `ledger` wrapped), as a fault would meet it. */
const tierWith = (shardKey: string, wrap: { bucket?: R2Bucket; ledger?: (inner: LedgerStorage.LedgerStorage) => LedgerStorage.LedgerStorage }) =>
  runInDurableObject(stubOf(shardKey), async (instance) => {
    const shard = instance as unknown as { ledger: LedgerStorage.LedgerStorage; coldHistory?: ColdHistory.ColdHistory }
    const storage = Bindings.PayloadBucket.make(wrap.bucket ?? env.PAYLOADS)
    shard.coldHistory = ColdHistory.make(wrap.ledger ? wrap.ledger(shard.ledger) : shard.ledger, storage)
    try {
      return await instance.tier(shardKey, cutoff, 50)
    } finally {
      // The next call builds the object's own again, as a new instance would after an eviction.
      shard.coldHistory = undefined
    }
  })

const segments = async (tenantId: string) => (await env.PAYLOADS.list({ prefix: `${tenantId}/ledger/` })).objects.map((o) => o.key)

describe("cold history in R2", () => {
  it("old facts tiered under faults: every reader answers the same, nothing lost or doubled, re-appends are duplicates", async () => {
    const tenantId = unique("cold")
    const streams = streamsOnShard0(tenantId, 12)
    const live = ledger()
    const ids: Array<string> = []
    for (const stream of streams) {
      for (const from of [1, 5, 9]) {
        const facts = await Promise.all([0, 1, 2, 3].map((i) => draft(tenantId, stream, from + i)))
        ids.push(...facts.map((f) => f.fact_id))
        const [outcome] = await Effect.runPromise(live.append([{ tenant_id: tenantId, stream, facts }]))
        expect(outcome!.status).toBe("appended")
      }
    }
    const shardKey = Shards.shardKey(tenantId, 0)
    const total = streams.length * 12
    expect(await hotCount(shardKey)).toBe(total)
    const sizeHot = await databaseSize(shardKey)
    const before = await everything(tenantId, streams, ids)

    // R2 refusing the write: nothing is recorded, every fact stays hot.
    await expect(tierWith(shardKey, { bucket: Faults.refusingPuts(env.PAYLOADS, (key) => key.includes("/ledger/")) })).rejects.toThrow(/refused/)
    expect(await hotCount(shardKey)).toBe(total)
    // The object written, the read back failing (an eviction between the steps): an unrecorded object, every fact hot.
    const failingReads = new Proxy(env.PAYLOADS, {
      get: (target, prop) => prop === "get" ? () => Promise.reject(new Error("injected fault: R2 get refused")) : (target as any)[prop].bind(target)
    })
    await expect(tierWith(shardKey, { bucket: failingReads })).rejects.toThrow(/refused/)
    expect(await segments(tenantId)).toHaveLength(1)
    expect(await hotCount(shardKey)).toBe(total)
    // Written and verified, the shard stopped right before its one transaction: nothing recorded, nothing deleted.
    await expect(tierWith(shardKey, {
      ledger: (inner) => ({ ...inner, cold: { ...inner.cold, record: () => { throw new Error("injected fault: shard evicted") } } })
    })).rejects.toThrow(/evicted/)
    expect(await hotCount(shardKey)).toBe(total)
    expect(await rpcOf(shardKey).coldStats()).toMatchObject({ segments: 0, facts: 0 })

    // Then the shard tiers its facts, a chunk per call, until the walk finds nothing more.
    let moved = 0
    for (let i = 0; i < 20; i++) {
      const result = await rpcOf(shardKey).tier(shardKey, cutoff, 50)
      moved += result.tiered
      if (result.tiered === 0 && result.wrapped) break
    }
    expect(moved).toBe(total)
    expect(await hotCount(shardKey)).toBe(0)
    const stats = await rpcOf(shardKey).coldStats()
    expect(stats).toMatchObject({ facts: total, oldest: old, newest: old })
    // Every segment is under the tenant's prefix (its deletion removes them); the object the faults left unrecorded was
    // the first chunk's, named by its content: recorded since under the same key, no orphan is left.
    expect((await segments(tenantId)).length).toBe(stats.segments)
    const sizeCold = await databaseSize(shardKey)

    // Every reader answers what it did, from a fresh object's point of view too (no segment cached).
    expect(await everything(tenantId, streams, ids)).toEqual(before)

    // A redelivered decision of cold facts is a duplicate answering the stored facts; nothing is appended.
    const stream = streams[0]!
    const again = await Promise.all([5, 6, 7, 8].map((n) => draft(tenantId, stream, n)))
    const [duplicate] = await Effect.runPromise(live.append([{ tenant_id: tenantId, stream, facts: again }]))
    expect(duplicate).toEqual({ status: "duplicate", version: 12, facts: ((before[`stream ${stream}`] as { facts: Array<Fact> }).facts).slice(4, 8) })
    // A decider's command on the cold stream: the expected version is the stream's, counted from the manifest.
    const next = [await draft(tenantId, stream, 13)]
    const [stale] = await Effect.runPromise(live.append([{ tenant_id: tenantId, stream, expected_version: 0, facts: next }]))
    expect(stale).toMatchObject({ status: "version_conflict", version: 12 })
    const [appended] = await Effect.runPromise(live.append([{ tenant_id: tenantId, stream, expected_version: 12, facts: next }]))
    expect(appended).toMatchObject({ status: "appended", version: 13 })
    const read = await Effect.runPromise(live.read({ tenant_id: tenantId, stream }))
    expect(read.facts.map((f) => f.sequence)).toEqual(Array.from({ length: 13 }, (_, i) => i + 1))
    expect(new Set(read.facts.map((f) => f.fact_id)).size).toBe(13)

    // eslint-disable-next-line no-console
    console.log(`cold history bytes: ${total} facts — SQLite ${sizeHot} B hot, ${sizeCold} B after tiering; R2 ${stats.bytes} B in ${stats.segments} segments (${(stats.bytes / total).toFixed(1)} B/fact)`)
  })

  it("tiering a segment writes one row per fact (the hot delete) and a row per stream run, no cold index row; cold ids still judge re-appends and answer trace by id", async () => {
    const tenantId = unique("coldrows")
    const live = ledger()
    // A realistic mix on one shard: 150 short streams of 3 facts (a call's) and 5 long ones of 110.
    const streams = streamsOnShard0(tenantId, 155)
    const groups = await Promise.all(streams.map(async (stream, i) => ({
      tenant_id: tenantId, stream, facts: await Promise.all(Array.from({ length: i < 150 ? 3 : 110 }, (_, n) => draft(tenantId, stream, n + 1)))
    })))
    for (let i = 0; i < groups.length; i += 40) {
      const answers = await Effect.runPromise(live.append(groups.slice(i, i + 40)))
      expect(answers.every((a) => a.status === "appended")).toBe(true)
    }
    const shardKey = Shards.shardKey(tenantId, 0)
    const total = 150 * 3 + 5 * 110
    // One segment, as the sweep tiers (ColdHistory.factsPerSegment), over the shard's storage with every statement's rows written counted.
    const measured = await runInDurableObject(stubOf(shardKey), async (instance, state) => {
      // The object's own tiering, every statement's cursor kept (its SQL is the one `storage.sql` object).
      const sql = state.storage.sql
      const exec = sql.exec.bind(sql)
      const cursors: Array<{ query: string; cursor: SqlStorageCursor<Record<string, SqlStorageValue>> }> = []
      Object.defineProperty(sql, "exec", {
        configurable: true,
        value: (query: string, ...bindings: Array<unknown>) => {
          const cursor = exec(query, ...bindings)
          cursors.push({ query, cursor })
          return cursor
        }
      })
      let tiered: Awaited<ReturnType<typeof instance.tier>>
      try {
        tiered = await instance.tier(shardKey, cutoff, ColdHistory.factsPerSegment)
      } finally {
        delete (sql as { exec?: unknown }).exec
      }
      const rowsWritten = cursors.reduce((sum, { cursor }) => sum + cursor.rowsWritten, 0)
      const byStatement: Record<string, number> = {}
      for (const { query, cursor } of cursors) {
        const verb = query.trim().split(/\s+/).slice(0, 3).join(" ")
        if (cursor.rowsWritten > 0) byStatement[verb] = (byStatement[verb] ?? 0) + cursor.rowsWritten
      }
      const one = (query: string) => Number(sql.exec(query).one()["n"])
      return {
        tiered: tiered.tiered,
        rowsWritten,
        byStatement,
        ranges: one("SELECT COUNT(*) AS n FROM cold_ranges"),
        legacyIndex: one("SELECT COUNT(*) AS n FROM sqlite_master WHERE name = 'cold_facts'"),
        // The manifest's bytes of stored values (ids, keys, numbers), a lower bound of its pages' share per cold fact.
        rangeBytes: one("SELECT SUM(length(CAST(fact_ids AS BLOB)) + length(CAST(tenant_id AS BLOB)) + length(CAST(stream AS BLOB)) + 16) AS n FROM cold_ranges"),
        // The same for the 3-fact streams alone (a call's stream: the bench's shape).
        shortRangeBytes: one(`SELECT SUM(length(CAST(fact_ids AS BLOB)) + length(CAST(tenant_id AS BLOB)) + length(CAST(stream AS BLOB)) + 16) * 1.0
          / SUM(last_sequence - first_sequence + 1) AS n FROM cold_ranges WHERE last_sequence = 3`),
        // The pages the ranges take, where SQLite's dbstat is compiled in (null where it is not).
        rangePages: (() => {
          try {
            return one("SELECT SUM(pgsize) AS n FROM dbstat WHERE name = 'cold_ranges'")
          } catch {
            return null
          }
        })()
      }
    })
    // eslint-disable-next-line no-console
    console.log(`tiering rows written: ${measured.rowsWritten} for ${total} facts in ${measured.ranges} stream runs = ${(measured.rowsWritten / total).toFixed(3)} a fact (${JSON.stringify(measured.byStatement)}); cold manifest ~${(measured.rangeBytes / total).toFixed(1)} B a fact (stored values; ${measured.shortRangeBytes.toFixed(1)} B in 3-fact streams), ${measured.rangePages === null ? "dbstat n/a" : `${(measured.rangePages / total).toFixed(1)} B a fact in its pages`}`)
    expect(measured).toMatchObject({ tiered: total, ranges: 155, legacyIndex: 0 })
    // The hot deletes (one a fact), a range row per stream run, the segment's row and its key's index entry, the walk's
    // cursor — and, the shard's first segment, its manifest tables created (sqlite_master rows). No row per cold fact.
    expect(measured.rowsWritten).toBeLessThanOrEqual(total + measured.ranges + 12)
    expect(await hotCount(shardKey)).toBe(0)
    // A redelivered decision of a cold stream is a duplicate, a changed one a conflict; trace by id finds a cold fact.
    const short = groups[7]!
    expect(await Effect.runPromise(live.append([short]))).toMatchObject([{ status: "duplicate", version: 3 }])
    const changed = { ...short, facts: short.facts.map((f, n) => (n === 1 ? { ...f, data: { n: -1 } } : f)) }
    expect(await Effect.runPromise(live.append([changed]))).toMatchObject([{ status: "idempotency_conflict", fact_id: short.facts[1]!.fact_id }])
    const long = groups[152]!
    expect(await Effect.runPromise(live.findFact(tenantId, long.facts[99]!.fact_id))).toMatchObject({ stream: long.stream, sequence: 100 })
    expect(await Effect.runPromise(live.findFact(tenantId, short.facts[2]!.fact_id))).toMatchObject({ stream: short.stream, sequence: 3 })
  })

  it("the scheduled sweep tiers a tenant's facts older than its hot window, shard by shard, and leaves a tenant set to null hot", async () => {
    const tenantId = unique("sweep")
    const keptHot = unique("keep")
    const live = ledger()
    const streams = streamsOnShard0(tenantId, 3)
    for (const t of [tenantId, keptHot]) {
      for (const stream of t === tenantId ? streams : streamsOnShard0(keptHot, 3)) {
        const facts = await Promise.all([1, 2, 3].map((n) => draft(t, stream, n)))
        expect((await Effect.runPromise(live.append([{ tenant_id: t, stream, facts }])))[0]!.status).toBe("appended")
      }
    }
    const before = await Promise.all(streams.map((stream) => Effect.runPromise(live.read({ tenant_id: tenantId, stream }))))
    // Every tenant 30 days (the facts are from 2020), keptHot never tiered: passes until the walk has reached both.
    const hotDays = (tenant: string) => (tenant === keptHot ? undefined : 30)
    const runtime = platform.runtime(env as unknown as PlatformEnv)
    for (let run = 0; run < 200 && (await hotCount(Shards.shardKey(tenantId, 0))) > 0; run++) {
      await runtime.runPromise(Maintenance.tierLedger(hotDays))
    }
    expect(await hotCount(Shards.shardKey(tenantId, 0))).toBe(0)
    expect(await rpcOf(Shards.shardKey(tenantId, 0)).coldStats()).toMatchObject({ facts: 9 })
    expect(await hotCount(Shards.shardKey(keptHot, 0))).toBe(9)
    expect(await Promise.all(streams.map((stream) => Effect.runPromise(live.read({ tenant_id: tenantId, stream }))))).toEqual(before)
  })
})
