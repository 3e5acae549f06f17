// node --test scripts/capacity.test.mjs: the capacity model on the bench's latest results, and its command line.
import assert from "node:assert/strict"
import { spawnSync } from "node:child_process"
import { dirname, join } from "node:path"
import { test } from "node:test"
import { fileURLToPath } from "node:url"
import { benchFigures, LIMITS, main, model, newestBench } from "./capacity.mjs"

const script = join(dirname(fileURLToPath(import.meta.url)), "capacity.mjs")
const bench = (() => {
  const { data, file } = newestBench()
  return benchFigures(data, file)
})()
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

test("cost scales linearly with volume (before the monthly allowances; after them at large volumes)", () => {
  const at = (events) => model(bench, { "events-per-month": events, tenants: 500 })
  // Before the allowances every line is volume × a per-event price, except the archive's one object per tenant
  // and day (a few dollars): within 0.1 %.
  for (const [a, b] of [[1e7, 1e8], [1e8, 1e9], [1e9, 1e10]]) {
    const ratio = at(b).monthly_usd_before_allowances.total / at(a).monthly_usd_before_allowances.total
    assert.ok(Math.abs(ratio / (b / a) - 1) < 1e-3, `gross cost ×${b / a} from ${a} to ${b}, got ×${ratio}`)
    const d1 = at(b).monthly_usd_before_allowances.d1 / at(a).monthly_usd_before_allowances.d1
    assert.ok(Math.abs(d1 / (b / a) - 1) < 1e-9, `D1 cost ×${b / a}, got ×${d1}`)
  }
  const net = at(1e10).monthly_usd.total / at(1e9).monthly_usd.total
  assert.ok(Math.abs(net / 10 - 1) < 0.01, `net cost ×10 (within 1 %) from 1 B to 10 B, got ×${net}`)
  // More facts per event cost more, all else equal.
  assert.ok(model(bench, { "events-per-month": 1e9, "facts-per-event": 5 }).monthly_usd.total > at(1e9).monthly_usd.total)
})

test("at 1 B events/month the 10 GB database size binds first and sets the read-database count", () => {
  for (const options of [{}, { targets: true }]) {
    const m = model(bench, { "events-per-month": 1e9, tenants: 500, ...options })
    assert.equal(m.binding.limit, "d1_database_bytes")
    const { read_databases, read_databases_by_storage, read_databases_by_time } = m.deployment
    assert.equal(read_databases, read_databases_by_storage)
    assert.ok(read_databases_by_storage > read_databases_by_time)
    assert.equal(read_databases, Math.ceil((m.storage.d1_live_gb * 1e9) / (LIMITS.d1_database_bytes.value * m.inputs.utilisation)))
  }
  // The targets (≤ 800 B a event) need fewer databases than the ~1.7 KB the issue measured.
  const today = model(bench, { "events-per-month": 1e9, "d1-bytes-per-event": 1_700 }).deployment.read_databases
  const target = model(bench, { "events-per-month": 1e9, targets: true }).deployment.read_databases
  assert.ok(target < today, `${target} < ${today}`)
})

test("queue groups are at least one, and grow with the volume", () => {
  assert.ok(model(bench, { "events-per-month": 1 }).deployment.queue_groups >= 1)
  assert.ok(model(bench, { "events-per-month": 1e7 }).deployment.queue_groups >= 1)
  const huge = model(bench, { "events-per-month": 1e11 })
  assert.equal(huge.deployment.queue_groups, Math.ceil(huge.rates.peak_events_per_second / (5_000 * huge.inputs.utilisation)))
})

test("the command prints the table at the three volumes, and one volume as JSON", () => {
  const table = run()
  assert.equal(table.status, 0, table.err)
  for (const column of ["10 M events/month", "100 M events/month", "1 B events/month", "binds first", "monthly total"]) assert.match(table.out, new RegExp(column))
  const json = runHere("--events-per-month", "1e9", "--tenants", "500", "--json")
  assert.equal(json.status, 0, json.err)
  const m = JSON.parse(json.out)
  assert.equal(m.inputs.events_per_month, 1e9)
  assert.equal(m.binding.limit, "d1_database_bytes")
})

test("bad flags exit 2 with a usage message naming the flag", () => {
  const cases = [
    [["--events-per-month", "lots"], "--events-per-month"],
    [["--tenants", "0"], "--tenants"],
    [["--tenants", "2.5"], "--tenants"],
    [["--window-days"], "--window-days"],
    [["--utilisation", "3"], "--utilisation"],
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
