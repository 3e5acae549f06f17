#!/usr/bin/env node
// The operators' tools against the real local stack that `npm run dev` runs (wrangler dev on a fresh state
// directory and a free port, as the smoke run starts it): produces dead letters and a batch job, then
//   - drives the dashboard (GET /dashboard) in headless Chromium (playwright-core, with the browser that
//     @sparticuz/chromium ships through npm install): signs in, sees the health table and charts, finds a
//     dead letter (whose subject is an HTML payload: it must render as text), replays it and sees it
//     resolved, skips one through the reason dialog, sees the batch job, watches a failing webhook delivery's
//     attempts live in the Runs panel, retries it now and sees it end ok once a receiver listens, opens a dead
//     run's dead letter; lists the crm-sync's workflow instances (one failed — the CRM stand-in refusing its deal —
//     one waiting for its call's dispute), filters them and opens the failed one's detail; a tenant's token sees only its
//     tenant, and erases a data subject of it (the confirmation, then the erasure followed to erased); screenshots go to apps/example/.artifacts/ (git-ignored);
//   - opens the API reference (GET /docs) with every request outside the local stack refused: Scalar comes
//     from the same static assets as the page, and renders the routes of /openapi.json;
//   - runs the CLI (the `factline` bin of @factline/workers, as `npm run factline` does) against it: health,
//     dlq list/show/replay/skip, bulk replay, runs (list, --follow, retry), tenants (place, move; a reshard of tenant-c
//     started before the browser part and followed to done beside it), errors.
// Waits on selectors and on the API's state, never on fixed sleeps. Stops every process it starts.
// Prints `cli: N passed, M failed` and `browser: N passed, M failed`; exits non-zero on any failure. Part of `npm test`.
import chromium from "@sparticuz/chromium"
import { chromium as playwright } from "playwright-core"
import { execFile } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import * as CrmReceiver from "./CrmReceiver.mjs"
import * as LocalStack from "./LocalStack.mjs"

const app = join(dirname(fileURLToPath(import.meta.url)), "..")
const cliPath = join(app, "..", "..", "packages", "workers", "cli", "factline.ts")
const sources = join(app, "..", "..", "scripts", "NodeSources.mjs")
const artifacts = join(app, ".artifacts")
const state = mkdtempSync(join(tmpdir(), "factline-browser-"))
const started = Date.now()
const platformToken = "dev-token-platform"
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

const tally = { cli: { passed: 0, failed: 0 }, browser: { passed: 0, failed: 0 } }
const check = (suite, name, ok, detail) => {
  tally[suite][ok ? "passed" : "failed"]++
  console.log(`${ok ? "✓" : "✗"} ${suite}: ${name}${ok ? "" : ` — ${String(detail).slice(0, 2_000)}`}`)
  return ok
}

