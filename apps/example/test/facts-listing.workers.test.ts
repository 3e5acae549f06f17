/**
 * GET /v1/facts and the D1 facts copy (issue 19, item 5): one stream's facts are read from the ledger (no copy
 * row, no index needed), in stream order, paged by an opaque sequence cursor; the copy (`FACTLINE_FACTS_COPY`:
 * none by default, all, or a list of types) gets only the types it names, and a listing across streams that the
 * copy cannot answer completely is a 409 naming the setting — never a page that silently misses facts.
 */
import { env } from "cloudflare:workers"
import { Effect } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { drain } from "./Drain.js"
import { callCompleted, ledger, postEvents, request, tokenA, tokenB, unique } from "./helpers.js"
import { overrideSettings } from "./worker.js"

const get = async (path: string, token = tokenA) => {
  const response = await request(path, { token })
  return { status: response.status, body: await response.json<any>() }
}

/** Appends facts of these types to a stream straight into the ledger (nothing relayed: nothing reaches the D1 copy). */
const appendToLedger = async (stream: string, types: ReadonlyArray<string>) => {
  const facts = types.map((type, i) => ({
    fact_id: `f_${stream}_${i + 1}`, type, data: { i: i + 1 }, causation_id: `k_${stream}`, correlation_id: `c_${stream}`,
    caused_by: "test", created_at: new Date(Date.UTC(2026, 0, 1, 0, 0, 0, i)).toISOString()
  }))
  const [result] = await Effect.runPromise(ledger().append([{ tenant_id: "tenant-a", stream, facts }]))
  expect(result?.status).toBe("appended")
}

const copied = async (stream: string) =>
  (await env.DB.prepare("SELECT type FROM facts WHERE tenant_id = 'tenant-a' AND stream = ? ORDER BY sequence").bind(stream).all<{ type: string }>()).results.map((r) => r.type)

afterEach(() => overrideSettings(undefined))

describe("GET /v1/facts?subject=: the stream from the ledger", () => {
  it("answers the stream in sequence order, a page at a time by its cursor, with nothing in the D1 copy", async () => {
    const stream = unique("listed")
    await appendToLedger(stream, ["outcome", "note", "outcome", "note", "note", "outcome", "note"])
    expect(await copied(stream)).toEqual([])
    const pages: Array<any> = []
    for (let cursor: string | null = ""; cursor !== null;) {
      const page = await get(`/v1/facts?subject=${stream}&limit=3${cursor ? `&cursor=${cursor}` : ""}`)
      expect(page.status).toBe(200)
      pages.push(page.body)
      cursor = page.body.next_cursor
    }
    expect(pages.map((p) => p.data.map((f: any) => f.sequence))).toEqual([[1, 2, 3], [4, 5, 6], [7]])
    expect(pages[0].data[0]).toEqual({
      fact_id: `f_${stream}_1`, subject: stream, sequence: 1, type: "outcome", causation_id: `k_${stream}`, correlation_id: `c_${stream}`,
      caused_by: "test", created_at: "2026-01-01T00:00:00.000Z", traceparent: null, schema_version: 1, data: { i: 1 }
    })
    // A type, kept while paging: a page of exactly `limit` matching facts, then the rest.
    const first = await get(`/v1/facts?subject=${stream}&type=note&limit=2`)
    expect(first.body.data.map((f: any) => f.sequence)).toEqual([2, 4])
    const rest = await get(`/v1/facts?subject=${stream}&type=note&limit=2&cursor=${first.body.next_cursor}`)
    expect(rest.body.data.map((f: any) => f.sequence)).toEqual([5, 7])
    expect(rest.body.next_cursor).toBe(null)
    // An unknown stream, another tenant's stream: an empty page.
    expect((await get(`/v1/facts?subject=${unique("nothing")}`)).body).toEqual({ data: [], next_cursor: null })
    expect((await get(`/v1/facts?subject=${stream}`, tokenB)).body).toEqual({ data: [], next_cursor: null })
  })

  it("with a type, a page reads a bounded part of the stream: a fact past it comes on the next page, found by the cursor", async () => {
    const stream = unique("long")
    // 4,100 facts, one `rare` at sequence 4,051: past the 4 × 1,000 facts one page reads.
    await appendToLedger(stream, Array.from({ length: 4_100 }, (_, i) => (i + 1 === 4_051 ? "rare" : "filler")))
    const first = await get(`/v1/facts?subject=${stream}&type=rare`)
    expect(first.status).toBe(200)
    expect(first.body.data).toEqual([])
    expect(first.body.next_cursor).toEqual(expect.any(String))
    const second = await get(`/v1/facts?subject=${stream}&type=rare&cursor=${first.body.next_cursor}`)
    expect(second.body.data.map((f: any) => [f.sequence, f.type])).toEqual([[4_051, "rare"]])
    expect(second.body.next_cursor).toBe(null)
  })

  it("cursors are opaque, checked, and belong to the listing that gave them: anything else is a 400", async () => {
    const stream = unique("cursors")
    await appendToLedger(stream, ["outcome", "outcome", "outcome"])
    const streamCursor = (await get(`/v1/facts?subject=${stream}&limit=1`)).body.next_cursor as string
    const copyCursor = btoa(JSON.stringify(["2026-01-01T00:00:00.000Z", "f_x"])).replace(/=+$/, "")
    const negative = btoa(JSON.stringify([-1])).replace(/=+$/, "")
    for (const path of [
      `/v1/facts?subject=${stream}&cursor=not-a-cursor!!`,
      `/v1/facts?subject=${stream}&cursor=${copyCursor}`,
      `/v1/facts?subject=${stream}&cursor=${negative}`,
      `/v1/facts?cursor=${streamCursor}`
    ]) {
      const { status, body } = await get(path)
      expect({ path, status }).toEqual({ path, status: 400 })
      expect(body.error.code).toBe("invalid_query")
      expect(body.error.details.problems).toEqual([{ path: "cursor", message: "malformed cursor; use next_cursor from a previous page of the same listing" }])
    }
  })
})

