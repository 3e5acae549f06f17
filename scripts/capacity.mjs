#!/usr/bin/env node
// npm run capacity -- --events-per-month 1e9 --tenants 500 [flags]
//
// The capacity model (issue 19, item 7): from the bench's counted operations per event (`cost_model` and
// `round_trips_per_100_events` of a run's bench/out/results/results*.json, else of the committed bench/baseline.json's
// `full_run`) and Cloudflare's published limits and prices (the tables
// below, each with its source), which limit binds first, how many read databases, ledger shards per tenant and
// queue groups a deployment needs, storage growth per month and the monthly cost by product.
// Without --events-per-month it prints the comparison at 10 M, 100 M and 1 B events/month (docs/capacity.md).
// Pure arithmetic, no network: `model(inputs)` is exported for scripts/capacity.test.mjs.
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")

// ---- Cloudflare's published limits (Workers Paid), each with its source --------------------------------------
// Read from Cloudflare's developer documentation (stored copies, 2026). `published: false` marks a figure
// Cloudflare does not publish: the model assumes it and says so in its output.
export const LIMITS = {
  d1_database_bytes: {
    value: 10e9, label: "D1 database size", text: "10 GB per database (cannot be increased)",
    source: "https://developers.cloudflare.com/d1/platform/limits/", published: true
  },
  d1_one_query_at_a_time: {
    value: 1000, label: "D1 one query at a time", text: "each database is single-threaded and runs one query at a time: throughput = 1 / query duration (1 ms → ~1,000 queries/s)",
    source: "https://developers.cloudflare.com/d1/platform/limits/", published: true
  },
  d1_databases_per_account: {
    value: 50_000, label: "D1 databases per account", text: "50,000 (Workers Paid; raisable on request)",
    source: "https://developers.cloudflare.com/d1/platform/limits/", published: true
  },
  d1_account_bytes: {
    value: 1e12, label: "D1 storage per account", text: "1 TB (Workers Paid; raisable on request — older copies of the page said 250 GB)",
    source: "https://developers.cloudflare.com/d1/platform/limits/", published: true
  },
  d1_bindings_per_worker: {
    value: 5_000, label: "D1 bindings per Worker", text: "~5,000 bindings per Worker script (1 MB of metadata, ~150 B a binding): read databases bound statically as FACTLINE_READ_DB_i",
    source: "https://developers.cloudflare.com/d1/platform/limits/", published: true
  },
  queue_messages_per_second: {
    value: 5_000, label: "Queue throughput", text: "5,000 messages/s per queue",
    source: "https://developers.cloudflare.com/queues/platform/limits/", published: true
  },
  queue_concurrent_consumers: {
    value: 250, label: "Queue consumer concurrency", text: "250 concurrent consumer invocations per queue (push)",
    source: "https://developers.cloudflare.com/queues/platform/limits/", published: true
  },
  queues_per_account: {
    value: 10_000, label: "Queues per account", text: "10,000 queues per account",
    source: "https://developers.cloudflare.com/queues/platform/limits/", published: true
  },
  do_requests_per_second: {
    value: 1_000, label: "Durable Object throughput", text: "soft limit of 1,000 requests/s per object (single-threaded; heavier requests get less; overloaded errors past it)",
    source: "https://developers.cloudflare.com/durable-objects/reference/faq/", published: true
  },
  do_object_bytes: {
    value: 10e9, label: "Durable Object storage", text: "10 GB per SQLite-backed object (no per-account limit on Workers Paid)",
    source: "https://developers.cloudflare.com/durable-objects/platform/limits/", published: true
  },
  worker_cpu_ms: {
    value: 30_000, label: "Worker CPU per invocation", text: "30 s of CPU per invocation by default, configurable to 5 min (consumers: 15 min wall clock)",
    source: "https://developers.cloudflare.com/workers/platform/limits/", published: true
  }
}

// ---- Cloudflare's published prices (Workers Paid, USD; monthly allowances) -----------------------------------
export const PRICES = {
  workers_base: { value: 5, text: "$5/month minimum (Workers Paid)", source: "https://developers.cloudflare.com/workers/platform/pricing/" },
  workers_requests: { per_million: 0.3, included: 10e6, text: "10 M requests included, then $0.30/M", source: "https://developers.cloudflare.com/workers/platform/pricing/" },
  workers_cpu_ms: { per_million: 0.02, included: 30e6, text: "30 M CPU ms included, then $0.02/M CPU ms", source: "https://developers.cloudflare.com/workers/platform/pricing/" },
  queues_operations: { per_million: 0.4, included: 1e6, text: "1 M operations included, then $0.40/M; an operation per 64 KB written, read or deleted", source: "https://developers.cloudflare.com/queues/platform/pricing/" },
  do_requests: { per_million: 0.15, included: 1e6, text: "1 M requests included, then $0.15/M (each RPC call is one request)", source: "https://developers.cloudflare.com/durable-objects/platform/pricing/" },
  do_duration_gb_s: { per_million: 12.5, included: 400_000, text: "400,000 GB-s included, then $12.50/M GB-s (128 MB billed while active)", source: "https://developers.cloudflare.com/durable-objects/platform/pricing/" },
  do_rows_read: { per_million: 0.001, included: 25e9, text: "25 B rows read included, then $0.001/M", source: "https://developers.cloudflare.com/durable-objects/platform/pricing/" },
  do_rows_written: { per_million: 1.0, included: 50e6, text: "50 M rows written included, then $1.00/M", source: "https://developers.cloudflare.com/durable-objects/platform/pricing/" },
  do_storage_gb_month: { per_unit: 0.2, included: 5, text: "5 GB-month included, then $0.20/GB-month (SQLite storage)", source: "https://developers.cloudflare.com/durable-objects/platform/pricing/" },
  d1_rows_read: { per_million: 0.001, included: 25e9, text: "25 B rows read included, then $0.001/M", source: "https://developers.cloudflare.com/d1/platform/pricing/" },
  d1_rows_written: { per_million: 1.0, included: 50e6, text: "50 M rows written included, then $1.00/M (INSERT, UPDATE and DELETE; an index adds a row)", source: "https://developers.cloudflare.com/d1/platform/pricing/" },
  d1_storage_gb_month: { per_unit: 0.75, included: 5, text: "5 GB included, then $0.75/GB-month (all databases of the account)", source: "https://developers.cloudflare.com/d1/platform/pricing/" },
  r2_storage_gb_month: { per_unit: 0.015, included: 10, text: "10 GB-month included, then $0.015/GB-month (Standard)", source: "https://developers.cloudflare.com/r2/pricing/" },
  r2_class_a: { per_million: 4.5, included: 1e6, text: "1 M Class A (PutObject…) included, then $4.50/M", source: "https://developers.cloudflare.com/r2/pricing/" },
  r2_class_b: { per_million: 0.36, included: 10e6, text: "10 M Class B (GetObject…) included, then $0.36/M", source: "https://developers.cloudflare.com/r2/pricing/" }
}

