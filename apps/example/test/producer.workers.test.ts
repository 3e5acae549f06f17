import { env } from "cloudflare:workers"
import { Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { Failure, PayloadStore, Producer } from "@factline/core"
import { Bindings } from "@factline/core/runtime"
import { CallCompleted } from "../src/calls/Calls.js"
import { Blob } from "./TestModule.js"
import { drain } from "./Drain.js"
import { readStream, unique } from "./helpers.js"
import { platform } from "./worker.js"

/** The real events queue, counting sendBatch calls and their sizes. */
const countingQueue = () => {
  const calls: Array<number> = []
  const queue = {
    send: (body: unknown, options?: QueueSendOptions) => env.EVENTS_QUEUE.send(body, options),
    sendBatch: (messages: Iterable<MessageSendRequest>, options?: QueueSendBatchOptions) => {
      const list = [...messages]
      calls.push(list.length)
      return env.EVENTS_QUEUE.sendBatch(list, options)
    }
  } as Queue
  return { queue, calls }
}

const run = <A, E>(queue: Queue, program: (p: Producer.Producer["Service"]) => Effect.Effect<A, E>) =>
  Effect.runPromise(
    Effect.flatMap(Effect.service(Producer.Producer), program).pipe(
      Effect.provide(
        Producer.Producer.over(queue, { definitions: platform.registry.definitions, defaultSource: "billing-service", keys: { namespace: env.LEDGER, secretsKey: env.FACTLINE_SECRETS_KEY as string | undefined } }).pipe(
          Layer.provide(PayloadStore.PayloadStore.layer(Bindings.PayloadBucket.make(env.PAYLOADS)))
        )
      )
    )
  )

describe("Producer", () => {
  it("emitBatch validates, fills defaults and splits into sendBatch calls of at most 100", async () => {
    const { queue, calls } = countingQueue()
    const ids = Array.from({ length: 250 }, () => unique("call"))
    const envelopes = await run(queue, (p) =>
      p.emitBatch(ids.map((call_id) => ({
        definition: CallCompleted,
        payload: { call_id, buyer_id: "b", duration_s: 10, price_cents: 5, currency: "USD" },
        options: { tenant_id: "tenant-a", subject: call_id, idempotency_key: `done:${call_id}` }
      }))))
    expect(calls).toEqual([100, 100, 50])
    expect(envelopes[0]).toMatchObject({ schema_version: 3, message_type: "call.completed", source: "billing-service", correlation_id: `done:${ids[0]}` })
    expect(envelopes[0]!.message_id).toMatch(/^msg_/)
    await drain()
    // Every event arrived: one outcome per call in the facts copy.
    const arrived = await env.DB.prepare("SELECT COUNT(*) AS n FROM facts WHERE tenant_id = 'tenant-a' AND type = 'outcome' AND stream IN (SELECT value FROM json_each(?))")
      .bind(JSON.stringify(ids)).first<{ n: number }>()
    expect(arrived?.n).toBe(250)
  })

  it("refuses an invalid payload before sending anything", async () => {
    const { queue, calls } = countingQueue()
    const error = await run(queue, (p) =>
      Effect.flip(p.emit(CallCompleted, { call_id: "c", buyer_id: "b", duration_s: -1, price_cents: 5, currency: "usd" }, {
        tenant_id: "tenant-a", subject: "c", idempotency_key: "x"
      })))
    expect(error).toMatchObject({ _tag: "InvalidInput", code: "invalid_events", status: 400 })
    expect((error as Failure.InvalidInput).problems!.map((p) => p.path).sort()).toEqual(["payload.currency", "payload.duration_s"])
    expect(calls).toEqual([])
  })

  it("moves a payload over 64 KiB to R2 and sends a payload_ref", async () => {
    const { queue } = countingQueue()
    const blob = "y".repeat(70 * 1024)
    const subject = unique("blob")
    const [envelope] = [await run(queue, (p) => p.emit(Blob, { blob }, { tenant_id: "tenant-a", subject, idempotency_key: unique("k") }))]
    expect(envelope.payload).toBeUndefined()
    // Under a name the producer chose (not the reusable message_id), in the tenant's folder of `_payloads/`:
    // the one prefix the deploy's lifecycle rule expires, apart from the tenant's uploads, batches and archive.
    expect(envelope.payload_ref).toMatch(/^r2:\/\/factline-payloads\/_payloads\/tenant-a\/p_[0-9a-f-]{36}$/)
    expect(envelope.payload_ref).not.toContain(envelope.message_id)
    const key = envelope.payload_ref!.slice("r2://factline-payloads/".length)
    expect(await (await env.PAYLOADS.get(key))!.json()).toEqual({ blob })
    expect(await env.PAYLOADS.head(key.slice("_payloads/".length))).toBeNull() // nothing under the tenant's own prefix
    await drain()
    const stream = await readStream("tenant-a", subject)
    expect(stream.facts[0]!.data.blob).toBe(blob)
  })
})
