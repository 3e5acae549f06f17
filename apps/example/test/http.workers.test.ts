import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { callCompleted, eventually, postEvents, readStream, request, tokenA, tokenAReadOnly, unique } from "./helpers.js"

const processed = (tenant: string, key: string) =>
  eventually(async () => {
    const row = await env.DB.prepare("SELECT status FROM inbox WHERE queue = 'factline-events' AND idempotency_key = ?")
      .bind(`${tenant}/${key}`).first<{ status: string }>()
    return row?.status === "succeeded" ? true : undefined
  }, 20_000, `processing of ${key}`)

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

    // Nothing was sent: a sentinel posted afterwards is processed, the good event of the rejected request never is.
    const sentinel = callCompleted()
    expect((await postEvents(sentinel)).status).toBe(202)
    await processed("tenant-a", sentinel.idempotency_key)
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
    await processed("tenant-a", event.idempotency_key)
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
    const listed = await env.PAYLOADS.list({ prefix: "tenant-a/" })
    const objects = await Promise.all(listed.objects.map(async (o) => (await env.PAYLOADS.get(o.key))!.text()))
    expect(objects.some((text) => text.includes(blob))).toBe(true)
    const stream = await eventually(async () => {
      const s = await readStream("tenant-a", subject)
      return s.version > 0 ? s : undefined
    })
    expect(stream.facts[0]!.data.blob).toBe(blob)
  })

  it("reading a stream pages through its facts", async () => {
    const subject = unique("counter")
    await postEvents({
      events: [1, 2, 3].map((i) => ({
        schema_version: 1, message_type: "test.counter.bump", idempotency_key: unique(`bump${i}`), subject, payload: { by: `u${i}` }
      }))
    })
    await eventually(async () => ((await readStream("tenant-a", subject)).version === 3 ? true : undefined))
    const page1 = await (await request(`/v1/streams/${subject}/facts?limit=2`, { token: tokenA })).json<any>()
    expect(page1.facts.map((f: any) => f.sequence)).toEqual([1, 2])
    expect(page1.next_after).toBe(2)
    const page2 = await (await request(`/v1/streams/${subject}/facts?after=2&limit=2`, { token: tokenA })).json<any>()
    expect(page2.facts.map((f: any) => f.sequence)).toEqual([3])
    expect(page2.next_after).toBe(null)
  })
})
