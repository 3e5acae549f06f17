/**
 * W3C trace context across every hop: a `traceparent` sent with an event (header, envelope field or
 * CloudEvents attribute) — or a new one when none is sent — reaches the facts its handler appends, the facts
 * a processor derives from them, the D1 facts copy, the trace endpoint, CloudEvents out, the webhook
 * delivery's POST and the `webhook_sent` fact that records it, and the log line of each processing attempt;
 * the trace-id stays, the parent-id is new at each hop. An invalid one is a 400 naming it. A ledger shard
 * created before trace context keeps working.
 */
import { createExecutionContext, createMessageBatch, getQueueResult, runInDurableObject } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { afterEach, describe, expect, it, vi } from "vitest"
import { FactMessage, type LedgerProtocol } from "@factline/core/runtime"
import { type Fact, TraceContext } from "@factline/schemas"
import type { LedgerShard, PlatformEnv } from "@factline/workers"
import { drain } from "./Drain.js"
import { callCompleted, postEvents, readStream, request, tokenA, unique } from "./helpers.js"
import { fragileBuyers } from "./TestModule.js"
import { platform } from "./worker.js"

const traceId = () => [...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, "0")).join("")
const sentBy = (trace: string, parent = "00f067aa0ba902b7", flags = "01") => `00-${trace}-${parent}-${flags}`
const parentOf = (traceparent: string | undefined) => TraceContext.parse(traceparent)?.parentId

const api = async (path: string, init: RequestInit = {}) => {
  const response = await request(path, { token: tokenA, ...init })
  return { status: response.status, headers: response.headers, body: await response.json<any>() }
}

const created: Array<string> = []
afterEach(async () => {
  for (const id of created.splice(0)) await request(`/v1/webhooks/endpoints/${id}`, { method: "DELETE", token: tokenA })
  vi.restoreAllMocks()
})

/** JSON log lines written with `console[method]` while `run` runs. */
const logged = async (method: "log" | "warn" | "error", run: () => Promise<unknown>): Promise<Array<Record<string, any>>> => {
  const lines: Array<string> = []
  const spy = vi.spyOn(console, method).mockImplementation((...args: Array<unknown>) => void lines.push(args.map(String).join(" ")))
  try {
    await run()
  } finally {
    spy.mockRestore()
  }
  return lines.flatMap((line) => {
    try {
      return [JSON.parse(line) as Record<string, any>]
    } catch {
      return []
    }
  })
}

