/**
 * The scheduled maintenance: accepted idempotency keys (`accepted_keys`) are
 * forgotten after their retention (30 days, as the inbox) by a walk of the
 * primary key, a bounded window per run from where the last run stopped
 * (`sweep_cursors`); younger keys stay bound to their payload.
 */
import { createExecutionContext, createScheduledController, waitOnExecutionContext } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { AcceptedKeys, Maintenance } from "@factline/core/runtime"
import type { PlatformEnv } from "@factline/workers"
import { callCompleted, postEvents, unique } from "./helpers.js"
import { platform } from "./worker.js"

const day = 24 * 3600 * 1000
const daysAgo = (days: number) => new Date(Date.now() - days * day).toISOString()

const insertKey = (tenant: string, key: string, acceptedAt: string) =>
  env.DB.prepare(
    "INSERT INTO accepted_keys (tenant_id, idempotency_key, payload_hash, message_type, subject, accepted_at) VALUES (?, ?, 'not-the-hash-of-any-payload', 'call.completed', 's', ?)"
  ).bind(tenant, key, acceptedAt).run()

const keysOf = async (tenant: string) =>
  (await env.DB.prepare("SELECT idempotency_key FROM accepted_keys WHERE tenant_id = ? ORDER BY accepted_at").bind(tenant).all<{ idempotency_key: string }>())
    .results.map((r) => r.idempotency_key)

const prune = (window: number) => platform.runtime(env as unknown as PlatformEnv).runPromise(Maintenance.pruneAcceptedKeys(window))
const cursor = async () =>
  (await env.DB.prepare("SELECT after FROM sweep_cursors WHERE sweep = 'accepted_keys'").first<{ after: string | null }>())?.after

describe("accepted_keys retention", () => {
  it("each run walks the next window of keys by primary key and forgets the expired ones in it; across runs every expired key goes, younger keys stay bound", async () => {
    expect(Maintenance.acceptedKeysRetentionDays).toBe(30)
    // Walk from the first key (this file's database: nothing else has walked it).
    expect(await cursor()).toBeUndefined()
    const tenant = unique("prune")
    // In key order: fresh, old_0 … old_9, young_29d, young_29d_b — 10 keys past the retention (40 … 31 days old), 3 inside it.
    const old = Array.from({ length: 10 }, (_, i) => ({ key: `old_${i}`, at: daysAgo(40 - i) }))
    const young = [{ key: "young_29d", at: daysAgo(29) }, { key: "young_29d_b", at: daysAgo(29.5) }, { key: "fresh", at: daysAgo(0) }]
    for (const { key, at } of [...old, ...young]) await insertKey(tenant, key, at)

    // A tenant-a key 31 days old, bound to another payload (after every key of `tenant` in key order): a post
    // under it is a conflict until it is forgotten.
    const event = callCompleted()
    await insertKey("tenant-a", event.idempotency_key, daysAgo(31))
    expect((await postEvents(event)).status).toBe(422)

    // Bounded: a run walks 4 keys (fresh, old_0, old_1, old_2) and deletes the expired ones among them only.
    expect(await prune(4)).toBe(3)
    expect(await keysOf(tenant)).toEqual(["old_3", "old_4", "old_5", "old_6", "old_7", "old_8", "old_9", "young_29d_b", "young_29d", "fresh"])
    expect(JSON.parse((await cursor())!)).toEqual([tenant, "old_2"])
    expect((await postEvents(event)).status).toBe(422)

    // The next runs go on from there: old_3 … old_6, then old_7 … old_9 and young_29d, then the rest (young_29d_b and
    // the tenant-a key): the table's end, so the walk starts over.
    expect(await prune(4)).toBe(4)
    expect(await prune(4)).toBe(3)
    expect(await prune(4)).toBe(1)
    expect(await cursor()).toBeNull()
    expect(await keysOf(tenant)).toEqual(["young_29d_b", "young_29d", "fresh"])

    // Forgotten, the key can be accepted again, bound to the payload posted now.
    const accepted = await postEvents(event)
    expect(accepted.status).toBe(202)
    expect((await accepted.json<any>()).items).toEqual([{ idempotency_key: event.idempotency_key, duplicate: false }])
    expect(await env.DB.prepare("SELECT accepted_at > ? AS renewed FROM accepted_keys WHERE tenant_id = 'tenant-a' AND idempotency_key = ?")
      .bind(daysAgo(1), event.idempotency_key).first()).toEqual({ renewed: 1 })
  })

  it("a tenant given its own key retention (FACTLINE_KEY_RETENTION_DAYS) has its keys forgotten after it; every other tenant keeps 30 days", async () => {
    const short = unique("short")
    const long = unique("long")
    const other = unique("other")
    for (const tenant of [short, long, other]) {
      for (const [key, at] of [["k_10d", daysAgo(10)], ["k_3d", daysAgo(3)], ["k_40d", daysAgo(40)]] as const) await insertKey(tenant, key, at)
    }
    // As Settings parses `{ "<short>": 7, "<long>": 60 }`: the rest on the default 30 days.
    const retention = { days: (tenant: string) => (tenant === short ? 7 : tenant === long ? 60 : 30), tenants: [short, long] }
    await platform.runtime(env as unknown as PlatformEnv).runPromise(Maintenance.pruneAcceptedKeys(100_000, retention))
    expect(await keysOf(short)).toEqual(["k_3d"])
    expect(await keysOf(long)).toEqual(["k_40d", "k_10d", "k_3d"])
    expect(await keysOf(other)).toEqual(["k_10d", "k_3d"])
  })

  it("the cron's run walks a window far larger than a run of tests holds: keys that expired since the last pass go in one run, unexpired ones stay", async () => {
    expect(Maintenance.acceptedKeysWalkedPerRun).toBeGreaterThanOrEqual(10_000)
    const tenant = unique("cron")
    for (const [key, at] of [["a_old", daysAgo(45)], ["b_young", daysAgo(1)], ["c_old", daysAgo(31)]] as const) await insertKey(tenant, key, at)
    const ctx = createExecutionContext()
    await platform.scheduled(createScheduledController({ scheduledTime: new Date(), cron: "*/5 * * * *" }), env as unknown as PlatformEnv, ctx)
    await waitOnExecutionContext(ctx)
    expect(await keysOf(tenant)).toEqual(["b_young"])
  })

  it("the walk reads the primary key (a range), never the whole table, and no accepted_at index exists (no row written for it)", async () => {
    const plans = async (sql: string, ...params: Array<unknown>) =>
      (await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`).bind(...params).all<{ detail: string }>()).results.map((r) => r.detail)
    for (const details of [
      await plans(AcceptedKeys.selectWindowEnd(false), "t", "k", 10),
      await plans(AcceptedKeys.deleteExpiredInWindow(false, false), "t", "k", "u", "z", daysAgo(30), JSON.stringify({ t: daysAgo(7) })),
      await plans(AcceptedKeys.deleteExpiredInWindow(false, true), "t", "k", null, null, daysAgo(30), "{}")
    ]) {
      expect(details.join("; ")).toMatch(/SEARCH accepted_keys USING PRIMARY KEY/)
      expect(details.filter((d) => /^SCAN accepted_keys/.test(d))).toEqual([])
    }
    const indexes = await env.DB.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'accepted_keys' AND sql IS NOT NULL").all()
    expect(indexes.results).toEqual([])
  })
})
