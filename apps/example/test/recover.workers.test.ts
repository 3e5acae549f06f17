/**
 * Recovery (`POST /v1/recover`, `factline recover`): facts in the ledger whose downstream messages were lost —
 * what a restart of `wrangler dev` does to everything on its local queues — reach their queues again, once in
 * effect however often recovery runs. The facts here are appended to the ledger directly (no relay), as a
 * consumer that died between its append and its send would leave them. The whole restart, against a real
 * `wrangler dev` killed with SIGKILL, is scripts/restart.mjs.
 */
import { env } from "cloudflare:workers"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { Bindings, FactId, KeptEvents, type LedgerProtocol } from "@factline/core/runtime"
import type { LedgerShard } from "@factline/workers"
import { drain } from "./Drain.js"
import { callCompleted, ledger, postEvents, request, tokenA, tokenPlatform, unique } from "./helpers.js"
import { overrideSettings } from "./worker.js"

/** An `outcome` fact of a call, appended to the ledger only: its messages to the queues are "lost". */
const appendUnrelayed = async (callId: string, buyerId: string, price: number) => {
  const cause = `call.completed:${callId}`
  const draft: LedgerProtocol.FactDraft = {
    fact_id: await FactId.make({ tenantId: "tenant-a", cause, decidedBy: "record-outcome", position: 0 }),
    type: "outcome",
    data: { call_id: callId, buyer_id: buyerId, duration_s: 120, price_cents: price, currency: "USD" },
    causation_id: cause,
    correlation_id: cause,
    caused_by: "record-outcome",
    created_at: new Date().toISOString()
  }
  const [result] = await Effect.runPromise(ledger().append([{ tenant_id: "tenant-a", stream: callId, facts: [draft] }]))
  expect(result?.status).toBe("appended")
}

const recover = (body: unknown, token = tokenPlatform) => request("/v1/recover", { method: "POST", token, body: JSON.stringify(body) })
/** Every call until `next_cursor` is null, counts summed. */
const recoverAll = async (body: Record<string, unknown>) => {
  const total = { facts: 0, relayed: 0, sends: 0, calls: 0 }
  let cursor: string | undefined
  do {
    const response = await recover({ ...body, ...(cursor ? { cursor } : {}) })
    expect(response.status).toBe(200)
    const report = await response.json() as { facts: number; relayed: number; sends: number; next_cursor: string | null }
    total.facts += report.facts
    total.relayed += report.relayed
    total.sends += report.sends
    total.calls++
    cursor = report.next_cursor ?? undefined
  } while (cursor)
  return total
}
const projection = async (name: string, query: string) => ((await (await request(`/v1/projections/${name}?${query}`, { token: tokenA })).json()) as { data: Array<Record<string, unknown>> }).data

describe("POST /v1/recover", () => {
  it("relays facts whose messages were lost: the processor derives, the projections apply — and a second recovery changes nothing", async () => {
    const buyer = unique("buyer")
    const calls = [unique("call"), unique("call"), unique("call")]
    const since = new Date(Date.now() - 60_000).toISOString()
    for (const [i, call] of calls.entries()) await appendUnrelayed(call, buyer, 100 * (i + 1))
    await drain()
    expect(await projection("calls", `buyer_id=${buyer}`)).toEqual([])

    const dry = await recoverAll({ since, dry_run: true })
    expect(dry.facts).toBeGreaterThanOrEqual(3)
    expect(dry.sends).toBe(0)
    await drain()
    expect(await projection("calls", `buyer_id=${buyer}`), "a dry run sends nothing").toEqual([])

    const first = await recoverAll({ since })
    expect(first.facts).toBeGreaterThanOrEqual(3)
    expect(first.relayed).toBeGreaterThanOrEqual(6) // each outcome to fact-processing and projections
    expect(first.sends).toBeGreaterThan(0)
    await drain()
    const rows = await projection("calls", `buyer_id=${buyer}`)
    expect(rows.map((r) => [r.call_id, r.qualified, r.charged_cents]).sort()).toEqual(calls.map((c, i) => [c, true, 100 * (i + 1)]).sort())
    expect(await projection("buyer_budgets", `buyer_id=${buyer}`)).toMatchObject([{ buyer_id: buyer, spent_cents: 600, charges: 3, refunds: 0 }])

    // Again, now with the derived qualification and charge facts in the window too: nothing doubles.
    const second = await recoverAll({ since })
    expect(second.facts).toBeGreaterThanOrEqual(9)
    await drain()
    expect(await projection("buyer_budgets", `buyer_id=${buyer}`)).toMatchObject([{ buyer_id: buyer, spent_cents: 600, charges: 3, refunds: 0 }])
    for (const call of calls) {
      const stream = await Effect.runPromise(ledger().read({ tenant_id: "tenant-a", stream: call }))
      expect(stream.facts.map((f) => f.type).sort()).toEqual(["charge", "outcome", "qualification"])
    }
  })

  it("a fact appended before `since` is not relayed", async () => {
    const buyer = unique("buyer")
    const call = unique("call")
    await appendUnrelayed(call, buyer, 700)
    await drain()
    const later = new Date(Date.now() + 1_000).toISOString()
    const report = await recoverAll({ since: later })
    expect(report.facts).toBe(0)
    await drain()
    expect(await projection("calls", `buyer_id=${buyer}`)).toEqual([])
  })

  it("refuses a tenant's admin token (403), a since that is not an ISO time, an unknown field and a malformed cursor (400)", async () => {
    expect((await recover({ since: new Date().toISOString() }, tokenA)).status).toBe(403)
    for (const [body, path] of [
      [{}, "since"], [{ since: "10m" }, "since"], [{ since: "2026-13-45T99:00:00Z" }, "since"],
      [{ since: new Date().toISOString(), dry_run: "yes" }, "dry_run"], [{ since: new Date().toISOString(), tenant: "tenant-b" }, "tenant"],
      [{ since: new Date().toISOString(), cursor: "not-a-cursor" }, "cursor"]
    ] as const) {
      const response = await recover(body)
      const error = (await response.json() as { error: { code: string; message: string; details?: { problems?: Array<{ path: string }> } } }).error
      expect(response.status, JSON.stringify(body)).toBe(400)
      if (path !== "cursor") expect(error.details?.problems?.map((p) => p.path), JSON.stringify(body)).toContain(path)
      expect(error.message).not.toMatch(/sqlite|SQL|stack/i)
    }
  })
})

