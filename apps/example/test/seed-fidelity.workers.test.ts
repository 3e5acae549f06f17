/**
 * Defects a hostile client found (issue 35), each pinned by a test that failed before its fix:
 * - recover re-sent dead-lettered events (with FACTLINE_KEEP_ACCEPTED), doubling open dead letters;
 * - recover and the runs view took impossible times (2020-02-30 rolled over to March 1st; a trailing NUL);
 * - placement took any tenant id, and nothing removed a placement;
 * - escalate took any body, against its own schema;
 * - JSON answers lacked `x-content-type-options: nosniff`; a long URL got a plain-text 414.
 */
import { env } from "cloudflare:workers"
import { afterEach, describe, expect, it } from "vitest"
import { drain } from "./Drain.js"
import { deadMessages, postEvents, request, tokenA, tokenPlatform, unique } from "./helpers.js"
import { brokenKeys } from "./TestModule.js"
import { overrideSettings } from "./worker.js"

const api = async (method: string, path: string, body?: unknown, token = tokenA, headers: Record<string, string> = {}) => {
  const response = await request(path, { method, token, headers, ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }) })
  return { status: response.status, headers: response.headers, body: await response.json<any>() }
}

const fixable = (n: number) => {
  const subject = unique("fix")
  return { schema_version: 1, message_type: "test.fixable.happened", idempotency_key: `fixable:${subject}`, subject, tenant_id: "tenant-a", payload: { n } }
}

afterEach(() => {
  brokenKeys.clear()
  overrideSettings(undefined)
})

describe("recover never re-sends a dead-lettered event", () => {
  it("open, skipped and escalated dead letters count as decided: each message keeps exactly its one record, however often recover runs", async () => {
    overrideSettings({ FACTLINE_KEEP_ACCEPTED: "10m" })
    const since = new Date(Date.now() - 1_000).toISOString()
    const events = [fixable(1), fixable(2), fixable(3)]
    for (const e of events) brokenKeys.add(e.idempotency_key)
    expect((await postEvents({ events })).status).toBe(202)
    await drain()
    const [open, skipped, escalated] = await Promise.all(events.map(async (e) => {
      const records = await deadMessages(e.idempotency_key)
      expect(records, e.idempotency_key).toHaveLength(1)
      return records[0]!
    }))
    expect((await api("POST", `/v1/dlq/${skipped!.id}/skip`, { reason: "not needed" })).status).toBe(200)
    expect((await api("POST", `/v1/dlq/${escalated!.id}/escalate`, { note: "billing" })).status).toBe(200)

    const dry = await api("POST", "/v1/recover", { since, dry_run: true }, tokenPlatform)
    expect(dry.status).toBe(200)
    expect(dry.body.events).toMatchObject({ resent: 0 })
    // The skipped one has its reconciliation fact (caused by its key); the open and escalated ones only their records.
    expect(dry.body.events.decided).toBeGreaterThanOrEqual(3)
    expect(dry.body.events.dead_lettered).toBeGreaterThanOrEqual(2)
    for (let round = 0; round < 2; round++) {
      const report = await api("POST", "/v1/recover", { since }, tokenPlatform)
      expect(report.body.events.resent, `round ${round}`).toBe(0)
      await drain()
    }
    const after = await Promise.all(events.map((e) => deadMessages(e.idempotency_key)))
    expect(after.map((records) => records.map((r) => [r.id, r.status]))).toEqual([
      [[open!.id, "open"]], [[skipped!.id, "skipped"]], [[escalated!.id, "escalated"]]
    ])
  })

  it("a replayed dead letter whose copy never arrived is still recovered: a replayed record alone does not hold the event", async () => {
    overrideSettings({ FACTLINE_KEEP_ACCEPTED: "10m" })
    const since = new Date(Date.now() - 1_000).toISOString()
    const event = fixable(4)
    brokenKeys.add(event.idempotency_key)
    expect((await postEvents({ events: [event] })).status).toBe(202)
    await drain()
    const [record] = await deadMessages(event.idempotency_key)
    // As if the replay had been sent and its copy lost with the local queues.
    await env.DB.prepare("UPDATE dead_messages SET status = 'replayed' WHERE id = ?").bind(record!.id).run()
    brokenKeys.clear()
    const report = await api("POST", "/v1/recover", { since }, tokenPlatform)
    expect(report.body.events.resent).toBeGreaterThanOrEqual(1)
    await drain()
    const stream = await api("GET", `/v1/streams/${event.subject}/facts`)
    expect(stream.body.facts.map((f: any) => f.type)).toEqual(["fixable_done"])
  })
})