/** Average month: 365.25 / 12 days. */
export const DAYS_PER_MONTH = 365.25 / 12
const SECONDS_PER_MONTH = DAYS_PER_MONTH * 86_400
/** The issue's targets for the scale-out work (issue 19, "Done when"). */
export const TARGETS = { rows_written_per_event: 5, d1_bytes_per_event: 800 }
/** Measured on main by the issue (bench N = 10,000, then the D1 file's dbstat): for bench results from before the bench measured it. */
const ISSUE_D1_BYTES_PER_EVENT = 1_700
const PIPELINE = ["events", "fact-processing", "projections"]

// ---- flags ---------------------------------------------------------------------------------------------------
const FLAGS = {
  "events-per-month": { kind: "number", min: 1, help: "events per month (1e9, 100000000); without it: the table at 10 M, 100 M and 1 B" },
  tenants: { kind: "int", min: 1, default: 500, help: "tenants (default 500)" },
  "largest-tenant-share": { kind: "number", min: 0, max: 1, default: 0.1, help: "share of the volume sent by the largest tenant (default 0.1; at least 1/tenants)" },
  "peak-factor": { kind: "number", min: 1, default: 3, help: "peak rate ÷ monthly average rate (default 3)" },
  utilisation: { kind: "number", min: 0.05, max: 1, default: 0.7, help: "plan every unit to at most this share of its limit at peak (default 0.7)" },
  "window-days": { kind: "number", min: 0, default: 30, help: "days of facts kept in D1 before the R2 archive (default 30; 0 = no window, as today)" },
  "horizon-months": { kind: "number", min: 1, default: 12, help: "month the accumulating stores (ledger, archive) are sized and priced at (default 12)" },
  "facts-per-event": { kind: "number", min: 0.01, help: "facts per event (bench: outcome + qualification + charge share); scales the per-fact counts" },
  "d1-bytes-per-event": { kind: "number", min: 0, help: "D1 bytes per event in the live window (today ~1,700; target ≤ 800)" },
  "d1-permanent-bytes-per-event": { kind: "number", min: 0, default: 0, help: "D1 bytes per event kept beyond the window (projection rows an app keeps; default 0)" },
  "rows-written-per-event": { kind: "number", min: 0, help: "D1 rows written per event by the pipeline (today 15.6; target ≤ 5)" },
  "rows-read-per-event": { kind: "number", min: 0, help: "D1 rows read per event by the pipeline" },
  "prune-rows-per-event": { kind: "number", min: 0, help: "D1 rows written per event by retention deletes (default: the accepted key 1, with a window + 1 per copied fact)" },
  "facts-copied-share": { kind: "number", min: 0, max: 1, help: "share of facts copied to D1 (FACTLINE_FACTS_COPY: none 0, all 1; default: the bench run's setting)" },
  "queue-ops-per-event": { kind: "number", min: 0, help: "queue operations per event (write + read + delete per 64 KB)" },
  "do-requests-per-event": { kind: "number", min: 0, help: "Durable Object requests per event (default: from shards touched per batch, tenants mixed in a batch)" },
  "shards-per-tenant": { kind: "int", min: 1, help: "ledger shards per tenant configured today (bench setting, 16)" },
  "do-bytes-per-fact": { kind: "number", min: 1, default: 600, help: "ledger SQLite bytes per fact (assumed 600: not measured)" },
  "do-ms-per-request": { kind: "number", min: 0, default: 10, help: "Durable Object active wall time per request, ms (assumed 10)" },
  "cpu-ms-per-event": { kind: "number", min: 0, help: "Worker CPU ms per event (default: the bench's wall time per event, an upper bound)" },
  "d1-ms-per-statement": { kind: "number", min: 0, default: 0.5, help: "D1 time per statement, ms (assumed 0.5)" },
  "d1-ms-per-row-written": { kind: "number", min: 0, default: 0.02, help: "D1 time per row written, ms (assumed 0.02)" },
  "d1-ms-per-row-read": { kind: "number", min: 0, default: 0.005, help: "D1 time per row read, ms (assumed 0.005)" },
  "archived-bytes-per-fact": { kind: "number", min: 0, default: 500, help: "bytes per fact before compression in the R2 archive (default 500, the D1 copy's row)" },
  compression: { kind: "number", min: 1, default: 5, help: "Parquet compression ratio of the archive (default 5)" },
  "min-queue-groups": { kind: "int", min: 1, default: 1, help: "queue groups at least (for fairness; default 1)" },
  targets: { kind: "boolean", help: `the issue's targets: --rows-written-per-event ${TARGETS.rows_written_per_event} --d1-bytes-per-event ${TARGETS.d1_bytes_per_event}` },
  bench: { kind: "string", help: "bench results file (default: the newest bench/out/results/results*.json with a cost model, else bench/baseline.json's full_run)" },
  json: { kind: "boolean", help: "machine output" },
  help: { kind: "boolean", help: "this text" }
}

export const usage = () =>
  [
    "usage: npm run capacity -- [--events-per-month N] [--tenants N] [flags]",
    "",
    ...Object.entries(FLAGS).map(([name, f]) => `  --${name}${f.kind === "boolean" ? "" : " <" + (f.kind === "string" ? "file" : "n") + ">"}`.padEnd(38) + f.help)
  ].join("\n")

export class UsageError extends Error {}

/** `--flag value` / `--flag=value` → options; refuses unknown flags, missing or malformed values. */
export const parseFlags = (argv) => {
  const options = {}
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (!arg.startsWith("--")) throw new UsageError(`unexpected argument: ${arg}`)
    const [name, inline] = arg.slice(2).split(/=(.*)/s)
    const flag = FLAGS[name]
    if (!flag) throw new UsageError(`unknown flag: --${name}`)
    if (flag.kind === "boolean") {
      if (inline !== undefined) throw new UsageError(`--${name} takes no value`)
      options[name] = true
      continue
    }
    const raw = inline ?? argv[++i]
    if (raw === undefined || (inline === undefined && raw.startsWith("--"))) throw new UsageError(`--${name} needs a value`)
    if (flag.kind === "string") {
      options[name] = raw
      continue
    }
    const value = Number(raw.replaceAll("_", ""))
    if (raw.trim() === "" || !Number.isFinite(value)) throw new UsageError(`--${name}: not a number: ${raw}`)
    if (flag.kind === "int" && !Number.isInteger(value)) throw new UsageError(`--${name}: not a whole number: ${raw}`)
    if (flag.min !== undefined && value < flag.min) throw new UsageError(`--${name}: at least ${flag.min}, got ${raw}`)
    if (flag.max !== undefined && value > flag.max) throw new UsageError(`--${name}: at most ${flag.max}, got ${raw}`)
    options[name] = value
  }
  return options
}

