import { Result, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { Issues } from "./index.js"

const many = (n: number) => Array.from({ length: n }, (_, i) => ({ path: `k${i}`, message: "unexpected" }))

describe("Issues: a problem list shown to someone is capped", () => {
  it("listed: the first 100 problems and the total", () => {
    const details = Issues.listed(many(150_000))
    expect(details.problems).toEqual(many(100))
    expect(details.problems_total).toBe(150_000)
    expect(Issues.listed(many(3))).toEqual({ problems: many(3), problems_total: 3 })
  })

  it("listed: a path or message longer than 1,000 characters is cut", () => {
    const [problem] = Issues.listed([{ path: "p".repeat(2_000_000), message: "m".repeat(5_000) }]).problems
    expect(problem!.path).toBe(`${"p".repeat(1_000)}…`)
    expect(problem!.message).toBe(`${"m".repeat(1_000)}…`)
  })

  it("render: the first 100, then the count; summary says when only the first 100 are listed", () => {
    expect(Issues.render(many(2))).toBe("k0: unexpected; k1: unexpected")
    const line = Issues.render(many(150_000))
    expect(line.split("; k").length).toBe(100)
    expect(line.endsWith("; … (150000 problem(s); the first 100 are listed)")).toBe(true)
    expect(Issues.summary(100)).toBe("100 problem(s)")
    expect(Issues.summary(101)).toBe("101 problem(s); the first 100 are listed")
  })

  it("decodeStrict reports 150,000 unknown keys without throwing", () => {
    const input = Object.fromEntries(Array.from({ length: 150_000 }, (_, i) => [`k${i}`, 0]))
    const decoded = Issues.decodeStrict(Schema.Struct({ a: Schema.optional(Schema.Number) }))(input)
    expect(Result.isFailure(decoded) && decoded.failure.length).toBe(150_000)
  })
})
