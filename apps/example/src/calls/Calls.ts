/**
 * The calls module of the example marketplace: `call.completed` (v1 → v2 → v3) and
 * its handler appending `outcome`, and the `call.dispute` command decided over
 * the call's stream. Subject = `call_id`. Its processor prices charges with
 * the module's `Pricing` service (its layer: `Pricing.layer`).
 *
 * Personal data: v3 carries the caller's phone number (`caller_phone`), personal data of the buyer
 * (`buyer_id`, the data subject), sealed at the edge and erasable (docs/personal-data.md). `outcome` v2 carries
 * it on, declared the same way; the `calls` projection shows analysts only its last four digits and masks
 * them when the buyer is erased.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { FactDefinition, Handler, MessageDefinition, Module, PermanentError, Personal, Processor, Projection, Webhook } from "@factline/core"
import { Pricing } from "./Pricing.js"
import * as Tables from "./Tables.js"

const Id = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(128))
/** Whole cents up to 2^53 − 1: what JSON and JavaScript carry exactly (sums beyond it are still exact in D1 and the API). */
const Cents = Schema.Number.check(
  Schema.isInt({ message: `must be a whole number of cents from 0 to ${Number.MAX_SAFE_INTEGER} (2^53 - 1); larger amounts lose precision` }),
  Schema.isGreaterThanOrEqualTo(0)
)
const Currency = Schema.String.check(Schema.isPattern(/^[A-Z]{3}$/, { message: "must be an ISO-4217 code, e.g. USD" }))

export const CallCompletedV1 = Schema.Struct({
  call_id: Id,
  buyer_id: Id,
  duration_s: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)),
  price_cents: Cents
})
export const CallCompletedV2 = Schema.Struct({ ...CallCompletedV1.fields, currency: Currency })
/**
 * The caller's phone number, when the call source passed it on: personal data of the buyer. Any string (its
 * format is the call source's): an erased value reads as the marker `"[erased]"`, which its schema must accept.
 */
export const CallCompletedV3 = Schema.Struct({ ...CallCompletedV2.fields, caller_phone: Schema.optionalKey(Schema.String.check(Schema.isMaxLength(64))) })

/** Personal data of `call.completed` and `outcome`: the caller's phone number, of the buyer. */
const callerPhone = { subject: "buyer_id", fields: ["caller_phone"] } as const

export const CallCompleted = MessageDefinition.event("call.completed")
  .version(1, CallCompletedV1)
  .version(2, CallCompletedV2, (v1) => ({ ...v1, currency: "USD" }))
  .version(3, CallCompletedV3, (v2) => v2)
  .personal(callerPhone)

export const CallDispute = MessageDefinition.command("call.dispute").version(
  1,
  Schema.Struct({ call_id: Id, reason: Schema.String.check(Schema.isMaxLength(1_000)) })
)

export const Outcome = FactDefinition.make("outcome", CallCompletedV2)
  .version(2, CallCompletedV3, (v1) => v1)
  .personal(callerPhone)
export const Qualification = FactDefinition.make("qualification", Schema.Struct({ call_id: Id, qualified: Schema.Boolean }))
const Money = Schema.Struct({ call_id: Id, buyer_id: Id, amount_cents: Cents, currency: Currency })
export const Charge = FactDefinition.make("charge", Money)
export const Refund = FactDefinition.make("refund", Money)
export const DisputeRejected = FactDefinition.make(
  "dispute_rejected",
  Schema.Struct({ call_id: Id, why: Schema.Literals(["not_charged", "already_refunded"]) })
)

const sameCall = (m: Handler.Message<{ readonly call_id: string }>) =>
  m.subject === m.payload.call_id
    ? Effect.void
    : Effect.fail(new PermanentError({ message: `subject "${m.subject}" must be the call_id "${m.payload.call_id}"` }))

export const recordOutcome = Handler.handler(CallCompleted, {
  name: "record-outcome",
  emits: [Outcome],
  handle: (m) => Effect.as(sameCall(m), [Outcome.make(m.payload)])
})

interface CallState {
  readonly charge: typeof Money.Type | undefined
  readonly refunded: boolean
}

