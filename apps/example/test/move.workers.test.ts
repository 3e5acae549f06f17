/**
 * Moving a tenant between read databases under live traffic (core's placement/Move, a resumable operation of
 * the batch queue): tenant-c starts on read database 0 (the platform database) and is moved to read database
 * 1 while a client keeps posting events (retrying the 503s of the hold, as any client does) and another keeps
 * reading its budget. The budget must end exact, no read may ever go back (a half-copied database would show
 * less), and the source must hold none of the tenant's rows afterwards — while tenant-a's rows stay put.
 */
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { drain } from "./Drain.js"
import { callCompleted, eventually, postEvents, request, tokenA, tokenPlatform, unique } from "./helpers.js"

const tokenC = "dev-token-tenant-c"
const movedTables = ["facts", "projection_applied", "accepted_keys", "calls", "buyer_budgets"]

const api = async (method: string, path: string, body?: unknown, token = tokenPlatform) => {
  const response = await request(path, { method, token, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
  return { status: response.status, headers: response.headers, body: await response.json<any>() }
}

const count = async (db: D1Database, table: string, tenant: string) =>
  (await db.prepare(`SELECT COUNT(*) AS n FROM ${table} WHERE tenant_id = ?`).bind(tenant).first<{ n: number }>())!.n

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Posts until accepted: a 503 (the tenant's writes held by the move) is retried after its `retry-after`, capped for the test. */
const postUntilAccepted = async (events: ReadonlyArray<unknown>, token: string, held: { count: number }) => {
  for (let attempt = 0; attempt < 200; attempt++) {
    const response = await postEvents({ events }, token)
    if (response.status === 202) return
    expect(response.status, await response.text()).toBe(503)
    expect(Number(response.headers.get("retry-after"))).toBeGreaterThan(0)
    held.count++
    await sleep(250)
  }
  throw new Error("the events were never accepted")
}

const budgetOf = async (buyer: string, token: string) => {
  const got = await api("GET", `/v1/projections/buyer_budgets?buyer_id=${buyer}`, undefined, token)
  if (got.status !== 200) return undefined
  return (got.body.data[0]?.charges as number | undefined) ?? 0
}

const calls = (n: number, buyer: string, tenant = "tenant-c") =>
  Array.from({ length: n }, () => callCompleted({ tenant_id: tenant }, { buyer_id: buyer }))

describe("moving a tenant between read databases", () => {
  it("a message of a held tenant is parked, not retried to death: held far longer than its retries last, it is applied once the hold ends", async () => {
    const call = unique("call")
    // The hold a move sets, set by hand before tenant-c's first use (no isolate has its placement cached yet):
    // every write of tenant-c's read side is refused while it lasts.
    const now = new Date().toISOString()
    await env.DB.prepare("INSERT INTO tenant_placements (tenant_id, database, placed_at, frozen_since) VALUES ('tenant-c', 0, ?, ?)").bind(now, now).run()
    const event = callCompleted({ tenant_id: "tenant-c" }, { call_id: call, buyer_id: unique("buyer") })
    await (env as unknown as { EVENTS_QUEUE: Queue }).EVENTS_QUEUE.send(event, { contentType: "json" })
    // Retries are immediate in the tests (and the projections queue allows a few): a retried message would be
    // dead-lettered within a second; a parked one waits 5 s per park, spending no attempt.
    await sleep(8_000)
    expect(await count(env.DB, "calls", "tenant-c")).toBe(0)
    expect((await env.DB.prepare("SELECT COUNT(*) AS n FROM dead_messages WHERE tenant_id = 'tenant-c'").first<{ n: number }>())!.n).toBe(0)
    await env.DB.prepare("UPDATE tenant_placements SET frozen_since = NULL WHERE tenant_id = 'tenant-c'").run()
    await eventually(async () => (await env.DB.prepare("SELECT call_id FROM calls WHERE tenant_id = 'tenant-c' AND call_id = ?").bind(call).first()) ?? undefined, 30_000, "the parked call to be applied")
    expect((await env.DB.prepare("SELECT COUNT(*) AS n FROM dead_messages WHERE tenant_id = 'tenant-c'").first<{ n: number }>())!.n).toBe(0)
  })

  it("refuses what cannot be moved: a bad index, an unplaced tenant, the same database, a second move, a tenant token", async () => {
    expect((await api("PUT", "/v1/tenants/tenant-c/placement", { read_database: 0 })).status).toBe(200)
    const bad = await api("POST", "/v1/tenants/tenant-c/moves", { to_database: 7 })
    expect(bad.status).toBe(400)
    expect(bad.body.error.code).toBe("invalid_request")
    expect((await api("POST", "/v1/tenants/tenant-c/moves", { to: 1 })).status).toBe(400)
    expect((await api("POST", "/v1/tenants/nobody-yet/moves", { to_database: 1 })).status).toBe(404)
    const same = await api("POST", "/v1/tenants/tenant-c/moves", { to_database: 0 })
    expect(same.status).toBe(409)
    expect((await api("POST", "/v1/tenants/tenant-c/moves", { to_database: 1 }, tokenC)).status).toBe(403)
    expect((await api("GET", "/v1/tenants/tenant-c/moves/mv_nope")).status).toBe(404)
  })

  it("tenant-c moves from read database 0 to 1 under live traffic: budgets exact, no read ever goes back, nothing left behind", async () => {
    const buyer = unique("buyer")
    const buyerA = unique("buyer")
    expect((await api("PUT", "/v1/tenants/tenant-c/placement", { read_database: 0 })).status).toBe(200)
    const held = { count: 0 }
    const before = 60
    for (let i = 0; i < 3; i++) await postUntilAccepted(calls(20, buyer), tokenC, held)
    await postUntilAccepted(calls(10, buyerA, "tenant-a"), tokenA, held)
    await drain()
    await eventually(async () => ((await budgetOf(buyer, tokenC)) === before ? true : undefined), 30_000, "tenant-c's budget before the move")
    await eventually(async () => ((await budgetOf(buyerA, tokenA)) === 10 ? true : undefined), 30_000, "tenant-a's budget")
    const tenantARows = Object.fromEntries(await Promise.all(movedTables.map(async (t) => [t, await count(env.DB, t, "tenant-a")] as const)))

    const started = await api("POST", "/v1/tenants/tenant-c/moves", { to_database: 1 })
    expect(started.status, JSON.stringify(started.body)).toBe(202)
    expect(started.body).toMatchObject({ tenant_id: "tenant-c", from_database: 0, to_database: 1, phase: "frozen" })
    const moveId = started.body.move_id as string
    expect((await api("POST", "/v1/tenants/tenant-c/moves", { to_database: 1 })).status).toBe(409)
    // A rebuild would replay tenants into the databases they are placed on: not while one moves.
    expect((await api("POST", "/v1/batches", { operation: "rebuild", projection: "calls" })).status).toBe(409)
    expect((await api("GET", "/v1/tenants/me", undefined, tokenC)).body.writes_held_since).not.toBeNull()

    // Live traffic during the move: a writer (5 events at a time) and a reader of the budget.
    const during = 40
    let moving = true
    const reads: Array<number> = []
    const reader = (async () => {
      while (moving) {
        const charges = await budgetOf(buyer, tokenC)
        if (charges !== undefined) reads.push(charges)
        await sleep(100)
      }
    })()
    const writer = (async () => {
      for (let i = 0; i < during / 5; i++) {
        await postUntilAccepted(calls(5, buyer), tokenC, held)
        await sleep(150)
      }
    })()
    const phases = new Set<string>()
    const done = await eventually(async () => {
      const got = await api("GET", `/v1/tenants/tenant-c/moves/${moveId}`)
      phases.add(got.body.phase)
      if (got.body.phase === "failed") throw new Error(`the move failed: ${got.body.error}`)
      return got.body.phase === "dropped" ? got.body : undefined
    }, 90_000, "the move to end")
    await writer
    moving = false
    await reader
    await drain()
    await eventually(async () => ((await budgetOf(buyer, tokenC)) === before + during ? true : undefined), 30_000, "tenant-c's budget after the move")

    // The hold was real (writes refused while it lasted), and the record tells what was copied and verified.
    expect(held.count).toBeGreaterThan(0)
    expect(phases.has("dropped")).toBe(true)
    expect(done.copied.calls).toBeGreaterThanOrEqual(before)
    expect(Object.values(done.verified).every((v: any) => v.equal)).toBe(true)
    expect(done.verified.buyer_budgets.rows).toBe(await count(env.FACTLINE_READ_DB_1, "buyer_budgets", "tenant-c"))
    expect(done.verified.calls.rows).toBeGreaterThanOrEqual(before)
    expect(done.finished_at).not.toBeNull()

    // Never a read from a half-copied database: the budget never went back, and never below what it was.
    expect(reads.length).toBeGreaterThan(0)
    for (let i = 1; i < reads.length; i++) expect(reads[i]!, `read ${i} of ${reads.join(",")}`).toBeGreaterThanOrEqual(reads[i - 1]!)
    expect(Math.min(...reads)).toBeGreaterThanOrEqual(before)

    // Exact in the target, nothing in the source; tenant-a untouched.
    expect(await env.DB.prepare("SELECT database, frozen_since FROM tenant_placements WHERE tenant_id = 'tenant-c'").first()).toEqual({ database: 1, frozen_since: null })
    const callsOfBuyer = (db: D1Database) => db.prepare("SELECT COUNT(*) AS n FROM calls WHERE tenant_id = 'tenant-c' AND buyer_id = ?").bind(buyer).first<{ n: number }>()
    expect((await callsOfBuyer(env.FACTLINE_READ_DB_1))!.n).toBe(before + during)
    expect(await count(env.FACTLINE_READ_DB_1, "accepted_keys", "tenant-c")).toBe(await count(env.FACTLINE_READ_DB_1, "calls", "tenant-c"))
    expect(await env.FACTLINE_READ_DB_1.prepare("SELECT charges, spent_cents FROM buyer_budgets WHERE tenant_id = 'tenant-c' AND buyer_id = ?").bind(buyer).first())
      .toEqual({ charges: before + during, spent_cents: 250 * (before + during) })
    for (const table of movedTables) expect(await count(env.DB, table, "tenant-c"), `${table} of tenant-c left in the source`).toBe(0)
    for (const table of movedTables) expect(await count(env.DB, table, "tenant-a"), `${table} of tenant-a`).toBe(tenantARows[table])
    expect((await api("GET", "/v1/tenants/me", undefined, tokenC)).body).toMatchObject({ read_database: 1, binding: "FACTLINE_READ_DB_1", writes_held_since: null })
    expect((await api("GET", `/v1/facts?subject=${encodeURIComponent((await env.FACTLINE_READ_DB_1.prepare("SELECT call_id FROM calls WHERE tenant_id = 'tenant-c' LIMIT 1").first<{ call_id: string }>())!.call_id)}`, undefined, tokenC)).body.data.length).toBeGreaterThan(0)

    // And back again: a second move of the same tenant works from the new placement.
    const back = await api("POST", "/v1/tenants/tenant-c/moves", { to_database: 0 })
    expect(back.status).toBe(202)
    await eventually(async () => {
      const got = await api("GET", `/v1/tenants/tenant-c/moves/${back.body.move_id}`)
      if (got.body.phase === "failed") throw new Error(`the move back failed: ${got.body.error}`)
      return got.body.phase === "dropped" ? got.body : undefined
    }, 60_000, "the move back to end")
    expect((await callsOfBuyer(env.DB))!.n).toBe(before + during)
    expect(await count(env.FACTLINE_READ_DB_1, "calls", "tenant-c")).toBe(0)
    expect(await budgetOf(buyer, tokenC)).toBe(before + during)
  })
})
