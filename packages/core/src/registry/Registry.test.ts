import { Effect, Result, Schema } from "effect"
import { integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core"
import { describe, expect, it } from "vitest"
import * as FactDefinition from "../definitions/FactDefinition.js"
import * as Handler from "../definitions/Handler.js"
import * as MessageDefinition from "../definitions/MessageDefinition.js"
import * as Module from "../definitions/Module.js"
import * as Processor from "../definitions/Processor.js"
import * as Projection from "../definitions/Projection.js"
import * as Router from "./Registry.js"

const V1 = Schema.Struct({ call_id: Schema.String, duration_s: Schema.Int })
const V2 = Schema.Struct({ call_id: Schema.String, duration_s: Schema.Int, currency: Schema.String })
const V3 = Schema.Struct({ call_id: Schema.String, duration_ms: Schema.Int, currency: Schema.String })
const Completed = MessageDefinition.event("call.completed")
  .version(1, V1)
  .version(2, V2, (v1) => ({ ...v1, currency: "USD" }))
  .version(3, V3, ({ duration_s, ...v2 }) => ({ ...v2, duration_ms: duration_s * 1000 }))

const Outcome = FactDefinition.make("outcome", V3)
const handler = (name: string) => Handler.handler(Completed, { name, emits: [Outcome], handle: (m) => Effect.succeed([Outcome.make(m.payload)]) })

const envelope = (schema_version: number, message_type = "call.completed") => ({
  schema_version, message_type, message_id: "m", idempotency_key: "k", correlation_id: "c",
  tenant_id: "t", subject: "s", source: "x", created_at: "2026-11-22T00:00:00Z"
})

describe("MessageDefinition", () => {
  it("upcasts every older version to the latest, step by step", () => {
    expect(Completed.latestVersion).toBe(3)
    expect(Result.getOrThrow(Completed.decode(1, { call_id: "c1", duration_s: 2 }))).toEqual({ call_id: "c1", duration_ms: 2000, currency: "USD" })
    expect(Result.getOrThrow(Completed.decode(2, { call_id: "c1", duration_s: 2, currency: "EUR" }))).toEqual({ call_id: "c1", duration_ms: 2000, currency: "EUR" })
  })

  it("decodes strictly and names every bad field", () => {
    const r = Completed.decode(2, { call_id: 5, currency: "EUR", extra: true })
    expect(Result.isFailure(r) && r.failure._tag === "InvalidPayload" && r.failure.problems.map((p) => p.path).sort()).toEqual([
      "payload.call_id", "payload.duration_s", "payload.extra"
    ])
  })

  it("refuses versions out of order or without an upcaster", () => {
    expect(() => MessageDefinition.event("a.b").version(2, V1 as never)).toThrow(/in order/)
    expect(() => (MessageDefinition.event("a.b").version(1, V1) as any).version(2, V2)).toThrow(/needs an upcaster/)
    expect(() => MessageDefinition.event("NotDotted")).toThrow(/message type name "NotDotted" is not valid: use lower-case letters/)
    expect(() => MessageDefinition.event("nodot")).toThrow(/must be namespaced with a dot/)
  })
})

describe("Registry", () => {
  it("rejects two handlers for one message type at startup", () => {
    expect(() => Router.make([
      Module.make("a", { handlers: [handler("first")] }),
      Module.make("b", { handlers: [handler("second")] })
    ])).toThrow(/two handlers for message type "call.completed": "first" \(module a\) and "second" \(module b\)/)
  })

  it("rejects one handler name used twice (fact ids depend on it)", () => {
    const other = MessageDefinition.event("call.reported").version(1, V1)
    expect(() => Router.make([Module.make("a", {
      handlers: [handler("same"), Handler.handler(other, { name: "same", emits: [], handle: () => Effect.succeed([]) })]
    })])).toThrow(/used twice/)
  })

  it("routes by message_type and says why a message cannot be routed", () => {
    const registry = Router.make([Module.make("calls", { handlers: [handler("h")] })])
    const ok = registry.route(envelope(1), { call_id: "c", duration_s: 1 })
    expect(Result.isSuccess(ok) && ok.success.message.payload).toEqual({ call_id: "c", duration_ms: 1000, currency: "USD" })
    const unknown = registry.route(envelope(1, "call.unknown"), {})
    expect(Result.isFailure(unknown) && unknown.failure.reason).toBe("unknown_message_type")
    const tooNew = registry.route(envelope(4), {})
    expect(Result.isFailure(tooNew) && tooNew.failure.reason).toBe("unsupported_version")
    const bad = registry.route(envelope(3), { call_id: "c" })
    expect(Result.isFailure(bad) && bad.failure.reason).toBe("decode_error")
  })
})

const Charged = FactDefinition.make("charged", Schema.Struct({ call_id: Schema.String, amount_cents: Schema.Int }))
const table = (name: string) =>
  sqliteTable(name, { tenant_id: text("tenant_id").notNull(), call_id: text("call_id").notNull(), amount_cents: integer("amount_cents").notNull().default(0) }, (t) => [
    primaryKey({ columns: [t.tenant_id, t.call_id] })
  ])
const totals = (name: string, tableName = name) =>
  Projection.additive({
    name,
    table: table(tableName),
    key: ["call_id"],
    queryable: [],
    on: [Projection.on(Charged, (d) => ({ key: { call_id: d.call_id }, add: { amount_cents: d.amount_cents } }))]
  })
const charge = Processor.make(Outcome, { name: "charge", emits: [Charged], process: (f) => Effect.succeed([Charged.make({ call_id: f.data.call_id, amount_cents: 1 })]) })

describe("Registry startup checks", () => {
  it("refuses an event not named in the past tense and a command named in it, stating the rule", () => {
    const module = (definition: MessageDefinition.MessageDefinition<string, { readonly id: string }>) =>
      Module.make("orders", { handlers: [Handler.handler(definition, { name: "h", emits: [], handle: () => Effect.succeed([]) })] })
    const Id = Schema.Struct({ id: Schema.String })
    expect(() => Router.make([module(MessageDefinition.event("order.place").version(1, Id))])).toThrow(
      'event "order.place" (handler "h", module orders) is not named in the past tense: its last word "place" does not say what happened. The rule: an event is named in the past tense'
    )
    expect(() => Router.make([module(MessageDefinition.command("research.requested").version(1, Id))])).toThrow(
      'command "research.requested" (handler "h", module orders) is named in the past tense: its last word "requested" says what happened'
    )
    expect(() => Router.make([module(MessageDefinition.event("invoice.feed").version(1, Id))])).toThrow(/not named in the past tense/)
    expect(() => Router.make([module(MessageDefinition.command("invoice.sent").version(1, Id))])).toThrow(/is named in the past tense/)
    // Past tenses (regular and irregular) for events, imperatives for commands, and words that are both for either.
    for (const name of ["order.placed", "invoice.sent", "payment.paid", "build.done", "lead.captured", "message.read", "counter.reset"]) {
      expect(() => Router.make([module(MessageDefinition.event(name).version(1, Id))]), name).not.toThrow()
    }
    for (const name of ["call.dispute", "invoice.issue", "cattle.feed", "account.deposit", "counter.reset", "content.publish"]) {
      expect(() => Router.make([module(MessageDefinition.command(name).version(1, Id))]), name).not.toThrow()
    }
  })

  it("refuses a projection or processor listening to a fact type nobody emits, naming both", () => {
    expect(() => Router.make([Module.make("billing", { projections: [totals("totals")] })])).toThrow(
      'projection "totals" (module billing) listens to fact type "charged", which no handler or processor emits'
    )
    expect(() => Router.make([Module.make("billing", { processors: [charge] })])).toThrow(
      'processor "charge" (module billing) listens to fact type "outcome", which no handler or processor emits'
    )
    // With the emitters registered (in another module), both are accepted.
    const registry = Router.make([Module.make("calls", { handlers: [handler("h")] }), Module.make("billing", { processors: [charge], projections: [totals("totals")] })])
    expect(registry.destinationsFor("outcome")).toEqual(["factline-projections", "factline-fact-processing"])
    expect(registry.destinationsFor("charged")).toEqual(["factline-projections"])
    expect(registry.facts.get("charged")?.module).toBe("billing")
  })

  it("a fact type belongs to one module: emitted from two modules, or defined twice, fails", () => {
    const Other = MessageDefinition.event("lead.captured").version(1, Schema.Struct({ id: Schema.String }))
    const OutcomeAgain = FactDefinition.make("outcome", Schema.Struct({ id: Schema.String }))
    const leads = Module.make("leads", {
      handlers: [Handler.handler(Other, { name: "capture", emits: [OutcomeAgain], handle: (m) => Effect.succeed([OutcomeAgain.make({ id: m.payload.id })]) })]
    })
    expect(() => Router.make([Module.make("calls", { handlers: [handler("h")] }), leads])).toThrow(
      'fact type "outcome" is emitted by handler "h" (module calls) and by handler "capture" (module leads); a fact type belongs to one module'
    )
    const spy = Processor.make(OutcomeAgain, { name: "spy", emits: [], process: () => Effect.succeed([]) })
    expect(() => Router.make([Module.make("calls", { handlers: [handler("h")], processors: [spy] })])).toThrow(
      'processor "spy" (module calls) uses its own definition of fact type "outcome", which handler "h" (module calls) defines'
    )
  })

  it("two projections writing one table fail", () => {
    expect(() =>
      Router.make([Module.make("calls", { handlers: [handler("h")], processors: [charge], projections: [totals("a", "shared"), totals("b", "shared")] })])
    ).toThrow('projections "a" and "b" both write table "shared"; a table belongs to one projection')
  })

  it("every registered name follows one rule, and the error states it", () => {
    expect(() => Module.make("Calls", {})).toThrow(/module name "Calls" is not valid: use lower-case letters and digits in words joined by '_', '-' or '.'/)
    expect(() => handler("Record Outcome")).toThrow(/handler name "Record Outcome" is not valid: use lower-case letters/)
    expect(() => FactDefinition.make("Charge", Schema.Struct({}))).toThrow(/fact type name "Charge" is not valid/)
    expect(() => totals("my-totals")).not.toThrow()
    expect(() => handler("record_outcome.v2")).not.toThrow()
  })

  it("validates returned facts against what the handler declares, naming the field", () => {
    const h = handler("h")
    expect(Result.isSuccess(Router.validateDrafts(h, [Outcome.make({ call_id: "c", duration_ms: 1, currency: "EUR" })]))).toBe(true)
    const invalid = Router.validateDrafts(h, [{ type: "outcome", data: { call_id: "c", duration_ms: "soon", currency: "EUR" } }])
    expect(Result.isFailure(invalid) && invalid.failure).toMatch(/^h returned an invalid outcome fact \(position 0\): data\.duration_ms/)
    const undeclared = Router.validateDrafts(h, [Outcome.make({ call_id: "c", duration_ms: 1, currency: "EUR" }), { type: "refund", data: {} }])
    expect(Result.isFailure(undeclared) && undeclared.failure).toBe('h returned a fact of type "refund" (position 1), which it does not declare; it declares emits: [outcome]')
  })
})

describe("Registry: the webhook catalog", () => {
  it("publishes catalog events for emitted facts, routes their facts to the webhooks queue, and refuses conflicts", async () => {
    const Webhook = await import("../definitions/Webhook.js")
    const PlatformFacts = await import("../definitions/PlatformFacts.js")
    const outcomeRecorded = Webhook.event(Outcome, { type: "call.recorded" })
    const registry = Router.make([Module.make("calls", { handlers: [handler("h")], webhooks: [outcomeRecorded] })])
    expect([...registry.webhookEvents.keys()]).toEqual(["call.recorded"])
    expect(registry.webhooksFor("outcome")).toEqual([outcomeRecorded])
    expect(registry.destinationsFor("outcome")).toEqual(["factline-projections", "factline-webhooks"])
    expect(() => Router.make([Module.make("calls", { handlers: [handler("h")], webhooks: [outcomeRecorded, Webhook.event(Outcome, { type: "call.recorded" })] })])).toThrow(
      'webhook event type "call.recorded" is published twice'
    )
    expect(() => Router.make([Module.make("billing", { webhooks: [Webhook.event(Charged, { type: "charge.created" })] })])).toThrow(
      'webhook event "charge.created" (module billing) listens to fact type "charged", which no handler or processor emits'
    )
    const Other = MessageDefinition.event("x.sent").version(1, Schema.Struct({}))
    const impostor = Handler.handler(Other, { name: "impostor", emits: [PlatformFacts.WebhookSent], handle: () => Effect.succeed([]) })
    expect(() => Router.make([Module.make("x", { handlers: [impostor] })])).toThrow('fact type "webhook_sent" is reserved: the platform appends it')
    // Listening to the platform's facts (with their definitions) is allowed.
    const onSent = Processor.make(PlatformFacts.WebhookSent, { name: "count-sent", emits: [], process: () => Effect.succeed([]) })
    expect(() => Router.make([Module.make("x", { processors: [onSent] })])).not.toThrow()
  })
})