describe("times are real times", () => {
  it("recover refuses 2020-02-30, hour 24, a 13th month and a trailing NUL (400 naming since), and nothing is recovered", async () => {
    for (const since of ["2020-02-30T00:00:00Z", "2021-02-29T00:00:00Z", "2026-11-28T24:00:00Z", "2026-13-01T00:00:00Z", "2026-11-28T00:00:00Z\u0000", "2026-11-28T00:60:00Z"]) {
      const r = await api("POST", "/v1/recover", { since, dry_run: true }, tokenPlatform)
      expect(r.status, JSON.stringify(since)).toBe(400)
      expect(r.body.error.details.problems.map((p: any) => p.path), JSON.stringify(since)).toEqual(["since"])
    }
    expect((await api("POST", "/v1/recover", { since: "2024-02-29T00:00:00+01:00", dry_run: true }, tokenPlatform)).status).toBe(200)
  })

  it("an endpoint's recover refuses an impossible since too (400 naming since), and takes a real one", async () => {
    const created = await api("POST", "/v1/webhooks/endpoints", { url: `${env.TEST_RECEIVER_URL}/hooks/${unique("since")}`, event_types: ["charge.created"] })
    expect(created.status).toBe(201)
    const path = `/v1/webhooks/endpoints/${created.body.id}/recover`
    for (const since of ["2020-02-30T00:00:00Z", "2026-11-28T00:00:00Z\u0000", "yesterday"]) {
      const r = await api("POST", path, { since })
      expect(r.status, JSON.stringify(since)).toBe(400)
      expect(r.body.error.details.problems.map((p: any) => p.path)).toEqual(["since"])
    }
    expect((await api("POST", path, { since: "2024-02-29T00:00:00Z" })).status).toBe(202)
  })

  it("an endpoint created with enabled: false is created disabled (the field was accepted and ignored)", async () => {
    const created = await api("POST", "/v1/webhooks/endpoints", { url: `${env.TEST_RECEIVER_URL}/hooks/${unique("off")}`, event_types: ["charge.created"], enabled: false })
    expect(created.status).toBe(201)
    expect(created.body.enabled).toBe(false)
    expect((await api("GET", `/v1/webhooks/endpoints/${created.body.id}`)).body.enabled).toBe(false)
  })

  it("the runs view refuses an impossible since", async () => {
    const r = await api("GET", `/v1/runs?since=${encodeURIComponent("2020-02-30T00:00:00Z")}`, undefined, tokenPlatform)
    expect(r.status).toBe(400)
    expect(JSON.stringify(r.body)).toContain("since")
  })
})

