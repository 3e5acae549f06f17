#!/usr/bin/env node
// `factline workflows list|show|terminate|retry` against the real local stack (wrangler dev on a fresh state
// directory and a free port, with the CRM stand-in the crm-sync workflow writes to, its dispute window 1 minute):
// three qualified calls start three crm-sync instances — the CRM refuses one's deal once (the instance
// compensates and fails), the two others wait for their call's dispute. The CLI lists them (filtered by status
// and subject), shows the failed one (Cloudflare's errored status, its error's first line, the fact it appended),
// terminates a waiting one (terminated at Cloudflare and in the list; a second terminate exits 1 with the 409),
// retries the failed one (it runs again: the deal is made now, and it waits for its dispute), and refuses another
// tenant's token (404) and a usage error (exit 2). Prints `workflows-cli: N passed, M failed`; exits non-zero on
// any failure. Stops every process it starts.
import { execFile } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import * as CrmReceiver from "./CrmReceiver.mjs"
import * as LocalStack from "./LocalStack.mjs"

const app = join(dirname(fileURLToPath(import.meta.url)), "..")
const cliPath = join(app, "..", "..", "packages", "workers", "cli", "factline.ts")
const sources = join(app, "..", "..", "scripts", "NodeSources.mjs")
const state = mkdtempSync(join(tmpdir(), "factline-workflows-cli-"))
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
let passed = 0
let failed = 0
const check = (name, ok, detail) => {
  if (ok) passed++
  else failed++
  console.log(`${ok ? "✓" : "✗"} workflows-cli: ${name}${ok ? "" : ` — ${String(detail).slice(0, 2_000)}`}`)
}

