/**
 * Deleting a departed tenant's whole data (`DELETE /v1/tenants/:tenant`, core's placement/Deletion): tenant-c (on
 * read database 1) and tenant-a (on the platform database) are filled through every queue — calls (events,
 * projections, fact processing, webhooks to a real receiver), a payload over 64 KiB (offloaded to R2), a webhook
 * endpoint, a batch export, a workflow instance's row — and R2 objects no route writes in a test run (an archive
 * day's part, a kept-events object holding both tenants' lines, a spilled dead letter of each). tenant-c is then
 * deleted, and every row of every table of every D1 database, every shard object of tenant-c (and its key store)
 * and every R2 object are read back: nothing of tenant-c is left, and tenant-a's rows and objects are as they were.
 * The fault case runs the same deletion step by step against bindings that refuse an R2 delete and a D1 delete
 * mid-way: the steps that failed are retried, and the end is the same.
 */
import { createExecutionContext, runInDurableObject } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Shards } from "@factline/core/runtime"
import type { PlatformEnv } from "@factline/workers"
import * as BatchSteps from "./BatchSteps.js"
import { drain } from "./Drain.js"
import * as Faults from "./faults.js"
import { callCompleted, eventually, postEvents, request, tokenA, tokenPlatform, unique } from "./helpers.js"
import { overrideSettings, platform } from "./worker.js"

const tokenC = "dev-token-tenant-c"