// ---- the bench's counted operations --------------------------------------------------------------------------
/**
 * The newest bench results (by their own `date`) that carry a cost model: a run's results in `<dir>/out/results`
 * (where `npm run bench` writes them; ignored by git), or the committed baseline's `full_run` (`<dir>/baseline.json`,
 * the counted figures of the full run the baseline was taken with) on a clone with no run of its own.
 */
export const newestBench = (dir = join(root, "bench")) => {
  const read = (file, pick = (data) => data) => {
    try {
      const data = pick(JSON.parse(readFileSync(file, "utf8")))
      return data?.cost_model && data.round_trips_per_100_events ? { file, data } : undefined
    } catch {
      return undefined
    }
  }
  const runs = join(dir, "out", "results")
  const candidates = [
    ...(existsSync(runs) ? readdirSync(runs).filter((f) => /^results.*\.json$/.test(f)).map((f) => read(join(runs, f))) : []),
    read(join(dir, "baseline.json"), (baseline) => baseline.full_run)
  ]
    .filter(Boolean)
    .sort((a, b) => String(b.data.date).localeCompare(String(a.data.date)))
  if (candidates.length === 0) throw new UsageError(`no bench results with a cost model in ${runs} or ${join(dir, "baseline.json")} (full_run): run npm run bench`)
  return candidates[0]
}

/** Per-event figures from a bench results object (the bench's own counting; see bench/run.mjs "figures"). */
export const benchFigures = (results, file = "") => {
  const cm = results.cost_model
  const stages = Object.fromEntries(results.round_trips_per_100_events.map((r) => [r.stage, r]))
  const per = (names, field) => names.reduce((n, s) => n + (stages[s] ? stages[s][field] / stages[s].events : 0), 0)
  const counted = ["http edge", ...PIPELINE]
  // The bench writes the live window's bytes beside its per-event counts (from the D1 file's dbstat); older results have none.
  const d1Bytes = cm.d1_bytes_per_event ?? undefined
  return {
    file,
    date: results.date,
    n: results.n,
    facts_per_event: cm.assumptions.facts_per_event,
    d1_rows_written: cm.per_event.d1_rows_written,
    d1_rows_read: cm.per_event.d1_rows_read,
    d1_bytes: d1Bytes ?? ISSUE_D1_BYTES_PER_EVENT,
    d1_bytes_source: d1Bytes === undefined ? "issue 19's dbstat measurement on main (these bench results predate d1_bytes_per_event)" : "bench",
    queue_operations: cm.per_event.queue_operations,
    do_requests: cm.per_event.do_requests,
    do_rows_written: cm.per_event.do_rows_written,
    d1_statements: per(counted, "d1Statements"),
    // The busiest queue: factline-events, one message per event (the edge's sends).
    busiest_queue_messages: stages["http edge"] ? stages["http edge"].queueMessages / stages["http edge"].events : 1,
    // FACTLINE_FACTS_COPY of the run: none → no fact copied to D1, all → every fact; results from before the setting copied all.
    facts_copied_share: results.settings?.facts_copy === undefined || results.settings.facts_copy === "all" ? 1 : results.settings.facts_copy === "none" ? 0 : undefined,
    facts_copy_source: results.settings?.facts_copy === undefined ? "bench (a run from before FACTLINE_FACTS_COPY: every fact copied)" : `bench (FACTLINE_FACTS_COPY=${results.settings.facts_copy})`,
    // Ledger stages: one RPC per shard touched per batch (events, fact-processing).
    ledger_stages: PIPELINE.filter((s) => stages[s]?.doRpcs > 0).length,
    shards_per_tenant: results.settings?.shards_per_tenant ?? 16,
    // Local wall time of a batch (workerd on the bench machine): an upper bound on CPU time.
    wall_ms_per_event: per(counted, "ms"),
    events_batch_seconds: stages.events ? stages.events.ms / 1000 : 0.1,
    // The bench's cost model: a consumer invocation per 100 events on each of 4 consumers, an HTTP request per 500 events.
    worker_requests: 4 / 100 + 1 / 500,
    bench_monthly_usd_at_10m: cm.monthly_total_usd
  }
}

// ---- the model -----------------------------------------------------------------------------------------------
/** Expected distinct slots hit by `draws` uniform draws over `slots` slots. */
const distinct = (slots, draws) => slots * (1 - Math.pow(1 - 1 / slots, draws))
const billable = (units, price) => (Math.max(0, units - price.included) / 1e6) * price.per_million
const gross = (units, price) => (units / 1e6) * price.per_million
const storageCost = (gb, price, allowances = true) => Math.max(0, gb - (allowances ? price.included : 0)) * price.per_unit
const GB = 1e9

