#!/usr/bin/env node
// Sends a few call.completed events (v1 and v2) and a dispute to a running `npm run dev`,
// then prints the facts that appeared in each call's stream — and subscribes a local webhook receiver to
// charge.created first, printing the signed deliveries it got (verified with the standardwebhooks package).
import { Webhook } from "standardwebhooks"
import * as Receiver from "./Receiver.mjs"

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

const receiver = await Receiver.start()
const hookPath = `/hooks/ok-demo-${run}`
let endpoint
try {
  const created = await fetch(`${base}/v1/webhooks/endpoints`, {
    method: "POST", headers, body: JSON.stringify({ url: `${receiver.url}${hookPath}`, event_types: ["charge.created"], description: "npm run demo" })
  })
  endpoint = await created.json()
  console.log(`POST /v1/webhooks/endpoints → ${created.status} ${endpoint.id ?? JSON.stringify(endpoint)} (secret ${endpoint.secret ? "whsec_…, shown once" : "none"})`)
} catch {
  console.error(`Cannot reach ${base}. Start the platform first: npm run dev`)
  process.exit(1)
}

const response = await fetch(`${base}/v1/events`, { method: "POST", headers, body: JSON.stringify({ events }) })
console.log(`POST /v1/events → ${response.status}`, await response.json())

const streamOf = async (call_id, ready) => {
  let body
  for (let i = 0; i < 60; i++) {
    const r = await fetch(`${base}/v1/streams/${call_id}/facts`, { headers })
    body = await r.json()
    if (r.status === 200 && ready(body)) break
    await new Promise((resolve) => setTimeout(resolve, 500))
  }
  return body
}

// The dispute, once the first call has been charged (outcome → qualification → charge): it is refunded.
console.log("waiting for the first call's charge (events, then fact-processing)…")
await streamOf(calls[0].call_id, (b) => b.facts.some((f) => f.type === "charge"))
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

for (const { call_id } of calls) {
  const body = await streamOf(call_id, (b) => call_id !== calls[0].call_id || b.facts.some((f) => f.type === "refund"))
  console.log(`\n${call_id}:`)
  for (const fact of body.facts ?? []) console.log(`  #${fact.sequence} ${fact.type} ${JSON.stringify(fact.data)}`)
  if (!body.facts) console.log("  (no facts yet)", body)
}

console.log("\nwaiting for the charge.created webhooks (the webhooks queue's batch timeout is 5 s, twice: fan-out, then delivery)…")
let deliveries = []
for (let i = 0; i < 60 && new Set(deliveries.map((d) => d.headers["webhook-id"])).size < 2; i++) {
  await new Promise((resolve) => setTimeout(resolve, 500))
  deliveries = await (await fetch(`${receiver.url}/received?path=${encodeURIComponent(hookPath)}`)).json()
}
for (const d of deliveries) {
  let verified
  try {
    verified = new Webhook(endpoint.secret).verify(d.body, d.headers)
  } catch (error) {
    verified = undefined
  }
  console.log(`  ${d.headers["webhook-id"]} ${verified ? "signature ok" : "SIGNATURE INVALID"} ${d.body}`)
}
if (endpoint?.id) await fetch(`${base}/v1/webhooks/endpoints/${endpoint.id}`, { method: "DELETE", headers })
await receiver.close()