const api = async (method: string, path: string, body?: unknown, token = tokenPlatform) => {
  const response = await request(path, { method, token, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
  return { status: response.status, body: await response.json<any>() }
}

const databases = () => ({ DB: env.DB, FACTLINE_READ_DB_1: env.FACTLINE_READ_DB_1 })

/** Every row of every table of every D1 database (the deletion's own record aside), as JSON text, by `db.table`. */
const everyRow = async () => {
  const out: Record<string, Array<string>> = {}
  for (const [name, db] of Object.entries(databases())) {
    const tables = (await db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%' AND name <> 'd1_migrations'").all<{ name: string }>()).results
    for (const { name: table } of tables) {
      if (table === "tenant_deletions") continue
      out[`${name}.${table}`] = (await db.prepare(`SELECT * FROM "${table}"`).all()).results.map((row) => JSON.stringify(row))
    }
  }
  return out
}

/** Every R2 object: its key and its text. */
const everyObject = async () => {
  const out = new Map<string, string>()
  let cursor: string | undefined
  do {
    const page = await env.PAYLOADS.list(cursor === undefined ? {} : { cursor })
    for (const o of page.objects) out.set(o.key, await (await env.PAYLOADS.get(o.key))!.text())
    cursor = page.truncated ? page.cursor : undefined
  } while (cursor !== undefined)
  return out
}

/** The tables and alarm left in one LedgerShard object. */
const inShard = (key: string) =>
  runInDurableObject(env.LEDGER.get(env.LEDGER.idFromName(key)), async (_, state) => ({
    tables: state.storage.sql.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '_cf_%'").toArray().map((r) => r.name),
    alarm: await state.storage.getAlarm()
  }))

/** tenant-c's shard objects (as many as the default shard count: the tests configure none) and its key store. */
const tenantCShards = () => [...Array.from({ length: Shards.defaultShardsPerTenant }, (_, i) => `tenant-c/#${i}`), "tenant-c/#keys"]

/** Fills tenant-c (on read database 1) and tenant-a through every queue, and the R2 objects no route writes here. */
const fill = async (run: string) => {
  if ((await api("GET", "/v1/tenants")).body.data.every((p: any) => p.tenant_id !== "tenant-c")) {
    expect((await api("PUT", "/v1/tenants/tenant-c/placement", { read_database: 1 })).status).toBe(200)
  }
  const endpoint = await api("POST", "/v1/webhooks/endpoints", { url: `${env.TEST_RECEIVER_URL}/deletion-${run}`, event_types: ["charge.created"] }, tokenC)
  expect(endpoint.status).toBe(201)
  for (const [tenant, token] of [["tenant-c", tokenC], ["tenant-a", tokenA]] as const) {
    const events = Array.from({ length: 6 }, (_, i) => callCompleted({ tenant_id: tenant }, { buyer_id: `${run}_buyer_${i % 2}` }))
    expect((await postEvents({ events }, token)).status).toBe(202)
    const blob = { message_type: "test.blob.stored", schema_version: 1, subject: unique("blob"), idempotency_key: unique("blob"), tenant_id: tenant, payload: { blob: `${tenant} `.repeat(8_000) } }
    expect((await postEvents({ events: [blob] }, token)).status).toBe(202)
  }
  await drain({ timeoutMs: 60_000 })
  const job = await api("POST", "/v1/batches", { operation: "export", projection: "calls", format: "ndjson" }, tokenC)
  expect(job.status).toBe(202)
  await drain({ timeoutMs: 60_000 })
  await eventually(async () => ((await api("GET", `/v1/batches/${job.body.batch_id}`, undefined, tokenC)).body.status === "succeeded" ? true : undefined), 30_000, "tenant-c's export")
  const now = new Date().toISOString()
  await env.DB.prepare(
    "INSERT INTO workflow_instances (tenant_id, instance_id, workflow, subject, start_fact_id, status, started_at, updated_at) VALUES ('tenant-c', ?, 'crm-sync', 's', 'f', 'waiting', ?, ?)"
  ).bind(`wf_${run}`, now, now).run()
  await env.PAYLOADS.put(`tenant-c/archive/facts/2020-01-0${run.length % 9 + 1}/part-0000.parquet`, `PAR1 tenant-c ${run}`)
  await env.PAYLOADS.put(`_kept/2020-01-01T00:00:00.000Z_${run}.ndjson`, [JSON.stringify({ tenant_id: "tenant-a", run }), JSON.stringify({ tenant_id: "tenant-c", run })].join("\n"))
  for (const tenant of ["tenant-a", "tenant-c"]) {
    await env.PAYLOADS.put(`_platform/dead-letters/spilled/factline-events-dlq/${tenant}-${run}.json`, JSON.stringify({ version: 1, dead_letter_queue: "factline-events-dlq", message_id: `${tenant}-${run}`, attempts: 1, spilled_at: now, row: { id: `${tenant}-${run}`, tenant_id: tenant } }))
  }
}

/** What tenant-a has: its rows per table, and every object that is not tenant-c's (the kept object as it must become). */
const tenantAState = async () => {
  const rows = Object.fromEntries(Object.entries(await everyRow()).map(([table, all]) => [table, all.filter((r) => r.includes("tenant-a")).sort()]))
  const objects = [...(await everyObject())].filter(([key]) => !key.startsWith("tenant-c/") && !key.startsWith("_payloads/tenant-c/") && !key.includes("tenant-c-"))
  return { rows, objects: objects.map(([key, text]) => [key, key.startsWith("_kept/") ? text.split("\n").filter((l) => !l.includes("tenant-c")).join("\n") : text]).sort() }
}

/** Nothing of tenant-c anywhere: rows, shard objects, R2 objects. */
const expectNothingOfTenantC = async () => {
  const rows = await everyRow()
  for (const [table, all] of Object.entries(rows)) expect(all.filter((r) => r.includes("tenant-c")), `${table} holds tenant-c`).toEqual([])
  for (const key of tenantCShards()) expect(await inShard(key), key).toEqual({ tables: [], alarm: null })
  for (const [key, text] of await everyObject()) expect(`${key} ${text}`.includes("tenant-c"), `R2 object ${key}`).toBe(false)
}

/** Checks tenant-c holds something in every store before a deletion. */
const expectTenantCEverywhere = async () => {
  const rows = await everyRow()
  const holding = Object.entries(rows).filter(([, all]) => all.some((r) => r.includes('"tenant_id":"tenant-c"'))).map(([t]) => t)
  for (const table of ["FACTLINE_READ_DB_1.calls", "FACTLINE_READ_DB_1.accepted_keys", "FACTLINE_READ_DB_1.webhook_endpoints", "FACTLINE_READ_DB_1.webhook_deliveries", "FACTLINE_READ_DB_1.batch_jobs", "DB.ledger_tenants", "DB.ledger_shards", "DB.tenant_placements", "DB.workflow_instances"]) {
    expect(holding, table).toContain(table)
  }
  const keys = [...(await everyObject()).keys()]
  expect(keys.filter((k) => k.startsWith("_payloads/tenant-c/")).length, keys.join(", ")).toBeGreaterThan(0)
  expect(keys.filter((k) => k.startsWith("tenant-c/batches/")).length, keys.join(", ")).toBeGreaterThan(0)
  expect((await Promise.all(tenantCShards().map(inShard))).filter((s) => s.tables.length > 0).length).toBeGreaterThan(0)
}

describe("deleting a tenant's whole data", () => {
  // The key cache's bound (how long the hold lasts after the key store was emptied) down from 60 s to 1 s here.
  beforeAll(() => overrideSettings({ FACTLINE_KEY_CACHE_SECONDS: "1" }))
  afterAll(() => overrideSettings(undefined))

  it("removes tenant-c from every D1 table, every shard and key store, every R2 object; tenant-a untouched; idempotent; refused while a move runs", async () => {
    await fill(unique("d"))
    await expectTenantCEverywhere()
    const before = await tenantAState()

    expect((await api("DELETE", "/v1/tenants/tenant-c", undefined, tokenC)).status).toBe(403)
    expect((await api("DELETE", "/v1/tenants/nobody-here")).status).toBe(404)
    expect((await api("GET", "/v1/tenants/tenant-c/deletion")).status).toBe(404)
    const started = await api("DELETE", "/v1/tenants/tenant-c")
    expect(started.status, JSON.stringify(started.body)).toBe(202)
    expect(started.body).toMatchObject({ tenant_id: "tenant-c", phase: "held", round: 1, remaining: null })
    const id = started.body.deletion_id as string
    // A second DELETE answers the same deletion; a move of the tenant is refused while it runs; its writes are held.
    expect((await api("DELETE", "/v1/tenants/tenant-c")).body.deletion_id).toBe(id)
    expect((await api("POST", "/v1/tenants/tenant-c/moves", { to_database: 0 })).status).toBe(409)
    expect((await postEvents({ events: [callCompleted({ tenant_id: "tenant-c" })] }, tokenC)).status).toBe(503)

    const done = await eventually(async () => {
      const got = await api("GET", "/v1/tenants/tenant-c/deletion")
      if (got.body.phase === "failed") throw new Error(`the deletion failed: ${got.body.error}`)
      return got.body.phase === "deleted" ? got.body : undefined
    }, 90_000, "the deletion to end")
    await drain({ timeoutMs: 60_000 })

    // The report: what went from each store, and a re-count with nothing left.
    expect(done.removed["d1:FACTLINE_READ_DB_1"].calls).toBe(6)
    expect(done.removed["d1:DB"].ledger_shards).toBe(Shards.defaultShardsPerTenant)
    expect(done.removed.ledger).toEqual({ shard_objects: Shards.defaultShardsPerTenant, key_store: 1 })
    expect(done.removed.workflows).toEqual({ terminated: 0, already_ended: 1 })
    expect(done.removed.r2["_payloads/tenant-c/"]).toBeGreaterThan(0)
    expect(done.removed.r2["tenant-c/"]).toBeGreaterThan(0)
    expect(done.removed.r2["_kept/"]).toBe(1)
    expect(done.removed.r2["_platform/dead-letters/spilled/"]).toBe(1)
    expect(Object.values(done.remaining).every((counts: any) => Object.keys(counts).length === 0)).toBe(true)
    expect(done.finished_at).not.toBeNull()

    await expectNothingOfTenantC()
    expect(await tenantAState()).toEqual(before)

    // Again: the finished deletion is answered (nothing came back), and the tenant is placed nowhere (its next
    // use places it as a new, empty tenant: the next case does).
    expect((await api("DELETE", "/v1/tenants/tenant-c")).body).toMatchObject({ deletion_id: id, phase: "deleted" })
    expect((await api("GET", "/v1/tenants")).body.data.map((p: any) => p.tenant_id)).not.toContain("tenant-c")
  }, 240_000)

  it("under faults (an R2 delete and a D1 delete refused mid-way), the retried steps finish it: nothing of tenant-c left, tenant-a untouched", async () => {
    const run = unique("f")
    // tenant-c again, after the first case deleted it: a new tenant, its ledger registered anew.
    await fill(run)
    await expectTenantCEverywhere()
    const before = await tenantAState()

    // The steps run here, one message at a time, on bindings that refuse: the first R2 delete, and the first
    // DELETE on tenant-c's read database. Each next step is caught (a recording batch queue) and delivered again.
    const { sent, queue: recording } = BatchSteps.recordingBatchQueue()
    let r2Refused = 0
    let d1Refused = 0
    const payloads = new Proxy(env.PAYLOADS, {
      get: (target, prop) =>
        prop === "delete"
          ? (keys: string | Array<string>) => (r2Refused++ === 0 ? Promise.reject(new Error("injected fault: R2 delete refused")) : target.delete(keys))
          : typeof (target as any)[prop] === "function" ? (target as any)[prop].bind(target) : (target as any)[prop]
    })
    const readDb1 = Faults.refusingStatements(env.FACTLINE_READ_DB_1, (sql) => sql.startsWith("DELETE FROM") && d1Refused++ === 0)
    const faulty = { ...(env as unknown as PlatformEnv), BATCH_QUEUE: recording, PAYLOADS: payloads, FACTLINE_READ_DB_1: readDb1, FACTLINE_KEY_CACHE_SECONDS: "1" } as unknown as PlatformEnv

    const ctx = createExecutionContext()
    const response = await platform.fetch!(new Request("http://factline.test/v1/tenants/tenant-c", { method: "DELETE", headers: { authorization: `Bearer ${tokenPlatform}` } }) as any, faulty, ctx)
    expect(response.status).toBe(202)
    const id = (await response.json<any>()).deletion_id as string
    const retried = await BatchSteps.deliverSteps(sent, faulty, 200)
    expect(r2Refused).toBeGreaterThan(1)
    expect(d1Refused).toBeGreaterThan(1)
    expect(retried).toBeGreaterThanOrEqual(2)
    const done = await api("GET", "/v1/tenants/tenant-c/deletion")
    expect(done.body).toMatchObject({ deletion_id: id, phase: "deleted", error: null })
    await drain({ timeoutMs: 60_000 })
    await expectNothingOfTenantC()
    expect(await tenantAState()).toEqual(before)
  }, 240_000)
})
