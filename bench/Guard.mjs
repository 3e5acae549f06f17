// The per-stage CPU guard's arithmetic (bench/run.mjs's baseline check), kept apart so that a test can feed it recorded
// figures (Guard.test.mjs). It judges each stage by its CPU relative to the calibration timed in the same run — the mean
// of the faster half of the stage's batches divided by the same of every calibration batch of the run, one timed right
// before each batch of every stage (bench/worker.ts's `per_calibration`; until stop 40 the median of the paired ratios,
// twice as noisy) — against the baseline's same ratio. A slower or busier host stretches both sides of the ratio;
// a costlier stage only its own. Absolute CPU per event is not judged (it moved 2–3× between sittings of the same code).
//
// A stage found over the tolerance is measured a second time (run.mjs asks for those stages again, with three times the
// rounds) and fails only when it is over in both looks: a spell of other work that lands on one stage in one pass does
// not fail the run.

/** The tolerance: a stage fails when its ratio grows more than this over the baseline's (argued in docs/performance.md). */
export const defaultTolerance = 0.2

/**
 * One look: for each stage with a ratio, its change against the baseline's ratio and whether it is over.
 * `stages`: [{ stage, per_calibration }]; `baseline`: { [stage]: ratio }. A stage the baseline lacks is not judged.
 */
export const judge = (stages, baseline, tolerance = defaultTolerance) =>
  stages.map(({ stage, per_calibration }) => {
    const before = baseline?.[stage] ?? null
    const change = before === null || before === 0 || per_calibration === undefined || per_calibration === null ? null : per_calibration / before - 1
    return { stage, baseline_per_calibration: before, per_calibration: per_calibration ?? null, change: change === null ? null : Math.round(change * 1000) / 1000, over: change !== null && change > tolerance }
  })

/**
 * The verdict over two looks: `first` is judge()'s answer for every stage; `second` for the stages over in the first
 * (or null when none was). A stage fails when both looks found it over. Returns { check, failed }: `check` is the first
 * look's rows with the second look's figures beside them (`second_change`) and the final `over`.
 */
export const verdict = (first, second) => {
  const check = first.map((row) => {
    if (!row.over) return row
    const again = second?.find((r) => r.stage === row.stage)
    return { ...row, second_per_calibration: again?.per_calibration ?? null, second_change: again?.change ?? null, over: again?.over ?? true }
  })
  return { check, failed: check.filter((row) => row.over) }
}

/** The baseline's ratios from bench/baseline.json (`per_calibration` per stage and reference row), or null when it has none. */
export const baselineRatios = (baseline) => {
  const rows = { ...(baseline?.stages ?? {}), ...(baseline?.reference ?? {}) }
  const ratios = Object.fromEntries(Object.entries(rows).filter(([, v]) => typeof v?.per_calibration === "number").map(([k, v]) => [k, v.per_calibration]))
  return Object.keys(ratios).length === 0 ? null : ratios
}