let stack
let browser
let crm
try {
  // The crm module's CRM (the crm-sync workflow's): the stand-in, failing on command.
  crm = await CrmReceiver.start()
  // The personal-data key cache's bound at 1 s (default 60): the erasure started from the page waits it out before it cleans.
  // The tests' token set (.dev.vars' and tenant-c's, whose ledger the CLI reshards: a tenant nothing else here touches).
  stack = await LocalStack.start({
    cwd: app, state, port: await LocalStack.freePort(),
    vars: { CRM_URL: crm.url, FACTLINE_KEY_CACHE_SECONDS: "1", FACTLINE_TOKENS: readFileSync(join(app, "test", "dev-tokens.json"), "utf8").trim() }
  })
  const base = stack.base
  console.log(`stack ready in ${((Date.now() - started) / 1_000).toFixed(1)} s at ${base}`)
  const api = async (method, path, { token = platformToken, body } = {}) => {
    const headers = { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) }
    const response = await fetch(`${base}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
    return { status: response.status, body: await response.json() }
  }
  /** Polls `read` until `done(value)` (bounded); returns the last value. */
  const until = async (read, done, { timeoutMs = 60_000, what = "condition" } = {}) => {
    const deadline = Date.now() + timeoutMs
    let value
    for (;;) {
      value = await read()
      if (done(value)) return value
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}: ${JSON.stringify(value).slice(0, 500)}`)
      await sleep(200)
    }
  }

  /** The factline CLI (its TypeScript sources, as `npm run factline` runs it): exit code, stdout, stderr. */
  const cli = (args, env = {}, timeout = 60_000) =>
    new Promise((resolve) => {
      execFile(process.execPath, ["--import", sources, cliPath, ...args], { env: { ...process.env, NO_COLOR: "1", FACTLINE_URL: "", FACTLINE_TOKEN: "", ...env }, timeout }, (error, stdout, stderr) =>
        resolve({ code: error ? (typeof error.code === "number" ? error.code : 1) : 0, stdout, stderr }))
    })

  // Traffic: calls that succeed (throughput), and calls whose subject differs from their call_id — the
  // calls module fails them permanently, so each becomes one dead letter on factline-events.
  const run = Date.now().toString(36)
  const call = (call_id, subject = call_id) => ({
    schema_version: 2, message_type: "call.completed", idempotency_key: `call.completed:${call_id}`, subject,
    payload: { call_id, buyer_id: `buyer_${run}`, duration_s: 90, price_cents: 300, currency: "USD" }
  })
  const good = Array.from({ length: 8 }, (_, i) => call(`ok_${run}_${i}`))
  const xss = `<img src=x onerror="window.__xss=1">${run}`
  const bad = {
    replayInBrowser: call(`bad_${run}_a`, xss),
    skipInBrowser: call(`bad_${run}_b`, `wrong_${run}_b`),
    cliReplay: call(`bad_${run}_c`, `wrong_${run}_c`),
    cliSkip: call(`bad_${run}_d`, `wrong_${run}_d`),
    cliBulk: call(`bad_${run}_e`, `wrong_${run}_e`)
  }
  // Workflows: two qualified calls start a crm-sync each — the CRM refuses one's deal for good (the instance
  // compensates and fails), the other waits for its call's dispute (the window: 2 days).
  const crmFail = `crm_fail_${run}`
  const crmWait = `crm_wait_${run}`
  const crmCall = (callId) => ({ ...call(callId), payload: { ...call(callId).payload, buyer_id: `crm_buyer_${run}` } })
  const refusing = await fetch(`${crm.url}/control`, { method: "POST", body: JSON.stringify({ call_id: crmFail, operation: "deals", status: 422, times: null }) })
  if (!refusing.ok) throw new Error(`CRM control: ${refusing.status}`)
  const posted = await api("POST", "/v1/events", { token: "dev-token-tenant-a", body: { events: [...good, ...Object.values(bad), crmCall(crmFail), crmCall(crmWait)] } })
  if (posted.status !== 202) throw new Error(`POST /v1/events: ${JSON.stringify(posted)}`)
  // Wait until the tenant's first facts exist (its ledger shards are registered), so the rebuild has shards to walk.
  await until(() => api("GET", `/v1/projections/calls?buyer_id=buyer_${run}`, { token: "dev-token-tenant-a" }), (r) => r.body.data?.length === good.length, { what: "the good calls' projection rows" })
  // A reshard of tenant-c's ledger (the stack's 16 shards → 32), followed by the CLI in the background: its steps
  // wait on factline-batch's 10 s batch timeout, so it runs beside the browser part and is checked with the CLI's
  // (a tenant of its own: nothing else this run does touches tenant-c).
  const postedC = await api("POST", "/v1/events", { token: "dev-token-tenant-c", body: { events: Array.from({ length: 8 }, (_, i) => call(`rs_${run}_${i}`)) } })
  if (postedC.status !== 202) throw new Error(`POST /v1/events (tenant-c): ${JSON.stringify(postedC)}`)
  const reshardStream = (i = 0) => api("GET", `/v1/streams/${encodeURIComponent(`rs_${run}_${i}`)}/facts`, { token: "dev-token-tenant-c" })
  // The first and last calls' three facts each (outcome, qualification, charge) in the ledger before the reshard starts.
  await until(() => reshardStream(7), (r) => r.body.facts?.length === 3, { what: "tenant-c's last call's three facts" })
  const factsBefore = (await until(reshardStream, (r) => r.body.facts?.length === 3, { what: "tenant-c's first call's three facts" })).body
  const rebuild = await api("POST", "/v1/batches", { body: { operation: "rebuild", projection: "calls" } })
  if (rebuild.status !== 202) throw new Error(`POST /v1/batches: ${JSON.stringify(rebuild)}`)
  const batchId = rebuild.body.batch_id
  // Polled once, awaited twice: the reshard below and the erasure in the browser part each wait for it.
  const rebuildEnded = until(() => api("GET", `/v1/batches/${batchId}`), (r) => ["completed", "failed"].includes(r.body.status), { timeoutMs: 180_000, what: "the rebuild to end" })
  // A reshard waits for a running rebuild (409): the CLI starts it once the rebuild above has ended.
  const reshardFollowed = rebuildEnded
    .then(() => cli(["tenants", "reshard", "tenant-c", "--shards", "32", "--follow", "--url", base, "--token", platformToken], {}, 300_000))
    .catch((error) => ({ code: -1, stdout: "", stderr: String(error) }))

  const keyOf = Object.fromEntries(Object.entries(bad).map(([k, e]) => [k, e.idempotency_key]))
  const open = await until(
    () => api("GET", "/v1/dlq?status=open&limit=200"),
    (r) => Object.values(keyOf).every((key) => r.body.data?.some((d) => d.idempotency_key === key)),
    { what: "five open dead letters" }
  )
  const idOf = Object.fromEntries(Object.entries(keyOf).map(([k, key]) => [k, open.body.data.find((d) => d.idempotency_key === key).id]))
  console.log(`5 dead letters open after ${((Date.now() - started) / 1_000).toFixed(1)} s`)

  // ---------------------------------------------------------------- browser
  const browserStarted = Date.now()
  mkdirSync(artifacts, { recursive: true })
  // The package's flags minus the two that would weaken the page's own security (same-origin, mixed content).
  const args = chromium.args.filter((a) => !/^--(disable-web-security|allow-running-insecure-content)/.test(a))
  browser = await playwright.launch({ executablePath: await chromium.executablePath(), args, headless: true })
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } })
  const page = await context.newPage()
  page.setDefaultTimeout(30_000)
  const problems = []
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`))
  page.on("console", (m) => {
    if (/Content Security Policy|Refused to/i.test(m.text())) problems.push(`console: ${m.text()}`)
  })

  const response = await page.goto(`${base}/dashboard`)
  const headers = response.headers()
  const csp = headers["content-security-policy"] ?? ""
  check("browser", "GET /dashboard (static assets) is HTML with a CSP of its own origin only, x-frame-options DENY, no-store",
    response.status() === 200 && /^text\/html/.test(headers["content-type"]) && /script-src 'self'(;|$)/.test(csp) && /style-src 'self'(;|$)/.test(csp) &&
      !/unsafe-inline|unsafe-eval|https?:/.test(csp) && /frame-ancestors 'none'/.test(csp) && headers["x-frame-options"] === "DENY" && headers["cache-control"] === "no-store",
    JSON.stringify(headers))

  // A wrong token is refused with the API's message, and the sign-in form stays.
  await page.fill("#token", "not-a-token")
  await page.press("#token", "Enter")
  await page.locator("#login-error", { hasText: "invalid bearer token" }).waitFor()
  check("browser", "a wrong token is refused with the API's message", await page.locator("#login").isVisible(), "sign-in form hidden")

  await page.fill("#token", platformToken)
  await page.press("#token", "Enter")
  await page.locator('#health-table tbody tr[data-queue="factline-events"]').waitFor()
  const healthRows = await page.locator("#health-table tbody tr").evaluateAll((rows) => rows.map((r) => [r.dataset.queue, r.dataset.status, r.querySelector(".badge")?.textContent]))
  check("browser", "the health table shows the five queues with a status each",
    healthRows.length === 5 && healthRows.every(([, status, text]) => ["ok", "warning", "critical"].includes(status) && text === status), JSON.stringify(healthRows))
  const eventsStatus = healthRows.find(([q]) => q === "factline-events")?.[1]
  const colour = await page.locator('#health-table tr[data-queue="factline-events"] .badge').evaluate((el) => getComputedStyle(el).backgroundColor)
  check("browser", "factline-events is warning (open dead letters), coloured amber", eventsStatus === "warning" && colour === "rgb(254, 249, 195)", `${eventsStatus} ${colour}`)
  const charts = await page.locator("#health svg path.line").count()
  check("browser", "throughput and lag charts are drawn from the series", charts >= 2 && (await page.locator("#health svg.spark").count()) === 10, `${charts} lines`)
  check("browser", "the session keeps the token (sessionStorage), not localStorage",
    (await page.evaluate(() => [sessionStorage.getItem("factline.dashboard.token"), localStorage.length])).join() === `${platformToken},0`, "storage")

  const rowA = page.locator(`#dlq-rows tr[data-id="${idOf.replayInBrowser}"]`)
  await rowA.waitFor()
  const subjectText = await rowA.locator("td.subject").textContent()
  check("browser", "a dead letter's HTML-looking subject renders as text, never as markup",
    subjectText.includes("<img src=x") && (await page.locator("#dlq img, #app img").count()) === 0 && (await page.evaluate(() => window.__xss)) === undefined, subjectText)
  await page.screenshot({ path: join(artifacts, "dashboard.png"), fullPage: true })

  // Details: the original message and the failure context.
  await rowA.locator('button[data-action="details"]').click()
  const detail = page.locator(`#dlq-rows tr[data-detail="${idOf.replayInBrowser}"] pre`)
  await detail.waitFor()
  check("browser", "Details shows the original message", (await detail.textContent()).includes(keyOf.replayInBrowser), await detail.textContent())

  // Replay: the row turns replayed, and the API agrees.
  await rowA.locator('button[data-action="replay"]').click()
  await rowA.locator(".dl-status .badge", { hasText: "replayed" }).waitFor()
  const replayed = await api("GET", `/v1/dlq/${idOf.replayInBrowser}`)
  check("browser", "clicking Replay resolves the dead letter (replayed, by the platform token)",
    replayed.body.status === "replayed" && replayed.body.resolved_by === "dev-platform" && (await rowA.locator('button[data-action="replay"]').count()) === 0, JSON.stringify(replayed.body))

  // Skip: the dialog requires a reason; the record is skipped with a reconciliation fact.
  const rowB = page.locator(`#dlq-rows tr[data-id="${idOf.skipInBrowser}"]`)
  await rowB.locator('button[data-action="skip"]').click()
  await page.locator("#dialog[open]").waitFor()
  await page.click("#dialog-ok")
  await page.locator("#dialog-error", { hasText: "reason is required" }).waitFor()
  await page.fill("#dialog-input", "duplicate call from a test run")
  await page.click("#dialog-ok")
  await rowB.locator(".dl-status .badge", { hasText: "skipped" }).waitFor()
  const skipped = await api("GET", `/v1/dlq/${idOf.skipInBrowser}`)
  const stream = await api("GET", `/v1/streams/${encodeURIComponent(bad.skipInBrowser.subject)}/facts`, { token: "dev-token-tenant-a" })
  check("browser", "Skip asks for a reason, then the record is skipped and a reconciliation fact is in the ledger",
    skipped.body.status === "skipped" && skipped.body.history.at(-1)?.note === "duplicate call from a test run" &&
      stream.body.facts?.some((f) => f.type === "reconciliation" && f.data.dead_letter_id === idOf.skipInBrowser), JSON.stringify([skipped.body.status, stream.body]))

  // The batch job, with its progress bar.
  const batchRow = page.locator(`#batches tr[data-batch="${batchId}"]`)
  await page.click("#refresh")
  await batchRow.waitFor()
  const batch = await batchRow.evaluate((tr) => ({ status: tr.dataset.status, bar: tr.querySelector('[role="progressbar"]')?.getAttribute("aria-valuemax"), text: tr.textContent }))
  check("browser", "the rebuild shows under batch jobs with a progress bar", ["running", "completed"].includes(batch.status) && Number(batch.bar) > 0, JSON.stringify(batch))
  // The projections panel: every registered projection with its catch-up state.
  await page.locator('#projections tr[data-projection="buyer_budgets"]').waitFor()
  const projectionRows = await page.locator("#projections tbody tr").evaluateAll((rows) => rows.map((r) => [r.dataset.projection, r.dataset.status]))
  check("browser", "the projections panel lists calls and buyer_budgets with a catch-up status each",
    ["calls", "buyer_budgets"].every((name) => projectionRows.some(([p, status]) => p === name && ["current", "catching_up", "unchecked"].includes(status))), JSON.stringify(projectionRows))
  // Workflows: the crm-sync instances as the API records them, then on the page.
  const instanceOf = async (subject) => (await api("GET", `/v1/workflows?workflow=crm-sync&subject=${subject}`)).body.data?.[0]
  const failedInstance = await until(() => instanceOf(crmFail), (i) => i?.status === "failed", { what: "the refused crm-sync to fail" })
  const waitingInstance = await until(() => instanceOf(crmWait), (i) => i?.status === "waiting", { what: "the other crm-sync to wait for its dispute" })
  await page.fill("#w-workflow", "crm-sync")
  await page.click('#workflows-filters button[type="submit"]')
  const failedRow = page.locator(`#workflows-rows tr[data-instance="${failedInstance.instance_id}"]`)
  const waitingRow = page.locator(`#workflows-rows tr[data-instance="${waitingInstance.instance_id}"]`)
  await failedRow.waitFor()
  await waitingRow.waitFor()
  const shownFailed = await failedRow.evaluate((tr) => ({
    status: tr.dataset.status, badge: tr.querySelector(".wf-status .badge")?.textContent, subject: tr.querySelector("td.subject")?.textContent,
    step: tr.querySelector("td[data-step]")?.textContent, attempts: tr.querySelector("td[data-attempts]")?.textContent, facts: tr.querySelector("td[data-facts]")?.textContent,
    error: tr.querySelector("td.error-text")?.textContent, retry: tr.querySelectorAll('button[data-action="retry"]').length
  }))
  check("browser", "Workflows lists the failed crm-sync: its status, the step it ended on, attempts, the facts it appended, its error, Retry",
    shownFailed.status === "failed" && shownFailed.badge === "failed" && shownFailed.subject === crmFail && shownFailed.step === (failedInstance.step ?? "—") &&
      shownFailed.attempts === String(failedInstance.attempts) && shownFailed.facts === String(failedInstance.facts.length) && failedInstance.facts.length >= 1 &&
      shownFailed.error.includes("422") && shownFailed.retry === 1, JSON.stringify([shownFailed, failedInstance]))
  const shownWaiting = await waitingRow.evaluate((tr) => ({ status: tr.dataset.status, wait: tr.querySelector("td.wf-wait")?.textContent, terminate: tr.querySelectorAll('button[data-action="terminate"]').length }))
  check("browser", "the waiting crm-sync shows what it waits for and until when, with Terminate",
    shownWaiting.status === "waiting" && shownWaiting.wait.includes(waitingInstance.waiting_for) && shownWaiting.wait.includes(`until ${waitingInstance.wait_until.replace("T", " ").slice(0, 19)}`) &&
      /\(in \d+ h\)/.test(shownWaiting.wait) && shownWaiting.terminate === 1, JSON.stringify([shownWaiting, waitingInstance]))
  await page.selectOption("#w-status", "failed")
  await waitingRow.waitFor({ state: "detached" })
  const statusesShown = await page.locator("#workflows-rows tr[data-instance]").evaluateAll((rows) => rows.map((r) => r.dataset.status))
  check("browser", "the status filter shows failed instances only", statusesShown.length >= 1 && statusesShown.every((st) => st === "failed") && (await failedRow.count()) === 1, JSON.stringify(statusesShown))
  await failedRow.locator('button[data-action="details"]').click()
  const workflowDetail = page.locator(`#workflows-rows tr[data-detail="${failedInstance.instance_id}"]`)
  await workflowDetail.locator("li[data-fact]").first().waitFor()
  const shownDetail = await workflowDetail.evaluate((tr) => ({
    text: tr.textContent, error: tr.querySelector("pre.wf-error")?.textContent, facts: [...tr.querySelectorAll("li[data-fact]")].map((li) => [li.dataset.fact, li.textContent])
  }))
  const shownFact = await api("GET", `/v1/workflows/${failedInstance.instance_id}`)
  check("browser", "an instance's detail shows its error, Cloudflare's status and each appended fact (id, type)",
    shownDetail.error?.includes("422") && shownDetail.text.includes("cloudflare status") && shownDetail.text.includes(shownFact.body.cloudflare?.status ?? "unknown to Cloudflare") &&
      shownDetail.facts.length === failedInstance.facts.length && shownDetail.facts.every(([id, text]) => failedInstance.facts.includes(id) && text.includes("crm_sync_failed")),
    JSON.stringify([shownDetail, shownFact.body]))
  await page.locator("#toast").evaluate((el) => { el.hidden = true })
  await page.locator("#workflows").screenshot({ path: join(artifacts, "dashboard-workflows.png") })
  await page.locator("#toast").evaluate((el) => { el.hidden = false })

  // The toasts would float over the middle of a full-page picture: hidden for it (the screenshot's own `style`
  // option would inject a <style> element, which the page's CSP rightly refuses).
  await page.locator("#toast").evaluate((el) => { el.hidden = true })
  await page.screenshot({ path: join(artifacts, "dashboard-after-replay.png"), fullPage: true })
  await page.locator("#toast").evaluate((el) => { el.hidden = false })

  // Erase a data subject, in a tab of its own signed in with tenant B's admin token (the erasure is of the token's
  // tenant): the id typed in, a confirmation naming it and saying it cannot be undone, then the erasure's progress
  // followed on the page until it has ended erased.
  const erasing = await context.newPage()
  erasing.setDefaultTimeout(30_000)
  erasing.on("pageerror", (e) => problems.push(`page error: ${e.message}`))
  await erasing.goto(`${base}/dashboard`)
  await erasing.fill("#token", "dev-token-tenant-b")
  await erasing.press("#token", "Enter")
  await erasing.locator("#app:not([hidden])").waitFor()
  const subjectB = `buyer_erase_${run}`
  const phoneB = `+44 7700 900${String(Date.now() % 1000).padStart(3, "0")}`
  const personalCall = { schema_version: 3, message_type: "call.completed", idempotency_key: `call.completed:erase_${run}`, subject: `erase_${run}`,
    payload: { call_id: `erase_${run}`, buyer_id: subjectB, duration_s: 30, price_cents: 100, currency: "USD", caller_phone: phoneB } }
  const postedB = await api("POST", "/v1/events", { token: "dev-token-tenant-b", body: { events: [personalCall] } })
  const phoneOf = async () => (await api("GET", `/v1/streams/erase_${run}/facts`, { token: "dev-token-tenant-b" })).body.facts?.find((f) => f.type === "outcome")?.data.caller_phone
  await until(phoneOf, (phone) => phone !== undefined, { what: "tenant B's personal call in its stream" })
  const phoneBefore = await phoneOf()
  await erasing.click("#erase-button")
  await erasing.locator("#erase-error:not([hidden])").waitFor()
  await erasing.fill("#erase-subject", subjectB)
  await erasing.click("#erase-button")
  await erasing.locator("#dialog[open]").waitFor()
  const confirmation = { title: await erasing.textContent("#dialog-title"), text: await erasing.textContent("#dialog-text") }
  check("browser", "Erase a data subject: an empty id is refused; the confirmation names the subject and says it cannot be undone",
    postedB.status === 202 && phoneBefore === phoneB && confirmation.title.includes(subjectB) && confirmation.text.includes(subjectB) && /cannot be undone/.test(confirmation.text), JSON.stringify([postedB, phoneBefore, confirmation]))
  // The rebuild started above ends first: an erasure's cleaning waits while a projection rebuild runs (30 s at a time).
  await rebuildEnded
  await erasing.click("#dialog-ok")
  await erasing.locator("#erasure").waitFor()
  await until(() => api("GET", `/v1/subjects/${subjectB}/erasure`, { token: "dev-token-tenant-b" }), (r) => ["erased", "failed"].includes(r.body.phase), { timeoutMs: 120_000, what: "the erasure to end" })
  await erasing.locator('#erasure[data-phase="erased"], #erasure[data-phase="failed"]').waitFor({ timeout: 10_000 })
  const shownErasure = await erasing.locator("#erasure").evaluate((t) => ({ id: t.dataset.erasure, removed: t.querySelector("#erasure-removed")?.textContent }))
  const erasureB = await api("GET", `/v1/subjects/${subjectB}/erasure`, { token: "dev-token-tenant-b" })
  const phoneAfter = await phoneOf()
  check("browser", "the erasure's progress is followed on the page to erased (its report shown); the API agrees and the subject's phone reads [erased]",
    erasureB.body.phase === "erased" && shownErasure.id === erasureB.body.erasure_id && /projection:calls masked 1/.test(shownErasure.removed ?? "") && phoneAfter === "[erased]",
    JSON.stringify([shownErasure, erasureB.body, phoneAfter]))
  await erasing.locator("#subjects").screenshot({ path: join(artifacts, "dashboard-erasure.png") })
  await erasing.close()

  // Runs: a webhook delivery to a port nobody listens on fails (transiently) and is retried at development
  // speed (.dev.vars: 1/60); the Runs panel shows each attempt live. "Retry now" sends a copy at once (its
  // attempt is the queue's first again); once the receiver listens, the run ends ok. A dead run opens its dead letter.
  const hookPort = await LocalStack.freePort()
  const hook = await api("POST", "/v1/webhooks/endpoints", { token: "dev-token-tenant-a", body: { url: `http://127.0.0.1:${hookPort}/hooks`, event_types: ["charge.created"], description: "browser runs" } })
  const hooked = call(`hook_${run}`)
  await api("POST", "/v1/events", { token: "dev-token-tenant-a", body: { events: [hooked] } })
  const runOf = async () => (await api("GET", `/v1/runs?queue=factline-webhooks&type=webhook.delivery&subject=${hook.body.id}`)).body.data?.[0]
  const failing = await until(runOf, (r) => r?.outcome === "retry", { what: "the failing delivery's run" })
  await page.selectOption("#r-queue", "factline-webhooks")
  const runRow = page.locator(`#runs-rows tr[data-run="${failing.id}"]`)
  await runRow.waitFor()
  check("browser", "Runs shows the failing delivery with its queue, outcome, error and next retry",
    (await runRow.getAttribute("data-outcome")) !== "ok" && (await runRow.textContent()).includes("factline-webhooks") && (await runRow.locator("td.error-text").textContent()).length > 0,
    await runRow.textContent())
  // Each new attempt the API records is on the page within the panel's 1 s reload (2 s allowed).
  const lags = []
  for (let seen = failing.attempts; lags.length < 2;) {
    const next = await until(runOf, (r) => r.attempts > seen || r.outcome === "dead", { what: "the next attempt" })
    if (next.outcome === "dead") break
    seen = next.attempts
    const at = Date.now()
    await page.locator(`#runs-rows tr[data-run="${failing.id}"] td[data-attempts="${seen}"]`).waitFor({ timeout: 2_000 })
    lags.push(Date.now() - at)
  }
  check("browser", `each new attempt shows in the Runs panel within 2 s of the API recording it (${lags.map((l) => `${l} ms`).join(", ")})`, lags.length === 2, JSON.stringify(lags))
  const before = await runOf()
  await runRow.locator('button[data-action="retry-now"]').click()
  await page.locator("#toast div", { hasText: "Retrying" }).first().waitFor({ timeout: 5_000 })
  const rerun = await until(runOf, (r) => r.attempts > before.attempts, { timeoutMs: 20_000, what: "another attempt" })
  check("browser", "Retry now sends a copy at once (the API accepts it); the attempt count rises", rerun.attempts > before.attempts, JSON.stringify([before, rerun]))
  // The fault lifted: a receiver listens on the port; the next attempt (the copy's or the scheduled one) delivers.
  const { createServer } = await import("node:http")
  const received = []
  const receiver = createServer((req, res) => {
    req.on("data", () => {})
    req.on("end", () => {
      received.push(req.url)
      res.writeHead(204).end()
    })
  }).listen(hookPort, "127.0.0.1")
  const retryAgain = page.locator(`#runs-rows tr[data-run="${failing.id}"] button[data-action="retry-now"]`)
  if (await retryAgain.count()) await retryAgain.click().catch(() => {})
  await page.locator(`#runs-rows tr[data-run="${failing.id}"][data-outcome="ok"]`).waitFor({ timeout: 60_000 })
  check("browser", "once the receiver listens the run ends ok, and the delivery arrived", (await runOf()).outcome === "ok" && received.length >= 1, JSON.stringify([await runOf(), received]))
  receiver.close()
  await api("DELETE", `/v1/webhooks/endpoints/${hook.body.id}`, { token: "dev-token-tenant-a" }).catch(() => {})
  // A dead run (a call refused for good) opens its dead letters below.
  await page.selectOption("#r-queue", "factline-events")
  await page.selectOption("#r-outcome", "dead")
  await page.fill("#r-subject", bad.cliReplay.subject)
  await page.click('#runs-filters button[type="submit"]')
  const deadRow = page.locator('#runs-rows tr[data-outcome="dead"]').first()
  await deadRow.waitFor()
  await deadRow.locator('button[data-action="open-dead-letter"]').click()
  await page.locator(`#dlq-rows tr[data-id="${idOf.cliReplay}"]`).waitFor()
  check("browser", "Open dead letter shows the run's dead letters (queue and type filtered)",
    (await page.inputValue("#f-type")) === "call.completed" && (await page.inputValue("#f-queue")) === "factline-events", await page.inputValue("#f-type"))
  await page.locator("#toast").evaluate((el) => { el.hidden = true })
  await page.locator("#runs").screenshot({ path: join(artifacts, "dashboard-runs.png") })
  await page.locator("#toast").evaluate((el) => { el.hidden = false })
  const failingRun = failing.id

  check("browser", "no CSP violation or script error on the page", problems.length === 0, problems.join("; "))

  // Sign out clears the token; a tenant's admin token sees its own tenant only, and no queue health.
  await page.click("#signout")
  await page.locator("#login").waitFor()
  check("browser", "Sign out clears the token", (await page.evaluate(() => sessionStorage.getItem("factline.dashboard.token"))) === null, "token kept")
  await page.fill("#token", "dev-token-tenant-b")
  await page.press("#token", "Enter")
  await page.locator("#health-forbidden").waitFor()
  await page.locator("#projections-forbidden").waitFor()
  await page.locator("#dlq-empty:not([hidden])").waitFor()
  await page.locator("#workflows-empty:not([hidden])").waitFor()
  check("browser", "tenant B's admin token: no queue health (platform scope), none of tenant A's dead letters or workflow instances",
    (await page.locator("#dlq-rows tr").count()) === 0 && (await page.locator("#workflows-rows tr").count()) === 0 && (await page.locator("#batches-empty").count()) === 1, await page.locator("#app").textContent())
  // ---------------------------------------------------------------- API reference (GET /docs)
  // As without internet: every request that leaves the local stack is refused (and recorded). Scalar's bundle
  // is a file of the same static assets as the page, so the reference renders all the same.
  const docs = await context.newPage()
  const outside = []
  const scalarLoads = []
  await docs.route("**/*", (route) => {
    const url = route.request().url()
    if (!url.startsWith(base)) {
      outside.push(url)
      return route.abort()
    }
    if (new URL(url).pathname === "/static/scalar/standalone.js") scalarLoads.push(url)
    return route.continue()
  })
  docs.setDefaultTimeout(30_000)
  const docsProblems = []
  // Scalar's own stylesheet declares its fonts on fonts.scalar.com (also with withDefaultFonts: false), and the
  // page's CSP refuses that host (font-src 'self' data:): those refusals are the CSP keeping the page offline
  // and free of third-party requests — counted apart, and the page renders in the system's fonts. Any other
  // violation or error fails.
  const refusedFonts = []
  docs.on("pageerror", (e) => docsProblems.push(`page error: ${e.message}`))
  docs.on("console", (m) => {
    if (m.type() !== "error" || !/Content Security Policy|Refused to/i.test(m.text())) return
    if (/^Loading the font 'https:\/\/fonts\.scalar\.com\/[\w-]+\.woff2' violates the following Content Security Policy directive: "font-src 'self' data:"/.test(m.text())) refusedFonts.push(m.text())
    else docsProblems.push(m.text())
  })
  const docsResponse = await docs.goto(`${base}/docs`)
  const docsCsp = docsResponse.headers()["content-security-policy"] ?? ""
  check("browser", "GET /docs (static assets) answers HTML under a CSP of its own origin only, x-frame-options DENY",
    docsResponse.status() === 200 && /script-src 'self'(;|$)/.test(docsCsp) && !/unsafe-eval|https?:/.test(docsCsp) && docsResponse.headers()["x-frame-options"] === "DENY",
    JSON.stringify(docsResponse.headers()))
  await docs.getByText("/v1/events").first().waitFor()
  const listed = await docs.evaluate(() => document.body.innerText)
  writeFileSync(join(artifacts, "docs.txt"), listed)
  check("browser", "/docs renders the reference from /openapi.json and lists the events route (POST /v1/events) among the others",
    ["POST\n/v1/events", "Ingest events", "Facts", "Projections", "Batch jobs", "Dead letters", "Queues", "Webhooks"].every((text) => listed.includes(text)) &&
      (await docs.getByText("Ingest events").first().isVisible()), listed.slice(0, 500))
  await docs.getByRole("heading", { name: "factline" }).first().waitFor({ state: "visible" })
  await docs.screenshot({ path: join(artifacts, "docs.png"), fullPage: true })
  check("browser", `/docs: Scalar loaded from this origin's assets, nothing requested elsewhere; no CSP violation but the ${refusedFonts.length} refused font(s) of fonts.scalar.com, no page error`,
    scalarLoads.length === 1 && outside.length === 0 && docsProblems.length === 0, JSON.stringify({ scalarLoads, outside, docsProblems }))

  await context.close()
  console.log(`browser part took ${((Date.now() - browserStarted) / 1_000).toFixed(1)} s`)


  // ---------------------------------------------------------------- CLI
  const as = ["--url", base, "--token", platformToken]
  const show = (r) => JSON.stringify(r).slice(0, 1_500)

  let r = await cli(["health", ...as])
  check("cli", "health prints a table of the five queues with their status", r.code === 0 && /^factline-events\s+warning\s/m.test(r.stdout) &&
    ["factline-projections", "factline-fact-processing", "factline-webhooks", "factline-batch"].every((q) => r.stdout.includes(q)), show(r))
  r = await cli(["health", "--json", "--window", "15m"], { FACTLINE_URL: base, FACTLINE_TOKEN: platformToken })
  check("cli", "health --json (URL and token from FACTLINE_URL, FACTLINE_TOKEN)", r.code === 0 && JSON.parse(r.stdout).queues.length === 5 && JSON.parse(r.stdout).window === "15m", show(r))
  r = await cli(["dlq", "list", "--queue", "factline-events", "--status", "open", ...as])
  check("cli", "dlq list shows the open dead letters", r.code === 0 && r.stdout.includes(idOf.cliReplay) && r.stdout.includes(idOf.cliSkip) && !r.stdout.includes(idOf.replayInBrowser), show(r))
  r = await cli(["dlq", "list", "--status", "replayed", "--json", ...as])
  check("cli", "dlq list --status replayed --json", r.code === 0 && JSON.parse(r.stdout).data.some((d) => d.id === idOf.replayInBrowser), show(r))
  r = await cli(["dlq", "show", idOf.cliReplay, ...as])
  check("cli", "dlq show prints the failure context and the original message", r.code === 0 && r.stdout.includes("permanent_failure") && r.stdout.includes(keyOf.cliReplay) && r.stdout.includes('"payload"'), show(r))
  r = await cli(["dlq", "replay", idOf.cliReplay, ...as])
  check("cli", "dlq replay ID", r.code === 0 && /^replayed \S+ to factline-events \(operation rp_\w+\); status replayed$/.test(r.stdout.trim()), show(r))
  r = await cli(["dlq", "replay", idOf.cliReplay, ...as])
  check("cli", "replaying it again fails (exit 1) with the API's message", r.code === 1 && r.stderr.includes("409 conflict") && r.stderr.includes("only an open one can be replayed"), show(r))
  r = await cli(["dlq", "skip", idOf.cliSkip, ...as])
  check("cli", "dlq skip without --reason is a usage error (exit 2)", r.code === 2 && r.stderr.includes("--reason"), show(r))
  r = await cli(["dlq", "skip", idOf.cliSkip, "--reason", "given up in the test", ...as])
  const skippedByCli = await api("GET", `/v1/dlq/${idOf.cliSkip}`)
  check("cli", "dlq skip ID --reason", r.code === 0 && r.stdout.startsWith(`skipped ${idOf.cliSkip}; reconciliation fact f_`) && skippedByCli.body.status === "skipped", show([r, skippedByCli.body.status]))
  r = await cli(["dlq", "list", "--status", "bogus", ...as])
  check("cli", "a bad filter fails (exit 1) naming it, refused by the endpoint's schema before sending", r.code === 1 && r.stderr.includes("invalid_query: status: must be one of"), show(r))
  r = await cli(["dlq", "list", "--url", base, "--token", "nope"])
  check("cli", "a wrong token fails (exit 1): 401", r.code === 1 && r.stderr.includes("401 unauthorized: invalid bearer token"), show(r))
  r = await cli(["health", "--url", base, "--token", "dev-token-tenant-a"])
  check("cli", "health with a tenant token fails (exit 1): 403 names the platform scope", r.code === 1 && r.stderr.includes('403 forbidden: this token lacks the "platform" scope'), show(r))
  r = await cli(["dlq", "replay", "--all-matching", "--queue", "factline-events", "--type", "call.completed", ...as])
  const bulk = /^replaying (\d+) dead letter\(s\) in (\d+) wave\(s\) of up to 100, 2 s apart — operation (rp_\w+)$/.exec(r.stdout.trim())
  const bulkRecord = await api("GET", `/v1/dlq/${idOf.cliBulk}`)
  check("cli", "dlq replay --all-matching replays every open match under one operation id",
    r.code === 0 && bulk !== null && Number(bulk[1]) >= 1 && bulkRecord.body.status === "replayed" && bulkRecord.body.replay_operation_id === bulk[3], show([r, bulkRecord.body]))
  r = await cli(["runs", "--queue", "factline-webhooks", ...as])
  check("cli", "runs lists the webhook delivery's run with its outcome and attempts", r.code === 0 && /^UPDATED\s+ID\s+QUEUE/m.test(r.stdout) && r.stdout.includes(failingRun) && /recording: all/.test(r.stdout), show(r))
  r = await cli(["runs", "--follow", "--follow-for", "2", "--outcome", "dead", ...as])
  check("cli", "runs --follow prints a line per run, then each change, until stopped", r.code === 0 && r.stdout.includes(bad.cliSkip.subject) && r.stderr.includes("following runs"), show(r))
  const deadRun = (await api("GET", `/v1/runs?outcome=dead&subject=${bad.cliSkip.subject}`)).body.data[0]
  r = await cli(["runs", "retry", deadRun?.id ?? "none", ...as])
  check("cli", "runs retry of a dead run fails (exit 1): 409 names its dead letter", r.code === 1 && r.stderr.includes("409 dead_lettered") && r.stderr.includes("POST /v1/dlq/:id/replay"), show(r))
  r = await cli(["batches", ...as])
  check("cli", "batches lists the rebuild", r.code === 0 && r.stdout.includes(batchId), show(r))
  // An import streamed up and followed to its end (4 calls, 1 line refused), then the tenant's facts exported.
  const asTenant = ["--url", base, "--token", "dev-token-tenant-a"]
  const ndjson = join(state, "import.ndjson")
  await new Promise((resolve, reject) => execFile(process.execPath, [join(app, "..", "..", "scripts", "sample-events.mjs"), "4", "--invalid", "1", "--run", `cli${run}`], (error, stdout) => (error ? reject(error) : resolve(writeFileSync(ndjson, stdout)))))
  r = await cli(["import", ndjson, "--name", `cli-${run}.ndjson`, ...asTenant])
  check("cli", "import FILE uploads it, follows the job (progress on stderr) and prints its summary with the refused line",
    r.code === 0 && /import {2}succeeded {2}offset 5\/5 {2}succeeded 4 {2}failed 1/.test(r.stdout) && /^ {2}line \d: /m.test(r.stdout) && r.stderr.includes("5/5"), show(r))
  const exported = join(state, "export.ndjson")
  r = await cli(["export", "--out", exported, ...asTenant])
  const lines = r.code === 0 ? readFileSync(exported, "utf8").trim().split("\n") : []
  check("cli", "export --out FILE downloads the tenant's facts", r.code === 0 && r.stdout.includes(`written to ${exported}`) && lines.some((l) => l.includes(`ok_${run}_0`)), show(r))
  // Tenants: where each lives; an unused tenant placed, then moved (started, not followed: the stack trusts a placement 30 s).
  r = await cli(["tenants", "me", ...asTenant])
  check("cli", "tenants me names the token's read database", r.code === 0 && /^tenant-a: read database \d+ \(binding \S+\)$/.test(r.stdout.trim()), show(r))
  r = await cli(["tenants", "place", `tenant-cli-${run}`, "--to", "1", ...as])
  check("cli", "tenants place TENANT --to N", r.code === 0 && r.stdout.includes(`tenant-cli-${run}: read database 1 (binding FACTLINE_READ_DB_1)`), show(r))
  r = await cli(["tenants", ...as])
  check("cli", "tenants lists the read databases and the placements", r.code === 0 && /^READ DB\s+BINDING\s+TENANTS/m.test(r.stdout) && r.stdout.includes(`tenant-cli-${run}`), show(r))
  r = await cli(["tenants", "place", `tenant-rm-${run}`, "--to", "1", ...as])
  r = r.code === 0 ? await cli(["tenants", "remove", `tenant-rm-${run}`, ...as]) : r
  check("cli", "tenants remove TENANT removes a placement that holds no data", r.code === 0 && r.stdout.trim() === `tenant-rm-${run}: placement on read database 1 removed`, show(r))
  r = await cli(["tenants", "move", `tenant-cli-${run}`, "--to", "0", "--no-wait", ...as])
  check("cli", "tenants move TENANT --to N --no-wait starts the move (writes held)", r.code === 0 && /^move mv_\S+ {2}tenant-cli-\S+: read database 1 → 0 {2}frozen/.test(r.stdout.trim()), show(r))
  r = await cli(["tenants", "move", `tenant-cli-${run}`, "--to", "0", ...as])
  check("cli", "a second move of the same tenant fails (exit 1): 409", r.code === 1 && r.stderr.includes("409 conflict") && r.stderr.includes("already being moved"), show(r))
  r = await cli(["tenants", "move", `tenant-cli-${run}`, ...as])
  check("cli", "tenants move without --to is a usage error (exit 2)", r.code === 2 && r.stderr.includes("--to"), show(r))
  r = await cli(["tenants", "reshard", "tenant-a", "--shards", "24", ...as])
  check("cli", "tenants reshard to a count not a multiple of the tenant's fails (exit 1): 400 names it", r.code === 1 && r.stderr.includes("400 invalid_request") && r.stderr.includes("multiple of the tenant's 16"), show(r))
  r = await cli(["tenants", "reshard", `tenant-none-${run}`, "--shards", "32", ...as])
  check("cli", "tenants reshard of a tenant with no ledger fails (exit 1): 404", r.code === 1 && r.stderr.includes("404 not_found") && r.stderr.includes("no ledger yet"), show(r))
  r = await cli(["tenants", "reshard", "tenant-a", ...as])
  check("cli", "tenants reshard TENANT of a tenant never resharded fails (exit 1): 404", r.code === 1 && r.stderr.includes("404 not_found"), show(r))
  r = await cli(["tenants", "reshard", "tenant-a", "--shards", "two", ...as])
  check("cli", "tenants reshard --shards that is not a number is a usage error (exit 2)", r.code === 2 && r.stderr.includes("--shards two"), show(r))
  // tenant-c's reshard, started before the browser part, followed to its end.
  r = await reshardFollowed
  check("cli", "tenants reshard TENANT --shards N --follow prints its progress and ends done",
    r.code === 0 && /^reshard rs_\S+ {2}tenant-c: 16 → 32 shards {2}done {2}switched 16\/16 {2}copied [\d,]+ facts {2}moved [\d,]+ streams/.test(r.stdout.trim()) && r.stderr.includes("16 → 32 shards  running"), show(r))
  const factsAfter = (await reshardStream()).body
  check("cli", "a stream's facts read the same after the reshard (ids, sequences)", JSON.stringify(factsAfter.facts) === JSON.stringify(factsBefore.facts) && factsAfter.facts?.length > 0, show([factsBefore, factsAfter]))
  r = await cli(["tenants", "reshard", "tenant-c", "--json", ...as])
  check("cli", "tenants reshard TENANT --json shows the latest reshard", r.code === 0 && JSON.parse(r.stdout).phase === "done" && JSON.parse(r.stdout).to_shards === 32, show(r))
  r = await cli(["tenants", "reshard", "tenant-c", "--shards", "32", ...as])
  check("cli", "tenants reshard to the count it has fails (exit 1): 400, a count only grows", r.code === 1 && r.stderr.includes("400 invalid_request") && r.stderr.includes("larger than the tenant's 32"), show(r))
} catch (error) {
  tally.browser.failed++
  console.log(`✗ run failed: ${error instanceof Error ? error.stack : String(error)}`)
} finally {
  await browser?.close().catch(() => {})
  stack?.stop()
  await crm?.close().catch(() => {})
  rmSync(state, { recursive: true, force: true })
}
console.log(`operations run took ${((Date.now() - started) / 1_000).toFixed(1)} s; screenshots in apps/example/.artifacts/`)
console.log(`cli: ${tally.cli.passed} passed, ${tally.cli.failed} failed`)
console.log(`browser: ${tally.browser.passed} passed, ${tally.browser.failed} failed`)
process.exit(tally.cli.failed + tally.browser.failed === 0 ? 0 : 1)
