import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { drain } from "./Drain.js"
import { callCompleted, postEvents, readStream, request, tokenA, tokenAReadOnly, unique } from "./helpers.js"

/** Whether the event with this key has decided its facts in the subject's stream. */
const processed = async (tenant: string, key: string, subject: string) =>
  (await readStream(tenant, subject)).facts.some((f) => f.causation_id === key)

describe("HTTP API", () => {
  it("requests without a valid token get 401, with a JSON error and no data", async () => {
    for (const path of ["/v1/events", "/v1/streams/call_1/facts", "/nowhere"]) {
      const response = await request(path, { method: path === "/v1/events" ? "POST" : "GET", body: path === "/v1/events" ? "{}" : undefined })
      if (path === "/nowhere") {
        expect(response.status).toBe(404)
        continue
      }
      expect(response.status).toBe(401)
      expect(response.headers.get("www-authenticate")).toBe("Bearer")
      expect((await response.json<any>()).error.code).toBe("unauthorized")
    }
    const wrong = await request("/v1/streams/call_1/facts", { token: "not-a-token" })
    expect(wrong.status).toBe(401)
    expect(await wrong.text()).not.toContain("not-a-token")
  })

  it("a token without the needed scope gets 403", async () => {
    const response = await postEvents(callCompleted(), tokenAReadOnly)
    expect(response.status).toBe(403)
    expect((await response.json<any>()).error).toMatchObject({ code: "forbidden" })
  })

  it("validation is all-or-nothing and the 400 lists every problem by field", async () => {
    const good = callCompleted()
    const badPayload = callCompleted({}, { duration_s: -5, price_cents: "free" })
    const unknownType = { ...callCompleted(), message_type: "call.vanished" }
    const missing = { ...callCompleted(), idempotency_key: undefined, created_at: "yesterday" }
    const response = await postEvents({ events: [good, badPayload, unknownType, missing] })
    expect(response.status).toBe(400)
    const body = await response.json<any>()
    expect(body.error.code).toBe("invalid_events")
    const paths = body.error.details.problems.map((p: any) => p.path)
    expect(paths).toEqual(expect.arrayContaining([
      "events.1.payload.duration_s",
      "events.1.payload.price_cents",
      "events.2.message_type",
      "events.3.idempotency_key",
      "events.3.created_at"
    ]))
    expect(paths.some((p: string) => p.startsWith("events.0"))).toBe(false)

    // Nothing was sent: once every queue is idle, a sentinel posted afterwards is processed, the good event of the rejected request is not.
    const sentinel = callCompleted()
    expect((await postEvents(sentinel)).status).toBe(202)
    await drain()
    expect(await processed("tenant-a", sentinel.idempotency_key, sentinel.subject)).toBe(true)
    expect((await readStream("tenant-a", good.subject)).version).toBe(0)
  })

  it("malformed requests get clear 400s, never a 500", async () => {
    const notJson = await request("/v1/events", { method: "POST", body: "{ nope", token: tokenA })
    expect(notJson.status).toBe(400)
    expect((await notJson.json<any>()).error.code).toBe("invalid_json")
    const empty = await postEvents({ events: [] })
    expect(empty.status).toBe(400)
    const array = await postEvents([callCompleted()])
    expect(array.status).toBe(400)
    const badLimit = await request("/v1/streams/x/facts?limit=abc", { token: tokenA })
    expect(badLimit.status).toBe(400)
    expect((await badLimit.json<any>()).error.code).toBe("invalid_query")
  })

  it("producer defaults fill message_id, created_at and correlation_id", async () => {
    const event = callCompleted()
    const { message_id: _m, created_at: _c, correlation_id: _r, tenant_id: _t, source: _s, ...minimal } = event
    const response = await postEvents({ events: [minimal] })
    expect(response.status).toBe(202)
    await drain()
    expect(await processed("tenant-a", event.idempotency_key, event.subject)).toBe(true)
    const [fact] = (await readStream("tenant-a", event.subject)).facts
    expect(fact).toMatchObject({ correlation_id: event.idempotency_key, tenant_id: "tenant-a", type: "outcome" })
  })

  it("a 200 KiB payload travels through R2 and round-trips intact", async () => {
    const blob = "x".repeat(200 * 1024 - 7) + unique("")
    const subject = unique("blob")
    const key = unique("blob-key")
    const response = await postEvents({
      schema_version: 1,
      message_type: "test.blob.stored",
      idempotency_key: key,
      subject,
      payload: { blob }
    })
    expect(response.status).toBe(202)
    const listed = await env.PAYLOADS.list({ prefix: "_payloads/tenant-a/" })
    const objects = await Promise.all(listed.objects.map(async (o) => (await env.PAYLOADS.get(o.key))!.text()))
    expect(objects.some((text) => text.includes(blob))).toBe(true)
    await drain()
    const stream = await readStream("tenant-a", subject)
    expect(stream.facts[0]!.data.blob).toBe(blob)
  })

  it("reading a stream pages through its facts", async () => {
    const subject = unique("counter")
    await postEvents({
      events: [1, 2, 3].map((i) => ({
        schema_version: 1, message_type: "test.counter.bump", idempotency_key: unique(`bump${i}`), subject, payload: { by: `u${i}` }
      }))
    })
    await drain()
    expect((await readStream("tenant-a", subject)).version).toBe(3)
    const page1 = await (await request(`/v1/streams/${subject}/facts?limit=2`, { token: tokenA })).json<any>()
    expect(page1.facts.map((f: any) => f.sequence)).toEqual([1, 2])
    expect(page1.next_after).toBe(2)
    const page2 = await (await request(`/v1/streams/${subject}/facts?after=2&limit=2`, { token: tokenA })).json<any>()
    expect(page2.facts.map((f: any) => f.sequence)).toEqual([3])
    expect(page2.next_after).toBe(null)
  })

  it("accepts CloudEvents 1.0 in structured, batch and binary mode", async () => {
    const payload = (call_id: string) => ({ call_id, buyer_id: "ce_buyer", duration_s: 30, price_cents: 5, currency: "USD" })
    const [a, b, c, d] = [unique("ce"), unique("ce"), unique("ce"), unique("ce")]
    const cloudEvent = (call_id: string) => ({ specversion: "1.0", type: "call.completed", id: `evt-${call_id}`, source: "/billing", subject: call_id, data: payload(call_id) })
    const post = (body: unknown, contentType: string, headers: Record<string, string> = {}) =>
      request("/v1/events", { method: "POST", body: JSON.stringify(body), token: tokenA, headers: { "content-type": contentType, ...headers } })

    const structured = await post(cloudEvent(a), "application/cloudevents+json; charset=utf-8")
    expect(structured.status).toBe(202)
    expect(await structured.json()).toEqual({
      accepted: 1, idempotency_keys: [`ce:%2Fbilling:evt-${a}`], items: [{ idempotency_key: `ce:%2Fbilling:evt-${a}`, duplicate: false }]
    })
    const batch = await post([cloudEvent(b), { ...cloudEvent(c), schemaversion: "1", data: { call_id: c, buyer_id: "ce_buyer", duration_s: 30, price_cents: 5 } }], "application/cloudevents-batch+json")
    expect(batch.status).toBe(202)
    const binary = await post(payload(d), "application/json", {
      "ce-specversion": "1.0", "ce-type": "call.completed", "ce-id": `evt-${d}`, "ce-source": "/billing", "ce-subject": d, "ce-idempotencykey": `custom-${d}`
    })
    expect(binary.status).toBe(202)
    expect((await binary.json<any>()).idempotency_keys).toEqual([`custom-${d}`])
    // The same CloudEvent again (a producer retry) keeps its key: a replay, still one fact.
    const retry = await post(cloudEvent(a), "application/cloudevents+json")
    expect(retry.status).toBe(202)
    expect(retry.headers.get("idempotent-replay")).toBe("true")

    await drain()
    for (const call of [a, b, c, d]) {
      const stream = await readStream("tenant-a", call)
      expect(stream.facts.map((f) => f.type)).toEqual(["outcome", "qualification"])
      expect(stream.facts[0]!.data.currency).toBe("USD")
    }
    expect((await readStream("tenant-a", a)).facts[0]!.causation_id).toBe(`ce:%2Fbilling:evt-${a}`)
  })

  it("refuses malformed CloudEvents with every problem named", async () => {
    const response = await request("/v1/events", {
      method: "POST", token: tokenA, headers: { "content-type": "application/cloudevents-batch+json" },
      body: JSON.stringify([{ specversion: "0.3", type: "call.completed", id: "x", source: "/s" }, { specversion: "1.0", data_base64: "AA==" }])
    })
    expect(response.status).toBe(400)
    const paths = (await response.json<any>()).error.details.problems.map((p: any) => p.path)
    expect(paths).toEqual(["events.0.specversion", "events.1.id", "events.1.source", "events.1.type", "events.1.data_base64"])
  })
})