let stack
let crm
// Interrupted (ctrl-c, a timeout): the stack is stopped all the same.
for (const signal of ["SIGINT", "SIGTERM"]) process.once(signal, () => { stack?.stop(); process.exit(1) })
try {
  crm = await CrmReceiver.start()
  stack = await LocalStack.start({ cwd: app, state, port: await LocalStack.freePort(), vars: { CRM_URL: crm.url, CRM_DISPUTE_WINDOW: "1 minute" } })
  const base = stack.base
  const cli = (args, token = "dev-token-tenant-a") =>
    new Promise((resolve) => {
      execFile(process.execPath, ["--import", sources, cliPath, ...args, "--url", base, "--token", token], { env: { ...process.env, NO_COLOR: "1", FACTLINE_URL: "", FACTLINE_TOKEN: "" }, timeout: 60_000 }, (error, stdout, stderr) =>
        resolve({ code: error ? (typeof error.code === "number" ? error.code : 1) : 0, stdout, stderr }))
    })
  const api = async (path) => (await fetch(`${base}${path}`, { headers: { authorization: "Bearer dev-token-tenant-a" } })).json()
  const run = Date.now().toString(36)
  const [done, refused, terminated] = [`wf_ok_${run}`, `wf_refused_${run}`, `wf_stop_${run}`]
  const call = (call_id) => ({
    schema_version: 2, message_type: "call.completed", idempotency_key: `call.completed:${call_id}`, subject: call_id,
    payload: { call_id, buyer_id: `buyer_${run}`, duration_s: 120, price_cents: 450, currency: "USD" }
  })
  const control = await fetch(`${crm.url}/control`, { method: "POST", body: JSON.stringify({ call_id: refused, operation: "deals", status: 422, times: 1 }) })
  if (!control.ok) throw new Error(`CRM control: ${control.status}`)
  const posted = await fetch(`${base}/v1/events`, {
    method: "POST",
    headers: { authorization: "Bearer dev-token-tenant-a", "content-type": "application/json" },
    body: JSON.stringify({ events: [call(done), call(refused), call(terminated)] })
  })
  if (posted.status !== 202) throw new Error(`POST /v1/events: ${posted.status} ${await posted.text()}`)
  // Until one instance failed and two wait for their dispute (the instances move by themselves: no fixed sleep).
  const bySubject = {}
  for (let deadline = Date.now() + 180_000; ; await sleep(300)) {
    const page = await api(`/v1/workflows?workflow=crm-sync&limit=200`)
    for (const w of page.data ?? []) bySubject[w.subject] = w
    if (bySubject[refused]?.status === "failed" && bySubject[done]?.status === "waiting" && bySubject[terminated]?.status === "waiting") break
    if (Date.now() > deadline) throw new Error(`the instances did not settle: ${JSON.stringify(bySubject)}`)
  }
  const id = (subject) => bySubject[subject].instance_id

  let r = await cli(["workflows"])
  check("workflows lists the three instances with status, step and what they wait for until when",
    r.code === 0 && /^UPDATED\s+ID\s+WORKFLOW\s+SUBJECT/m.test(r.stdout) && [done, refused, terminated].every((s) => r.stdout.includes(s)) &&
      new RegExp(`${refused}\\s+tenant-a\\s+failed`).test(r.stdout) && /waiting\s+wait\/dispute\s+1\s+dispute \(refund \| dispute_rejected\) until \d\d:\d\d:\d\d/.test(r.stdout), JSON.stringify(r))
  r = await cli(["workflows", "list", "--status", "failed", "--subject", refused])
  check("workflows list --status --subject filters", r.code === 0 && r.stdout.includes(id(refused)) && !r.stdout.includes(id(done)), JSON.stringify(r))
  r = await cli(["workflows", "show", id(refused)])
  check("workflows show: the row, Cloudflare's errored status, the error's first line and the fact it appended",
    r.code === 0 && /^status\s+failed$/m.test(r.stdout) && /^cloudflare\s+errored$/m.test(r.stdout) && /^error\s+PermanentError: CRM POST \/deals answered 422/m.test(r.stdout) &&
      /crm_sync_failed\s+#\d+/.test(r.stdout), JSON.stringify(r))
  r = await cli(["workflows", "terminate", id(terminated)])
  const stopped = await api(`/v1/workflows/${id(terminated)}`)
  check("workflows terminate ID stops a waiting instance: terminated at Cloudflare and in the index",
    r.code === 0 && r.stdout.startsWith(`terminated ${id(terminated)} at step wait/dispute; Cloudflare: terminated`) && stopped.status === "terminated" && stopped.cloudflare?.status === "terminated", JSON.stringify([r, stopped]))
  r = await cli(["workflows", "terminate", id(terminated)])
  check("terminating it again exits 1 with the 409 naming Cloudflare's refusal", r.code === 1 && r.stderr.includes("409 workflow_refused") && r.stderr.includes("instance.cannot_terminate"), JSON.stringify(r))
  r = await cli(["workflows", "retry", id(refused)])
  check("workflows retry ID restarts the failed instance", r.code === 0 && r.stdout.startsWith(`retrying ${id(refused)}: restarted at Cloudflare`), JSON.stringify(r))
  let again
  for (let deadline = Date.now() + 120_000; Date.now() < deadline; await sleep(300)) {
    again = await api(`/v1/workflows/${id(refused)}`)
    if (again.status === "waiting") break
  }
  const deals = (await (await fetch(`${crm.url}/state?call_id=${refused}`)).json()).requests.filter((q) => q.operation === "deals").map((q) => q.status)
  check("the retried instance runs again: the deal is made now, and it waits for its dispute", again?.status === "waiting" && again.error === null && JSON.stringify(deals) === "[422,201]", JSON.stringify([again, deals]))
  r = await cli(["workflows", "show", id(done)], "dev-token-tenant-b")
  check("another tenant's token: 404 (exit 1)", r.code === 1 && r.stderr.includes("404 not_found"), JSON.stringify(r))
  r = await cli(["workflows", "retry"])
  check("workflows retry without an ID is a usage error (exit 2)", r.code === 2 && r.stderr.includes("workflows retry needs an instance ID"), JSON.stringify(r))
} catch (error) {
  failed++
  console.log(`✗ workflows-cli run failed: ${error instanceof Error ? error.stack : String(error)}`)
  if (stack) console.log(stack.output().slice(-3_000))
} finally {
  stack?.stop()
  await crm?.close()
  rmSync(state, { recursive: true, force: true })
}
console.log(`workflows-cli: ${passed} passed, ${failed} failed`)
process.exit(failed === 0 ? 0 : 1)
