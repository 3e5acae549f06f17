import { describe, expect, it } from "vitest"
import { drain } from "./Drain.js"
import { callCompleted, postEvents, readStream, request, tokenA, tokenB, unique } from "./helpers.js"

describe("HTTP ingest → events queue → router → ledger", () => {
  it("an event posted over HTTP becomes exactly one outcome fact in its stream", async () => {
    const event = callCompleted()
    const response = await postEvents(event)
    expect(response.status).toBe(202)
    expect(await response.json()).toEqual({
      accepted: 1, idempotency_keys: [event.idempotency_key], items: [{ idempotency_key: event.idempotency_key, duplicate: false }]
    })

    await drain()
    const stream = await readStream("tenant-a", event.subject)
    // The outcome is the stream's first fact; the processors derived the qualification and the charge after it.
    expect(stream.facts.map((f) => f.type)).toEqual(["outcome", "qualification", "charge"])
    expect(stream.facts[0]).toMatchObject({
      type: "outcome",
      sequence: 1,
      stream: event.subject,
      tenant_id: "tenant-a",
      causation_id: event.idempotency_key,
      correlation_id: event.correlation_id,
      caused_by: "record-outcome",
      data: event.payload
    })

    const read = await request(`/v1/streams/${event.subject}/facts`, { token: tokenA })
    expect(read.status).toBe(200)
    const body = await read.json<any>()
    expect(body.facts.map((f: any) => f.type)).toEqual(["outcome", "qualification", "charge"])
  })

  it("the same event posted five times still gives one fact", async () => {
    const event = callCompleted()
    for (let i = 0; i < 5; i++) {
      const response = await postEvents({ ...event, message_id: unique("msg") })
      expect(response.status).toBe(202)
    }
    // Every delivery consumed, then nothing more was appended.
    await drain()
    const stream = await readStream("tenant-a", event.subject)
    expect(stream.facts.filter((f) => f.type === "outcome")).toHaveLength(1)
    expect(stream.facts.filter((f) => f.causation_id === event.idempotency_key)).toHaveLength(1)
  })

  it("a v1 event arrives upcast to v2 with the default currency", async () => {
    const event = callCompleted({ schema_version: 1 })
    const { currency: _, ...v1 } = event.payload
    const response = await postEvents({ ...event, payload: v1 })
    expect(response.status).toBe(202)
    await drain()
    const stream = await readStream("tenant-a", event.subject)
    expect(stream.facts[0]!.data).toEqual({ ...v1, currency: "USD" })
  })

  it("tenants cannot read each other's streams", async () => {
    const event = callCompleted()
    expect((await postEvents(event)).status).toBe(202)
    await drain()
    expect((await readStream("tenant-a", event.subject)).version).toBeGreaterThan(0)
    const asB = await request(`/v1/streams/${event.subject}/facts`, { token: tokenB })
    expect(asB.status).toBe(404)
    const body = await asB.text()
    expect(body).not.toContain("outcome")
    expect(body).not.toContain("buyer_1")
    // B cannot write into A's tenant either.
    const write = await postEvents(callCompleted(), tokenB)
    expect(write.status).toBe(403)
  })
})
