import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { callCompleted, eventually, postEvents, readStream, request, tokenA, tokenAReadOnly, unique } from "./helpers.js"

const rows = async (table: string, column: string, prefix: string) =>
  (await env.DB.prepare(`SELECT * FROM ${table} WHERE ${column} LIKE ? ORDER BY tenant_id, ${column}`).bind(`${prefix}%`).all()).results

const rebuild = async (projection: string) => {
  const started = await request("/v1/batches", { method: "POST", token: tokenA, body: JSON.stringify({ operation: "rebuild", projection }) })
  expect(started.status).toBe(202)
  const { batch_id } = await started.json<any>()
  return eventually(async () => {
    const status = await (await request(`/v1/batches/${batch_id}`, { token: tokenA })).json<any>()
    return status.status === "completed" ? status : undefined
  }, 90_000, `the ${projection} rebuild`)
}

describe("rebuilding a projection from the ledger", () => {
  it("reproduces the incrementally built rows, without re-triggering processors", async () => {
    const run = unique("rb")
    const events = Array.from({ length: 12 }, (_, i) =>
      callCompleted({}, { call_id: `${run}_call_${i}`, buyer_id: `${run}_buyer_${i % 3}`, duration_s: 30 + i * 10, price_cents: 100 + i }))
    expect((await postEvents({ events })).status).toBe(202)
    const refundOf = events[11]!.subject
    await eventually(async () => ((await readStream("tenant-a", refundOf)).facts.some((f) => f.type === "charge") ? true : undefined), 30_000)
    await postEvents({ schema_version: 1, message_type: "call.dispute", idempotency_key: unique("d"), subject: refundOf, payload: { call_id: refundOf, reason: "x" } })
    await eventually(async () => {
      const budgets = await rows("buyer_budgets", "buyer_id", run)
      const calls = await rows("calls", "call_id", run)
      const refunds = budgets.reduce((n, b: any) => n + b.refunds, 0)
      return refunds === 1 && calls.length === 12 && calls.every((c: any) => c.qualified !== null) ? true : undefined
    }, 60_000, "the projections")
    await new Promise((r) => setTimeout(r, 2_000))
    const budgets = await rows("buyer_budgets", "buyer_id", run)
    const calls = await rows("calls", "call_id", run)
    const versions = await Promise.all(events.map(async (e) => (await readStream("tenant-a", e.subject)).version))

    // Damage the live tables: the rebuild recomputes from the ledger, not from them.
    await env.DB.batch([
      env.DB.prepare("UPDATE buyer_budgets SET spent_cents = -1 WHERE buyer_id LIKE ?").bind(`${run}%`),
      env.DB.prepare("DELETE FROM calls WHERE call_id = ?").bind(events[0]!.subject)
    ])

    const done = await rebuild("buyer_budgets")
    expect(done).toMatchObject({ projection: "buyer_budgets", status: "completed" })
    expect(done.facts_replayed).toBeGreaterThan(0)
    await rebuild("calls")
    expect(await rows("buyer_budgets", "buyer_id", run)).toEqual(budgets)
    expect(await rows("calls", "call_id", run)).toEqual(calls)
    // Indexes survive the swap.
    const indexes = await env.DB.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'calls' AND sql IS NOT NULL").all()
    expect(indexes.results.map((r: any) => r.name)).toEqual(["calls_by_buyer"])
    // Nothing was re-processed: the streams did not grow.
    expect(await Promise.all(events.map(async (e) => (await readStream("tenant-a", e.subject)).version))).toEqual(versions)
    // After the swap, live facts keep flowing into the rebuilt table.
    const late = callCompleted({}, { call_id: `${run}_late`, buyer_id: `${run}_buyer_0`, duration_s: 100, price_cents: 5 })
    await postEvents(late)
    const before = (budgets.find((b: any) => b.buyer_id === `${run}_buyer_0`) as any).spent_cents
    await eventually(async () => {
      const [b] = (await rows("buyer_budgets", "buyer_id", `${run}_buyer_0`)) as any[]
      return b.spent_cents === before + 5 ? true : undefined
    }, 30_000, "a live fact after the swap")
  }, 240_000)

  it("refuses unknown projections, other operations and non-admin tokens", async () => {
    const post = (body: unknown, token = tokenA) => request("/v1/batches", { method: "POST", token, body: JSON.stringify(body) })
    expect((await post({ operation: "rebuild", projection: "nope" })).status).toBe(404)
    expect((await post({ operation: "import", projection: "calls" })).status).toBe(400)
    expect((await post({ operation: "rebuild", projection: "calls" }, tokenAReadOnly)).status).toBe(403)
    expect((await request("/v1/batches/rb_missing", { token: tokenA })).status).toBe(404)
  })
})
