/**
 * Dead letters are never lost (issue 21, item 11): the DLQ consumers have no DLQ of their own, so a dead letter
 * D1 refuses for longer than their retries (11 deliveries, ≈ 55 min) used to be gone. From delivery 8 on it is
 * spilled to R2 and acked — not while R2 refuses too — and the cron moves it into `dead_messages` once D1 is
 * back: exactly once, also when a run dies between its insert and its delete. Operators see the spilled ones
 * on the health page and in the platform's `GET /v1/dlq` until then. The D1 outage is a wrapper refusing every
 * call of the databases (test/faults.ts); R2 and D1 otherwise are the real local ones.
 */
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { DeadLetterSpill, RetryPolicy } from "@factline/core/runtime"
import type { PlatformEnv } from "@factline/workers"
import * as FaultCases from "./faultCases.js"
import { request, tokenA, tokenPlatform, unique } from "./helpers.js"
import { recordingBatch } from "./instrument.js"
import { platform } from "./worker.js"

const testEnv = env as unknown as PlatformEnv
const queue = "factline-events-dlq"

/** One delivery of these messages (ids stable across deliveries, as the platform's) to the DLQ consumer. */
const deliver = async (messages: ReadonlyArray<{ readonly id: string; readonly body: unknown }>, attempts: number, runEnv: PlatformEnv) => {
  const batch = createMessageBatch(queue, messages.map((m) => ({ id: m.id, timestamp: new Date(), attempts, body: m.body })))
  const ctx = createExecutionContext()
  const recording = recordingBatch(batch)
  await platform.queue(recording.batch, runEnv, ctx)
  const result = await getQueueResult(batch, ctx)
  const retried = result.retryMessages.map((r) => ({ id: r.msgId, delaySeconds: recording.retries.get(r.msgId)?.delaySeconds }))
  return { acked: [...result.explicitAcks].sort(), retried: retried.sort((a, b) => (a.id < b.id ? -1 : 1)) }
}

const deadLetters = (run: string) => {
  const at = new Date().toISOString()
  const key = `${run}:order`
  const original = { schema_version: 2, message_type: "call.completed", idempotency_key: key, tenant_id: "tenant-a", subject: `${run}_call`, payload: { run } }
  return {
    key,
    original,
    /** A record the runtime sent (tenant-a's read database) and a raw body the platform dead-lettered (no tenant: the platform database). */
    messages: [
      { id: `${run}_m1`, body: { original_message: original, failure: { reason: "retries_exhausted", last_error: "ledger unreachable", attempts: 6, first_attempted_at: at, last_attempted_at: at, queue: "factline-events" } } },
      { id: `${run}_m2`, body: { run, note: "a consumer crashed on it every time" } }
    ]
  }
}

const spilledCount = async (token = tokenPlatform) => {
  const health = await (await request("/v1/queues/health", { token: tokenPlatform })).json<any>()
  const list = await (await request("/v1/dlq?limit=1", { token })).json<any>()
  return { health: health.spilled_dead_letters as number, status: health.status as string, list: list.spilled as number | undefined }
}

