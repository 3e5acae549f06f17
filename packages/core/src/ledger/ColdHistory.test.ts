/**
 * Cold history in Node, over the test kit's in-memory SQLite storage and bucket: tiering a shard's old facts to
 * R2 segments changes no reader's answer, keeps re-appends idempotent and versions exact, and a refusing bucket or
 * a shard that changed while the segment was written leaves every fact hot.
 */
import type { Fact } from "@factline/schemas"
import { describe, expect, it } from "vitest"
import type { Bucket } from "../platform/Bindings.js"
import * as Storage from "../platform/Storage.js"
import { memoryBucket, memoryDurableStorage } from "../testing/MemoryBindings.js"
import * as ColdHistory from "./ColdHistory.js"
import type { AppendGroup, StreamKey } from "./LedgerProtocol.js"
import * as LedgerStorage from "./LedgerStorage.js"

const tenant = "acme"
const shardKey = `${tenant}/#3`
const old = "2020-01-01T00:00:00.000Z"
const later = "2030-01-01T00:00:00.000Z"
const cutoff = "2025-01-01T00:00:00.000Z"

const group = (stream: string, from: number, count: number, createdAt: string, cause = `m_${stream}_${from}`): AppendGroup => ({
  tenant_id: tenant,
  stream,
  facts: Array.from({ length: count }, (_, i) => ({
    fact_id: `f_${stream}_${from + i}`,
    type: "charge.captured",
    data: { cents: (from + i) * 100, note: `über ${from + i}` },
    causation_id: cause,
    correlation_id: `c_${stream}`,
    caused_by: "charges",
    created_at: createdAt,
    ...(i % 2 === 0 ? { traceparent: `00-${"a".repeat(32)}-${"b".repeat(16)}-01` } : {})
  }))
})

const setup = (bucket: Bucket = memoryBucket()) => {
  const storage = memoryDurableStorage()
  const ledger = LedgerStorage.make(storage)
  const history = ColdHistory.make(ledger, Storage.make(bucket))
  /** The same shard as a new object would see it (nothing cached). */
  const reopened = () => ColdHistory.make(LedgerStorage.make(storage), Storage.make(bucket))
  return { ledger, history, reopened, storage }
}

/** Streams `s0…s9` (and `ü-é` to order by code point), old facts in several appends, a hot tail on some. */
const populate = (ledger: LedgerStorage.LedgerStorage) => {
  const streams = [...Array.from({ length: 10 }, (_, i) => `s${i}`), "ü-é", "\u{1F600}x", "\uFFFDy"]
  for (const stream of streams) {
    ledger.appendAll([group(stream, 1, 3, old)])
    ledger.appendAll([group(stream, 4, 4, old)])
    if (stream.endsWith("1") || stream.length > 2) ledger.appendAll([group(stream, 8, 2, later)])
  }
  return streams
}

/** Everything every reader answers, for comparing before and after tiering. */
const everything = async (history: ColdHistory.ColdHistory, streams: ReadonlyArray<string>) => {
  const reads: Record<string, unknown> = {}
  for (const stream of streams) {
    const key: StreamKey = { tenant_id: tenant, stream }
    reads[`stream ${stream}`] = await history.readStream(key)
    for (const [after, limit] of [[0, 2], [2, 3], [5, 10], [6, 1], [9, 5]] as const) reads[`page ${stream} ${after} ${limit}`] = await history.readStream(key, { after, limit })
    reads[`decider ${stream}`] = await history.readStream({ ...key, snapshots: [{ decider: "d", version: 1, fingerprint: "x" }], decided: [`f_${stream}_4`, "f_unknown"] })
  }
  for (const page of [1, 3, 7, 50]) {
    const walked: Array<Fact> = []
    for (let after: { stream: string; sequence: number } | undefined; ;) {
      const facts = await history.readShard(after, page)
      walked.push(...facts)
      if (facts.length < page) break
      after = { stream: facts.at(-1)!.stream, sequence: facts.at(-1)!.sequence }
    }
    reads[`shard ${page}`] = walked
    const since: Array<unknown> = []
    for (let after: { stream: string; sequence: number } | undefined; ;) {
      const window = await history.readShardSince(after, "2019-12-31T00:00:00.000Z", page)
      since.push(window)
      if (window.next === undefined) break
      after = window.next
    }
    reads[`since ${page}`] = since
  }
  const ids = streams.flatMap((stream) => Array.from({ length: 9 }, (_, i) => `f_${stream}_${i + 1}`))
  for (const id of [...ids, "f_missing"]) reads[`find ${id}`] = await history.findFact(id)
  return reads
}

const tierAll = async (history: ColdHistory.ColdHistory, limit = 7) => {
  let moved = 0
  for (let i = 0; i < 100; i++) {
    const result = await history.tier(shardKey, cutoff, limit, later)
    moved += result.tiered
    if (result.tiered === 0 && result.wrapped) return moved
  }
  throw new Error("tiering never finished")
}

