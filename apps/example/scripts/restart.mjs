#!/usr/bin/env node
// Nothing lost on a restart of the local stack (issue 24, item 3), black-box against `wrangler dev` as
// `npm run dev` runs it (FACTLINE_KEEP_ACCEPTED=10m), on a fresh state directory and a free port:
//
//   1. posts `--events` call.completed events (default 1,200, in requests of 400) for 8 buyers;
//   2. hard-stops the stack with that work in flight — SIGKILL to wrangler and workerd, `--after` ms after the
//      last 202 (default 100) — or, with `--reload`, edits a source file instead (wrangler reloads the Worker);
//   3. starts it again on the same state (.wrangler/state), waits, and counts what survived: each call's stream
//      (complete, outcome only, nothing) and the projections' rows — the figures of docs/reliability.md;
//   4. checks the start-up notice (StartupCheck.mjs, what `npm run dev` prints) names the facts to recover;
//   5. runs `factline recover --since 10m` (the CLI, as a developer would) and waits until every accepted event's
//      effects are exact: every stream holds outcome, qualification and (qualified calls) charge, once each;
//      one `calls` row per call with its qualification and charge; `buyer_budgets` exactly the sum of charges;
//   6. runs the recovery again and checks nothing changed (nothing doubled).
//
// Part of `npm test` (the example's test script). Exits non-zero on any failed check.
import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { app, freePort, sleep, start } from "./LocalStack.mjs"
import * as StartupCheck from "./StartupCheck.mjs"

const { values: options } = parseArgs({ options: { events: { type: "string", default: "1200" }, after: { type: "string", default: "100" }, reload: { type: "boolean", default: false } } })
const total = Number(options.events)
const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..")
const vars = { FACTLINE_KEEP_ACCEPTED: StartupCheck.keepAccepted }
const token = "dev-token-tenant-a"
const began = Date.now()
const elapsed = () => `${((Date.now() - began) / 1000).toFixed(1)} s`

let passed = 0
let failed = 0
const check = (label, ok, detail) => {
  if (ok) passed++
  else failed++
  console.log(`${ok ? "✓" : "✗"} ${label}${ok ? "" : ` — ${detail}`}`)
  return ok
}

const run = Date.now().toString(36)
const buyers = Array.from({ length: 8 }, (_, b) => `rs_${run}_b${b}`)
const calls = Array.from({ length: total }, (_, i) => ({
  call_id: `rs_${run}_${i}`, buyer_id: buyers[i % buyers.length], duration_s: [30, 60, 120][i % 3], price_cents: 100 + (i % 7), currency: "USD"
}))
const qualifies = (c) => c.duration_s >= 60
const expectedBudgets = new Map(buyers.map((b) => [b, { spent_cents: 0, charges: 0 }]))
for (const c of calls.filter(qualifies)) {
  const b = expectedBudgets.get(c.buyer_id)
  b.spent_cents += c.price_cents
  b.charges++
}

const api = (base) => async (path, init = {}) => {
  for (;;) {
    const response = await fetch(`${base}${path}`, { ...init, headers: { "content-type": "application/json", authorization: `Bearer ${token}` } })
    // The tenant's rate limit (1,000 requests per 10 s locally): wait as told and ask again.
    if (response.status === 429) {
      await sleep(Number(response.headers.get("retry-after") ?? "1") * 1000)
      continue
    }
    return { status: response.status, body: await response.json() }
  }
}

/** Every call's stream in the ledger, classified against what its event says. */
const observeStreams = async (base) => {
  const request = api(base)
  const streams = { complete: 0, outcomeOnly: 0, partial: 0, none: 0, doubled: 0 }
  for (let i = 0; i < calls.length; i += 32) {
    await Promise.all(calls.slice(i, i + 32).map(async (c) => {
      const { status, body } = await request(`/v1/streams/${c.call_id}/facts?limit=100`)
      // 404: no stream (nothing was appended for this call).
      if (status !== 200 && status !== 404) throw new Error(`GET /v1/streams/${c.call_id}/facts: ${status} ${JSON.stringify(body)}`)
      const types = status === 404 ? [] : body.facts.map((f) => f.type).sort()
      const expected = ["outcome", "qualification", ...(qualifies(c) ? ["charge"] : [])].sort()
      if (types.length === 0) streams.none++
      else if (JSON.stringify(types) === JSON.stringify(expected)) streams.complete++
      else if (types.length > new Set(types).size) streams.doubled++
      else if (JSON.stringify(types) === '["outcome"]') streams.outcomeOnly++
      else streams.partial++
    }))
  }
  return streams
}

/** The calls rows and buyer budgets, compared with what the events say. */
const observeRows = async (base) => {
  const request = api(base)
  let rows = 0
  let exactRows = 0
  for (const buyer of buyers) {
    let cursor
    do {
      const { body } = await request(`/v1/projections/calls?buyer_id=${buyer}&limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`)
      for (const row of body.data ?? []) {
        rows++
        const c = calls[Number(row.call_id.split("_").at(-1))]
        if (c && row.duration_s === c.duration_s && row.qualified !== null && Boolean(row.qualified) === qualifies(c) && row.charged_cents === (qualifies(c) ? c.price_cents : 0)) exactRows++
      }
      cursor = body.next_cursor
    } while (cursor)
  }
  let exactBudgets = 0
  const budgets = []
  for (const buyer of buyers) {
    const { body } = await request(`/v1/projections/buyer_budgets?buyer_id=${buyer}`)
    const row = body.data?.[0]
    const expected = expectedBudgets.get(buyer)
    budgets.push(row ? `${row.charges}/${expected.charges}` : `none/${expected.charges}`)
    if (row && row.spent_cents === expected.spent_cents && row.charges === expected.charges && row.refunds === 0) exactBudgets++
  }
  return { rows, exactRows, exactBudgets, budgets }
}
const exactRows = (o) => o.rows === calls.length && o.exactRows === calls.length && o.exactBudgets === buyers.length
const exactStreams = (s) => s.complete === calls.length
const describeStreams = (s) => `streams: ${s.complete} complete, ${s.outcomeOnly} outcome only, ${s.partial} partial, ${s.none} none, ${s.doubled} doubled`
const describeRows = (o) => `calls rows ${o.rows} (${o.exactRows} exact); budgets exact ${o.exactBudgets}/${buyers.length} (charges ${o.budgets.join(" ")})`

