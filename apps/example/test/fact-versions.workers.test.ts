/**
 * Versioned facts end to end: `test_invoice_issued` gained a version 2 (`currency`, upcast from version 1 as
 * "USD"). A fact stored by the code before — written into the ledger at schema_version 1, v1-shaped — is seen
 * in the version-2 shape by a decider's fold, a processor, the live projection and a projection rebuild, the
 * HTTP reads (JSON and CloudEvents) and a webhook payload; a fact stored at a version newer than the running
 * code is refused loudly (dead-lettered as `unsupported_version`, naming type and version), never applied.
 */
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { Module, Webhook } from "@factline/core"
import { FactId, FactMessage } from "@factline/core/runtime"
import type { Fact } from "@factline/schemas"
import { makePlatform, type PlatformEnv } from "@factline/workers"
import { modules } from "../src/modules.js"
import { drain } from "./Drain.js"
import { deadMessages, eventually, ledger, postEvents, readStream, request, tokenA, tokenPlatform, unique } from "./helpers.js"
import { InvoiceIssued, IssueInvoice, testModule } from "./TestModule.js"
import { platform } from "./worker.js"

const tenant = "tenant-a"

/** The test-only `test_invoices` projection's table, on every read database (it has no migration). */
const createInvoicesTable = async () => {
  const ddl = `CREATE TABLE IF NOT EXISTS test_invoices (tenant_id TEXT NOT NULL, invoice_id TEXT NOT NULL, currency TEXT, test_invoice_issued_seq INTEGER, PRIMARY KEY (tenant_id, invoice_id))`
  for (const db of [env.DB, (env as unknown as Record<string, D1Database | undefined>).FACTLINE_READ_DB_1]) if (db) await db.prepare(ddl).run()
}
const invoiceRow = (invoice_id: string) => env.DB.prepare("SELECT invoice_id, currency FROM test_invoices WHERE tenant_id = ? AND invoice_id = ?").bind(tenant, invoice_id).first()

/** Facts written as older (or newer) code would have: straight into the ledger at `schema_version`, never relayed. */
const storeAt = async (stream: string, schema_version: number, data: Record<string, unknown>): Promise<Fact> => {
  const cause = unique("stored")
  const [appended] = await Effect.runPromise(ledger().append([{
    tenant_id: tenant,
    stream,
    facts: [{
      fact_id: await FactId.make({ tenantId: tenant, cause, decidedBy: "older-code", position: 0 }),
      type: "test_invoice_issued", data, schema_version, causation_id: cause, correlation_id: cause, caused_by: "older-code", created_at: new Date().toISOString()
    }]
  }]))
  if (appended?.status !== "appended") throw new Error(JSON.stringify(appended))
  return appended.facts[0]!
}

/** Delivers a fact message to one of the fact queues' consumers, as the relay would. */
const deliver = async (queue: string, fact: Fact, handler: typeof platform = platform, bindings: PlatformEnv = env as unknown as PlatformEnv) => {
  const batch = createMessageBatch(queue, [{ id: unique("qm"), timestamp: new Date(), attempts: 1, body: FactMessage.make(fact) }])
  const ctx = createExecutionContext()
  await handler.queue(batch, bindings, ctx)
  return getQueueResult(batch, ctx)
}

const issue = (invoice_id: string, currency: string) => ({
  schema_version: 1,
  message_type: IssueInvoice.messageType,
  idempotency_key: unique("issue"),
  tenant_id: tenant,
  subject: invoice_id,
  payload: { invoice_id, amount_cents: 900, currency }
})

