/**
 * The workflow path under faults (`npm run chaos`, issue 37): qualified calls start crm-sync instances on the real
 * local Workflows binding while everything the path touches fails now and then —
 * - the fact-processing consumer that starts them and delivers their disputes runs on bindings failing on a
 *   schedule (D1: the instance's record; the Workflows binding's `create` and `sendEvent`; LedgerShard; queues),
 *   refused or with the reply lost, for the first attempts of each message (transient), and a quarter of the start
 *   facts is delivered twice;
 * - inside the instances (WorkflowFaults.ts, through the test Worker's entrypoint) D1, LedgerShard and the queues
 *   fail on a schedule too, and step attempts die at random, before their work or after it with the result lost;
 * - the CRM stand-in fails at random (503 without the effect, or the effect done and the answer lost).
 * A quarter of the calls is disputed (a refund in the stream, delivered to the instance or found by its read).
 *
 * Scored from stored state: an instance is lost when a qualified call has none that ended complete, or errored with
 * its dead letter; an external effect is doubled when the CRM holds more than one contact, deal or note (or delete)
 * for a call; a crm_synced fact is doubled when a call's stream holds more than one.
 */
import { env } from "cloudflare:workers"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { FactId, FactMessage, RetryPolicy, WorkflowInstances } from "@factline/core/runtime"
import type { Fact } from "@factline/schemas"
import type { PlatformEnv } from "@factline/workers"
import { drain } from "../Drain.js"
import * as FaultCases from "../faultCases.js"
import * as Faults from "../faults.js"
import { ledger, readStream, shuffle, unique } from "../helpers.js"
import * as WorkflowFaults from "../WorkflowFaults.js"

const testEnv = env as unknown as PlatformEnv & { readonly FACTLINE_WORKFLOWS: Workflow; readonly CRM_URL: string }
const tenant_id = "tenant-a"
const calls = 100

interface CrmState {
  readonly requests: ReadonlyArray<{ readonly operation: string; readonly status: number; readonly random?: "refused" | "lost" }>
  readonly effects: ReadonlyArray<{ readonly operation: string; readonly key: string }>
}
const crm = (path: string, init?: RequestInit) => fetch(`${testEnv.CRM_URL}${path}`, init)
const crmState = async (callId: string) => (await crm(`/state?call_id=${encodeURIComponent(callId)}`)).json() as Promise<CrmState>

/** Appends one fact per call to its stream (not relayed: only the deliveries below hand them to the consumers). */
const appendFacts = async (drafts: ReadonlyArray<{ readonly call_id: string; readonly type: string; readonly data: Record<string, unknown> }>) => {
  const groups = await Promise.all(drafts.map(async (d) => ({
    tenant_id, stream: d.call_id,
    facts: [{
      fact_id: await FactId.make({ tenantId: tenant_id, cause: `chaos:${d.call_id}:${d.type}`, decidedBy: "chaos", position: 0 }),
      type: d.type, data: d.data, causation_id: `chaos:${d.call_id}`, correlation_id: d.call_id, caused_by: "chaos", created_at: new Date().toISOString()
    }]
  })))
  const results = await Effect.runPromise(ledger().append(groups))
  return results.map((r, i) => {
    if (r.status !== "appended" && r.status !== "duplicate") throw new Error(`append of ${groups[i]!.stream} answered ${r.status}`)
    return r.facts[0]!
  })
}

/**
 * Hands facts to the fact-processing consumer in messages of five, a quarter of them twice, shuffled — on bindings
 * failing on `schedule` for the first attempts (`maxRetries − 1`, so each fault clears within the retry budget).
 */
const deliver = async (facts: ReadonlyArray<Fact>, schedule: Faults.Schedule, injected: Faults.Injected) => {
  const messages: Array<unknown> = []
  for (let i = 0; i < facts.length; i += 5) messages.push(FactMessage.make(facts.slice(i, i + 5)))
  const faulty = Faults.env(testEnv as unknown as Record<string, unknown>, schedule, injected).env as unknown as PlatformEnv
  const healthy = Faults.env(testEnv as unknown as Record<string, unknown>, {}, injected).env as unknown as PlatformEnv
  const lasts = RetryPolicy.factProcessing.maxRetries - 1
  const bodies = shuffle([...messages, ...messages.filter((_, i) => i % 4 === 0)])
  return { sent: bodies.length, retries: await FaultCases.pump("factline-fact-processing", bodies, (attempt) => (attempt <= lasts ? faulty : healthy), 10) }
}

