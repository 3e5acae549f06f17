/**
 * Starting a batch operation when the batch queue refuses its first chunk (core's BatchStart): whatever the
 * operation — a rebuild, an export, an import, a tenant's move — the caller gets a 503 and the operation is
 * recorded `failed`, so that nothing stays running that no message would ever run: a refused rebuild does not
 * block the next one, a refused move does not hold the tenant's writes.
 */
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { callCompleted, request, tokenA, tokenPlatform, unique } from "./helpers.js"
import { platform } from "./worker.js"

const refusing = {
  send: () => Promise.reject(new Error("queue down")),
  sendBatch: () => Promise.reject(new Error("queue down"))
} as unknown as Queue

/** A request to the platform whose batch queue refuses every send. */
const withQueueDown = (path: string, init: { method: string; token: string; body?: unknown }) =>
  platform.fetch(
    new Request(`http://factline.test${path}`, {
      method: init.method,
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
      headers: { authorization: `Bearer ${init.token}`, "content-type": "application/json" }
    }),
    { ...env, BATCH_QUEUE: refusing } as never,
    { waitUntil: () => undefined, passThroughOnException: () => undefined } as never
  )

describe("starting a batch operation while the batch queue refuses", () => {
  it("a rebuild is a 503 and its record is failed, its shadow table dropped: the next rebuild is not refused as already running", async () => {
    const refused = await withQueueDown("/v1/batches", { method: "POST", token: tokenPlatform, body: { operation: "rebuild", projection: "calls" } })
    expect(refused.status).toBe(503)
    const records = (await env.DB.prepare("SELECT * FROM projection_rebuilds WHERE projection = 'calls' ORDER BY started_at DESC").all<any>()).results
    expect(records).toHaveLength(1)
    expect(records[0]).toMatchObject({ status: "failed" })
    expect(records[0].error).toContain("the batch queue was unavailable when the rebuild was started")
    const shadow = await env.DB.prepare("SELECT name FROM sqlite_master WHERE name = ?").bind(records[0].shadow_table).first()
    expect(shadow).toBeNull()
    // Still down: refused by the queue again, not by a record left running.
    const again = await withQueueDown("/v1/batches", { method: "POST", token: tokenPlatform, body: { operation: "rebuild", projection: "calls" } })
    expect(again.status).toBe(503)
    const listed = await (await request("/v1/batches?status=failed", { token: tokenPlatform })).json<any>()
    expect(listed.data.filter((b: any) => b.operation === "rebuild" && b.projection === "calls")).toHaveLength(2)
  })

  it("an export and an inline import are 503s and their jobs are failed with the reason", async () => {
    const exported = await withQueueDown("/v1/batches", { method: "POST", token: tokenA, body: { operation: "export" } })
    expect(exported.status).toBe(503)
    const imported = await withQueueDown("/v1/batches", { method: "POST", token: tokenA, body: { operation: "import", events: [callCompleted()] } })
    expect(imported.status).toBe(503)
    const listed = await (await request("/v1/batches", { token: tokenA })).json<any>()
    const jobs = listed.data.filter((b: any) => b.operation === "export" || b.operation === "import")
    expect(jobs.map((j: any) => [j.operation, j.status])).toEqual([["import", "failed"], ["export", "failed"]])
    for (const job of jobs) expect(job.error).toContain(`the batch queue was unavailable when the ${job.operation} was started`)
  })

  it("a move is a 503, recorded failed, and the tenant's writes are not held", async () => {
    const tenant = unique("bs")
    const placed = await request(`/v1/tenants/${tenant}/placement`, { method: "PUT", token: tokenPlatform, body: JSON.stringify({ read_database: 0 }) })
    expect(placed.status).toBe(200)
    const refused = await withQueueDown(`/v1/tenants/${tenant}/moves`, { method: "POST", token: tokenPlatform, body: { to_database: 1 } })
    expect(refused.status).toBe(503)
    const move = await env.DB.prepare("SELECT * FROM tenant_moves WHERE tenant_id = ?").bind(tenant).first<any>()
    expect(move).toMatchObject({ phase: "failed" })
    expect(move.error).toContain("the batch queue was unavailable when the move was started")
    const placement = await env.DB.prepare("SELECT database, frozen_since FROM tenant_placements WHERE tenant_id = ?").bind(tenant).first<any>()
    expect(placement).toEqual({ database: 0, frozen_since: null })
  })
})