/** The per-event inputs at `options`, each with where it came from (flag, bench, issue target, assumption). */
const inputsOf = (bench, options) => {
  const o = (name) => options[name] ?? FLAGS[name].default
  const events = options["events-per-month"]
  const tenants = o("tenants")
  const assumed = []
  const targets = options.targets === true
  const facts = options["facts-per-event"] ?? bench.facts_per_event
  const k = facts / bench.facts_per_event // the per-fact counts scale with facts per event
  const from = (name, benchValue, scaled = true) =>
    options[name] !== undefined ? { value: options[name], from: "flag" } : { value: benchValue * (scaled ? k : 1), from: scaled && k !== 1 ? "bench, scaled by facts per event" : "bench" }

  const rowsWritten = targets && options["rows-written-per-event"] === undefined ? { value: TARGETS.rows_written_per_event, from: "issue target" } : from("rows-written-per-event", bench.d1_rows_written)
  const d1Bytes = targets && options["d1-bytes-per-event"] === undefined ? { value: TARGETS.d1_bytes_per_event, from: "issue target" } : options["d1-bytes-per-event"] !== undefined ? { value: options["d1-bytes-per-event"], from: "flag" } : { value: bench.d1_bytes * k, from: bench.d1_bytes_source }
  const rowsRead = from("rows-read-per-event", bench.d1_rows_read)
  const queueOps = options["queue-ops-per-event"] !== undefined ? { value: options["queue-ops-per-event"], from: "flag" } : { value: 3 * (1 + (bench.queue_operations / 3 - 1) * k), from: "bench" }
  const doRowsWritten = { value: bench.do_rows_written * k, from: "bench (fact row + fact_id index per fact)" }
  const windowDays = o("window-days")
  const windowMonths = windowDays / DAYS_PER_MONTH
  // The share of facts the D1 copy gets (FACTLINE_FACTS_COPY): what the window prunes and the archive holds.
  const copied = options["facts-copied-share"] !== undefined ? { value: options["facts-copied-share"], from: "flag" }
    : bench.facts_copied_share !== undefined ? { value: bench.facts_copied_share, from: bench.facts_copy_source }
    : { value: 1, from: `assumed every fact: the ${bench.facts_copy_source} copied a list of types (pass --facts-copied-share)` }
  // Retention deletes are rows written too: accepted_keys (its WITHOUT ROWID row; no index) at 30 days; with a
  // window, each copied fact (WITHOUT ROWID row; no index) as well. The bench does not count them.
  const pruneRows = options["prune-rows-per-event"] !== undefined ? { value: options["prune-rows-per-event"], from: "flag" } : { value: 1 + (windowDays > 0 ? copied.value * facts : 0), from: "assumed from the schema (one row per deleted key or copied fact: no secondary index)" }
  const shards = options["shards-per-tenant"] ?? bench.shards_per_tenant
  const cpuMs = options["cpu-ms-per-event"] !== undefined ? { value: options["cpu-ms-per-event"], from: "flag" } : { value: bench.wall_ms_per_event, from: "bench wall time per event (upper bound on CPU)" }
  return { o, events, tenants, assumed, targets, facts, rowsWritten, d1Bytes, rowsRead, queueOps, doRowsWritten, windowDays, windowMonths, copied, pruneRows, shards, cpuMs }
}

/**
 * The deployment's scale-out at inputs `i`: rates, queue groups, Durable Object requests, read databases and ledger
 * shards; the utilisation of each limit at one unit (and the one that binds first); the ceilings that do not scale out.
 */
const scaleOf = (bench, options, i) => {
  const { o, events, tenants, facts, rowsWritten, d1Bytes, rowsRead, windowDays, windowMonths, pruneRows, shards, cpuMs } = i
  // Rates.
  const perSecond = events / SECONDS_PER_MONTH
  const peak = perSecond * o("peak-factor")
  const util = o("utilisation")
  const share = Math.min(1, Math.max(1 / tenants, o("largest-tenant-share")))

  // Queue groups: the busiest queue (factline-events) takes one message per event.
  const queueDemand = peak * bench.busiest_queue_messages
  const batchesPerSecond = peak / 100
  const concurrency = batchesPerSecond * bench.events_batch_seconds
  const queueGroups = Math.max(
    o("min-queue-groups"),
    Math.ceil(queueDemand / (LIMITS.queue_messages_per_second.value * util)),
    Math.ceil(concurrency / (LIMITS.queue_concurrent_consumers.value * util))
  )
  const tenantsPerGroup = Math.ceil(tenants / queueGroups)

  // Durable Object requests: one RPC per shard touched per batch per ledger stage. A batch of 100 mixes the
  // events of the tenants in its queue group, each tenant on its own shards (the bench: one tenant, 16 shards).
  const doRequests = options["do-requests-per-event"] !== undefined
    ? { value: options["do-requests-per-event"], from: "flag" }
    : { value: (bench.ledger_stages * distinct(tenantsPerGroup * shards, 100)) / 100, from: `shards touched per batch of 100 (${tenantsPerGroup} tenants × ${shards} shards per group)` }

  // D1: storage in the live window, and time (one query at a time per database).
  const permanentBytes = o("d1-permanent-bytes-per-event")
  const horizon = o("horizon-months")
  const liveWindowEvents = windowDays > 0 ? events * windowMonths : events * horizon // no window: nothing pruned
  const d1LiveBytes = liveWindowEvents * d1Bytes.value + (windowDays > 0 ? events * horizon * permanentBytes : 0)
  const d1MsPerEvent = bench.d1_statements * o("d1-ms-per-statement") + (rowsWritten.value + pruneRows.value) * o("d1-ms-per-row-written") + rowsRead.value * o("d1-ms-per-row-read")
  const d1BusyMsPerSecond = peak * d1MsPerEvent
  const readDbsByStorage = Math.ceil(d1LiveBytes / (LIMITS.d1_database_bytes.value * util))
  const readDbsByTime = Math.ceil(d1BusyMsPerSecond / (LIMITS.d1_one_query_at_a_time.value * util))
  const readDbs = Math.max(1, readDbsByStorage, readDbsByTime)

  // Ledger: per-object request rate and storage (the ledger keeps every fact: it grows for ever).
  const doBytesPerEvent = facts * o("do-bytes-per-fact")
  const largestEventsPerSecond = peak * share
  const groupBatches = (peak / queueGroups) / 100
  const shareInGroup = Math.min(1, share * queueGroups) // the largest tenant's share of its group's traffic
  const shardRps = (s) => bench.ledger_stages * groupBatches * (1 - Math.pow(1 - shareInGroup / s, 100))
  const largestLedgerBytes = events * share * horizon * doBytesPerEvent
  const averageLedgerBytes = (events / tenants) * horizon * doBytesPerEvent
  const shardsFor = (bytes, rps1) => Math.max(shards, Math.ceil(bytes / (LIMITS.do_object_bytes.value * util)), Math.ceil(rps1 / (LIMITS.do_requests_per_second.value * util)))
  const shardsLargest = shardsFor(largestLedgerBytes, shardRps(1))
  const shardsAverage = shardsFor(averageLedgerBytes, bench.ledger_stages * groupBatches * (1 - Math.pow(1 - Math.min(1, queueGroups / tenants), 100)))

  // The largest tenant's read side lives in one read database (placement never splits a tenant).
  const largestD1Bytes = d1LiveBytes * share
  const largestWindowDaysThatFits = windowDays > 0 ? (LIMITS.d1_database_bytes.value * util) / (events * share * d1Bytes.value / DAYS_PER_MONTH) : 0

  // Utilisation at one unit: the demand on a single database / queue group / shard / invocation before scaling out.
  const atOneUnit = [
    { limit: "d1_database_bytes", resource: "read databases", demand: d1LiveBytes, utilisation: d1LiveBytes / LIMITS.d1_database_bytes.value, units: readDbsByStorage, what: `${fmtBytes(d1LiveBytes)} live in D1 ÷ 10 GB` },
    { limit: "d1_one_query_at_a_time", resource: "read databases", demand: d1BusyMsPerSecond, utilisation: d1BusyMsPerSecond / 1000, units: readDbsByTime, what: `${fmt(d1BusyMsPerSecond, 0)} ms of D1 work per second at peak ÷ 1,000` },
    { limit: "queue_messages_per_second", resource: "queue groups", demand: queueDemand, utilisation: queueDemand / LIMITS.queue_messages_per_second.value, units: Math.ceil(queueDemand / (LIMITS.queue_messages_per_second.value * util)), what: `${fmt(queueDemand, 0)} msg/s on factline-events at peak ÷ 5,000` },
    { limit: "queue_concurrent_consumers", resource: "queue groups", demand: concurrency, utilisation: concurrency / LIMITS.queue_concurrent_consumers.value, units: Math.ceil(concurrency / (LIMITS.queue_concurrent_consumers.value * util)), what: `${fmt(concurrency, 1)} consumer invocations at once ÷ 250` },
    { limit: "do_requests_per_second", resource: "shards (largest tenant)", demand: shardRps(1), utilisation: shardRps(1) / LIMITS.do_requests_per_second.value, units: Math.ceil(shardRps(1) / (LIMITS.do_requests_per_second.value * util)), what: `${fmt(shardRps(1), 0)} requests/s to one shard of the largest tenant ÷ 1,000` },
    // Storage that accumulates (the ledger) is compared after one month, as the D1 window is after its days.
    { limit: "do_object_bytes", resource: "shards (largest tenant)", demand: largestLedgerBytes / horizon, utilisation: largestLedgerBytes / horizon / LIMITS.do_object_bytes.value, units: Math.ceil(largestLedgerBytes / (LIMITS.do_object_bytes.value * util)), what: `${fmtBytes(largestLedgerBytes / horizon)} of ledger a month for the largest tenant ÷ 10 GB (units: month ${horizon})` },
    { limit: "worker_cpu_ms", resource: "CPU per invocation", demand: 100 * cpuMs.value, utilisation: (100 * cpuMs.value) / LIMITS.worker_cpu_ms.value, units: 1, what: `${fmt(100 * cpuMs.value, 0)} ms of CPU for a batch of 100 ÷ 30 s` }
  ].map((r) => ({ ...r, label: LIMITS[r.limit].label }))
  const binding = atOneUnit.reduce((a, b) => (b.utilisation > a.utilisation ? b : a))

  // Ceilings that do not scale out: the deployment at its unit counts.
  const queuesPerGroup = 8 // events, projections, fact-processing, webhooks and their dead-letter queues
  const ceilings = [
    { limit: "d1_account_bytes", demand: d1LiveBytes, utilisation: d1LiveBytes / LIMITS.d1_account_bytes.value },
    { limit: "d1_databases_per_account", demand: readDbs + 1, utilisation: (readDbs + 1) / LIMITS.d1_databases_per_account.value },
    { limit: "d1_bindings_per_worker", demand: readDbs + 1, utilisation: (readDbs + 1) / LIMITS.d1_bindings_per_worker.value },
    { limit: "queues_per_account", demand: queueGroups * queuesPerGroup + 2, utilisation: (queueGroups * queuesPerGroup + 2) / LIMITS.queues_per_account.value },
    { limit: "largest_tenant_in_one_read_db", label: "largest tenant in one read database", demand: largestD1Bytes, utilisation: largestD1Bytes / LIMITS.d1_database_bytes.value }
  ].map((r) => ({ ...r, label: r.label ?? LIMITS[r.limit].label, exceeded: r.utilisation > 1 }))
  return { perSecond, peak, util, share, queueGroups, tenantsPerGroup, doRequests, permanentBytes, horizon, d1LiveBytes, d1MsPerEvent, readDbsByStorage, readDbsByTime, readDbs, doBytesPerEvent, largestEventsPerSecond, shardsLargest, shardsAverage, largestD1Bytes, largestWindowDaysThatFits, atOneUnit, binding, ceilings }
}

