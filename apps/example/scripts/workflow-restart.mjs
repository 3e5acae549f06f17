#!/usr/bin/env node
// Workflow instances survive a restart of the local stack while they wait (issue 37: "every external call of the
// CRM sync happens once per step … through … a restart of the stack while an instance sleeps"), black-box against
// `wrangler dev` on a fresh state directory and a free port, with the CRM stand-in (CrmReceiver.mjs) in this process:
//
//   1. starts the stack with CRM_URL (the stand-in) and a short CRM_DISPUTE_WINDOW (`--window`, default 15 s),
//      and `--test-scheduled`; posts `--calls` qualified call.completed events (default 3) for tenant-a, plus one
//      more call that will be disputed late;
//   2. waits until every crm-sync instance waits for its call's dispute (GET /v1/workflows?workflow=crm-sync:
//      status waiting, step wait/dispute) — the contact and the deal are in the CRM, the note is not;
//   3. hard-stops the stack (SIGKILL to wrangler and workerd) before the window ends, and starts it again on the
//      same state;
//   4. once the window has passed, notes what the instances do by themselves (local Workflows do not resume a
//      sleeping or waiting instance after a restart until an event reaches it), then disputes the one call, late
//      (call.dispute → refund): the fact reaches its instance (sendEvent), which resumes, finds its wait timed
//      out and attaches the no-dispute note (a dispute after the window does not change it);
//   6. runs the scheduled handler once they are overdue — GET /__scheduled?cron=*/5+*+*+*+* (wrangler dev
//      --test-scheduled; a local stack fires no crons by itself). This is what the cron (wrangler.jsonc triggers,
//      every 5 minutes) does in production: Maintenance.run's watchdog (core's workflows/Instances.ts wakeOverdue)
//      sends an event to each instance still sleeping or waiting a minute past its time;
//   7. checks every instance ends complete (the platform's row and Cloudflare's status), the CRM stand-in shows
//      exactly one effect per operation (contact, deal, note) per call, each operation's requests under one
//      idempotency key, and each call's stream holds exactly one crm_synced fact with the expected note.
//
// Part of `npm test` (the example's test script). Prints `workflow-restart: N passed, M failed` (read by .ci/run);
// exits non-zero on any failed check.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import * as CrmReceiver from "./CrmReceiver.mjs"
import { app, freePort, sleep, start } from "./LocalStack.mjs"

const { values: options } = parseArgs({ options: { calls: { type: "string", default: "3" }, window: { type: "string", default: "15" } } })
const windowSeconds = Number(options.window)
/**
 * The watchdog wakes an instance this long past its time: the stack runs with FACTLINE_WORKFLOW_OVERDUE_SECONDS=5
 * (default 60, core's workflows/Instances.ts), so the run waits 5 s for it, not a minute.
 */
const overdueAfterMs = 5_000
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
const calls = Array.from({ length: Number(options.calls) }, (_, i) => `wr_${run}_${i}`)
const disputed = `wr_${run}_disputed`
const all = [...calls, disputed]
const completed = (callId) => ({
  schema_version: 2, message_type: "call.completed", idempotency_key: `call.completed:${callId}`, subject: callId,
  payload: { call_id: callId, buyer_id: `wr_${run}_buyer`, duration_s: 120, price_cents: 450, currency: "USD" }
})
const dispute = (callId) => ({
  schema_version: 1, message_type: "call.dispute", idempotency_key: `call.dispute:${callId}`, subject: callId, payload: { call_id: callId, reason: "never called" }
})

const api = (base) => async (path, init = {}) => {
  const response = await fetch(`${base}${path}`, { ...init, headers: { "content-type": "application/json", authorization: `Bearer ${token}` } })
  const text = await response.text()
  return { status: response.status, body: text === "" ? null : JSON.parse(text) }
}

