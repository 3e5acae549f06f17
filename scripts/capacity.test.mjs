// node --test scripts/capacity.test.mjs: the capacity model over the committed bench (bench/baseline.json), its
// command line, and docs/capacity.md's tables (printed by the script: FACTLINE_UPDATE_DOCS=1 rewrites them).
import assert from "node:assert/strict"
import { spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { test } from "node:test"
import { fileURLToPath } from "node:url"
import { BASELINE, DOCS, docsSections, LIMITS, main, markdownSections, model, readBench, render, withSections } from "./capacity.mjs"

const script = join(dirname(fileURLToPath(import.meta.url)), "capacity.mjs")
const bench = readBench()
const run = (...args) => {
  const r = spawnSync(process.execPath, [script, ...args], { encoding: "utf8" })
  return { status: r.status, out: r.stdout, err: r.stderr }
}

/** The command in this process (no Node start-up per case): its status, output and error output. */
const runHere = (...args) => {
  let out = ""
  let err = ""
  const status = main(args, { out: (t) => (out += t), err: (t) => (err += t) })
  return { status, out, err }
}

test("the model reads the committed bench/baseline.json unless --bench names a run's results, and says which", () => {
  assert.equal(bench.file, BASELINE)
  assert.equal(bench.date, JSON.parse(readFileSync(BASELINE, "utf8")).full_run.date)
  const table = runHere()
  assert.equal(table.status, 0, table.err)
  assert.match(table.out, new RegExp(`bench: bench/baseline\\.json \\(full run of ${bench.date.replaceAll(".", "\\.")}`))
  // A run's results file (cost_model at its top level) is read as it is.
  const baseline = JSON.parse(readFileSync(BASELINE, "utf8"))
  const file = join(mkdtempSync(join(tmpdir(), "capacity-")), "results.json")
  const results = { ...baseline.full_run, date: "2030-01-01T00:00:00.000Z", cost_model: { ...baseline.full_run.cost_model, do_bytes_per_fact_hot: 900 } }
  writeFileSync(file, JSON.stringify(results))
  const m = JSON.parse(runHere("--bench", file, "--events-per-month", "1e9", "--json").out)
  assert.equal(m.inputs.bench.date, "2030-01-01T00:00:00.000Z")
  // The bench's measured hot-fact size replaces the estimate.
  assert.deepEqual(m.inputs.ledger.do_bytes_per_hot_fact, { value: 900, from: "bench" })
})

test("cost scales linearly with volume before the allowances (every line but the per-shard tiering passes)", () => {
  const at = (events) => model(bench, { "events-per-month": events, tenants: 500 })
  for (const [a, b] of [[1e8, 1e9], [1e9, 1e10]]) {
    const ratio = at(b).monthly_usd_before_allowances.total / at(a).monthly_usd_before_allowances.total
    assert.ok(Math.abs(ratio / (b / a) - 1) < 0.01, `gross cost ×${b / a} from ${a} to ${b}, got ×${ratio}`)
    const d1 = at(b).monthly_usd_before_allowances.d1 / at(a).monthly_usd_before_allowances.d1
    assert.ok(Math.abs(d1 / (b / a) - 1) < 1e-9, `D1 cost ×${b / a}, got ×${d1}`)
  }
  assert.ok(model(bench, { "events-per-month": 1e9, "facts-per-event": 5 }).monthly_usd.total > at(1e9).monthly_usd.total)
})

test("Workers Logs is a line of the bill: the bench's console lines per event and one log per invocation, past 20 M a month at $0.60/M", () => {
  assert.equal(bench.log_lines_per_event, 0.04) // one line per consumer batch of 100 on each of four consumers (the default)
  const at = (flags) => model(bench, { "events-per-month": 1e9, tenants: 500, ...flags })
  const logEvents = 1e9 * (0.04 + bench.worker_requests)
  assert.ok(Math.abs(at({}).monthly_usd_lines.workers_logs - ((logEvents - 20e6) / 1e6) * 0.6) < 0.01, JSON.stringify(at({}).monthly_usd_lines))
  // FACTLINE_LOG_ATTEMPTS=all writes one more line per event message: ≈ $600 more at 1 B.
  const all = at({ "log-lines-per-event": 1.04 })
  assert.ok(Math.abs(all.monthly_usd_lines.workers_logs - at({}).monthly_usd_lines.workers_logs - 600) < 0.01)
  assert.equal(all.inputs.per_event.log_lines.from, "flag")
})

test("at 1 B events/month and 500 tenants the cold tier cuts the ledger's storage in month 12 at least 5× below $3,844", () => {
  const m = model(bench, { "events-per-month": 1e9, tenants: 500 })
  const untiered = model(bench, { "events-per-month": 1e9, tenants: 500, untiered: true })
  // The figure: every fact in the shard at the 600 B it assumed, $3,844 in month 12.
  assert.equal(Math.round(model(bench, { "events-per-month": 1e9, untiered: true, "do-bytes-per-hot-fact": 600 }).ledger_storage_usd.tiered), 3_844)
  assert.equal(untiered.ledger_storage_usd.tiered, m.ledger_storage_usd.untiered)
  assert.ok(m.ledger_storage_usd.tiered <= 3_844 / 5, `ledger storage $${m.ledger_storage_usd.tiered}`)
  // The line is the shard's hot facts and cold index plus R2's segments, each also a line of the bill.
  const l = m.monthly_usd_lines
  assert.equal(m.ledger_storage_usd.tiered, l.do_storage_hot + l.do_storage_cold_index + l.r2_storage_ledger)
  // A shorter hot window keeps less in the shard; tiering costs rows written, counted on their own line.
  assert.ok(model(bench, { "events-per-month": 1e9, "hot-window-days": 7 }).ledger_storage_usd.tiered < m.ledger_storage_usd.tiered)
  assert.ok(l.do_rows_written_tiering > 0 && untiered.monthly_usd_lines.do_rows_written_tiering === 0)
  // Every line is in --json, and the products add up to the total.
  const json = JSON.parse(runHere("--events-per-month", "1e9", "--tenants", "500", "--json").out)
  for (const line of ["workers_requests", "workers_cpu", "queues_operations", "do_requests", "do_duration", "do_rows_written", "do_rows_written_tiering", "do_storage_hot", "do_storage_cold_index", "d1_rows_read", "d1_rows_written", "d1_storage", "r2_storage_ledger", "r2_class_a", "r2_class_b"]) {
    assert.equal(typeof json.monthly_usd_lines[line], "number", line)
  }
  const sum = Object.values(json.monthly_usd_lines).reduce((a, b) => a + b, 0)
  assert.ok(Math.abs(sum - json.monthly_usd.total) < 1e-6)
  // And the text output shows the ledger's storage on its own line.
  // (untiered at the bench's measured bytes per hot fact: the issue's $3,844 assumed 600 B).
  assert.match(runHere("--events-per-month", "1e9", "--tenants", "500").out, /ledger storage in month 12: \$\d+ \(hot facts .*untiered \$[\d,]+/)
})

test("at 1 B events/month and 500 tenants no ceiling is exceeded: the largest tenant's projection in parts, its keys kept as long as fits", () => {
  const m = model(bench, { "events-per-month": 1e9, tenants: 500 })
  assert.deepEqual(m.exceeded, [])
  assert.doesNotMatch(runHere("--events-per-month", "1e9", "--tenants", "500").out, /✗/)
  // The ceiling is the fullest single database of the largest tenant's units, under 10 GB × the planning utilisation.
  const side = m.deployment.largest_tenant_read_side
  const unit = m.ceilings.find((c) => c.limit === "largest_read_unit_in_one_database")
  assert.equal(unit.demand / 1e9, side.largest.db_gb)
  assert.equal(side.largest.db_gb, Math.max(...side.units.map((u) => u.db_gb)))
  for (const u of side.units) assert.ok(u.db_gb * 1e9 <= 10e9 * m.inputs.utilisation + 1, `${u.unit}: ${u.db_gb} GB`)
  // calls (over 10 GB in the window) in the fewest parts whose share fits; the home's keys kept the most days that fit.
  const calls = side.units.find((u) => u.unit === "projection calls")
  assert.ok(calls.gb > 10 && calls.parts > 1 && calls.gb / (calls.parts / 2) > 10 * m.inputs.utilisation, `calls ${calls.gb} GB in ${calls.parts}`)
  const home = side.units.find((u) => u.kind === "home")
  assert.ok(home.gb > 10 && home.key_retention_days >= 1 && home.key_retention_days < 30, `home ${home.gb} GB, keys ${home.key_retention_days} days`)
  // A ✗ only where even parts cannot fit: one projection of 16 × 10 GB of rows in the window.
  const huge = model(bench, { "events-per-month": 1e9, tenants: 500, projections: { calls: 20_000 } })
  assert.ok(huge.exceeded.some((label) => label.includes("projection calls (one part)")), huge.exceeded.join("; "))
  // A projection split given by flag is what the model places: 500 B an event is 15 GB at 3 % of the volume, 4 parts.
  const split = model(bench, { "events-per-month": 1e9, "largest-tenant-share": 0.03, projections: { calls: 500 } })
  const flagged = split.deployment.largest_tenant_read_side.units.find((u) => u.unit === "projection calls")
  assert.equal(flagged.parts, 4)
  assert.ok(Math.abs(flagged.db_gb - flagged.gb / 4) < 1e-9)
})

test("Durable Object requests per event grow with the tenant mix: 0.32 with one tenant, about 2 with 500", () => {
  const one = model(bench, { "events-per-month": 1e7, tenants: 1 }).inputs.per_event.do_requests.value
  const many = model(bench, { "events-per-month": 1e7, tenants: 500 }).inputs.per_event.do_requests.value
  assert.ok(Math.abs(one - 0.32) < 0.005, `one tenant: ${one}`)
  assert.ok(many > 1.9 && many <= 2, `500 tenants: ${many}`)
  assert.ok(model(bench, { "events-per-month": 1e7, tenants: 10 }).inputs.per_event.do_requests.value < many)
  // More requests cost more; a tenant resharded to more shards touches more of them per batch.
  assert.ok(model(bench, { "events-per-month": 1e9, tenants: 500 }).monthly_usd_lines.do_requests > model(bench, { "events-per-month": 1e9, tenants: 500, "do-requests-per-event": 0.32 }).monthly_usd_lines.do_requests)
  assert.ok(model(bench, { "events-per-month": 1e9, tenants: 1 }).inputs.per_event.do_requests.value > one)
})

test("a tenant whose shards would pass the 10 GB planning line is told to reshard, to a multiple of its count", () => {
  const m = model(bench, { "events-per-month": 1e9, tenants: 500 })
  const largest = m.deployment.ledger_shards.largest_tenant
  assert.ok(largest.need > 16)
  assert.equal(largest.reshard_to, 16 * 2 ** Math.ceil(Math.log2(largest.need / 16)))
  assert.ok(largest.per_shard_bytes <= LIMITS.do_object_bytes.value * m.inputs.utilisation)
  assert.match(render(m), new RegExp(`reshard 16 → ${largest.reshard_to} by month`))
  assert.equal(m.deployment.ledger_shards.average_tenant.reshard_to, null)
  // Untiered, the largest tenant needs far more shards by month 12.
  assert.ok(model(bench, { "events-per-month": 1e9, untiered: true }).deployment.ledger_shards.largest_tenant.need > 4 * largest.need)
})

test("docs/capacity.md's tables are the script's output over bench/baseline.json (FACTLINE_UPDATE_DOCS=1 rewrites them)", () => {
  const sections = markdownSections(bench)
  if (process.env.FACTLINE_UPDATE_DOCS === "1") writeFileSync(DOCS, withSections(readFileSync(DOCS, "utf8"), sections))
  const page = docsSections(readFileSync(DOCS, "utf8"))
  for (const [name, body] of Object.entries(sections)) {
    assert.ok(name in page, `docs/capacity.md has no <!-- capacity:${name} --> section`)
    assert.equal(page[name], body, `docs/capacity.md's ${name} table differs from the script's: npm run capacity -- --write-docs`)
  }
  assert.match(runHere("--markdown").out, /<!-- capacity:volumes -->\n\|\s+\| 10 M events\/month/)
})

test("bad flags exit 2 with a usage message naming the flag", () => {
  const cases = [
    [["--events-per-month", "lots"], "--events-per-month"],
    [["--tenants", "0"], "--tenants"],
    [["--tenants", "2.5"], "--tenants"],
    [["--window-days"], "--window-days"],
    [["--utilisation", "3"], "--utilisation"],
    [["--hot-window-days", "0"], "--hot-window-days"],
    [["--untiered", "--hot-window-days", "7"], "--untiered"],
    [["--projections", "calls"], "--projections"],
    [["--projections", "calls=1,calls=2"], "--projections"],
    [["--write-docs", "--bench", "x.json"], "--write-docs"],
    [["--json=yes"], "--json"],
    [["--no-such-flag", "1"], "--no-such-flag"],
    [["--bench", "/nonexistent/results.json"], "--bench"]
  ]
  const results = cases.map(([args]) => runHere(...args))
  for (const [i, [args, flag]] of cases.entries()) {
    const r = results[i]
    assert.equal(r.status, 2, `${args.join(" ")} → ${r.status}`)
    assert.ok(r.err.includes(flag), `${args.join(" ")}: ${r.err}`)
    assert.match(r.err, /usage: npm run capacity/)
  }
  // And through the process, as npm runs it.
  const real = run("--tenants", "none")
  assert.equal(real.status, 2)
  assert.match(real.err, /--tenants: not a number: none/)
})