/** Storage growth per month, usage and monthly cost by product in month `horizon`, at inputs `i` and scale `s`. */
const costOf = (bench, i, s) => {
  const { o, events, tenants, facts, rowsWritten, d1Bytes, rowsRead, queueOps, doRowsWritten, windowDays, windowMonths, copied, pruneRows, cpuMs } = i
  const { doRequests, permanentBytes, horizon, d1LiveBytes, doBytesPerEvent } = s
  // Storage growth per month.
  const archiveBytesPerEvent = (copied.value * facts * o("archived-bytes-per-fact")) / o("compression")
  const archiveBytes = windowDays > 0 ? events * Math.max(0, horizon - windowMonths) * archiveBytesPerEvent : 0
  const ledgerBytes = events * horizon * doBytesPerEvent
  const storage = {
    d1_live_gb: d1LiveBytes / GB,
    d1_growth_gb_per_month: windowDays > 0 ? (events * permanentBytes) / GB : (events * d1Bytes.value) / GB,
    d1_growth_until_window_full_gb_per_month: (events * d1Bytes.value) / GB,
    d1_days_to_fill_one_database_unpruned: (LIMITS.d1_database_bytes.value / (events * d1Bytes.value)) * DAYS_PER_MONTH,
    ledger_growth_gb_per_month: (events * doBytesPerEvent) / GB,
    ledger_gb_at_horizon: ledgerBytes / GB,
    archive_growth_gb_per_month: windowDays > 0 ? (events * archiveBytesPerEvent) / GB : 0,
    archive_gb_at_horizon: archiveBytes / GB
  }

  // Monthly cost, by product, in month `horizon` (the accumulating stores priced at their size then).
  const workerRequests = bench.worker_requests
  const r2Puts = windowDays > 0 && copied.value > 0 ? tenants * DAYS_PER_MONTH : 0 // one Parquet object per tenant and day
  const doGbS = events * doRequests.value * (o("do-ms-per-request") / 1000) * 0.128
  const usage = {
    workers_requests: events * workerRequests,
    workers_cpu_ms: events * cpuMs.value,
    queues_operations: events * queueOps.value,
    do_requests: events * doRequests.value,
    do_duration_gb_s: doGbS,
    do_rows_written: events * doRowsWritten.value,
    do_rows_read: events * facts, // the appends' idempotency checks (not counted by the bench; negligible in price)
    d1_rows_read: events * (rowsRead.value + (windowDays > 0 ? copied.value * facts : 0)), // + the archive job reading the expiring copy
    d1_rows_written: events * (rowsWritten.value + pruneRows.value),
    r2_class_a: r2Puts
  }
  const costs = (allowances) => {
    const bill = allowances ? billable : gross
    const c = {
      workers: (allowances ? PRICES.workers_base.value : 0) + bill(usage.workers_requests, PRICES.workers_requests) + bill(usage.workers_cpu_ms, PRICES.workers_cpu_ms),
      queues: bill(usage.queues_operations, PRICES.queues_operations),
      durable_objects: bill(usage.do_requests, PRICES.do_requests) + bill(usage.do_duration_gb_s, PRICES.do_duration_gb_s) + bill(usage.do_rows_written, PRICES.do_rows_written) + bill(usage.do_rows_read, PRICES.do_rows_read) + storageCost(ledgerBytes / GB, PRICES.do_storage_gb_month, allowances),
      d1: bill(usage.d1_rows_read, PRICES.d1_rows_read) + bill(usage.d1_rows_written, PRICES.d1_rows_written) + storageCost(d1LiveBytes / GB, PRICES.d1_storage_gb_month, allowances),
      r2: storageCost(archiveBytes / GB, PRICES.r2_storage_gb_month, allowances) + bill(usage.r2_class_a, PRICES.r2_class_a)
    }
    return { ...c, total: Object.values(c).reduce((a, b) => a + b, 0) }
  }
  const detail = {
    workers_requests: billable(usage.workers_requests, PRICES.workers_requests),
    workers_cpu: billable(usage.workers_cpu_ms, PRICES.workers_cpu_ms),
    do_requests: billable(usage.do_requests, PRICES.do_requests),
    do_duration: billable(usage.do_duration_gb_s, PRICES.do_duration_gb_s),
    do_rows_written: billable(usage.do_rows_written, PRICES.do_rows_written),
    do_storage: storageCost(ledgerBytes / GB, PRICES.do_storage_gb_month),
    d1_rows_written: billable(usage.d1_rows_written, PRICES.d1_rows_written),
    d1_rows_read: billable(usage.d1_rows_read, PRICES.d1_rows_read),
    d1_storage: storageCost(d1LiveBytes / GB, PRICES.d1_storage_gb_month),
    r2_storage: storageCost(archiveBytes / GB, PRICES.r2_storage_gb_month),
    r2_class_a: billable(usage.r2_class_a, PRICES.r2_class_a)
  }

  // What the bench's own cost model counts (pipeline operations after allowances: no retention deletes, storage,
  // CPU or Durable Object duration), to compare with its monthly_total_usd.
  const benchComparable =
    PRICES.workers_base.value + billable(usage.workers_requests, PRICES.workers_requests) + billable(usage.queues_operations, PRICES.queues_operations) +
    billable(usage.do_requests, PRICES.do_requests) + billable(usage.do_rows_written, PRICES.do_rows_written) +
    billable(events * rowsRead.value, PRICES.d1_rows_read) + billable(events * rowsWritten.value, PRICES.d1_rows_written)
  return { storage, workerRequests, usage, costs, detail, benchComparable }
}

