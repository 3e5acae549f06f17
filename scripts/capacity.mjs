#!/usr/bin/env node
// npm run capacity -- --events-per-month 1e9 --tenants 500 [flags]
//
// The capacity model (issues 19, 39 and 41): from the counted operations of the bench of the code it ships with
// (bench/baseline.json: its full_run's cost model and counts, and its per-stage CPU; a run's results only with
// --bench <file>) and Cloudflare's published limits and prices (the tables below, each with its source): which
// limit binds first; how many read databases, ledger shards per tenant (and when a tenant must be resharded) and
// queue groups a deployment needs; the tiered ledger (facts of the hot window in the shard's SQLite, older ones in
// R2 segments with their manifest and packed fact ids left in the shard); a tenant's read side placed per projection; storage by
// month; and every line of the monthly bill. Without --events-per-month it prints the comparison at 10 M, 100 M
// and 1 B events/month. `--markdown` prints docs/capacity.md's tables and `--write-docs` rewrites them there
// (scripts/capacity.test.mjs fails when they differ). Pure arithmetic, no network: `model(bench, options)` is exported.
import { readFileSync, writeFileSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
/** The bench of the code this script ships with: committed beside it, refreshed with the code (bench/run.mjs). */
export const BASELINE = join(root, "bench", "baseline.json")
/** The page whose tables this script prints. */
export const DOCS = join(root, "docs", "capacity.md")

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
  // Each console line is a log event, and so is each invocation's own log (observability is on in every config
  // factline writes: apps/example/wrangler.jsonc, `factline init`); head sampling would scale both.
  workers_logs: { per_million: 0.6, included: 20e6, text: "20 M log events included, then $0.60/M (each console line and each invocation's log)", source: "https://developers.cloudflare.com/workers/observability/logs/workers-logs/#pricing" },
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

/** factline's own bounds the model checks (not Cloudflare's), each where the code sets it. */
export const FACTLINE = {
  max_shards_per_tenant: { value: 1024, label: "ledger shards per tenant", text: "1,024 ledger shards per tenant at most", source: "packages/core/src/ledger/Shards.ts (maxShardsPerTenant)" },
  accepted_keys_days: { value: 30, label: "accepted keys retention", text: "accepted idempotency keys kept 30 days", source: "packages/core/src/operations/Maintenance.ts (acceptedKeysRetentionDays)" }
}

/**
 * The tiered ledger's sizes when the bench does not measure them — estimates, argued in docs/capacity.md ("The
 * ledger, hot and cold"); each has a flag, and the bench's figure replaces the estimate when its results carry one.
 * - hot fact, 600 B: the `facts` row (~450 B: a 34-character fact id, causation and correlation ids ~36 each, stream
 *   ~40, type ~20, data ~200 B of JSON, created_at 24, traceparent 55, plus SQLite's record header and cell
 *   overhead) and its `fact_id` UNIQUE index entry (~100 B: the id and the primary key it points to);
 * - cold fact in the shard, 75 B: its share of the cold manifest — its id packed in its stream run's `cold_ranges`
 *   row (a JSON array: 37 B an id) and that row's keys (tenant, stream, sequences, segment) shared by the run's facts:
 *   54 B of stored values a fact in 3-fact streams (the bench's calls), measured in workerd (cold-history workerd
 *   test), plus record headers, in pages ~75 % full (streams arrive in no key order);
 * - cold fact in R2, 150 B: the fact's ~500 B in a Parquet segment — the JSON data and the repeated columns (tenant,
 *   stream, type) compress ~5×, the ~110 B of hex ids only ~2×;
 * - tiering, 1.38 rows written a fact, measured: the hot row deleted (a DELETE is one row written per row, its index
 *   entries not counted) and one `cold_ranges` row per stream run holding the run's packed fact ids — no row per cold
 *   fact. The cold-history workerd test counts `cursor.rowsWritten` of every statement of a segment: 1,164 for 1,000
 *   facts in 155 stream runs (1,000 deletes, 155 ranges, 9 for the segment, its cursor and the manifest's first
 *   creation; the code before it, with its `cold_facts` row per fact, wrote 2,166). At the bench's 2.67 facts a
 *   stream (one call's): 1 + 1 / 2.67 = 1.38 a fact (the earlier figure, 2, left the range rows out: 2.38 on it);
 * - hot window, 30 days: the default of the shard's hot window setting (`FACTLINE_LEDGER_HOT_DAYS`, per tenant).
 */
export const LEDGER_ESTIMATES = { do_bytes_per_hot_fact: 600, do_bytes_per_cold_fact: 75, r2_bytes_per_cold_fact: 150, tiering_rows_written_per_fact: 1.38, hot_window_days: 30 }

/**
 * The example app's read side by placement unit, from the tables of the bench's `d1_bytes.by_table`: each
 * projection with its tables and indexes — and `projection_applied`, the applied set of the additive projections
 * (only buyer_budgets is additive) — is placed and moved on its own; everything else (accepted_keys, dead letters,
 * webhook state, batch jobs) stays in the tenant's home database. `--projections` gives another app's split.
 */
export const EXAMPLE_PROJECTIONS = { calls: ["calls", "calls_by_buyer"], buyer_budgets: ["buyer_budgets", "projection_applied"] }

/** Average month: 365.25 / 12 days. */
export const DAYS_PER_MONTH = 365.25 / 12
const SECONDS_PER_MONTH = DAYS_PER_MONTH * 86_400
/** Measured on main by issue 19 (the D1 file's dbstat): for bench results from before the bench measured it. */
const ISSUE_D1_BYTES_PER_EVENT = 1_700
const PIPELINE = ["events", "fact-processing", "projections"]
const GB = 1e9

// ---- flags ---------------------------------------------------------------------------------------------------
const FLAGS = {
  "events-per-month": { kind: "number", min: 1, help: "events per month (1e9, 100000000); without it: the table at 10 M, 100 M and 1 B" },
  tenants: { kind: "int", min: 1, default: 500, help: "tenants (default 500)" },
  "largest-tenant-share": { kind: "number", min: 0, max: 1, default: 0.1, help: "share of the volume sent by the largest tenant (default 0.1; at least 1/tenants)" },
  "peak-factor": { kind: "number", min: 1, default: 3, help: "peak rate ÷ monthly average rate (default 3)" },
  utilisation: { kind: "number", min: 0.05, max: 1, default: 0.7, help: "plan every unit to at most this share of its limit at peak (default 0.7)" },
  "window-days": { kind: "number", min: 0, default: 30, help: "days the read side keeps a tenant's rows: accepted keys (30), the facts copy, projections (default 30; 0 = kept for ever)" },
  "horizon-months": { kind: "number", min: 1, default: 12, help: "month the accumulating stores (ledger, archive) are sized and priced at (default 12)" },
  "hot-window-days": { kind: "number", min: 1, default: LEDGER_ESTIMATES.hot_window_days, help: `days a fact stays in the shard's SQLite before it moves to R2 (default ${LEDGER_ESTIMATES.hot_window_days})` },
  untiered: { kind: "boolean", help: "the ledger without its cold tier: every fact stays in the shard (as before issue 39)" },
  "do-bytes-per-hot-fact": { kind: "number", min: 1, help: `shard SQLite bytes per hot fact, row and index (default: the bench's, else ${LEDGER_ESTIMATES.do_bytes_per_hot_fact} estimated)` },
  "do-bytes-per-cold-fact": { kind: "number", min: 0, help: `shard SQLite bytes per cold fact: its share of the cold manifest, packed fact ids and range rows (default: the bench's, else ${LEDGER_ESTIMATES.do_bytes_per_cold_fact} estimated)` },
  "r2-bytes-per-cold-fact": { kind: "number", min: 0, help: `R2 bytes per cold fact in a Parquet segment (default: the bench's, else ${LEDGER_ESTIMATES.r2_bytes_per_cold_fact} estimated)` },
  "tiering-rows-per-fact": { kind: "number", min: 0, help: `shard rows written to move a fact to the cold tier (default: the bench's, else ${LEDGER_ESTIMATES.tiering_rows_written_per_fact} estimated)` },
  projections: { kind: "projections", help: "a tenant's projections and their D1 bytes per event, name=bytes,… (default: the example's, from the bench's tables)" },
  "facts-per-event": { kind: "number", min: 0.01, help: "facts per event (bench: outcome + qualification + charge share); scales the per-fact counts" },
  "d1-bytes-per-event": { kind: "number", min: 0, help: "D1 bytes per event in the window (default: the bench's dbstat); scales every read-side unit" },
  "d1-permanent-bytes-per-event": { kind: "number", min: 0, default: 0, help: "D1 bytes per event kept beyond the window (projection rows an app keeps; default 0)" },
  "rows-written-per-event": { kind: "number", min: 0, help: "D1 rows written per event by the pipeline" },
  "rows-read-per-event": { kind: "number", min: 0, help: "D1 rows read per event by the pipeline" },
  "prune-rows-per-event": { kind: "number", min: 0, help: "D1 rows written per event by retention deletes (default: the accepted key 1, with a window + 1 per copied fact)" },
  "facts-copied-share": { kind: "number", min: 0, max: 1, help: "share of facts copied to D1 (FACTLINE_FACTS_COPY: none 0, all 1; default: the bench run's setting)" },
  "queue-ops-per-event": { kind: "number", min: 0, help: "queue operations per event (write + read + delete per 64 KB)" },
  "do-requests-per-event": { kind: "number", min: 0, help: "Durable Object requests per event (default: shards touched per batch, from the tenant mix)" },
  "shards-per-tenant": { kind: "int", min: 1, help: "ledger shards a tenant gets when first used (bench setting, 16)" },
  "do-ms-per-request": { kind: "number", min: 0, default: 10, help: "Durable Object active wall time per request, ms (assumed 10)" },
  "cpu-ms-per-event": { kind: "number", min: 0, help: "Worker CPU ms per event (default: the bench's per-stage budget, local)" },
  "log-lines-per-event": { kind: "number", min: 0, help: "console lines per event, each a Workers Logs event (default: the bench's count, FACTLINE_LOG_ATTEMPTS=batch; ≈ 1 more with all)" },
  "d1-ms-per-statement": { kind: "number", min: 0, default: 0.5, help: "D1 time per statement, ms (assumed 0.5)" },
  "d1-ms-per-row-written": { kind: "number", min: 0, default: 0.02, help: "D1 time per row written, ms (assumed 0.02)" },
  "d1-ms-per-row-read": { kind: "number", min: 0, default: 0.005, help: "D1 time per row read, ms (assumed 0.005)" },
  "archived-bytes-per-fact": { kind: "number", min: 0, default: 500, help: "bytes per copied fact before compression in the R2 archive of the D1 copy (default 500)" },
  compression: { kind: "number", min: 1, default: 5, help: "Parquet compression ratio of that archive (default 5)" },
  "min-queue-groups": { kind: "int", min: 1, default: 1, help: "queue groups at least (for fairness; default 1)" },
  bench: { kind: "string", help: "bench figures to read: a run's results file (default: bench/baseline.json, the bench of this code)" },
  json: { kind: "boolean", help: "machine output (every input, limit and line of the bill)" },
  markdown: { kind: "boolean", help: "docs/capacity.md's tables, as the page holds them" },
  "write-docs": { kind: "boolean", help: "rewrite docs/capacity.md's tables from bench/baseline.json (or FACTLINE_UPDATE_DOCS=1 npm test)" },
  help: { kind: "boolean", help: "this text" }
}

export const usage = () =>
  [
    "usage: npm run capacity -- [--events-per-month N] [--tenants N] [flags]",
    "",
    ...Object.entries(FLAGS).map(([name, f]) => `  --${name}${f.kind === "boolean" ? "" : " <" + (f.kind === "string" ? "file" : f.kind === "projections" ? "name=bytes,…" : "n") + ">"}`.padEnd(40) + f.help)
  ].join("\n")

export class UsageError extends Error {}

/** `name=bytes,name=bytes` → { name: bytes }: projection names as the registry spells them, bytes ≥ 0. */
const parseProjections = (raw) => {
  const out = {}
  for (const part of raw.split(",")) {
    const m = /^([A-Za-z][\w-]*)=(\d+(?:\.\d+)?)$/.exec(part.trim())
    if (!m) throw new UsageError(`--projections: expected name=bytes,… (e.g. calls=145,buyer_budgets=45), got ${part}`)
    if (m[1] in out) throw new UsageError(`--projections: ${m[1]} named twice`)
    out[m[1]] = Number(m[2])
  }
  return out
}

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
    if (flag.kind === "projections") {
      options[name] = parseProjections(raw)
      continue
    }
    const value = Number(raw.replaceAll("_", ""))
    if (raw.trim() === "" || !Number.isFinite(value)) throw new UsageError(`--${name}: not a number: ${raw}`)
    if (flag.kind === "int" && !Number.isInteger(value)) throw new UsageError(`--${name}: not a whole number: ${raw}`)
    if (flag.min !== undefined && value < flag.min) throw new UsageError(`--${name}: at least ${flag.min}, got ${raw}`)
    if (flag.max !== undefined && value > flag.max) throw new UsageError(`--${name}: at most ${flag.max}, got ${raw}`)
    options[name] = value
  }
  if (options.untiered && options["hot-window-days"] !== undefined) throw new UsageError("--untiered and --hot-window-days: choose one")
  if (options["write-docs"] && (options.bench !== undefined || options["events-per-month"] !== undefined)) throw new UsageError("--write-docs prints the page's tables from bench/baseline.json's defaults: no --bench or --events-per-month")
  return options
}

