/**
 * Cold history under faults (issue 39, `npm run chaos`): tenant-a's calls flow in over HTTP (3 facts each) and are
 * consumed; then every one of its 16 shards tiers its facts to R2 (a hot window of 0: everything due) while a
 * client keeps posting more calls, and the tiering meets faults drawn by a seeded generator — R2 refusing a
 * segment's write, the read back of a written segment failing, the shard interrupted right before the one
 * transaction that records a segment and deletes its hot rows (each call then runs on a fresh cold history, as a
 * new instance after an eviction would) — and a fifth of the time the shard object is really evicted after its call
 * (`evictDurableObject`: its cached segments and in-memory state gone, its storage kept). Between tiering calls,
 * streams are read over HTTP and must read complete.
 * Once the faults are lifted, the shards tier whatever is left (the calls posted meanwhile included).
 *
 * Checked: every stream read before the tiering reads exactly the same after (ids, sequences, data); every call
 * accepted has its 3 facts once in its stream (0 lost, 0 doubled) and once in the facts copy; no dead letter; the
 * shards' manifests hold the tiered facts and no hot row is left but the ones still due elsewhere.
 *
 * Prints a `SCORECARD` line and asserts `passed`.
 */
import { evictDurableObject, runInDurableObject } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { Bindings, ColdHistory, type LedgerProtocol, type LedgerStorage, Shards } from "@factline/core/runtime"
import type { LedgerShard } from "@factline/workers"
import { drain } from "../Drain.js"
import { callCompleted, postEvents, request, tokenA, unique } from "../helpers.js"

const tenant = "tenant-a"
const score = (fields: Record<string, unknown>) => console.log(`SCORECARD ${JSON.stringify(fields)}`)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
/** A cutoff after every fact of the case: a hot window of 0 days. */
const cutoff = "2999-01-01T00:00:00.000Z"
const shards = Shards.defaultShardsPerTenant
const shardKeys = Array.from({ length: shards }, (_, i) => Shards.shardKey(tenant, i))

/** mulberry32: a small seeded generator of numbers in [0, 1) (a run's faults repeat with its seed). */
const generator = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const run = unique("tier")
const call = (i: number) => callCompleted({}, { call_id: `${run}_c${i}`, buyer_id: `${run}_buyer`, duration_s: 90, price_cents: 100 + i })
/** A call makes 3 facts in its stream (outcome, qualification, charge: 90 s qualifies). */
const factsPerCall = 3

/** POSTs events until they are accepted (a 202), as a producer retries. */
const postUntilAccepted = async (events: ReadonlyArray<unknown>) => {
  let last = ""
  for (let tries = 1; tries <= 60; tries++) {
    const response = await postEvents({ events })
    if (response.status === 202) return tries
    last = `${response.status} ${(await response.text()).slice(0, 300)}`
    await sleep(150)
  }
  throw new Error(`the events were never accepted: ${last}`)
}

interface StreamFact { readonly fact_id: string; readonly sequence: number; readonly type: string; readonly data: unknown }
/** A stream over HTTP (a 503 retried: a read meeting R2 refusing is retryable), every page. */
const readStream = async (stream: string): Promise<ReadonlyArray<StreamFact>> => {
  for (let tries = 0; ; tries++) {
    const response = await request(`/v1/streams/${encodeURIComponent(stream)}/facts`, { token: tokenA })
    if (response.status === 200) return ((await response.json<any>()).facts as Array<StreamFact>).map(({ fact_id, sequence, type, data }) => ({ fact_id, sequence, type, data }))
    if (response.status !== 503 || tries > 30) throw new Error(`reading ${stream}: ${response.status} ${await response.text()}`)
    await sleep(100)
  }
}

const stubOf = (shardKey: string) => env.LEDGER.get(env.LEDGER.idFromName(shardKey)) as DurableObjectStub<LedgerShard>
const rpcOf = (shardKey: string) => stubOf(shardKey) as unknown as LedgerProtocol.LedgerShardRpc
// A shard none of the run's streams hashed to has no tables (48 calls over 16 shards leave one empty about half the runs).
const hotCount = (shardKey: string) =>
  runInDurableObject(stubOf(shardKey), (_i, state) =>
    (state.storage.sql.exec("SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'facts'").one() as { n: number }).n === 0
      ? 0
      : (state.storage.sql.exec("SELECT COUNT(*) AS n FROM facts").one() as { n: number }).n)

