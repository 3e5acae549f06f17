import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { Failure } from "@factline/core"
import { RetryPolicy } from "@factline/core/runtime"
import type { PlatformEnv } from "@factline/workers"
import { drain } from "./Drain.js"
import { callCompleted, deadMessages, readStream, shardKeyOf, unique } from "./helpers.js"
import { newCounts, recordingBatch } from "./instrument.js"
import * as CountingBindings from "@factline/core/testing/bindings"
import { platform } from "./worker.js"

const testEnv = env as unknown as PlatformEnv

/** One batch through the platform's queue handler; `ids` and `sentAt` make it a redelivery of the same messages. */
const deliver = async (bodies: ReadonlyArray<unknown>, options: { attempts?: number; env?: PlatformEnv; queue?: string; ids?: ReadonlyArray<string>; sentAt?: Date } = {}) => {
  const batch = createMessageBatch(
    options.queue ?? "factline-events",
    bodies.map((body, i) => ({ id: options.ids?.[i] ?? unique("qm"), timestamp: options.sentAt ?? new Date(), attempts: options.attempts ?? 1, body }))
  )
  const ctx = createExecutionContext()
  const recording = recordingBatch(batch)
  await platform.queue(recording.batch, options.env ?? testEnv, ctx)
  const result = await getQueueResult(batch, ctx)
  const delays = result.retryMessages.map((r) => recording.retries.get(r.msgId)?.delaySeconds)
  return { batch, result, delays }
}

const envelope = (message_type: string, payload: Record<string, unknown>, overrides: Record<string, unknown> = {}) => {
  const subject = unique("subject")
  return {
    schema_version: 1,
    message_type,
    message_id: unique("msg"),
    idempotency_key: unique("key"),
    correlation_id: unique("corr"),
    tenant_id: "tenant-a",
    subject,
    source: "test",
    created_at: new Date().toISOString(),
    payload,
    ...overrides
  }
}

