import { Result } from "effect"
import { describe, expect, it } from "vitest"
import { DeadLetterRecord, Envelope, Issues } from "./index.js"

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

  it("a dead-letter record keeps the original message and the failure context", () => {
    const record = {
      original_message: { anything: true },
      failure: { reason: "decode_error", last_error: "x", attempts: 1, first_attempted_at: "2026-11-22T10:00:00Z", last_attempted_at: "2026-11-22T10:00:01Z", queue: "factline-events" }
    }
    expect(Result.isSuccess(Issues.decodeStrict(DeadLetterRecord)(record))).toBe(true)
    expect(Result.isFailure(Issues.decodeStrict(DeadLetterRecord)({ ...record, failure: { ...record.failure, reason: "bored" } }))).toBe(true)
  })
})
