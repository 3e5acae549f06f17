#!/usr/bin/env node
// `npm run bench`: starts the platform locally in workerd (wrangler dev, real local Queues, D1, DOs),
// measures factline against the bare limit and the naive pattern in one run, and prints a table and
// bench/results.json. Figures are measurements of this machine, not assertions.
//
//   BENCH_N=5000 npm run bench        (default 5000; the scale run does N, 2N and 4N)
import { execFileSync } from "node:child_process"
import { cpus } from "node:os"
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync, copyFileSync } from "node:fs"
import { dirname, join, relative } from "node:path"
import { fileURLToPath } from "node:url"
import { gzipSync } from "node:zlib"
import * as LocalStack from "../apps/example/scripts/LocalStack.mjs"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const out = join(root, "bench", "out")
const N = Number(process.env.BENCH_N ?? "5000")
const port = Number(process.env.BENCH_PORT ?? "8799")
const base = `http://127.0.0.1:${port}`
const wrangler = LocalStack.wrangler
const token = "dev-token-tenant-a"
const maxEventsBacklog = 1_500 // keeps in-flight messages well under the local broker's ~10,000

const log = (...args) => console.error("[bench]", ...args)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const round = (x, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits

// ---- the bench Worker's config, generated from the example's (never duplicated) -----------------
const exampleDir = join(root, "apps", "example")
const example = JSON.parse(readFileSync(join(exampleDir, "wrangler.jsonc"), "utf8").replace(/^\s*\/\/.*$/gm, ""))
rmSync(out, { recursive: true, force: true })
mkdirSync(out, { recursive: true })
const config = {
  ...example,
  $schema: undefined,
  name: "factline-bench",
  main: relative(out, join(root, "bench", "worker.ts")),
  triggers: { crons: [] },
  d1_databases: example.d1_databases.map((d) => ({ ...d, migrations_dir: relative(out, join(root, "migrations")) })),
  queues: {
    producers: [...example.queues.producers, { queue: "bench-bare", binding: "BENCH_BARE" }, { queue: "bench-naive", binding: "BENCH_NAIVE" }],
    consumers: [
      ...example.queues.consumers,
      // The floor: the largest batches, shortest wait.
      { queue: "bench-bare", max_batch_size: 100, max_batch_timeout: 1, max_retries: 3 },
      // Seed 003's consumer settings, the same as factline-events.
      { queue: "bench-naive", max_batch_size: 10, max_batch_timeout: 5, max_retries: 5 }
    ]
  }
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

await call("/bench/setup", { method: "POST" })

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
    await sleep(100)
  }
}

const timeoutFor = (n) => Math.max(120_000, n * 60)