describe("consumer runtime", () => {
  it("a message delivered five times in one batch appends one fact, and every copy is acked", async () => {
    const event = callCompleted()
    const copies = Array.from({ length: 5 }, () => ({ ...event, message_id: unique("msg") }))
    const { batch, result } = await deliver(copies)
    expect(result.retryMessages).toEqual([])
    expect(result.explicitAcks.sort()).toEqual(batch.messages.map((m) => m.id).sort())
    const stream = await readStream("tenant-a", event.subject)
    expect(stream.facts.filter((f) => f.causation_id === event.idempotency_key).map((f) => f.type)).toEqual(["outcome"])
  })

  it("a message delivered five times across batches appends one fact", async () => {
    const event = callCompleted()
    for (let i = 0; i < 5; i++) {
      const { result } = await deliver([{ ...event, message_id: unique("msg") }], { attempts: i + 1 })
      expect(result.explicitAcks).toHaveLength(1)
    }
    const stream = await readStream("tenant-a", event.subject)
    expect(stream.facts.filter((f) => f.causation_id === event.idempotency_key)).toHaveLength(1)
  })

  it("two tenants may use the same idempotency key: each gets its own fact", async () => {
    const event = callCompleted()
    await deliver([event, { ...event, tenant_id: "tenant-b", message_id: unique("msg") }])
    const outcomes = async (tenant: string) => (await readStream(tenant, event.subject)).facts.filter((f) => f.type === "outcome")
    expect(await outcomes("tenant-a")).toHaveLength(1)
    expect(await outcomes("tenant-b")).toHaveLength(1)
  })

  it("undecodable, unknown-type and too-new messages are dead-lettered at once with their reason; the rest of the batch is acked", async () => {
    const good1 = callCompleted()
    const good2 = callCompleted()
    const garbage = { idempotency_key: unique("garbage"), tenant_id: "tenant-a", message_type: "call.completed", hello: "world" }
    const unknown = envelope("nobody.handles_this", { x: 1 })
    const tooNew = callCompleted({ schema_version: 4 })
    const badPayload = callCompleted({}, { duration_s: "long" })
    const { batch, result } = await deliver([good1, garbage, unknown, good2, tooNew, badPayload])
    expect(result.retryMessages).toEqual([])
    expect(result.explicitAcks.sort()).toEqual(batch.messages.map((m) => m.id).sort())
    expect((await readStream("tenant-a", good1.subject)).facts[0]!.type).toBe("outcome")
    expect((await readStream("tenant-a", good2.subject)).facts[0]!.type).toBe("outcome")
    expect((await readStream("tenant-a", tooNew.subject)).version).toBe(0)

    const expectations: Array<[string, string, RegExp]> = [
      [garbage.idempotency_key, "decode_error", /schema_version: Missing key/],
      [unknown.idempotency_key, "unknown_message_type", /nobody\.handles_this/],
      [tooNew.idempotency_key, "unsupported_version", /schema_version 4 is not supported/],
      [badPayload.idempotency_key, "decode_error", /payload\.duration_s/]
    ]
    await drain()
    for (const [key, reason, error] of expectations) {
      const rows = await deadMessages(key)
      expect(rows).toHaveLength(1)
      expect(rows[0]).toMatchObject({ reason, attempts: 1, queue: "factline-events", status: "open" })
      expect(rows[0]!.last_error).toMatch(error)
    }
    // The original message is kept untouched for replay.
    const [row] = await deadMessages(tooNew.idempotency_key)
    expect(JSON.parse(row!.original_message)).toEqual(tooNew)
  })

  it("a transiently failing handler is retried with the policy's delay, then succeeds", async () => {
    const event = envelope("test.flaky.happened", { fail_times: 2 })
    const withPolicyDelays = { ...testEnv, FACTLINE_RETRY_DELAY_SCALE: "1" }
    const ids = [unique("qm")]
    const first = await deliver([event], { attempts: 1, env: withPolicyDelays, ids })
    expect(first.result.retryMessages).toEqual([{ msgId: ids[0] }])
    // The policy's delay, jittered over its upper half by the message's id and attempt.
    expect(first.delays).toEqual([RetryPolicy.delay(RetryPolicy.events, 1, RetryPolicy.jitterOf(ids[0]!, 1))])
    expect(first.delays[0]).toBeGreaterThanOrEqual(15)
    expect(first.delays[0]).toBeLessThanOrEqual(30)

    const second = await deliver([event], { attempts: 2, env: withPolicyDelays, ids })
    expect(second.delays).toEqual([RetryPolicy.delay(RetryPolicy.events, 2, RetryPolicy.jitterOf(ids[0]!, 2))])
    expect(second.delays[0]).toBeGreaterThanOrEqual(30)
    expect(second.delays[0]).toBeLessThanOrEqual(60)

    const third = await deliver([event], { attempts: 3, env: withPolicyDelays })
    expect(third.result.retryMessages).toEqual([])
    expect(third.result.explicitAcks).toHaveLength(1)
    const stream = await readStream("tenant-a", event.subject)
    expect(stream.facts.map((f) => [f.type, f.data])).toEqual([["flaky_done", { after_failures: 2 }]])
  })

  it("a message that keeps failing reaches the DLQ on its last attempt with attempts and last_error", async () => {
    const event = envelope("test.broken.happened", {})
    const withPolicyDelays = { ...testEnv, FACTLINE_RETRY_DELAY_SCALE: "1" }
    const ids = [unique("qm")]
    const delays: Array<number | undefined> = []
    for (let attempts = 1; attempts <= RetryPolicy.events.maxRetries; attempts++) {
      const { result, delays: asked } = await deliver([event], { attempts, env: withPolicyDelays, ids })
      expect(result.explicitAcks).toEqual([])
      delays.push(...asked)
    }
    const policy = [30, 60, 120, 240, 480]
    expect(delays).toEqual(policy.map((_, i) => RetryPolicy.delay(RetryPolicy.events, i + 1, RetryPolicy.jitterOf(ids[0]!, i + 1))))
    delays.forEach((d, i) => expect(d! >= policy[i]! / 2 && d! <= policy[i]!, `retry ${i + 1}: ${d} s`).toBe(true))
    const last = await deliver([event], { attempts: RetryPolicy.events.maxRetries + 1, env: withPolicyDelays, ids })
    expect(last.result.retryMessages).toEqual([])
    expect(last.result.explicitAcks).toHaveLength(1)
    await drain()
    const rows = await deadMessages(event.idempotency_key)
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({
      reason: "retries_exhausted",
      attempts: 6,
      last_error: "TransientError: dependency is down",
      queue: "factline-events",
      tenant_id: "tenant-a",
      message_type: "test.broken.happened"
    })
    expect(Date.parse(rows[0]!.first_attempted_at)).toBeLessThanOrEqual(Date.parse(rows[0]!.last_attempted_at))
    expect((await readStream("tenant-a", event.subject)).version).toBe(0)
  })

  it("a burst of transient failures is retried spread over the delay's upper half, not as one burst", async () => {
    const burst = Array.from({ length: 40 }, () => envelope("test.broken.happened", {}))
    const { batch, result, delays } = await deliver(burst, { env: { ...testEnv, FACTLINE_RETRY_DELAY_SCALE: "1" } })
    expect(result.retryMessages).toHaveLength(40)
    const byId = new Map(result.retryMessages.map((r, i) => [r.msgId, delays[i]!]))
    for (const m of batch.messages) expect(byId.get(m.id)).toBe(RetryPolicy.delay(RetryPolicy.events, 1, RetryPolicy.jitterOf(m.id, 1)))
    expect(Math.min(...delays.map(Number))).toBeGreaterThanOrEqual(15)
    expect(Math.max(...delays.map(Number))).toBeLessThanOrEqual(30)
    // Without jitter all 40 would come back 30 s later, together.
    expect(new Set(delays).size).toBeGreaterThanOrEqual(8)
  })

  it("a dead letter's first_attempted_at is its first processing attempt, not the time it was sent", async () => {
    // Sent two hours before it is first processed (a backlog, a send delay): the queue's timestamp says when it was sent.
    const sentAt = new Date(Date.now() - 2 * 3600_000)
    const event = envelope("test.broken.happened", {})
    const ids = [unique("qm")]
    const firstAttempt = Date.now()
    await deliver([event], { attempts: 1, ids, sentAt })
    const lastAttempt = Date.now()
    for (let attempts = 2; attempts <= RetryPolicy.events.maxRetries + 1; attempts++) await deliver([event], { attempts, ids, sentAt })
    await drain()
    const [row] = await deadMessages(event.idempotency_key)
    expect(row).toMatchObject({ reason: "retries_exhausted", attempts: RetryPolicy.events.maxRetries + 1 })
    const first = Date.parse(row!.first_attempted_at)
    expect(first).toBeGreaterThanOrEqual(firstAttempt)
    expect(first).toBeLessThanOrEqual(lastAttempt)
    expect(first).toBeLessThanOrEqual(Date.parse(row!.last_attempted_at))

    // Refused for good on its first attempt: that attempt, too, is now, not the send time.
    const refused = envelope("test.refused.happened", {})
    const before = Date.now()
    await deliver([refused], { attempts: 1, sentAt })
    await drain()
    const [once] = await deadMessages(refused.idempotency_key)
    expect(Date.parse(once!.first_attempted_at)).toBeGreaterThanOrEqual(before)
  })

  it("a dead letter whose first attempt could not be recorded gives its send time, the earliest it can have been", async () => {
    const sentAt = new Date(Date.now() - 3600_000)
    const event = envelope("test.broken.happened", {})
    // Delivered first at attempt 2 under this id (its attempt 1 left no record), then exhausted.
    await deliver([event], { attempts: RetryPolicy.events.maxRetries + 1, sentAt })
    await drain()
    const [row] = await deadMessages(event.idempotency_key)
    expect(row!.first_attempted_at).toBe(sentAt.toISOString())
  })

  it("a permanent handler failure is dead-lettered at once", async () => {
    const event = envelope("test.refused.happened", {})
    const { result } = await deliver([event])
    expect(result.retryMessages).toEqual([])
    await drain()
    const rows = await deadMessages(event.idempotency_key)
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({ reason: "permanent_failure", attempts: 1, last_error: "this can never succeed" })
  })

  it("a handler that throws only fails its own message, retried on the defect budget's short delay (defects.workers.test.ts)", async () => {
    const throwing = envelope("test.thrower.happened", {})
    const good = callCompleted()
    const { batch, result, delays } = await deliver([throwing, good], { env: { ...testEnv, FACTLINE_RETRY_DELAY_SCALE: "1" } })
    expect(result.retryMessages.map((r) => r.msgId)).toEqual([batch.messages[0]!.id])
    const defects = { ...RetryPolicy.events, initialDelaySeconds: Failure.defectBudget.initialDelaySeconds, maxDelaySeconds: Failure.defectBudget.maxDelaySeconds }
    expect(delays).toEqual([RetryPolicy.delay(defects, 1, RetryPolicy.jitterOf(batch.messages[0]!.id, 1))])
    expect(result.explicitAcks).toEqual([batch.messages[1]!.id])
    expect((await readStream("tenant-a", good.subject)).facts[0]!.type).toBe("outcome")
  })

  it("a message the webhooks consumer cannot decode is dead-lettered at once with decode_error, never silently acked", async () => {
    const key = unique("webhook")
    const body = { ...envelope("fact.charge", { webhook_config_id: "w", webhook_config_version: 1, fact_id: "f", fact_type: "charge", payload: {} }), idempotency_key: key }
    const { result } = await deliver([body], { queue: "factline-webhooks" })
    expect(result.explicitAcks).toHaveLength(1)
    await drain()
    const rows = await deadMessages(key)
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({ queue: "factline-webhooks", reason: "decode_error" })
    expect(JSON.parse(rows[0]!.original_message)).toEqual(body)
  })

  it("a message whose payload cannot be loaded (R2 down) is retried, and on its last attempt dead-lettered with the error, not left to the platform", async () => {
    const event = envelope("test.blob.stored", {})
    const { payload: _, ...withoutPayload } = event
    const ref = { ...withoutPayload, payload_ref: `r2://factline-payloads/tenant-a/${unique("blob")}` }
    const r2Down = { ...testEnv, PAYLOADS: { get: async () => { throw new Error("R2 unavailable") }, put: async () => { throw new Error("R2 unavailable") } } } as unknown as PlatformEnv
    const early = await deliver([ref], { attempts: 1, env: r2Down })
    expect(early.result.retryMessages).toHaveLength(1)
    expect(await deadMessages(ref.idempotency_key)).toEqual([])
    const last = await deliver([ref], { attempts: RetryPolicy.events.maxRetries + 1, env: r2Down })
    expect(last.result.retryMessages).toEqual([])
    expect(last.result.explicitAcks).toHaveLength(1)
    await drain()
    const rows = await deadMessages(ref.idempotency_key)
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({ reason: "retries_exhausted", attempts: RetryPolicy.events.maxRetries + 1, queue: "factline-events" })
    expect(rows[0]!.last_error).toMatch(/R2 unavailable/)
  })

  it("a payload_ref whose object is missing is dead-lettered as payload_missing", async () => {
    const event = envelope("test.blob.stored", {})
    const { payload: _, ...withoutPayload } = event
    const ref = { ...withoutPayload, payload_ref: `r2://factline-payloads/tenant-a/${unique("gone")}` }
    const foreign = { ...withoutPayload, idempotency_key: unique("foreign"), payload_ref: `r2://factline-payloads/tenant-b/x` }
    const { result } = await deliver([ref, foreign])
    expect(result.retryMessages).toEqual([])
    await drain()
    for (const key of [ref.idempotency_key, foreign.idempotency_key]) {
      const rows = await deadMessages(key)
      expect(rows).toHaveLength(1)
      expect(rows[0]!.reason).toBe("payload_missing")
    }
  })

  it("a payload_ref loads from the tenant's _payloads/ folder and from the layout before it, never from another tenant's folder", async () => {
    const stored = async (key: string, blob: string) => {
      await testEnv.PAYLOADS.put(key, JSON.stringify({ blob }))
      const { payload: _, ...withoutPayload } = envelope("test.blob.stored", {})
      return { ...withoutPayload, payload_ref: `r2://factline-payloads/${key}` }
    }
    const current = await stored(`_payloads/tenant-a/${unique("p")}`, "current layout")
    const legacy = await stored(`tenant-a/${unique("p")}`, "before _payloads/")
    // The object exists: only the tenant check stands between tenant-a's message and tenant-b's payload.
    const foreign = await stored(`_payloads/tenant-b/${unique("p")}`, "tenant-b's")
    // Nor the tenant's own uploads (an import's file, any size): no producer ever wrote a reference there.
    const upload = await stored(`tenant-a/uploads/${unique("p")}.json`, "an upload")
    const { result } = await deliver([current, legacy, foreign, upload])
    expect(result.retryMessages).toEqual([])
    await drain()
    for (const [message, blob] of [[current, "current layout"], [legacy, "before _payloads/"]] as const) {
      expect((await readStream("tenant-a", message.subject)).facts.map((f) => [f.type, f.data.blob])).toEqual([["blob_stored", blob]])
      expect(await deadMessages(message.idempotency_key)).toEqual([])
    }
    for (const refused of [foreign, upload]) {
      expect((await readStream("tenant-a", refused.subject)).facts).toEqual([])
      const rows = await deadMessages(refused.idempotency_key)
      expect(rows.map((r) => r.reason)).toEqual(["payload_missing"])
      expect(rows[0]!.last_error).toContain("payload_ref must start with r2://factline-payloads/_payloads/tenant-a/")
    }
  })

  it("D1 round trips and ledger RPCs per batch do not grow with the batch size", async () => {
    const measure = async (size: number, streams: number) => {
      const counts = newCounts()
      const instrumented = CountingBindings.env(testEnv, counts)
      const subjects = Array.from({ length: streams }, () => unique("call"))
      const events = Array.from({ length: size }, (_, i) => callCompleted({ subject: subjects[i % streams], idempotency_key: unique("k") }, { call_id: subjects[i % streams] }))
      const { result } = await deliver(events, { env: instrumented })
      expect(result.explicitAcks).toHaveLength(size)
      const total = await Promise.all(subjects.map((s) => readStream("tenant-a", s)))
      expect(total.reduce((n, s) => n + s.facts.filter((f) => f.type === "outcome").length, 0)).toBe(size)
      const shards = new Set(await Promise.all(subjects.map((s) => shardKeyOf("tenant-a", s)))).size
      return { counts, shards }
    }
    const ten = await measure(10, 5)
    const hundred = await measure(100, 5)
    // No inbox: one round trip binds every key to its payload hash (accepted_keys), one upserts the batch's
    // metrics rollup, plus registering a tenant the isolate has not seen yet (cached afterwards).
    expect(hundred.counts.d1RoundTrips).toBe(ten.counts.d1RoundTrips)
    expect(hundred.counts.d1RoundTrips).toBeGreaterThanOrEqual(2)
    expect(hundred.counts.d1RoundTrips).toBeLessThanOrEqual(3)
    // One RPC per shard touched, one sendBatch per destination (outcome goes to projections and fact-processing).
    expect(ten.counts.doRpcs).toBe(ten.shards)
    expect(hundred.counts.doRpcs).toBe(hundred.shards)
    expect([ten.counts.queueSends, hundred.counts.queueSends]).toEqual([2, 2])
    expect([ten.counts.queueMessages, hundred.counts.queueMessages]).toEqual([2, 2])
  })
})
