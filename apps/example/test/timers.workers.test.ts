/**
 * Timers on the ledger shard's alarm: a processor schedules `reminder` (TestModule), the shard appends
 * `reminder_due` once at or after its time, and the fact goes downstream like any other — across
 * redeliveries of its cause, a restart of the shard, and a cancel followed by a new schedule.
 */
import { createExecutionContext, createMessageBatch, evictDurableObject, getQueueResult, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { FactMessage, type LedgerStorage } from "@factline/core/runtime"
import type { Fact } from "@factline/schemas"
import type { LedgerShard, PlatformEnv } from "@factline/workers"
import { drain } from "./Drain.js"
import { eventually, readStream, shardKeyOf, unique } from "./helpers.js"
import { platform } from "./worker.js"

const testEnv = env as unknown as PlatformEnv

const deliver = async (queue: string, bodies: ReadonlyArray<unknown>) => {
  const batch = createMessageBatch(queue, bodies.map((body) => ({ id: unique("qm"), timestamp: new Date(), attempts: 1, body })))
  const ctx = createExecutionContext()
  await platform.queue(batch, testEnv, ctx)
  return getQueueResult(batch, ctx)
}

const envelope = (subject: string, message_type: string, payload: Record<string, unknown>, idempotency_key = unique("key")) => ({
  schema_version: 1,
  message_type,
  message_id: unique("msg"),
  idempotency_key,
  correlation_id: unique("corr"),
  tenant_id: "tenant-a",
  subject,
  source: "test",
  created_at: new Date().toISOString(),
  payload
})
const requestReminder = (subject: string, after_s: number, note: string, key?: string) => envelope(subject, "test.reminder.requested", { after_s, note }, key)

const shardOf = async (stream: string) => env.LEDGER.get(env.LEDGER.idFromName(await shardKeyOf("tenant-a", stream))) as DurableObjectStub<LedgerShard>

/** The stream's timers and the shard's alarm, read inside the Durable Object. */
const timersOf = async (stream: string) =>
  runInDurableObject(await shardOf(stream), async (_instance, state) => ({
    timers: state.storage.sql.exec<LedgerStorage.TimerRow>("SELECT name, status, fire_at FROM timers WHERE stream = ? ORDER BY rowid", stream).toArray(),
    alarm: await state.storage.getAlarm()
  }))

const types = (facts: ReadonlyArray<Fact>) => facts.map((f) => f.type)
const due = (stream: string) => readStream("tenant-a", stream).then((s) => s.facts.filter((f) => f.type === "reminder_due"))

describe("timers", () => {
  it("a timer set by a processor fires once after its time, however often its cause and the fact are redelivered", async () => {
    const stream = unique("reminder")
    const key = unique("key")
    // The same message twice (a producer retry), then its fact redelivered twice to the processor.
    await deliver("factline-events", [requestReminder(stream, 2, "pay the invoice", key)])
    await deliver("factline-events", [requestReminder(stream, 2, "pay the invoice", key)])
    await drain()
    const requested = (await readStream("tenant-a", stream)).facts[0]!
    await deliver("factline-fact-processing", [FactMessage.make(requested)])
    await deliver("factline-fact-processing", [FactMessage.make(requested), FactMessage.make(requested)])

    const scheduled = await readStream("tenant-a", stream)
    expect(types(scheduled.facts)).toEqual(["reminder_requested", "timer_scheduled"])
    const timer = scheduled.facts[1]!
    const fireAt = Date.parse(requested.created_at) + 2_000
    expect(timer).toMatchObject({
      causation_id: requested.fact_id,
      caused_by: "remind",
      data: { name: "reminder", fire_at: new Date(fireAt).toISOString(), fact: { type: "reminder_due", data: { note: "pay the invoice" } } }
    })
    const before = await timersOf(stream)
    expect(before.timers).toEqual([{ name: "reminder", status: "pending", fire_at: fireAt }])
    expect(before.alarm).toBeLessThanOrEqual(fireAt)

    // The alarm run early fires nothing and comes back for the timer.
    expect(await runDurableObjectAlarm(await shardOf(stream))).toBe(true)
    expect(await due(stream)).toEqual([])
    expect((await timersOf(stream)).alarm).toBe(fireAt)

    // The shard's own alarm fires it.
    const [fired] = await eventually(async () => ((await due(stream)).length > 0 ? due(stream) : undefined), 10_000, "the timer to fire")
    expect(Date.parse(fired!.created_at)).toBeGreaterThanOrEqual(fireAt)
    expect(fired).toMatchObject({ causation_id: timer.fact_id, caused_by: "timer:reminder", correlation_id: timer.correlation_id, data: { note: "pay the invoice" } })
    expect((await timersOf(stream)).timers.map((t) => t.status)).toEqual(["fired"])

    // Fired facts go downstream: the processors of reminder_due, the facts copy.
    await drain()
    const after = await readStream("tenant-a", stream)
    expect(types(after.facts)).toEqual(["reminder_requested", "timer_scheduled", "reminder_due", "reminder_acknowledged"])
    const copied = await env.DB.prepare("SELECT type FROM facts WHERE tenant_id = 'tenant-a' AND stream = ? ORDER BY sequence").bind(stream).all<{ type: string }>()
    expect(copied.results.map((r) => r.type)).toEqual(["reminder_requested", "timer_scheduled", "reminder_due", "reminder_acknowledged"])

    // Another alarm, another redelivery of the cause: nothing more.
    await runDurableObjectAlarm(await shardOf(stream))
    await deliver("factline-fact-processing", [FactMessage.make(requested)])
    await drain()
    expect((await readStream("tenant-a", stream)).version).toBe(4)
    expect((await timersOf(stream)).alarm).toBe(null)
  })

  it("a pending timer survives a restart of its shard and fires once", async () => {
    const stream = unique("reminder")
    await deliver("factline-events", [requestReminder(stream, 2, "after a restart")])
    await drain()
    expect((await timersOf(stream)).timers.map((t) => t.status)).toEqual(["pending"])

    // The object is torn down (its in-memory state gone, its storage and alarm kept).
    await evictDurableObject(await shardOf(stream))
    const fired = await eventually(async () => ((await due(stream)).length > 0 ? due(stream) : undefined), 10_000, "the timer to fire after the restart")
    expect(fired.map((f) => f.data)).toEqual([{ note: "after a restart" }])

    // And torn down again after firing: a late alarm run appends nothing more.
    await evictDurableObject(await shardOf(stream)).catch(() => undefined)
    await runDurableObjectAlarm(await shardOf(stream))
    await drain()
    expect(types((await readStream("tenant-a", stream)).facts)).toEqual(["reminder_requested", "timer_scheduled", "reminder_due", "reminder_acknowledged"])
  })

  it("a cancelled timer does not fire; scheduled again, it fires once, for the new schedule", async () => {
    const stream = unique("reminder")
    await deliver("factline-events", [requestReminder(stream, 1, "first")])
    await drain()
    await deliver("factline-events", [envelope(stream, "test.reminder.cancelled", {})])
    await drain()
    await deliver("factline-events", [requestReminder(stream, 2, "second")])
    await drain()
    const { timers } = await timersOf(stream)
    // The new schedule is 2 s out: pending, or already fired when the drains above took that long (a loaded host).
    expect(timers.map((t) => t.name)).toEqual(["reminder", "reminder"])
    expect(timers[0]!.status).toBe("cancelled")
    expect(["pending", "fired"]).toContain(timers[1]!.status)

    const fired = await eventually(async () => ((await due(stream)).length > 0 ? due(stream) : undefined), 10_000, "the new schedule to fire")
    // The first schedule was due before the second: had the cancel not held, it would have fired by now.
    expect(Date.now()).toBeGreaterThan(timers[0]!.fire_at)
    expect(fired.map((f) => f.data)).toEqual([{ note: "second" }])
    await runDurableObjectAlarm(await shardOf(stream))
    await drain()
    expect(types((await readStream("tenant-a", stream)).facts)).toEqual([
      "reminder_requested", "timer_scheduled", "timer_cancelled", "reminder_requested", "timer_scheduled", "reminder_due", "reminder_acknowledged"
    ])
    expect((await due(stream)).map((f) => f.data)).toEqual([{ note: "second" }])
  })

  it("scheduling a name that is pending replaces it: only the latest schedule fires", async () => {
    const stream = unique("reminder")
    await deliver("factline-events", [requestReminder(stream, 1, "old")])
    await deliver("factline-events", [requestReminder(stream, 1, "new")])
    await drain()
    expect((await timersOf(stream)).timers.map((t) => t.status)).toEqual(["replaced", "pending"])
    const fired = await eventually(async () => ((await due(stream)).length > 0 ? due(stream) : undefined), 10_000, "the timer to fire")
    await runDurableObjectAlarm(await shardOf(stream))
    expect(fired.map((f) => f.data)).toEqual([{ note: "new" }])
    expect((await due(stream)).map((f) => f.data)).toEqual([{ note: "new" }])
  })
})
