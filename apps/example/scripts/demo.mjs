#!/usr/bin/env node
// Sends a few call.completed events (v1 and v2) and a dispute to a running `npm run dev`,
// then prints the facts that appeared in each call's stream.
const base = process.env.FACTLINE_URL ?? "http://localhost:8787"
const token = process.env.FACTLINE_TOKEN ?? "dev-token-tenant-a"
const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" }
const run = Date.now().toString(36)

const calls = [
  { call_id: `call_${run}_1`, buyer_id: "buyer_acme", duration_s: 95, price_cents: 450, currency: "USD" },
  { call_id: `call_${run}_2`, buyer_id: "buyer_acme", duration_s: 20, price_cents: 120, currency: "EUR" },
  { call_id: `call_${run}_3`, buyer_id: "buyer_globex", duration_s: 300, price_cents: 900 } // a v1 event: no currency
]

const events = calls.map((payload) => ({
  schema_version: payload.currency ? 2 : 1,
  message_type: "call.completed",
  idempotency_key: `call.completed:${payload.call_id}`,
  subject: payload.call_id,
  source: "demo",
  payload
}))

let response
try {
  response = await fetch(`${base}/v1/events`, { method: "POST", headers, body: JSON.stringify({ events }) })
} catch {
  console.error(`Cannot reach ${base}. Start the platform first: npm run dev`)
  process.exit(1)
}
console.log(`POST /v1/events → ${response.status}`, await response.json())

const dispute = {
  schema_version: 1,
  message_type: "call.dispute",
  idempotency_key: `call.dispute:${calls[0].call_id}`,
  subject: calls[0].call_id,
  source: "demo",
  payload: { call_id: calls[0].call_id, reason: "caller hung up" }
}
const disputed = await fetch(`${base}/v1/events`, { method: "POST", headers, body: JSON.stringify(dispute) })
console.log(`POST /v1/events (call.dispute) → ${disputed.status}`)

console.log("waiting for the events queue (batch timeout 5 s)…")
for (const { call_id } of calls) {
  let body
  for (let i = 0; i < 40; i++) {
    const r = await fetch(`${base}/v1/streams/${call_id}/facts`, { headers })
    body = await r.json()
    if (r.status === 200 && (call_id !== calls[0].call_id || body.version >= 2)) break
    await new Promise((resolve) => setTimeout(resolve, 500))
  }
  console.log(`\n${call_id}:`)
  for (const fact of body.facts ?? []) console.log(`  #${fact.sequence} ${fact.type} ${JSON.stringify(fact.data)}`)
  if (!body.facts) console.log("  (no facts yet)", body)
}
