import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as RetryPolicy from "./RetryPolicy.js"

const anyPolicy = fc.record({
  initialDelaySeconds: fc.integer({ min: 1, max: 3_600 }),
  maxDelaySeconds: fc.integer({ min: 1, max: 10 * 24 * 3_600 }),
  maxRetries: fc.integer({ min: 0, max: 100 })
}).map((p) => ({ ...RetryPolicy.events, ...p }))

describe("RetryPolicy", () => {
  it("the queue table of docs/queues.md, as data", () => {
    expect(RetryPolicy.all.map((p) => [p.queue, p.maxRetries, p.initialDelaySeconds, p.maxDelaySeconds, p.maxBatchSize, p.maxBatchTimeoutSeconds])).toEqual([
      ["factline-events", 5, 30, 480, 100, 1],
      ["factline-projections", 10, 1, 60, 100, 0.5],
      ["factline-fact-processing", 5, 5, 120, 100, 0.5],
      ["factline-webhooks", 5, 10, 300, 10, 5],
      ["factline-batch", 3, 30, 300, 10, 10]
    ])
    expect(RetryPolicy.all.every((p) => p.deadLetterQueue === `${p.queue}-dlq`)).toBe(true)
  })

  it("keys the table by purpose: all is byPurpose in order, one policy per purpose", () => {
    expect(RetryPolicy.purposes).toEqual(["events", "projections", "factProcessing", "webhooks", "batch"])
    expect(RetryPolicy.all).toEqual(RetryPolicy.purposes.map((purpose) => RetryPolicy.byPurpose[purpose]))
    expect(new Set(RetryPolicy.all.map((p) => p.queue)).size).toBe(RetryPolicy.all.length)
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

  it("jitter 0 gives the upper half's floor, jitter near 1 the full delay", () => {
    expect([1, 2, 3, 4, 5].map((n) => RetryPolicy.delay(RetryPolicy.events, n, 0))).toEqual([15, 30, 60, 120, 240])
    expect([1, 2, 3, 4, 5].map((n) => RetryPolicy.delay(RetryPolicy.events, n, 0.999_999))).toEqual([30, 60, 120, 240, 480])
    // One second cannot be halved: the shortest delay stays 1 s.
    expect(RetryPolicy.delay(RetryPolicy.projections, 1, 0)).toBe(1)
  })

  it("a message's jitter is in [0, 1) and the same for the same message and attempt", () => {
    fc.assert(fc.property(fc.string(), fc.integer({ min: 1, max: 1_000 }), (id, n) => {
      const j = RetryPolicy.jitterOf(id, n)
      expect(j).toBeGreaterThanOrEqual(0)
      expect(j).toBeLessThan(1)
      expect(RetryPolicy.jitterOf(id, n)).toBe(j)
    }))
  })

  it("a burst of 1,000 failures comes back spread over the delay's upper half, not as one burst", () => {
    // Queue message ids as Cloudflare gives them: distinct, often differing only in their last characters.
    const ids = Array.from({ length: 1_000 }, (_, i) => `0196f3a2c4d8e7b1a9f0${i.toString(16).padStart(12, "0")}`)
    for (const attempts of [1, 2, 3]) {
      const full = RetryPolicy.delay(RetryPolicy.events, attempts)
      const delays = ids.map((id) => RetryPolicy.delay(RetryPolicy.events, attempts, RetryPolicy.jitterOf(id, attempts)))
      expect(Math.min(...delays)).toBeGreaterThanOrEqual(full / 2)
      expect(Math.max(...delays)).toBeLessThanOrEqual(full)
      // Every second of the upper half gets some of the burst, and none gets more than three times its share.
      const perSecond = new Map<number, number>()
      for (const d of delays) perSecond.set(d, (perSecond.get(d) ?? 0) + 1)
      // ceil(d/2 + d/2 · j): d/2 + 1 … d seconds (d/2 itself only for a jitter of exactly 0).
      const seconds = full / 2
      expect(perSecond.size).toBe(seconds)
      expect(Math.max(...perSecond.values())).toBeLessThan((3 * ids.length) / seconds)
    }
    // The jitter of one message changes from attempt to attempt.
    expect(new Set([1, 2, 3, 4, 5].map((n) => RetryPolicy.jitterOf(ids[0]!, n))).size).toBe(5)
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
