/**
 * A rebuild replays every shard's facts into a shadow table. A fact the
 * projection's mapping throws for must not stop the replay step (nor leave the
 * rebuild running forever): it is left out of the rebuilt table, as live
 * traffic leaves it out of the live table, and the batch record counts it and
 * keeps the first error.
 */
import { env } from "cloudflare:workers"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { FactId } from "@factline/core/runtime"
import { callCompleted, eventually, ledger, postEvents, readStream, request, tokenPlatform, unique } from "./helpers.js"

const budgets = async (prefix: string) =>
  (await env.DB.prepare("SELECT * FROM buyer_budgets WHERE tenant_id = 'tenant-a' AND buyer_id LIKE ? ORDER BY buyer_id").bind(`${prefix}%`).all()).results

describe("rebuild replay isolation", () => {
  it("a fact the mapping throws for is left out and recorded (count + first error); the replay and the swap go on", async () => {
    const run = unique("rbi")
    const events = Array.from({ length: 6 }, (_, i) => callCompleted({}, { call_id: `${run}_call_${i}`, buyer_id: `${run}_buyer_${i % 2}`, duration_s: 90, price_cents: 10 + i }))
    expect((await postEvents({ events })).status).toBe(202)
    await eventually(async () => {
      const rows = await budgets(run)
      return rows.length === 2 && rows.reduce((n, r: any) => n + r.charges, 0) === 6 ? true : undefined
    }, 60_000, "the live budgets")
    const before = await budgets(run)

    // Two charges in the ledger that the buyer_budgets mapping refuses (UnsafeInteger: past 2^53 − 1), on the
    // run's own buyer; appended straight to the ledger, so live projections never saw them.
    const poisoned = `${run}_poisoned`
    const drafts = await Promise.all([0, 1].map(async (position) => ({
      fact_id: await FactId.make({ tenantId: "tenant-a", cause: poisoned, decidedBy: "test", position }),
      type: "charge",
      data: { call_id: poisoned, buyer_id: `${run}_buyer_0`, amount_cents: 2 ** 53 + 2 * (position + 1), currency: "EUR" },
      causation_id: poisoned, correlation_id: poisoned, caused_by: "test", created_at: new Date().toISOString()
    })))
    const [appended] = await Effect.runPromise(ledger().append([{ tenant_id: "tenant-a", stream: poisoned, facts: drafts }]))
    expect(appended!.status).toBe("appended")
    expect((await readStream("tenant-a", poisoned)).version).toBe(2)

    const started = await request("/v1/batches", { method: "POST", token: tokenPlatform, body: JSON.stringify({ operation: "rebuild", projection: "buyer_budgets" }) })
    expect(started.status).toBe(202)
    const { batch_id } = await started.json<any>()
    const done = await eventually(async () => {
      const status = await (await request(`/v1/batches/${batch_id}`, { token: tokenPlatform })).json<any>()
      return status.status === "completed" ? status : undefined
    }, 90_000, "the rebuild")

    // Every other fact was replayed and the table swapped in: the run's rows are what live traffic built.
    expect(done.facts_replayed).toBeGreaterThanOrEqual(events.length * 3 + 2)
    expect(await budgets(run)).toEqual(before)
    // The two refused facts are counted, the first one named with its error.
    expect(done.facts_failed).toBeGreaterThanOrEqual(2)
    expect(done.first_failure).toMatch(/^fact \S+ \(charge in tenant-a\/.+\): UnsafeInteger: projection buyer_budgets mapped charge fact/)
    const stored = await env.DB.prepare("SELECT status, facts_failed, first_failure FROM projection_rebuilds WHERE id = ?").bind(batch_id).first<any>()
    expect(stored).toEqual({ status: "completed", facts_failed: done.facts_failed, first_failure: done.first_failure })
  }, 180_000)
})
