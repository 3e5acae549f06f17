/**
 * Type tests, checked by `tsc` in `npm run typecheck` (part of `npm test`): each `@ts-expect-error`
 * line must fail to compile — if a mistake below ever compiles, the directive itself becomes an error.
 * Nothing here runs; it only proves that the typed API refuses these mistakes.
 */
import { Context, Effect, Layer, Schema } from "effect"
import { FactDefinition, Handler, MessageDefinition, Module, Processor, Projection } from "@factline/core"
import { ProcessorSpec } from "@factline/core/testing"
import { CallCompleted, CallDispute, Charge, DisputeRejected, Outcome, Qualification, qualifyCall, Refund } from "../src/calls/Calls.js"
import { Pricing } from "../src/calls/Pricing.js"
import * as Tables from "../src/calls/Tables.js"

// 1. A misspelled fact in a projection does not compile: projections map fact definitions, not strings.
export const misspelledFact = Projection.additive({
  name: "typing_budgets",
  table: Tables.buyerBudgets,
  key: ["buyer_id"],
  queryable: [],
  on: [
    // @ts-expect-error — there is no `Chrage`: a typo is an unknown identifier, not a mapping that never fires
    Projection.on(Chrage, (data) => ({ key: { buyer_id: data.buyer_id }, add: { spent_cents: data.amount_cents } })),
    // @ts-expect-error — the mapping's data is typed: a charge has `amount_cents`, not `amount`
    Projection.on(Charge, (data) => ({ key: { buyer_id: data.buyer_id }, add: { spent_cents: data.amount } }))
  ]
})
// @ts-expect-error — the old untyped form (a record keyed by raw type strings) is gone
export const rawStrings = Projection.rows({ name: "typing_calls", table: Tables.calls, key: ["call_id"], queryable: [], on: { chrage: () => ({}) } })

// 2. A wrong payload field in a handler does not compile: the message payload and the fact data are typed.
export const wrongPayloadField = Handler.handler(CallCompleted, {
  name: "typing-wrong-field",
  emits: [Outcome],
  // @ts-expect-error — call.completed v2 has `duration_s`, not `duration`
  handle: (m) => Effect.succeed([Outcome.make({ ...m.payload, duration_s: m.payload.duration })])
})
export const wrongFactData = Handler.handler(CallCompleted, {
  name: "typing-wrong-data",
  emits: [Qualification],
  // @ts-expect-error — a qualification's `qualified` is a boolean
  handle: (m) => Effect.succeed([Qualification.make({ call_id: m.payload.call_id, qualified: "yes" })])
})

// 3. An undeclared emitted fact does not compile, for handlers, deciders and processors.
export const undeclaredInHandler = Handler.handler(CallCompleted, {
  name: "typing-undeclared",
  emits: [Outcome],
  // @ts-expect-error — `refund` is not in this handler's emits
  handle: (m) => Effect.succeed([Refund.make({ call_id: m.payload.call_id, buyer_id: m.payload.buyer_id, amount_cents: 1, currency: "EUR" })])
})
export const undeclaredInDecider = Handler.decider(CallDispute, {
  name: "typing-undeclared-decider",
  emits: [DisputeRejected],
  initialState: 0,
  evolve: (n) => n,
  // @ts-expect-error — `charge` is not in this decider's emits
  decide: (m) => Effect.succeed([Charge.make({ call_id: m.payload.call_id, buyer_id: "b", amount_cents: 1, currency: "EUR" })])
})
export const undeclaredInProcessor = Processor.make(Outcome, {
  name: "typing-undeclared-processor",
  emits: [Qualification],
  // @ts-expect-error — `charge` is not in this processor's emits
  process: (fact) => Effect.succeed([Charge.make({ call_id: fact.data.call_id, buyer_id: fact.data.buyer_id, amount_cents: 1, currency: "EUR" })])
})

// 4. A decider's evolve gets the union of the facts it declares, discriminated by `type`.
export const typedEvolve = Handler.decider(CallDispute, {
  name: "typing-evolve",
  emits: [Refund],
  reads: [Charge],
  initialState: 0,
  evolve: (total, fact) => {
    if (fact.type === "charge") return total + fact.data.amount_cents
    if (fact.type === "refund") return total - fact.data.amount_cents
    // @ts-expect-error — an outcome is neither emitted nor read by this decider, so it is not in the union
    if (fact.type === "outcome") return 0
    return total
  },
  decide: () => Effect.succeed([])
})

// 5. Fact definitions type their data both ways.
const Note = FactDefinition.make("typing_note", Schema.Struct({ text: Schema.String }))
// @ts-expect-error — `text` is a string
Note.make({ text: 1 })
void MessageDefinition

// 6. A service that handlers, deciders or processors require must be provided by their module's layer.
// `qualify-call` requires Pricing: a module without a layer, or with one that provides something else, does not compile.
// @ts-expect-error — Property 'layer' is missing: the module's layer does not provide Pricing
export const noLayer = Module.make("typing_calls", { processors: [qualifyCall] })
class Clock2 extends Context.Service<Clock2, { readonly now: Effect.Effect<number> }>()("typing/Clock2") {}
export const otherLayer = Module.make("typing_calls", {
  processors: [qualifyCall],
  // @ts-expect-error — this layer provides Clock2, not Pricing
  layer: Layer.succeed(Clock2, Clock2.of({ now: Effect.succeed(0) }))
})
/** A decider requiring a service its module does not provide, beside a processor whose service it does. */
export const stampDispute = Handler.decider(CallDispute, {
  name: "typing-stamp",
  emits: [DisputeRejected],
  initialState: 0,
  evolve: (n) => n,
  decide: (m) => Effect.map(Effect.service(Clock2), () => [DisputeRejected.make({ call_id: m.payload.call_id, why: "not_charged" })])
})
export const halfProvided = Module.make("typing_calls", {
  handlers: [stampDispute],
  processors: [qualifyCall],
  // @ts-expect-error — the decider's Clock2 is missing from this layer
  layer: Pricing.layer
})
// Both provided: compiles.
export const provided = Module.make("typing_calls", { handlers: [stampDispute], processors: [qualifyCall], layer: Layer.mergeAll(Pricing.layer, Layer.succeed(Clock2, Clock2.of({ now: Effect.succeed(0) }))) })
// @ts-expect-error — a spec of code requiring Pricing must give it a layer (the module's, or a test one)
ProcessorSpec.for(qualifyCall)
// 7. Versioned facts: an upcaster must build every field of the next version, and drafts are the latest version.
const InvoiceV1 = Schema.Struct({ invoice_id: Schema.String })
const InvoiceV2 = Schema.Struct({ ...InvoiceV1.fields, currency: Schema.String })
// @ts-expect-error — the upcaster from version 1 leaves `currency` out
export const incompleteUpcaster = FactDefinition.make("typing_invoice", InvoiceV1).version(2, InvoiceV2, (v1) => ({ ...v1 }))
export const Invoice = FactDefinition.make("typing_invoice", InvoiceV1).version(2, InvoiceV2, (v1) => ({ ...v1, currency: "USD" }))
// @ts-expect-error — make() writes version 2: a version-1 shaped draft does not compile
export const oldDraft = Invoice.make({ invoice_id: "i1" })
