import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { drain } from "./Drain.js"
import { callCompleted, postEvents, readStream, request, tokenA, tokenAReadOnly, tokenB, tokenPlatform, unique } from "./helpers.js"

const rows = async (table: string, column: string, prefix: string) =>
  (await env.DB.prepare(`SELECT * FROM ${table} WHERE ${column} LIKE ? ORDER BY tenant_id, ${column}`).bind(`${prefix}%`).all()).results

const rebuild = async (projection: string) => {
  const started = await request("/v1/batches", { method: "POST", token: tokenPlatform, body: JSON.stringify({ operation: "rebuild", projection }) })
  expect(started.status).toBe(202)
  const { batch_id } = await started.json<any>()
  // Every slice is a message on the batch queue: idle queues mean the rebuild has run to its end.
  await drain({ timeoutMs: 90_000 })
  const status = await (await request(`/v1/batches/${batch_id}`, { token: tokenPlatform })).json<any>()
  expect(status).toMatchObject({ batch_id, status: "completed" })
  return status
}

describe("rebuilding a projection from the ledger", () => {
  it("reproduces the incrementally built rows, without re-triggering processors", async () => {
    const run = unique("rb")
    const events = Array.from({ length: 12 }, (_, i) =>
      callCompleted({}, { call_id: `${run}_call_${i}`, buyer_id: `${run}_buyer_${i % 3}`, duration_s: 30 + i * 10, price_cents: 100 + i }))
    expect((await postEvents({ events })).status).toBe(202)
    const refundOf = events[11]!.subject
    await drain()
    expect((await readStream("tenant-a", refundOf)).facts.map((f) => f.type)).toContain("charge")
    await postEvents({ schema_version: 1, message_type: "call.dispute", idempotency_key: unique("d"), subject: refundOf, payload: { call_id: refundOf, reason: "x" } })
    await drain()
    const budgets = await rows("buyer_budgets", "buyer_id", run)
    const calls = await rows("calls", "call_id", run)
    expect(budgets.reduce((n, b: any) => n + b.refunds, 0)).toBe(1)
    expect(calls).toHaveLength(12)
    expect(calls.every((c: any) => c.qualified !== null)).toBe(true)
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
    await drain()
    const [after] = (await rows("buyer_budgets", "buyer_id", `${run}_buyer_0`)) as any[]
    expect(after.spent_cents).toBe(before + 5)
  }, 240_000)

  it("refuses unknown projections, other operations and tokens without the platform scope", async () => {
    const post = (body: unknown, token = tokenPlatform) => request("/v1/batches", { method: "POST", token, body: JSON.stringify(body) })
    expect((await post({ operation: "rebuild", projection: "nope" })).status).toBe(404)
    expect((await post({ operation: "import", projection: "calls" })).status).toBe(403)
    expect((await post({ operation: "import", projection: "calls" }, tokenA)).status).toBe(400)
    expect((await post({ operation: "export", projection: "calls" })).status).toBe(403)
    expect((await post({ operation: "reconcile" }, tokenA)).status).toBe(400)
    expect((await post({ operation: "rebuild", projection: "calls" }, tokenAReadOnly)).status).toBe(403)
    expect((await request("/v1/batches/rb_missing", { token: tokenA })).status).toBe(404)
  })
})

describe("batches are tenant-scoped", () => {
  const running = () => env.DB.prepare("SELECT id FROM projection_rebuilds WHERE projection = 'buyer_budgets' AND status = 'running'").all()
  /**
   * A rebuild record of the test-only `fragile` projection, marked running: it maps nothing live, so the
   * live consumer never writes its missing shadow. (Never really rebuild `fragile`: it shares buyer_budgets.)
   */
  const runningRecord = async (tenant_id: string) => {
    const id = unique("rb_other")
    await env.DB.prepare(
      `INSERT INTO projection_rebuilds (id, tenant_id, projection, shadow_table, status, shards_total, shards_done, facts_replayed, started_at)
       VALUES (?, ?, 'fragile', ?, 'running', 0, 0, 0, ?)`
    ).bind(id, tenant_id, `buyer_budgets__${id}`, new Date().toISOString()).run()
    return id
  }
  const stop = (id: string) => env.DB.prepare("UPDATE projection_rebuilds SET status = 'failed' WHERE id = ?").bind(id).run()

  it("a tenant's admin token cannot start a rebuild: it replays every tenant's facts, so it takes the platform scope", async () => {
    const response = await request("/v1/batches", { method: "POST", token: tokenA, body: JSON.stringify({ operation: "rebuild", projection: "buyer_budgets" }) })
    expect(response.status).toBe(403)
    expect((await response.json<any>()).error).toMatchObject({ code: "forbidden" })
    expect((await running()).results).toEqual([])
  })

  it("a batch record carries the starting token's tenant; another tenant's id is the same 404 as a missing one, with nothing of the batch in it", async () => {
    const started = await request("/v1/batches", { method: "POST", token: tokenPlatform, body: JSON.stringify({ operation: "rebuild", projection: "buyer_budgets" }) })
    expect(started.status).toBe(202)
    const { batch_id } = await started.json<any>()
    expect(await env.DB.prepare("SELECT tenant_id FROM projection_rebuilds WHERE id = ?").bind(batch_id).first()).toEqual({ tenant_id: "factline" })
    expect((await request(`/v1/batches/${batch_id}`, { token: tokenPlatform })).status).toBe(200)

    // A tenant's own batch (records of tenant-a) is read by tenant-a only.
    const own = await runningRecord("tenant-a")
    await stop(own)
    const ownRead = await request(`/v1/batches/${own}`, { token: tokenA })
    expect(ownRead.status).toBe(200)
    expect(await ownRead.json<any>()).toMatchObject({ batch_id: own, tenant_id: "tenant-a", projection: "fragile" })

    for (const [id, token] of [[own, tokenB], [own, tokenPlatform], [batch_id, tokenA]] as const) {
      const response = await request(`/v1/batches/${id}`, { token })
      expect(response.status).toBe(404)
      const body = await response.json<any>()
      const missing = await (await request(`/v1/batches/${id.replace(/^rb_/, "rb_x")}`, { token })).json<any>()
      expect(JSON.stringify(body).replace(id, "ID")).toBe(JSON.stringify(missing).replace(id.replace(/^rb_/, "rb_x"), "ID"))
      expect(JSON.stringify(body)).not.toMatch(/fragile|buyer_budgets|running|completed|shadow|tenant-a|factline/)
    }
    await drain({ timeoutMs: 90_000 })
    expect(await (await request(`/v1/batches/${batch_id}`, { token: tokenPlatform })).json<any>()).toMatchObject({ status: "completed" })
  })

  it("a 409 for a running rebuild names its batch only to the tenant that can read it", async () => {
    const start = () => request("/v1/batches", { method: "POST", token: tokenPlatform, body: JSON.stringify({ operation: "rebuild", projection: "fragile" }) })
    const foreign = await runningRecord("tenant-b")
    try {
      const refused = await start()
      expect(refused.status).toBe(409)
      const text = await refused.text()
      expect(JSON.parse(text).error.code).toBe("conflict")
      expect(text).not.toContain(foreign)
      expect(text).not.toContain("rb_")
    } finally {
      await stop(foreign)
    }
    const mine = await runningRecord("factline")
    try {
      const refused = await start()
      expect(refused.status).toBe(409)
      expect((await refused.json<any>()).error.message).toContain(mine)
    } finally {
      await stop(mine)
    }
  })
})
