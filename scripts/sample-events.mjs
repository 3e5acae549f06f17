#!/usr/bin/env node
// Writes an NDJSON file of N example `call.completed` envelopes (default 10,000) to stdout, for
// `npm run factline -- import FILE` and the import benchmark. `--invalid K` replaces K lines, spread
// over the file, with deliberately invalid ones (not JSON, an unknown type, a payload that fails its
// schema) and prints their line numbers on stderr. `--run ID` names the calls (default: a fresh id,
// so every file imports new calls; the same --run gives the same file, so importing it again adds nothing).
//
//   node scripts/sample-events.mjs 10000 --invalid 7 > events.ndjson
const args = process.argv.slice(2)
const flag = (name, fallback) => {
  const i = args.indexOf(`--${name}`)
  return i === -1 ? fallback : args[i + 1]
}
const count = Number(args.find((a, i) => /^\d+$/.test(a) && !args[i - 1]?.startsWith("--")) ?? 10_000)
const invalid = Number(flag("invalid", 0))
const run = flag("run", `s${Date.now().toString(36)}`)
const tenant = flag("tenant", "tenant-a")
if (!Number.isInteger(count) || count < 0 || !Number.isInteger(invalid) || invalid < 0) {
  console.error("usage: sample-events.mjs [N] [--invalid K] [--run ID] [--tenant T]")
  process.exit(2)
}
const total = count + invalid
const invalidLines = new Set(Array.from({ length: invalid }, (_, k) => Math.floor(((k + 0.5) * total) / invalid) + 1))
const created = new Date(Date.UTC(2026, 10, 22)).toISOString()
const out = []
let call = 0
for (let line = 1; line <= total; line++) {
  if (invalidLines.has(line)) {
    const kind = line % 3
    out.push(kind === 0 ? `{"not json` : JSON.stringify(kind === 1 ? { message_type: "call.unknown", idempotency_key: `bad:${run}:${line}` } : {
      schema_version: 2, message_type: "call.completed", message_id: `msg_${run}_bad_${line}`, idempotency_key: `call.completed:${run}_bad_${line}`,
      correlation_id: run, tenant_id: tenant, subject: `${run}_bad_${line}`, source: "sample", created_at: created,
      payload: { call_id: `${run}_bad_${line}`, buyer_id: "b", duration_s: -1, price_cents: 1, currency: "EUR" }
    }))
    continue
  }
  const i = call++
  const call_id = `${run}_call_${i}`
  out.push(JSON.stringify({
    schema_version: 2, message_type: "call.completed", message_id: `msg_${call_id}`, idempotency_key: `call.completed:${call_id}`,
    correlation_id: run, tenant_id: tenant, subject: call_id, source: "sample", created_at: created,
    payload: { call_id, buyer_id: `${run}_buyer_${i % 100}`, duration_s: 30 + (i % 120), price_cents: 100 + (i % 400), currency: "EUR" }
  }))
  if (out.length >= 1_000) process.stdout.write(`${out.splice(0).join("\n")}\n`)
}
if (out.length > 0) process.stdout.write(`${out.join("\n")}\n`)
if (invalid > 0) console.error(`invalid lines: ${[...invalidLines].sort((a, b) => a - b).join(", ")}`)