// ---- the bench's counted operations --------------------------------------------------------------------------
/**
 * The bench figures in `file` (default: the committed bench/baseline.json): a baseline (its `full_run`, the counted
 * figures of the full run it was taken with, and its per-stage CPU `stages`) or a run's results file (bench/out/results/…).
 */
export const readBench = (file = BASELINE) => {
  let data
  try {
    data = JSON.parse(readFileSync(file, "utf8"))
  } catch (error) {
    throw new UsageError(`cannot read bench figures from ${file}: ${error.message}`)
  }
  const run = data?.cost_model ? data : data?.full_run
  if (!run?.cost_model || !run.round_trips_per_100_events) throw new UsageError(`${file} has no cost_model (a bench results file, or a baseline with full_run)`)
  const stages = data.per_stage_budget?.stages ?? (data.stages ? Object.entries(data.stages).map(([stage, s]) => ({ stage, ...s })) : undefined)
  return benchFigures(run, file, stages)
}

/** The first of `names` present in `object` (a figure the bench has written under more than one name). */
const firstOf = (object, names) => names.map((n) => object?.[n]).find((v) => typeof v === "number")

/** Per-event figures from a bench results object (the bench's own counting; see bench/run.mjs), and its per-stage CPU. */
export const benchFigures = (results, file = "", stageBudget = undefined) => {
  const cm = results.cost_model
  const stages = Object.fromEntries(results.round_trips_per_100_events.map((r) => [r.stage, r]))
  const per = (names, field) => names.reduce((n, s) => n + (stages[s] ? stages[s][field] / stages[s].events : 0), 0)
  const counted = ["http edge", ...PIPELINE]
  const d1Bytes = cm.d1_bytes_per_event ?? undefined
  // CPU: the per-stage budget's time per event of the four stages (one local workerd thread), else the full run's wall time.
  const budget = stageBudget?.filter((s) => counted.includes(s.stage) && typeof s.cpu_ms_per_event === "number")
  const cpu = budget?.length === counted.length
    ? { value: budget.reduce((n, s) => n + s.cpu_ms_per_event, 0), from: "bench per-stage budget (local workerd time of the four stages: an upper bound on billed CPU)" }
    : { value: per(counted, "ms"), from: "bench wall time per event (an upper bound on CPU)" }
  const ledger = cm.ledger ?? cm
  return {
    file,
    date: results.date,
    n: results.n,
    facts_per_event: cm.assumptions.facts_per_event,
    d1_rows_written: cm.per_event.d1_rows_written,
    d1_rows_read: cm.per_event.d1_rows_read,
    d1_bytes: d1Bytes ?? ISSUE_D1_BYTES_PER_EVENT,
    d1_bytes_source: d1Bytes === undefined ? "issue 19's dbstat measurement (these bench results predate d1_bytes_per_event)" : "bench (dbstat)",
    d1_bytes_by_table: cm.d1_bytes?.by_table,
    queue_operations: cm.per_event.queue_operations,
    do_requests: cm.per_event.do_requests,
    do_rows_written: cm.per_event.do_rows_written,
    // The tiered ledger's figures, when the bench measures them (else LEDGER_ESTIMATES).
    do_bytes_per_hot_fact: firstOf(ledger, ["do_bytes_per_fact_hot", "do_bytes_per_hot_fact"]),
    do_bytes_per_cold_fact: firstOf(ledger, ["do_bytes_per_fact_cold", "do_bytes_per_cold_fact"]),
    r2_bytes_per_cold_fact: firstOf(ledger, ["r2_bytes_per_fact_cold", "r2_bytes_per_cold_fact"]),
    tiering_rows_written_per_fact: firstOf(ledger, ["tiering_rows_written_per_fact"]),
    d1_statements: per(counted, "d1Statements"),
    // The busiest queue: factline-events, one message per event (the edge's sends).
    busiest_queue_messages: stages["http edge"] ? stages["http edge"].queueMessages / stages["http edge"].events : 1,
    // FACTLINE_FACTS_COPY of the run: none → no fact copied to D1, all → every fact; results from before the setting copied all.
    facts_copied_share: results.settings?.facts_copy === undefined || results.settings.facts_copy === "all" ? 1 : results.settings.facts_copy === "none" ? 0 : undefined,
    facts_copy_source: results.settings?.facts_copy === undefined ? "bench (a run from before FACTLINE_FACTS_COPY: every fact copied)" : `bench (FACTLINE_FACTS_COPY=${results.settings.facts_copy})`,
    // Ledger stages: one RPC per shard touched per batch (events, fact-processing).
    ledger_stages: PIPELINE.filter((s) => stages[s]?.doRpcs > 0).length,
    shards_per_tenant: results.settings?.shards_per_tenant ?? 16,
    cpu_ms_per_event: cpu.value,
    cpu_source: cpu.from,
    events_batch_seconds: stages.events ? stages.events.ms / 1000 : 0.1,
    // The bench's cost model: a consumer invocation per 100 events on each of 4 consumers, an HTTP request per 500 events.
    worker_requests: 4 / 100 + 1 / 500,
    bench_monthly_usd_at_10m: cm.monthly_total_usd,
    // Console lines per event, counted by the bench around each stage (edge and pipeline; results from before stop 40
    // did not count them: undefined, and the model falls back to one line per consumer batch).
    log_lines_per_event: counted.every((s) => typeof stages[s]?.logLines === "number") ? per(counted, "logLines") : undefined
  }
}