const faults = { r2_put_refused: 0, r2_get_refused: 0, shard_interrupted: 0, shards_evicted: 0, tier_calls: 0, tier_calls_failed: 0 }
const draw = generator(39)

/** The payload bucket refusing a share of the segments' writes and reads. */
const faultyBucket = (): R2Bucket => new Proxy(env.PAYLOADS, {
  get: (target, prop) => {
    if (prop === "put") {
      return (key: string, ...rest: Array<unknown>) => {
        if (key.includes("/ledger/") && draw() < 0.3) {
          faults.r2_put_refused++
          return Promise.reject(new Error("injected fault: R2 put refused"))
        }
        return (target.put as (...a: Array<unknown>) => unknown)(key, ...rest)
      }
    }
    if (prop === "get") {
      return (key: string, ...rest: Array<unknown>) => {
        if (key.includes("/ledger/") && draw() < 0.2) {
          faults.r2_get_refused++
          return Promise.reject(new Error("injected fault: R2 get refused"))
        }
        return (target.get as (...a: Array<unknown>) => unknown)(key, ...rest)
      }
    }
    const value = (target as any)[prop]
    return typeof value === "function" ? value.bind(target) : value
  }
})

/** One tier call inside the shard, on a cold history over the faulty bucket whose recording transaction is interrupted now and then. */
const tierUnderFaults = (shardKey: string) =>
  runInDurableObject(stubOf(shardKey), async (instance) => {
    const shard = instance as unknown as { ledger: LedgerStorage.LedgerStorage; coldHistory?: ColdHistory.ColdHistory }
    const inner = shard.ledger
    const interrupting: LedgerStorage.LedgerStorage = {
      ...inner,
      cold: {
        ...inner.cold,
        record: (...args: Parameters<typeof inner.cold.record>) => {
          if (draw() < 0.25) {
            faults.shard_interrupted++
            throw new Error("injected fault: shard interrupted before its transaction")
          }
          return inner.cold.record(...args)
        }
      }
    }
    shard.coldHistory = ColdHistory.make(interrupting, Bindings.PayloadBucket.make(faultyBucket()))
    try {
      return await instance.tier(shardKey, cutoff, 40)
    } finally {
      // The next call builds the object's own again, as a new instance would after an eviction.
      shard.coldHistory = undefined
    }
  })