/** Factline end to end over HTTP: POST /v1/events in batches of 500 → buyer_budgets exact. */
const endToEnd = async (n) => {
  const run = `e2e${n}x${Date.now().toString(36)}`
  const { spent, charges } = expected(n)
  const started = performance.now()
  for (let from = 0; from < n; from += 500) {
    // Throttle on the events backlog so the local broker never holds more than it can.
    for (;;) {
      const { events } = await call(`/bench/progress?run=${run}`)
      if (from - events < maxEventsBacklog) break
      await sleep(50)
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

/** One queue stage: send n messages to a queue, time until its consumer has stored them all. */
const stage = async (queue, n, key) => {
  const run = `${queue}${n}x${Date.now().toString(36)}`
  const started = performance.now()
  for (let from = 0; from < n; from += 1_000) await call(`/bench/send?queue=${queue}&run=${run}&from=${from}&n=${Math.min(1_000, n - from)}`, { method: "POST" })
  await waitFor(run, (p) => p[key] >= n, timeoutFor(n))
  const seconds = (performance.now() - started) / 1000
  return { run, messages: n, seconds: round(seconds), messages_per_second: round(n / seconds, 0) }
}

// ---- the runs -------------------------------------------------------------------------------------
log(`round trips per 100-message batch…`)
const roundTrips = await call(`/bench/roundtrips?run=rt${Date.now().toString(36)}`, { method: "POST" })

log(`bare limit: ${N} messages, one multi-row insert per batch…`)
const bare = await stage("bare", N, "bare")
log(`naive pattern (seed 003): ${N} messages…`)
const naive = await stage("naive", N, "naive")
log(`factline events consumer stage: ${N} messages…`)
const factlineStage = await stage("events", N, "events")
// Let its downstream work (relay, processors, projections) finish before timing end to end.
await waitFor(factlineStage.run, (p) => p.charges === expected(N).charges, timeoutFor(N))

const scale = []
for (const multiple of [1, 2, 4]) {
  log(`factline end to end over HTTP: ${multiple * N} events…`)
  scale.push({ multiple, ...(await endToEnd(multiple * N)) })
}
stop()

// ---- figures ------------------------------------------------------------------------------------
const byStage = Object.fromEntries(roundTrips.map((r) => [r.stage, r]))
const e2e = scale[0]
const qualifiedShare = expected(N).charges / N
const factsPerEvent = 2 + qualifiedShare // outcome + qualification (+ charge)
const per = (stageName, field) => byStage[stageName][field] / byStage[stageName].messages

// Operations per event across the whole pipeline: the event, then its facts. Every fact goes to
// projections; only facts with a processor (outcome) also go to fact-processing.
const queueMessagesPerEvent = 1 + factsPerEvent + 1
const queueOpsPerEvent = queueMessagesPerEvent * 3 // write + read + delete, each message < 64 KB
const d1RowsReadPerEvent = per("events", "d1RowsRead") + per("fact-processing", "d1RowsRead") + factsPerEvent * per("projections", "d1RowsRead")
const d1RowsWrittenPerEvent = per("events", "d1RowsWritten") + per("fact-processing", "d1RowsWritten") + factsPerEvent * per("projections", "d1RowsWritten")
const doRequestsPerEvent = per("events", "doRpcs") + per("fact-processing", "doRpcs") // the relay runs inside the append: no alarm on the happy path
const doRowsWrittenPerEvent = factsPerEvent + 2 * (queueMessagesPerEvent - 1) // facts + outbox rows inserted and deleted

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
const consumerInvocations = monthly * (1 / 10 + 1 / 50 + factsPerEvent / 100) // full batches
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

const results = {
  date: new Date().toISOString(),
  machine: { cores: cpus().length, cpu: cpus()[0]?.model, node: process.version },
  n: N,
  end_to_end: e2e,
  bare_limit: { ...bare, run: undefined },
  naive_consumer_stage: { ...naive, run: undefined },
  factline_consumer_stage: { ...factlineStage, run: undefined },
  ratios: {
    end_to_end_time_vs_bare: round(e2e.seconds / bare.seconds),
    end_to_end_throughput_share_of_bare: round(e2e.events_per_second / bare.messages_per_second),
    consumer_stage_speedup_vs_naive: round(naive.seconds / factlineStage.seconds),
    d1_round_trips_per_100_naive_vs_factline_events: `${byStage["naive (seed 003)"].d1RoundTrips} vs ${byStage.events.d1RoundTrips}`
  },
  round_trips_per_100_message_batch: roundTrips,
  cost_model: {
    assumptions: {
      events_per_month: monthly, facts_per_event: round(factsPerEvent), qualified_share: round(qualifiedShare),
      queue_messages_per_event: round(queueMessagesPerEvent), note: "full batches; messages < 64 KB; no retries; prices net of the monthly allowances of the Workers Paid plan"
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
  // Locally every hop costs CPU in one workerd process; in production a hop costs network latency.
  // Sequential hops per 100 messages, from the counts above: the naive consumer waits on each D1 query
  // in turn; factline's consumer waits on 2 D1 round trips and one wave of parallel DO RPCs per batch.
  sequential_hops_per_100_messages: {
    naive_seed_003: byStage["naive (seed 003)"].d1RoundTrips,
    factline_events_at_batch_10: 10 * (byStage.events.d1RoundTrips + 1),
    factline_events_at_batch_100: byStage.events.d1RoundTrips + 1,
    factline_projections_at_batch_100: byStage.projections.d1RoundTrips
  },
  targets: {
    end_to_end_at_least_half_of_bare: e2e.events_per_second >= 0.5 * bare.messages_per_second,
    consumer_stage_20x_naive: naive.seconds / factlineStage.seconds >= 20,
    d1_round_trips_per_consumer_batch_at_most_3: ["events", "fact-processing", "projections"].every((s) => byStage[s].d1RoundTrips <= 3),
    gzip_bundle_at_most_300_kib: bundleGzip <= 300 * 1024
  }
}
writeFileSync(join(root, "bench", "results.json"), JSON.stringify(results, null, 2) + "\n")

// ---- the table ----------------------------------------------------------------------------------
const line = (cells, widths) => cells.map((c, i) => String(c).padEnd(widths[i])).join("  ")
console.log(`\nfactline benchmark — ${results.date} — ${results.machine.cores} cores (${results.machine.cpu}) — N = ${N}\n`)
const w = [44, 14, 14]
console.log(line(["run", "seconds", "per second"], w))
console.log(line([`factline end to end (HTTP → buyer_budgets exact)`, e2e.seconds, e2e.events_per_second], w))
console.log(line([`bare limit (queue → one multi-row insert)`, bare.seconds, bare.messages_per_second], w))
console.log(line([`factline events consumer stage`, factlineStage.seconds, factlineStage.messages_per_second], w))
console.log(line([`naive consumer stage (seed 003)`, naive.seconds, naive.messages_per_second], w))
console.log(`\nend to end vs bare: ${results.ratios.end_to_end_time_vs_bare}× the time (${round(results.ratios.end_to_end_throughput_share_of_bare * 100, 0)} % of its throughput)`)
console.log(`consumer stage vs naive: ${results.ratios.consumer_stage_speedup_vs_naive}× faster`)
console.log(`\nround trips per 100-message batch:`)
const w2 = [18, 10, 14, 16, 8, 12, 14]
console.log(line(["stage", "D1 trips", "D1 rows read", "D1 rows written", "DO RPCs", "queue sends", "queue messages"], w2))
for (const r of roundTrips) console.log(line([r.stage, r.d1RoundTrips, r.d1RowsRead, r.d1RowsWritten, r.doRpcs, r.queueSends, r.queueMessages], w2))
console.log(`\ncost model at 10 M events/month: ${JSON.stringify(results.cost_model.per_event)} per event → $${results.cost_model.monthly_total_usd}/month`)
console.log(`bundle: ${results.bundle.raw_kib} KiB raw, ${results.bundle.gzip_kib} KiB gzip`)
console.log(`\nscale:`)
for (const s of results.scale) console.log(`  ${s.multiple}× (${s.events} events): ${s.seconds} s, ${s.events_per_second} events/s, ${s.seconds_per_1000_events} s per 1000`)
console.log(`\nsequential hops per 100 messages (production latency model): ${JSON.stringify(results.sequential_hops_per_100_messages)}`)
console.log(`\ntargets: ${JSON.stringify(results.targets)}`)
console.log(`\nwritten: bench/results.json`)
process.exit(0)