describe("placement takes tenant ids only, and a placement that holds nothing can be removed", () => {
  const placements = async () => (await api("GET", "/v1/tenants", undefined, tokenPlatform)).body

  it("PUT refuses what is not a tenant id (400 naming tenant) and stores nothing", async () => {
    const before = await placements()
    for (const tenant of ["\u0000", "' OR 1=1 --", "x".repeat(5_000), "\u202Eevil", "a/b", "-lead"]) {
      const r = await api("PUT", `/v1/tenants/${encodeURIComponent(tenant)}/placement`, { read_database: 0 }, tokenPlatform)
      expect(r.status, JSON.stringify(tenant.slice(0, 20))).toBe(400)
      expect(r.body.error.details.problems[0].path).toBe("tenant")
    }
    const after = await placements()
    expect(after.data.length).toBe(before.data.length)
    expect(after.databases).toEqual(before.databases)
    const stored = await env.DB.prepare("SELECT COUNT(*) AS n FROM tenant_placements WHERE tenant_id IN (?, ?)").bind("' OR 1=1 --", "\u0000").first<{ n: number }>()
    expect(stored!.n).toBe(0)
    // A body that is not the schema's: unknown field, wrong type.
    for (const body of [{ read_database: 0, extra: 1 }, { read_database: "0" }, null, []]) {
      expect((await api("PUT", `/v1/tenants/${unique("t")}/placement`, body, tokenPlatform)).status, JSON.stringify(body)).toBe(400)
    }
  })

  it("DELETE removes an unused placement (neither listed nor counted; its next use puts it back where it was), refuses one that holds data, and deletes an id placed before ids were checked", async () => {
    const tenant = unique("t").replaceAll("_", "-")
    expect((await api("PUT", `/v1/tenants/${tenant}/placement`, { read_database: 1 }, tokenPlatform)).status).toBe(200)
    const counted = (await placements()).databases[1].tenants
    expect((await placements()).data.map((p: any) => p.tenant_id)).toContain(tenant)
    const removed = await api("DELETE", `/v1/tenants/${tenant}/placement`, undefined, tokenPlatform)
    expect(removed.status).toBe(200)
    expect(removed.body).toEqual({ tenant_id: tenant, read_database: 1, outcome: "removed" })
    const after = await placements()
    expect(after.data.map((p: any) => p.tenant_id)).not.toContain(tenant)
    expect(after.databases[1].tenants).toBe(counted - 1)
    expect((await api("DELETE", `/v1/tenants/${tenant}/placement`, undefined, tokenPlatform)).status).toBe(404)
    // Placed again on the same database: back, listed.
    expect((await api("PUT", `/v1/tenants/${tenant}/placement`, { read_database: 1 }, tokenPlatform)).body).toMatchObject({ tenant_id: tenant, read_database: 1 })
    expect((await placements()).data.map((p: any) => p.tenant_id)).toContain(tenant)

    // tenant-a holds a ledger and rows: refused, named.
    expect((await postEvents({ events: [fixable(5)] })).status).toBe(202)
    await drain()
    const holding = await api("DELETE", "/v1/tenants/tenant-a/placement", undefined, tokenPlatform)
    expect(holding.status).toBe(409)
    expect(holding.body.error.message).toContain("the ledger")
    expect((await placements()).data.map((p: any) => p.tenant_id)).toContain("tenant-a")

    // An id placed before ids were checked: deleted outright.
    const garbage = "' OR 1=1 --"
    await env.DB.prepare("INSERT INTO tenant_placements (tenant_id, database, placed_at) VALUES (?, 0, ?)").bind(garbage, new Date().toISOString()).run()
    const deleted = await api("DELETE", `/v1/tenants/${encodeURIComponent(garbage)}/placement`, undefined, tokenPlatform)
    expect(deleted.body).toEqual({ tenant_id: garbage, read_database: 0, outcome: "deleted" })
    expect(await env.DB.prepare("SELECT 1 FROM tenant_placements WHERE tenant_id = ?").bind(garbage).first()).toBeNull()
    expect((await api("DELETE", `/v1/tenants/${tenant}/placement`, undefined, tokenA)).status).toBe(403)
  })

  it("a removed placement's next use clears the tombstone and keeps the database (a writer that trusted it never splits the tenant)", async () => {
    const tenant = unique("t").replaceAll("_", "-")
    expect((await api("PUT", `/v1/tenants/${tenant}/placement`, { read_database: 1 }, tokenPlatform)).status).toBe(200)
    expect((await api("DELETE", `/v1/tenants/${tenant}/placement`, undefined, tokenPlatform)).status).toBe(200)
    // Placing it elsewhere is a move, as for any placed tenant; where it was, it comes back.
    expect((await api("PUT", `/v1/tenants/${tenant}/placement`, { read_database: 0 }, tokenPlatform)).status).toBe(409)
    const row = await env.DB.prepare("SELECT database, removed_at FROM tenant_placements WHERE tenant_id = ?").bind(tenant).first<{ database: number; removed_at: string | null }>()
    expect(row).toEqual({ database: 1, removed_at: null })
  })
})

