import { Result } from "effect"
import { describe, expect, it } from "vitest"
import { Envelope, Fact, Issues, TraceContext } from "./index.js"

const valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

describe("TraceContext", () => {
  it("accepts the W3C example and reads its fields", () => {
    expect(TraceContext.isValid(valid)).toBe(true)
    expect(TraceContext.parse(valid)).toEqual({ version: "00", traceId: "4bf92f3577b34da6a3ce929d0e0e4736", parentId: "00f067aa0ba902b7", flags: "01" })
    expect(TraceContext.traceId(valid)).toBe("4bf92f3577b34da6a3ce929d0e0e4736")
  })

  it.each([
    ["an all-zero trace-id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"],
    ["an all-zero parent-id", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"],
    ["upper-case hex", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"],
    ["version ff", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"],
    ["a short trace-id", "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01"],
    ["a short parent-id", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-01"],
    ["one-digit flags", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1"],
    ["version 00 with more fields", `${valid}-extra`],
    ["another separator", "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01"],
    ["surrounding space", ` ${valid}`],
    ["an empty string", ""],
    ["garbage", "not-a-trace"]
  ])("refuses %s", (_, value) => {
    expect(TraceContext.isValid(value)).toBe(false)
    expect(TraceContext.parse(value)).toBeUndefined()
  })

  it("accepts a later version whose first four fields parse, and derives version 00 from it", () => {
    const later = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-adds"
    expect(TraceContext.isValid(later)).toBe(true)
    expect(TraceContext.isValid("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")).toBe(true)
    expect(TraceContext.isValid("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x")).toBe(false)
    expect(TraceContext.child(later)).toMatch(/^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/)
  })

  it("a child keeps the trace-id and flags and takes a new parent-id", () => {
    const unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
    const children = Array.from({ length: 50 }, () => TraceContext.child(unsampled))
    for (const c of children) {
      const parsed = TraceContext.parse(c)!
      expect(parsed.traceId).toBe("4bf92f3577b34da6a3ce929d0e0e4736")
      expect(parsed.flags).toBe("00")
      expect(parsed.parentId).not.toBe("00f067aa0ba902b7")
    }
    expect(new Set(children).size).toBe(50)
  })

  it("generates valid, sampled, distinct traces; a child of nothing starts one", () => {
    const traces = Array.from({ length: 50 }, () => TraceContext.generate())
    for (const t of traces) expect(TraceContext.parse(t)).toMatchObject({ version: "00", flags: "01" })
    expect(new Set(traces.map(TraceContext.traceId)).size).toBe(50)
    expect(TraceContext.isValid(TraceContext.child(undefined))).toBe(true)
  })

  it("an envelope or a fact with an invalid traceparent names the field; without one it still decodes", () => {
    const envelope = {
      schema_version: 1, message_type: "call.completed", message_id: "m1", idempotency_key: "k1", correlation_id: "c1",
      tenant_id: "tenant-a", subject: "call_1", source: "svc", created_at: "2026-11-22T10:00:00Z", payload: {}
    }
    const decode = Issues.decodeStrict(Envelope)
    expect(Result.isSuccess(decode(envelope))).toBe(true)
    expect(Result.getOrThrow(decode({ ...envelope, traceparent: valid })).traceparent).toBe(valid)
    const bad = decode({ ...envelope, traceparent: "00-abc" }, ["events", 2])
    expect(Result.isFailure(bad) && bad.failure).toEqual([{ path: "events.2.traceparent", message: TraceContext.formatMessage }])

    const fact = {
      fact_id: "f_1", tenant_id: "tenant-a", stream: "call_1", sequence: 1, type: "outcome", data: {},
      causation_id: "k1", correlation_id: "c1", caused_by: "record-outcome", created_at: "2026-11-22T10:00:00Z"
    }
    expect(Result.isSuccess(Issues.decodeStrict(Fact)(fact))).toBe(true)
    expect(Result.isSuccess(Issues.decodeStrict(Fact)({ ...fact, traceparent: valid }))).toBe(true)
    expect(Result.isFailure(Issues.decodeStrict(Fact)({ ...fact, traceparent: valid.toUpperCase() }))).toBe(true)
  })
})
