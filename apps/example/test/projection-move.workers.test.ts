/**
 * A tenant larger than one read database: one projection of a tenant placed on another database with the tenant
 * move's verified, resumable copy (`POST /v1/tenants/{tenant}/moves` with `projection`, core's placement/Move), while
 * the tenant's other tables stay in its home. tenant-c lives on read database 0 (the platform database); its
 * `buyer_budgets` goes to read database 1 while a client keeps posting events (never refused: only the projection's
 * writes are held) and another reads the budget. Then every reader and writer of the projection must find it there:
 * the consumer, the query route, a rebuild, a reconcile. Its `calls` follows step by step against a read database that
 * refuses one copy page (the step is retried and the move resumes to the same end); an erasure masks the buyer's
 * calls there, the subject export reads them there, and the tenant's deletion leaves nothing of it in either database.
 */
import { env } from "cloudflare:workers"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { moveStepByStep } from "./RefusingD1.js"
import { drain } from "./Drain.js"
import { callCompleted, eventually, postEvents, request, tokenA, tokenPlatform, unique } from "./helpers.js"
import { overrideSettings } from "./worker.js"

const tokenC = "dev-token-tenant-c"

const api = async (method: string, path: string, body?: unknown, token = tokenPlatform) => {
  const response = await request(path, { method, token, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
  return { status: response.status, body: await response.json<any>() }
}

const count = async (db: D1Database, table: string, tenant: string, where = "") =>
  (await db.prepare(`SELECT COUNT(*) AS n FROM ${table} WHERE tenant_id = ?${where}`).bind(tenant).first<{ n: number }>())!.n

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const budgetOf = async (buyer: string, token = tokenC) => {
  const got = await api("GET", `/v1/projections/buyer_budgets?buyer_id=${buyer}`, undefined, token)
  if (got.status !== 200) return undefined
  return (got.body.data[0]?.charges as number | undefined) ?? 0
}

const digits = (n: number) => Array.from({ length: n }, () => Math.floor(Math.random() * 10)).join("")
const calls = (n: number, buyer: string, tenant = "tenant-c", phone = `+44 7700 9${digits(5)}`) =>
  Array.from({ length: n }, () => callCompleted({ tenant_id: tenant, schema_version: 3 }, { buyer_id: buyer, price_cents: 250, caller_phone: phone }))

const post = async (events: ReadonlyArray<unknown>, token = tokenC) => {
  const response = await postEvents({ events }, token)
  expect(response.status, await response.clone().text()).toBe(202)
}

const moveToEnd = (moveId: string, timeoutMs = 90_000) =>
  eventually(async () => {
    const got = await api("GET", `/v1/tenants/tenant-c/moves/${moveId}`)
    if (got.body.phase === "failed") throw new Error(`the move failed: ${got.body.error}`)
    return got.body.phase === "dropped" ? got.body : undefined
  }, timeoutMs, "the move to end")

const batchToEnd = async (batchId: string, token: string) => {
  await drain({ timeoutMs: 90_000 })
  return eventually(async () => {
    const got = await api("GET", `/v1/batches/${batchId}`, undefined, token)
    return ["completed", "succeeded", "failed"].includes(got.body.status) ? got.body : undefined
  }, 30_000, `batch ${batchId} to end`)
}

const buyer = unique("buyer")
const buyerA = unique("buyer")
const before = 60
const during = 40

beforeAll(async () => {
  // The key cache's bound (what an erasure and a deletion wait out) down from 60 s to 1 s for this file.
  overrideSettings({ FACTLINE_KEY_CACHE_SECONDS: "1" })
  expect((await api("PUT", "/v1/tenants/tenant-c/placement", { read_database: 0 })).status).toBe(200)
})
afterAll(() => overrideSettings(undefined))

describe("one projection of a tenant on another read database", () => {
  it("refuses what cannot be moved: an unknown projection, a projection that is not a name, the database it is on", async () => {
    const unknown = await api("POST", "/v1/tenants/tenant-c/moves", { to_database: 1, projection: "nope" })
    expect(unknown.status).toBe(400)
    expect(unknown.body.error.code).toBe("invalid_request")
    expect(unknown.body.error.message).toContain("buyer_budgets")
    expect((await api("POST", "/v1/tenants/tenant-c/moves", { to_database: 1, projection: 7 })).status).toBe(400)
    expect((await api("POST", "/v1/tenants/tenant-c/moves", { to_database: 9, projection: "calls" })).status).toBe(400)
    const here = await api("POST", "/v1/tenants/tenant-c/moves", { to_database: 0, projection: "calls" })
    expect(here.status).toBe(409)
    expect((await api("POST", "/v1/tenants/tenant-c/moves", { to_database: 1, projection: "calls" }, tokenC)).status).toBe(403)
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM projection_placements").first()).toEqual({ n: 0 })
  })

  it("tenant-c's buyer_budgets moves to read database 1 under live traffic: exact, only there, the rest at home, events never refused", async () => {
    await post(calls(30, buyer))
    await post(calls(30, buyer))
    await post(calls(10, buyerA, "tenant-a"), tokenA)
    await drain()
    await eventually(async () => ((await budgetOf(buyer)) === before ? true : undefined), 30_000, "tenant-c's budget before the move")
    const tenantA = { budgets: await count(env.DB, "buyer_budgets", "tenant-a"), applied: await count(env.DB, "projection_applied", "tenant-a") }

    const started = await api("POST", "/v1/tenants/tenant-c/moves", { to_database: 1, projection: "buyer_budgets" })
    expect(started.status, JSON.stringify(started.body)).toBe(202)
    expect(started.body).toMatchObject({ tenant_id: "tenant-c", from_database: 0, to_database: 1, projection: "buyer_budgets", phase: "frozen" })
    // One move of a tenant at a time (its home or a projection); no rebuild meanwhile.
    expect((await api("POST", "/v1/tenants/tenant-c/moves", { to_database: 1 })).status).toBe(409)
    expect((await api("POST", "/v1/batches", { operation: "rebuild", projection: "buyer_budgets" })).status).toBe(409)
    // Only the projection is held: the tenant's own writes are not.
    expect((await api("GET", "/v1/tenants/me", undefined, tokenC)).body.writes_held_since).toBeNull()

    let moving = true
    const reads: Array<number> = []
    const reader = (async () => {
      while (moving) {
        const charges = await budgetOf(buyer)
        if (charges !== undefined) reads.push(charges)
        await sleep(100)
      }
    })()
    const writer = (async () => {
      for (let i = 0; i < during / 5; i++) {
        await post(calls(5, buyer)) // a 202 every time: a projection's move never refuses the tenant's events
        await sleep(150)
      }
    })()
    const done = await moveToEnd(started.body.move_id)
    await writer
    moving = false
    await reader
    await drain()
    await eventually(async () => ((await budgetOf(buyer)) === before + during ? true : undefined), 30_000, "tenant-c's budget after the move")

    expect(done.copied).toHaveProperty("buyer_budgets")
    expect(Object.keys(done.verified).sort()).toEqual(["buyer_budgets", "projection_applied"])
    expect(Object.values(done.verified).every((v: any) => v.equal)).toBe(true)
    // Never a read from a half-copied database: the budget never went back.
    expect(reads.length).toBeGreaterThan(0)
    for (let i = 1; i < reads.length; i++) expect(reads[i]!, `read ${i} of ${reads.join(",")}`).toBeGreaterThanOrEqual(reads[i - 1]!)
    expect(Math.min(...reads)).toBeGreaterThanOrEqual(before)

    // Exact, and only in read database 1: the rows and their applied set (each fact applied once).
    expect(await env.DB.prepare("SELECT database, frozen_since FROM projection_placements WHERE tenant_id = 'tenant-c' AND projection = 'buyer_budgets'").first()).toEqual({ database: 1, frozen_since: null })
    expect(await env.FACTLINE_READ_DB_1.prepare("SELECT charges, spent_cents FROM buyer_budgets WHERE tenant_id = 'tenant-c' AND buyer_id = ?").bind(buyer).first())
      .toEqual({ charges: before + during, spent_cents: 250 * (before + during) })
    expect(await count(env.FACTLINE_READ_DB_1, "projection_applied", "tenant-c", " AND projection = 'buyer_budgets'")).toBe(before + during)
    expect(await count(env.DB, "buyer_budgets", "tenant-c")).toBe(0)
    expect(await count(env.DB, "projection_applied", "tenant-c", " AND projection = 'buyer_budgets'")).toBe(0)
    // The tenant's other tables stay at home: its calls (every one of them), its accepted keys.
    expect(await count(env.DB, "calls", "tenant-c")).toBe(before + during)
    expect(await count(env.FACTLINE_READ_DB_1, "calls", "tenant-c")).toBe(0)
    expect(await count(env.DB, "accepted_keys", "tenant-c")).toBe(before + during)
    expect(await count(env.FACTLINE_READ_DB_1, "accepted_keys", "tenant-c")).toBe(0)
    expect(await env.DB.prepare("SELECT database FROM tenant_placements WHERE tenant_id = 'tenant-c'").first()).toEqual({ database: 0 })
    // The tenant's analysts are told where its rows are: home on DB, buyer_budgets on read database 1.
    expect((await api("GET", "/v1/tenants/me", undefined, tokenC)).body).toMatchObject({
      read_database: 0, binding: "DB", projections: { buyer_budgets: { read_database: 1, binding: "FACTLINE_READ_DB_1", writes_held_since: null } }
    })
    // tenant-a untouched.
    expect(await count(env.DB, "buyer_budgets", "tenant-a")).toBe(tenantA.budgets)
    expect(await count(env.DB, "projection_applied", "tenant-a")).toBe(tenantA.applied)
    expect(await budgetOf(buyerA, tokenA)).toBe(10)
  }, 180_000)

  it("a rebuild and a reconcile of the projection write where it lives", async () => {
    const row = (db: D1Database) => db.prepare("SELECT charges, spent_cents FROM buyer_budgets WHERE tenant_id = 'tenant-c' AND buyer_id = ?").bind(buyer).first()
    const exact = { charges: before + during, spent_cents: 250 * (before + during) }
    // The query route answers from read database 1: a change made there alone is what it reads.
    await env.FACTLINE_READ_DB_1.prepare("UPDATE buyer_budgets SET charges = 1 WHERE tenant_id = 'tenant-c' AND buyer_id = ?").bind(buyer).run()
    expect(await budgetOf(buyer)).toBe(1)

    const rebuild = await api("POST", "/v1/batches", { operation: "rebuild", projection: "buyer_budgets" })
    expect(rebuild.status, JSON.stringify(rebuild.body)).toBe(202)
    expect(await batchToEnd(rebuild.body.batch_id, tokenPlatform)).toMatchObject({ status: "completed" })
    expect(await row(env.FACTLINE_READ_DB_1)).toEqual(exact)
    expect(await count(env.DB, "buyer_budgets", "tenant-c")).toBe(0)
    expect(await count(env.FACTLINE_READ_DB_1, "projection_applied", "tenant-c", " AND projection = 'buyer_budgets'")).toBe(before + during)
    expect(await budgetOf(buyerA, tokenA)).toBe(10)

    await env.FACTLINE_READ_DB_1.prepare("UPDATE buyer_budgets SET spent_cents = 7 WHERE tenant_id = 'tenant-c' AND buyer_id = ?").bind(buyer).run()
    const reconcile = await api("POST", "/v1/batches", { operation: "reconcile", projection: "buyer_budgets", repair: true }, tokenC)
    expect(reconcile.status, JSON.stringify(reconcile.body)).toBe(202)
    expect(await batchToEnd(reconcile.body.batch_id, tokenC)).toMatchObject({ status: "succeeded", failed: 1, succeeded: 1 })
    expect(await row(env.FACTLINE_READ_DB_1)).toEqual(exact)
    expect(await count(env.DB, "buyer_budgets", "tenant-c")).toBe(0)
    // Its shadow was made and dropped beside the projection; none anywhere now.
    for (const db of [env.DB, env.FACTLINE_READ_DB_1]) {
      expect((await db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'buyer_budgets__%'").all()).results).toEqual([])
    }
  }, 180_000)

  it("a move of calls interrupted by a refused copy page resumes to the same end; erasure, the subject export and the tenant's deletion find it there", async () => {
    const erased = unique("buyer")
    const phone = `+44 7700 9${digits(5)}`
    await post(calls(3, erased, "tenant-c", phone))
    await drain()
    const callsBefore = await count(env.DB, "calls", "tenant-c")
    expect(callsBefore).toBe(before + during + 3)

    // The move run step by step, its messages recorded instead of sent, against a read database 1 that refuses a copy page once.
    const { moveId, refused, retried } = await moveStepByStep("tenant-c", { to_database: 1, projection: "calls" }, "calls", { FACTLINE_KEY_CACHE_SECONDS: "1" })
    expect(refused).toBe(1)
    expect(retried).toBeGreaterThanOrEqual(1)
    const moved = await api("GET", `/v1/tenants/tenant-c/moves/${moveId}`)
    expect(moved.body).toMatchObject({ phase: "dropped", projection: "calls", error: null })
    expect(moved.body.verified.calls).toEqual({ rows: callsBefore, equal: true })
    expect(await count(env.FACTLINE_READ_DB_1, "calls", "tenant-c")).toBe(callsBefore)
    expect(await count(env.DB, "calls", "tenant-c")).toBe(0)
    expect((await api("GET", `/v1/projections/calls?buyer_id=${erased}`, undefined, tokenC)).body.data).toHaveLength(3)

    // The subject export reads the buyer's calls where they live; the erasure masks them there.
    const exported = await api("GET", `/v1/subjects/${erased}/export`, undefined, tokenC)
    expect(exported.status, JSON.stringify(exported.body)).toBe(200)
    expect(exported.body.projections.find((p: any) => p.projection === "calls").rows).toHaveLength(3)
    const erasure = await api("POST", `/v1/subjects/${erased}/erase`, undefined, tokenC)
    expect(erasure.status, JSON.stringify(erasure.body)).toBe(202)
    const ended = await eventually(async () => {
      await drain({ timeoutMs: 60_000 })
      const got = await api("GET", `/v1/subjects/${erased}/erasure`, undefined, tokenC)
      return got.body.phase === "erased" || got.body.phase === "failed" ? got.body : undefined
    }, 90_000, "the erasure to end")
    expect(ended.phase, JSON.stringify(ended)).toBe("erased")
    expect(ended.removed["projection:calls"]).toEqual({ masked: 3 })
    const masked = (await env.FACTLINE_READ_DB_1.prepare("SELECT caller_phone_masked FROM calls WHERE tenant_id = 'tenant-c' AND buyer_id = ?").bind(erased).all<{ caller_phone_masked: string }>()).results
    expect(masked).toHaveLength(3)
    expect(masked.map((r) => r.caller_phone_masked)).toEqual(["[erased]", "[erased]", "[erased]"])

    // The tenant's deletion: nothing of tenant-c in any table of either database, its projection placements included.
    const deletion = await api("DELETE", "/v1/tenants/tenant-c")
    expect(deletion.status, JSON.stringify(deletion.body)).toBe(202)
    const deleted = await eventually(async () => {
      await drain({ timeoutMs: 60_000 })
      const got = await api("GET", "/v1/tenants/tenant-c/deletion")
      if (got.body.phase === "failed") throw new Error(`the deletion failed: ${got.body.error}`)
      return got.body.phase === "deleted" ? got.body : undefined
    }, 150_000, "the deletion to end")
    expect(deleted.phase).toBe("deleted")
    for (const db of [env.DB, env.FACTLINE_READ_DB_1]) {
      const names = (await db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%' AND name <> 'd1_migrations' AND name <> 'tenant_deletions'").all<{ name: string }>()).results
      const tables: Array<{ name: string }> = []
      for (const { name } of names) {
        const columns = (await db.prepare(`SELECT name FROM pragma_table_info('${name}')`).all<{ name: string }>()).results
        if (columns.some((c) => c.name === "tenant_id")) tables.push({ name })
      }
      expect(tables.map((t) => t.name)).toContain("buyer_budgets")
      for (const { name } of tables) expect(await count(db, name, "tenant-c"), `${name} of tenant-c`).toBe(0)
    }
    expect(await budgetOf(buyerA, tokenA)).toBe(10)
  }, 300_000)
})