describe("escalate decodes its body by its schema", () => {
  it("refuses null, an array, a string, an unknown field, a 100k-key object and a non-string note (400, the record still open); takes {}, a note, or no body", async () => {
    const events = [fixable(6), fixable(7), fixable(8)]
    for (const e of events) brokenKeys.add(e.idempotency_key)
    expect((await postEvents({ events })).status).toBe(202)
    await drain()
    const [a, b, c] = (await Promise.all(events.map(async (e) => (await deadMessages(e.idempotency_key))[0]))).map((r) => r!)
    const huge = Object.fromEntries(Array.from({ length: 100_000 }, (_, i) => [`k${i}`, i]))
    for (const body of ["null", "[]", "\"x\"", { note: "x", surprise: 1 }, huge, { note: null }, { note: 5 }, { note: "y".repeat(1_001) }]) {
      const r = await api("POST", `/v1/dlq/${a!.id}/escalate`, body)
      expect(r.status, JSON.stringify(body).slice(0, 40)).toBe(400)
      expect(r.body.error.code).toBe("invalid_request")
      expect(JSON.stringify(r.body).length).toBeLessThan(20_000)
    }
    expect((await deadMessages(events[0]!.idempotency_key))[0]!.status).toBe("open")
    expect((await api("POST", `/v1/dlq/${a!.id}/escalate`, {})).body).toMatchObject({ status: "escalated" })
    const noted = await api("POST", `/v1/dlq/${b!.id}/escalate`, { note: "for billing" })
    expect(noted.body.history).toEqual([expect.objectContaining({ action: "escalated", note: "for billing" })])
    const bare = await request(`/v1/dlq/${c!.id}/escalate`, { method: "POST", token: tokenA })
    expect(bare.status).toBe(200)
  })

  it("skip refuses a blank reason and unknown fields by the same schema", async () => {
    const [event] = [fixable(9)]
    brokenKeys.add(event.idempotency_key)
    expect((await postEvents({ events: [event] })).status).toBe(202)
    await drain()
    const [record] = await deadMessages(event.idempotency_key)
    for (const body of [{}, { reason: "   " }, { reason: "ok", extra: true }, { reason: 1 }]) {
      expect((await api("POST", `/v1/dlq/${record!.id}/skip`, body)).status, JSON.stringify(body)).toBe(400)
    }
    expect((await deadMessages(event.idempotency_key))[0]!.status).toBe("open")
  })
})

describe("response headers", () => {
  it("every JSON answer — success, problem, not found — carries x-content-type-options: nosniff", async () => {
    for (const [path, token] of [["/v1/dlq?limit=1", tokenA], ["/v1/dlq?limit=0", tokenA], ["/v1/nothing-here", tokenA], ["/v1/dlq", undefined]] as const) {
      const response = await request(path, { token })
      expect(response.headers.get("x-content-type-options"), path).toBe("nosniff")
      await response.body?.cancel()
    }
  })

  it("a URL over 8 KiB is a JSON 414 uri_too_long, before authentication", async () => {
    const response = await request(`/v1/dlq?type=${"x".repeat(100_000)}`)
    expect(response.status).toBe(414)
    expect(response.headers.get("content-type")).toContain("application/json")
    expect(((await response.json()) as any).error.code).toBe("uri_too_long")
  })
})
