/** GET /asyncapi.json: the AsyncAPI 3 document generated from the registry and the policy table (public, like any API description). */
import { describe, expect, it } from "vitest"
import { RetryPolicy } from "@factline/core/runtime"
import { request } from "./helpers.js"

describe("AsyncAPI", () => {
  it("describes every queue with its policy and DLQ, every message type per schema_version, every fact type and the webhook catalog", async () => {
    const response = await request("/asyncapi.json")
    expect(response.status).toBe(200)
    const doc = await response.json<any>()
    expect(doc.asyncapi).toBe("3.0.0")
    expect(Object.keys(doc.channels).sort()).toEqual([...RetryPolicy.all.flatMap((p) => [p.queue, p.deadLetterQueue]), "factline-workflows"].sort())
    // Cloudflare Workflows: the instance params, the fact each wait receives (by its sendEvent type), the wake-up.
    const workflows = doc.channels["factline-workflows"]
    expect(workflows.address).toBe("FACTLINE_WORKFLOWS")
    expect(Object.keys(workflows.messages).sort()).toEqual(["workflow.start", "workflow.wait.crm-sync.dispute", "workflow.wake"])
    expect(workflows["x-factline-workflows"]).toEqual([expect.objectContaining({ name: "crm-sync", start: "qualification", appends: ["crm_synced", "crm_sync_failed"], waits: { dispute: ["refund", "dispute_rejected"] } })])
    expect(doc.components.messages["workflow.wait.crm-sync.dispute"].name).toBe("wait-dispute")
    expect(doc.channels["factline-webhooks"]["x-factline-policy"]).toEqual({
      max_retries: 5, initial_delay_seconds: 10, max_delay_seconds: 300, max_batch_size: 10, max_batch_timeout_seconds: 5,
      dead_letter_queue: "factline-webhooks-dlq", producer_binding: "WEBHOOKS_QUEUE"
    })
    // Every registered message type and version of the test Worker (the example's and the test module's).
    for (const id of ["call.completed.v1", "call.completed.v2", "call.completed.v3", "call.dispute.v1", "test.counter.bump.v1"]) {
      expect(doc.components.messages[id], id).toBeDefined()
      expect(doc.channels["factline-events"].messages[id]).toEqual({ $ref: `#/components/messages/${id}` })
    }
    expect(doc.components.schemas["payload.call.completed.v1"].required).toEqual(["call_id", "buyer_id", "duration_s", "price_cents"])
    expect(doc.components.schemas["payload.call.completed.v2"].required).toContain("currency")
    // Fact types: the modules' and the platform's own.
    for (const type of ["outcome", "qualification", "charge", "refund", "dispute_rejected", "webhook_sent", "reconciliation"]) {
      expect(doc.components.schemas[`fact.${type}`], type).toMatchObject({ type: "object" })
    }
    // The example's charge.created, and the test Worker's contact.noted (test/TestModule.ts).
    expect(doc["x-factline-webhook-events"]).toEqual([
      expect.objectContaining({ type: "charge.created", fact_type: "charge" }),
      expect.objectContaining({ type: "contact.noted", fact_type: "contact_noted" })
    ])
    expect(doc.components.schemas["webhook.charge.created"].required).toEqual(["call_id", "buyer_id", "amount_cents", "currency"])
    // Every operation points at a channel and messages that exist.
    for (const [name, op] of Object.entries<any>(doc.operations)) {
      const channel = op.channel.$ref.split("/").at(-1)
      expect(doc.channels[channel], name).toBeDefined()
      for (const m of op.messages) expect(doc.channels[channel].messages[m.$ref.split("/").at(-1)], `${name} ${m.$ref}`).toBeDefined()
    }
  })
})
