/**
 * Tenant placement over two real local D1 databases: read database 0 is the platform database (DB) and
 * read database 1 is FACTLINE_READ_DB_1. tenant-c is placed on read database 1 by the platform operator;
 * tenant-a stays on read database 0 (the tests' FACTLINE_READ_DBS_OPEN=0). Each tenant's projections, facts
 * copy, accepted keys, dead letters, batch jobs and webhook endpoints must be in its own database only, and
 * each tenant's API and analysts' queries must answer from it.
 */
import { env } from "cloudflare:workers"
import { afterEach, describe, expect, it } from "vitest"
import { drain } from "./Drain.js"
import { callCompleted, eventually, postEvents, request, tokenA, tokenPlatform, unique } from "./helpers.js"
import { brokenKeys } from "./TestModule.js"

const tokenC = "dev-token-tenant-c"
const platformDb = () => env.DB
const readDb1 = () => env.FACTLINE_READ_DB_1

const api = async (method: string, path: string, body?: unknown, token = tokenA) => {
  const response = await request(path, { method, token, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
  return { status: response.status, body: await response.json<any>() }
}

const count = async (db: D1Database, table: string, tenant: string) =>
  (await db.prepare(`SELECT COUNT(*) AS n FROM ${table} WHERE tenant_id = ?`).bind(tenant).first<{ n: number }>())!.n

afterEach(() => brokenKeys.clear())

describe("tenant placement on two read databases", () => {
  it("the operator places tenant-c on read database 1; a placed tenant keeps its database; a bad index is refused", async () => {
    const placed = await api("PUT", "/v1/tenants/tenant-c/placement", { read_database: 1 }, tokenPlatform)
    expect(placed.status).toBe(200)
    expect(placed.body).toMatchObject({ tenant_id: "tenant-c", read_database: 1, binding: "FACTLINE_READ_DB_1", writes_held_since: null })
    expect((await api("PUT", "/v1/tenants/tenant-c/placement", { read_database: 1 }, tokenPlatform)).status).toBe(200)
    const moved = await api("PUT", "/v1/tenants/tenant-c/placement", { read_database: 0 }, tokenPlatform)
    expect(moved.status).toBe(409)
    expect(moved.body.error.code).toBe("conflict")
    const bad = await api("PUT", "/v1/tenants/tenant-z/placement", { read_database: 7 }, tokenPlatform)
    expect(bad.status).toBe(400)
    // Decoded by the endpoint's schemas: a foreign field and a wrong type are named, the usage first; a path that is
    // not a tenant id is named without it (the usage is the body's); nothing is placed.
    const foreign = await api("PUT", "/v1/tenants/tenant-y/placement", { read_database: 1, database: 1 }, tokenPlatform)
    expect(foreign.status).toBe(400)
    expect(foreign.body.error.message).toMatch(/^send \{ "read_database": <index> \}: .*database/)
    expect(foreign.body.error.details.problems.map((p: { path: string }) => p.path)).toEqual(["database"])
    const wrongType = await api("PUT", "/v1/tenants/tenant-y/placement", { read_database: "1" }, tokenPlatform)
    expect(wrongType.status).toBe(400)
    expect(wrongType.body.error.details.problems.map((p: { path: string }) => p.path)).toEqual(["read_database"])
    const notAnId = await api("PUT", `/v1/tenants/${encodeURIComponent("-bad id")}/placement`, { read_database: 1 }, tokenPlatform)
    expect(notAnId.status).toBe(400)
    expect(notAnId.body.error.message).not.toMatch(/^send/)
    expect(notAnId.body.error.details.problems.map((p: { path: string }) => p.path)).toEqual(["tenant"])
    expect(await platformDb().prepare("SELECT COUNT(*) AS n FROM tenant_placements WHERE tenant_id = 'tenant-y'").first()).toEqual({ n: 0 })
    expect((await api("PUT", "/v1/tenants/tenant-c/placement", { read_database: 1 }, tokenA)).status).toBe(403)
    // The recorded placement is the platform database's; the read databases hold no placement map.
    expect(await platformDb().prepare("SELECT database FROM tenant_placements WHERE tenant_id = 'tenant-c'").first()).toEqual({ database: 1 })
    expect(await readDb1().prepare("SELECT COUNT(*) AS n FROM tenant_placements").first()).toEqual({ n: 0 })
  })

  it("each tenant's facts, projections, keys, dead letters, batch jobs and webhook endpoints live only in its own read database", async () => {
    await api("PUT", "/v1/tenants/tenant-c/placement", { read_database: 1 }, tokenPlatform)
    const callC = unique("call")
    const callA = unique("call")
    expect((await postEvents({ events: [callCompleted({ tenant_id: "tenant-c" }, { call_id: callC })] }, tokenC)).status).toBe(202)
    expect((await postEvents({ events: [callCompleted({}, { call_id: callA })] }, tokenA)).status).toBe(202)
    // A dead letter of each tenant.
    const fixable = (tenant: string) => {
      const subject = unique("fix")
      const event = { schema_version: 1, message_type: "test.fixable.happened", idempotency_key: `fixable:${subject}`, subject, tenant_id: tenant, payload: { n: 1 } }
      brokenKeys.add(event.idempotency_key)
      return event
    }
    const deadC = fixable("tenant-c")
    const deadA = fixable("tenant-a")
    expect((await postEvents({ events: [deadC] }, tokenC)).status).toBe(202)
    expect((await postEvents({ events: [deadA] }, tokenA)).status).toBe(202)
    await drain()

    const rowOf = (db: D1Database, tenant: string, call: string) =>
      db.prepare("SELECT call_id FROM calls WHERE tenant_id = ? AND call_id = ?").bind(tenant, call).first()
    await eventually(async () => (await rowOf(readDb1(), "tenant-c", callC)) ?? undefined, 20_000, "tenant-c's call row in read database 1")
    await eventually(async () => (await rowOf(platformDb(), "tenant-a", callA)) ?? undefined, 20_000, "tenant-a's call row in read database 0")

    // tenant-c: everything in read database 1, nothing in the platform database.
    for (const table of ["calls", "facts", "accepted_keys", "dead_messages"]) {
      expect(await count(readDb1(), table, "tenant-c"), `${table} of tenant-c in read database 1`).toBeGreaterThan(0)
      expect(await count(platformDb(), table, "tenant-c"), `${table} of tenant-c in the platform database`).toBe(0)
      expect(await count(readDb1(), table, "tenant-a"), `${table} of tenant-a in read database 1`).toBe(0)
    }
    expect(await count(platformDb(), "calls", "tenant-a")).toBeGreaterThan(0)

    // Batch jobs and webhook endpoints, created through the API.
    const job = await api("POST", "/v1/batches", { operation: "export", projection: "calls", format: "ndjson" }, tokenC)
    expect(job.status).toBe(202)
    const endpoint = await api("POST", "/v1/webhooks/endpoints", { url: `${env.TEST_RECEIVER_URL}/placement`, event_types: ["charge.created"] }, tokenC)
    expect(endpoint.status).toBe(201)
    expect(await count(readDb1(), "batch_jobs", "tenant-c")).toBe(1)
    expect(await count(readDb1(), "webhook_endpoints", "tenant-c")).toBe(1)
    expect(await count(platformDb(), "batch_jobs", "tenant-c")).toBe(0)
    expect(await count(platformDb(), "webhook_endpoints", "tenant-c")).toBe(0)
    await drain()
    await eventually(async () => {
      const got = await api("GET", `/v1/batches/${job.body.batch_id}`, undefined, tokenC)
      return got.body.status === "succeeded" ? got : undefined
    }, 30_000, "tenant-c's export to succeed")

    // Each tenant's API answers from its own database.
    const callsC = await api("GET", `/v1/projections/calls?call_id=${callC}`, undefined, tokenC)
    expect(callsC.status).toBe(200)
    expect(callsC.body.data.map((r: any) => r.call_id)).toEqual([callC])
    expect((await api("GET", `/v1/projections/calls?call_id=${callA}`, undefined, tokenC)).body.data).toEqual([])
    const dlqC = await api("GET", "/v1/dlq?type=test.fixable.happened&status=open&limit=200", undefined, tokenC)
    expect(dlqC.body.data.map((r: any) => r.idempotency_key)).toEqual([deadC.idempotency_key])
    // The platform scope sees both tenants' dead letters, merged from both databases, and acts on either.
    const all = await api("GET", "/v1/dlq?type=test.fixable.happened&status=open&limit=200", undefined, tokenPlatform)
    const keys = all.body.data.map((r: any) => r.idempotency_key)
    expect(keys).toContain(deadC.idempotency_key)
    expect(keys).toContain(deadA.idempotency_key)
    const recordC = all.body.data.find((r: any) => r.idempotency_key === deadC.idempotency_key)
    expect((await api("GET", `/v1/dlq/${recordC.id}`, undefined, tokenPlatform)).body.tenant_id).toBe("tenant-c")

    // Where each tenant's data lives, for its analysts.
    expect((await api("GET", "/v1/tenants/me", undefined, tokenC)).body).toMatchObject({ tenant_id: "tenant-c", read_database: 1, binding: "FACTLINE_READ_DB_1" })
    expect((await api("GET", "/v1/tenants/me", undefined, tokenA)).body).toMatchObject({ tenant_id: "tenant-a", read_database: 0, binding: "DB" })
    const listing = await api("GET", "/v1/tenants", undefined, tokenPlatform)
    expect(listing.status).toBe(200)
    expect(listing.body.databases.map((d: any) => d.binding)).toEqual(["DB", "FACTLINE_READ_DB_1"])
    expect(listing.body.databases[1].tenants).toBeGreaterThanOrEqual(1)
    expect((await api("GET", "/v1/tenants", undefined, tokenA)).status).toBe(403)
  })

  it("a rebuild spans both read databases: each tenant's rows are rebuilt where the tenant lives, and the record completes once", async () => {
    await api("PUT", "/v1/tenants/tenant-c/placement", { read_database: 1 }, tokenPlatform)
    const callC = unique("call")
    const callA = unique("call")
    await postEvents({ events: [callCompleted({ tenant_id: "tenant-c" }, { call_id: callC, duration_s: 61 })] }, tokenC)
    await postEvents({ events: [callCompleted({}, { call_id: callA, duration_s: 62 })] }, tokenA)
    await drain()
    const row = (db: D1Database, tenant: string, call: string) =>
      db.prepare("SELECT duration_s FROM calls WHERE tenant_id = ? AND call_id = ?").bind(tenant, call).first<{ duration_s: number }>()
    await eventually(async () => (await row(readDb1(), "tenant-c", callC)) ?? undefined)
    await eventually(async () => (await row(platformDb(), "tenant-a", callA)) ?? undefined)

    const started = await api("POST", "/v1/batches", { operation: "rebuild", projection: "calls" }, tokenPlatform)
    expect(started.status).toBe(202)
    await drain()
    const record = await eventually(async () => {
      const got = await platformDb().prepare("SELECT status, shadow_table FROM projection_rebuilds WHERE id = ?").bind(started.body.batch_id).first<{ status: string; shadow_table: string }>()
      return got?.status === "completed" ? got : undefined
    }, 30_000, "the rebuild to complete")
    // Rebuilt in place on each database; the shadow is gone from both; each database's copy of the record is completed.
    expect(await row(readDb1(), "tenant-c", callC)).toEqual({ duration_s: 61 })
    expect(await row(platformDb(), "tenant-a", callA)).toEqual({ duration_s: 62 })
    expect(await row(readDb1(), "tenant-a", callA)).toBeNull()
    for (const db of [platformDb(), readDb1()]) {
      expect(await db.prepare("SELECT name FROM sqlite_master WHERE name = ?").bind(record.shadow_table).first()).toBeNull()
      expect(await db.prepare("SELECT status FROM projection_rebuilds WHERE id = ?").bind(started.body.batch_id).first()).toEqual({ status: "completed" })
    }
  })
})