// ---- the model -----------------------------------------------------------------------------------------------
const billable = (units, price) => (Math.max(0, units - price.included) / 1e6) * price.per_million
const gross = (units, price) => (units / 1e6) * price.per_million
const storageCost = (gb, price, allowances = true) => Math.max(0, gb - (allowances ? price.included : 0)) * price.per_unit
/** A product line's cost split over its parts in proportion to their usage (the allowance is the product's, once). */
const split = (parts, price, bill) => {
  const total = Object.values(parts).reduce((a, b) => a + b, 0)
  const cost = bill(total, price)
  return Object.fromEntries(Object.entries(parts).map(([k, v]) => [k, total > 0 ? (cost * v) / total : 0]))
}
/** Expected distinct shards hit by a batch of 100 events drawn from tenants with traffic `shares` and shards `shards`. */
const shardsTouched = (tenants) => tenants.reduce((n, t) => n + t.count * t.shards * (1 - Math.pow(1 - t.share / t.shards, 100)), 0)

/** The per-event inputs at `options`, each with where it came from (flag, bench, estimate). */
const inputsOf = (bench, options) => {
  const o = (name) => options[name] ?? FLAGS[name].default
  const events = options["events-per-month"]
  const tenants = o("tenants")
  const facts = options["facts-per-event"] ?? bench.facts_per_event
  const k = facts / bench.facts_per_event // the per-fact counts scale with facts per event
  const from = (name, benchValue) =>
    options[name] !== undefined ? { value: options[name], from: "flag" } : { value: benchValue * k, from: k !== 1 ? "bench, scaled by facts per event" : "bench" }
  // Ledger figures: a flag, else the bench's measurement, else the argued estimate.
  const ledger = (name, key) =>
    options[name] !== undefined ? { value: options[name], from: "flag" } : bench[key] !== undefined ? { value: bench[key], from: "bench" } : { value: LEDGER_ESTIMATES[key], from: key === "tiering_rows_written_per_fact" ? "measured: a workerd probe (docs/capacity.md)" : "estimate (docs/capacity.md)" }

  const rowsWritten = from("rows-written-per-event", bench.d1_rows_written)
  const rowsRead = from("rows-read-per-event", bench.d1_rows_read)
  const queueOps = options["queue-ops-per-event"] !== undefined ? { value: options["queue-ops-per-event"], from: "flag" } : { value: 3 * (1 + (bench.queue_operations / 3 - 1) * k), from: "bench" }
  const doRowsWritten = { value: bench.do_rows_written * k, from: "bench" }
  const windowDays = o("window-days")
  const windowMonths = windowDays / DAYS_PER_MONTH
  const copied = options["facts-copied-share"] !== undefined ? { value: options["facts-copied-share"], from: "flag" }
    : bench.facts_copied_share !== undefined ? { value: bench.facts_copied_share, from: bench.facts_copy_source }
    : { value: 1, from: `assumed every fact: the ${bench.facts_copy_source} copied a list of types (pass --facts-copied-share)` }
  // Retention deletes are rows written too: each accepted key and, with a window, each copied fact. Measured on local
  // D1 (apps/example/test/d1-rows.workers.test.ts): a DELETE writes one row per row deleted, its index entries not
  // counted, with or without a WHERE; only DROP TABLE writes none (docs/performance.md, "D1 rows written per event").
  const pruneRows = options["prune-rows-per-event"] !== undefined ? { value: options["prune-rows-per-event"], from: "flag" } : { value: 1 + (windowDays > 0 ? copied.value * facts : 0), from: "measured: a DELETE is one row written per row deleted (local D1 probe, docs/performance.md)" }
  const shards = options["shards-per-tenant"] ?? bench.shards_per_tenant
  const cpuMs = options["cpu-ms-per-event"] !== undefined ? { value: options["cpu-ms-per-event"], from: "flag" } : { value: bench.cpu_ms_per_event * k, from: bench.cpu_source }
  // Workers Logs: the lines written per event (FACTLINE_LOG_ATTEMPTS=batch, the default: one per consumer batch and one
  // per failed attempt; `all` adds one per message, ≈ 1 per event), plus each invocation's own log event (the requests).
  const logLines = options["log-lines-per-event"] !== undefined ? { value: options["log-lines-per-event"], from: "flag" }
    : bench.log_lines_per_event !== undefined ? { value: bench.log_lines_per_event, from: "bench (console lines counted per stage)" }
    : { value: 0.04, from: "estimate: one line per consumer batch of 100 on each of four consumers (bench results from before stop 40 did not count them)" }

  // The read side by placement unit: the tenant's home database and each projection (bytes per event).
  const byTable = bench.d1_bytes_by_table
  const mapped = new Set(Object.values(EXAMPLE_PROJECTIONS).flat())
  const benchProjections = byTable ? Object.fromEntries(Object.entries(EXAMPLE_PROJECTIONS).map(([name, tables]) => [name, tables.reduce((n, t) => n + (byTable[t] ?? 0), 0)])) : {}
  const home = byTable ? Object.entries(byTable).filter(([t]) => !mapped.has(t)).reduce((n, [, b]) => n + b, 0) : bench.d1_bytes
  const projections = options.projections ?? benchProjections
  const unitsRaw = [{ unit: "home (accepted keys, dead letters, webhooks…)", kind: "home", bytes: home }, ...Object.entries(projections).map(([name, bytes]) => ({ unit: `projection ${name}`, kind: "projection", bytes }))]
  const rawTotal = unitsRaw.reduce((n, u) => n + u.bytes, 0)
  const d1BytesValue = options["d1-bytes-per-event"] ?? rawTotal * k
  const scaleUnits = rawTotal > 0 ? d1BytesValue / rawTotal : 0
  // The home's accepted keys (their life is a setting per tenant, FACTLINE_KEY_RETENTION_DAYS): what a shorter life shrinks.
  const keysShare = home > 0 ? (byTable?.accepted_keys ?? home) / home : 0
  const units = unitsRaw.map((u) => ({ ...u, bytes_per_event: u.bytes * scaleUnits, ...(u.kind === "home" ? { keys_share: keysShare } : {}) }))
  const d1Bytes = { value: d1BytesValue, from: options["d1-bytes-per-event"] !== undefined ? "flag" : options.projections ? "bench's home tables + --projections" : bench.d1_bytes_source }

  const tiered = options.untiered !== true
  const hotWindowDays = tiered ? o("hot-window-days") : Infinity
  return {
    o, events, tenants, facts, rowsWritten, d1Bytes, units, rowsRead, queueOps, doRowsWritten, windowDays, windowMonths, copied, pruneRows, shards, cpuMs, logLines,
    tiered, hotWindowDays, hotWindowMonths: hotWindowDays / DAYS_PER_MONTH,
    hotBytes: ledger("do-bytes-per-hot-fact", "do_bytes_per_hot_fact"),
    coldBytes: ledger("do-bytes-per-cold-fact", "do_bytes_per_cold_fact"),
    r2ColdBytes: ledger("r2-bytes-per-cold-fact", "r2_bytes_per_cold_fact"),
    tieringRows: ledger("tiering-rows-per-fact", "tiering_rows_written_per_fact")
  }
}

/**
 * How a read-side unit of the largest tenant is placed so that no database holds more than `line` bytes (10 GB at
 * the planning utilisation): a projection in the fewest parts (2, 4, 8 or 16: placement/Parts.ts) whose share fits;
 * the home with its accepted keys kept the most whole days that fit (`FACTLINE_KEY_RETENTION_DAYS` for that tenant,
 * at least 1 day), when the default 30 do not. `db_bytes` is the fullest database's demand: over 10 GB only where
 * even 16 parts, or keys kept a day, cannot fit.
 */
/** How a unit is placed, in words: whole, in parts, or the home with its keys' life. */
const placedAs = (u) => (u.parts > 1 ? `${u.parts} parts` : u.key_retention_days !== undefined && u.key_retention_days < FACTLINE.accepted_keys_days.value ? `keys kept ${u.key_retention_days} days` : "whole")
const placedText = (u) => `${fmt(u.gb, 1)} GB${u.parts > 1 ? ` in ${u.parts} parts of ${fmt(u.db_gb, 1)} GB` : u.db_gb < u.gb ? ` → ${fmt(u.db_gb, 1)} GB with keys kept ${u.key_retention_days} days` : ""}`

export const placedUnit = (u, line, eventsPerDay) => {
  if (u.kind === "home") {
    if (u.bytes <= line || !(u.keys_share > 0)) return { parts: 1, db_bytes: u.bytes, key_retention_days: FACTLINE.accepted_keys_days.value }
    const keysPerDay = eventsPerDay * u.bytes_per_event * u.keys_share
    const rest = u.bytes * (1 - u.keys_share)
    const days = Math.max(1, Math.min(FACTLINE.accepted_keys_days.value, Math.floor((line - rest) / keysPerDay)))
    return { parts: 1, db_bytes: rest + keysPerDay * days, key_retention_days: days }
  }
  const parts = [1, ...PROJECTION_PARTS].find((k) => u.bytes / k <= line) ?? PROJECTION_PARTS.at(-1)
  return { parts, db_bytes: u.bytes / parts }
}

/** The part counts a projection may be split into (placement/Parts.ts). */
export const PROJECTION_PARTS = [2, 4, 8, 16]

/**
 * The tiered ledger of `factsPerMonth` facts a month, at month `t`: facts in the hot window (the shard's SQLite, row and
 * index), older facts as an id-index row in the shard and a row of a Parquet segment in R2. Untiered: all hot.
 */