describe("cold history", () => {
  it("every reader answers the same after a shard's old facts are tiered to R2", async () => {
    const { ledger, history, reopened } = setup()
    const streams = populate(ledger)
    const before = await everything(history, streams)
    const moved = await tierAll(history)
    expect(moved).toBe(streams.length * 7)
    expect(history.stats()).toMatchObject({ facts: streams.length * 7, oldest: old, newest: old })
    // Only the hot tails are left in SQLite.
    expect(ledger.readShard(undefined, 1_000).map((f) => f.created_at)).toEqual(Array(streams.filter((s) => s.endsWith("1") || s.length > 2).length * 2).fill(later))
    expect(await everything(history, streams)).toEqual(before)
    // A new object (the shard evicted: no segment cached) reads the same from the bucket.
    expect(await everything(reopened(), streams)).toEqual(before)
  })

  it("a re-appended cold fact is a duplicate answering its stored facts, and versions count cold facts", async () => {
    const { ledger, history } = setup()
    populate(ledger)
    await tierAll(history)
    const again = await history.append([group("s2", 4, 4, old)])
    expect(again).toEqual([{ status: "duplicate", version: 7, facts: (await history.readStream({ tenant_id: tenant, stream: "s2" }, { after: 3, limit: 4 })).facts }])
    const changed = group("s2", 4, 4, old)
    const conflict = await history.append([{ ...changed, facts: changed.facts.map((f) => ({ ...f, data: { cents: 1 } })) }])
    expect(conflict[0]!.status).toBe("idempotency_conflict")
    // A decider's expected version on a wholly cold stream, and on a stream with a hot tail.
    expect(await history.append([{ ...group("s2", 8, 1, later), expected_version: 6 }])).toMatchObject([{ status: "version_conflict", version: 7 }])
    expect(await history.append([{ ...group("s2", 8, 1, later), expected_version: 7 }])).toMatchObject([{ status: "appended", version: 8 }])
    expect(await history.append([{ ...group("s1", 10, 1, later), expected_version: 9 }])).toMatchObject([{ status: "appended", version: 10 }])
    expect((await history.readStream({ tenant_id: tenant, stream: "s2" })).facts.map((f) => f.sequence)).toEqual([1, 2, 3, 4, 5, 6, 7, 8])
  })

  it("tiering writes no row per cold fact: the ids are packed in the stream's ranges, and still judge re-appends and answer a find by id", async () => {
    const { ledger, history, reopened, storage } = setup()
    const streams = populate(ledger)
    await tierAll(history)
    const count = (query: string) => Number(storage.sql.exec(query).one()["n"])
    expect(count("SELECT COUNT(*) AS n FROM sqlite_master WHERE name = 'cold_facts'")).toBe(0)
    // A row per stream and segment, not per fact: 13 streams' 7 cold facts each in segments of 7.
    expect(count("SELECT COUNT(*) AS n FROM cold_ranges")).toBeLessThanOrEqual(2 * streams.length)
    expect(count("SELECT COUNT(*) AS n FROM cold_ranges r, json_each(r.fact_ids)")).toBe(streams.length * 7)
    const fresh = reopened()
    expect(await fresh.append([group("ü-é", 1, 3, old)])).toMatchObject([{ status: "duplicate", version: 9 }])
    const changed = group("s3", 1, 3, old)
    expect(await fresh.append([{ ...changed, facts: changed.facts.map((f, i) => (i === 2 ? { ...f, data: { cents: 1 } } : f)) }])).toMatchObject([
      { status: "idempotency_conflict", fact_id: "f_s3_3" }
    ])
    expect(await fresh.findFact("f_\u{1F600}x_5")).toMatchObject({ stream: "\u{1F600}x", sequence: 5 })
    expect(fresh.coldIds(["f_s4_7", "f_s1_8", "f_missing"])).toEqual(["f_s4_7"])
    expect(ledger.readShard(undefined, 1_000).some((f) => f.fact_id === "f_s3_3")).toBe(false)
  })

  it("a shard tiered before the packed ids (a cold_facts row per fact) still answers from them, tiers on without them, and forgets both", async () => {
    const { ledger, history, reopened, storage } = setup()
    const streams = populate(ledger)
    const before = await everything(history, streams)
    await tierAll(history)
    // The shard as the earlier code left it: ranges without ids, a legacy index row per cold fact.
    const sql = storage.sql
    sql.exec("CREATE TABLE cold_facts (fact_id TEXT PRIMARY KEY, segment INTEGER NOT NULL) WITHOUT ROWID")
    sql.exec("INSERT INTO cold_facts (fact_id, segment) SELECT i.value, r.segment FROM cold_ranges r, json_each(r.fact_ids) AS i")
    sql.exec(`CREATE TABLE legacy_ranges (tenant_id TEXT NOT NULL, stream TEXT NOT NULL, first_sequence INTEGER NOT NULL, last_sequence INTEGER NOT NULL,
      segment INTEGER NOT NULL, PRIMARY KEY (tenant_id, stream, first_sequence)) WITHOUT ROWID`)
    sql.exec("INSERT INTO legacy_ranges SELECT tenant_id, stream, first_sequence, last_sequence, segment FROM cold_ranges")
    sql.exec("DROP TABLE cold_ranges")
    sql.exec("ALTER TABLE legacy_ranges RENAME TO cold_ranges")
    const legacy = reopened()
    expect(await everything(legacy, streams)).toEqual(before)
    expect(await legacy.append([group("s5", 4, 4, old)])).toMatchObject([{ status: "duplicate", version: 7 }])
    // The hot tails tier on, packed: the legacy index gains no row.
    const legacyRows = Number(sql.exec("SELECT COUNT(*) AS n FROM cold_facts").one()["n"])
    for (let i = 0; i < 20 && (await legacy.tier(shardKey, "2031-01-01T00:00:00.000Z", 50, later)).tiered > 0;);
    expect(ledger.readShard(undefined, 1_000)).toEqual([])
    expect(Number(sql.exec("SELECT COUNT(*) AS n FROM cold_facts").one()["n"])).toBe(legacyRows)
    expect(await legacy.append([group("s1", 8, 2, later)])).toMatchObject([{ status: "duplicate", version: 9 }])
    expect(await legacy.findFact("f_s1_9")).toMatchObject({ sequence: 9 })
    expect(await legacy.findFact("f_s1_2")).toMatchObject({ sequence: 2 })
    // A reshard's drop forgets both kinds: the stream's ranges and its legacy rows.
    const ids = await legacy.coldIdsOf(["s1"])
    expect(ids).toHaveLength(9)
    const shard = LedgerStorage.make(storage)
    storage.transactionSync(() => shard.cold.forget(["s1"], ids))
    expect(Number(sql.exec("SELECT COUNT(*) AS n FROM cold_facts").one()["n"])).toBe(legacyRows - 7)
    expect(legacy.coldIds(ids)).toEqual([])
    expect(() => storage.transactionSync(() => shard.cold.forget(["s2"], ["f_s2_1"]))).toThrow("changed while it was read")
  })

  it("a bucket refusing the write or the read back leaves every fact hot, and a later run tiers them once", async () => {
    const inner = memoryBucket()
    let refuse: "put" | "get" | undefined = "put"
    const bucket: Bucket = {
      put: (key, value) => (refuse === "put" ? Promise.reject(new Error("R2 refused")) : inner.put(key, value)),
      get: (key, options) => (refuse === "get" ? Promise.reject(new Error("R2 refused")) : inner.get(key, options)),
      head: (key) => inner.head(key),
      list: (options) => inner.list(options),
      delete: (keys) => inner.delete(keys)
    }
    const { ledger, history } = setup(bucket)
    const streams = populate(ledger)
    const before = await everything(history, streams)
    await expect(history.tier(shardKey, cutoff, 10, later)).rejects.toThrow("R2 refused")
    refuse = "get"
    await expect(history.tier(shardKey, cutoff, 10, later)).rejects.toThrow("R2 refused")
    expect(history.stats().facts).toBe(0)
    expect(ledger.readShard(undefined, 1_000)).toHaveLength((before["shard 50"] as Array<Fact>).length)
    refuse = undefined
    expect(await tierAll(history)).toBe(streams.length * 7)
    expect(await everything(history, streams)).toEqual(before)
  })

  it("facts waiting in the outbox stay hot, and a segment whose facts changed meanwhile is not recorded", async () => {
    const { ledger, history } = setup()
    populate(ledger)
    ledger.handover([{ fact_id: "f_s0_2", destinations: ["facts"] }])
    await tierAll(history)
    // s0 stops before its pinned fact: the cold part of a stream is a prefix.
    expect(ledger.readShard(undefined, 1_000).filter((f) => f.stream === "s0").map((f) => f.sequence)).toEqual([2, 3, 4, 5, 6, 7])
    expect((await history.readStream({ tenant_id: tenant, stream: "s0" })).facts.map((f) => f.sequence)).toEqual([1, 2, 3, 4, 5, 6, 7])
    // The chunk is recorded only if its facts are still hot and unpinned when the transaction runs.
    ledger.deleteOutbox(ledger.pendingOutbox(10).map((e) => e.id))
    const chunk = ledger.cold.candidates(cutoff, 10)
    ledger.handover([{ fact_id: chunk.rows[0]!.fact_id, destinations: ["facts"] }])
    expect(ledger.cold.record({ objectKey: "x", bytes: 1, rows: chunk.rows, cursor: chunk.cursor, tieredAt: later })).toBe(false)
    expect(history.coldIds([chunk.rows[0]!.fact_id])).toEqual([])
  })
})
