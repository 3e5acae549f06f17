/**
 * Batch jobs (issue 12): inline imports run in chunks on `factline-batch`
 * through the events path, with progress, line-numbered errors, retries of a
 * failing chunk, re-runs that append nothing, cancel, and tenancy; a rebuild
 * whose step keeps failing ends `failed` and no longer blocks the next one.
 * Assertions are on stored state: the ledger, `buyer_budgets`, `batch_jobs`.
 */
import { createExecutionContext, createMessageBatch, createScheduledController, getQueueResult, waitOnExecutionContext } from "cloudflare:test"
import { env, exports } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { BatchConsumer } from "@factline/core/runtime"
import * as CountingBindings from "@factline/core/testing/bindings"
import type { PlatformEnv } from "@factline/workers"
import { drain } from "./Drain.js"
import { callCompleted, readStream, request, shardKeyOf, tokenA, tokenAReadOnly, tokenB, tokenPlatform, unique } from "./helpers.js"
import { newCounts } from "./instrument.js"
import { platform } from "./worker.js"

const startImport = async (events: ReadonlyArray<unknown>, token = tokenA) => {
  const response = await request("/v1/batches", { method: "POST", token, body: JSON.stringify({ operation: "import", events }) })
  expect(response.status, await response.clone().text()).toBe(202)
  return (await response.json<any>()).batch_id as string
}

const job = async (id: string, token = tokenA) => {
  const response = await request(`/v1/batches/${id}`, { token })
  expect(response.status).toBe(200)
  return response.json<any>()
}

const budget = (buyer: string, tenant = "tenant-a") =>
  env.DB.prepare("SELECT spent_cents, charges FROM buyer_budgets WHERE tenant_id = ? AND buyer_id = ?").bind(tenant, buyer).first<{ spent_cents: number; charges: number }>()

/** `n` qualifying calls of one buyer (75 s, 100 + i cents each). */
const calls = (run: string, n: number) =>
  Array.from({ length: n }, (_, i) => callCompleted({}, { call_id: `${run}_call_${i}`, buyer_id: `${run}_buyer`, duration_s: 75, price_cents: 100 + i }))
const expectedCents = (n: number) => Array.from({ length: n }, (_, i) => 100 + i).reduce((a, b) => a + b, 0)

