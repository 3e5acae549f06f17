/**
 * A projection in parts (issue 39 part 4): one tenant's projection too large for one read database split into parts
 * by a stable hash of its key (`POST /v1/tenants/{tenant}/moves` with `projection` and `parts`, core's
 * placement/Split.ts and Parts.ts). tenant-c's `calls` (read database 0, its home) is split into 2 parts — part 0
 * stays on 0, part 1 goes to read database 1 — while a client posts calls (never refused) and another reads. Then
 * every row is in its part and nowhere else, key reads and list queries (filters, paging with cursors) answer what
 * they answered before, a rebuild and an erasure work across the parts, a reconcile is refused; `buyer_budgets`
 * (additive: its applied set) is split step by step against a database refusing one copy page and resumes.
 */
import { env } from "cloudflare:workers"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ProjectionParts } from "@factline/core/runtime"
import { drain } from "./Drain.js"
import { callCompleted, eventually, postEvents, request, tokenA, tokenPlatform, unique } from "./helpers.js"
import { moveStepByStep } from "./RefusingD1.js"
import { overrideSettings } from "./worker.js"

const tokenC = "dev-token-tenant-c"

const api = async (method: string, path: string, body?: unknown, token = tokenPlatform) => {
  const response = await request(path, { method, token, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
  return { status: response.status, body: await response.json<any>() }
}

const count = async (db: D1Database, table: string, tenant: string, where = "") =>
  (await db.prepare(`SELECT COUNT(*) AS n FROM ${table} WHERE tenant_id = ?${where}`).bind(tenant).first<{ n: number }>())!.n

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const calls = (n: number, buyer: string, tenant = "tenant-c", duration_s = 75) =>
  Array.from({ length: n }, () => callCompleted({ tenant_id: tenant, schema_version: 3 }, { buyer_id: buyer, price_cents: 250, duration_s, caller_phone: "+44 7700 900123" }))

const post = async (events: ReadonlyArray<unknown>, token = tokenC) => {
  const response = await postEvents({ events }, token)
  expect(response.status, await response.clone().text()).toBe(202)
}

/** Every page of a listing, from the first to the one without a cursor: what a client paging through it sees. */
const pages = async (query: string, token = tokenC) => {
  const out: Array<{ data: Array<Record<string, unknown>>; next_cursor: string | null }> = []
  for (let cursor: string | null = null; ;) {
    const got = await api("GET", `/v1/projections/calls?${query}${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`, undefined, token)
    expect(got.status, JSON.stringify(got.body)).toBe(200)
    out.push({ data: got.body.data, next_cursor: got.body.next_cursor })
    cursor = got.body.next_cursor
    if (cursor === null) return out
    expect(out.length).toBeLessThan(500)
  }
}

const moveToEnd = (moveId: string, timeoutMs = 120_000) =>
  eventually(async () => {
    const got = await api("GET", `/v1/tenants/tenant-c/moves/${moveId}`)
    if (got.body.phase === "failed") throw new Error(`the split failed: ${got.body.error}`)
    return got.body.phase === "dropped" ? got.body : undefined
  }, timeoutMs, "the split to end")

const batchToEnd = async (batchId: string, token: string) => {
  await drain({ timeoutMs: 90_000 })
  return eventually(async () => {
    const got = await api("GET", `/v1/batches/${batchId}`, undefined, token)
    return ["completed", "succeeded", "failed"].includes(got.body.status) ? got.body : undefined
  }, 60_000, `batch ${batchId} to end`)
}

const callIds = async (db: D1Database) =>
  (await db.prepare("SELECT call_id FROM calls WHERE tenant_id = 'tenant-c' ORDER BY call_id").all<{ call_id: string }>()).results.map((r) => r.call_id)

const buyers = [unique("buyer"), unique("buyer"), unique("buyer")]
const newcomer = unique("buyer")
const before = 60
const during = 40

beforeAll(async () => {
  overrideSettings({ FACTLINE_KEY_CACHE_SECONDS: "1" })
  expect((await api("PUT", "/v1/tenants/tenant-c/placement", { read_database: 0 })).status).toBe(200)
})
afterAll(() => overrideSettings(undefined))

describe("a tenant's projection in parts", () => {
  it("refuses a split that cannot be: parts without a projection, with to_database, not 2/4/8/16, unbound, all where it is; a tenant's token", async () => {
    const refused = [
      await api("POST", "/v1/tenants/tenant-c/moves", { parts: [0, 1] }),
      await api("POST", "/v1/tenants/tenant-c/moves", { projection: "calls", parts: [0, 1], to_database: 1 }),
      await api("POST", "/v1/tenants/tenant-c/moves", { projection: "calls", parts: [0, 1, 1] }),
      await api("POST", "/v1/tenants/tenant-c/moves", { projection: "calls", parts: [0, 9] }),
      await api("POST", "/v1/tenants/tenant-c/moves", { projection: "calls", parts: [0, 0] }),
      await api("POST", "/v1/tenants/tenant-c/moves", { projection: "calls", parts: "0,1" }),
      await api("POST", "/v1/tenants/tenant-c/moves", { projection: "calls" })
    ]
    expect(refused.map((r) => r.status)).toEqual([400, 400, 400, 400, 400, 400, 400])
    expect(refused[2]!.body.error.message).toContain("2, 4, 8 or 16")
    expect(refused[3]!.body.error.message).toContain("parts[1]")
    expect((await api("POST", "/v1/tenants/tenant-c/moves", { projection: "calls", parts: [0, 1] }, tokenC)).status).toBe(403)
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM tenant_moves").first()).toEqual({ n: 0 })
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM projection_placements").first()).toEqual({ n: 0 })
  })

  it("tenant-c's calls split into 2 parts under live traffic: every row in its part only, reads and pages as before, events never refused", async () => {
    for (const buyer of buyers) await post([...calls(15, buyer), ...calls(5, buyer, "tenant-c", 30)])
    await post(calls(10, buyers[0]!, "tenant-a"), tokenA)
    await drain()
    await eventually(async () => ((await count(env.DB, "calls", "tenant-c")) === before ? true : undefined), 30_000, "tenant-c's calls before the split")
    const shapes = ["limit=7", "limit=500", `buyer_id=${buyers[0]}&limit=3`, "qualified=false&limit=4", `buyer_id=${buyers[1]}&qualified=true&limit=6`]
    const ids = await callIds(env.DB)
    const keyReads = ids.slice(0, 6).map((id) => `call_id=${id}`)
    const answers = async (queries: ReadonlyArray<string>) => Object.fromEntries(await Promise.all(queries.map(async (q) => [q, await pages(q)] as const)))
    const beforeSplit = await answers([...shapes, ...keyReads])
    expect(beforeSplit["limit=7"]!.length).toBe(Math.ceil(before / 7))

    const started = await api("POST", "/v1/tenants/tenant-c/moves", { projection: "calls", parts: [0, 1] })
    expect(started.status, JSON.stringify(started.body)).toBe(202)
    expect(started.body).toMatchObject({ tenant_id: "tenant-c", from_database: 0, to_database: 0, projection: "calls", parts: [0, 1], phase: "frozen" })
    expect((await api("POST", "/v1/tenants/tenant-c/moves", { projection: "buyer_budgets", parts: [0, 1] })).status).toBe(409)

    let splitting = true
    const reads: Array<string> = []
    const reader = (async () => {
      // A buyer whose calls do not change: its listing answers the same rows all along, never an error.
      while (splitting) {
        const got = await api("GET", `/v1/projections/calls?buyer_id=${buyers[2]}&limit=50`, undefined, tokenC)
        reads.push(got.status === 200 ? JSON.stringify(got.body.data) : `status ${got.status}`)
        await sleep(100)
      }
    })()
    const writer = (async () => {
      for (let i = 0; i < during / 5; i++) {
        await post(calls(5, newcomer)) // a 202 every time: a split holds only the projection's writes
        await sleep(150)
      }
    })()
    const done = await moveToEnd(started.body.move_id)
    await writer
    splitting = false
    await reader
    await drain()
    const total = () => Promise.all([count(env.DB, "calls", "tenant-c"), count(env.FACTLINE_READ_DB_1, "calls", "tenant-c")]).then(([a, b]) => a + b)
    await eventually(async () => ((await total()) === before + during ? true : undefined), 30_000, "every call in its part")

    expect(done.parts).toEqual([0, 1])
    expect(Object.keys(done.verified).sort()).toEqual(["calls", "projection_applied"])
    expect(Object.values(done.verified).every((v: any) => v.equal)).toBe(true)
    expect(new Set(reads).size, reads.slice(0, 3).join(" | ")).toBe(1)
    expect(JSON.parse(reads[0]!)).toHaveLength(20)

    // Every row in its part and nowhere else: part 0 on read database 0 (it stayed), part 1 on read database 1.
    expect(await env.DB.prepare("SELECT database, parts, frozen_since FROM projection_placements WHERE tenant_id = 'tenant-c' AND projection = 'calls'").first())
      .toEqual({ database: 0, parts: "[0,1]", frozen_since: null })
    const [home, other] = [await callIds(env.DB), await callIds(env.FACTLINE_READ_DB_1)]
    expect(home.length).toBeGreaterThan(0)
    expect(other.length).toBeGreaterThan(0)
    expect(home.length + other.length).toBe(before + during)
    for (const id of home) expect(ProjectionParts.partOf([id], 2), id).toBe(0)
    for (const id of other) expect(ProjectionParts.partOf([id], 2), id).toBe(1)
    // The rest of tenant-c stays at home: its budgets, its keys; tenant-a's calls untouched.
    expect(await count(env.FACTLINE_READ_DB_1, "buyer_budgets", "tenant-c")).toBe(0)
    expect(await count(env.FACTLINE_READ_DB_1, "accepted_keys", "tenant-c")).toBe(0)
    expect(await count(env.DB, "calls", "tenant-a")).toBeGreaterThanOrEqual(10)
    expect(await count(env.FACTLINE_READ_DB_1, "calls", "tenant-a")).toBe(0)

    // Reads answer exactly what they answered before: key reads (one part each) and the listings of unchanged buyers, page by page.
    const afterSplit = await answers([...shapes, ...keyReads])
    for (const q of [...keyReads, `buyer_id=${buyers[0]}&limit=3`, `buyer_id=${buyers[1]}&qualified=true&limit=6`]) expect(afterSplit[q], q).toEqual(beforeSplit[q])
    // Listings over every buyer: the rows before plus the newcomer's, in key order, full pages, every row once.
    for (const q of ["limit=7", "limit=500", "qualified=false&limit=4"]) {
      const limit = Number(/limit=(\d+)/.exec(q)![1])
      const rows = afterSplit[q]!.flatMap((p) => p.data)
      afterSplit[q]!.slice(0, -1).forEach((p) => expect(p.data).toHaveLength(limit))
      expect(rows.filter((r) => r.buyer_id !== newcomer), q).toEqual(beforeSplit[q]!.flatMap((p) => p.data))
      expect(new Set(rows.map((r) => r.call_id)).size).toBe(rows.length)
      const sorted = (await env.DB.prepare("SELECT value AS id FROM json_each(?) ORDER BY value").bind(JSON.stringify(rows.map((r) => r.call_id))).all<{ id: string }>()).results.map((r) => r.id)
      expect(rows.map((r) => r.call_id), `${q}: SQLite's key order`).toEqual(sorted)
    }
    expect(afterSplit["limit=7"]!.flatMap((p) => p.data)).toHaveLength(before + during)

    // The tenant's analysts are told where the parts are.
    expect((await api("GET", "/v1/tenants/me", undefined, tokenC)).body.projections.calls).toMatchObject({
      parts: [{ read_database: 0, binding: "DB" }, { read_database: 1, binding: "FACTLINE_READ_DB_1" }], writes_held_since: null
    })
    // A projection in parts is not moved again (nor split again).
    expect((await api("POST", "/v1/tenants/tenant-c/moves", { projection: "calls", to_database: 1 })).status).toBe(409)
  }, 300_000)

  it("a rebuild writes each row in its part; an erasure masks the subject's rows in every part; the subject export reads them all; a reconcile is refused", async () => {
    const [home, other] = [await callIds(env.DB), await callIds(env.FACTLINE_READ_DB_1)]
    const row = (db: D1Database, id: string) => db.prepare("SELECT charged_cents, buyer_id, caller_phone_masked FROM calls WHERE tenant_id = 'tenant-c' AND call_id = ?").bind(id).first()
    const exact = await row(env.FACTLINE_READ_DB_1, other[0]!)
    await env.FACTLINE_READ_DB_1.prepare("UPDATE calls SET charged_cents = 1 WHERE tenant_id = 'tenant-c' AND call_id = ?").bind(other[0]).run()
    const rebuild = await api("POST", "/v1/batches", { operation: "rebuild", projection: "calls" })
    expect(rebuild.status, JSON.stringify(rebuild.body)).toBe(202)
    expect(await batchToEnd(rebuild.body.batch_id, tokenPlatform)).toMatchObject({ status: "completed" })
    expect(await row(env.FACTLINE_READ_DB_1, other[0]!)).toEqual(exact)
    expect([await callIds(env.DB), await callIds(env.FACTLINE_READ_DB_1)]).toEqual([home, other])

    const reconcile = await api("POST", "/v1/batches", { operation: "reconcile", projection: "calls" }, tokenC)
    expect(reconcile.status, JSON.stringify(reconcile.body)).toBe(409)
    expect(reconcile.body.error.message).toContain("in parts")

    // buyers[0]'s 20 calls: in both parts (checked), all exported and all masked.
    const subject = buyers[0]!
    const inPart = async (db: D1Database) => count(db, "calls", "tenant-c", ` AND buyer_id = '${subject}'`)
    expect(await inPart(env.DB)).toBeGreaterThan(0)
    expect(await inPart(env.FACTLINE_READ_DB_1)).toBeGreaterThan(0)
    const exported = await api("GET", `/v1/subjects/${subject}/export`, undefined, tokenC)
    expect(exported.status, JSON.stringify(exported.body)).toBe(200)
    expect(exported.body.projections.find((p: any) => p.projection === "calls").rows).toHaveLength(20)
    const erasure = await api("POST", `/v1/subjects/${subject}/erase`, undefined, tokenC)
    expect(erasure.status, JSON.stringify(erasure.body)).toBe(202)
    const ended = await eventually(async () => {
      await drain({ timeoutMs: 60_000 })
      const got = await api("GET", `/v1/subjects/${subject}/erasure`, undefined, tokenC)
      return got.body.phase === "erased" || got.body.phase === "failed" ? got.body : undefined
    }, 90_000, "the erasure to end")
    expect(ended.phase, JSON.stringify(ended)).toBe("erased")
    expect(ended.removed["projection:calls"]).toEqual({ masked: 20 })
    for (const db of [env.DB, env.FACTLINE_READ_DB_1]) {
      const left = (await db.prepare("SELECT caller_phone_masked FROM calls WHERE tenant_id = 'tenant-c' AND buyer_id = ?").bind(subject).all<{ caller_phone_masked: string }>()).results
      expect(left.every((r) => r.caller_phone_masked === "[erased]")).toBe(true)
    }
  }, 300_000)

  it("buyer_budgets (additive) split step by step against a database refusing a copy page resumes to the same end; later facts count once, in their part", async () => {
    const budget = async (buyer: string) => (await api("GET", `/v1/projections/buyer_budgets?buyer_id=${buyer}`, undefined, tokenC)).body.data[0]?.charges
    const budgetsBefore = await Promise.all([...buyers, newcomer].map(budget))
    expect(budgetsBefore).toEqual([15, 15, 15, during])
    const { moveId, refused, retried } = await moveStepByStep("tenant-c", { projection: "buyer_budgets", parts: [0, 1] }, "buyer_budgets")
    expect(refused).toBe(1)
    expect(retried).toBeGreaterThanOrEqual(1)
    const moved = await api("GET", `/v1/tenants/tenant-c/moves/${moveId}`)
    expect(moved.body).toMatchObject({ phase: "dropped", projection: "buyer_budgets", parts: [0, 1], error: null })
    const applied = await count(env.DB, "projection_applied", "tenant-c", " AND projection = 'buyer_budgets'")
    // The applied set is every part's (which fact counted which row is not recorded); the rows are each in their part.
    expect(await count(env.FACTLINE_READ_DB_1, "projection_applied", "tenant-c", " AND projection = 'buyer_budgets'")).toBe(applied)
    for (const [db, part] of [[env.DB, 0], [env.FACTLINE_READ_DB_1, 1]] as const) {
      const ids = (await db.prepare("SELECT buyer_id FROM buyer_budgets WHERE tenant_id = 'tenant-c'").all<{ buyer_id: string }>()).results.map((r) => r.buyer_id)
      for (const id of ids) expect(ProjectionParts.partOf([id], 2)).toBe(part)
    }
    expect(await Promise.all([...buyers, newcomer].map(budget))).toEqual(budgetsBefore)
    // New facts count once each, in their row's part.
    await post([...calls(3, buyers[1]!), ...calls(2, newcomer)])
    await drain()
    await eventually(async () => ((await budget(newcomer)) === during + 2 ? true : undefined), 30_000, "the newcomer's budget")
    expect(await Promise.all([...buyers, newcomer].map(budget))).toEqual([15, 18, 15, during + 2])
  }, 300_000)
})
