/**
 * The scheduled maintenance: accepted idempotency keys (`accepted_keys`) are
 * forgotten after their retention (30 days, as the inbox), oldest first and
 * at most a bounded number per run; younger keys stay bound to their payload.
 */
import { createExecutionContext, createScheduledController, waitOnExecutionContext } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { AcceptedKeys, Maintenance } from "@factline/core"
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

describe("accepted_keys retention", () => {
  it("the scheduled run forgets keys older than the retention, oldest first and bounded per run; younger keys stay bound", async () => {
    expect(Maintenance.acceptedKeysRetentionDays).toBe(30)
    const tenant = unique("prune")
    // 10 keys past the retention (40 … 31 days old), 2 just inside it, 1 fresh.
    const old = Array.from({ length: 10 }, (_, i) => ({ key: `old_${i}`, at: daysAgo(40 - i) }))
    const young = [{ key: "young_29d", at: daysAgo(29) }, { key: "young_29d_b", at: daysAgo(29.5) }, { key: "fresh", at: daysAgo(0) }]
    for (const { key, at } of [...old, ...young]) await insertKey(tenant, key, at)

    // A tenant-a key 31 days old, bound to another payload: a post under it is a conflict until it is forgotten.
    const event = callCompleted()
    await insertKey("tenant-a", event.idempotency_key, daysAgo(31))
    expect((await postEvents(event)).status).toBe(422)

    // Bounded: at most `limit` keys per run, the oldest first (nobody else writes keys this old).
    expect(await platform.runtime(env as unknown as PlatformEnv).runPromise(Maintenance.pruneAcceptedKeys(4))).toBe(4)
    expect(await keysOf(tenant)).toEqual(["old_4", "old_5", "old_6", "old_7", "old_8", "old_9", "young_29d_b", "young_29d", "fresh"])
    expect((await postEvents(event)).status).toBe(422)

    // The cron's run (default bound, far above what is left) forgets the rest of the expired keys.
    expect(Maintenance.acceptedKeysPrunedPerRun).toBeGreaterThanOrEqual(1_000)
    const ctx = createExecutionContext()
    await platform.scheduled(createScheduledController({ scheduledTime: new Date(), cron: "*/5 * * * *" }), env as unknown as PlatformEnv, ctx)
    await waitOnExecutionContext(ctx)
    expect(await keysOf(tenant)).toEqual(["young_29d_b", "young_29d", "fresh"])
    // Forgotten, the key can be accepted again, bound to the payload posted now.
    const accepted = await postEvents(event)
    expect(accepted.status).toBe(202)
    expect((await accepted.json<any>()).items).toEqual([{ idempotency_key: event.idempotency_key, duplicate: false }])
    expect(await env.DB.prepare("SELECT accepted_at > ? AS renewed FROM accepted_keys WHERE tenant_id = 'tenant-a' AND idempotency_key = ?")
      .bind(daysAgo(1), event.idempotency_key).first()).toEqual({ renewed: 1 })
  })

  it("the prune walks the accepted_at index, not the whole table", async () => {
    const { results } = await env.DB.prepare(`EXPLAIN QUERY PLAN ${AcceptedKeys.deleteOlderThan}`).bind(daysAgo(30), 10).all<{ detail: string }>()
    const details = results.map((r) => r.detail)
    expect(details.some((d) => /accepted_keys_by_accepted_at/.test(d))).toBe(true)
    expect(details.filter((d) => /^SCAN accepted_keys$/.test(d))).toEqual([])
  })
})
