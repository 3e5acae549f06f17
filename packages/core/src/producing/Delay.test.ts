import { describe, expect, it } from "vitest"
import * as Delay from "./Delay.js"

const now = Date.parse("2026-11-22T10:00:00.000Z")

describe("Delay", () => {
  it("delay_seconds becomes deliver_after once, from created_at, never later than now + the delay", () => {
    expect(Delay.deliverAfterOf({ delay_seconds: 30 }, now, "")).toEqual({ deliver_after: "2026-11-22T10:00:30.000Z" })
    // A resend of the same body (same created_at) a minute later keeps the first deliver_after.
    expect(Delay.deliverAfterOf({ created_at: "2026-11-22T09:59:00Z", delay_seconds: 90 }, now, "")).toEqual({ deliver_after: "2026-11-22T10:00:30.000Z" })
    // A created_at ahead of our clock cannot stretch the delay.
    expect(Delay.deliverAfterOf({ created_at: "2026-11-22T11:00:00Z", delay_seconds: 30 }, now, "")).toEqual({ deliver_after: "2026-11-22T10:00:30.000Z" })
    expect(Delay.deliverAfterOf({ delay_seconds: 0 }, now, "")).toEqual({})
    expect(Delay.deliverAfterOf({}, now, "")).toEqual({})
  })

  it("a deliver_after given (a re-send of an envelope that has one) is kept, up to 12 hours ahead", () => {
    expect(Delay.deliverAfterOf({ deliver_after: "2026-11-22T10:00:05Z" }, now, "")).toEqual({ deliver_after: "2026-11-22T10:00:05.000Z" })
    expect(Delay.deliverAfterOf({ deliver_after: "2026-11-22T09:00:00Z" }, now, "")).toEqual({ deliver_after: "2026-11-22T09:00:00.000Z" })
    expect(Delay.deliverAfterOf({ deliver_after: "2026-11-22T22:00:01Z" }, now, "events.2").problem?.path).toBe("events.2.deliver_after")
  })

  it("secondsUntil rounds up, is 0 once due, and never exceeds the queue's 12 hours", () => {
    expect(Delay.secondsUntil(undefined, now)).toBe(0)
    expect(Delay.secondsUntil("2026-11-22T09:59:59Z", now)).toBe(0)
    expect(Delay.secondsUntil("2026-11-22T10:00:00.001Z", now)).toBe(1)
    expect(Delay.secondsUntil("2026-11-22T10:00:02Z", now)).toBe(2)
    expect(Delay.secondsUntil("2026-11-24T10:00:00Z", now)).toBe(Delay.maxDelaySeconds)
  })

  it("a stagger spreads a batch in steps of `every` events", () => {
    expect([0, 1, 2].map((i) => Delay.staggerOf({ seconds: 60 }, i))).toEqual([0, 60, 120])
    expect([0, 1, 2, 3, 4].map((i) => Delay.staggerOf({ seconds: 1, every: 2 }, i))).toEqual([0, 0, 1, 1, 2])
  })

  it("a message not yet due is parked, not retried: retryable with its remaining seconds", () => {
    const f = Delay.notDue("2026-11-22T10:00:02.000Z", 2)
    expect(f.retryable).toBe(true)
    expect(f.parkSeconds).toBe(2)
  })
})