const ledgerAt = (i, factsPerMonth, t) => {
  const hot = factsPerMonth * Math.min(t, i.hotWindowMonths)
  const cold = factsPerMonth * Math.max(0, t - i.hotWindowMonths)
  return { hot_facts: hot, cold_facts: cold, do_hot_bytes: hot * i.hotBytes.value, do_cold_bytes: cold * i.coldBytes.value, do_bytes: hot * i.hotBytes.value + cold * i.coldBytes.value, r2_bytes: cold * i.r2ColdBytes.value }
}

/**
 * A tenant's ledger shards: the count it needs by month `horizon` (storage under the planning line of 10 GB × utilisation
 * per object, requests under 1,000/s × utilisation), the count to reshard to (today's count times a power of two, so each
 * new shard takes its streams from one old shard: shards are hash mod N), and the month today's count passes the line.
 */
const shardPlan = (i, util, factsPerMonth, horizon, rps1) => {
  const line = LIMITS.do_object_bytes.value * util
  const need = Math.max(i.shards, Math.ceil(ledgerAt(i, factsPerMonth, horizon).do_bytes / line), Math.ceil(rps1 / (LIMITS.do_requests_per_second.value * util)))
  const to = need <= i.shards ? i.shards : i.shards * Math.pow(2, Math.ceil(Math.log2(need / i.shards)))
  let passes = null
  if (need > i.shards) {
    let lo = 0
    let hi = horizon
    for (let n = 0; n < 50; n++) {
      const mid = (lo + hi) / 2
      if (ledgerAt(i, factsPerMonth, mid).do_bytes / i.shards > line) hi = mid
      else lo = mid
    }
    passes = hi
  }
  return { need, reshard_to: need > i.shards ? Math.min(to, FACTLINE.max_shards_per_tenant.value) : null, shards: Math.min(Math.max(need, to), FACTLINE.max_shards_per_tenant.value), passes_line_in_month: passes, per_shard_bytes: ledgerAt(i, factsPerMonth, horizon).do_bytes / Math.min(Math.max(need, to), FACTLINE.max_shards_per_tenant.value) }
}

/**
 * The deployment's scale-out at inputs `i`: rates, queue groups, ledger shards (and reshards), Durable Object requests
 * from the tenant mix, read databases and the read side's units; the utilisation of each limit at one unit (and the one
 * that binds first); the ceilings that do not scale out.
 */
const scaleOf = (bench, options, i) => {
  const { o, events, tenants, facts, rowsWritten, d1Bytes, rowsRead, windowDays, windowMonths, pruneRows, cpuMs } = i
  const perSecond = events / SECONDS_PER_MONTH
  const peak = perSecond * o("peak-factor")
  const util = o("utilisation")
  const share = Math.min(1, Math.max(1 / tenants, o("largest-tenant-share")))
  const horizon = o("horizon-months")

  // Queue groups: the busiest queue (factline-events) takes one message per event.
  const queueDemand = peak * bench.busiest_queue_messages
  const concurrency = (peak / 100) * bench.events_batch_seconds
  const queueGroups = Math.max(
    o("min-queue-groups"),
    Math.ceil(queueDemand / (LIMITS.queue_messages_per_second.value * util)),
    Math.ceil(concurrency / (LIMITS.queue_concurrent_consumers.value * util))
  )
  const tenantsPerGroup = Math.ceil(tenants / queueGroups)

  // Ledger shards: the largest tenant and an average one (the rest share the volume evenly).
  const largestFacts = events * share * facts
  const otherFacts = tenants > 1 ? (events * (1 - share) * facts) / (tenants - 1) : 0
  const groupBatches = peak / queueGroups / 100
  const shareInGroup = tenantsPerGroup === 1 ? 1 : Math.min(1, share * queueGroups) // the largest tenant's share of its group's traffic
  const otherShareInGroup = tenantsPerGroup > 1 ? (1 - shareInGroup) / (tenantsPerGroup - 1) : 0
  const shardRps = (s, shareOf) => bench.ledger_stages * groupBatches * (1 - Math.pow(1 - shareOf / s, 100))
  const largest = shardPlan(i, util, largestFacts, horizon, shardRps(1, shareInGroup))
  const average = tenants > 1 ? shardPlan(i, util, otherFacts, horizon, shardRps(1, otherShareInGroup)) : largest
  const shardsTotal = largest.shards + (tenants - 1) * average.shards

  // Durable Object requests: one RPC per shard touched per batch of 100, in each ledger stage. A batch mixes the events
  // of its queue group's tenants by their traffic: the largest tenant's on its shards, the others' on theirs.
  const mix = tenantsPerGroup === 1 ? [{ count: 1, share: 1, shards: largest.shards }]
    : [{ count: 1, share: shareInGroup, shards: largest.shards }, { count: tenantsPerGroup - 1, share: otherShareInGroup, shards: average.shards }]
  const touched = shardsTouched(mix)
  const doRequests = options["do-requests-per-event"] !== undefined
    ? { value: options["do-requests-per-event"], from: "flag" }
    : { value: (bench.ledger_stages * touched) / 100, from: `${bench.ledger_stages} ledger stages × ${fmt(touched, 1)} shards touched per batch of 100 (${tenantsPerGroup} tenant${tenantsPerGroup === 1 ? "" : "s"} mixed by traffic in a queue group)` }

  // D1: the read side in the window, by placement unit; time (one query at a time per database).
  const permanentBytes = o("d1-permanent-bytes-per-event")
  const keptMonths = windowDays > 0 ? windowMonths : horizon // no window: nothing pruned
  const d1LiveBytes = events * keptMonths * d1Bytes.value + (windowDays > 0 ? events * horizon * permanentBytes : 0)
  const largestUnits = [
    ...i.units.map((u) => ({ unit: u.unit, kind: u.kind, bytes_per_event: u.bytes_per_event, keys_share: u.keys_share ?? 0, bytes: events * share * keptMonths * u.bytes_per_event })),
    ...(windowDays > 0 && permanentBytes > 0 ? [{ unit: "rows kept beyond the window", kind: "projection", bytes_per_event: permanentBytes, keys_share: 0, bytes: events * share * horizon * permanentBytes }] : [])
  ].map((u) => ({ ...u, ...placedUnit(u, LIMITS.d1_database_bytes.value * util, (events * share) / DAYS_PER_MONTH), window_days_that_fit: u.bytes_per_event > 0 ? (LIMITS.d1_database_bytes.value * util) / ((events * share * u.bytes_per_event) / DAYS_PER_MONTH) : Infinity }))
    .map((u) => ({ ...u, utilisation: u.db_bytes / LIMITS.d1_database_bytes.value }))
  // The ceiling is the fullest single database a unit needs (a projection's part, the home with its keys' life).
  const largestUnit = largestUnits.reduce((a, b) => (b.db_bytes > a.db_bytes ? b : a))
  const largestReadSide = largestUnits.reduce((n, u) => n + u.bytes, 0)
  const d1MsPerEvent = bench.d1_statements * o("d1-ms-per-statement") + (rowsWritten.value + pruneRows.value) * o("d1-ms-per-row-written") + rowsRead.value * o("d1-ms-per-row-read")
  const d1BusyMsPerSecond = peak * d1MsPerEvent
  const readDbsByStorage = Math.ceil(d1LiveBytes / (LIMITS.d1_database_bytes.value * util))
  const readDbsByTime = Math.ceil(d1BusyMsPerSecond / (LIMITS.d1_one_query_at_a_time.value * util))
  const readDbs = Math.max(1, readDbsByStorage, readDbsByTime)

  // Utilisation at one unit: the demand on a single database / queue group / shard / invocation before scaling out.
  const oneMonthLedger = ledgerAt(i, largestFacts, 1).do_bytes
  const atOneUnit = [
    { limit: "d1_database_bytes", resource: "read databases", demand: d1LiveBytes, utilisation: d1LiveBytes / LIMITS.d1_database_bytes.value, units: readDbsByStorage, what: `${fmtBytes(d1LiveBytes)} live in D1 ÷ 10 GB` },
    { limit: "d1_one_query_at_a_time", resource: "read databases", demand: d1BusyMsPerSecond, utilisation: d1BusyMsPerSecond / 1000, units: readDbsByTime, what: `${fmt(d1BusyMsPerSecond, 0)} ms of D1 work per second at peak ÷ 1,000` },
    { limit: "queue_messages_per_second", resource: "queue groups", demand: queueDemand, utilisation: queueDemand / LIMITS.queue_messages_per_second.value, units: Math.ceil(queueDemand / (LIMITS.queue_messages_per_second.value * util)), what: `${fmt(queueDemand, 0)} msg/s on factline-events at peak ÷ 5,000` },
    { limit: "queue_concurrent_consumers", resource: "queue groups", demand: concurrency, utilisation: concurrency / LIMITS.queue_concurrent_consumers.value, units: Math.ceil(concurrency / (LIMITS.queue_concurrent_consumers.value * util)), what: `${fmt(concurrency, 1)} consumer invocations at once ÷ 250` },
    { limit: "do_requests_per_second", resource: "shards (largest tenant)", demand: shardRps(1, shareInGroup), utilisation: shardRps(1, shareInGroup) / LIMITS.do_requests_per_second.value, units: Math.ceil(shardRps(1, shareInGroup) / (LIMITS.do_requests_per_second.value * util)), what: `${fmt(shardRps(1, shareInGroup), 0)} requests/s to one shard of the largest tenant ÷ 1,000` },
    // Storage that accumulates (the ledger) is compared after one month, as the D1 window is after its days.
    { limit: "do_object_bytes", resource: "shards (largest tenant)", demand: oneMonthLedger, utilisation: oneMonthLedger / LIMITS.do_object_bytes.value, units: largest.need, what: `${fmtBytes(oneMonthLedger)} of ledger in the largest tenant's first month ÷ 10 GB (units: month ${horizon})` },
    { limit: "worker_cpu_ms", resource: "CPU per invocation", demand: 100 * cpuMs.value, utilisation: (100 * cpuMs.value) / LIMITS.worker_cpu_ms.value, units: 1, what: `${fmt(100 * cpuMs.value, 0)} ms of CPU for a batch of 100 ÷ 30 s` }
  ].map((r) => ({ ...r, label: LIMITS[r.limit].label }))
  const binding = atOneUnit.reduce((a, b) => (b.utilisation > a.utilisation ? b : a))

  // Ceilings that do not scale out: the deployment at its unit counts.
  const queuesPerGroup = 8 // events, projections, fact-processing, webhooks and their dead-letter queues
  const ceilings = [
    { limit: "d1_account_bytes", demand: d1LiveBytes, unit: "bytes", utilisation: d1LiveBytes / LIMITS.d1_account_bytes.value },
    { limit: "d1_databases_per_account", demand: readDbs + 1, unit: "count", utilisation: (readDbs + 1) / LIMITS.d1_databases_per_account.value },
    { limit: "d1_bindings_per_worker", demand: readDbs + 1, unit: "count", utilisation: (readDbs + 1) / LIMITS.d1_bindings_per_worker.value },
    { limit: "queues_per_account", demand: queueGroups * queuesPerGroup + 2, unit: "count", utilisation: (queueGroups * queuesPerGroup + 2) / LIMITS.queues_per_account.value },
    { limit: "largest_read_unit_in_one_database", label: `largest tenant's ${largestUnit.unit.split(" (")[0]}${largestUnit.parts > 1 ? " (one part)" : ""} in one database`, demand: largestUnit.db_bytes, unit: "bytes", utilisation: largestUnit.db_bytes / LIMITS.d1_database_bytes.value },
    { limit: "largest_tenant_shards", label: "largest tenant's ledger shards", demand: largest.need, unit: "count", utilisation: largest.need / FACTLINE.max_shards_per_tenant.value },
    { limit: "largest_tenant_shard_bytes", label: "one shard of the largest tenant", demand: largest.per_shard_bytes, unit: "bytes", utilisation: largest.per_shard_bytes / LIMITS.do_object_bytes.value }
  ].map((r) => ({ ...r, label: r.label ?? LIMITS[r.limit].label, exceeded: r.utilisation > 1 }))
  return { perSecond, peak, util, share, horizon, queueGroups, tenantsPerGroup, largestFacts, otherFacts, largest, average, shardsTotal, doRequests, touched, permanentBytes, d1LiveBytes, largestUnits, largestUnit, largestReadSide, d1MsPerEvent, readDbsByStorage, readDbsByTime, readDbs, largestEventsPerSecond: peak * share, atOneUnit, binding, ceilings }
}

