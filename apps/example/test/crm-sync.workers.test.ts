/**
 * The crm-sync workflow on the real local Cloudflare Workflows binding: a qualified call starts one instance,
 * which creates the contact, the deal and the note in the CRM stand-in (scripts/CrmReceiver.mjs), each call
 * with its step's idempotency key, through transient failures and a redelivered start fact; a deal refused
 * for good deletes the contact once (compensation) and records why; a dispute decided within the window
 * changes the note, and the window's timeout path attaches the plain one.
 */
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { drain } from "./Drain.js"
import { callCompleted, postEvents, request, tokenA } from "./helpers.js"

interface CrmState {
  readonly requests: ReadonlyArray<{ readonly operation: string; readonly key: string | null; readonly status: number; readonly repeated?: boolean }>
  readonly effects: ReadonlyArray<{ readonly operation: string; readonly key: string; readonly id: string }>
}

const crm = async (path: string, init?: RequestInit) => fetch(`${env.CRM_URL}${path}`, init)
const crmState = async (callId: string): Promise<CrmState> => (await crm(`/state?call_id=${encodeURIComponent(callId)}`)).json() as Promise<CrmState>
const failNext = (callId: string, operation: string, status: number, times: number | null) =>
  crm("/control", { method: "POST", body: JSON.stringify({ call_id: callId, operation, status, times }) })

const completed = (callId: string, key = `completed-${callId}`) =>
  callCompleted({ idempotency_key: key }, { call_id: callId, buyer_id: "buyer-crm", duration_s: 120, price_cents: 450, currency: "USD" })

const instanceRow = async (callId: string) =>
  env.DB.prepare("SELECT * FROM workflow_instances WHERE tenant_id = 'tenant-a' AND subject = ? AND workflow = 'crm-sync'").bind(callId).first<Record<string, unknown>>()

/** Polls until the instance's row says it ended (complete or failed), draining the queues meanwhile. */
const ended = async (callId: string, timeoutMs = 40_000) => {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    await drain()
    const row = await instanceRow(callId)
    if (row !== null && (row.status === "complete" || row.status === "failed")) return row
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  throw new Error(`crm-sync for ${callId} did not end within ${timeoutMs} ms: ${JSON.stringify(await instanceRow(callId))}`)
}

const streamTypes = async (callId: string) => {
  const response = await request(`/v1/streams/${callId}/facts`, { token: tokenA })
  const body = await response.json() as { facts: ReadonlyArray<{ fact_id: string; type: string; data: Record<string, unknown>; causation_id: string; traceparent?: string }> }
  return body.facts
}

