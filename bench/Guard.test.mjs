// node --test bench/Guard.test.mjs: the CPU guard's arithmetic (bench/Guard.mjs), fed figures recorded by the bench.
import assert from "node:assert/strict"
import { test } from "node:test"
import * as Guard from "./Guard.mjs"

// Ratios (a stage's batch ÷ the calibration batch before it) of a baseline run, as bench/baseline.json holds them.
const baseline = { stages: { "http edge": { per_calibration: 0.5 }, events: { per_calibration: 1.4 } }, reference: { "webhooks delivery": { per_calibration: 1.2 } } }

test("the baseline's ratios are read from its stages and reference rows; a baseline without them gives none", () => {
  assert.deepEqual(Guard.baselineRatios(baseline), { "http edge": 0.5, events: 1.4, "webhooks delivery": 1.2 })
  assert.equal(Guard.baselineRatios({ stages: { events: { cpu_ms_per_event: 0.15 } } }), null)
  assert.equal(Guard.baselineRatios(null), null)
})

test("a host 3× slower moves every absolute figure but no ratio: nothing is over", () => {
  // The same code on a busy host: calibration 30 ms instead of 10, every stage's batch 3× too — the ratios unchanged.
  const rows = Guard.judge([{ stage: "http edge", per_calibration: 0.52 }, { stage: "events", per_calibration: 1.35 }], Guard.baselineRatios(baseline), 0.15)
  assert.deepEqual(rows.map((r) => [r.stage, r.change, r.over]), [["http edge", 0.04, false], ["events", -0.036, false]])
})

test("a stage 30 % costlier is over; one within the tolerance is not; a stage the baseline lacks is not judged", () => {
  const rows = Guard.judge([{ stage: "events", per_calibration: 1.82 }, { stage: "http edge", per_calibration: 0.57 }, { stage: "new stage", per_calibration: 9 }], Guard.baselineRatios(baseline), 0.15)
  assert.deepEqual(rows.map((r) => [r.stage, r.change, r.over]), [["events", 0.3, true], ["http edge", 0.14, false], ["new stage", null, false]])
})

test("over in the first look and within in the second: not failed; over in both: failed", () => {
  const ratios = Guard.baselineRatios(baseline)
  const first = Guard.judge([{ stage: "events", per_calibration: 1.75 }, { stage: "http edge", per_calibration: 0.6 }], ratios, 0.15)
  const second = Guard.judge([{ stage: "events", per_calibration: 1.8 }, { stage: "http edge", per_calibration: 0.52 }], ratios, 0.15)
  const { check, failed } = Guard.verdict(first, second)
  assert.deepEqual(failed.map((r) => r.stage), ["events"])
  assert.deepEqual(check.map((r) => [r.stage, r.over, r.second_change]), [["events", true, 0.286], ["http edge", false, 0.04]])
  assert.deepEqual(Guard.verdict(Guard.judge([{ stage: "events", per_calibration: 1.4 }], ratios), null).failed, [])
})

// The afternoon's recorded figures (2026-11-28, docs/performance.md "The CPU guard judges itself"), against the committed
// baseline's median ratios, judged at the default tolerance.
const committed = { "http edge": 0.4925, events: 1.5242, "fact-processing": 1.4286, projections: 0.5303, "webhooks delivery": 1.2333 }
const looks = (first, second) => Guard.verdict(Guard.judge(first, committed), second === null ? null : Guard.judge(second, committed))
const row = (stage, per_calibration) => ({ stage, per_calibration })

test("recorded: unchanged code whose first look found three stages over passes on the second look's 45 rounds", () => {
  const first = [row("http edge", 0.5), row("events", 1.5745), row("fact-processing", 1.6829), row("projections", 0.6129), row("webhooks delivery", 1.5517)]
  const second = [row("fact-processing", 1.5), row("projections", 0.4865), row("webhooks delivery", 1.1613)]
  assert.equal(Guard.defaultTolerance, 0.2)
  assert.deepEqual(looks(first, second).failed, [])
})

test("recorded: the events stage slowed by 30 % (BENCH_SLOW=events:1.3) fails in both looks; the edge beside it, +16 % then +18 %, does not", () => {
  const first = [row("http edge", 0.5714), row("events", 2.2121), row("fact-processing", 1.4828), row("projections", 0.5135), row("webhooks delivery", 1.2571)]
  const second = [row("http edge", 0.58), row("events", 2)]
  const { failed, check } = looks(first, second)
  assert.deepEqual(failed.map((r) => r.stage), ["events"])
  assert.deepEqual(check.filter((r) => r.stage === "events").map((r) => [r.change, r.second_change]), [[0.451, 0.312]])
})