/**
 * The capacity of a deployment at `options` (flag names as keys), from the bench's per-event figures `bench`.
 * Returns plain data: inputs (with where each came from), per-limit utilisation, units, storage, cost.
 */
export const model = (bench, options = {}) => {
  const i = inputsOf(bench, options)
  const s = scaleOf(bench, options, i)
  const { o, events, tenants, assumed, targets, facts, rowsWritten, d1Bytes, rowsRead, queueOps, doRowsWritten, windowDays, copied, pruneRows, shards, cpuMs } = i
  const { perSecond, peak, util, share, queueGroups, tenantsPerGroup, doRequests, horizon, d1MsPerEvent, readDbsByStorage, readDbsByTime, readDbs, largestEventsPerSecond, shardsLargest, shardsAverage, largestD1Bytes, largestWindowDaysThatFits, atOneUnit, binding, ceilings } = s
  const { storage, workerRequests, usage, costs, detail, benchComparable } = costOf(bench, i, s)
  if (!bench.d1_bytes_source.startsWith("bench") && d1Bytes.from === bench.d1_bytes_source) assumed.push(`D1 bytes per event: ${fmt(d1Bytes.value, 0)} B, ${bench.d1_bytes_source}`)
  assumed.push(
    `Durable Object throughput: Cloudflare publishes a soft limit of 1,000 requests/s per object, lower for heavy requests; planned at ${pct(util)}`,
    `D1 time per event: ${fmt(d1MsPerEvent, 3)} ms (not published: assumed ${o("d1-ms-per-statement")} ms a statement, ${o("d1-ms-per-row-written")} ms a row written, ${o("d1-ms-per-row-read")} ms a row read)`,
    `ledger bytes per fact: ${o("do-bytes-per-fact")} B (not measured), Durable Object active time ${o("do-ms-per-request")} ms per request (not measured)`,
    `Worker CPU: ${fmt(cpuMs.value, 2)} ms per event (${cpuMs.from})`,
    `largest tenant: ${pct(share)} of the volume; traffic spread evenly over the rest; peak ${o("peak-factor")}× the monthly average`,
    `retention deletes: ${fmt(pruneRows.value, 2)} rows written per event (${pruneRows.from}; the bench does not count them)`,
    `archive: ${o("archived-bytes-per-fact")} B per copied fact ÷ ${o("compression")} (Parquet, assumed), one object per tenant and day; ${fmt(copied.value * 100, 0)} % of facts copied to D1 (${copied.from}); analysts' reads of D1 and R2 not modelled`
  )

  return {
    inputs: {
      events_per_month: events, tenants, largest_tenant_share: share, peak_factor: o("peak-factor"), utilisation: util,
      window_days: windowDays, horizon_months: horizon, targets,
      bench: { file: bench.file, date: bench.date, n: bench.n, monthly_usd_at_10m: bench.bench_monthly_usd_at_10m },
      per_event: {
        facts: { value: facts, from: options["facts-per-event"] !== undefined ? "flag" : "bench" },
        d1_rows_written: rowsWritten, d1_prune_rows_written: pruneRows, d1_rows_read: rowsRead, d1_bytes: d1Bytes, facts_copied_share: copied,
        d1_statements: { value: bench.d1_statements, from: "bench" },
        queue_operations: queueOps, do_requests: doRequests, do_rows_written: doRowsWritten, cpu_ms: cpuMs,
        worker_requests: { value: workerRequests, from: "bench's cost model" }
      }
    },
    rates: { events_per_second: perSecond, peak_events_per_second: peak, largest_tenant_peak_events_per_second: largestEventsPerSecond },
    binding: { limit: binding.limit, label: binding.label, utilisation: binding.utilisation, what: binding.what },
    at_one_unit: atOneUnit,
    ceilings,
    deployment: {
      read_databases: readDbs, read_databases_by_storage: readDbsByStorage, read_databases_by_time: readDbsByTime,
      tenants_per_read_database: Math.ceil(tenants / readDbs),
      queue_groups: queueGroups, tenants_per_queue_group: tenantsPerGroup,
      shards_per_tenant_configured: shards, shards_largest_tenant: shardsLargest, shards_average_tenant: shardsAverage,
      largest_tenant_read_db_gb: largestD1Bytes / GB, largest_tenant_window_days_that_fits: largestWindowDaysThatFits
    },
    storage,
    usage,
    monthly_usd: costs(true),
    monthly_usd_detail: detail,
    monthly_usd_before_allowances: costs(false),
    monthly_usd_as_the_bench_counts: benchComparable,
    assumed
  }
}