describe("dead letters through a long D1 outage", () => {
  it("spilled to R2 from delivery 8 (not while R2 refuses too), recovered by the cron exactly once — a run dying between insert and delete included", async () => {
    const run = unique("dls")
    const { messages, key, original } = deadLetters(run)
    const ids = messages.map((m) => m.id).sort()
    const d1Down = FaultCases.outageEnv({ d1Down: true, r2Down: false })
    const bothDown = FaultCases.outageEnv({ d1Down: true, r2Down: true })

    // Deliveries 1 to 7 with every database down: retried after min(60·n, 600) s, nothing spilled yet.
    for (let attempts = 1; attempts < RetryPolicy.deadLetterConsumer.spillFromAttempt; attempts++) {
      expect(await deliver(messages, attempts, d1Down)).toEqual({ acked: [], retried: ids.map((id) => ({ id, delaySeconds: Math.min(60 * attempts, 600) })) })
    }
    expect(await FaultCases.spilledKeys(run)).toEqual([])
    // Delivery 8 while R2 refuses too: retried, not acked (nothing is acked before it is durable somewhere).
    expect(RetryPolicy.deadLetterConsumer.spillFromAttempt).toBe(8)
    expect((await deliver(messages, 8, bothDown)).acked).toEqual([])
    expect(await FaultCases.spilledKeys(run)).toEqual([])
    // Delivery 9, D1 still down, R2 back: spilled, one object per message, under the platform's prefix; acked.
    expect(await deliver(messages, 9, d1Down)).toEqual({ acked: ids, retried: [] })
    const keys = messages.map((m) => DeadLetterSpill.keyOf(queue, m.id)).sort()
    expect(await FaultCases.spilledKeys(run)).toEqual(keys)
    for (const k of keys) expect(k.startsWith("_platform/dead-letters/spilled/factline-events-dlq/")).toBe(true)
    // The same message spilled again (its ack was lost) overwrites its object: still one each.
    expect((await deliver(messages.slice(0, 1), 10, d1Down)).acked).toEqual([messages[0]!.id])
    expect(await FaultCases.spilledKeys(run)).toEqual(keys)

    // Hours of outage: the cron runs and fails; its recovery deletes nothing it could not store.
    for (let i = 0; i < 3; i++) expect((await FaultCases.cron(d1Down)).failed).toBe(true)
    expect(await FaultCases.spilledKeys(run)).toEqual(keys)
    expect(await FaultCases.deadLetterRows(run)).toEqual([])

    // D1 back: operators see them (health: a warning; the platform's dead-letter list counts them, a tenant's does not).
    expect(await spilledCount()).toEqual({ health: 2, status: expect.stringMatching(/warning|critical/), list: 2 })
    expect((await spilledCount(tokenA)).list).toBeUndefined()

    // The first run after the outage dies between its insert and its delete: stored once, the objects still there.
    await FaultCases.cron(FaultCases.outageEnv({ d1Down: false, r2Down: false, deletesRefused: true }))
    expect((await FaultCases.deadLetterRows(run)).map((r) => r.id).sort()).toEqual(ids)
    expect(await FaultCases.spilledKeys(run)).toEqual(keys)
    // The next runs insert nothing twice and delete the objects.
    await FaultCases.cron(testEnv)
    await FaultCases.cron(testEnv)
    expect(await FaultCases.spilledKeys(run)).toEqual([])
    const rows = await FaultCases.deadLetterRows(run)
    expect(rows.map((r) => r.id).sort()).toEqual(ids)
    expect((await spilledCount()).health).toBe(0)

    // Each row is what the consumer would have stored with D1 up: the record, tenant-a's in its read database;
    // the raw body wrapped as platform_retries_exhausted, with no tenant, in the platform database.
    const record = rows.find((r) => r.id === messages[0]!.id)!
    expect(record).toMatchObject({ queue: "factline-events", reason: "retries_exhausted", last_error: "ledger unreachable", attempts: 6, tenant_id: "tenant-a", idempotency_key: key, status: "open" })
    expect(JSON.parse(record.original_message)).toEqual(original)
    const raw = rows.find((r) => r.id === messages[1]!.id)!
    expect(raw).toMatchObject({ queue: "factline-events", reason: "platform_retries_exhausted", tenant_id: null, status: "open", attempts: 9 })
    // …and the tenant's admin sees its dead letter in the list, as any other.
    const listed = await (await request(`/v1/dlq?limit=200`, { token: tokenA })).json<any>()
    expect(listed.data.filter((r: any) => r.idempotency_key === key).map((r: any) => r.id)).toEqual([messages[0]!.id])
  })

  it("on the last delivery with D1 and R2 both refusing, the message is retried (never acked) and its loss logged; D1 back on an earlier delivery stores it directly", async () => {
    const run = unique("dll")
    const { messages } = deadLetters(run)
    const last = RetryPolicy.deadLetterConsumer.maxRetries + 1
    const outcome = await deliver(messages, last, FaultCases.outageEnv({ d1Down: true, r2Down: true }))
    expect(outcome.acked).toEqual([])
    expect(outcome.retried.map((r) => r.id)).toEqual(messages.map((m) => m.id).sort())
    expect(await FaultCases.spilledKeys(run)).toEqual([])
    // A delivery past the spill point with D1 up is stored directly: nothing goes to R2.
    expect((await deliver(messages, 9, testEnv)).acked).toEqual(messages.map((m) => m.id).sort())
    expect(await FaultCases.spilledKeys(run)).toEqual([])
    expect((await FaultCases.deadLetterRows(run)).length).toBe(2)
  })

  it("an object under the spill prefix that is not a spilled dead letter is left in place, counted and not stored; the others around it are recovered", async () => {
    const run = unique("dlx")
    const { messages } = deadLetters(run)
    const stray = DeadLetterSpill.keyOf(queue, `${run}_stray`)
    const mismatched = DeadLetterSpill.keyOf(queue, `${run}_renamed`)
    await env.PAYLOADS.put(stray, "not json {")
    expect((await deliver(messages, 9, FaultCases.outageEnv({ d1Down: true, r2Down: false }))).acked).toEqual(messages.map((m) => m.id).sort())
    // A spilled object copied to another key does not match its key: not trusted either.
    await env.PAYLOADS.put(mismatched, await (await env.PAYLOADS.get(DeadLetterSpill.keyOf(queue, messages[0]!.id)))!.text())
    expect((await spilledCount()).health).toBe(4)
    await FaultCases.cron(testEnv)
    expect((await FaultCases.deadLetterRows(run)).map((r) => r.id).sort()).toEqual(messages.map((m) => m.id).sort())
    expect(await FaultCases.spilledKeys(run)).toEqual([mismatched, stray].sort())
    expect((await spilledCount()).health).toBe(2)
    await env.PAYLOADS.delete([stray, mismatched])
  })

  it("a simulated 3-hour D1 outage (R2 refusing too for its first 40 min), 12 dead letters arriving through it: 0 lost, 0 doubled", async () => {
    const { card } = await FaultCases.longD1Outage({ deadLetters: 12, outageHours: 3, r2DownMinutes: 40, arrivalMinutes: 190, batchSize: 4 })
    expect(card).toMatchObject({ messages_lost: 0, duplicates_found: 0, dlq_found: 12, dropped_by_platform: 0, spilled_left: 0, records_exact: true })
    expect(card.spilled_at_outage_end).toBeGreaterThan(0)
    expect(card.passed, JSON.stringify(card)).toBe(true)
  }, 180_000)
})
