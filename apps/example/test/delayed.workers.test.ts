/**
 * Delayed and staggered sends (seed 003, "Delayed Messages and Backoff"), on the local broker: an event sent with
 * `delay_seconds` is not processed before its `deliver_after` and is after it; a retry does not restart the delay;
 * a copy that arrives early (a replay, a re-send, a redelivery) is parked for what is left, spending none of its
 * attempts, even on its last one.
 */
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { PayloadStore, Producer } from "@factline/core"
import { Bindings, QueueGroups, RetryPolicy } from "@factline/core/runtime"
import type { PlatformEnv } from "@factline/workers"
import { CallCompleted } from "../src/calls/Calls.js"
import { drain, snapshot } from "./Drain.js"
import { callCompleted, deadMessages, postEvents, readStream, request, tokenA, unique } from "./helpers.js"
import { platform } from "./worker.js"

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const flaky = (fail_times: number, overrides: Record<string, unknown> = {}) => {
  const subject = unique("flaky")
  return {
    schema_version: 1, message_type: "test.flaky.happened", message_id: unique("msg"), idempotency_key: `flaky:${subject}`,
    tenant_id: "tenant-a", subject, source: "test", created_at: new Date().toISOString(), payload: { fail_times }, ...overrides
  }
}

/**
 * A read of the stream while its event should still be waiting: judged by when the read ended, since a loaded
 * host (two test files share the two cores) can stretch a test's sleep past the delay. Before the delay nothing
 * may be stored; whatever is stored was decided after it.
 */
const nothingBefore = async (subject: string, deliverAfter: number) => {
  const { facts } = await readStream("tenant-a", subject)
  if (Date.now() < deliverAfter) expect(facts).toEqual([])
  for (const fact of facts) expect(Date.parse(fact.created_at)).toBeGreaterThanOrEqual(deliverAfter)
}

/** Deliveries on the events queue's group queues (factline-events-0 …), added up. */
const deliveredOnEvents = () =>
  Object.entries(snapshot()).filter(([queue]) => QueueGroups.purposeOf(queue) === "factline-events").reduce((n, [, t]) => n + t.delivered, 0)

describe("delayed sends", () => {
  it("an event posted with delay_seconds is not processed before its delay and is once it has passed", async () => {
    await drain()
    const event = callCompleted({ delay_seconds: 2 })
    const posted = await postEvents(event)
    expect(posted.status).toBe(202)
    const deliverAfter = Date.parse(event.created_at) + 2_000
    // Well inside the delay: the broker has not delivered it, nothing is stored.
    await sleep(1_000)
    await nothingBefore(event.subject, deliverAfter)
    await drain()
    const { facts } = await readStream("tenant-a", event.subject)
    expect(facts.map((f) => f.type)).toContain("outcome")
    for (const fact of facts) expect(Date.parse(fact.created_at)).toBeGreaterThanOrEqual(deliverAfter)
  })

  it("a handler that fails once is retried at once after the delay: the retry does not restart it", async () => {
    await drain()
    const event = flaky(1, { delay_seconds: 3 })
    const deliverAfter = Date.parse(event.created_at) + 3_000
    expect((await postEvents(event)).status).toBe(202)
    await drain()
    const { facts } = await readStream("tenant-a", event.subject)
    expect(facts.map((f) => [f.type, f.data])).toEqual([["flaky_done", { after_failures: 1 }]])
    const decidedAt = Date.parse(facts[0]!.created_at)
    expect(decidedAt).toBeGreaterThanOrEqual(deliverAfter)
    // The retry (delays scaled to 0 in tests) came right after the first attempt: a restarted delay would have put
    // it at least 3 s after deliver_after.
    expect(decidedAt).toBeLessThan(deliverAfter + 3_000)
  })

  it("a copy that arrives before its deliver_after (a replay, a re-send) is parked for what is left, then processed once", async () => {
    await drain()
    const deliverAfter = new Date(Date.now() + 2_000).toISOString()
    // An envelope as the producer wrote it, sent again without the queue's delay (as a dead-letter replay would).
    const event = { ...callCompleted(), deliver_after: deliverAfter }
    const before = deliveredOnEvents()
    await env.EVENTS_QUEUE.send(event, { contentType: "json" })
    // Delivered early (the broker's 1 s batch wait), and left unprocessed.
    for (let i = 0; i < 30 && deliveredOnEvents() === before; i++) await sleep(50)
    expect(deliveredOnEvents()).toBeGreaterThan(before)
    await nothingBefore(event.subject, Date.parse(deliverAfter))
    await drain()
    const { facts } = await readStream("tenant-a", event.subject)
    expect(facts.filter((f) => f.type === "outcome")).toHaveLength(1)
    for (const fact of facts) expect(Date.parse(fact.created_at)).toBeGreaterThanOrEqual(Date.parse(deliverAfter))
    expect(await deadMessages(event.idempotency_key)).toEqual([])
  })

  it("a message not yet due on its last allowed attempt is parked, not dead-lettered, and spends no attempt", async () => {
    await drain()
    const deliverAfter = new Date(Date.now() + 1_500).toISOString()
    const event = { ...callCompleted(), deliver_after: deliverAfter }
    const batch = createMessageBatch("factline-events", [{ id: unique("qm"), timestamp: new Date(), attempts: RetryPolicy.events.maxRetries + 1, body: event }])
    const ctx = createExecutionContext()
    await platform.queue(batch, env as unknown as PlatformEnv, ctx)
    const result = await getQueueResult(batch, ctx)
    // Acked: the copy sent again with the remaining delay is a new message, on its first attempt.
    expect(result.explicitAcks).toHaveLength(1)
    expect(result.retryMessages).toEqual([])
    await nothingBefore(event.subject, Date.parse(deliverAfter))
    await drain()
    expect((await readStream("tenant-a", event.subject)).facts.filter((f) => f.type === "outcome")).toHaveLength(1)
    expect(await deadMessages(event.idempotency_key)).toEqual([])
  })

  it("a bad delay is a 400 naming the field, and nothing is accepted", async () => {
    for (const delay_seconds of [-1, 43_201, 2.5, "10"]) {
      const response = await postEvents({ events: [callCompleted(), callCompleted({ delay_seconds })] })
      expect(response.status).toBe(400)
      const body = await response.json() as { error: { code: string; details: { problems: Array<{ path: string }> } } }
      expect(body.error.code).toBe("invalid_events")
      expect(body.error.details.problems.map((p) => p.path)).toEqual(["events.1.delay_seconds"])
    }
    const tooLate = await postEvents(callCompleted({ deliver_after: new Date(Date.now() + 13 * 3_600_000).toISOString() }))
    expect(tooLate.status).toBe(400)
    expect(((await tooLate.json()) as { error: { details: { problems: Array<{ path: string }> } } }).error.details.problems.map((p) => p.path)).toEqual(["deliver_after"])
  })

  it("CloudEvents carry the delay as the delayseconds extension (a decimal string in binary mode)", async () => {
    await drain()
    const subject = unique("call")
    const sentAt = Date.now()
    const response = await request("/v1/events", {
      method: "POST",
      token: tokenA,
      headers: { "ce-specversion": "1.0", "ce-type": "call.completed", "ce-id": unique("evt"), "ce-source": "/billing", "ce-subject": subject, "ce-delayseconds": "1", "content-type": "application/json" },
      body: JSON.stringify({ call_id: subject, buyer_id: "buyer_1", duration_s: 75, price_cents: 250, currency: "EUR" })
    })
    expect(response.status).toBe(202)
    await sleep(500)
    await nothingBefore(subject, sentAt + 1_000)
    await drain()
    expect((await readStream("tenant-a", subject)).facts.map((f) => f.type)).toContain("outcome")
  })
})