interface Status {
  readonly status: string
}
const statusOf = async (id: string): Promise<Status> => {
  try {
    return await (await testEnv.FACTLINE_WORKFLOWS.get(id)).status()
  } catch (error) {
    return { status: `missing (${error instanceof Error ? error.message : String(error)})` }
  }
}
const ended = (s: Status) => s.status === "complete" || s.status === "errored" || s.status === "terminated"

describe("chaos: workflows", () => {
  it(`crm-sync under faults: ${calls} qualified calls, starts delivered once or twice over faulty D1, Workflows, LedgerShard and queues, instances on faulty bindings and dying step attempts, a CRM failing at random`, async () => {
    const run = unique("wfc")
    const ids = Array.from({ length: calls }, (_, i) => `${run}_c${String(i).padStart(4, "0")}`)
    const disputed = new Set(ids.filter((_, i) => i % 4 === 1))
    const instanceOf = new Map(await Promise.all(ids.map(async (c) => [c, await WorkflowInstances.instanceId("crm-sync", tenant_id, c)] as const)))
    const started = Date.now()

    await crm("/control", { method: "POST", body: JSON.stringify({ call_prefix: run, fail_rate: 0.15, lost_rate: 0.1, status: 503, max_per_key: 2 }) })
    const inside = WorkflowFaults.install({ schedule: { d1: 9, durableObjects: 7, queues: 5, lostReplies: true }, stepFailRate: 0.1, maxPerStep: 2 })
    const dispatch = Faults.newInjected()
    const schedule: Faults.Schedule = { d1: 4, durableObjects: 5, queues: 3, workflows: 3, lostReplies: true }
    let sent = 0
    let retries = 0
    let statuses = new Map<string, Status>()
    // The relayed facts drained between polls; the score reads the ledger and Cloudflare, not the queues downstream,
    // so a drain that is not idle in time is counted (and the next poll waits on it again), not fatal.
    let drainsNotIdle = 0
    const settle = () => drain().catch(() => void drainsNotIdle++)
    try {
      const starts = await appendFacts(ids.map((call_id) => ({ call_id, type: "qualification", data: { call_id, qualified: true } })))
      const startDelivery = await deliver(starts, schedule, dispatch)
      // The disputes, while the instances run: each refund in its call's stream and delivered (sendEvent, or found
      // by the instance's read when it has not waited yet).
      const refunds = await appendFacts([...disputed].map((call_id) => ({ call_id, type: "refund", data: { call_id, buyer_id: `${run}_b`, amount_cents: 450, currency: "USD" } })))
      const refundDelivery = await deliver(refunds, schedule, dispatch)
      sent = startDelivery.sent + refundDelivery.sent
      retries = startDelivery.retries + refundDelivery.retries

      // Until every instance has ended (or 5 minutes): Cloudflare's status of each, the relayed facts drained meanwhile.
      const deadline = Date.now() + 300_000
      for (;;) {
        await settle()
        statuses = new Map(await Promise.all(ids.map(async (c) => [c, await statusOf(instanceOf.get(c)!)] as const)))
        if ([...statuses.values()].every(ended) || Date.now() > deadline) break
        await new Promise((r) => setTimeout(r, 1_000))
      }
    } finally {
      WorkflowFaults.uninstall()
      await crm("/control", { method: "POST", body: JSON.stringify({ call_prefix: run, fail_rate: 0, lost_rate: 0 }) })
    }
    await settle()
    const seconds = Math.round((Date.now() - started) / 100) / 10

    const { results: rows } = await env.DB.prepare("SELECT subject, status FROM workflow_instances WHERE tenant_id = ? AND workflow = 'crm-sync' AND subject >= ? AND subject < ?")
      .bind(tenant_id, run, `${run}\uffff`).all<{ subject: string; status: string }>()
    const rowOf = new Map(rows.map((r) => [r.subject, r.status]))
    const { results: letters } = await env.DB.prepare("SELECT idempotency_key FROM dead_messages WHERE queue = 'factline-workflows' AND idempotency_key IN (SELECT value FROM json_each(?))")
      .bind(JSON.stringify([...instanceOf.values()])).all<{ idempotency_key: string }>()
    const deadLettered = new Set(letters.map((l) => l.idempotency_key))
    let complete = 0
    let failed = 0
    let lost = 0
    let doubledEffects = 0
    let doubledSynced = 0
    let syncedMissing = 0
    let staleRows = 0
    const staleExamples: Array<string> = []
    let disputedNotes = 0
    let crmRandomFailures = 0
    const lostCalls: Array<string> = []
    for (const c of ids) {
      const status = statuses.get(c)!.status
      const instance = instanceOf.get(c)!
      const ok = status === "complete" || (status === "errored" && deadLettered.has(instance))
      if (status === "complete") complete++
      else if (ok) failed++
      else (lost++, lostCalls.push(`${c}: ${status}`))
      // The operators' index (workflow_instances) against Cloudflare's status: reported, not asserted (see the report of issue 37's chaos case).
      if (rowOf.get(c) !== (status === "complete" ? "complete" : status === "errored" ? "failed" : status)) (staleRows++, staleExamples.push(`${rowOf.get(c)} where Cloudflare says ${status}`))
      const state = await crmState(c)
      crmRandomFailures += state.requests.filter((r) => r.random !== undefined).length
      const perOperation = new Map<string, number>()
      for (const e of state.effects) perOperation.set(e.operation, (perOperation.get(e.operation) ?? 0) + 1)
      if ([...perOperation.values()].some((n) => n > 1)) doubledEffects++
      const facts = (await readStream(tenant_id, c)).facts
      const synced = facts.filter((f) => f.type === "crm_synced")
      if (synced.length > 1) doubledSynced++
      if (status === "complete" && synced.length !== 1) syncedMissing++
      if (disputed.has(c) && String(synced[0]?.data.note ?? "").startsWith("disputed")) disputedNotes++
    }
    const passed = lost === 0 && doubledEffects === 0 && doubledSynced === 0 && syncedMissing === 0
    const card = {
      case: "workflows (crm-sync) under faults", passed, messages_sent: sent, facts_expected: complete, facts_found: complete - syncedMissing,
      duplicates_found: doubledEffects + doubledSynced, messages_lost: lost, dlq_expected: failed, dlq_found: deadLettered.size,
      qualified_calls: calls, instances_complete: complete, instances_failed_dead_lettered: failed, instances_lost: lost,
      doubled_external_effects: doubledEffects, doubled_crm_synced: doubledSynced, rows_not_matching_cloudflare: staleRows, rows_not_matching_examples: staleExamples.slice(0, 3),
      disputes: disputed.size, disputed_notes: disputedNotes, seconds, consumer_retries: retries,
      faults_dispatch: Faults.totalInjected(dispatch), faults_dispatch_workflows_binding: dispatch.refused.workflows + dispatch.lostReplies.workflows,
      faults_in_instances: Faults.totalInjected(inside.bindings), step_attempts_died: inside.steps.refused + inside.steps.lost,
      crm_random_failures: crmRandomFailures, invocations: inside.invocations, drains_not_idle: drainsNotIdle
    } satisfies FaultCases.Scorecard
    FaultCases.print(card)
    expect(lostCalls).toEqual([])
    expect(Faults.totalInjected(dispatch)).toBeGreaterThan(0)
    expect(dispatch.refused.workflows + dispatch.lostReplies.workflows).toBeGreaterThan(0)
    expect(Faults.totalInjected(inside.bindings) + inside.steps.refused + inside.steps.lost).toBeGreaterThan(0)
    expect(crmRandomFailures).toBeGreaterThan(0)
    expect(passed).toBe(true)
  })
})