/** Storage, usage and the monthly bill by product and line in month `horizon`, at inputs `i` and scale `s`. */
const costOf = (bench, i, s) => {
  const { o, events, tenants, facts, rowsWritten, d1Bytes, rowsRead, queueOps, doRowsWritten, windowDays, windowMonths, copied, pruneRows, cpuMs } = i
  const { doRequests, horizon, d1LiveBytes, shardsTotal, permanentBytes } = s
  const factsPerMonth = events * facts
  const ledger = ledgerAt(i, factsPerMonth, horizon)
  const untiered = ledgerAt({ ...i, hotWindowMonths: Infinity }, factsPerMonth, horizon)
  // The R2 archive of the D1 facts copy (FACTLINE_FACTS_COPY), facts older than the D1 window.
  const archiveBytesPerEvent = (copied.value * facts * o("archived-bytes-per-fact")) / o("compression")
  const archiveBytes = windowDays > 0 ? events * Math.max(0, horizon - windowMonths) * archiveBytesPerEvent : 0
  // Tiering: every fact leaving the hot window is read, written to a segment, read back, verified and deleted; one
  // tiering pass per shard and day: one request to the shard, one segment put and one read back.
  const tieredFacts = i.tiered && horizon > i.hotWindowMonths ? factsPerMonth : 0
  const tieringPasses = i.tiered && horizon > i.hotWindowMonths ? shardsTotal * DAYS_PER_MONTH : 0
  const archivePuts = windowDays > 0 && copied.value > 0 ? tenants * DAYS_PER_MONTH : 0 // one Parquet object per tenant and day
  const usage = {
    workers_requests: events * bench.worker_requests,
    workers_cpu_ms: events * cpuMs.value,
    workers_logs: events * (i.logLines.value + bench.worker_requests),
    queues_operations: events * queueOps.value,
    do_requests: events * doRequests.value + tieringPasses,
    do_duration_gb_s: events * doRequests.value * (o("do-ms-per-request") / 1000) * 0.128,
    do_rows_written: events * doRowsWritten.value,
    do_rows_written_tiering: tieredFacts * i.tieringRows.value,
    do_rows_read: factsPerMonth + tieredFacts, // the appends' idempotency checks; tiering reads each fact once
    do_storage_gb_month: ledger.do_bytes / GB,
    d1_rows_read: events * (rowsRead.value + (windowDays > 0 ? copied.value * facts : 0)), // + the archive job reading the expiring copy
    d1_rows_written: events * (rowsWritten.value + pruneRows.value),
    d1_storage_gb_month: d1LiveBytes / GB,
    r2_storage_gb_month: (ledger.r2_bytes + archiveBytes) / GB,
    r2_class_a: tieringPasses + archivePuts,
    r2_class_b: tieringPasses
  }
  const lines = (allowances) => {
    const bill = allowances ? billable : gross
    const store = (gb, price) => storageCost(gb, price, allowances)
    const doRows = split({ pipeline: usage.do_rows_written, tiering: usage.do_rows_written_tiering }, PRICES.do_rows_written, bill)
    const doStore = split({ hot: ledger.do_hot_bytes, cold: ledger.do_cold_bytes }, PRICES.do_storage_gb_month, (bytes, price) => store(bytes / GB, price))
    const r2Store = split({ ledger: ledger.r2_bytes, archive: archiveBytes }, PRICES.r2_storage_gb_month, (bytes, price) => store(bytes / GB, price))
    return {
      workers_base: allowances ? PRICES.workers_base.value : 0,
      workers_requests: bill(usage.workers_requests, PRICES.workers_requests),
      workers_cpu: bill(usage.workers_cpu_ms, PRICES.workers_cpu_ms),
      workers_logs: bill(usage.workers_logs, PRICES.workers_logs),
      queues_operations: bill(usage.queues_operations, PRICES.queues_operations),
      do_requests: bill(usage.do_requests, PRICES.do_requests),
      do_duration: bill(usage.do_duration_gb_s, PRICES.do_duration_gb_s),
      do_rows_written: doRows.pipeline,
      do_rows_written_tiering: doRows.tiering,
      do_rows_read: bill(usage.do_rows_read, PRICES.do_rows_read),
      do_storage_hot: doStore.hot,
      do_storage_cold_index: doStore.cold,
      d1_rows_read: bill(usage.d1_rows_read, PRICES.d1_rows_read),
      d1_rows_written: bill(usage.d1_rows_written, PRICES.d1_rows_written),
      d1_storage: store(d1LiveBytes / GB, PRICES.d1_storage_gb_month),
      r2_storage_ledger: r2Store.ledger,
      r2_storage_archive: r2Store.archive,
      r2_class_a: bill(usage.r2_class_a, PRICES.r2_class_a),
      r2_class_b: bill(usage.r2_class_b, PRICES.r2_class_b)
    }
  }
  const byProduct = (l) => {
    const sum = (prefix) => Object.entries(l).filter(([k]) => k.startsWith(prefix)).reduce((n, [, v]) => n + v, 0)
    const c = { workers: sum("workers_"), queues: sum("queues_"), durable_objects: sum("do_"), d1: sum("d1_"), r2: sum("r2_") }
    return { ...c, total: Object.values(c).reduce((a, b) => a + b, 0) }
  }
  const detail = lines(true)
  // The ledger's storage: where the facts live, the shard's SQLite (hot rows, cold id index) and R2 (segments).
  const ledgerStorage = detail.do_storage_hot + detail.do_storage_cold_index + detail.r2_storage_ledger
  const ledgerStorageUntiered = storageCost(untiered.do_bytes / GB, PRICES.do_storage_gb_month)
  // What the bench's own cost model counts (pipeline operations after allowances), to compare with its monthly_total_usd.
  const benchComparable =
    PRICES.workers_base.value + billable(usage.workers_requests, PRICES.workers_requests) + billable(usage.queues_operations, PRICES.queues_operations) +
    billable(events * doRequests.value, PRICES.do_requests) + billable(usage.do_rows_written, PRICES.do_rows_written) +
    billable(events * rowsRead.value, PRICES.d1_rows_read) + billable(events * rowsWritten.value, PRICES.d1_rows_written)
  const storage = {
    d1_live_gb: d1LiveBytes / GB,
    d1_growth_gb_per_month: windowDays > 0 ? (events * permanentBytes) / GB : (events * d1Bytes.value) / GB,
    ledger_growth_gb_per_month: (factsPerMonth * i.hotBytes.value) / GB,
    ledger_do_hot_gb: ledger.do_hot_bytes / GB,
    ledger_do_cold_index_gb: ledger.do_cold_bytes / GB,
    ledger_r2_gb: ledger.r2_bytes / GB,
    ledger_do_gb_untiered: untiered.do_bytes / GB,
    archive_growth_gb_per_month: windowDays > 0 ? (events * archiveBytesPerEvent) / GB : 0,
    archive_gb_at_horizon: archiveBytes / GB
  }
  return { storage, usage, detail, gross: lines(false), byProduct, ledgerStorage, ledgerStorageUntiered, benchComparable }
}

