import fc from "fast-check"
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

describe("Issues.decodeStrict: the lenient first pass decides exactly what strict decoding decides", () => {
  const Inner = Schema.Struct({ n: Schema.Int, tag: Schema.optional(Schema.String) })
  const Shape = Schema.Struct({
    id: Schema.String,
    inner: Inner,
    list: Schema.Array(Inner),
    data: Schema.Record(Schema.String, Schema.Unknown),
    either: Schema.Union([Schema.Struct({ a: Schema.String }), Schema.Struct({ a: Schema.String, b: Schema.Number })]),
    count: Schema.NumberFromString
  })
  const strict = Schema.decodeUnknownResult(Shape)
  const decode = Issues.decodeStrict(Shape)
  const value = fc.oneof(fc.string({ maxLength: 3 }), fc.integer(), fc.double(), fc.boolean(), fc.constant(null), fc.constant(undefined), fc.dictionary(fc.string({ maxLength: 2 }), fc.integer(), { maxKeys: 2 }))
  /** A valid input, then up to three edits anywhere: a key added, removed or given another value. */
  const inputs = fc.record({
      edits: fc.array(fc.record({ at: fc.constantFrom<ReadonlyArray<string | number>>([], ["inner"], ["list", 0], ["list", 1], ["data"], ["either"]), key: fc.constantFrom("id", "inner", "n", "tag", "a", "b", "extra", "list", "count"), op: fc.constantFrom("set", "delete"), to: value }), { maxLength: 3 }),
      b: fc.boolean()
    }).map(({ edits, b }) => {
      const input: any = { id: "x", inner: { n: 1 }, list: [{ n: 2, tag: "t" }, { n: 3 }], data: { k: { deep: [1] } }, either: b ? { a: "y", b: 2 } : { a: "y" }, count: "12" }
      for (const { at, key, op, to } of edits) {
        let target = input
        for (const step of at) target = target?.[step]
        if (target === null || typeof target !== "object") continue
        if (op === "delete") delete target[key]
        else target[key] = to
      }
      return input
    })

  it("same success, same value, same problems", () => {
    fc.assert(fc.property(inputs, (input) => {
      const expected = strict(input, { errors: "all", onExcessProperty: "error" })
      const got = decode(input)
      expect(Result.isSuccess(got)).toBe(Result.isSuccess(expected))
      if (Result.isSuccess(got) && Result.isSuccess(expected)) expect(got.success).toEqual(expected.success)
      if (Result.isFailure(got) && Result.isFailure(expected)) expect(got.failure).toEqual(Issues.fromIssue(expected.failure.issue, []))
    }), { numRuns: 2_000 })
  })

  it("an excess key at any depth is still refused, by name", () => {
    const valid = { id: "x", inner: { n: 1 }, list: [{ n: 2 }], data: { anything: 1 }, either: { a: "y" }, count: "1" }
    expect(Result.isSuccess(decode(valid))).toBe(true)
    for (const [input, path] of [
      [{ ...valid, extra: 1 }, "extra"],
      [{ ...valid, inner: { n: 1, extra: 1 } }, "inner.extra"],
      [{ ...valid, list: [{ n: 2 }, { n: 3, extra: 1 }] }, "list.1.extra"]
    ] as const) {
      const result = decode(input)
      expect(Result.isFailure(result) && result.failure.map((p) => p.path)).toEqual([path])
    }
  })
})
