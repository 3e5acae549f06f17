import { Result } from "effect"
import { describe, expect, it } from "vitest"
import { DeadLetterRecord, Envelope, EnvelopeInput, Issues } from "./index.js"

const decode = Issues.decodeStrict(Envelope)
const valid = {
  schema_version: 2, message_type: "call.completed", message_id: "m1", idempotency_key: "k1", correlation_id: "c1",
  tenant_id: "tenant-a", subject: "call_1", source: "svc", created_at: "2026-11-22T10:00:00Z", payload: { a: 1 }
}

describe("Envelope", () => {
  it("decodes a valid envelope", () => {
    expect(Result.getOrThrow(decode(valid))).toEqual(valid)
  })

  it("names every failing field, including unknown ones", () => {
    const r = decode({ ...valid, schema_version: 0, tenant_id: "a/b", created_at: "today", surprise: 1, message_type: "Call" })
    expect(Result.isFailure(r) && r.failure.map((p) => p.path).sort()).toEqual(["created_at", "message_type", "schema_version", "surprise", "tenant_id"])
  })

  it("requires exactly one of payload and payload_ref", () => {
    const { payload: _, ...none } = valid
    expect(Result.isFailure(decode(none))).toBe(true)
    expect(Result.isFailure(decode({ ...valid, payload_ref: "r2://b/k" }))).toBe(true)
    expect(Result.isSuccess(decode({ ...none, payload_ref: "r2://b/k" }))).toBe(true)
    expect(Result.isFailure(decode({ ...none, payload_ref: "s3://b/k" }))).toBe(true)
  })

  it("deliver_after is optional: an envelope from before it decodes, one with it keeps it", () => {
    expect(Result.isSuccess(decode(valid))).toBe(true)
    expect(Result.getOrThrow(decode({ ...valid, deliver_after: "2026-11-22T10:00:30.000Z" })).deliver_after).toBe("2026-11-22T10:00:30.000Z")
    const r = decode({ ...valid, deliver_after: "soon" })
    expect(Result.isFailure(r) && r.failure.map((p) => p.path)).toEqual(["deliver_after"])
    // delay_seconds is an input of the producer, never a field on the queue.
    const onQueue = decode({ ...valid, delay_seconds: 5 })
    expect(Result.isFailure(onQueue) && onQueue.failure.map((p) => p.path)).toEqual(["delay_seconds"])
  })

  it("an input's delay_seconds is a whole number from 0 to 43,200 (Cloudflare's 12 hours), and excludes deliver_after", () => {
    const input = Issues.decodeStrict(EnvelopeInput)
    for (const ok of [0, 1, 43_200]) expect(Result.isSuccess(input({ ...valid, delay_seconds: ok }))).toBe(true)
    for (const bad of [-1, 1.5, 43_201, "30", null]) {
      const r = input({ ...valid, delay_seconds: bad })
      expect(Result.isFailure(r) && r.failure.map((p) => p.path)).toEqual(["delay_seconds"])
    }
    const both = input({ ...valid, delay_seconds: 5, deliver_after: "2026-11-22T10:00:30Z" })
    expect(Result.isFailure(both) && both.failure).toEqual([{ path: "delay_seconds", message: "give delay_seconds or deliver_after, not both" }])
  })

  it("a dead-letter record keeps the original message and the failure context", () => {
    const record = {
      original_message: { anything: true },
      failure: { reason: "decode_error", last_error: "x", attempts: 1, first_attempted_at: "2026-11-22T10:00:00Z", last_attempted_at: "2026-11-22T10:00:01Z", queue: "factline-events" }
    }
    expect(Result.isSuccess(Issues.decodeStrict(DeadLetterRecord)(record))).toBe(true)
    expect(Result.isFailure(Issues.decodeStrict(DeadLetterRecord)({ ...record, failure: { ...record.failure, reason: "bored" } }))).toBe(true)
  })
})
