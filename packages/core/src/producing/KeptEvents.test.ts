import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import type { Envelope } from "@factline/schemas"
import { PayloadBucket } from "../platform/Storage.js"
import { memoryBucket } from "../testing/MemoryBindings.js"
import * as KeptEvents from "./KeptEvents.js"

const envelope = (key: string, tenant = "tenant-a"): Envelope => ({
  schema_version: 1, message_type: "call.completed", message_id: `msg_${key}`, idempotency_key: key, correlation_id: key,
  tenant_id: tenant, subject: key, source: "test", created_at: "2026-11-24T08:00:00.000Z", payload: { n: key }
})

describe("KeptEvents", () => {
  it("FACTLINE_KEEP_ACCEPTED reads a duration (10m, 90s, 1h) or off; anything else says what it takes", () => {
    expect(KeptEvents.parseDuration("10m")).toBe(600_000)
    expect(KeptEvents.parseDuration("90s")).toBe(90_000)
    expect(KeptEvents.parseDuration("1h")).toBe(3_600_000)
    for (const off of [undefined, "", "0", "off"]) expect(KeptEvents.parseDuration(off)).toBe(0)
    for (const bad of ["10", "ten minutes", "-5m", "10d"]) expect(KeptEvents.parseDuration(bad)).toMatch(/FACTLINE_KEEP_ACCEPTED: a duration such as 10m/)
  })

  it("keeps each request's envelopes under its time; answers those accepted since a time; prunes those before one", async () => {
    const bucket = PayloadBucket.make(memoryBucket())
    const keep = KeptEvents.keeper(bucket)
    await Effect.runPromise(keep([envelope("a"), envelope("b")], "2026-11-24T08:00:00.000Z"))
    await Effect.runPromise(keep([envelope("c", "tenant-b")], "2026-11-24T08:05:00.000Z"))
    await Effect.runPromise(keep([], "2026-11-24T08:06:00.000Z"))
    const since = await Effect.runPromise(KeptEvents.since(bucket, "2026-11-24T08:01:00.000Z"))
    expect(since.map((e) => [e.tenant_id, e.idempotency_key])).toEqual([["tenant-b", "c"]])
    const all = await Effect.runPromise(KeptEvents.since(bucket, "2026-11-24T07:00:00.000Z"))
    expect(all).toEqual([envelope("a"), envelope("b"), envelope("c", "tenant-b")])
    expect(await Effect.runPromise(KeptEvents.prune(bucket, "2026-11-24T08:01:00.000Z"))).toBe(1)
    expect((await Effect.runPromise(KeptEvents.since(bucket, "2026-11-24T07:00:00.000Z"))).map((e) => e.idempotency_key)).toEqual(["c"])
  })
})