describe("chaos: cold history under faults", () => {
  it("tiering tenant-a's 16 shards to R2 while R2 refuses and shards are interrupted, under live traffic: every stream reads complete, 0 lost, 0 doubled", async () => {
    const before = Array.from({ length: 48 }, (_, i) => call(i))
    for (let i = 0; i < before.length; i += 12) await postUntilAccepted(before.slice(i, i + 12))
    await drain({ timeoutMs: 120_000 })
    const streamsBefore = new Map<string, ReadonlyArray<StreamFact>>()
    for (const e of before) streamsBefore.set(e.subject, await readStream(e.subject))
    const hotBefore = (await Promise.all(shardKeys.map(hotCount))).reduce((a, b) => a + b, 0)
    expect([...streamsBefore.values()].every((facts) => facts.length === factsPerCall)).toBe(true)

    // Tiering under faults: rounds over every shard, each tier call racing a new call posted (live traffic, retried
    // as a producer does); between the calls, a sample of streams read complete.
    const during: Array<ReturnType<typeof call>> = []
    let postTries = 0
    let readsDuring = 0
    let readsIncomplete = 0
    let tieredUnderFaults = 0
    const sample = [...streamsBefore.keys()]
    for (let round = 0; round < 6; round++) {
      for (const shardKey of shardKeys) {
        faults.tier_calls++
        const event = call(1_000 + during.length)
        during.push(event)
        const [tiered, tries] = await Promise.all([tierUnderFaults(shardKey).then((r) => r.tiered, () => (faults.tier_calls_failed++, 0)), postUntilAccepted([event])])
        tieredUnderFaults += tiered
        postTries += tries
        if (draw() < 0.2) await evictDurableObject(stubOf(shardKey)).then(() => faults.shards_evicted++, () => undefined)
        const stream = sample[(round * shards + shardKeys.indexOf(shardKey)) % sample.length]!
        readsDuring++
        if (JSON.stringify(await readStream(stream)) !== JSON.stringify(streamsBefore.get(stream))) readsIncomplete++
      }
    }
    await drain({ timeoutMs: 120_000 })

    // The faults lifted: each shard tiers what is left until its walk finds nothing more.
    let tieredAfter = 0
    for (const shardKey of shardKeys) {
      for (let i = 0; i < 40; i++) {
        const result = await rpcOf(shardKey).tier(shardKey, cutoff, 200)
        tieredAfter += result.tiered
        if (result.tiered === 0 && result.wrapped) break
      }
    }
    const stats = await Promise.all(shardKeys.map((k) => rpcOf(k).coldStats()))
    const coldFacts = stats.reduce((n, s) => n + s.facts, 0)
    const segments = stats.reduce((n, s) => n + s.segments, 0)
    const hotAfter = (await Promise.all(shardKeys.map(hotCount))).reduce((a, b) => a + b, 0)

    // Every stream: the ones read before read the same; every call accepted has its 3 facts once.
    let streamsChanged = 0
    for (const [stream, facts] of streamsBefore) if (JSON.stringify(await readStream(stream)) !== JSON.stringify(facts)) streamsChanged++
    const all = [...before, ...during]
    let found = 0
    let distinct = 0
    let sequencesBroken = 0
    for (const e of all) {
      const facts = await readStream(e.subject)
      found += facts.length
      distinct += new Set(facts.map((f) => f.fact_id)).size
      if (facts.some((f, i) => f.sequence !== i + 1)) sequencesBroken++
    }
    const expected = all.length * factsPerCall
    const lost = Math.max(0, expected - distinct)
    const doubled = found - distinct
    const copy = (await env.DB.prepare("SELECT COUNT(*) AS n, COUNT(DISTINCT fact_id) AS distinct_ids FROM facts WHERE tenant_id = ? AND stream IN (SELECT value FROM json_each(?))")
      .bind(tenant, JSON.stringify(all.map((e) => e.subject))).first<{ n: number; distinct_ids: number }>())!
    const deadLetters = (await env.DB.prepare("SELECT COUNT(*) AS n FROM dead_messages WHERE tenant_id = ? AND idempotency_key LIKE ?").bind(tenant, `%${run}%`).first<{ n: number }>())!.n
    const injected = faults.r2_put_refused + faults.r2_get_refused + faults.shard_interrupted + faults.shards_evicted

    const passed = lost === 0 && doubled === 0 && streamsChanged === 0 && readsIncomplete === 0 && sequencesBroken === 0 && deadLetters === 0 &&
      copy.n === expected && copy.distinct_ids === expected && coldFacts >= expected && injected > 0 && faults.r2_put_refused > 0 && faults.shard_interrupted > 0
    score({
      case: "cold history tiering under faults", passed, messages_sent: all.length, facts_expected: expected, facts_found: distinct,
      duplicates_found: doubled, messages_lost: lost, dlq_expected: 0, dlq_found: deadLetters,
      streams_read_before: streamsBefore.size, streams_changed: streamsChanged, reads_during_tiering: readsDuring, reads_incomplete: readsIncomplete,
      sequences_broken: sequencesBroken, facts_copy: copy, hot_facts_before: hotBefore, hot_facts_after: hotAfter, cold_facts: coldFacts, segments,
      tiered_under_faults: tieredUnderFaults, tiered_after: tieredAfter, calls_posted_during: during.length, event_posts: postTries, faults, faults_injected: injected
    })
    expect({ lost, doubled, streamsChanged, readsIncomplete, sequencesBroken, deadLetters }).toEqual({ lost: 0, doubled: 0, streamsChanged: 0, readsIncomplete: 0, sequencesBroken: 0, deadLetters: 0 })
    expect(copy).toEqual({ n: expected, distinct_ids: expected })
    expect(passed).toBe(true)
  }, 600_000)
})
