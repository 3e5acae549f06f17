import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as RetryPolicy from "./RetryPolicy.js"

const anyPolicy = fc.record({
  initialDelaySeconds: fc.integer({ min: 1, max: 3_600 }),
  maxDelaySeconds: fc.integer({ min: 1, max: 10 * 24 * 3_600 }),
  maxRetries: fc.integer({ min: 0, max: 100 })
}).map((p) => ({ ...RetryPolicy.events, ...p }))

describe("RetryPolicy", () => {
  it("the table of DESIGN.md, as data", () => {
    expect(RetryPolicy.all.map((p) => [p.queue, p.maxRetries, p.initialDelaySeconds, p.maxDelaySeconds, p.maxBatchSize, p.maxBatchTimeoutSeconds])).toEqual([
      ["factline-events", 5, 30, 480, 100, 1],
      ["factline-projections", 10, 1, 60, 100, 1],
      ["factline-fact-processing", 5, 5, 120, 100, 1],
      ["factline-webhooks", 5, 10, 300, 10, 5],
      ["factline-batch", 3, 30, 300, 10, 10]
    ])
    expect(RetryPolicy.all.every((p) => p.deadLetterQueue === `${p.queue}-dlq`)).toBe(true)
  })

  it("delay(attempts) = min(initial · 2^(attempts−1), max)", () => {
    expect([1, 2, 3, 4, 5, 6].map((n) => RetryPolicy.delay(RetryPolicy.events, n))).toEqual([30, 60, 120, 240, 480, 480])
    expect([1, 2, 3, 7, 8].map((n) => RetryPolicy.delay(RetryPolicy.projections, n))).toEqual([1, 2, 4, 60, 60])
  })

  it("is monotonic in attempts, up to the cap", () => {
    fc.assert(fc.property(anyPolicy, fc.integer({ min: 1, max: 200 }), (p, n) => {
      expect(RetryPolicy.delay(p, n + 1)).toBeGreaterThanOrEqual(RetryPolicy.delay(p, n))
    }))
  })

  it("never exceeds the policy's max nor the platform's 12 h delaySeconds cap, even with jitter", () => {
    fc.assert(fc.property(anyPolicy, fc.integer({ min: 1, max: 10_000 }), fc.option(fc.double({ min: 0, max: 1, noNaN: true })), (p, n, jitter) => {
      const d = RetryPolicy.delay(p, n, jitter ?? undefined)
      expect(d).toBeLessThanOrEqual(Math.min(p.maxDelaySeconds, RetryPolicy.maxDelaySeconds))
      expect(d).toBeGreaterThanOrEqual(1)
      expect(Number.isInteger(d)).toBe(true)
    }))
  })

  it("jitter spreads a delay over its upper half", () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: 20 }), fc.double({ min: 0, max: 1, noNaN: true }), (n, j) => {
      const full = RetryPolicy.delay(RetryPolicy.webhooks, n)
      const jittered = RetryPolicy.delay(RetryPolicy.webhooks, n, j)
      expect(jittered).toBeLessThanOrEqual(full)
      expect(jittered).toBeGreaterThanOrEqual(Math.floor(full / 2))
    }))
  })

  it("the last attempt is delivery max_retries + 1", () => {
    expect(RetryPolicy.isLastAttempt(RetryPolicy.events, 5)).toBe(false)
    expect(RetryPolicy.isLastAttempt(RetryPolicy.events, 6)).toBe(true)
  })

  it("finds a queue's policy by the queue or its DLQ", () => {
    expect(RetryPolicy.forQueue("factline-batch-dlq")).toBe(RetryPolicy.batch)
    expect(RetryPolicy.isDeadLetterQueue("factline-batch-dlq")).toBe(true)
    expect(RetryPolicy.forQueue("other")).toBeUndefined()
  })
})
