/**
 * Set-based projection writes against the real local D1: a batch's facts go
 * through `ProjectionConsumer.process` (the consumer runtime's decode and
 * settle steps are covered by the pipeline tests), and the assertions are on
 * the stored rows.
 */
import { env } from "cloudflare:workers"
import { Effect, Layer, Result } from "effect"
import { describe, expect, it } from "vitest"
import { Registry } from "@factline/core"
import { FactsCopy, KeyRing, Placement, ProjectionConsumer, ProjectionQuery, ProjectionStore, Sql } from "@factline/core/runtime"
import type { Fact } from "@factline/schemas"
import { storedFact, unique } from "./helpers.js"
import { countingD1, newCounts } from "./instrument.js"
import { fragileBuyers } from "./TestModule.js"
import { platform } from "./worker.js"

/**
 * One queue batch, as the projections consumer processes it; returns the outcome per fact (by position). The D1
 * facts copy as the example configures it (`all`) unless `copy` says otherwise (FACTLINE_FACTS_COPY).
 */
const apply = async (facts: ReadonlyArray<Fact>, db: D1Database = env.DB, copy = "all") => {
  const items = facts.map((f, i) => ({ key: `${i}`, value: { fact: f } }))
  const parsed = FactsCopy.parse(copy)
  if (typeof parsed === "string") throw new Error(parsed)
  const settings = FactsCopy.FactsCopySetting.layer(parsed)
  const outcomes = await Effect.runPromise(ProjectionConsumer.process(items).pipe(
    Effect.provide(Layer.mergeAll(ProjectionStore.ProjectionStore.layer, Placement.TenantPlacement.single(db), Layer.succeed(Registry.Registry, platform.registry), settings, KeyRing.KeyRing.over(env.LEDGER, { secretsKey: env.FACTLINE_SECRETS_KEY as string | undefined })))
  ))
  return items.map(({ key }) => outcomes.get(key))
}

const callRow = (callId: string) =>
  env.DB.prepare("SELECT buyer_id, duration_s, currency, qualified, charged_cents, refunded_cents FROM calls WHERE tenant_id = 'tenant-a' AND call_id = ?")
    .bind(callId).first<Record<string, unknown>>()
const budget = (buyer: string) =>
  env.DB.prepare("SELECT spent_cents, charges, refunds FROM buyer_budgets WHERE tenant_id = 'tenant-a' AND buyer_id = ?").bind(buyer).first<Record<string, number>>()
const copies = async (stream: string) =>
  (await env.DB.prepare("SELECT COUNT(*) AS n FROM facts WHERE tenant_id = 'tenant-a' AND stream = ?").bind(stream).first<{ n: number }>())?.n

/** A call's whole life: outcome, qualification, charge, refund. */
const life = async (call_id: string, buyer_id: string, price_cents = 500) => [
  await storedFact(call_id, 1, "outcome", { call_id, buyer_id, duration_s: 90, price_cents, currency: "EUR" }),
  await storedFact(call_id, 2, "qualification", { call_id, qualified: true }),
  await storedFact(call_id, 3, "charge", { call_id, buyer_id, amount_cents: price_cents, currency: "EUR" }),
  await storedFact(call_id, 4, "refund", { call_id, buyer_id, amount_cents: price_cents, currency: "EUR" })
]

const done = Result.succeed(undefined)

