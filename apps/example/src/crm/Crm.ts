/**
 * The crm module: seed 001's worked example of a workflow ("CRM sync (multi-step): multiple API calls, needs
 * to survive failures, state across steps"). When a call qualifies, `crm-sync` creates the contact, then the
 * deal, then — after waiting up to the dispute window for the call's dispute to be decided — attaches a note,
 * in the CRM (`CrmClient`). Each call carries its step's idempotency key. A deal the CRM refuses for good
 * deletes the contact (the compensation) and records why (`crm_sync_failed`); a dispute decided within the
 * window (a refund or a rejection on the same call) changes the note.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Activity from "effect/workflow/Activity"
import * as EffectWorkflow from "effect/workflow/Workflow"
import { FactDefinition, Module, Workflow } from "@factline/core"
import { DisputeRejected, Qualification, Refund } from "../calls/Calls.js"
import { CrmClient } from "./CrmClient.js"

const Id = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(128))

export const CrmSynced = FactDefinition.make("crm_synced", Schema.Struct({ call_id: Id, contact_id: Id, deal_id: Id, note: Schema.String }))
export const CrmSyncFailed = FactDefinition.make("crm_sync_failed", Schema.Struct({ call_id: Id, step: Schema.String, reason: Schema.String }))

const Created = Schema.Struct({ id: Schema.String })

/** One CRM call as a durable step: its idempotency key is the step's (same instance and step: same key, every attempt). */
const crmStep = (name: string, method: "POST" | "DELETE", path: (key: string) => string, body: unknown) =>
  Activity.make({
    name,
    success: Created,
    error: Workflow.StepError,
    execute: Effect.gen(function*() {
      const key = yield* Activity.idempotencyKey(name)
      const crm = yield* CrmClient
      return yield* crm.request(method, path(key), body, key)
    })
  })

export const crmSync = Workflow.make({
  name: "crm-sync",
  start: Qualification,
  when: (fact) => fact.data.qualified,
  emits: [CrmSynced, CrmSyncFailed],
  waitsFor: { dispute: [Refund, DisputeRejected] },
  run: (qualified, wf) =>
    Effect.gen(function*() {
      const { call_id } = qualified.data
      const crm = yield* CrmClient
      const contact = yield* crmStep("create-contact", "POST", () => "/contacts", { call_id }).pipe(
        EffectWorkflow.withCompensation((created) => Effect.orDie(crmStep("delete-contact", "DELETE", () => `/contacts/${created.id}`, { call_id })))
      )
      const deal = yield* crmStep("create-deal", "POST", () => "/deals", { call_id, contact_id: contact.id }).pipe(
        // Refused for good: say why in the call's stream, then fail (the contact's compensation runs).
        Effect.tapError((error) => wf.append("deal-refused", [CrmSyncFailed.make({ call_id, step: "create-deal", reason: error.message })]))
      )
      const dispute = yield* wf.waitFor("dispute", { timeout: crm.disputeWindow })
      const note = Option.match(dispute, {
        onNone: () => "qualified call, no dispute",
        onSome: (fact) => fact.type === "refund" ? `disputed: refunded ${fact.data.amount_cents} ${fact.data.currency}` : `dispute rejected: ${fact.data.why}`
      })
      yield* crmStep("attach-note", "POST", () => "/notes", { call_id, deal_id: deal.id, text: note })
      yield* wf.append("synced", [CrmSynced.make({ call_id, contact_id: contact.id, deal_id: deal.id, note })])
    })
})

export const crm = Module.make("crm", {
  workflows: [crmSync],
  layer: CrmClient.layer
})
