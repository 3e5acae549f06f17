/**
 * Defects: product code that throws (a bug, not a typed `TransientError` / `PermanentError`) gets a short
 * retry budget — three attempts, about 2 s and 4 s apart — and is then dead-lettered with reason `defect`,
 * its stack stored beside its error and shown by `GET /v1/dlq/:id`. Before, a throw was retried like a
 * transient failure for the queue's whole budget (about 15 minutes on the events queue).
 */
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { Failure } from "@factline/core"
import { RetryPolicy } from "@factline/core/runtime"
import type { PlatformEnv } from "@factline/workers"
import { drain } from "./Drain.js"
import { callCompleted, deadMessages, postEvents, readStream, request, tokenA, tokenB, unique } from "./helpers.js"
import { recordingBatch } from "./instrument.js"
import { platform } from "./worker.js"

const testEnv = env as unknown as PlatformEnv

const throwing = () => {
  const subject = unique("thrower")
  return {
    schema_version: 1, message_type: "test.thrower.happened", message_id: unique("msg"), idempotency_key: unique("key"), correlation_id: unique("corr"),
    tenant_id: "tenant-a", subject, source: "test", created_at: new Date().toISOString(), payload: {}
  }
}

/** One delivery of the same queue message (same id), at `attempts`, with the real retry delays (scale 1). */
const deliver = async (body: unknown, id: string, attempts: number) => {
  const batch = createMessageBatch("factline-events", [{ id, timestamp: new Date(), attempts, body }])
  const ctx = createExecutionContext()
  const recording = recordingBatch(batch)
  await platform.queue(recording.batch, { ...testEnv, FACTLINE_RETRY_DELAY_SCALE: "1" }, ctx)
  const result = await getQueueResult(batch, ctx)
  return { result, delay: recording.retries.get(id)?.delaySeconds }
}

describe("defects", () => {
  it("a throwing handler is retried twice within seconds, then dead-lettered on its third attempt with reason defect and its stack", async () => {
    const event = throwing()
    const id = unique("qm")
    const budget = Failure.defectBudget
    expect(budget.maxAttempts).toBe(3)

    const first = await deliver(event, id, 1)
    expect(first.result.retryMessages.map((r) => r.msgId)).toEqual([id])
    // The defect budget's delays (2 s, then 4 s, jittered over their upper half), not the events queue's 30 s and 60 s.
    const short = { ...RetryPolicy.events, initialDelaySeconds: budget.initialDelaySeconds, maxDelaySeconds: budget.maxDelaySeconds }
    expect(first.delay).toBe(RetryPolicy.delay(short, 1, RetryPolicy.jitterOf(id, 1)))
    expect(first.delay).toBeLessThanOrEqual(2)
    const second = await deliver(event, id, 2)
    expect(second.result.retryMessages).toHaveLength(1)
    expect(second.delay).toBeLessThanOrEqual(4)
    expect(await deadMessages(event.idempotency_key)).toEqual([])

    // Attempt 3 of the 6 the events queue allows: the budget is spent, so it is dead-lettered, then acked.
    const third = await deliver(event, id, 3)
    expect(third.result.retryMessages).toEqual([])
    expect(third.result.explicitAcks).toEqual([id])
    await drain()
    const [row, ...more] = await deadMessages(event.idempotency_key)
    expect(more).toEqual([])
    expect(row).toMatchObject({
      reason: "defect", attempts: 3, queue: "factline-events", tenant_id: "tenant-a", message_type: "test.thrower.happened",
      last_error: "TypeError: cannot read properties of undefined"
    })
    // The stack: the error's first line, then where the handler threw (TestModule's `thrower`).
    expect(row!.stack).toMatch(/^TypeError: cannot read properties of undefined\n\s+at /)
    expect(row!.stack).toMatch(/TestModule/)
    expect((await readStream("tenant-a", event.subject)).version).toBe(0)

    // The API shows the stack on the record (the list leaves it out), to its tenant only.
    const shown = await request(`/v1/dlq/${row!.id}`, { token: tokenA })
    expect(shown.status).toBe(200)
    const detail = await shown.json<{ reason: string; stack: string | null; last_error: string }>()
    expect(detail).toMatchObject({ reason: "defect", last_error: "TypeError: cannot read properties of undefined", stack: row!.stack })
    const listed = await (await request(`/v1/dlq?reason=defect&type=test.thrower.happened&limit=200`, { token: tokenA })).json<{ data: Array<Record<string, unknown>> }>()
    const summary = listed.data.find((r) => r.id === row!.id)
    expect(summary).toMatchObject({ reason: "defect" })
    expect(summary).not.toHaveProperty("stack")
    expect((await request(`/v1/dlq/${row!.id}`, { token: tokenB })).status).toBe(404)
  })

  it("through the real local queue: a posted event whose handler throws ends as one defect dead letter after 3 deliveries; its batch neighbour is appended", async () => {
    const event = throwing()
    const good = callCompleted()
    expect((await postEvents({ events: [event, good] })).status).toBe(202)
    await drain()
    const rows = await deadMessages(event.idempotency_key)
    expect(rows.map((r) => [r.reason, r.attempts])).toEqual([["defect", 3]])
    expect(rows[0]!.stack).toMatch(/^TypeError: cannot read properties of undefined\n/)
    expect((await readStream("tenant-a", good.subject)).facts.map((f) => f.type)).toContain("outcome")
  })

  it("a transient failure keeps the queue's full budget and stores no stack", async () => {
    const event = { ...throwing(), message_type: "test.broken.happened" }
    const id = unique("qm")
    const third = await deliver(event, id, 3)
    expect(third.result.retryMessages).toHaveLength(1)
    expect(third.delay).toBeGreaterThan(Failure.defectBudget.maxDelaySeconds)
    const last = await deliver(event, id, RetryPolicy.events.maxRetries + 1)
    expect(last.result.explicitAcks).toEqual([id])
    await drain()
    const [row] = await deadMessages(event.idempotency_key)
    expect(row).toMatchObject({ reason: "retries_exhausted", attempts: RetryPolicy.events.maxRetries + 1, stack: null })
  })
})