describe("trace context", () => {
  it("a traceparent header reaches the outcome, the derived charge, the facts copy, the trace endpoint, CloudEvents out and the webhook delivery", async () => {
    const path = `/hooks/ok-${unique("ep")}`
    const endpoint = await api("/v1/webhooks/endpoints", {
      method: "POST",
      body: JSON.stringify({ url: `${env.TEST_RECEIVER_URL}${path}`, event_types: ["charge.created"] })
    })
    expect(endpoint.status).toBe(201)
    created.push(endpoint.body.id)

    const trace = traceId()
    const sent = sentBy(trace)
    const call = callCompleted({}, { duration_s: 90 })
    const accepted = await request("/v1/events", { method: "POST", token: tokenA, body: JSON.stringify(call), headers: { traceparent: sent } })
    expect(accepted.status).toBe(202)
    expect(accepted.headers.get("traceparent")).toBe(sent)
    await drain()

    // Every fact of the chain is in the trace; each step took a parent-id of its own.
    const facts = (await readStream("tenant-a", call.subject)).facts
    expect(facts.map((f) => f.type)).toEqual(["outcome", "qualification", "charge", "webhook_sent"])
    for (const f of facts) expect(TraceContext.traceId(f.traceparent), f.type).toBe(trace)
    const [outcome, qualification, charge, webhookSent] = facts as [Fact, Fact, Fact, Fact]
    expect(parentOf(outcome.traceparent)).not.toBe("00f067aa0ba902b7")
    expect(parentOf(charge.traceparent)).not.toBe(parentOf(outcome.traceparent))
    // One processor step derived both: one span.
    expect(qualification.traceparent).toBe(charge.traceparent)
    expect(parentOf(webhookSent.traceparent)).not.toBe(parentOf(charge.traceparent))

    // The receiver got the trace in a traceparent header: the attempt's own span, the one webhook_sent records.
    const deliveries: Array<{ headers: Record<string, string> }> = await (await fetch(`${env.TEST_RECEIVER_URL}/received?path=${encodeURIComponent(path)}`)).json()
    expect(deliveries).toHaveLength(1)
    expect(TraceContext.traceId(deliveries[0]!.headers.traceparent)).toBe(trace)
    expect(deliveries[0]!.headers.traceparent).toBe(webhookSent.traceparent)

    // The trace endpoint: the fact's traceparent, and each fact of the chain with its own.
    const traced = await api(`/v1/facts/${charge.fact_id}/trace?subject=${call.subject}`)
    expect(traced.status).toBe(200)
    expect(traced.body.traceparent).toBe(charge.traceparent)
    expect(traced.body.back.map((f: any) => [f.type, f.traceparent])).toEqual([["outcome", outcome.traceparent], ["charge", charge.traceparent]])
    expect(traced.body.forward.map((f: any) => [f.type, f.traceparent])).toEqual([["webhook_sent", webhookSent.traceparent]])

    // The D1 copy (GET /v1/facts), the stream API and CloudEvents out.
    const copied = await api(`/v1/facts?subject=${call.subject}`)
    expect(Object.fromEntries(copied.body.data.map((f: any) => [f.type, f.traceparent]))).toEqual(Object.fromEntries(facts.map((f) => [f.type, f.traceparent])))
    const stream = await api(`/v1/streams/${call.subject}/facts`)
    expect(stream.body.facts.map((f: any) => f.traceparent)).toEqual(facts.map((f) => f.traceparent))
    const cloudEvents = await api(`/v1/streams/${call.subject}/facts`, { headers: { accept: "application/cloudevents-batch+json" } })
    expect(cloudEvents.body.map((e: any) => e.traceparent)).toEqual(facts.map((f) => f.traceparent))
    const copiedCloudEvents = await api(`/v1/facts?subject=${call.subject}`, { headers: { accept: "application/cloudevents-batch+json" } })
    expect(copiedCloudEvents.body.every((e: any) => TraceContext.traceId(e.traceparent) === trace)).toBe(true)
  })

  it("without a traceparent the request starts a new trace, returned in the 202's traceparent header", async () => {
    const calls = [callCompleted(), callCompleted()]
    const accepted = await postEvents({ events: calls })
    expect(accepted.status).toBe(202)
    const generated = accepted.headers.get("traceparent")
    expect(TraceContext.parse(generated)).toMatchObject({ version: "00", flags: "01" })
    await drain()
    for (const call of calls) {
      const facts = (await readStream("tenant-a", call.subject)).facts
      expect(facts.map((f) => f.type)).toEqual(["outcome", "qualification", "charge"])
      for (const f of facts) expect(TraceContext.traceId(f.traceparent)).toBe(TraceContext.traceId(generated!))
    }
    // Another request, another trace.
    const other = await postEvents(callCompleted())
    expect(TraceContext.traceId(other.headers.get("traceparent"))).not.toBe(TraceContext.traceId(generated!))
    await drain()
  })

  it("an event's own traceparent (envelope field, CloudEvents attribute in structured and binary mode) wins over the header", async () => {
    const [header, own, structured, binary] = [traceId(), traceId(), traceId(), traceId()]
    const withOwn = callCompleted({ traceparent: sentBy(own) })
    const withoutOwn = callCompleted()
    const accepted = await request("/v1/events", { method: "POST", token: tokenA, body: JSON.stringify({ events: [withOwn, withoutOwn] }), headers: { traceparent: sentBy(header) } })
    expect(accepted.status).toBe(202)
    expect(accepted.headers.get("traceparent")).toBe(sentBy(header))

    const ce = unique("call")
    const data = (call_id: string) => ({ call_id, buyer_id: "buyer_1", duration_s: 90, price_cents: 120, currency: "USD" })
    const structuredPost = await request("/v1/events", {
      method: "POST", token: tokenA, headers: { "content-type": "application/cloudevents+json" },
      body: JSON.stringify({ specversion: "1.0", type: "call.completed", id: `evt-${ce}`, source: "/billing", subject: ce, data: data(ce), traceparent: sentBy(structured) })
    })
    expect(structuredPost.status).toBe(202)
    // Every event carried its own: no event is in the request's (generated) trace, so none is returned.
    expect(structuredPost.headers.get("traceparent")).toBeNull()
    const ceBinary = unique("call")
    const binaryPost = await request("/v1/events", {
      method: "POST", token: tokenA, body: JSON.stringify(data(ceBinary)),
      headers: { "ce-specversion": "1.0", "ce-type": "call.completed", "ce-id": `evt-${ceBinary}`, "ce-source": "/billing", "ce-subject": ceBinary, "ce-traceparent": sentBy(binary) }
    })
    expect(binaryPost.status).toBe(202)
    await drain()

    const traceOf = async (subject: string) => new Set((await readStream("tenant-a", subject)).facts.map((f) => TraceContext.traceId(f.traceparent)))
    expect(await traceOf(withOwn.subject)).toEqual(new Set([own]))
    expect(await traceOf(withoutOwn.subject)).toEqual(new Set([header]))
    expect(await traceOf(ce)).toEqual(new Set([structured]))
    expect(await traceOf(ceBinary)).toEqual(new Set([binary]))
  })

  it("an invalid traceparent is a 400 naming it, wherever it is sent, and nothing is accepted", async () => {
    const bad = ["00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "banana"]
    for (const value of bad) {
      const call = callCompleted()
      const header = await api("/v1/events", { method: "POST", body: JSON.stringify(call), headers: { traceparent: value } })
      expect(header.status, value).toBe(400)
      expect(header.body.error.message).toContain("traceparent header")
      expect(header.body.error.details.problems).toEqual([{ path: "headers.traceparent", message: TraceContext.formatMessage }])

      const field = await api("/v1/events", { method: "POST", body: JSON.stringify({ events: [callCompleted(), { ...call, traceparent: value }] }) })
      expect(field.status).toBe(400)
      expect(field.body.error.code).toBe("invalid_events")
      expect(field.body.error.details.problems).toEqual([{ path: "events.1.traceparent", message: TraceContext.formatMessage }])

      const ce = await api("/v1/events", {
        method: "POST", headers: { "content-type": "application/cloudevents+json" },
        body: JSON.stringify({ specversion: "1.0", type: "call.completed", id: unique("evt"), source: "/billing", subject: call.subject, data: call.payload, traceparent: value })
      })
      expect(ce.status).toBe(400)
      expect(ce.body.error.details.problems).toEqual([{ path: "traceparent", message: TraceContext.formatMessage }])
      expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM accepted_keys WHERE tenant_id = 'tenant-a' AND idempotency_key = ?").bind(call.idempotency_key).first("n")).toBe(0)
    }
    await drain()
  })

  it("a redelivered event in another trace appends nothing: the facts keep the trace that decided them", async () => {
    const first = traceId()
    const call = callCompleted()
    expect((await request("/v1/events", { method: "POST", token: tokenA, body: JSON.stringify(call), headers: { traceparent: sentBy(first) } })).status).toBe(202)
    await drain()
    const before = (await readStream("tenant-a", call.subject)).facts
    const again = await request("/v1/events", { method: "POST", token: tokenA, body: JSON.stringify(call), headers: { traceparent: sentBy(traceId()) } })
    expect(again.headers.get("idempotent-replay")).toBe("true")
    await drain()
    const after = (await readStream("tenant-a", call.subject)).facts
    expect(after).toEqual(before)
    for (const f of after) expect(TraceContext.traceId(f.traceparent)).toBe(first)
  })

  it("the log line of a processing attempt carries the message's traceparent, and a fact message's the trace ids of its facts", async () => {
    // A retry through the real queue (the tests log failures only): the events consumer's warn line.
    const trace = traceId()
    const flaky = {
      ...callCompleted(),
      message_type: "test.flaky.happened", schema_version: 1, idempotency_key: unique("flaky"), payload: { fail_times: 1 },
      traceparent: sentBy(trace)
    }
    const retried = await logged("warn", async () => {
      expect((await request("/v1/events", { method: "POST", token: tokenA, body: JSON.stringify(flaky) })).status).toBe(202)
      await drain()
    })
    const line = retried.find((l) => l.message === "queue message processed" && l.idempotency_key === flaky.idempotency_key)
    expect(line).toMatchObject({ queue: "factline-events", outcome: "retried", attempt: 1, traceparent: sentBy(trace) })
    expect((await readStream("tenant-a", flaky.subject)).facts.map((f) => TraceContext.traceId(f.traceparent))).toEqual([trace])

    // Every attempt logged (FACTLINE_LOG_ATTEMPTS=all): an event, then the fact message its facts travel in.
    const logAll = { ...(env as unknown as PlatformEnv), FACTLINE_LOG_ATTEMPTS: "all" } as PlatformEnv
    const deliver = async (queue: string, body: unknown) => {
      const batch = createMessageBatch(queue, [{ id: unique("qm"), timestamp: new Date(), attempts: 1, body }])
      const ctx = createExecutionContext()
      await platform.queue(batch, logAll, ctx)
      expect((await getQueueResult(batch, ctx)).explicitAcks).toHaveLength(1)
    }
    const call = callCompleted({ traceparent: sentBy(trace, "b7ad6b7169203331") })
    const acked = await logged("log", () => deliver("factline-events", call))
    expect(acked.find((l) => l.idempotency_key === call.idempotency_key)).toMatchObject({ outcome: "acked", traceparent: sentBy(trace, "b7ad6b7169203331") })
    const [outcome] = (await readStream("tenant-a", call.subject)).facts
    const other = { ...outcome!, fact_id: unique("f"), sequence: 99, traceparent: sentBy(traceId()) }
    const processed = await logged("log", () => deliver("factline-fact-processing", FactMessage.make([outcome!, other])))
    expect(processed.find((l) => l.message === "queue message processed" && l.queue === "factline-fact-processing")).toMatchObject({
      outcome: "acked", trace_ids: [trace, TraceContext.traceId(other.traceparent)]
    })
    await drain()
  })

  it("by default a batch logs one line with its counts and a line per failed attempt, none per acked attempt", async () => {
    // FACTLINE_LOG_ATTEMPTS unset: the default (`batch`).
    const { FACTLINE_LOG_ATTEMPTS: _set, ...defaults } = env as unknown as PlatformEnv & Record<string, unknown>
    const trace = traceId()
    const calls = [callCompleted({ traceparent: sentBy(trace) }), callCompleted()]
    const flaky = { ...callCompleted(), message_type: "test.flaky.happened", schema_version: 1, idempotency_key: unique("flaky"), payload: { fail_times: 1 }, traceparent: sentBy(trace) }
    const batch = createMessageBatch("factline-events", [...calls, flaky].map((body) => ({ id: unique("qm"), timestamp: new Date(), attempts: 1, body })))
    const ctx = createExecutionContext()
    const lines: Record<"log" | "warn" | "error", Array<Record<string, any>>> = { log: [], warn: [], error: [] }
    lines.warn = await logged("warn", async () => {
      lines.log = await logged("log", () => platform.queue(batch, defaults as unknown as PlatformEnv, ctx))
    })
    const result = await getQueueResult(batch, ctx)
    expect(result.explicitAcks).toHaveLength(2)
    expect(result.retryMessages).toHaveLength(1)
    expect(lines.log.filter((l) => l.message === "queue message processed")).toEqual([])
    expect(lines.log.filter((l) => l.message === "queue batch processed")).toEqual([
      { level: "info", message: "queue batch processed", queue: "factline-events", messages: 3, acked: 2, retried: 1, parked: 0, dead_lettered: 0 }
    ])
    const retried = lines.warn.filter((l) => l.message === "queue message processed")
    expect(retried).toHaveLength(1)
    expect(retried[0]).toMatchObject({ outcome: "retried", idempotency_key: flaky.idempotency_key, traceparent: sentBy(trace) })
    await drain()
  })

  it("a projection mapping failure's log line names the fact's traceparent", async () => {
    // The test module's `fragile` projection throws for the charges of these buyers.
    const trace = traceId()
    const buyer = unique("fragile")
    const call = callCompleted({ traceparent: sentBy(trace) }, { buyer_id: buyer, duration_s: 90 })
    fragileBuyers.add(buyer)
    const lines = await logged("error", async () => {
      expect((await postEvents(call)).status).toBe(202)
      await drain()
    }).finally(() => fragileBuyers.delete(buyer))
    const failed = lines.filter((l) => l.message === "projection mapping failed")
    expect(failed.length).toBeGreaterThan(0)
    for (const l of failed) expect(TraceContext.traceId(l.traceparent)).toBe(trace)
  })

  it("a ledger shard created before trace context adds the column on its next write; its older facts read without a traceparent", async () => {
    const stub = env.LEDGER.get(env.LEDGER.idFromName(`legacy-${unique("t")}/#0`)) as DurableObjectStub<LedgerShard>
    const tenant = "tenant-legacy"
    const stream = unique("s")
    await runInDurableObject(stub, (_instance, state) => {
      // The facts table as shards created it before the column existed, with one fact.
      state.storage.sql.exec(`CREATE TABLE facts (
        tenant_id TEXT NOT NULL, stream TEXT NOT NULL, sequence INTEGER NOT NULL, fact_id TEXT NOT NULL UNIQUE, type TEXT NOT NULL,
        data TEXT NOT NULL, causation_id TEXT NOT NULL, correlation_id TEXT NOT NULL, caused_by TEXT NOT NULL, created_at TEXT NOT NULL,
        PRIMARY KEY (tenant_id, stream, sequence)) WITHOUT ROWID`)
      state.storage.sql.exec(
        "INSERT INTO facts VALUES (?, ?, 1, 'f_old', 'outcome', '{}', 'k_old', 'c', 'record-outcome', '2026-11-01T00:00:00.000Z')", tenant, stream
      )
    })
    const rpc = stub as unknown as LedgerProtocol.LedgerShardRpc
    expect((await rpc.read({ tenant_id: tenant, stream })).facts.map((f) => [f.fact_id, f.traceparent])).toEqual([["f_old", undefined]])
    const traceparent = TraceContext.generate()
    const draft = { type: "outcome", data: {}, causation_id: "k_new", correlation_id: "c", caused_by: "record-outcome", created_at: new Date().toISOString(), traceparent }
    const [appended] = await rpc.append([{ tenant_id: tenant, stream, facts: [{ ...draft, fact_id: "f_new" }] }])
    expect(appended).toMatchObject({ status: "appended", version: 2 })
    // A second write on the same object, and a fresh object after the column exists: nothing added twice.
    expect((await rpc.append([{ tenant_id: tenant, stream, facts: [{ ...draft, fact_id: "f_newer" }] }]))[0]).toMatchObject({ status: "appended", version: 3 })
    const state = await rpc.read({ tenant_id: tenant, stream })
    expect(state.facts.map((f) => [f.fact_id, f.traceparent])).toEqual([["f_old", undefined], ["f_new", traceparent], ["f_newer", traceparent]])
    const columns = await runInDurableObject(stub, (_instance, s) =>
      s.storage.sql.exec<{ sql: string }>("SELECT sql FROM sqlite_master WHERE name = 'facts'").one().sql.match(/traceparent/g)?.length)
    expect(columns).toBe(1)
  })
})
