/**
 * A processor that reads its stream (issue 40), on the real local stack: `lose-mrr` (TestModule) derives the
 * MRR a cancellation loses from the prices before it in the ledger shard (a Durable Object), whatever was
 * appended after the cancellation by the time it runs, and a redelivered cancellation derives nothing more.
 */
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { FactMessage } from "@factline/core/runtime"
import type { PlatformEnv } from "@factline/workers"
import { drain } from "./Drain.js"
import { readStream, unique } from "./helpers.js"
import { platform } from "./worker.js"

const deliver = async (queue: string, bodies: ReadonlyArray<unknown>) => {
  const batch = createMessageBatch(queue, bodies.map((body) => ({ id: unique("qm"), timestamp: new Date(), attempts: 1, body })))
  const ctx = createExecutionContext()
  await platform.queue(batch, env as unknown as PlatformEnv, ctx)
  return getQueueResult(batch, ctx)
}
const plan = (subject: string, payload: Record<string, unknown>) => ({
  schema_version: 1,
  message_type: "test.plan.happened",
  message_id: unique("msg"),
  idempotency_key: unique("plan"),
  correlation_id: unique("corr"),
  tenant_id: "tenant-a",
  subject,
  source: "test",
  created_at: new Date().toISOString(),
  payload
})

describe("a processor reading its stream", () => {
  it("folds the facts before its fact, not those appended since; a redelivery derives nothing more", async () => {
    const subject = unique("plan")
    // Priced twice, cancelled, priced again: one events batch, all four appended before the processor runs.
    await deliver("factline-events", [{ price_cents: 4900 }, { price_cents: 9900 }, {}, { price_cents: 100 }].map((payload) => plan(subject, payload)))
    await drain()
    const stream = await readStream("tenant-a", subject)
    expect(stream.facts.filter((f) => f.type !== "mrr_lost").map((f) => [f.type, f.data])).toEqual([
      ["plan_priced", { price_cents: 4900 }],
      ["plan_priced", { price_cents: 9900 }],
      ["plan_cancelled", {}],
      ["plan_priced", { price_cents: 100 }]
    ])
    const cancelled = stream.facts.find((f) => f.type === "plan_cancelled")!
    const lost = stream.facts.filter((f) => f.type === "mrr_lost")
    expect(lost.map((f) => [f.data, f.caused_by, f.causation_id])).toEqual([[{ delta_cents: -9900 }, "lose-mrr", cancelled.fact_id]])
    // It ran after the last price was stored (sequence 5), and folded only what came before the cancellation.
    expect(lost[0]!.sequence).toBe(5)
    await deliver("factline-fact-processing", [FactMessage.make(cancelled)])
    expect((await readStream("tenant-a", subject)).version).toBe(stream.version)
  })
})