/** The crm-sync instances of this run's calls, by call id (GET /v1/workflows). */
const instances = async (base) => {
  const { status, body } = await api(base)("/v1/workflows?workflow=crm-sync&limit=200")
  if (status !== 200) throw new Error(`GET /v1/workflows: ${status} ${JSON.stringify(body)}`)
  return new Map(body.data.filter((i) => all.includes(i.subject)).map((i) => [i.subject, i]))
}
const describe = (listed) => all.map((c) => `${c.split("_").at(-1)}: ${listed.get(c)?.status ?? "none"}${listed.get(c)?.step ? ` (${listed.get(c).step})` : ""}`).join(", ")

/** Polls the instances until `done(listed)` or `seconds` pass; the last listing. */
const instancesUntil = async (base, done, seconds) => {
  const deadline = Date.now() + seconds * 1000
  for (;;) {
    const listed = await instances(base)
    if (done(listed) || Date.now() > deadline) return listed
    await sleep(500)
  }
}
const every = (ids, status) => (listed) => ids.every((c) => listed.get(c)?.status === status)

const crmState = async (crm, callId) => (await fetch(`${crm.url}/state?call_id=${encodeURIComponent(callId)}`)).json()
const operations = (state) => state.effects.map((e) => e.operation).join(",")

const state = mkdtempSync(join(tmpdir(), "factline-workflow-restart-"))
const crm = await CrmReceiver.start()
const vars = { CRM_URL: crm.url, CRM_DISPUTE_WINDOW: `${windowSeconds} seconds`, FACTLINE_WORKFLOW_OVERDUE_SECONDS: String(overdueAfterMs / 1000) }
const args = ["--test-scheduled"]
let stack
try {
  stack = await start({ cwd: app, state, port: await freePort(), vars, args })
  console.log(`  stack started, CRM stand-in at ${crm.url}, dispute window ${windowSeconds} s (${elapsed()})`)
  const posted = await api(stack.base)("/v1/events", { method: "POST", body: JSON.stringify({ events: all.map(completed) }) })
  check(`${all.length} qualified call.completed events accepted (202)`, posted.status === 202 && posted.body.accepted === all.length, `${posted.status} ${JSON.stringify(posted.body)}`)

  const waiting = await instancesUntil(stack.base, every(all, "waiting"), 60)
  console.log(`  instances (${elapsed()}): ${describe(waiting)}`)
  check("every crm-sync instance waits for its call's dispute (waiting, step wait/dispute, until a time)",
    all.every((c) => waiting.get(c)?.status === "waiting" && waiting.get(c)?.step === "wait/dispute" && waiting.get(c)?.wait_until !== null), describe(waiting))
  const before = await Promise.all(all.map((c) => crmState(crm, c)))
  check("while they wait the CRM has each call's contact and deal, no note", before.every((s) => operations(s) === "contacts,deals"), before.map(operations).join(" | "))
  const waitUntil = Math.max(...[...waiting.values()].map((i) => Date.parse(i.wait_until)))
  const earliest = Math.min(...[...waiting.values()].map((i) => Date.parse(i.wait_until)))

  await stack.kill()
  check("the stack was hard-stopped before any instance's window ended", Date.now() < earliest, `${((Date.now() - earliest) / 1000).toFixed(1)} s after the first window ended`)
  console.log(`  hard-stopped (SIGKILL, wrangler and workerd) while the instances wait (${elapsed()}; the windows end in ${((earliest - Date.now()) / 1000).toFixed(1)}–${((waitUntil - Date.now()) / 1000).toFixed(1)} s)`)
  stack = await start({ cwd: app, state, port: await freePort(), vars, args })
  const restarted = Date.now()
  console.log(`  started again on the same state (${elapsed()}; the last window ends in ${((waitUntil - Date.now()) / 1000).toFixed(1)} s)`)
  await sleep(Math.max(0, waitUntil + 1_000 - Date.now()))

  // A late dispute reaches its instance as an event: it resumes (the steps done before are kept), its wait has
  // timed out, and it completes with the no-dispute note — before any scheduled run.
  const disputePosted = await api(stack.base)("/v1/events", { method: "POST", body: JSON.stringify({ events: [dispute(disputed)] }) })
  check("a call.dispute posted after the restart and after the window is accepted (202)", disputePosted.status === 202, `${disputePosted.status} ${JSON.stringify(disputePosted.body)}`)
  const resumed = await instancesUntil(stack.base, every([disputed], "complete"), 30)
  check("the late dispute's event resumes its instance, which completes without a scheduled run", resumed.get(disputed)?.status === "complete", describe(resumed))

  // Past the window: what the other instances did by themselves on the restarted stack (no event reached them).
  await sleep(Math.max(0, waitUntil + overdueAfterMs + 2_000 - Date.now()))
  const unattended = await instances(stack.base)
  console.log(`  ${((Date.now() - waitUntil) / 1000).toFixed(0)} s past the dispute window, ${((Date.now() - restarted) / 1000).toFixed(0)} s after the restart, no cron run yet (${elapsed()}): ${describe(unattended)}`)
  // Overdue now: the scheduled maintenance (the cron in production) wakes them.
  const scheduled = await fetch(`${stack.base}/__scheduled?cron=*/5+*+*+*+*`)
  const scheduledText = await scheduled.text()
  console.log(`  GET /__scheduled?cron=*/5+*+*+*+* (the cron's maintenance run, ${elapsed()}): ${scheduled.status} ${scheduledText.trim().slice(0, 80)}`)
  check("the scheduled handler ran (wrangler dev --test-scheduled)", scheduled.ok, `${scheduled.status} ${scheduledText.slice(0, 300)}`)
  const ended = await instancesUntil(stack.base, every(all, "complete"), 30)
  console.log(`  instances after the scheduled run (${elapsed()}): ${describe(ended)}`)

  for (const callId of all) {
    const name = callId === disputed ? `${callId} (disputed late, after the restart)` : callId
    const listed = ended.get(callId)
    const detail = listed === undefined ? undefined : await api(stack.base)(`/v1/workflows/${listed.instance_id}`)
    check(`${name}: instance complete (platform row and Cloudflare's status), one fact appended`,
      listed?.status === "complete" && detail?.body?.cloudflare?.status === "complete" && listed.facts.length === 1,
      `row ${listed?.status} step ${listed?.step} facts ${listed?.facts?.length}; Cloudflare ${JSON.stringify(detail?.body?.cloudflare ?? null)}`)
    const crmNow = await crmState(crm, callId)
    const keys = ["contacts", "deals", "notes"].map((op) => new Set(crmNow.requests.filter((r) => r.operation === op).map((r) => r.key)).size)
    check(`${name}: the CRM has one contact, one deal, one note (one effect per step), each operation under one idempotency key`,
      operations(crmNow) === "contacts,deals,notes" && keys.every((n) => n === 1),
      `effects ${operations(crmNow)}; keys per operation ${keys.join("/")}; requests ${JSON.stringify(crmNow.requests)}`)
    const { status, body } = await api(stack.base)(`/v1/streams/${callId}/facts?limit=100`)
    const synced = status === 200 ? body.facts.filter((f) => f.type === "crm_synced") : []
    const note = "qualified call, no dispute"
    check(`${name}: its stream holds exactly one crm_synced ("${note}")`, synced.length === 1 && synced[0].data.note === note,
      `${status}: ${JSON.stringify(synced.map((f) => f.data))}`)
  }
} catch (error) {
  failed++
  console.log(`✗ workflow-restart run failed: ${error instanceof Error ? error.stack : String(error)}\n${stack?.output().slice(-3000) ?? ""}`)
} finally {
  stack?.stop()
  await crm.close()
  await sleep(500)
  rmSync(state, { recursive: true, force: true })
}
console.log(`workflow-restart: ${passed} passed, ${failed} failed (${elapsed()})`)
process.exit(failed === 0 ? 0 : 1)