/**
 * The capacity of a deployment at `options` (flag names as keys), from the bench's per-event figures `bench`.
 * Returns plain data: inputs (with where each came from), per-limit utilisation, units, storage, every line of the bill.
 */
export const model = (bench, options = {}) => {
  const i = inputsOf(bench, options)
  const s = scaleOf(bench, options, i)
  const c = costOf(bench, i, s)
  const { o } = i
  const assumed = [
    `Durable Object throughput: Cloudflare publishes a soft limit of 1,000 requests/s per object, lower for heavy requests; planned at ${pct(s.util)}`,
    `D1 time per event: ${fmt(s.d1MsPerEvent, 3)} ms (not published: assumed ${o("d1-ms-per-statement")} ms a statement, ${o("d1-ms-per-row-written")} ms a row written, ${o("d1-ms-per-row-read")} ms a row read)`,
    i.tiered
      ? `ledger: hot window ${fmt(i.hotWindowDays, 1)} days; ${fmt(i.hotBytes.value, 0)} B per hot fact (${i.hotBytes.from}), ${fmt(i.coldBytes.value, 0)} B per cold fact in the shard (${i.coldBytes.from}), ${fmt(i.r2ColdBytes.value, 0)} B per cold fact in R2 (${i.r2ColdBytes.from}), ${fmt(i.tieringRows.value, 1)} shard rows written to tier a fact (${i.tieringRows.from})`
      : `ledger: untiered, ${fmt(i.hotBytes.value, 0)} B per fact in the shard (${i.hotBytes.from})`,
    `Durable Object active time ${o("do-ms-per-request")} ms per request (not measured)`,
    `Worker CPU: ${fmt(i.cpuMs.value, 3)} ms per event (${i.cpuMs.from})`,
    `console lines: ${fmt(i.logLines.value)} per event, each a Workers Logs event, + one per invocation (${i.logLines.from})`,
    `largest tenant: ${pct(s.share)} of the volume; traffic spread evenly over the rest; peak ${o("peak-factor")}× the monthly average`,
    `read side: every unit keeps ${i.windowDays > 0 ? `${fmt(i.windowDays, 1)} days` : "everything"} (accepted keys ${FACTLINE.accepted_keys_days.value} days; projection rows an app keeps longer: --d1-permanent-bytes-per-event); each projection placed on its own, the rest in the tenant's home database; the largest tenant's projection too large for one database split into the fewest parts that fit (2, 4, 8 or 16), its home's keys kept the most days that fit (FACTLINE_KEY_RETENTION_DAYS for that tenant) when 30 do not`,
    `retention deletes: ${fmt(i.pruneRows.value, 2)} D1 rows written per event (${i.pruneRows.from}; the bench does not count them)`,
    `archive of the D1 facts copy: ${fmt(i.copied.value * 100, 0)} % of facts copied (${i.copied.from})`,
    "not modelled: analysts' and readers' reads of R2 segments and D1, the dashboard, webhook deliveries, retries, the batch queue, Time Travel"
  ]
  if (!bench.d1_bytes_source.startsWith("bench") && i.d1Bytes.from === bench.d1_bytes_source) assumed.push(`D1 bytes per event: ${fmt(i.d1Bytes.value, 0)} B, ${bench.d1_bytes_source}`)

  return {
    inputs: {
      events_per_month: i.events, tenants: i.tenants, largest_tenant_share: s.share, peak_factor: o("peak-factor"), utilisation: s.util,
      window_days: i.windowDays, horizon_months: s.horizon,
      bench: { file: bench.file, date: bench.date, n: bench.n, monthly_usd_at_10m: bench.bench_monthly_usd_at_10m },
      ledger: {
        tiered: i.tiered, hot_window_days: i.tiered ? i.hotWindowDays : null,
        do_bytes_per_hot_fact: i.hotBytes, do_bytes_per_cold_fact: i.coldBytes, r2_bytes_per_cold_fact: i.r2ColdBytes, tiering_rows_written_per_fact: i.tieringRows,
        shards_per_tenant_at_first_use: i.shards
      },
      read_side_units: i.units.map((u) => ({ unit: u.unit, kind: u.kind, bytes_per_event: u.bytes_per_event })),
      per_event: {
        facts: { value: i.facts, from: options["facts-per-event"] !== undefined ? "flag" : "bench" },
        d1_rows_written: i.rowsWritten, d1_prune_rows_written: i.pruneRows, d1_rows_read: i.rowsRead, d1_bytes: i.d1Bytes, facts_copied_share: i.copied,
        d1_statements: { value: bench.d1_statements, from: "bench" },
        queue_operations: i.queueOps, do_requests: s.doRequests, do_rows_written: i.doRowsWritten, cpu_ms: i.cpuMs, log_lines: i.logLines,
        worker_requests: { value: bench.worker_requests, from: "bench's cost model" }
      }
    },
    rates: { events_per_second: s.perSecond, peak_events_per_second: s.peak, largest_tenant_peak_events_per_second: s.largestEventsPerSecond },
    binding: { limit: s.binding.limit, label: s.binding.label, utilisation: s.binding.utilisation, what: s.binding.what },
    at_one_unit: s.atOneUnit,
    ceilings: s.ceilings,
    exceeded: s.ceilings.filter((x) => x.exceeded).map((x) => x.label),
    deployment: {
      read_databases: s.readDbs, read_databases_by_storage: s.readDbsByStorage, read_databases_by_time: s.readDbsByTime,
      tenants_per_read_database: Math.ceil(i.tenants / s.readDbs),
      queue_groups: s.queueGroups, tenants_per_queue_group: s.tenantsPerGroup,
      shards_touched_per_batch: s.touched,
      ledger_shards: { largest_tenant: s.largest, average_tenant: s.average, total: s.shardsTotal },
      largest_tenant_read_side: { total_gb: s.largestReadSide / GB, units: s.largestUnits.map((u) => ({ ...u, gb: u.bytes / GB, db_gb: u.db_bytes / GB })), largest: { unit: s.largestUnit.unit, gb: s.largestUnit.bytes / GB, db_gb: s.largestUnit.db_bytes / GB, parts: s.largestUnit.parts, window_days_that_fit: s.largestUnit.window_days_that_fit } }
    },
    storage: c.storage,
    usage: c.usage,
    monthly_usd: c.byProduct(c.detail),
    monthly_usd_lines: c.detail,
    monthly_usd_before_allowances: c.byProduct(c.gross),
    ledger_storage_usd: { tiered: c.ledgerStorage, untiered: c.ledgerStorageUntiered, do_hot: c.detail.do_storage_hot, do_cold_index: c.detail.do_storage_cold_index, r2_segments: c.detail.r2_storage_ledger },
    monthly_usd_as_the_bench_counts: c.benchComparable,
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
const benchName = (m) => `${relative(root, m.inputs.bench.file) || m.inputs.bench.file} (full run of ${m.inputs.bench.date}, N = ${fmt(m.inputs.bench.n, 0)})`
const ledgerLine = (m) => {
  const l = m.inputs.ledger
  return l.tiered ? `ledger tiered: hot window ${fmt(l.hot_window_days, 1)} days, ${fmt(l.do_bytes_per_hot_fact.value, 0)} B a hot fact, ${fmt(l.do_bytes_per_cold_fact.value, 0)} B a cold fact in the shard, ${fmt(l.r2_bytes_per_cold_fact.value, 0)} B in R2` : `ledger untiered: ${fmt(l.do_bytes_per_hot_fact.value, 0)} B a fact, all in the shard`
}
const shardsCell = (p) => (p.reshard_to === null ? String(p.shards) : `${p.shards} (reshard ${p.passes_line_in_month === null ? "" : `by month ${fmt(p.passes_line_in_month, 1)}`})`)
const ceilingCell = (c) => (c.unit === "bytes" ? fmtBytes(c.demand) : fmt(c.demand, 0))

/** The names of the bill's lines, in the order they print. */
export const BILL_LINES = {
  workers_base: "Workers base", workers_requests: "Workers requests", workers_cpu: "Workers CPU", workers_logs: "Workers Logs",
  queues_operations: "Queues operations",
  do_requests: "Durable Objects requests", do_duration: "Durable Objects duration", do_rows_written: "Durable Objects rows written (pipeline)",
  do_rows_written_tiering: "Durable Objects rows written (tiering)", do_rows_read: "Durable Objects rows read",
  do_storage_hot: "Durable Objects storage: hot facts", do_storage_cold_index: "Durable Objects storage: cold manifest",
  d1_rows_read: "D1 rows read", d1_rows_written: "D1 rows written (pipeline + retention)", d1_storage: "D1 storage",
  r2_storage_ledger: "R2 storage: ledger segments", r2_storage_archive: "R2 storage: archive of the D1 copy", r2_class_a: "R2 Class A", r2_class_b: "R2 Class B"
}
const billUsage = (m, line) => {
  const u = m.usage
  const n = (x, unit) => `${fmt(x / 1e6, x >= 1e8 ? 0 : 1)} M ${unit}`
  return {
    workers_base: "—", workers_requests: n(u.workers_requests, "requests"), workers_cpu: n(u.workers_cpu_ms, "CPU ms"), workers_logs: n(u.workers_logs, "log events"), queues_operations: n(u.queues_operations, "operations"),
    do_requests: n(u.do_requests, "requests"), do_duration: `${fmt(u.do_duration_gb_s, 0)} GB-s`, do_rows_written: n(u.do_rows_written, "rows"),
    do_rows_written_tiering: n(u.do_rows_written_tiering, "rows"), do_rows_read: n(u.do_rows_read, "rows"),
    do_storage_hot: `${fmt(m.storage.ledger_do_hot_gb, 0)} GB`, do_storage_cold_index: `${fmt(m.storage.ledger_do_cold_index_gb, 0)} GB`,
    d1_rows_read: n(u.d1_rows_read, "rows"), d1_rows_written: n(u.d1_rows_written, "rows"), d1_storage: `${fmt(u.d1_storage_gb_month, 0)} GB`,
    r2_storage_ledger: `${fmt(m.storage.ledger_r2_gb, 0)} GB`, r2_storage_archive: `${fmt(m.storage.archive_gb_at_horizon, 0)} GB`,
    r2_class_a: n(u.r2_class_a, "operations"), r2_class_b: n(u.r2_class_b, "operations")
  }[line]
}

export const render = (m) => {
  const out = []
  const d = m.deployment
  const l = d.ledger_shards
  out.push(`factline capacity — ${volume(m.inputs.events_per_month)} events/month, ${fmt(m.inputs.tenants, 0)} tenants`)
  out.push(`bench: ${benchName(m)}; read side kept ${m.inputs.window_days} days; stores sized in month ${m.inputs.horizon_months}; every unit planned to ${pct(m.inputs.utilisation)} of its limit`)
  out.push(ledgerLine(m))
  out.push(`rate: ${fmt(m.rates.events_per_second, 1)} events/s on average, ${fmt(m.rates.peak_events_per_second, 0)} at peak (×${m.inputs.peak_factor}); largest tenant ${fmt(m.rates.largest_tenant_peak_events_per_second, 0)} at peak`)
  out.push("")
  out.push(`binds first: ${m.binding.label} — ${pct(m.binding.utilisation)} of one unit (${m.binding.what})`)
  out.push("")
  const w = [30, 12, 8, 64]
  out.push(pad(["limit (one unit)", "utilisation", "units", "demand"], w))
  for (const r of [...m.at_one_unit].sort((a, b) => b.utilisation - a.utilisation)) out.push(pad([r.label, pct(r.utilisation), fmt(r.units, 0), r.what], w))
  out.push("")
  out.push(`deployment: ${fmt(d.read_databases, 0)} read databases (storage ${d.read_databases_by_storage}, query time ${d.read_databases_by_time}) + 1 platform database; ${d.queue_groups} queue group${d.queue_groups === 1 ? "" : "s"} (~${d.tenants_per_queue_group} tenants each); ${fmt(d.shards_touched_per_batch, 1)} shards touched per batch of 100 → ${fmt(m.inputs.per_event.do_requests.value, 2)} Durable Object requests per event`)
  const plan = (name, p) => p.reshard_to === null
    ? `${name}: ${p.shards} shards (its ${fmt(p.per_shard_bytes / GB, 1)} GB a shard in month ${m.inputs.horizon_months} under the ${fmt(LIMITS.do_object_bytes.value * m.inputs.utilisation / GB, 0)} GB planning line)`
    : `${name}: reshard ${m.inputs.ledger.shards_per_tenant_at_first_use} → ${p.reshard_to} by month ${fmt(p.passes_line_in_month, 1)} (when its ${m.inputs.ledger.shards_per_tenant_at_first_use} shards pass ${fmt(LIMITS.do_object_bytes.value * m.inputs.utilisation / GB, 0)} GB each; needs ${p.need} by month ${m.inputs.horizon_months})`
  out.push(`ledger shards: ${plan("largest tenant", l.largest_tenant)}; ${plan("an average tenant", l.average_tenant)}; ${fmt(l.total, 0)} shards in all`)
  out.push(`largest tenant's read side: ${fmt(d.largest_tenant_read_side.total_gb, 1)} GB in ${d.largest_tenant_read_side.units.length} placement units — ${d.largest_tenant_read_side.units.map((u) => `${u.unit.split(" (")[0]} ${placedText(u)}${u.utilisation > 1 ? " ✗" : ""}`).join(", ")}`)
  out.push("")
  const wc = [44, 12, 12]
  out.push(pad(["account ceiling", "demand", "utilisation"], wc))
  for (const c of m.ceilings) out.push(pad([c.label, ceilingCell(c), pct(c.utilisation) + (c.exceeded ? " ✗" : "")], wc))
  out.push("")
  const s = m.storage
  out.push(`storage: D1 ${fmt(s.d1_live_gb, 1)} GB live (${m.inputs.window_days > 0 ? `steady once the ${m.inputs.window_days}-day window is full; grows ${fmt(s.d1_growth_gb_per_month, 1)} GB/month after` : `nothing pruned: grows ${fmt(s.d1_growth_gb_per_month, 1)} GB/month`})`)
  out.push(`         ledger in month ${m.inputs.horizon_months}: ${fmt(s.ledger_do_hot_gb, 0)} GB of hot facts + ${fmt(s.ledger_do_cold_index_gb, 0)} GB of cold manifest (packed fact ids) in Durable Objects, ${fmt(s.ledger_r2_gb, 0)} GB of segments in R2 (untiered: ${fmt(s.ledger_do_gb_untiered, 0)} GB in Durable Objects)`)
  out.push("")
  const c = m.monthly_usd
  const ls = m.ledger_storage_usd
  out.push(`monthly cost (month ${m.inputs.horizon_months}, after the Workers Paid allowances): ${usd(c.total)}`)
  out.push(`  Workers ${usd(c.workers)}, Queues ${usd(c.queues)}, Durable Objects ${usd(c.durable_objects)}, D1 ${usd(c.d1)}, R2 ${usd(c.r2)}`)
  out.push(`  ledger storage in month ${m.inputs.horizon_months}: ${usd(ls.tiered)} (hot facts ${usd(ls.do_hot)}, cold manifest ${usd(ls.do_cold_index)}, R2 segments ${usd(ls.r2_segments)}); untiered ${usd(ls.untiered)}`)
  const wl = [44, 22, 12]
  out.push("")
  out.push(pad(["line of the bill", "usage", "monthly"], wl))
  for (const [line, label] of Object.entries(BILL_LINES)) out.push(pad([label, billUsage(m, line), usd(m.monthly_usd_lines[line])], wl))
  out.push(pad(["total", "", usd(c.total)], wl))
  out.push(`  of which the bench's cost model counts ${usd(m.monthly_usd_as_the_bench_counts)} (pipeline operations only; the bench printed ${usd(m.inputs.bench.monthly_usd_at_10m)} at 10 M, one tenant)`)
  out.push("")
  out.push("assumed (not published or not measured):")
  for (const a of m.assumed) out.push(`  - ${a}`)
  return out.join("\n")
}

export const VOLUMES = [1e7, 1e8, 1e9]

/** The comparison across volumes, one column a volume: [label, cell] rows, for the text table and the page's. */
const volumeRows = [
  ["events/s (average / peak)", (m) => `${fmt(m.rates.events_per_second, 0)} / ${fmt(m.rates.peak_events_per_second, 0)}`],
  ["binds first (one unit)", (m) => `${m.binding.label} ${pct(m.binding.utilisation)}`],
  ["read databases (storage / query time)", (m) => `${m.deployment.read_databases} (${m.deployment.read_databases_by_storage} / ${m.deployment.read_databases_by_time})`],
  ["queue groups", (m) => String(m.deployment.queue_groups)],
  ["Durable Object requests per event", (m) => fmt(m.inputs.per_event.do_requests.value, 2)],
  ["ledger shards: largest tenant", (m) => shardsCell(m.deployment.ledger_shards.largest_tenant)],
  ["ledger shards: average tenant", (m) => shardsCell(m.deployment.ledger_shards.average_tenant)],
  ["D1 live (window)", (m) => `${fmt(m.storage.d1_live_gb, 1)} GB`],
  ["largest tenant's read side / fullest database", (m) => { const r = m.deployment.largest_tenant_read_side; return `${fmt(r.total_gb, 1)} / ${fmt(r.largest.db_gb, 1)} GB${r.largest.db_gb * GB > LIMITS.d1_database_bytes.value ? " ✗" : ""}` }],
  ["ledger, month 12: DO hot + index / R2", (m) => `${fmt(m.storage.ledger_do_hot_gb + m.storage.ledger_do_cold_index_gb, 0)} / ${fmt(m.storage.ledger_r2_gb, 0)} GB`],
  ["ceilings exceeded", (m) => (m.exceeded.length === 0 ? "none" : `✗ ${m.exceeded.join("; ")}`)],
  ["Workers", (m) => usd(m.monthly_usd.workers)],
  ["Queues", (m) => usd(m.monthly_usd.queues)],
  ["Durable Objects", (m) => usd(m.monthly_usd.durable_objects)],
  ["D1", (m) => usd(m.monthly_usd.d1)],
  ["R2", (m) => usd(m.monthly_usd.r2)],
  ["monthly total", (m) => usd(m.monthly_usd.total)],
  ["… of which ledger storage (tiered)", (m) => usd(m.ledger_storage_usd.tiered)],
  ["… ledger storage untiered", (m) => usd(m.ledger_storage_usd.untiered)],
  ["… tiering's rows written", (m) => usd(m.monthly_usd_lines.do_rows_written_tiering)],
  ["… as the bench counts (pipeline)", (m) => usd(m.monthly_usd_as_the_bench_counts)]
]

export const renderTable = (models) => {
  const w = [42, ...models.map(() => 24)]
  const out = [pad(["", ...models.map((m) => `${volume(m.inputs.events_per_month)} events/month`)], w)]
  for (const [label, cell] of volumeRows) out.push(pad([label, ...models.map(cell)], w))
  return out.join("\n")
}

// ---- the page's tables (docs/capacity.md) ----------------------------------------------------------------------
const row = (cells) => `| ${cells.join(" | ")} |`
const table = (head, rows) => [row(head), row(head.map(() => "---")), ...rows.map(row)].join("\n")
const LEDGER_MONTHS = [1, 6, 12, 24, 36, 60]

/**
 * docs/capacity.md's tables, by section name, from the bench figures `bench` at the defaults (500 tenants): what
 * `--markdown` prints and `--write-docs` writes between the page's `<!-- capacity:NAME -->` … `<!-- /capacity:NAME -->`.
 */
export const markdownSections = (bench) => {
  const models = VOLUMES.map((events) => model(bench, { "events-per-month": events }))
  const big = models.at(-1)
  const p = big.inputs.per_event
  const l = big.inputs.ledger
  const sections = {}
  sections.source = `Printed by \`npm run capacity -- --write-docs\` from \`${relative(root, bench.file)}\` (the full run of ${bench.date}, N = ${fmt(bench.n, 0)}).`
  sections.inputs = table(["per event", "value", "from", "flag"], [
    ["facts", fmt(p.facts.value), p.facts.from, "`--facts-per-event`"],
    ["D1 rows written (pipeline, as the bench counts)", fmt(p.d1_rows_written.value), p.d1_rows_written.from, "`--rows-written-per-event`"],
    ["D1 rows written by retention deletes", fmt(p.d1_prune_rows_written.value), p.d1_prune_rows_written.from, "`--prune-rows-per-event`"],
    ["D1 rows read", fmt(p.d1_rows_read.value), p.d1_rows_read.from, "`--rows-read-per-event`"],
    ["D1 bytes in the window", `${fmt(p.d1_bytes.value, 0)} B`, p.d1_bytes.from, "`--d1-bytes-per-event`"],
    ["queue operations", fmt(p.queue_operations.value), p.queue_operations.from, "`--queue-ops-per-event`"],
    ["Durable Object requests (500 tenants, 1 B events/month)", fmt(p.do_requests.value), p.do_requests.from, "`--do-requests-per-event`"],
    ["Durable Object rows written (pipeline)", fmt(p.do_rows_written.value), p.do_rows_written.from, "—"],
    ["Worker CPU", `${fmt(p.cpu_ms.value, 3)} ms`, p.cpu_ms.from, "`--cpu-ms-per-event`"],
    ["console lines (Workers Logs events; + one per invocation)", fmt(p.log_lines.value), p.log_lines.from, "`--log-lines-per-event`"],
    ["per hot fact in the shard", `${fmt(l.do_bytes_per_hot_fact.value, 0)} B`, l.do_bytes_per_hot_fact.from, "`--do-bytes-per-hot-fact`"],
    ["per cold fact in the shard (cold manifest: packed ids, range rows)", `${fmt(l.do_bytes_per_cold_fact.value, 0)} B`, l.do_bytes_per_cold_fact.from, "`--do-bytes-per-cold-fact`"],
    ["per cold fact in R2 (Parquet)", `${fmt(l.r2_bytes_per_cold_fact.value, 0)} B`, l.r2_bytes_per_cold_fact.from, "`--r2-bytes-per-cold-fact`"],
    ["shard rows written to tier a fact", fmt(l.tiering_rows_written_per_fact.value), l.tiering_rows_written_per_fact.from, "`--tiering-rows-per-fact`"],
    ["hot window", `${fmt(l.hot_window_days, 1)} days`, "the shard's hot window setting's default", "`--hot-window-days`, `--untiered`"],
    ...big.inputs.read_side_units.map((u) => [`D1 bytes: ${u.unit}`, `${fmt(u.bytes_per_event, 0)} B`, u.kind === "home" ? "bench (dbstat): the tables no projection owns" : "bench (dbstat): its tables and indexes", u.kind === "home" ? "—" : "`--projections`"])
  ])
  sections.volumes = table(["", ...models.map((m) => `${volume(m.inputs.events_per_month)} events/month`)], volumeRows.map(([label, cell]) => [label, ...models.map(cell)]))
  sections.bill = table(["line of the bill (1 B events/month, 500 tenants, month 12)", "usage", "monthly"], [
    ...Object.entries(BILL_LINES).map(([line, label]) => [label, billUsage(big, line), usd(big.monthly_usd_lines[line])]),
    ["**total**", "", `**${usd(big.monthly_usd.total)}**`]
  ])
  sections.ledger = table(["month (1 B events/month, 500 tenants)", "hot facts in Durable Objects", "cold manifest", "segments in R2", "ledger storage / month", "untiered", "largest tenant's shards"],
    LEDGER_MONTHS.map((t) => {
      const m = model(bench, { "events-per-month": 1e9, "horizon-months": t })
      const shards = m.deployment.ledger_shards.largest_tenant
      return [String(t), `${fmt(m.storage.ledger_do_hot_gb, 0)} GB`, `${fmt(m.storage.ledger_do_cold_index_gb, 0)} GB`, `${fmt(m.storage.ledger_r2_gb, 0)} GB`, usd(m.ledger_storage_usd.tiered), usd(m.ledger_storage_usd.untiered), `${shards.shards}${shards.need > FACTLINE.max_shards_per_tenant.value ? " ✗" : ""}`]
    }))
  sections["read-side"] = table(["placement unit (largest tenant, 1 B events/month)", "D1 bytes per event", "in the window", "placed as", "fullest database", "utilisation"],
    big.deployment.largest_tenant_read_side.units.map((u) => [u.unit, `${fmt(u.bytes_per_event, 0)} B`, `${fmt(u.gb, 1)} GB`, placedAs(u), `${fmt(u.db_gb, 1)} GB`, `${pct(u.utilisation)}${u.utilisation > 1 ? " ✗" : ""}`]))
  sections.assumed = big.assumed.map((a) => `- ${a}`).join("\n")
  sections.limits = table(["limit", "value", "source"], [
    ...Object.values(LIMITS).map((x) => [x.label, x.text, x.source]),
    ...Object.values(FACTLINE).map((x) => [`factline: ${x.label}`, x.text, `\`${x.source}\``])
  ])
  sections.prices = table(["price (Workers Paid)", "included per month, then", "source"], Object.entries(PRICES).map(([name, x]) => [name.replaceAll("_", " "), x.text, x.source]))
  return sections
}

const marker = (name) => [`<!-- capacity:${name} -->`, `<!-- /capacity:${name} -->`]

/** The page's sections as it holds them (name → text between its markers). */
export const docsSections = (text) => {
  const out = {}
  for (const m of text.matchAll(/<!-- capacity:([\w-]+) -->\n([\s\S]*?)\n<!-- \/capacity:\1 -->/g)) out[m[1]] = m[2]
  return out
}

/** The page with every section rewritten from `sections`; throws when the page lacks one's markers. */
export const withSections = (text, sections) => {
  let out = text
  for (const [name, body] of Object.entries(sections)) {
    const [open, close] = marker(name)
    const start = out.indexOf(open)
    const end = out.indexOf(close)
    if (start < 0 || end < start) throw new Error(`${DOCS}: no ${open} … ${close}`)
    out = out.slice(0, start + open.length) + "\n" + body + "\n" + out.slice(end)
  }
  return out
}

export const renderMarkdown = (sections) => Object.entries(sections).map(([name, body]) => { const [open, close] = marker(name); return `${open}\n${body}\n${close}` }).join("\n\n")

/** The command: returns its exit status; `io` takes the output (tests pass their own). */
export const main = (argv, io = { out: (t) => process.stdout.write(t), err: (t) => process.stderr.write(t) }) => {
  const refuse = (message) => {
    io.err(`capacity: ${message}\n\n${usage()}\n`)
    return 2
  }
  let options
  try {
    options = parseFlags(argv)
  } catch (error) {
    if (!(error instanceof UsageError)) throw error
    return refuse(error.message)
  }
  if (options.help) {
    io.out(usage() + "\n")
    return 0
  }
  let bench
  try {
    bench = readBench(options.bench === undefined ? BASELINE : resolve(options.bench))
  } catch (error) {
    if (!(error instanceof UsageError)) throw error
    return refuse(options.bench === undefined ? error.message : `--bench: ${error.message}`)
  }
  if (options["write-docs"] || options.markdown) {
    const sections = markdownSections(bench)
    if (options.markdown) io.out(renderMarkdown(sections) + "\n")
    if (options["write-docs"]) {
      writeFileSync(DOCS, withSections(readFileSync(DOCS, "utf8"), sections))
      io.out(`written: ${relative(root, DOCS)} (${Object.keys(sections).length} sections, from ${relative(root, bench.file)})\n`)
    }
    return 0
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
      `factline capacity at 10 M, 100 M and 1 B events/month — ${fmt(first.inputs.tenants, 0)} tenants`,
      `bench: ${benchName(first)}; read side kept ${first.inputs.window_days} days; costs in month ${first.inputs.horizon_months}; units planned to ${pct(first.inputs.utilisation)}; peak ×${first.inputs.peak_factor}`,
      ledgerLine(first),
      "",
      renderTable(models),
      "",
      `one volume in detail, every line of the bill: npm run capacity -- --events-per-month 1e9 --tenants ${first.inputs.tenants}`,
      "assumed (not published or not measured):",
      ...models.at(-1).assumed.map((a) => `  - ${a}`)
    ].join("\n") + "\n"
  )
  return 0
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) process.exitCode = main(process.argv.slice(2))