describe("crm-sync workflow", () => {
  it("syncs a qualified call once per step through transient failures and a redelivered start", async () => {
    const callId = `crm-ok-${crypto.randomUUID()}`
    await failNext(callId, "contacts", 503, 2)
    await failNext(callId, "deals", 503, 1)
    const accepted = await postEvents({ events: [completed(callId)] })
    expect(accepted.status, await accepted.clone().text()).toBe(202)
    // The same call completed again under another key: the qualification is derived again, the instance is not.
    expect((await postEvents({ events: [completed(callId, `again-${callId}`)] })).status).toBe(202)
    const row = await ended(callId)
    expect(row.status).toBe("complete")
    const state = await crmState(callId)
    // Every effect once per step's key: a contact, a deal, a note — and the retried requests carried the same key.
    expect(state.effects.map((e) => e.operation)).toEqual(["contacts", "deals", "notes"])
    for (const operation of ["contacts", "deals", "notes"]) {
      const keys = new Set(state.requests.filter((r) => r.operation === operation).map((r) => r.key))
      expect(keys.size).toBe(1)
    }
    expect(state.requests.filter((r) => r.operation === "contacts").map((r) => r.status)).toEqual([503, 503, 201])
    const facts = await streamTypes(callId)
    const synced = facts.filter((f) => f.type === "crm_synced")
    expect(synced).toHaveLength(1)
    expect(synced[0]!.data.note).toBe("qualified call, no dispute")
    // The appended fact is caused by the start fact and carries its trace (same trace id, a new parent id).
    const qualification = facts.find((f) => f.type === "qualification")!
    expect(synced[0]!.causation_id).toBe(qualification.fact_id)
    expect(String(synced[0]!.traceparent).split("-")[1]).toBe(String(qualification.traceparent).split("-")[1])
    expect(synced[0]!.traceparent).not.toBe(qualification.traceparent)
    expect(JSON.parse(String(row.facts))).toHaveLength(1)
  })

  it("compensates a deal the CRM refuses for good: the contact is deleted once and the reason recorded", async () => {
    const callId = `crm-refused-${crypto.randomUUID()}`
    await failNext(callId, "deals", 422, null)
    const accepted = await postEvents({ events: [completed(callId)] })
    expect(accepted.status).toBe(202)
    const row = await ended(callId)
    expect(row.status).toBe("failed")
    expect(String(row.error)).toContain("422")
    const state = await crmState(callId)
    // One contact, no deal, and the contact deleted once (its compensation), with the deal refused once (kept, not retried).
    expect(state.effects.map((e) => e.operation)).toEqual(["contacts", "delete"])
    expect(state.requests.filter((r) => r.operation === "deals").map((r) => r.status)).toEqual([422])
    expect(state.effects[1]!.key).not.toBe(state.effects[0]!.key)
    const facts = await streamTypes(callId)
    const failed = facts.filter((f) => f.type === "crm_sync_failed")
    expect(failed).toHaveLength(1)
    expect(failed[0]!.data).toMatchObject({ call_id: callId, step: "create-deal" })
    expect(String(failed[0]!.data.reason)).toContain("422")
    expect(facts.some((f) => f.type === "crm_synced")).toBe(false)

    // The failed instance is a dead letter with its context; replaying it (the CRM accepting deals now) restarts
    // the instance, which completes: the contact it creates again is the same effect (same step key), once.
    const listed = await request(`/v1/dlq?queue=factline-workflows&type=crm-sync`, { token: tokenA })
    const letters = (await listed.json() as { data: ReadonlyArray<{ id: string; idempotency_key: string; subject: string; reason: string; last_error: string }> }).data
    const letter = letters.find((l) => l.subject === callId)
    expect(letter).toMatchObject({ idempotency_key: row.instance_id, reason: "permanent_failure" })
    expect(letter!.last_error).toContain("422")
    await failNext(callId, "deals", 201, 0)
    const replayed = await request(`/v1/dlq/${letter!.id}/replay`, { method: "POST", token: tokenA })
    expect(replayed.status, await replayed.clone().text()).toBe(202)
    const again = await ended(callId)
    expect(again.status).toBe("complete")
    const after = await crmState(callId)
    expect(after.effects.filter((e) => e.operation === "contacts")).toHaveLength(1)
    expect(after.effects.filter((e) => e.operation === "deals")).toHaveLength(1)
  })

  it("attaches a different note when the call's dispute is decided within the window", async () => {
    const callId = `crm-disputed-${crypto.randomUUID()}`
    expect((await postEvents({ events: [completed(callId)] })).status).toBe(202)
    // The call is charged (qualify-call) and the instance waits for the dispute (its row says so): dispute it.
    for (let i = 0; i < 100 && (await instanceRow(callId))?.status !== "waiting"; i++) {
      await drain()
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    const waiting = await instanceRow(callId)
    expect(waiting).toMatchObject({ status: "waiting", step: "wait/dispute" })
    expect(String(waiting!.waiting_for)).toContain("refund | dispute_rejected")
    expect(Date.parse(String(waiting!.wait_until))).toBeGreaterThan(Date.now())
    const dispute = await postEvents({ events: [{ ...completed(callId, `dispute-${callId}`), message_type: "call.dispute", schema_version: 1, payload: { call_id: callId, reason: "never called" } }] })
    expect(dispute.status, await dispute.clone().text()).toBe(202)
    const row = await ended(callId)
    expect(row.status).toBe("complete")
    const facts = await streamTypes(callId)
    const synced = facts.filter((f) => f.type === "crm_synced")
    expect(synced).toHaveLength(1)
    expect(synced[0]!.data.note).toBe("disputed: refunded 450 USD")
    const state = await crmState(callId)
    expect(state.effects.map((e) => e.operation)).toEqual(["contacts", "deals", "notes"])
  })
})
