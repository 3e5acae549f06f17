import { env } from "cloudflare:workers"
import { and, desc, eq } from "drizzle-orm"
import { drizzle } from "drizzle-orm/d1"
import { schema } from "../src/schema.js"
import { beforeAll, describe, expect, it } from "vitest"
import { drain } from "./Drain.js"
import { callCompleted, postEvents, request, tokenA, tokenB, unique } from "./helpers.js"

const get = async (path: string, token = tokenA) => {
  const response = await request(path, { token })
  return { status: response.status, body: await response.json<any>() }
}

describe("the analysts' view", () => {
  const buyer = unique("buyer")
  const calls = [
    callCompleted({}, { buyer_id: buyer, duration_s: 120, price_cents: 1_000 }),
    callCompleted({}, { buyer_id: buyer, duration_s: 75, price_cents: 250 }),
    // call.completed v3 with the caller's phone number (personal data): analysts see only its last four digits.
    callCompleted({ schema_version: 3 }, { buyer_id: buyer, duration_s: 30, price_cents: 999, caller_phone: "+1 415 555 0137" }),
    callCompleted({}, { buyer_id: buyer, duration_s: 60, price_cents: 1 })
  ]
  // Every test reads the same four calls, posted once and through every queue before the first test.
  beforeAll(async () => {
    expect((await postEvents({ events: calls })).status).toBe(202)
    await drain()
  })

  it("GET /v1/projections/buyer_budgets returns the exact totals, and only to their tenant", async () => {
    const { body: totals } = await get(`/v1/projections/buyer_budgets?buyer_id=${buyer}`)
    expect(totals).toEqual({ projection: "buyer_budgets", data: [{ buyer_id: buyer, spent_cents: 1_251, charges: 3, refunds: 0 }], next_cursor: null })

    const asB = await get(`/v1/projections/buyer_budgets?buyer_id=${buyer}`, tokenB)
    expect(asB).toEqual({ status: 200, body: { projection: "buyer_budgets", data: [], next_cursor: null } })
    const factsAsB = await get(`/v1/facts?subject=${calls[0]!.subject}`, tokenB)
    expect(factsAsB.body.data).toEqual([])
  })

  it("GET /v1/projections/calls filters on declared columns and pages with a keyset cursor", async () => {
    const first = await get(`/v1/projections/calls?buyer_id=${buyer}&limit=3`)
    expect(first.status).toBe(200)
    expect(first.body.data).toHaveLength(3)
    expect(first.body.next_cursor).toEqual(expect.any(String))
    const second = await get(`/v1/projections/calls?buyer_id=${buyer}&limit=3&cursor=${first.body.next_cursor}`)
    expect(second.body.data).toHaveLength(1)
    expect(second.body.next_cursor).toBe(null)
    const all = [...first.body.data, ...second.body.data]
    expect(all.map((r: any) => r.call_id)).toEqual(calls.map((c) => c.subject).sort())
    const row = all.find((r: any) => r.call_id === calls[2]!.subject)
    expect(row).toEqual({
      call_id: calls[2]!.subject, buyer_id: buyer, duration_s: 30, currency: "EUR", caller_phone_masked: "•••• 0137", qualified: false,
      charged_cents: 0, refunded_cents: 0
    })
    const one = await get(`/v1/projections/calls?call_id=${calls[0]!.subject}`)
    expect(one.body.data.map((r: any) => [r.call_id, r.qualified, r.charged_cents])).toEqual([[calls[0]!.subject, true, 1_000]])
  })

  it("GET /v1/facts lists the tenant's facts by subject and type, keyset-paginated", async () => {
    const subject = calls[0]!.subject
    const page1 = await get(`/v1/facts?subject=${subject}&limit=2`)
    const page2 = await get(`/v1/facts?subject=${subject}&limit=2&cursor=${page1.body.next_cursor}`)
    const types = [...page1.body.data, ...page2.body.data].map((f: any) => f.type).sort()
    expect(types).toEqual(["charge", "outcome", "qualification"])
    expect(page2.body.next_cursor).toBe(null)
    const charges = await get(`/v1/facts?subject=${subject}&type=charge`)
    expect(charges.body.data).toHaveLength(1)
    expect(charges.body.data[0]).toMatchObject({ subject, type: "charge", caused_by: "qualify-call", data: { amount_cents: 1_000, buyer_id: buyer } })
  })

  it("bad queries are 400s with a JSON error, never SQL", async () => {
    const cases = [
      "/v1/projections/calls?duration_s=30",
      "/v1/projections/calls?tenant_id=tenant-b",
      "/v1/projections/calls?cursor=not-a-cursor!!",
      `/v1/projections/calls?cursor=${btoa('["a","b","c"]')}`,
      "/v1/projections/calls?limit=0",
      "/v1/projections/buyer_budgets?buyer_id=x%27%20OR%201%3D1--&cursor=%27",
      "/v1/facts?cursor=eyJub3QiOiJhbiBhcnJheSJ9",
      "/v1/facts?limit=-1",
      "/v1/facts?sql=select"
    ]
    for (const path of cases) {
      const { status, body } = await get(path)
      expect({ path, status }).toEqual({ path, status: 400 })
      expect(body.error.code).toBe("invalid_query")
      expect(JSON.stringify(body)).not.toMatch(/SQLITE|syntax|no such/i)
    }
    const unknown = await get("/v1/projections/nope")
    expect(unknown.status).toBe(404)
    expect((await request("/v1/projections/calls")).status).toBe(401)
  })

  it("the facts projection copies every fact with its lineage", async () => {
    const row = await env.DB.prepare("SELECT * FROM facts WHERE tenant_id = 'tenant-a' AND stream = ? AND type = 'charge'")
      .bind(calls[1]!.subject).first<Record<string, any>>()
    expect(row).toMatchObject({ sequence: 3, caused_by: "qualify-call", correlation_id: calls[1]!.correlation_id })
    expect(JSON.parse(row!.body)).toEqual({ call_id: calls[1]!.subject, buyer_id: buyer, amount_cents: 250, currency: "EUR" })
  })

  it("analysts can query the same tables with Drizzle, from the one schema module", async () => {
    const db = drizzle(env.DB, { schema })
    const budgets = await db.select().from(schema.buyerBudgets)
      .where(and(eq(schema.buyerBudgets.tenant_id, "tenant-a"), eq(schema.buyerBudgets.buyer_id, buyer)))
      .orderBy(desc(schema.buyerBudgets.spent_cents))
    expect(budgets).toEqual([{ tenant_id: "tenant-a", buyer_id: buyer, spent_cents: 1_251, charges: 3, refunds: 0 }])
    const charges = await db.select().from(schema.facts)
      .where(and(eq(schema.facts.tenantId, "tenant-a"), eq(schema.facts.type, "charge"), eq(schema.facts.stream, calls[0]!.subject)))
    expect(charges.map((f) => JSON.parse(f.body).amount_cents)).toEqual([1_000])
    const row = await db.select().from(schema.calls).where(eq(schema.calls.call_id, calls[2]!.subject))
    expect(row[0]?.qualified).toBe(false)
  })
})