describe("import (inline envelopes, run in chunks on factline-batch)", () => {
  it("appends every valid line through the events path, reports each invalid line by its number, and a re-run appends nothing", async () => {
    const run = unique("imp")
    const events: Array<unknown> = calls(run, 150)
    // Invalid lines at known positions (1-based lines of the job's input).
    const bad = new Map<number, unknown>([
      [3, "not an envelope"],
      [50, { ...callCompleted({}, { buyer_id: `${run}_buyer` }), message_type: "call.unknown" }],
      [101, { ...callCompleted({}, { buyer_id: `${run}_buyer` }), tenant_id: "tenant-b" }],
      [120, { ...callCompleted({}, { buyer_id: `${run}_buyer` }), payload: { call_id: "x" } }]
    ])
    for (const [line, value] of [...bad].sort((a, b) => a[0] - b[0])) events.splice(line - 1, 0, value)
    const id = await startImport(events)
    expect(id).toMatch(/^bt_/)
    expect((await job(id)).status).toMatch(/queued|running/)

    await drain({ timeoutMs: 60_000 })
    const done = await job(id)
    expect(done).toMatchObject({ batch_id: id, operation: "import", status: "succeeded", offset: 154, total: 154, succeeded: 150, failed: 4, error: null })
    expect(done.errors.map((e: any) => e.line)).toEqual([3, 50, 101, 120])
    expect(done.errors[0].error).toContain("not an envelope")
    expect(done.errors[1].error).toContain("unknown_message_type")
    expect(done.errors[2].error).toContain("another tenant")
    expect(done.finished_at).not.toBeNull()
    // Every valid call decided once: outcome, qualification, charge; the budget exact to the cent.
    const first = await readStream("tenant-a", `${run}_call_0`)
    expect(first.facts.map((f) => f.type)).toEqual(["outcome", "qualification", "charge"])
    expect(await budget(`${run}_buyer`)).toEqual({ spent_cents: expectedCents(150), charges: 150 })
    // Nothing of the invalid lines reached the ledger or tenant B.
    const wrongTenant = bad.get(101) as { subject: string }
    expect((await readStream("tenant-b", wrongTenant.subject)).version).toBe(0)
    expect((await readStream("tenant-a", wrongTenant.subject)).version).toBe(0)

    // The same import again: the ledger already holds every fact; nothing is appended, the budget unchanged.
    const versions = await Promise.all([0, 75, 149].map(async (i) => (await readStream("tenant-a", `${run}_call_${i}`)).version))
    const again = await startImport(events)
    await drain({ timeoutMs: 60_000 })
    expect(await job(again)).toMatchObject({ status: "succeeded", succeeded: 150, failed: 4 })
    expect(await Promise.all([0, 75, 149].map(async (i) => (await readStream("tenant-a", `${run}_call_${i}`)).version))).toEqual(versions)
    expect(await budget(`${run}_buyer`)).toEqual({ spent_cents: expectedCents(150), charges: 150 })
  }, 120_000)

  it("a chunk that fails midway is retried and redoes nothing: exact counts and budget", async () => {
    const run = unique("impf")
    const id = await startImport(calls(run, 250))
    // The second chunk's first read of the input fails (R2 is shared by the Worker and the test).
    const bucket = env.PAYLOADS as R2Bucket & { get: R2Bucket["get"] }
    const original = bucket.get.bind(bucket)
    let refused = 0
    bucket.get = (async (key: string, options?: R2GetOptions) => {
      const range = options?.range as { offset?: number } | undefined
      if (key.includes(id) && (range?.offset ?? 0) > 0 && refused === 0) {
        refused++
        throw new Error("injected: R2 read refused")
      }
      return original(key, options as never)
    }) as never
    try {
      await drain({ timeoutMs: 60_000 })
    } finally {
      bucket.get = original as never
    }
    expect(refused).toBe(1)
    expect(await job(id)).toMatchObject({ status: "succeeded", offset: 250, succeeded: 250, failed: 0, errors: [] })
    expect(await budget(`${run}_buyer`)).toEqual({ spent_cents: expectedCents(250), charges: 250 })
    // One message runs chunks 0–2 (BatchConsumer.chunksPerMessage): retried once as a whole, chunk 0's work not redone.
    const inbox = await env.DB.prepare("SELECT idempotency_key, status, attempts FROM inbox WHERE queue = 'factline-batch' AND idempotency_key LIKE ? ORDER BY idempotency_key")
      .bind(`tenant-a/${id}:%`).all<any>()
    expect(inbox.results).toEqual([{ idempotency_key: `tenant-a/${id}:0`, status: "succeeded", attempts: 2 }])
  }, 120_000)

  it("cancel stops further chunks; a finished job cannot be cancelled", async () => {
    const run = unique("impc")
    const id = await startImport(calls(run, 1_000))
    const cancelled = await request(`/v1/batches/${id}/cancel`, { method: "POST", token: tokenA })
    expect(cancelled.status).toBe(200)
    expect(await cancelled.json<any>()).toMatchObject({ batch_id: id, status: "cancelled" })
    await drain({ timeoutMs: 60_000 })
    const after = await job(id)
    expect(after.status).toBe("cancelled")
    // At most the chunk that was already running when it was cancelled.
    expect(after.offset).toBeLessThanOrEqual(100)
    const charges = (await budget(`${run}_buyer`))?.charges ?? 0
    expect(charges).toBe(after.succeeded)
    expect((await readStream("tenant-a", `${run}_call_999`)).version).toBe(0)
    const again = await request(`/v1/batches/${id}/cancel`, { method: "POST", token: tokenA })
    expect(again.status).toBe(409)
  }, 120_000)

  it("is tenant-scoped: tenant B can neither read, list nor cancel tenant A's job; scopes are per operation", async () => {
    const run = unique("impt")
    const id = await startImport(calls(run, 2))
    for (const path of [`/v1/batches/${id}`]) {
      const response = await request(path, { token: tokenB })
      expect(response.status).toBe(404)
      expect(await response.text()).not.toContain("tenant-a")
    }
    expect((await request(`/v1/batches/${id}/cancel`, { method: "POST", token: tokenB })).status).toBe(404)
    const listB = await (await request("/v1/batches?limit=100", { token: tokenB })).json<any>()
    expect(JSON.stringify(listB)).not.toContain(id)
    const listA = await (await request("/v1/batches?status=queued&limit=100", { token: tokenA })).json<any>()
    const listedA = await (await request("/v1/batches?limit=100", { token: tokenA })).json<any>()
    expect([...listA.data, ...listedA.data].map((j: any) => j.batch_id)).toContain(id)
    await drain({ timeoutMs: 60_000 })
    expect(await job(id)).toMatchObject({ status: "succeeded", succeeded: 2 })
    // An import takes `admin`; a rebuild takes `platform` (a tenant admin cannot start one); read-only tokens neither.
    const post = (body: unknown, token: string) => request("/v1/batches", { method: "POST", token, body: JSON.stringify(body) })
    expect((await post({ operation: "import", events: [callCompleted()] }, tokenAReadOnly)).status).toBe(403)
    expect((await post({ operation: "import", events: [callCompleted()] }, tokenPlatform)).status).toBe(403)
    expect((await post({ operation: "rebuild", projection: "calls" }, tokenA)).status).toBe(403)
    expect((await post({ operation: "import", events: [] }, tokenA)).status).toBe(400)
    const tooMany = await post({ operation: "import", events: Array.from({ length: 1_001 }, () => ({})) }, tokenA)
    expect(tooMany.status).toBe(400)
    expect((await tooMany.json<any>()).error.code).toBe("too_many_events")
    // Decoded by the endpoint's payload schema, strictly: events and a manifest together, a foreign field, a format
    // it does not have are 400s, the usage first; no job is started by any of them.
    const listedBefore = (await (await request("/v1/batches?limit=100", { token: tokenA })).json<any>()).data.length
    for (const body of [{ operation: "import", events: [callCompleted()], manifest: "x.ndjson" }, { operation: "export", projection: "calls", colour: "red" }, { operation: "export", format: "xml" }, { operation: "compact" }]) {
      const refused = await post(body, tokenA)
      expect(refused.status, JSON.stringify(body)).toBe(400)
      const problem = await refused.json<any>()
      expect(problem.error.code).toBe("invalid_request")
      expect(problem.error.message).toMatch(/^send \{ "operation": "rebuild"/)
    }
    expect((await (await request("/v1/batches?limit=100", { token: tokenA })).json<any>()).data.length).toBe(listedBefore)
    // An upload's name is decoded by its path schema, its message the one the handler wrote by hand.
    const badName = await request("/v1/uploads/.hidden", { method: "PUT", token: tokenA, body: "{}\n", headers: { "content-type": "application/x-ndjson" } })
    expect(badName.status).toBe(400)
    expect((await badName.json<any>()).error.details.problems).toEqual([{ path: "name", message: "must be 1–128 letters, digits, '.', '_' or '-', starting with a letter or digit" }])
  }, 120_000)
})

/**
 * Starts a batch job while every LedgerShard RPC fails (the namespace is shared by the Worker and the test),
 * and waits until the queues are idle; the ledger is back afterwards. Answers the job's id.
 */
const whileLedgerDown = async (startJob: () => Promise<Response>): Promise<string> => {
  const namespace = env.LEDGER
  const original = namespace.get.bind(namespace)
  namespace.get = (() => {
    throw new Error("injected: the ledger is unavailable")
  }) as never
  try {
    const started = await startJob()
    expect(started.status).toBe(202)
    const id = (await started.json<any>()).batch_id as string
    await drain({ timeoutMs: 60_000 })
    return id
  } finally {
    namespace.get = original as never
  }
}

describe("a job that cannot finish ends failed", () => {
  it("a rebuild whose step exhausts its retries ends failed with its error, its shadow dropped, and a new rebuild can start", async () => {
    const start = () => request("/v1/batches", { method: "POST", token: tokenPlatform, body: JSON.stringify({ operation: "rebuild", projection: "buyer_budgets" }) })
    // Every LedgerShard RPC fails while the rebuild runs (the namespace is shared by the Worker and the test).
    const id = await whileLedgerDown(start)
    const failed = await (await request(`/v1/batches/${id}`, { token: tokenPlatform })).json<any>()
    expect(failed).toMatchObject({ batch_id: id, status: "failed" })
    expect(failed.error).toContain("the ledger is unavailable")
    expect(failed.finished_at).not.toBeNull()
    const shadow = await env.DB.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?").bind(failed.shadow_table).first()
    expect(shadow).toBeNull()
    // No longer running: a new rebuild is accepted (not a 409) and completes.
    const next = await start()
    expect(next.status).toBe(202)
    const nextId = (await next.json<any>()).batch_id
    await drain({ timeoutMs: 90_000 })
    expect(await (await request(`/v1/batches/${nextId}`, { token: tokenPlatform })).json<any>()).toMatchObject({ status: "completed" })
  }, 180_000)
})

describe("export (facts or a projection, NDJSON or CSV, to R2)", () => {
  const startExport = async (body: Record<string, unknown>, token = tokenA) => {
    const response = await request("/v1/batches", { method: "POST", token, body: JSON.stringify({ operation: "export", ...body }) })
    expect(response.status, await response.clone().text()).toBe(202)
    return (await response.json<any>()).batch_id as string
  }
  /** Every row the analysts' API returns for the projection, page by page. */
  const queryAll = async (projection: string, token = tokenA) => {
    const rows: Array<unknown> = []
    let cursor: string | null = null
    do {
      const page: any = await (await request(`/v1/projections/${projection}?limit=500${cursor ? `&cursor=${cursor}` : ""}`, { token })).json()
      rows.push(...page.data)
      cursor = page.next_cursor
    } while (cursor)
    return rows
  }

  it("a projection's export holds the same rows as the query API, across several chunks; CSV too; the download is the tenant's only", async () => {
    const run = unique("exp")
    // 520 buyers: more than one export chunk (500 rows) of buyer_budgets.
    const events = Array.from({ length: 520 }, (_, i) => callCompleted({}, { call_id: `${run}_call_${i}`, buyer_id: `${run}_buyer_${String(i).padStart(3, "0")}`, duration_s: 75, price_cents: 10 + i }))
    await startImport(events)
    await drain({ timeoutMs: 60_000 })
    const expected = await queryAll("buyer_budgets")
    expect(expected.length).toBeGreaterThanOrEqual(520)

    const id = await startExport({ projection: "buyer_budgets" })
    expect((await request(`/v1/batches/${id}/output`, { token: tokenA })).status).toBe(409)
    await drain({ timeoutMs: 60_000 })
    const done = await job(id)
    expect(done).toMatchObject({ operation: "export", status: "succeeded", offset: expected.length, total: expected.length, succeeded: expected.length, output: `/v1/batches/${id}/output` })
    const parts = await env.PAYLOADS.list({ prefix: `tenant-a/batches/${id}/output/` })
    expect(parts.objects.length).toBe(Math.ceil(expected.length / 500))
    const download = await request(`/v1/batches/${id}/output`, { token: tokenA })
    expect(download.status).toBe(200)
    expect(download.headers.get("content-type")).toBe("application/x-ndjson")
    const lines = (await download.text()).trimEnd().split("\n").map((line) => JSON.parse(line))
    expect(lines).toEqual(expected)

    const csvId = await startExport({ projection: "buyer_budgets", format: "csv" })
    await drain({ timeoutMs: 60_000 })
    const csv = (await (await request(`/v1/batches/${csvId}/output`, { token: tokenA })).text()).trimEnd().split("\n")
    expect(csv[0]).toBe("buyer_id,spent_cents,charges,refunds")
    expect(csv).toHaveLength(expected.length + 1)
    expect(csv).toContain(`${run}_buyer_007,17,1,0`)

    // Tenant B: the same 404 as an unknown job, nothing of A's.
    const asB = await request(`/v1/batches/${id}/output`, { token: tokenB })
    expect(asB.status).toBe(404)
    expect(await asB.text()).not.toContain(run)
  }, 180_000)

  it("the tenant's facts as NDJSON: every fact of the tenant, none of another's", async () => {
    const run = unique("expf")
    await startImport(calls(run, 3))
    const other = callCompleted({ tenant_id: "tenant-b" }, { call_id: `${run}_other`, buyer_id: `${run}_other_buyer` })
    expect((await request("/v1/batches", { method: "POST", token: tokenB, body: JSON.stringify({ operation: "import", events: [other] }) })).status).toBe(202)
    await drain({ timeoutMs: 60_000 })
    const id = await startExport({})
    await drain({ timeoutMs: 60_000 })
    const facts = (await (await request(`/v1/batches/${id}/output`, { token: tokenA })).text()).trimEnd().split("\n").map((line) => JSON.parse(line))
    const stored = (await env.DB.prepare("SELECT COUNT(*) AS n FROM facts WHERE tenant_id = 'tenant-a'").first<{ n: number }>())!.n
    expect(facts).toHaveLength(stored)
    expect(await job(id)).toMatchObject({ status: "succeeded", succeeded: stored })
    expect(facts.filter((f: any) => f.subject.startsWith(run)).map((f: any) => f.type).sort()).toEqual(["charge", "charge", "charge", "outcome", "outcome", "outcome", "qualification", "qualification", "qualification"])
    // The rows of GET /v1/facts: no tenant column (the caller's tenant), data as JSON.
    expect(facts.every((f: any) => f.tenant_id === undefined && typeof f.data === "object")).toBe(true)
    expect(JSON.stringify(facts)).not.toContain(`${run}_other`)
    expect((await env.DB.prepare("SELECT COUNT(*) AS n FROM facts WHERE tenant_id = 'tenant-b' AND stream = ?").bind(`${run}_other`).first<{ n: number }>())!.n).toBe(3)
    expect((await request("/v1/batches", { method: "POST", token: tokenA, body: JSON.stringify({ operation: "export", format: "csv" }) })).status).toBe(400)
    expect((await request("/v1/batches", { method: "POST", token: tokenA, body: JSON.stringify({ operation: "export", projection: "nope" }) })).status).toBe(404)
  }, 120_000)
})

describe("import from an uploaded manifest (NDJSON in R2, read by byte range)", () => {
  /** `n` call.completed lines over 10 buyers (75 s, 100 + i % 50 cents), with invalid lines at `invalidAt` (1-based). */
  const ndjson = (run: string, n: number, invalidAt: ReadonlyArray<number>) => {
    const lines: Array<string> = []
    let call = 0
    for (let line = 1; lines.length < n + invalidAt.length; line++) {
      if (invalidAt.includes(line)) {
        lines.push(line % 2 === 0 ? `{"truncated": ` : JSON.stringify({ ...callCompleted({}, { call_id: `${run}_bad_${line}` }), schema_version: "two" }))
        continue
      }
      const i = call++
      lines.push(JSON.stringify(callCompleted({}, { call_id: `${run}_call_${i}`, buyer_id: `${run}_buyer_${i % 10}`, duration_s: 75, price_cents: 100 + (i % 50) })))
    }
    return `${lines.join("\n")}\n`
  }
  const upload = (name: string, body: string, token = tokenA) =>
    request(`/v1/uploads/${name}`, { method: "PUT", token, body, headers: { "content-type": "application/x-ndjson", "content-length": String(new TextEncoder().encode(body).length) } })

  it("10,000 events: exactly 10,000 outcome facts and exact budgets, the 7 invalid lines reported by number, a chunk failing midway retried; importing the file again adds nothing", async () => {
    const run = unique("man")
    const invalidAt = [1, 2, 500, 4_321, 7_777, 9_999, 10_007]
    const file = ndjson(run, 10_000, invalidAt)
    const name = `${run}.ndjson`
    const uploaded = await upload(name, file)
    expect(uploaded.status, await uploaded.clone().text()).toBe(201)
    expect(await uploaded.json<any>()).toEqual({ manifest: name, size: new TextEncoder().encode(file).length })
    expect((await env.PAYLOADS.head(`tenant-a/uploads/${name}`))?.size).toBe(new TextEncoder().encode(file).length)

    const start = async () => {
      const response = await request("/v1/batches", { method: "POST", token: tokenA, body: JSON.stringify({ operation: "import", manifest: name }) })
      expect(response.status, await response.clone().text()).toBe(202)
      return (await response.json<any>()).batch_id as string
    }
    // Chunk 40's first read of the file fails; every read is a range of at most 1 MiB, never the whole file.
    const bucket = env.PAYLOADS as R2Bucket & { get: R2Bucket["get"] }
    const original = bucket.get.bind(bucket)
    let reads = 0
    let refused = 0
    let whole = 0
    bucket.get = (async (key: string, options?: R2GetOptions) => {
      if (key === `tenant-a/uploads/${name}`) {
        reads++
        const range = options?.range as { offset?: number; length?: number } | undefined
        if (range?.length === undefined || range.length > 1024 * 1024) whole++
        if (reads === 40 && refused === 0) {
          refused++
          throw new Error("injected: R2 read refused")
        }
      }
      return original(key, options as never)
    }) as never
    let id: string
    try {
      id = await start()
      await drain({ timeoutMs: 300_000 })
    } finally {
      bucket.get = original as never
    }
    expect(refused).toBe(1)
    expect(whole).toBe(0)
    const done = await job(id!)
    expect(done).toMatchObject({ status: "succeeded", offset: 10_007, total: 10_007, succeeded: 10_000, failed: 7 })
    expect(done.errors.map((e: any) => e.line)).toEqual(invalidAt)
    // 101 chunks of 100 lines, 10 per message: 11 messages, one of them retried.
    const messages = await env.DB.prepare("SELECT COUNT(*) AS n, SUM(attempts) AS attempts FROM inbox WHERE queue = 'factline-batch' AND idempotency_key LIKE ?").bind(`tenant-a/${id!}:%`).first<any>()
    expect(messages).toEqual({ n: 11, attempts: 12 })
    const outcomes = await env.DB.prepare("SELECT COUNT(DISTINCT stream) AS streams, COUNT(*) AS n FROM facts WHERE tenant_id = 'tenant-a' AND type = 'outcome' AND stream LIKE ?").bind(`${run}_%`).first<any>()
    expect(outcomes).toEqual({ streams: 10_000, n: 10_000 })
    const budgets = await env.DB.prepare("SELECT buyer_id, spent_cents, charges FROM buyer_budgets WHERE tenant_id = 'tenant-a' AND buyer_id LIKE ? ORDER BY buyer_id").bind(`${run}_buyer_%`).all<any>()
    const expected = Array.from({ length: 10 }, (_, b) => {
      let cents = 0
      for (let i = b; i < 10_000; i += 10) cents += 100 + (i % 50)
      return { buyer_id: `${run}_buyer_${b}`, spent_cents: cents, charges: 1_000 }
    })
    expect(budgets.results).toEqual(expected)

    const again = await start()
    await drain({ timeoutMs: 300_000 })
    expect(await job(again)).toMatchObject({ status: "succeeded", succeeded: 10_000, failed: 7 })
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM facts WHERE tenant_id = 'tenant-a' AND stream LIKE ?").bind(`${run}_%`).first<any>()).toEqual({ n: 30_000 })
    expect((await env.DB.prepare("SELECT buyer_id, spent_cents, charges FROM buyer_budgets WHERE tenant_id = 'tenant-a' AND buyer_id LIKE ? ORDER BY buyer_id").bind(`${run}_buyer_%`).all<any>()).results).toEqual(expected)
  }, 600_000)

  it("uploads are the tenant's own: another tenant's import of the same name finds nothing; names are file names; content-length is required", async () => {
    const name = `${unique("own")}.ndjson`
    expect((await upload(name, `${JSON.stringify(callCompleted())}\n`)).status).toBe(201)
    const asB = await request("/v1/batches", { method: "POST", token: tokenB, body: JSON.stringify({ operation: "import", manifest: name }) })
    expect(asB.status).toBe(404)
    expect((await request("/v1/uploads/..%2Fx", { method: "PUT", token: tokenA, body: "x", headers: { "content-length": "1" } })).status).toBe(400)
    expect((await upload(name, "x", tokenAReadOnly)).status).toBe(403)
  })

  it("an upload is the documented NDJSON: any other content-type, or none, is a 415 and nothing is stored", async () => {
    const body = `${JSON.stringify(callCompleted())}\n`
    const length = String(new TextEncoder().encode(body).length)
    const documented = Object.keys((await (await request("/openapi.json")).json<any>()).paths["/v1/uploads/{name}"].put.requestBody.content)
    expect(documented).toEqual(["application/x-ndjson"])
    for (const contentType of ["application/json", "text/plain", "application/octet-stream", "application/x-ndjson-ish", undefined]) {
      const name = `${unique("typed")}.ndjson`
      const headers: Record<string, string> = { "content-length": length }
      if (contentType !== undefined) headers["content-type"] = contentType
      // `request` sets JSON for a body without a type, and a string body is text/plain: send bytes, bare.
      const response = contentType === undefined
        ? await exports.default.fetch(new Request(`http://factline.test/v1/uploads/${name}`, { method: "PUT", body: new TextEncoder().encode(body), headers: { ...headers, authorization: `Bearer ${tokenA}` } }))
        : await request(`/v1/uploads/${name}`, { method: "PUT", token: tokenA, body, headers })
      expect(response.status, String(contentType)).toBe(415)
      expect((await response.json<any>()).error).toMatchObject({ code: "unsupported_media_type", message: expect.stringContaining("application/x-ndjson") })
      expect(await env.PAYLOADS.head(`tenant-a/uploads/${name}`)).toBeNull()
    }
    const withParameters = await request(`/v1/uploads/${unique("typed")}.ndjson`, { method: "PUT", token: tokenA, body, headers: { "content-type": "Application/X-NDJSON; charset=utf-8", "content-length": length } })
    expect(withParameters.status).toBe(201)
  })
})

describe("reconcile (a projection against the ledger)", () => {
  const reconcile = async (body: Record<string, unknown>) => {
    const response = await request("/v1/batches", { method: "POST", token: tokenA, body: JSON.stringify({ operation: "reconcile", projection: "buyer_budgets", ...body }) })
    expect(response.status, await response.clone().text()).toBe(202)
    const id = (await response.json<any>()).batch_id as string
    await drain({ timeoutMs: 60_000 })
    return job(id)
  }

  it("reports exactly the corrupted and the stray row; with repair fixes exactly those, and a second reconcile finds no drift", async () => {
    const run = unique("rec")
    await startImport(calls(run, 30).map((e, i) => ({ ...e, payload: { ...(e.payload as object), buyer_id: `${run}_buyer_${i % 3}` } })))
    await drain({ timeoutMs: 60_000 })
    const all = async () => (await env.DB.prepare("SELECT * FROM buyer_budgets WHERE tenant_id = 'tenant-a' ORDER BY buyer_id").all<any>()).results
    const before = await all()
    const clean = await reconcile({})
    expect(clean).toMatchObject({ status: "succeeded", failed: 0, errors: [] })

    // Corrupt one row, add one no fact implies; tenant B's rows are not the job's business.
    await env.DB.batch([
      env.DB.prepare("UPDATE buyer_budgets SET spent_cents = spent_cents + 1 WHERE tenant_id = 'tenant-a' AND buyer_id = ?").bind(`${run}_buyer_1`),
      env.DB.prepare("INSERT INTO buyer_budgets (tenant_id, buyer_id, spent_cents, charges, refunds) VALUES ('tenant-a', ?, 5, 1, 0)").bind(`${run}_stray`),
      env.DB.prepare("INSERT INTO buyer_budgets (tenant_id, buyer_id, spent_cents, charges, refunds) VALUES ('tenant-b', ?, 5, 1, 0)").bind(`${run}_b_stray`)
    ])
    const corrupted = await all()
    const report = await reconcile({})
    expect(report).toMatchObject({ operation: "reconcile", status: "succeeded", failed: 2, succeeded: 0 })
    expect(report.errors.map((e: any) => e.error.split(": ")[0])).toEqual([`{"buyer_id":"${run}_buyer_1"}`, `{"buyer_id":"${run}_stray"}`])
    expect(report.errors[0].error).toContain("differs")
    expect(report.errors[1].error).toContain("not implied by the ledger")
    expect(await all()).toEqual(corrupted)

    const repaired = await reconcile({ repair: true })
    expect(repaired).toMatchObject({ status: "succeeded", failed: 2, succeeded: 2 })
    expect(await all()).toEqual(before)
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM buyer_budgets WHERE tenant_id = 'tenant-b' AND buyer_id = ?").bind(`${run}_b_stray`).first()).toEqual({ n: 1 })
    expect(await reconcile({})).toMatchObject({ failed: 0 })
    // The shadow tables are gone.
    const shadows = await env.DB.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'buyer_budgets__bt_%'").all()
    expect(shadows.results).toEqual([])
  }, 180_000)
})

describe("a reconcile that cannot finish", () => {
  it("ends failed with its error and leaves no shadow table behind", async () => {
    const id = await whileLedgerDown(() =>
      request("/v1/batches", { method: "POST", token: tokenA, body: JSON.stringify({ operation: "reconcile", projection: "buyer_budgets", repair: true }) })
    )
    expect(await job(id)).toMatchObject({ status: "failed", error: expect.stringContaining("the ledger is unavailable") })
    const shadows = await env.DB.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?").bind(`buyer_budgets__${id}`).all()
    expect(shadows.results).toEqual([])
  }, 120_000)
})

describe("an import chunk's cost", () => {
  it("D1 round trips per chunk are the same for 10 and 100 lines; one ledger RPC per shard touched", async () => {
    const testEnv = env as unknown as PlatformEnv
    const measure = async (size: number) => {
      const run = unique("cost")
      const id = `bt_${run}`
      const events = calls(run, size)
      const key = `tenant-a/batches/${id}/input.ndjson`
      await env.PAYLOADS.put(key, `${events.map((e) => JSON.stringify(e)).join("\n")}\n`)
      const now = new Date().toISOString()
      await env.DB.prepare(
        "INSERT INTO batch_jobs (id, tenant_id, operation, status, params, input_key, total, created_at, updated_at) VALUES (?, 'tenant-a', 'import', 'queued', '{}', ?, ?, ?, ?)"
      ).bind(id, key, size, now, now).run()
      const counts = newCounts()
      const batch = createMessageBatch("factline-batch", [{ id: unique("qm"), timestamp: new Date(), attempts: 1, body: BatchConsumer.message({ batch_id: id, operation: "import", offset: 0, total: size }, "tenant-a", new Date().toISOString()) }])
      const ctx = createExecutionContext()
      await platform.queue(batch, CountingBindings.env(testEnv, counts), ctx)
      expect((await getQueueResult(batch, ctx)).explicitAcks).toHaveLength(1)
      expect(await job(id)).toMatchObject({ status: "succeeded", succeeded: size })
      const shards = new Set(await Promise.all(events.map((e) => shardKeyOf("tenant-a", e.subject)))).size
      return { counts, shards }
    }
    await measure(10) // warms the per-isolate caches (the tenant's shard count)
    const ten = await measure(10)
    const hundred = await measure(100)
    await drain({ timeoutMs: 60_000 })
    expect(hundred.counts.d1RoundTrips).toBe(ten.counts.d1RoundTrips)
    // inbox begin and finish, the job read, queued → running, the keys claim, the progress write, the metrics sample.
    expect(hundred.counts.d1RoundTrips).toBeLessThanOrEqual(7)
    expect(ten.counts.doRpcs).toBe(ten.shards)
    expect(hundred.counts.doRpcs).toBe(hundred.shards)
  }, 120_000)
})

describe("a job whose chunk message is lost", () => {
  it("ends failed at the next scheduled run once it has made no progress for an hour; a recent or finished job is left alone", async () => {
    const insert = async (status: string, updatedAt: string) => {
      const id = `bt_${unique("stale")}`
      await env.DB.prepare("INSERT INTO batch_jobs (id, tenant_id, operation, status, params, created_at, updated_at) VALUES (?, 'tenant-a', 'import', ?, '{}', ?, ?)")
        .bind(id, status, updatedAt, updatedAt).run()
      return id
    }
    const old = new Date(Date.now() - 2 * 3600_000).toISOString()
    const lost = await insert("running", old)
    const recent = await insert("running", new Date().toISOString())
    const finished = await insert("succeeded", old)
    const ctx = createExecutionContext()
    await platform.scheduled(createScheduledController({ scheduledTime: new Date(), cron: "*/5 * * * *" }), env as unknown as PlatformEnv, ctx)
    await waitOnExecutionContext(ctx)
    expect(await job(lost)).toMatchObject({ status: "failed", error: expect.stringContaining("no progress since") })
    expect((await job(recent)).status).toBe("running")
    expect((await job(finished)).status).toBe("succeeded")
  })
})

describe("import: a client's payload_ref is refused (issue 21, defect 1)", () => {
  const upload = (name: string, body: string) =>
    request(`/v1/uploads/${name}`, { method: "PUT", token: tokenA, body, headers: { "content-type": "application/x-ndjson", "content-length": String(new TextEncoder().encode(body).length) } })

  it("inline and from a manifest: the line with payload_ref is reported failed (set by the producer only), the referenced object is never read, nothing of it reaches the ledger", async () => {
    const run = unique("pref")
    // An object in the tenant's own prefix that would be a valid call.completed payload.
    const target = `${run}.json`
    const stolen = callCompleted({}, { call_id: `${run}_ref`, buyer_id: `${run}_buyer`, duration_s: 75, price_cents: 999 })
    expect((await upload(target, JSON.stringify(stolen.payload))).status).toBe(201)
    const ref = `r2://factline-payloads/tenant-a/uploads/${target}`
    const { payload: _, ...withoutPayload } = stolen
    const lines = (tag: string) => [
      callCompleted({}, { call_id: `${run}_${tag}_ok`, buyer_id: `${run}_buyer`, duration_s: 75, price_cents: 100 }),
      { ...withoutPayload, idempotency_key: `call.completed:${run}_${tag}_ref`, payload_ref: ref }
    ]
    const manifest = `${run}-manifest.ndjson`
    expect((await upload(manifest, lines("manifest").map((l) => JSON.stringify(l)).join("\n") + "\n")).status).toBe(201)

    const bucket = env.PAYLOADS as R2Bucket & { get: R2Bucket["get"] }
    const original = bucket.get.bind(bucket)
    const reads: Array<string> = []
    bucket.get = (async (key: string, options?: R2GetOptions) => {
      reads.push(key)
      return original(key, options as never)
    }) as never
    let ids: Array<string>
    try {
      const inline = await startImport(lines("inline"))
      const fromManifest = await request("/v1/batches", { method: "POST", token: tokenA, body: JSON.stringify({ operation: "import", manifest }) })
      expect(fromManifest.status, await fromManifest.clone().text()).toBe(202)
      ids = [inline, (await fromManifest.json<any>()).batch_id]
      await drain({ timeoutMs: 60_000 })
    } finally {
      bucket.get = original as never
    }
    for (const id of ids) {
      const done = await job(id)
      expect(done, id).toMatchObject({ status: "succeeded", succeeded: 1, failed: 1 })
      expect(done.errors).toEqual([{ line: 2, error: expect.stringContaining("payload_ref is set by the producer only") }])
    }
    expect(reads.filter((key) => key.endsWith(`/uploads/${target}`))).toEqual([])
    expect((await readStream("tenant-a", stolen.subject)).version).toBe(0)
    // The valid lines of both jobs: two charges of 100 cents, none of 999.
    expect(await budget(`${run}_buyer`)).toEqual({ spent_cents: 200, charges: 2 })
  }, 120_000)
})
