import { describe, expect, it } from "vitest"
import { parseScale } from "../composition/Settings.js"
import * as Runs from "./Runs.js"

const attempt = (outcome: Runs.Attempt["outcome"], n: number, message_id = "msg_1"): Runs.Attempt => ({ messageId: "qm_1", attempt: n, body: { message_id }, outcome })

describe("what the runs view records", () => {
  it("failures: every attempt but a first delivery's success — a later attempt, or a retry-now copy, is recorded so a recovered run ends ok", () => {
    expect(Runs.records("failures", attempt("ok", 1))).toBe(false)
    expect(Runs.records("failures", attempt("retry", 1))).toBe(true)
    expect(Runs.records("failures", attempt("park", 1))).toBe(true)
    expect(Runs.records("failures", attempt("dead", 1))).toBe(true)
    expect(Runs.records("failures", attempt("ok", 2))).toBe(true)
    expect(Runs.records("failures", attempt("ok", 1, `msg_1${Runs.rerunSuffix}`))).toBe(true)
  })

  it("all records every attempt, none nothing", () => {
    expect(Runs.records("all", attempt("ok", 1))).toBe(true)
    expect(Runs.records("none", attempt("dead", 3))).toBe(false)
  })

  it("a copy, a redelivery and a park's re-send are one run: keyed by the envelope's message_id without the copy's mark", async () => {
    expect(Runs.runKey({ message_id: `m1${Runs.rerunSuffix}` }, "qm_2")).toBe("m1")
    expect(Runs.runKey({ message_id: "m1" }, "qm_1")).toBe("m1")
    expect(Runs.runKey("not an envelope", "qm_3")).toBe("qm_3")
    expect(await Runs.idOf("factline-events", "m1")).toBe(await Runs.idOf("factline-events", "m1"))
    expect(await Runs.idOf("factline-events", "m1")).not.toBe(await Runs.idOf("factline-projections", "m1"))
    expect(await Runs.idOf("factline-events", "m1")).toMatch(/^run_[0-9a-f]{24}$/)
  })

  it("filters are checked, each problem naming its parameter", () => {
    expect(Runs.validateFilters({ queue: "factline-events", outcome: "retry", since: "2026-11-24T08:00:00Z" })).toEqual([])
    expect(Runs.validateFilters({ queue: "nope", outcome: "exploded", since: "yesterday", type: "" }).map((p) => p.path)).toEqual(["queue", "outcome", "since", "type"])
  })
})

describe("FACTLINE_RETRY_DELAY_SCALE", () => {
  it("takes a number or a fraction; anything else falls back (undefined)", () => {
    expect(parseScale("1/60")).toBeCloseTo(1 / 60)
    expect(parseScale("0")).toBe(0)
    expect(parseScale("0.5")).toBe(0.5)
    expect(parseScale(" 1 / 2 ")).toBe(0.5)
    expect(parseScale("-1")).toBeUndefined()
    expect(parseScale("fast")).toBeUndefined()
    expect(parseScale(undefined)).toBeUndefined()
  })
})