describe("set-based projection writes", () => {
  it("a batch applied twice gives the same rows as applied once", async () => {
    const buyer = unique("buyer")
    const [a, b] = [unique("call"), unique("call")]
    const batch = [...await life(a, buyer, 500), ...(await life(b, buyer, 300)).slice(0, 3)]
    expect(await apply(batch)).toEqual(batch.map(() => done))
    const once = { a: await callRow(a), b: await callRow(b), budget: await budget(buyer), copies: [await copies(a), await copies(b)] }
    expect(await apply(batch)).toEqual(batch.map(() => done))
    expect({ a: await callRow(a), b: await callRow(b), budget: await budget(buyer), copies: [await copies(a), await copies(b)] }).toEqual(once)
    expect(once).toEqual({
      a: { buyer_id: buyer, duration_s: 90, currency: "EUR", qualified: 1, charged_cents: 500, refunded_cents: 500 },
      b: { buyer_id: buyer, duration_s: 90, currency: "EUR", qualified: 1, charged_cents: 300, refunded_cents: 0 },
      budget: { spent_cents: 300, charges: 2, refunds: 1 },
      copies: [4, 3]
    })
  })

  it("a batch in reverse order gives the same rows as in order", async () => {
    const inOrder = { call: unique("call"), buyer: unique("buyer") }
    const reversed = { call: unique("call"), buyer: unique("buyer") }
    await apply(await life(inOrder.call, inOrder.buyer))
    await apply((await life(reversed.call, reversed.buyer)).reverse())
    expect({ ...await callRow(reversed.call), buyer_id: "b" }).toEqual({ ...await callRow(inOrder.call), buyer_id: "b" })
    expect(await budget(reversed.buyer)).toEqual(await budget(inOrder.buyer))
    expect(await budget(inOrder.buyer)).toEqual({ spent_cents: 0, charges: 1, refunds: 1 })
  })

  it("the same fact twice in one batch counts once", async () => {
    const buyer = unique("buyer")
    const call_id = unique("call")
    const charge = await storedFact(call_id, 3, "charge", { call_id, buyer_id: buyer, amount_cents: 250, currency: "USD" })
    expect(await apply([charge, charge, charge])).toEqual([done, done, done])
    expect(await budget(buyer)).toEqual({ spent_cents: 250, charges: 1, refunds: 0 })
    expect(await copies(call_id)).toBe(1)
  })

  it("two facts for one key in one batch: both increments count, and the later fact of a type wins in either order", async () => {
    const buyer = unique("buyer")
    const [a, b] = [unique("call"), unique("call")]
    const charges = [
      await storedFact(a, 3, "charge", { call_id: a, buyer_id: buyer, amount_cents: 100, currency: "USD" }),
      await storedFact(b, 3, "charge", { call_id: b, buyer_id: buyer, amount_cents: 40, currency: "USD" })
    ]
    // A corrected outcome (sequence 5) and the original (sequence 1) of the same call, later one first.
    const outcomes = [
      await storedFact(a, 5, "outcome", { call_id: a, buyer_id: buyer, duration_s: 75, price_cents: 100, currency: "EUR" }),
      await storedFact(a, 1, "outcome", { call_id: a, buyer_id: "someone-else", duration_s: 10, price_cents: 100, currency: "USD" })
    ]
    await apply([...outcomes, ...charges])
    expect(await budget(buyer)).toEqual({ spent_cents: 140, charges: 2, refunds: 0 })
    expect(await callRow(a)).toMatchObject({ buyer_id: buyer, duration_s: 75, currency: "EUR", charged_cents: 100 })
    await apply([...outcomes].reverse())
    expect(await callRow(a)).toMatchObject({ buyer_id: buyer, duration_s: 75, currency: "EUR", charged_cents: 100 })
  })

  it("a batch of 12 facts and one of 100 take the same statements in one D1 transaction", async () => {
    const measure = async (size: number) => {
      const buyer = unique("buyer")
      const facts = (await Promise.all(Array.from({ length: size / 4 + 1 }, () => life(unique("call"), buyer, 10)))).flat().slice(0, size)
      const counts = newCounts()
      expect(await apply(facts, countingD1(env.DB, counts))).toEqual(facts.map(() => done))
      return { counts, buyer }
    }
    // Whole lives (4 facts a call), so every `calls` row gets the same fact types in both batches.
    const ten = await measure(12)
    const hundred = await measure(100)
    // The running-rebuilds lookup, then one batch with every write.
    expect([ten.counts.d1RoundTrips, hundred.counts.d1RoundTrips]).toEqual([2, 2])
    expect(hundred.counts.d1Statements).toBe(ten.counts.d1Statements)
    // facts copy + calls (one upsert per row: its 4 fact types together) + buyer_budgets (charge, refund increments and the applied set), + the lookup.
    expect(hundred.counts.d1Statements).toBe(1 + 1 + 1 + 3)
    expect(await budget(hundred.buyer)).toEqual({ spent_cents: 0, charges: 25, refunds: 25 })
  })

  it("rows D1 writes per fact, for the facts copy and for each projection", async () => {
    const n = 100
    const written = async (facts: ReadonlyArray<Fact>, copy = "all") => {
      const counts = newCounts()
      await apply(facts, countingD1(env.DB, counts), copy)
      return counts.d1RowsWritten / facts.length
    }
    // A fact type no projection reads: only the facts copy writes.
    const copyOnly = await written(await Promise.all(Array.from({ length: n }, (_, i) => storedFact(unique("call"), 1, "dispute_rejected", { call_id: "c", why: "x", i }))))
    // Outcomes: the facts copy + one new `calls` row each.
    const outcomes = await written(await Promise.all(Array.from({ length: n }, () => {
      const call_id = unique("call")
      return storedFact(call_id, 1, "outcome", { call_id, buyer_id: "b", duration_s: 90, price_cents: 1, currency: "EUR" })
    })))
    // Charges to one buyer: the facts copy, a `calls` row, one budget row for all, an applied-set row each.
    const buyer = unique("buyer")
    const chargesToOneBuyer = await written(await Promise.all(Array.from({ length: n }, () => {
      const call_id = unique("call")
      return storedFact(call_id, 3, "charge", { call_id, buyer_id: buyer, amount_cents: 1, currency: "EUR" })
    })))
    console.log(`D1 rows written per fact: facts copy ${copyOnly}; outcome (copy + calls) ${outcomes}; charge (copy + calls + budgets) ${chargesToOneBuyer}`)
    // The row alone (a WITHOUT ROWID table is its primary key; no secondary index since the subject listing reads the ledger).
    expect(copyOnly).toBe(1)
    // + the new `calls` row: WITHOUT ROWID, so the row itself and the by-buyer index.
    expect(outcomes).toBe(3)
    // Copy (1) + a new `calls` row (2) + the applied-set row (1, WITHOUT ROWID) + one budget row shared by all.
    expect(chargesToOneBuyer).toBeGreaterThanOrEqual(4)
    expect(chargesToOneBuyer).toBeLessThan(4.1)
    // A call's whole life in one batch: one `calls` upsert for its 4 facts (2 rows), not 2 + 3 updates.
    const lives = await written((await Promise.all(Array.from({ length: n / 4 }, () => life(unique("call"), unique("buyer"))))).flat())
    console.log(`D1 rows written per fact, whole lives in one batch: ${lives}`)
    // Per call (measured 11): copies 4 × 1, the `calls` row 2 (not 2 + 3 updates), the budget row's insert and
    // update (charge and refund add different columns: two statements), 2 applied-set rows, and one more.
    expect(lives * 4).toBeLessThanOrEqual(11)

    // The framework's default copies nothing: the projections' rows alone.
    expect(await written(await Promise.all(Array.from({ length: n }, (_, i) => storedFact(unique("call"), 1, "dispute_rejected", { call_id: "c", why: "x", i }))), "none")).toBe(0)
    expect(await written(await Promise.all(Array.from({ length: n }, () => {
      const call_id = unique("call")
      return storedFact(call_id, 1, "outcome", { call_id, buyer_id: "b", duration_s: 90, price_cents: 1, currency: "EUR" })
    })), "none")).toBe(2)
  })

  it("FACTLINE_FACTS_COPY decides which facts reach the D1 copy: none writes no facts row, a type list only those types; the projections get every fact", async () => {
    const copied = async (stream: string) =>
      (await env.DB.prepare("SELECT type FROM facts WHERE tenant_id = 'tenant-a' AND stream = ? ORDER BY sequence").bind(stream).all<{ type: string }>()).results.map((r) => r.type)
    const [none, some, every] = [unique("call"), unique("call"), unique("call")]
    const buyer = unique("buyer")
    expect(await apply(await life(none, buyer), env.DB, "none")).toEqual([done, done, done, done])
    expect(await apply(await life(some, buyer), env.DB, "charge, refund")).toEqual([done, done, done, done])
    expect(await apply(await life(every, buyer), env.DB, "all")).toEqual([done, done, done, done])
    expect(await copied(none)).toEqual([])
    expect(await copied(some)).toEqual(["charge", "refund"])
    expect(await copied(every)).toEqual(["outcome", "qualification", "charge", "refund"])
    // Whatever the copy, the projections saw every fact.
    for (const call of [none, some, every]) expect(await callRow(call)).toMatchObject({ buyer_id: buyer, qualified: 1, charged_cents: 500, refunded_cents: 500 })
    expect(await budget(buyer)).toEqual({ spent_cents: 0, charges: 3, refunds: 3 })
  })

  it("every GET /v1/facts listing of the copy walks its primary key in order: no sort (a subject's listing reads the ledger)", async () => {
    const cursor = btoa(JSON.stringify(["2026-11-22T00:00:00.000Z", "f"])).replace(/=+$/, "")
    expect(Result.isFailure(ProjectionQuery.facts("tenant-a", { subject: "s" }))).toBe(true)
    for (const query of [{}, { type: "charge" }, { cursor }, { type: "charge", cursor }]) {
      const page = ProjectionQuery.facts("tenant-a", query)
      if (page._tag !== "Success") throw new Error("a valid query")
      const { results } = await env.DB.prepare(`EXPLAIN QUERY PLAN ${page.success.sql.sql}`).bind(...page.success.sql.params).all<{ detail: string }>()
      const plan = results.map((r) => r.detail).join("; ")
      expect(plan, JSON.stringify(query)).toMatch(/USING (PRIMARY KEY|(COVERING )?INDEX sqlite_autoindex_facts_1)/)
      expect(plan, JSON.stringify(query)).not.toMatch(/TEMP B-TREE|SCAN facts$/)
    }
  })

  it("a mapping that throws fails its fact permanently; the batch's other facts are written", async () => {
    const buyer = unique("buyer")
    const good = await life(unique("call"), buyer)
    const broken = { ...await storedFact(unique("call"), 1, "outcome", {}), data: null as unknown as Record<string, unknown> }
    const outcomes = await apply([good[0]!, broken, ...good.slice(1)])
    expect(outcomes[1]).toMatchObject({ _tag: "Failure", failure: { retryable: false, reason: "permanent_failure" } })
    expect(outcomes.filter((o) => o !== undefined && Result.isSuccess(o))).toHaveLength(4)
    expect(await budget(buyer)).toEqual({ spent_cents: 0, charges: 1, refunds: 1 })
    expect(await callRow(good[0]!.stream)).toMatchObject({ buyer_id: buyer, qualified: 1, charged_cents: 500, refunded_cents: 500 })
  })

  it("a projection whose mapping throws fails only itself: the fact reaches the facts copy and every other projection, and the failure names the projection", async () => {
    const buyer = unique("buyer")
    const call_id = unique("call")
    const facts = await life(call_id, buyer)
    fragileBuyers.add(buyer)
    const outcomes = await apply(facts)
    // The charge (position 2) is what `fragile` cannot map; nothing else failed.
    expect(outcomes.map((o) => o?._tag)).toEqual(["Success", "Success", "Failure", "Success"])
    expect(outcomes[2]).toMatchObject({ failure: { retryable: false, reason: "permanent_failure" } })
    expect((outcomes[2] as any).failure.message).toContain(`projection "fragile" failed to map charge fact ${facts[2]!.fact_id}`)
    expect((outcomes[2] as any).failure.message).not.toContain('"calls"')
    expect(await copies(call_id)).toBe(4)
    expect(await callRow(call_id)).toMatchObject({ buyer_id: buyer, qualified: 1, charged_cents: 500, refunded_cents: 500 })
    expect(await budget(buyer)).toEqual({ spent_cents: 0, charges: 1, refunds: 1 })
    // The fix, then the replay: the projections that had the fact change nothing.
    fragileBuyers.delete(buyer)
    expect(await apply([facts[2]!])).toEqual([done])
    expect(await copies(call_id)).toBe(4)
    expect(await budget(buyer)).toEqual({ spent_cents: 0, charges: 1, refunds: 1 })
  })

  it("a fact D1 refuses for a projection fails on its own there, naming it; the batch's other facts and its facts copy are written", async () => {
    const buyer = unique("buyer")
    const good = await life(unique("call"), buyer)
    // A charge without buyer or amount: its budget row has no key, so D1 refuses the whole transaction.
    const refused = await storedFact(unique("call"), 3, "charge", { call_id: "x" })
    const outcomes = await apply([...good, refused])
    expect(outcomes.slice(0, 4)).toEqual([done, done, done, done])
    // A constraint violation cannot succeed on a retry (the SQL door classifies it a Conflict): dead-lettered at once.
    expect(outcomes[4]).toMatchObject({ _tag: "Failure", failure: { retryable: false } })
    // Both projections it breaks are named (calls: no amount; buyer_budgets: no buyer), each with D1's error.
    expect((outcomes[4] as any).failure.message).toMatch(/^projection "calls": .*NOT NULL constraint failed.*; projection "buyer_budgets": .*NOT NULL constraint failed/)
    expect(await budget(buyer)).toEqual({ spent_cents: 0, charges: 1, refunds: 1 })
    expect(await callRow(good[0]!.stream)).toMatchObject({ buyer_id: buyer, qualified: 1, charged_cents: 500, refunded_cents: 500 })
    // One projection's failure is its own: the copy has the fact (retrying it changes nothing there).
    expect(await copies(refused.stream)).toBe(1)
  })
})