// ---- output --------------------------------------------------------------------------------------------------
function fmt(n, digits = 2) {
  if (!Number.isFinite(n)) return String(n)
  return n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: 0 })
}
function fmtBytes(b) {
  if (b >= 1e12) return `${fmt(b / 1e12, 2)} TB`
  if (b >= 1e9) return `${fmt(b / 1e9, 1)} GB`
  return `${fmt(b / 1e6, 1)} MB`
}
const pct = (x) => `${fmt(x * 100, x < 0.1 ? 1 : 0)} %`
const usd = (x) => `$${fmt(x, x >= 100 ? 0 : 2)}`
const volume = (e) => (e >= 1e9 ? `${fmt(e / 1e9)} B` : e >= 1e6 ? `${fmt(e / 1e6)} M` : fmt(e))
const pad = (cells, widths) => cells.map((c, i) => (i === 0 ? String(c).padEnd(widths[i]) : String(c).padStart(widths[i]))).join("  ")

const figuresLine = (m) => {
  const p = m.inputs.per_event
  const today = !m.inputs.targets && p.d1_rows_written.from !== "flag" && p.d1_bytes.from !== "flag"
  return `${today ? "today's figures (before the scale-out work)" : m.inputs.targets ? "the issue's targets" : "figures from flags"}: ${fmt(p.d1_rows_written.value)} D1 rows written per event (+ ${fmt(p.d1_prune_rows_written.value)} by retention), ${fmt(p.d1_bytes.value, 0)} B of D1 per event, ${fmt(p.facts.value)} facts per event`
}

export const render = (m) => {
  const out = []
  const d = m.deployment
  out.push(`factline capacity — ${volume(m.inputs.events_per_month)} events/month, ${fmt(m.inputs.tenants, 0)} tenants — ${figuresLine(m)}`)
  out.push(`bench: ${m.inputs.bench.file.replace(root + "/", "")} (${m.inputs.bench.date}, N = ${fmt(m.inputs.bench.n, 0)}); D1 window ${m.inputs.window_days} days; stores sized in month ${m.inputs.horizon_months}; every unit planned to ${pct(m.inputs.utilisation)} of its limit`)
  out.push(`rate: ${fmt(m.rates.events_per_second, 1)} events/s on average, ${fmt(m.rates.peak_events_per_second, 0)} at peak (×${m.inputs.peak_factor}); largest tenant ${fmt(m.rates.largest_tenant_peak_events_per_second, 0)} at peak`)
  out.push("")
  out.push(`binds first: ${m.binding.label} — ${pct(m.binding.utilisation)} of one unit (${m.binding.what})`)
  out.push("")
  const w = [30, 12, 8, 64]
  out.push(pad(["limit (one unit)", "utilisation", "units", "demand"], w))
  for (const r of [...m.at_one_unit].sort((a, b) => b.utilisation - a.utilisation)) out.push(pad([r.label, pct(r.utilisation), fmt(r.units, 0), r.what], w))
  out.push("")
  out.push(`deployment: ${fmt(d.read_databases, 0)} read databases (storage ${d.read_databases_by_storage}, query time ${d.read_databases_by_time}; ~${d.tenants_per_read_database} tenants each) + 1 platform database; ${d.queue_groups} queue group${d.queue_groups === 1 ? "" : "s"} (~${d.tenants_per_queue_group} tenants each); ledger shards per tenant: ${d.shards_largest_tenant} for the largest tenant, ${d.shards_average_tenant} for an average one (configured today: ${d.shards_per_tenant_configured})`)
  out.push("")
  const wc = [38, 12, 12]
  out.push(pad(["account ceiling", "demand", "utilisation"], wc))
  for (const c of m.ceilings) out.push(pad([c.label, c.limit.endsWith("bytes") || c.limit.startsWith("largest") ? fmtBytes(c.demand) : fmt(c.demand, 0), pct(c.utilisation) + (c.exceeded ? " EXCEEDED" : "")], wc))
  if (m.ceilings.find((c) => c.limit === "largest_tenant_in_one_read_db").exceeded) {
    out.push(`  the largest tenant's read side (${fmtBytes(d.largest_tenant_read_db_gb * GB)}) does not fit one database: its window must be ≤ ${fmt(d.largest_tenant_window_days_that_fits, 1)} days, or fewer bytes per event`)
  }
  out.push("")
  const s = m.storage
  out.push(`storage: D1 ${fmt(s.d1_live_gb, 1)} GB live (${m.inputs.window_days > 0 ? `steady once the ${m.inputs.window_days}-day window is full; grows ${fmt(s.d1_growth_gb_per_month, 1)} GB/month after` : `nothing pruned: grows ${fmt(s.d1_growth_gb_per_month, 1)} GB/month`}); without a window (today) a 10 GB database fills in ${fmt(s.d1_days_to_fill_one_database_unpruned, 1)} days`)
  out.push(`         ledger (Durable Objects) +${fmt(s.ledger_growth_gb_per_month, 1)} GB/month (${fmt(s.ledger_gb_at_horizon, 0)} GB in month ${m.inputs.horizon_months}); R2 archive +${fmt(s.archive_growth_gb_per_month, 1)} GB/month (${fmt(s.archive_gb_at_horizon, 0)} GB in month ${m.inputs.horizon_months})`)
  out.push("")
  const c = m.monthly_usd
  const dt = m.monthly_usd_detail
  out.push(`monthly cost (month ${m.inputs.horizon_months}, after the Workers Paid allowances): ${usd(c.total)}`)
  out.push(`  Workers ${usd(c.workers)} (base $5, requests ${usd(dt.workers_requests)}, CPU ${usd(dt.workers_cpu)})`)
  out.push(`  Queues ${usd(c.queues)} (${fmt(m.inputs.per_event.queue_operations.value)} operations per event)`)
  out.push(`  Durable Objects ${usd(c.durable_objects)} (requests ${usd(dt.do_requests)} at ${fmt(m.inputs.per_event.do_requests.value, 2)} per event, duration ${usd(dt.do_duration)}, rows written ${usd(dt.do_rows_written)}, storage ${usd(dt.do_storage)})`)
  out.push(`  D1 ${usd(c.d1)} (rows written ${usd(dt.d1_rows_written)}, rows read ${usd(dt.d1_rows_read)}, storage ${usd(dt.d1_storage)})`)
  out.push(`  R2 ${usd(c.r2)} (storage ${usd(dt.r2_storage)}, Class A ${usd(dt.r2_class_a)})`)
  out.push(`  of which the bench's cost model counts ${usd(m.monthly_usd_as_the_bench_counts)} (pipeline operations only: no retention deletes, storage, CPU or duration; the bench printed ${usd(m.inputs.bench.monthly_usd_at_10m)} at 10 M, one tenant)`)
  out.push("")
  out.push("assumed (not published or not measured):")
  for (const a of m.assumed) out.push(`  - ${a}`)
  return out.join("\n")
}

