/**
 * The crm module's workflow, specified in plain Node with the test kit's WorkflowSpec: the body runs on an
 * in-memory step store with Cloudflare's semantics, on a TestClock, against a fake CRM (the module's
 * `CrmClient` service as a test layer: it deduplicates by idempotency key, as the CRM stand-in and a real CRM
 * API do, fails on command and counts what it did). Each spec also replays the body and attempts every step
 * that succeeded once more, and fails if a CRM call changed its key or happened outside a step. The same
 * workflow on the real local Workflows binding: crm-sync.workers.test.ts.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { describe, expect, it } from "vitest"
import { PermanentError, TransientError } from "@factline/core"
import { fact, WorkflowSpec } from "@factline/core/testing"
import { DisputeRejected, Qualification, Refund } from "../src/calls/Calls.js"
import { CrmSynced, CrmSyncFailed, crmSync } from "../src/crm/Crm.js"
import { CrmClient } from "../src/crm/CrmClient.js"

type Operation = "contacts" | "deals" | "notes" | "delete"

/** A CRM in memory: one effect per idempotency key; `fail` answers an operation's next calls with an error. */
const fakeCrm = (fail: Partial<Record<Operation, { readonly error: "transient" | "permanent"; readonly times: number }>> = {}) => {
  const answers = new Map<string, string>()
  const effects: Array<string> = []
  const requests: Array<{ readonly operation: Operation; readonly key: string }> = []
  const left = new Map(Object.entries(fail).map(([operation, f]) => [operation, f.times]))
  const layer = Layer.succeed(CrmClient, CrmClient.of({
    disputeWindow: Duration.days(2),
    request: (method, path, body, key) =>
      Effect.suspend((): Effect.Effect<{ readonly id: string }, TransientError | PermanentError> => {
        const operation: Operation = method === "DELETE" ? "delete" : (path.split("/")[1] as Operation)
        requests.push({ operation, key })
        const failure = fail[operation]
        if (failure !== undefined && (left.get(operation) ?? 0) > 0) {
          left.set(operation, (left.get(operation) ?? 0) - 1)
          return failure.error === "transient"
            ? Effect.fail(new TransientError({ message: `CRM ${method} ${path} answered 503` }))
            : Effect.fail(new PermanentError({ message: `CRM ${method} ${path} answered 422: the CRM refuses this ${operation.replace(/s$/, "")}` }))
        }
        const known = answers.get(key)
        if (known !== undefined) return Effect.succeed({ id: known })
        const id = operation === "delete" ? path.split("/")[2]! : `${operation.slice(0, 1)}_${answers.size + 1}`
        answers.set(key, id)
        effects.push(`${operation} ${JSON.stringify(body)}`)
        return Effect.succeed({ id })
      })
  }))
  return { layer, effects, requests }
}

const qualified = (qualified = true) => fact(Qualification, { call_id: "c1", qualified }, { stream: "c1", createdAt: "2026-11-28T10:00:00.000Z" })
const money = { call_id: "c1", buyer_id: "b1", amount_cents: 250, currency: "EUR" }
const synced = (note: string) => CrmSynced.make({ call_id: "c1", contact_id: "c_1", deal_id: "d_2", note })

describe("crm-sync", () => {
  it("creates the contact, then the deal, waits out the dispute window and attaches the plain note: each CRM effect once", async () => {
    const crm = fakeCrm()
    await WorkflowSpec.for(crmSync, { layer: crm.layer }).when(qualified()).then({
      steps: ["create-contact", "create-deal", "wait/dispute", "attach-note", "append/synced"],
      waits: [{ name: "dispute", answer: "timeout", timeout: "2 days" }],
      facts: [synced("qualified call, no dispute")],
      compensations: []
    })
    // Run, replayed, and every step attempted once more: the CRM saw repeated keys and did each thing once.
    expect(crm.effects).toEqual([
      'contacts {"call_id":"c1"}',
      'deals {"call_id":"c1","contact_id":"c_1"}',
      'notes {"call_id":"c1","deal_id":"d_2","text":"qualified call, no dispute"}'
    ])
    expect(new Set(crm.requests.map((r) => r.key)).size).toBe(3)
  })

  it("stamps the synced fact when the window ended: two days after the qualification", async () => {
    const { facts } = await WorkflowSpec.for(crmSync, { layer: fakeCrm().layer }).when(qualified()).result()
    expect(facts.map((f) => [f.type, f.created_at])).toEqual([["crm_synced", "2026-11-30T10:00:00.000Z"]])
  })

  it("a refund within the window: the note says so", () =>
    WorkflowSpec.for(crmSync, { layer: fakeCrm().layer }).when(qualified()).delivering("dispute", Refund.make(money)).then({
      waits: [{ name: "dispute", answer: "refund" }],
      facts: [synced("disputed: refunded 250 EUR")]
    }))

  it("a rejected dispute within the window: the note says why", () =>
    WorkflowSpec.for(crmSync, { layer: fakeCrm().layer }).when(qualified()).delivering("dispute", DisputeRejected.make({ call_id: "c1", why: "not_charged" })).then({
      waits: [{ name: "dispute", answer: "dispute_rejected" }],
      facts: [synced("dispute rejected: not_charged")]
    }))

  it("a deal the CRM refuses for good: crm_sync_failed is appended and the contact deleted, once", async () => {
    const crm = fakeCrm({ deals: { error: "permanent", times: 99 } })
    await WorkflowSpec.for(crmSync, { layer: crm.layer }).when(qualified()).thenFails("the CRM refuses this deal", {
      steps: ["create-contact", "create-deal", "append/deal-refused", "delete-contact"],
      compensations: ["delete-contact"],
      facts: [CrmSyncFailed.make({ call_id: "c1", step: "create-deal", reason: "CRM POST /deals answered 422: the CRM refuses this deal" })]
    })
    expect(crm.effects).toEqual(['contacts {"call_id":"c1"}', 'delete {"call_id":"c1"}'])
  })

  it("a CRM that is busy twice: the step is retried with the same key, and creates one deal", async () => {
    const crm = fakeCrm({ deals: { error: "transient", times: 2 } })
    const { attempts, facts } = await WorkflowSpec.for(crmSync, { layer: crm.layer }).when(qualified()).result()
    expect(attempts["create-deal"]).toBe(3)
    expect(facts.map((f) => f.type)).toEqual(["crm_synced"])
    const deals = crm.requests.filter((r) => r.operation === "deals")
    expect(deals.length).toBeGreaterThanOrEqual(3)
    expect(new Set(deals.map((r) => r.key)).size).toBe(1)
    expect(crm.effects.filter((e) => e.startsWith("deals"))).toHaveLength(1)
  })

  it("a call that did not qualify starts no sync", () => WorkflowSpec.for(crmSync, { layer: fakeCrm().layer }).when(qualified(false)).thenNotStarted())
})
