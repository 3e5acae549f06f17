#!/usr/bin/env node
// `npm run bench`: starts the platform locally in workerd (wrangler dev, real local Queues, D1, DOs),
// measures factline against the bare limit and the naive pattern in one run, and prints a table and
// bench/results.json. Figures are measurements of this machine, not assertions.
//
//   BENCH_N=10000 npm run bench       (default 10000; the scale run does N, 2N and 4N)
//   BENCH_SCALE=1 npm run bench       (only the 1× end-to-end run; the linearity target then reads as met trivially)
import { execFileSync } from "node:child_process"
import { cpus } from "node:os"
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync, copyFileSync } from "node:fs"
import { dirname, join, relative } from "node:path"
import { fileURLToPath } from "node:url"
import { gzipSync } from "node:zlib"
import * as LocalStack from "../apps/example/scripts/LocalStack.mjs"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const out = join(root, "bench", "out")
const N = Number(process.env.BENCH_N ?? "10000")
const port = Number(process.env.BENCH_PORT ?? "8799")
const base = `http://127.0.0.1:${port}`
const wrangler = LocalStack.wrangler
const token = "dev-token-tenant-a"
const maxEventsBacklog = 3_000 // events posted but not yet projected: keeps in-flight messages well under the local broker's ~10,000

