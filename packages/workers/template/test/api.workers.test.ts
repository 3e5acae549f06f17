/**
 * The app inside workerd (@cloudflare/vitest-plugin) with its real local Queues, D1, Durable Objects and R2:
 * an event posted over HTTP crosses the events queue, the ledger and the projections queue into D1.
 */
import { env, exports } from "cloudflare:workers"
import { describe, expect, it, vi } from "vitest"

const request = (path: string, init: RequestInit = {}, token: string | null = env.TEST_TOKEN) =>
  exports.default.fetch(new Request(`http://app.test${path}`, {
    ...init,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), "content-type": "application/json", ...init.headers }
  }))

describe("the orders app", () => {
  it("projects a posted order into the orders table", async () => {
    const posted = await request("/v1/events", {
      method: "POST",
      body: JSON.stringify({
        schema_version: 1,
        message_type: "order.placed",
        idempotency_key: "order.placed:o1",
        subject: "o1",
        payload: { order_id: "o1", customer_id: "c1", total_cents: 1200 }
      })
    })
    expect(posted.status).toBe(202)
    // The queues run for real: wait until the fact has crossed them.
    const rows = await vi.waitFor(async () => {
      const response = await request("/v1/projections/orders?customer_id=c1")
      const body = (await response.json()) as { data: Array<Record<string, unknown>> }
      if (body.data.length === 0) throw new Error("not projected yet")
      return body.data
    }, { timeout: 20_000, interval: 100 })
    expect(rows).toEqual([{ order_id: "o1", customer_id: "c1", total_cents: 1200 }])
  })

  it("refuses a request without a token (401) and an undeclared event type (400)", async () => {
    expect((await request("/v1/projections/orders", {}, null)).status).toBe(401)
    expect((await request("/v1/projections/orders", {}, "fl_not-a-token")).status).toBe(401)
    const unknown = await request("/v1/events", {
      method: "POST",
      body: JSON.stringify({ schema_version: 1, message_type: "order.lost", idempotency_key: "k", subject: "o1", payload: {} })
    })
    expect(unknown.status).toBe(400)
  })
})