describe("accepted events kept in development (FACTLINE_KEEP_ACCEPTED)", () => {
  it("the HTTP edge keeps each request's accepted envelopes; recover re-sends a kept event that has no fact yet, not one already decided", async () => {
    overrideSettings({ FACTLINE_KEEP_ACCEPTED: "10m" })
    try {
      const since = new Date(Date.now() - 1_000).toISOString()
      const buyer = unique("buyer")
      const decided = callCompleted({}, { buyer_id: buyer, duration_s: 90, price_cents: 300 })
      expect((await postEvents(decided)).status).toBe(202)
      await drain()
      const kept = await Effect.runPromise(KeptEvents.since(Bindings.PayloadBucket.make(env.PAYLOADS), since))
      expect(kept.map((e) => e.idempotency_key)).toContain(decided.idempotency_key)

      // An accepted event the events queue lost: kept, never delivered.
      const lostEnvelope = callCompleted({}, { buyer_id: buyer, duration_s: 120, price_cents: 400 })
      await Effect.runPromise(KeptEvents.keeper(Bindings.PayloadBucket.make(env.PAYLOADS))([lostEnvelope as never], new Date().toISOString()))

      const dry = await (await recover({ since, dry_run: true })).json() as { events: { kept: number; decided: number; resent: number } }
      expect(dry.events).toMatchObject({ resent: 1 })
      expect(dry.events.decided).toBeGreaterThanOrEqual(1)
      const report = await (await recover({ since })).json() as { events: { resent: number } }
      expect(report.events.resent).toBe(1)
      await drain()
      expect(await projection("buyer_budgets", `buyer_id=${buyer}`)).toMatchObject([{ spent_cents: 700, charges: 2 }])
      const again = await (await recover({ since })).json() as { events: { resent: number } }
      expect(again.events.resent, "decided now: not sent again").toBe(0)
      await drain()
      expect(await projection("buyer_budgets", `buyer_id=${buyer}`)).toMatchObject([{ spent_cents: 700, charges: 2 }])
    } finally {
      overrideSettings(undefined)
    }
  })

  it("without the setting nothing is kept, and recover says events are not kept (events: null)", async () => {
    const since = new Date(Date.now() - 1_000).toISOString()
    const event = callCompleted()
    expect((await postEvents(event)).status).toBe(202)
    await drain()
    expect((await Effect.runPromise(KeptEvents.since(Bindings.PayloadBucket.make(env.PAYLOADS), since))).map((e) => e.idempotency_key)).not.toContain(event.idempotency_key)
    const report = await (await recover({ since, dry_run: true })).json() as { events: unknown }
    expect(report.events).toBeNull()
  })
})

describe("LedgerShard.readShardSince", () => {
  it("walks a shard a window at a time, answering only the facts appended since the time, and where to go on", async () => {
    const key = `tenant-a/#${unique("since")}`
    const stub = env.LEDGER.get(env.LEDGER.idFromName(key)) as DurableObjectStub<LedgerShard>
    const rpc = stub as unknown as LedgerProtocol.LedgerShardRpc
    const fact = async (stream: string, n: number, createdAt: string): Promise<LedgerProtocol.FactDraft> => ({
      fact_id: await FactId.make({ tenantId: "tenant-a", cause: `${stream}:${n}`, decidedBy: "test", position: 0 }),
      type: "noted", data: { n }, causation_id: `${stream}:${n}`, correlation_id: stream, caused_by: "test", created_at: createdAt
    })
    const old = "2026-01-01T00:00:00.000Z"
    const recent = "2026-06-01T00:00:00.000Z"
    // 5 streams × 3 facts; the middle fact of each stream is old.
    for (const s of ["a", "b", "c", "d", "e"]) {
      await rpc.append([{ tenant_id: "tenant-a", stream: s, facts: [await fact(s, 1, recent), await fact(s, 2, old), await fact(s, 3, recent)] }])
    }
    const found: Array<string> = []
    let after: LedgerProtocol.ShardCursor | undefined
    let windows = 0
    do {
      const window = await rpc.readShardSince(after, "2026-03-01T00:00:00.000Z", 4)
      found.push(...window.facts.map((f) => `${f.stream}${f.sequence}`))
      after = window.next
      windows++
    } while (after !== undefined)
    expect(found).toEqual(["a1", "a3", "b1", "b3", "c1", "c3", "d1", "d3", "e1", "e3"])
    expect(windows).toBe(4) // 15 facts, 4 a window: the last window runs to the end
    // A shard never written answers nothing and creates no storage.
    const empty = env.LEDGER.get(env.LEDGER.idFromName(`tenant-a/#${unique("empty")}`)) as unknown as LedgerProtocol.LedgerShardRpc
    expect(await empty.readShardSince(undefined, old, 10)).toEqual({ facts: [], next: undefined })
  })
})
