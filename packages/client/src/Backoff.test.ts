import { describe, expect, it } from "vitest"
import * as Backoff from "./Backoff.js"

const settings: Backoff.RetrySettings = { maxAttempts: 5, initialDelayMs: 100, maxDelayMs: 1_000 }

describe("Backoff.delay", () => {
  it("doubles from the initial delay up to the maximum, jitter spreading each over [delay/2, delay]", () => {
    expect([1, 2, 3, 4, 5].map((n) => Backoff.delay(settings, n, 0.999999))).toEqual([100, 200, 400, 800, 1_000])
    expect([1, 2, 3, 4, 5].map((n) => Backoff.delay(settings, n, 0))).toEqual([50, 100, 200, 400, 500])
  })

  it("waits at least a Retry-After, but no longer than the maximum", () => {
    expect(Backoff.delay(settings, 1, 0, 700)).toBe(700)
    expect(Backoff.delay(settings, 1, 0, 60_000)).toBe(1_000)
    expect(Backoff.delay(settings, 4, 0.999999, 10)).toBe(800)
  })

  it("stays finite after any number of attempts", () => {
    expect(Backoff.delay(settings, 10_000, 0.5)).toBeLessThanOrEqual(1_000)
  })
})

describe("Backoff.retryAfterMs", () => {
  it("reads delta seconds and HTTP dates; ignores what it cannot read", () => {
    const now = Date.parse("2026-11-22T10:00:00Z")
    expect(Backoff.retryAfterMs("5", now)).toBe(5_000)
    expect(Backoff.retryAfterMs("Sun, 22 Nov 2026 10:00:03 GMT", now)).toBe(3_000)
    expect(Backoff.retryAfterMs("Sun, 22 Nov 2026 09:00:00 GMT", now)).toBe(0)
    expect(Backoff.retryAfterMs("soon", now)).toBeUndefined()
    expect(Backoff.retryAfterMs(null, now)).toBeUndefined()
  })
})