/** Decides a dispute from the call's charge and refund: refund once, or say why not. */
export const decideDispute = Handler.decider(CallDispute, {
  name: "decide-dispute",
  emits: [Refund, DisputeRejected],
  reads: [Charge],
  initialState: { charge: undefined, refunded: false } as CallState,
  // Only the declared facts are folded (charge, refund, dispute_rejected), as a union on `type`.
  evolve: (state, fact) =>
    fact.type === "charge" ? { ...state, charge: fact.data } : fact.type === "refund" ? { ...state, refunded: true } : state,
  decide: (m, state) =>
    Effect.as(
      sameCall(m),
      state.charge === undefined
        ? [DisputeRejected.make({ call_id: m.payload.call_id, why: "not_charged" })]
        : state.refunded
          ? [DisputeRejected.make({ call_id: m.payload.call_id, why: "already_refunded" })]
          : [Refund.make({ ...state.charge })]
    )
})

/** A call of at least a minute qualifies, and a qualified call is charged what `Pricing` says. */
export const minimumQualifyingSeconds = 60

export const qualifyCall = Processor.make(Outcome, {
  name: "qualify-call",
  emits: [Qualification, Charge],
  process: Effect.fn("qualify-call")(function*({ data }) {
    const qualified = data.duration_s >= minimumQualifyingSeconds
    if (!qualified) return [Qualification.make({ call_id: data.call_id, qualified })]
    const pricing = yield* Pricing
    const amount_cents = yield* pricing.chargeFor(data)
    return [
      Qualification.make({ call_id: data.call_id, qualified }),
      Charge.make({ call_id: data.call_id, buyer_id: data.buyer_id, amount_cents, currency: data.currency })
    ]
  })
})

/**
 * What analysts see of a caller's phone number: its last four digits (`"•••• 4567"`), null when there is none,
 * the erased marker once the buyer is erased (as erasure's mask writes it, so a rebuild gives the same row).
 */
export const maskPhone = (phone: string | undefined): string | null => {
  if (phone === undefined) return null
  if (phone === Personal.erased) return Personal.erased
  const digits = phone.replace(/\D/g, "")
  return digits.length < 4 ? "••••" : `•••• ${digits.slice(-4)}`
}

export const callsProjection = Projection.rows({
  name: "calls",
  table: Tables.calls,
  key: ["call_id"],
  queryable: ["call_id", "buyer_id", "qualified"],
  // The phone number itself is never stored here; its masked form is, and erasing the buyer masks it.
  erasure: { subject: "buyer_id", action: "mask", columns: ["caller_phone_masked"] },
  on: [
    Projection.on(Outcome, ({ call_id, buyer_id, duration_s, currency, caller_phone }) => ({
      call_id,
      buyer_id,
      duration_s,
      currency,
      caller_phone_masked: maskPhone(caller_phone)
    })),
    Projection.on(Qualification, ({ call_id, qualified }) => ({ call_id, qualified })),
    Projection.on(Charge, ({ call_id, amount_cents }) => ({ call_id, charged_cents: amount_cents })),
    Projection.on(Refund, ({ call_id, amount_cents }) => ({ call_id, refunded_cents: amount_cents }))
  ]
})

export const buyerBudgetsProjection = Projection.additive({
  name: "buyer_budgets",
  table: Tables.buyerBudgets,
  key: ["buyer_id"],
  queryable: ["buyer_id"],
  on: [
    Projection.on(Charge, ({ buyer_id, amount_cents }) => ({ key: { buyer_id }, add: { spent_cents: amount_cents, charges: 1 } })),
    Projection.on(Refund, ({ buyer_id, amount_cents }) => ({ key: { buyer_id }, add: { spent_cents: -amount_cents, refunds: 1 } }))
  ]
})

/** Published to tenants' webhook endpoints: `charge.created`, the charge's data as the payload. */
export const chargeCreated = Webhook.event(Charge, { type: "charge.created", description: "A qualified call was charged to its buyer." })

export const calls = Module.make("calls", {
  tables: Tables,
  handlers: [recordOutcome, decideDispute],
  processors: [qualifyCall],
  projections: [callsProjection, buyerBudgetsProjection],
  webhooks: [chargeCreated],
  // The services its code requires: leave one out and this does not compile.
  layer: Pricing.layer
})
