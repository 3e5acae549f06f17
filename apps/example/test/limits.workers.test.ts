/**
 * Size limits, end to end: payloads around the 64 KiB offload threshold and the 128 KB queue message
 * limit, up to 1 MiB, travel producer → queue → handler → ledger → relay → projections intact; batches
 * past `sendBatch`'s 100 messages are split and all arrive.
 */
import { env } from "cloudflare:workers"
import { Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { PayloadStore, Producer } from "@factline/core"
import { Bindings } from "@factline/core/runtime"
import { CallCompleted } from "../src/calls/Calls.js"
import { Blob } from "./TestModule.js"
import { drain } from "./Drain.js"
import { readStream, unique } from "./helpers.js"
import { platform } from "./worker.js"

const sends: Array<number> = []
const queue = {
  send: (body: unknown, options?: QueueSendOptions) => env.EVENTS_QUEUE.send(body, options),
  sendBatch: (messages: Iterable<MessageSendRequest>, options?: QueueSendBatchOptions) => {
    const list = [...messages]
    sends.push(list.length)
    return env.EVENTS_QUEUE.sendBatch(list, options)
  }
} as unknown as Queue

const run = <A, E>(program: (p: Producer.Producer["Service"]) => Effect.Effect<A, E>) =>
  Effect.runPromise(
    Effect.flatMap(Effect.service(Producer.Producer), program).pipe(
      Effect.provide(
        Producer.Producer.over(queue, { definitions: platform.registry.definitions, defaultSource: "limits", keys: { namespace: env.LEDGER, secretsKey: env.FACTLINE_SECRETS_KEY as string | undefined } }).pipe(
          Layer.provide(PayloadStore.PayloadStore.layer(Bindings.PayloadBucket.make(env.PAYLOADS)))
        )
      )
    )
  )

const copied = (factId: string) =>
  env.DB.prepare("SELECT length(body) AS bytes FROM facts WHERE tenant_id = 'tenant-a' AND fact_id = ?").bind(factId).first<{ bytes: number }>()

describe("limits", () => {
  it.each([63, 64, 65, 127, 1024])("a %i KiB payload reaches the ledger and the facts copy intact", async (kib) => {
    const subject = unique("blob")
    const blob = "x".repeat(kib * 1024 - 40) + unique("end")
    await run((p) => p.emit(Blob, { blob }, { tenant_id: "tenant-a", subject, idempotency_key: unique("blob") }))
    await drain()
    const stream = await readStream("tenant-a", subject)
    expect(stream.facts.map((f) => [f.type, f.data.blob === blob])).toEqual([["blob_stored", true]])
    // The relay packs it with others, or sends it alone through R2 when it cannot share a message.
    const row = await copied(stream.facts[0]!.fact_id)
    expect(row?.bytes).toBe(JSON.stringify({ blob }).length)
    // A fact over the 100 KB a fact message carries went alone through R2, under `_payloads/` (what the lifecycle
    // rule expires), never under the tenant's own prefix (its uploads, batches and archive).
    const factId = stream.facts[0]!.fact_id
    const offloaded = await env.PAYLOADS.head(`_payloads/tenant-a/facts/${factId}`)
    expect(offloaded !== null, `fact ${factId} in R2`).toBe(kib >= 127)
    expect(await env.PAYLOADS.head(`tenant-a/facts/${factId}`)).toBeNull()
  }, 60_000)

  it.each([101, 1_000])("emitBatch of %i events is split into sendBatch calls of at most 100, and every event arrives", async (n) => {
    sends.length = 0
    const ids = Array.from({ length: n }, () => unique("call"))
    await run((p) =>
      p.emitBatch(ids.map((call_id) => ({
        definition: CallCompleted,
        payload: { call_id, buyer_id: "limits", duration_s: 10, price_cents: 1, currency: "USD" },
        options: { tenant_id: "tenant-a", subject: call_id, idempotency_key: `call.completed:${call_id}` }
      }))))
    expect(sends.every((size) => size <= 100)).toBe(true)
    expect(sends.reduce((a, b) => a + b, 0)).toBe(n)
    await drain({ timeoutMs: 60_000 })
    const { results } = await env.DB.prepare("SELECT COUNT(*) AS n FROM facts WHERE tenant_id = 'tenant-a' AND type = 'outcome' AND stream IN (SELECT value FROM json_each(?))")
      .bind(JSON.stringify(ids)).all<{ n: number }>()
    expect(results[0]!.n).toBe(n)
  }, 90_000)
})