describe("FACTLINE_FACTS_COPY: which facts the D1 copy gets, and what the listing across streams answers", () => {
  it("none: the pipeline writes no facts row; a subject is still answered (from the ledger), a listing across streams is a 409 naming the setting", async () => {
    overrideSettings({ FACTLINE_FACTS_COPY: "none" })
    const call = callCompleted()
    expect((await postEvents(call)).status).toBe(202)
    await drain()
    expect(await copied(call.subject)).toEqual([])
    // The projections still got every fact.
    expect(await env.DB.prepare("SELECT charged_cents FROM calls WHERE tenant_id = 'tenant-a' AND call_id = ?").bind(call.subject).first()).toEqual({ charged_cents: 250 })
    const listed = await get(`/v1/facts?subject=${call.subject}`)
    expect(listed.body.data.map((f: any) => f.type)).toEqual(["outcome", "qualification", "charge"])
    for (const path of ["/v1/facts", "/v1/facts?type=charge"]) {
      const refused = await get(path)
      expect({ path, status: refused.status, code: refused.body.error.code }).toEqual({ path, status: 409, code: "facts_not_copied" })
      expect(refused.body.error.message).toContain("FACTLINE_FACTS_COPY=none")
      expect(refused.body.error.message).toContain("subject=")
    }
  })

  it("a list of types: only those types are copied; a listing of one of them is answered, of another type or of every type a 409", async () => {
    overrideSettings({ FACTLINE_FACTS_COPY: "charge,refund" })
    const call = callCompleted()
    expect((await postEvents(call)).status).toBe(202)
    await drain()
    expect(await copied(call.subject)).toEqual(["charge"])
    const charges = await get("/v1/facts?type=charge&limit=500")
    expect(charges.status).toBe(200)
    expect(charges.body.data.filter((f: any) => f.subject === call.subject).map((f: any) => f.type)).toEqual(["charge"])
    for (const path of ["/v1/facts?type=outcome", "/v1/facts"]) {
      const refused = await get(path)
      expect({ path, status: refused.status, code: refused.body.error.code }).toEqual({ path, status: 409, code: "facts_not_copied" })
      expect(refused.body.error.message).toContain("FACTLINE_FACTS_COPY=charge,refund")
    }
  })

  it("all (the example's setting): every fact of the stream is copied, and the listing across streams answers every type", async () => {
    const call = callCompleted()
    expect((await postEvents(call)).status).toBe(202)
    await drain()
    expect(await copied(call.subject)).toEqual(["outcome", "qualification", "charge"])
    expect((await get("/v1/facts?limit=1")).status).toBe(200)
    expect((await get("/v1/facts?type=qualification&limit=1")).status).toBe(200)
  })
})