/** Observes the rows until they are exact or `seconds` pass; the last observation. */
const rowsUntilExact = async (base, seconds) => {
  const deadline = Date.now() + seconds * 1000
  for (;;) {
    const o = await observeRows(base)
    if (exactRows(o) || Date.now() > deadline) return o
    await sleep(1_000)
  }
}

const state = mkdtempSync(join(tmpdir(), "factline-restart-"))
let stack
const source = join(app, "src", "index.ts")
const original = readFileSync(source, "utf8")
try {
  stack = await start({ cwd: app, state, port: await freePort(), vars })
  const request = api(stack.base)
  let accepted = 0
  for (let i = 0; i < calls.length; i += 400) {
    const events = calls.slice(i, i + 400).map((payload) => ({
      schema_version: 2, message_type: "call.completed", idempotency_key: `call.completed:${payload.call_id}`, subject: payload.call_id, payload
    }))
    const posted = await request("/v1/events", { method: "POST", body: JSON.stringify({ events }) })
    if (posted.status === 202) accepted += posted.body.accepted
  }
  check(`${total} events accepted (202) in ${Math.ceil(total / 400)} requests`, accepted === total, `${accepted} accepted`)
  await sleep(Number(options.after))
  if (options.reload) {
    // A file edit (a comment; restored at the end): wrangler rebuilds and reloads the Worker.
    const before = stack.output().length
    writeFileSync(source, `${original}\n// reloaded ${run}\n`)
    const edited = Date.now()
    let seen
    for (let i = 0; i < 300 && !(seen = /^.*(reload|updated).*$/im.exec(stack.output().slice(before))); i++) await sleep(100)
    console.log(`  src/index.ts edited ${Number(options.after)} ms after the last 202; wrangler said ${JSON.stringify(seen?.[0]?.trim() ?? "nothing")} ${((Date.now() - edited) / 1000).toFixed(1)} s later (${elapsed()})`)
  } else {
    await stack.kill()
    console.log(`  hard-stopped (SIGKILL, wrangler and workerd) ${Number(options.after)} ms after the last 202 (${elapsed()})`)
    stack = await start({ cwd: app, state, port: await freePort(), vars })
    console.log(`  started again on the same state (${elapsed()})`)
  }
  // What survived: given time, whatever the restarted stack would do by itself (shard alarms, the queues).
  await sleep(8_000)
  const settledRows = await observeRows(stack.base)
  const settledStreams = await observeStreams(stack.base)
  console.log(`  before recovery, 8 s after the start (${elapsed()}): ${describeStreams(settledStreams)}; ${describeRows(settledRows)}`)
  check("work was in flight when the stack stopped (some effects missing before recovery)", !exactRows(settledRows) || !exactStreams(settledStreams), `${describeStreams(settledStreams)}; ${describeRows(settledRows)}`)

  const notice = await StartupCheck.check(stack.base)
  for (const line of notice.lines) console.log(`  start-up notice: ${line}`)
  check("the start-up notice names the facts of the last 10 min and the recover command",
    notice.lines.some((l) => /\d+ facts appended in the last 10 min may not have reached their queues — run `npm run factline -- recover --since 10m/.test(l)), notice.lines.join(" | "))

  const recover = () => execFileSync(process.execPath, ["--import", "./scripts/NodeSources.mjs", "packages/workers/cli/factline.ts", "recover", "--since", "10m", "--url", stack.base, "--token", StartupCheck.platformToken], { cwd: root, encoding: "utf8" })
  const first = recover()
  console.log(first.trim().split("\n").map((l) => `  $ factline recover --since 10m: ${l}`).join("\n"))
  check("factline recover reports the facts it relayed again", /\d+ fact\(s\) appended since .* relayed again/.test(first), first)

  const recovered = Date.now()
  const after = await rowsUntilExact(stack.base, 90)
  console.log(`  projections exact ${((Date.now() - recovered) / 1000).toFixed(1)} s after the recovery (${elapsed()}): ${describeRows(after)}`)
  check("after recovery every accepted event's projection rows are exact: one calls row each, buyer budgets the sum of charges", exactRows(after), describeRows(after))
  const streams = await observeStreams(stack.base)
  console.log(`  ledger (${elapsed()}): ${describeStreams(streams)}`)
  check("after recovery every call's stream holds outcome, qualification and (if qualified) charge, once each", exactStreams(streams), describeStreams(streams))

  recover()
  await sleep(5_000)
  const again = await observeRows(stack.base)
  check("recovering again changes nothing (nothing doubled)", exactRows(again), describeRows(again))
} catch (error) {
  failed++
  console.log(`✗ restart run failed: ${error instanceof Error ? error.stack : String(error)}\n${stack?.output().slice(-3000) ?? ""}`)
} finally {
  if (readFileSync(source, "utf8") !== original) writeFileSync(source, original)
  stack?.stop()
  await sleep(500)
  rmSync(state, { recursive: true, force: true })
}
console.log(`restart: ${passed} passed, ${failed} failed (${elapsed()})`)
process.exit(failed === 0 ? 0 : 1)
