/** CloudEvents out: the fact reads answer `application/cloudevents-batch+json` when asked (Accept), one CloudEvent 1.0 per fact. */
import { describe, expect, it } from "vitest"
import { drain } from "./Drain.js"
import { callCompleted, postEvents, readStream, request, tokenA, tokenB } from "./helpers.js"

const asCloudEvents = (path: string, token = tokenA) => request(path, { token, headers: { accept: "application/cloudevents-batch+json" } })

describe("CloudEvents out", () => {
  it("a stream's facts as a CloudEvents batch: attributes mapped, extensions carry the ledger's fields, paged with a Link", async () => {
    const call = callCompleted()
    expect((await postEvents(call)).status).toBe(202)
    await drain()
    const stored = (await readStream("tenant-a", call.subject)).facts
    expect(stored.map((f) => f.type)).toEqual(["outcome", "qualification", "charge"])

    const response = await asCloudEvents(`/v1/streams/${call.subject}/facts`)
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toBe("application/cloudevents-batch+json")
    expect(response.headers.get("cache-control")).toBe("no-store")
    const events = await response.json<Array<Record<string, unknown>>>()
    expect(events).toHaveLength(3)
    expect(events[2]).toEqual({
      specversion: "1.0",
      id: stored[2]!.fact_id,
      source: `/factline/tenants/tenant-a/streams/${call.subject}`,
      type: "charge",
      subject: call.subject,
      time: stored[2]!.created_at,
      datacontenttype: "application/json",
      data: stored[2]!.data,
      sequence: "00000000000000000003",
      causationid: stored[2]!.causation_id,
      correlationid: stored[2]!.correlation_id,
      causedby: "qualify-call",
      tenantid: "tenant-a",
      schemaversion: "1",
      traceparent: stored[2]!.traceparent
    })
    expect(stored[2]!.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/)

    const page = await asCloudEvents(`/v1/streams/${call.subject}/facts?limit=2`)
    expect((await page.json<Array<unknown>>()).length).toBe(2)
    expect(page.headers.get("link")).toBe(`</v1/streams/${call.subject}/facts?after=2&limit=2>; rel="next"`)

    const facts = await asCloudEvents(`/v1/facts?subject=${call.subject}&limit=2`)
    expect(facts.headers.get("content-type")).toBe("application/cloudevents-batch+json")
    const listed = await facts.json<Array<Record<string, unknown>>>()
    expect(listed).toHaveLength(2)
    expect(listed.every((e) => e.specversion === "1.0")).toBe(true)
    // The same mapping as the stream read (the facts table names the stream `subject` and has no tenant column).
    const byId = new Map(events.map((e) => [e.id, e]))
    for (const e of listed) expect(e).toEqual(byId.get(e.id))
    expect(facts.headers.get("link")).toMatch(/^<\/v1\/facts\?subject=.*&limit=2&cursor=[^>]+>; rel="next"$/)
    const next = await asCloudEvents(facts.headers.get("link")!.slice(1, facts.headers.get("link")!.indexOf(">")))
    const rest = await next.json<Array<Record<string, unknown>>>()
    // /v1/facts lists in (created_at, fact_id) order: both pages together are the stream's three facts, once each.
    expect([...listed, ...rest].map((e) => e.id).sort()).toEqual(stored.map((f) => f.fact_id).sort())
    expect(next.headers.get("link")).toBeNull()

    // Without the Accept header: factline's JSON, unchanged; another tenant: nothing.
    const plain = await request(`/v1/streams/${call.subject}/facts`, { token: tokenA })
    expect(plain.headers.get("content-type")).toMatch(/^application\/json/)
    expect((await asCloudEvents(`/v1/facts?subject=${call.subject}`, tokenB).then((r) => r.json<Array<unknown>>()))).toEqual([])
  })

  it("Accept weights are honoured: q=0 refuses a type (the other one is answered), refusing both is a 406", async () => {
    const call = callCompleted()
    expect((await postEvents(call)).status).toBe(202)
    await drain()
    const read = (path: string, accept: string) => request(path, { token: tokenA, headers: { accept } })
    for (const path of [`/v1/streams/${call.subject}/facts`, `/v1/facts?subject=${call.subject}`]) {
      const notBatch = await read(path, "application/cloudevents-batch+json;q=0, application/json")
      expect(notBatch.status, path).toBe(200)
      expect(notBatch.headers.get("content-type"), path).toMatch(/^application\/json/)
      const alone = await read(path, "application/cloudevents-batch+json; q=0")
      expect(alone.headers.get("content-type"), path).toMatch(/^application\/json/)
      const preferred = await read(path, "application/json;q=0.5, application/cloudevents-batch+json")
      expect(preferred.headers.get("content-type"), path).toBe("application/cloudevents-batch+json")
      for (const refusing of ["*/*;q=0", "application/json;q=0, application/cloudevents-batch+json;q=0"]) {
        const refused = await read(path, refusing)
        expect({ path, refusing, status: refused.status }).toEqual({ path, refusing, status: 406 })
        expect((await refused.json<any>()).error.code).toBe("not_acceptable")
      }
    }
    const doc = await (await request("/openapi.json")).json<any>()
    for (const path of ["/v1/streams/{subject}/facts", "/v1/facts"]) expect(doc.paths[path].get.responses["406"].description).toContain("not_acceptable")
  })
})