describe("staggered sends", () => {
  it("emitBatch with a stagger spreads the batch: event i is sent i steps later, each due at its own deliver_after", async () => {
    await drain()
    const ids = [unique("call"), unique("call"), unique("call")]
    const sent: Array<MessageSendRequest> = []
    const queue = {
      send: (body: unknown, options?: QueueSendOptions) => env.EVENTS_QUEUE.send(body, options),
      sendBatch: (messages: Iterable<MessageSendRequest>, options?: QueueSendBatchOptions) => {
        const list = [...messages]
        sent.push(...list)
        return env.EVENTS_QUEUE.sendBatch(list, options)
      }
    } as Queue
    const envelopes = await Effect.runPromise(
      Effect.flatMap(Effect.service(Producer.Producer), (p) =>
        p.emitBatch(ids.map((call_id) => ({
          definition: CallCompleted,
          payload: { call_id, buyer_id: "b", duration_s: 10, price_cents: 5, currency: "USD" },
          options: { tenant_id: "tenant-a", subject: call_id, idempotency_key: `call.completed:${call_id}` }
        })), { stagger: { seconds: 1 } })).pipe(
        Effect.provide(Producer.Producer.over(queue, { definitions: platform.registry.definitions, keys: { namespace: env.LEDGER, secretsKey: env.FACTLINE_SECRETS_KEY as string | undefined } }).pipe(Layer.provide(PayloadStore.PayloadStore.layer(Bindings.PayloadBucket.make(env.PAYLOADS)))))
      )
    )
    // The first is due at once (no deliver_after), the others one and two seconds after it.
    expect(envelopes[0]!.deliver_after).toBeUndefined()
    const created = Date.parse(envelopes[1]!.created_at)
    expect(envelopes.slice(1).map((e) => Date.parse(e.deliver_after!) - created)).toEqual([1_000, 2_000])
    expect(sent.map((m) => m.delaySeconds)).toEqual([undefined, 1, 2])
    await drain()
    const decided = await Promise.all(ids.map(async (id) => Date.parse((await readStream("tenant-a", id)).facts[0]!.created_at)))
    expect(decided[1]).toBeGreaterThanOrEqual(created + 1_000)
    expect(decided[2]).toBeGreaterThanOrEqual(created + 2_000)
  })
})
