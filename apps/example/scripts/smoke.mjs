#!/usr/bin/env node
// Black-box check of the example platform over HTTP, against the real local stack that `npm run dev`
// runs (wrangler dev: local Queues, D1, Durable Objects, R2), on a fresh state directory and a free port.
// Posts events, waits for the projections, and checks totals, tenant isolation and error handling.
// Exits non-zero on any failed check. Part of `npm test`.
import { Webhook } from "standardwebhooks"
import { checks, sleep } from "./LocalStack.mjs"
import * as Receiver from "./Receiver.mjs"



await checks("smoke", async ({ base, check, defer }) => {
  const request = async (path, { token = "dev-token-tenant-a", ...init } = {}) => {
    const headers = { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) }
    const response = await fetch(`${base}${path}`, { ...init, headers })
    return { status: response.status, body: await response.json() }
  }

  const run = Date.now().toString(36)
  const buyer = `smoke_${run}`
  const calls = [[120, 1000], [75, 250], [30, 999], [60, 1], [59, 500]].map(([duration_s, price_cents], i) => ({
    call_id: `smoke_${run}_${i}`, buyer_id: buyer, duration_s, price_cents, currency: "USD"
  }))
  const events = calls.map((payload, i) => ({
    schema_version: i === 0 ? 1 : 2, message_type: "call.completed", idempotency_key: `call.completed:${payload.call_id}`, subject: payload.call_id,
    payload: i === 0 ? { call_id: payload.call_id, buyer_id: buyer, duration_s: payload.duration_s, price_cents: payload.price_cents } : payload
  }))
  // A webhook endpoint on a local receiver (http and loopback: `npm run dev` runs with FACTLINE_LOCAL_DEVELOPMENT).
  const receiver = await Receiver.start()
  defer(() => receiver.close())
  const hookPath = `/hooks/ok-smoke-${run}`
  const endpoint = await request("/v1/webhooks/endpoints", { method: "POST", body: JSON.stringify({ url: `${receiver.url}${hookPath}`, event_types: ["charge.created"] }) })
  check("POST /v1/webhooks/endpoints creates an endpoint and shows its secret once (201)", endpoint.status === 201 && /^whsec_/.test(endpoint.body.secret ?? ""), JSON.stringify(endpoint.status))

  const posted = await request("/v1/events", { method: "POST", body: JSON.stringify({ events }) })
  check("POST /v1/events accepts a batch (202)", posted.status === 202 && posted.body.accepted === 5, JSON.stringify(posted))
  const again = await request("/v1/events", { method: "POST", body: JSON.stringify({ events }) })
  check("posting the same batch again is accepted (and changes nothing)", again.status === 202, JSON.stringify(again))

  const expected = { buyer_id: buyer, spent_cents: 1251, charges: 3, refunds: 0 }
  let budget
  for (let i = 0; i < 600; i++) {
    budget = await request(`/v1/projections/buyer_budgets?buyer_id=${buyer}`)
    if (budget.body.data?.[0]?.charges === 3) break
    await sleep(100)
  }
  await sleep(2_000) // stragglers from the duplicate batch
  budget = await request(`/v1/projections/buyer_budgets?buyer_id=${buyer}`)
  check("GET /v1/projections/buyer_budgets returns the exact totals", JSON.stringify(budget.body.data) === JSON.stringify([expected]), JSON.stringify(budget.body))
  const rows = await request(`/v1/projections/calls?buyer_id=${buyer}`)
  check("one calls row per call", rows.body.data?.length === 5 && rows.body.data.filter((r) => r.qualified).length === 3, JSON.stringify(rows.body))
  const v1 = rows.body.data?.find((r) => r.call_id === calls[0].call_id)
  check("the v1 event was upcast (currency USD)", v1?.currency === "USD", JSON.stringify(v1))
  const asB = await request(`/v1/projections/buyer_budgets?buyer_id=${buyer}`, { token: "dev-token-tenant-b" })
  check("tenant B sees none of tenant A's rows", asB.status === 200 && asB.body.data.length === 0, JSON.stringify(asB))
  const streamAsB = await request(`/v1/streams/${calls[0].call_id}/facts`, { token: "dev-token-tenant-b" })
  check("tenant B cannot read tenant A's stream (404)", streamAsB.status === 404, JSON.stringify(streamAsB))
  const undeclared = await request("/v1/projections/calls?duration_s=30")
  check("a filter on an undeclared column is a 400 JSON error", undeclared.status === 400 && undeclared.body.error?.code === "invalid_query", JSON.stringify(undeclared))
  const cursor = await request("/v1/projections/calls?cursor=%27%3B%20DROP%20TABLE%20calls")
  check("a malformed cursor is a 400 JSON error without SQL text", cursor.status === 400 && !/sqlite|syntax/i.test(JSON.stringify(cursor.body)), JSON.stringify(cursor))
  let deliveries = []
  for (let i = 0; i < 600; i++) {
    deliveries = await (await fetch(`${receiver.url}/received?path=${encodeURIComponent(hookPath)}`)).json()
    if (new Set(deliveries.map((d) => d.headers["webhook-id"])).size >= 3) break
    await sleep(100)
  }
  let verified = 0
  for (const d of deliveries) {
    try {
      const event = new Webhook(endpoint.body.secret).verify(d.body, d.headers)
      if (event.type === "charge.created" && event.data.buyer_id === buyer) verified++
    } catch {
      // counted as not verified
    }
  }
  const ids = new Set(deliveries.map((d) => d.headers["webhook-id"]))
  check("each of the 3 charges is delivered as a signed charge.created that verifies with standardwebhooks", ids.size === 3 && verified === deliveries.length,
    `${ids.size} webhook-ids, ${verified}/${deliveries.length} verified`)
  const anonymous = await request("/v1/facts", { token: null })
  check("no token is a 401", anonymous.status === 401, JSON.stringify(anonymous))
})