const log = (...args) => console.error("[bench]", ...args)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const round = (x, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits

// ---- the bench Worker's config, generated from the example's (never duplicated) -----------------
const exampleDir = join(root, "apps", "example")
const example = JSON.parse(readFileSync(join(exampleDir, "wrangler.jsonc"), "utf8").replace(/^\s*\/\/.*$/gm, ""))
rmSync(out, { recursive: true, force: true })
mkdirSync(out, { recursive: true })
const eventsPolicy = example.queues.consumers.find((c) => c.queue === "factline-events")
// Every compared consumer runs with factline-events' settings (batch size and timeout), except the
// seed-003 reference run, which keeps the seed's own 10 / 5 s.
const same = { max_batch_size: eventsPolicy.max_batch_size, max_batch_timeout: eventsPolicy.max_batch_timeout, max_retries: 3 }
const benchQueues = [
  ["bench-bare", "BENCH_BARE", same],
  ["bench-naive", "BENCH_NAIVE", same],
  ["bench-naive-seed", "BENCH_NAIVE_SEED", { max_batch_size: 10, max_batch_timeout: 5, max_retries: 5 }],
  ["bench-events", "BENCH_EVENTS", same],
  ["bench-sink", "BENCH_SINK", same],
  ["bench-hand-events", "BENCH_HAND_EVENTS", same],
  ["bench-hand-facts", "BENCH_HAND_FACTS", same]
]
const config = {
  ...example,
  $schema: undefined,
  env: undefined, // the deployed environments (staging, production) are not benchmarked
  name: "factline-bench",
  main: relative(out, join(root, "bench", "worker.ts")),
  triggers: { crons: [] },
  // Local observability keeps every span in a SQLite trace store (hundreds of MB in a run) and slows the
  // single workerd thread down as it grows; production observability is remote, so the bench turns it off.
  observability: { enabled: false },
  // BENCH_SHARDS=4 measures another shard count per tenant (default: the platform's, 16).
  vars: { ...(example.vars ?? {}), ...(process.env.BENCH_SHARDS ? { FACTLINE_LEDGER_SHARDS: process.env.BENCH_SHARDS } : {}) },
  d1_databases: example.d1_databases.map((d) => ({ ...d, migrations_dir: relative(out, join(root, "migrations")) })),
  queues: {
    producers: [...example.queues.producers, ...benchQueues.map(([queue, binding]) => ({ queue, binding }))],
    consumers: [...example.queues.consumers, ...benchQueues.map(([queue, , settings]) => ({ queue, ...settings }))]
  }
}
const settingsOf = (queue) => {
  const c = config.queues.consumers.find((q) => q.queue === queue)
  return `${c.max_batch_size} / ${c.max_batch_timeout} s`
}
writeFileSync(join(out, "wrangler.jsonc"), JSON.stringify(config, null, 2))
copyFileSync(join(exampleDir, ".dev.vars"), join(out, ".dev.vars"))
const state = join(out, "state")
const env = LocalStack.env

// ---- bundle size (the example platform Worker, as it would deploy) -------------------------------
log("bundling the example Worker (wrangler deploy --dry-run)…")
const bundleDir = join(out, "bundle")
execFileSync(process.execPath, [wrangler, "deploy", "--dry-run", "--outdir", bundleDir, "--config", join(exampleDir, "wrangler.jsonc")], { cwd: exampleDir, env, stdio: "ignore" })
const bundleFiles = readdirSync(bundleDir).filter((f) => f.endsWith(".js"))
const bundleRaw = bundleFiles.reduce((n, f) => n + statSync(join(bundleDir, f)).size, 0)
const bundleGzip = bundleFiles.reduce((n, f) => n + gzipSync(readFileSync(join(bundleDir, f))).length, 0)

// ---- start the local stack ------------------------------------------------------------------------
log("applying migrations and starting wrangler dev…")
const stack = await LocalStack.start({ cwd: out, state, port, config: join(out, "wrangler.jsonc") })
const stop = stack.stop
process.on("exit", stop)
process.on("SIGINT", () => process.exit(130))

const call = async (path, init = {}) => {
  const response = await fetch(`${base}${path}`, { ...init, headers: { authorization: `Bearer ${token}`, "content-type": "application/json", ...init.headers } })
  const body = await response.json()
  if (!response.ok) throw new Error(`${path} → ${response.status} ${JSON.stringify(body)}`)
  return body
}

const setup = await call("/bench/setup", { method: "POST" })

// ---- helpers ------------------------------------------------------------------------------------
const expected = (n) => {
  let spent = 0
  let charges = 0
  for (let i = 0; i < n; i++) {
    if ((i * 37) % 180 >= 60) {
      spent += 100 + ((i * 53) % 900)
      charges++
    }
  }
  return { spent, charges }
}

const waitFor = async (run, done, timeoutMs) => {
  const started = Date.now()
  for (;;) {
    const progress = await call(`/bench/progress?run=${run}`)
    if (done(progress)) return progress
    if (Date.now() - started > timeoutMs) throw new Error(`timed out: ${JSON.stringify(progress)}`)
    await sleep(250)
  }
}

const timeoutFor = (n) => Math.max(120_000, n * 60)
const runId = (name) => `${name}${Date.now().toString(36)}`

/** Factline end to end over HTTP: POST /v1/events in batches of 500 → buyer_budgets exact. */
const endToEnd = async (n) => {
  const run = runId(`e2e${n}x`)
  const { spent, charges } = expected(n)
  const started = performance.now()
  for (let from = 0; from < n; from += 500) {
    // Throttle on the events not yet projected, so the local broker never holds more than it can.
    for (;;) {
      const { calls } = await call(`/bench/progress?run=${run}&only=calls`)
      if (from - calls < maxEventsBacklog) break
      await sleep(250)
    }
    const events = []
    for (let i = from; i < Math.min(n, from + 500); i++) {
      const call_id = `${run}_c${i}`
      events.push({
        schema_version: 2, message_type: "call.completed", idempotency_key: `call.completed:${call_id}`, subject: call_id, source: "bench",
        payload: { call_id, buyer_id: `${run}_b${i % 50}`, duration_s: (i * 37) % 180, price_cents: 100 + ((i * 53) % 900), currency: "USD" }
      })
    }
    await call("/v1/events", { method: "POST", body: JSON.stringify({ events }) })
  }
  const posted = performance.now()
  await waitFor(run, (p) => p.spent_cents === spent && p.charges === charges, timeoutFor(n))
  const seconds = (performance.now() - started) / 1000
  return { events: n, seconds: round(seconds), events_per_second: round(n / seconds, 0), post_seconds: round((posted - started) / 1000) }
}

/**
 * One queue stage: send n messages to a bench queue, time until `done(progress)`. Sends are throttled
 * on `processed(progress)` so that the local broker never holds more than `maxStageBacklog` messages.
 */
const maxStageBacklog = 5_000
const stage = async (queue, n, processed, done) => {
  const run = runId(queue)
  const started = performance.now()
  for (let from = 0; from < n; from += 1_000) {
    while (from > 0 && from - processed(await call(`/bench/progress?run=${run}`)) >= maxStageBacklog) await sleep(100)
    await call(`/bench/send?queue=${queue}&run=${run}&from=${from}&n=${Math.min(1_000, n - from)}`, { method: "POST" })
  }
  await waitFor(run, done, timeoutFor(n))
  const seconds = (performance.now() - started) / 1000
  return { run, messages: n, seconds: round(seconds), messages_per_second: round(n / seconds, 0) }
}

// ---- the runs -------------------------------------------------------------------------------------
log(`round trips per 100 events…`)
const roundTrips = await call(`/bench/roundtrips?run=${runId("rt")}`, { method: "POST" })

log(`bare hop: ${N} messages, one multi-row insert per batch (${settingsOf("bench-bare")})…`)
const bare = await stage("bare", N, (p) => p.bare, (p) => p.bare >= N)
log(`naive pattern (seed 003) at factline's settings (${settingsOf("bench-naive")}): ${N} messages…`)
const naive = await stage("naive", N, (p) => p.naive, (p) => p.naive >= N)
log(`naive pattern (seed 003) at the seed's settings (${settingsOf("bench-naive-seed")}): ${N} messages…`)
const naiveSeed = await stage("naive-seed", N, (p) => p.naive, (p) => p.naive >= N)
log(`factline events stage, isolated (relay to a sink, ${settingsOf("bench-events")}): ${N} events…`)
// Each outcome goes to projections and fact-processing: both point at the sink, so 2 facts per event arrive there.
const factlineStage = await stage("events", N, (p) => p.sink / 2, (p) => p.sink >= 2 * N)
log(`hand-written events stage, isolated (facts table + one sendBatch per batch to the sink): ${N} events…`)
const handStage = await stage("hand-isolated", N, (p) => p.sink, (p) => p.sink >= N)
log(`hand-written same topology end to end (events → facts table → fact queue → budgets): ${N} events…`)
const handE2e = await stage("hand", N, (p) => p.hand_outcomes, (p) => p.hand_charges === expected(N).charges && p.hand_spent_cents === expected(N).spent)

const scale = []
for (const multiple of (process.env.BENCH_SCALE ?? "1,2,4").split(",").map(Number)) {
  log(`factline end to end over HTTP: ${multiple * N} events…`)
  scale.push({ multiple, ...(await endToEnd(multiple * N)) })
}
stop()

// ---- figures ------------------------------------------------------------------------------------
const byStage = Object.fromEntries(roundTrips.map((r) => [r.stage, r]))
const e2e = scale[0]
const qualifiedShare = expected(N).charges / N
const factsPerEvent = 2 + qualifiedShare // outcome + qualification (+ charge)
/** A stage's counted figure per event: every stage row covers the work of 100 events. */
const per = (stageName, field) => byStage[stageName][field] / byStage[stageName].events
const pipeline = ["events", "fact-processing", "projections"]
const sum = (stages, field) => stages.reduce((n, s) => n + per(s, field), 0)

// Queue operations per event: each message is written, read and deleted, each per 64 KB unit. The
// event's own message (one unit), plus the fact messages the stages sent, counted with their sizes.
const queueOpsPerEvent = 3 * (1 + sum(pipeline, "queueUnits"))
const queueMessagesPerEvent = 1 + sum(pipeline, "queueMessages")
// Over HTTP the edge adds its accepted-keys check; a service holding the queue binding skips it.
const d1RowsReadPerEvent = sum(["http edge", ...pipeline], "d1RowsRead")
const d1RowsWrittenPerEvent = sum(["http edge", ...pipeline], "d1RowsWritten")
const doRequestsPerEvent = sum(pipeline, "doRpcs")
// DO storage: each fact is one row in a WITHOUT ROWID table plus its fact_id index entry; no outbox row on the happy path.
const doRowsWrittenPerEvent = 2 * factsPerEvent

// Published prices (Workers Paid), USD: https://developers.cloudflare.com/{queues,d1,durable-objects,workers}/platform/pricing/
const prices = {
  workers_base_per_month: 5,
  queues_per_million_ops: 0.4, queues_included_ops: 1_000_000,
  d1_rows_read_per_million: 0.001, d1_rows_read_included: 25_000_000_000,
  d1_rows_written_per_million: 1.0, d1_rows_written_included: 50_000_000,
  do_requests_per_million: 0.15, do_requests_included: 1_000_000,
  do_rows_written_per_million: 1.0, do_rows_written_included: 50_000_000,
  workers_requests_per_million: 0.3, workers_requests_included: 10_000_000
}
const monthly = 10_000_000
const billable = (units, included, perMillion) => (Math.max(0, units - included) / 1_000_000) * perMillion
// Full batches: one invocation per 100 events on events, and per batch of fact messages downstream
// (a fact message carries a whole upstream batch, so about one invocation each per 100 events).
const consumerInvocations = monthly * (3 / 100)
const cost = {
  queues: billable(monthly * queueOpsPerEvent, prices.queues_included_ops, prices.queues_per_million_ops),
  d1_reads: billable(monthly * d1RowsReadPerEvent, prices.d1_rows_read_included, prices.d1_rows_read_per_million),
  d1_writes: billable(monthly * d1RowsWrittenPerEvent, prices.d1_rows_written_included, prices.d1_rows_written_per_million),
  do_requests: billable(monthly * doRequestsPerEvent, prices.do_requests_included, prices.do_requests_per_million),
  do_rows_written: billable(monthly * doRowsWrittenPerEvent, prices.do_rows_written_included, prices.do_rows_written_per_million),
  worker_requests: billable(consumerInvocations + monthly / 500, prices.workers_requests_included, prices.workers_requests_per_million),
  base: prices.workers_base_per_month
}
const totalCost = Object.values(cost).reduce((a, b) => a + b, 0)

const strip = (r) => ({ ...r, run: undefined })
const results = {
  date: new Date().toISOString(),
  machine: { cores: cpus().length, cpu: cpus()[0]?.model, node: process.version },
  n: N,
  settings: {
    shards_per_tenant: Number(setup.shards_per_tenant),
    "factline-events": settingsOf("factline-events"),
    "factline-fact-processing": settingsOf("factline-fact-processing"),
    "factline-projections": settingsOf("factline-projections"),
    bare: settingsOf("bench-bare"), naive: settingsOf("bench-naive"), naive_seed_003: settingsOf("bench-naive-seed"),
    factline_events_isolated: settingsOf("bench-events"), hand_written: settingsOf("bench-hand-events")
  },
  end_to_end: e2e,
  bare_hop: strip(bare),
  naive_seed_003_same_settings: strip(naive),
  naive_seed_003_own_settings: strip(naiveSeed),
  factline_events_stage_isolated: strip(factlineStage),
  hand_written_events_stage_isolated: strip(handStage),
  hand_written_end_to_end: strip(handE2e),
  ratios: {
    end_to_end_share_of_bare: round(e2e.events_per_second / bare.messages_per_second),
    end_to_end_share_of_hand_written_end_to_end: round(e2e.events_per_second / handE2e.messages_per_second),
    events_stage_vs_naive_same_settings: round(factlineStage.messages_per_second / naive.messages_per_second),
    events_stage_vs_naive_seed_settings: round(factlineStage.messages_per_second / naiveSeed.messages_per_second),
    events_stage_share_of_hand_written: round(factlineStage.messages_per_second / handStage.messages_per_second)
  },
  round_trips_per_100_events: roundTrips,
  cost_model: {
    assumptions: {
      events_per_month: monthly, facts_per_event: round(factsPerEvent), qualified_share: round(qualifiedShare),
      queue_messages_per_event: round(queueMessagesPerEvent),
      note: "events over HTTP (the edge's accepted-keys check included); full batches; no retries; prices net of the monthly allowances of the Workers Paid plan; DO duration not modelled"
    },
    per_event: {
      queue_operations: round(queueOpsPerEvent), d1_rows_read: round(d1RowsReadPerEvent), d1_rows_written: round(d1RowsWrittenPerEvent),
      do_requests: round(doRequestsPerEvent), do_rows_written: round(doRowsWrittenPerEvent)
    },
    monthly_usd: Object.fromEntries(Object.entries(cost).map(([k, v]) => [k, round(v)])),
    monthly_total_usd: round(totalCost),
    prices
  },
  bundle: { files: bundleFiles, raw_bytes: bundleRaw, gzip_bytes: bundleGzip, raw_kib: round(bundleRaw / 1024, 1), gzip_kib: round(bundleGzip / 1024, 1) },
  scale: scale.map((s) => ({ ...s, seconds_per_1000_events: round((s.seconds / s.events) * 1000) })),
  targets: {
    end_to_end_at_least_25_percent_of_bare: e2e.events_per_second >= 0.25 * bare.messages_per_second,
    events_stage_at_least_5x_naive: factlineStage.messages_per_second >= 5 * naive.messages_per_second,
    events_stage_at_least_half_of_hand_written: factlineStage.messages_per_second >= 0.5 * handStage.messages_per_second,
    do_rpcs_at_most_shards_touched: pipeline.every((s) => byStage[s].doRpcs <= byStage[s].shardsTouched),
    queue_sends_at_most_one_per_destination: byStage.events.queueSends <= 2 && byStage["fact-processing"].queueSends <= 1 && byStage.projections.queueSends === 0,
    d1_round_trips_per_consumer_batch_at_most_3: pipeline.every((s) => byStage[s].d1RoundTrips <= 3),
    cost_at_most_150_usd: totalCost <= 150,
    queue_operations_per_event_at_most_4: queueOpsPerEvent <= 4,
    d1_rows_written_per_event_at_most_15: d1RowsWrittenPerEvent <= 15,
    // Linear: the time per event does not grow with the volume (the largest run costs at most 25 % more per event than the smallest).
    linear_scale: scale.at(-1).seconds / scale.at(-1).events <= 1.25 * (scale[0].seconds / scale[0].events),
    gzip_bundle_at_most_300_kib: bundleGzip <= 300 * 1024
  }
}
const resultsFile = process.env.BENCH_SHARDS ? `results-shards-${process.env.BENCH_SHARDS}.json` : "results.json"
writeFileSync(join(root, "bench", resultsFile), JSON.stringify(results, null, 2) + "\n")

// ---- the table ----------------------------------------------------------------------------------
const line = (cells, widths) => cells.map((c, i) => String(c).padEnd(widths[i])).join("  ")
console.log(`\nfactline benchmark — ${results.date} — ${results.machine.cores} cores (${results.machine.cpu}) — N = ${N}`)
console.log(`shards per tenant: ${results.settings.shards_per_tenant}; consumer settings (max_batch_size / max_batch_timeout): ${JSON.stringify(results.settings)}\n`)
const w = [74, 12, 10, 12]
console.log(line(["run", "settings", "seconds", "per second"], w))
console.log(line([`factline end to end (HTTP → buyer_budgets exact)`, settingsOf("factline-events"), e2e.seconds, e2e.events_per_second], w))
console.log(line([`bare hop (queue → one multi-row insert)`, settingsOf("bench-bare"), bare.seconds, bare.messages_per_second], w))
console.log(line([`hand-written same topology end to end (queue → budgets exact)`, settingsOf("bench-hand-events"), handE2e.seconds, handE2e.messages_per_second], w))
console.log(line([`factline events stage, isolated (relay to a sink)`, settingsOf("bench-events"), factlineStage.seconds, factlineStage.messages_per_second], w))
console.log(line([`hand-written events stage, isolated`, settingsOf("bench-hand-events"), handStage.seconds, handStage.messages_per_second], w))
console.log(line([`naive consumer (seed 003), same settings`, settingsOf("bench-naive"), naive.seconds, naive.messages_per_second], w))
console.log(line([`naive consumer (seed 003), the seed's settings`, settingsOf("bench-naive-seed"), naiveSeed.seconds, naiveSeed.messages_per_second], w))
console.log(`\nratios: ${JSON.stringify(results.ratios)}`)
console.log(`\ncounted per 100 events:`)
const w2 = [18, 9, 8, 10, 11, 8, 7, 7, 9, 7]
console.log(line(["stage", "messages", "D1 trips", "D1 stmts", "D1 rows r/w", "DO RPCs", "shards", "sends", "messages", "64KB"], w2))
for (const r of roundTrips) {
  console.log(line([r.stage, r.messages, r.d1RoundTrips, r.d1Statements, `${r.d1RowsRead}/${r.d1RowsWritten}`, r.doRpcs, r.shardsTouched, r.queueSends, r.queueMessages, r.queueUnits], w2))
}
console.log(`\ncost model at 10 M events/month: ${JSON.stringify(results.cost_model.per_event)} per event → $${results.cost_model.monthly_total_usd}/month ${JSON.stringify(results.cost_model.monthly_usd)}`)
console.log(`bundle: ${results.bundle.raw_kib} KiB raw, ${results.bundle.gzip_kib} KiB gzip`)
console.log(`\nscale:`)
for (const s of results.scale) console.log(`  ${s.multiple}× (${s.events} events): ${s.seconds} s, ${s.events_per_second} events/s, ${s.seconds_per_1000_events} s per 1000`)
console.log(`\ntargets: ${JSON.stringify(results.targets, null, 1)}`)
console.log(`\nwritten: bench/${resultsFile}`)
process.exit(0)
