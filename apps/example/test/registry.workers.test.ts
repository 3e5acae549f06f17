/**
 * The registry at the edges of the running Worker: a fact a handler returns is validated against its
 * definition before it reaches the ledger, and a misconfigured module list fails `makePlatform` (the
 * Worker's startup), naming both sides — or, in local development, loads and answers the registry's message
 * on every request (so `wrangler dev` shows that message alone) and retries every queue message.
 */
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { Effect, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { FactDefinition, Handler, MessageDefinition, Module, Processor } from "@factline/core"
import { makePlatform, type PlatformEnv } from "@factline/workers"
import { modules } from "../src/modules.js"
import { Outcome } from "../src/calls/Calls.js"
import { drain } from "./Drain.js"
import { deadMessages, readStream, unique } from "./helpers.js"
import { platform } from "./worker.js"

const envelope = (message_type: string, payload: Record<string, unknown>) => {
  const subject = unique("subject")
  return {
    schema_version: 1, message_type, message_id: unique("msg"), idempotency_key: unique("key"), correlation_id: unique("corr"),
    tenant_id: "tenant-a", subject, source: "test", created_at: new Date().toISOString(), payload
  }
}

const production = { localDevelopment: false }

describe("registry", () => {
  it("a handler returning a wrongly shaped fact is dead-lettered at once naming the field; nothing reaches the ledger", async () => {
    const event = envelope("test.sloppy.happened", {})
    const batch = createMessageBatch("factline-events", [{ id: unique("qm"), timestamp: new Date(), attempts: 1, body: event }])
    const ctx = createExecutionContext()
    await platform.queue(batch, env as unknown as PlatformEnv, ctx)
    const result = await getQueueResult(batch, ctx)
    expect(result.retryMessages).toEqual([])
    await drain()
    const rows = await deadMessages(event.idempotency_key)
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({ reason: "permanent_failure", attempts: 1 })
    expect(rows[0]!.last_error).toMatch(/^sloppy returned an invalid sloppy_done fact \(position 0\): data\.count: /)
    expect((await readStream("tenant-a", event.subject)).facts).toEqual([])
  })

  it("makePlatform fails at startup when a projection or processor listens to a fact nobody emits, naming both", () => {
    const Scored = FactDefinition.make("lead_scored", Schema.Struct({ lead_id: Schema.String }))
    const scoreLead = Processor.make(Scored, { name: "route-lead", emits: [], process: () => Effect.succeed([]) })
    expect(() => makePlatform([...modules, Module.make("leads", { processors: [scoreLead] })], production)).toThrow(
      'processor "route-lead" (module leads) listens to fact type "lead_scored", which no handler or processor emits'
    )
  })

  it("makePlatform fails at startup when a second module emits a fact type another module owns", () => {
    const Captured = MessageDefinition.event("lead.captured").version(1, Schema.Struct({ lead_id: Schema.String }))
    const MyOutcome = FactDefinition.make("outcome", Schema.Struct({ lead_id: Schema.String }))
    const capture = Handler.handler(Captured, { name: "capture-lead", emits: [MyOutcome], handle: (m) => Effect.succeed([MyOutcome.make(m.payload)]) })
    expect(() => makePlatform([...modules, Module.make("leads", { handlers: [capture] })], production)).toThrow(
      'fact type "outcome" is emitted by handler "record-outcome" (module calls) and by handler "capture-lead" (module leads)'
    )
    // Listening to another module's fact with its definition is how modules compose.
    const onOutcome = Processor.make(Outcome, { name: "count-outcomes", emits: [], process: () => Effect.succeed([]) })
    expect(() => makePlatform([...modules, Module.make("stats", { processors: [onOutcome] })], production)).not.toThrow()
  })

  it("in local development a refused module list loads: every request answers 500 registry_invalid with the registry's message, queue messages are retried", async () => {
    const refused = makePlatform([...modules, ...modules], { localDevelopment: true })
    const response = await refused.fetch(new Request("http://localhost/v1/projections/buyer_budgets"), env as unknown as PlatformEnv, createExecutionContext())
    expect(response.status).toBe(500)
    expect(await response.json()).toEqual({
      error: { code: "registry_invalid", message: 'factline: the registry refused the module list (src/modules.ts): module name "calls" is registered twice' }
    })
    const event = envelope("call.completed", {})
    const batch = createMessageBatch("factline-events", [{ id: unique("qm"), timestamp: new Date(), attempts: 1, body: event }])
    const ctx = createExecutionContext()
    await refused.queue(batch, env as unknown as PlatformEnv, ctx)
    const result = await getQueueResult(batch, ctx)
    expect(result.retryBatch).toMatchObject({ retry: true })
    // Outside local development the same list throws at load (the deploy fails).
    expect(() => makePlatform([...modules, ...modules], production)).toThrow('module name "calls" is registered twice')
  })
})