describe("versioned facts", () => {
  it("a fact stored at version 1 is seen at version 2 by a decider, a processor, the projection (live and rebuilt), the HTTP reads and the export", async () => {
    await createInvoicesTable()
    const invoice = unique("inv")
    const stored = await storeAt(invoice, 1, { invoice_id: invoice, amount_cents: 1250 })
    // The ledger keeps what was written: version 1, no currency.
    expect(stored).toMatchObject({ schema_version: 1, data: { invoice_id: invoice, amount_cents: 1250 } })
    expect((await readStream(tenant, invoice)).facts[0]).toMatchObject({ schema_version: 1, data: { invoice_id: invoice, amount_cents: 1250 } })

    // The decider folds it as version 2: the second issue is refused naming the upcast currency.
    expect((await postEvents(issue(invoice, "EUR"))).status).toBe(202)
    // A processor: the relayed version-1 fact reaches it as version 2.
    expect((await deliver("factline-fact-processing", stored)).explicitAcks).toHaveLength(1)
    // The live projection.
    expect((await deliver("factline-projections", stored)).explicitAcks).toHaveLength(1)
    await drain()
    const facts = (await readStream(tenant, invoice)).facts
    expect(facts.map((f) => [f.type, f.schema_version, f.data]).sort((a, b) => String(a[0]).localeCompare(String(b[0])))).toEqual([
      ["test_invoice_billed", 1, { invoice_id: invoice, billed: "1250 USD" }],
      ["test_invoice_issued", 1, { invoice_id: invoice, amount_cents: 1250 }],
      ["test_invoice_reissue_refused", 1, { invoice_id: invoice, issued_in: "USD" }]
    ])
    expect(await invoiceRow(invoice)).toEqual({ invoice_id: invoice, currency: "USD" })

    // New facts are written at the latest version.
    const fresh = unique("inv")
    expect((await postEvents(issue(fresh, "EUR"))).status).toBe(202)
    await drain()
    expect((await readStream(tenant, fresh)).facts.map((f) => [f.type, f.schema_version, f.data.currency ?? f.data.billed])).toEqual([
      ["test_invoice_issued", 2, "EUR"],
      ["test_invoice_billed", 1, "900 EUR"]
    ])

    // HTTP reads answer the latest shape, JSON and CloudEvents alike.
    const json = await (await request(`/v1/streams/${invoice}/facts`, { token: tokenA })).json<any>()
    expect(json.facts[0]).toMatchObject({ schema_version: 2, data: { invoice_id: invoice, amount_cents: 1250, currency: "USD" } })
    const listed = await (await request(`/v1/facts?subject=${invoice}&type=test_invoice_issued`, { token: tokenA })).json<any>()
    expect(listed.data).toEqual([expect.objectContaining({ schema_version: 2, data: { invoice_id: invoice, amount_cents: 1250, currency: "USD" } })])
    const cloudEvents = await (await request(`/v1/streams/${invoice}/facts`, { token: tokenA, headers: { accept: "application/cloudevents-batch+json" } })).json<any>()
    expect(cloudEvents[0]).toMatchObject({ type: "test_invoice_issued", schemaversion: "2", data: { invoice_id: invoice, amount_cents: 1250, currency: "USD" } })

    // The NDJSON export of the tenant's facts (read from the ledger) writes it at version 2.
    const exported = await request("/v1/batches", { method: "POST", token: tokenA, body: JSON.stringify({ operation: "export" }) })
    expect(exported.status, await exported.clone().text()).toBe(202)
    const exportId = (await exported.json<any>()).batch_id as string
    await drain({ timeoutMs: 60_000 })
    const download = await request(`/v1/batches/${exportId}/output`, { token: tokenA })
    expect(download.status).toBe(200)
    const lines = (await download.text()).trimEnd().split("\n").map((line) => JSON.parse(line))
    expect(lines.find((l) => l.fact_id === stored.fact_id)).toMatchObject({ schema_version: 2, data: { invoice_id: invoice, amount_cents: 1250, currency: "USD" } })

    // A rebuild replays the version-1 fact as version 2 (the live row removed first, so only the replay can restore it).
    await env.DB.prepare("DELETE FROM test_invoices WHERE tenant_id = ? AND invoice_id = ?").bind(tenant, invoice).run()
    const started = await request("/v1/batches", { method: "POST", token: tokenPlatform, body: JSON.stringify({ operation: "rebuild", projection: "test_invoices" }) })
    expect(started.status, await started.clone().text()).toBe(202)
    const { batch_id } = await started.json<any>()
    const done = await eventually(async () => {
      const status = await (await request(`/v1/batches/${batch_id}`, { token: tokenPlatform })).json<any>()
      return status.status === "completed" || status.status === "failed" ? status : undefined
    }, 120_000, "the rebuild")
    expect(done.status).toBe("completed")
    expect(await invoiceRow(invoice)).toEqual({ invoice_id: invoice, currency: "USD" })
    expect(await invoiceRow(fresh)).toEqual({ invoice_id: fresh, currency: "EUR" })
  }, 180_000)

  it("a webhook payload is built from the version-2 shape", async () => {
    // A platform publishing `test_invoice_issued` (the example's own catalog stays charge.created only).
    const published = Webhook.event(InvoiceIssued, { type: "test.invoice.issued", description: "An invoice was issued." })
    const withHooks = makePlatform([...modules, testModule, Module.make("test_hooks", { webhooks: [published] })])
    const call = async (method: string, path: string, body?: unknown) => {
      const response = await withHooks.fetch(
        new Request(`http://factline.test${path}`, { method, headers: { authorization: `Bearer ${tokenA}`, "content-type": "application/json" }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) }),
        env as unknown as PlatformEnv,
        createExecutionContext()
      )
      return { status: response.status, body: response.status === 204 ? null : await response.json<any>() }
    }
    const path = `/hooks/ok-${unique("versions")}`
    const endpoint = await call("POST", "/v1/webhooks/endpoints", { url: `${env.TEST_RECEIVER_URL}${path}`, event_types: ["test.invoice.issued"] })
    expect(endpoint.status, JSON.stringify(endpoint.body)).toBe(201)
    try {
      const invoice = unique("inv")
      const stored = await storeAt(invoice, 1, { invoice_id: invoice, amount_cents: 300 })
      expect((await deliver("factline-webhooks", stored, withHooks)).explicitAcks).toHaveLength(1)
      await drain()
      const received = await eventually(async () => {
        const got = await (await fetch(`${env.TEST_RECEIVER_URL}/received?path=${encodeURIComponent(path)}`)).json<Array<{ body: string }>>()
        return got.length > 0 ? got : undefined
      }, 30_000, "the delivery")
      expect(received).toHaveLength(1)
      expect(JSON.parse(received[0]!.body)).toMatchObject({ type: "test.invoice.issued", data: { invoice_id: invoice, amount_cents: 300, currency: "USD" } })
    } finally {
      await call("DELETE", `/v1/webhooks/endpoints/${endpoint.body.id}`)
    }
  }, 90_000)

  it("a fact stored at a version newer than the code is refused loudly, never applied", async () => {
    await createInvoicesTable()
    const invoice = unique("inv")
    const newer = await storeAt(invoice, 3, { invoice_id: invoice, amount_cents: 5, currency: "EUR", tax_cents: 1 })

    // The processor and the projection dead-letter it, naming type and version; nothing is derived or written.
    for (const queue of ["factline-fact-processing", "factline-projections"]) {
      const result = await deliver(queue, newer)
      expect(result.explicitAcks, queue).toHaveLength(1)
    }
    const dead = await eventually(async () => {
      const rows = await deadMessages(newer.fact_id)
      return rows.length >= 2 ? rows : undefined
    }, 30_000, "the dead letters")
    for (const row of dead) {
      expect(row.reason).toBe("unsupported_version")
      expect(row.last_error).toContain(`fact ${newer.fact_id} (test_invoice_issued) has schema_version 3, which this code does not know`)
      expect(row.last_error).toContain("known: 1..2")
    }
    expect(await invoiceRow(invoice)).toBeNull()

    // The decider refuses to decide over a stream it cannot read: the command is dead-lettered, nothing appended.
    const command = issue(invoice, "EUR")
    expect((await postEvents(command)).status).toBe(202)
    await drain()
    const refused = await eventually(async () => (await deadMessages(command.idempotency_key))[0], 30_000, "the refused command")
    expect(refused).toMatchObject({ reason: "unsupported_version" })
    expect(refused.last_error).toContain("has schema_version 3")
    expect((await readStream(tenant, invoice)).facts.map((f) => f.type)).toEqual(["test_invoice_issued"])

    // Reads answer it as stored, its version saying so: never reshaped by a guess.
    const json = await (await request(`/v1/streams/${invoice}/facts`, { token: tokenA })).json<any>()
    expect(json.facts[0]).toMatchObject({ schema_version: 3, data: { tax_cents: 1 } })
  }, 90_000)
})