export const VOLUMES = [1e7, 1e8, 1e9]

/** The comparison across volumes: one column a volume. */
export const renderTable = (models) => {
  const rows = [
    ["events/s (average / peak)", (m) => `${fmt(m.rates.events_per_second, 0)} / ${fmt(m.rates.peak_events_per_second, 0)}`],
    ["binds first", (m) => `${m.binding.label} ${pct(m.binding.utilisation)}`],
    ["read databases (storage / time)", (m) => `${m.deployment.read_databases} (${m.deployment.read_databases_by_storage} / ${m.deployment.read_databases_by_time})`],
    ["tenants per read database", (m) => `~${m.deployment.tenants_per_read_database}`],
    ["queue groups", (m) => String(m.deployment.queue_groups)],
    ["shards: largest / average tenant", (m) => `${m.deployment.shards_largest_tenant} / ${m.deployment.shards_average_tenant}`],
    ["D1 live (window)", (m) => `${fmt(m.storage.d1_live_gb, 1)} GB`],
    ["D1 share of the 1 TB account", (m) => pct(m.ceilings.find((c) => c.limit === "d1_account_bytes").utilisation)],
    ["largest tenant in one read DB", (m) => { const c = m.ceilings.find((x) => x.limit === "largest_tenant_in_one_read_db"); return `${fmt(m.deployment.largest_tenant_read_db_gb, 1)} GB${c.exceeded ? " ✗" : ""}` }],
    ["ledger growth / month", (m) => `${fmt(m.storage.ledger_growth_gb_per_month, 1)} GB`],
    ["R2 archive growth / month", (m) => `${fmt(m.storage.archive_growth_gb_per_month, 1)} GB`],
    ["Workers", (m) => usd(m.monthly_usd.workers)],
    ["Queues", (m) => usd(m.monthly_usd.queues)],
    ["Durable Objects", (m) => usd(m.monthly_usd.durable_objects)],
    ["D1", (m) => usd(m.monthly_usd.d1)],
    ["R2", (m) => usd(m.monthly_usd.r2)],
    ["monthly total", (m) => usd(m.monthly_usd.total)],
    ["… as the bench counts (pipeline)", (m) => usd(m.monthly_usd_as_the_bench_counts)]
  ]
  const w = [34, ...models.map(() => 24)]
  const out = [pad(["", ...models.map((m) => `${volume(m.inputs.events_per_month)} events/month`)], w)]
  for (const [label, cell] of rows) out.push(pad([label, ...models.map(cell)], w))
  return out.join("\n")
}

/** The command: returns its exit status; `io` takes the output (tests pass their own). */
export const main = (argv, io = { out: (t) => process.stdout.write(t), err: (t) => process.stderr.write(t) }) => {
  let options
  try {
    options = parseFlags(argv)
  } catch (error) {
    if (!(error instanceof UsageError)) throw error
    io.err(`capacity: ${error.message}\n\n${usage()}\n`)
    return 2
  }
  if (options.help) {
    io.out(usage() + "\n")
    return 0
  }
  let bench
  try {
    const found = options.bench ? { file: resolve(options.bench), data: JSON.parse(readFileSync(resolve(options.bench), "utf8")) } : newestBench()
    if (!found.data.cost_model || !found.data.round_trips_per_100_events) throw new UsageError(`--bench: ${options.bench} has no cost_model`)
    bench = benchFigures(found.data, found.file)
  } catch (error) {
    io.err(`capacity: ${error instanceof UsageError ? error.message : `--bench: cannot read ${options.bench ?? "the bench results"}: ${error.message}`}\n\n${usage()}\n`)
    return 2
  }
  if (options["events-per-month"] !== undefined) {
    const m = model(bench, options)
    io.out((options.json ? JSON.stringify(m, null, 2) : render(m)) + "\n")
    return 0
  }
  const models = VOLUMES.map((events) => model(bench, { ...options, "events-per-month": events }))
  if (options.json) {
    io.out(JSON.stringify(models, null, 2) + "\n")
    return 0
  }
  const first = models[0]
  io.out(
    [
      `factline capacity at 10 M, 100 M and 1 B events/month — ${fmt(first.inputs.tenants, 0)} tenants — ${figuresLine(first)}`,
      `bench: ${first.inputs.bench.file.replace(root + "/", "")} (${first.inputs.bench.date}); D1 window ${first.inputs.window_days} days; costs in month ${first.inputs.horizon_months}; units planned to ${pct(first.inputs.utilisation)}; peak ×${first.inputs.peak_factor}`,
      "",
      renderTable(models),
      "",
      `one volume in detail: npm run capacity -- --events-per-month 1e9 --tenants ${first.inputs.tenants}${first.inputs.targets ? " --targets" : ""}`,
      "assumed (not published or not measured):",
      ...first.assumed.map((a) => `  - ${a}`)
    ].join("\n") + "\n"
  )
  return 0
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) process.exitCode = main(process.argv.slice(2))
