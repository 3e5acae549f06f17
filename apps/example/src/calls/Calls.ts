/**
 * The calls module of the example marketplace: `call.completed` (v1 → v2) and
 * its handler appending `outcome`, and the `call.dispute` command decided over
 * the call's stream. Subject = `call_id`.
 */
import { Effect, Schema } from "effect"
import { FactDefinition, Handler, MessageDefinition, Module, PermanentError } from "@factline/core"

const Id = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(128))
const Cents = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))
const Currency = Schema.String.check(Schema.isPattern(/^[A-Z]{3}$/, { message: "must be an ISO-4217 code, e.g. USD" }))

export const CallCompletedV1 = Schema.Struct({
  call_id: Id,
  buyer_id: Id,
  duration_s: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)),
  price_cents: Cents
})
export const CallCompletedV2 = Schema.Struct({ ...CallCompletedV1.fields, currency: Currency })

export const CallCompleted = MessageDefinition.event("call.completed")
  .version(1, CallCompletedV1)
  .version(2, CallCompletedV2, (v1) => ({ ...v1, currency: "USD" }))

export const CallDispute = MessageDefinition.command("call.dispute").version(
  1,
  Schema.Struct({ call_id: Id, reason: Schema.String.check(Schema.isMaxLength(1_000)) })
)

export const Outcome = FactDefinition.make("outcome", CallCompletedV2)
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
  handle: (m) => Effect.as(sameCall(m), [Outcome.make(m.payload)])
})

interface CallState {
  readonly charge: typeof Money.Type | undefined
  readonly refunded: boolean
}

export const decideDispute = Handler.decider(CallDispute, {
  name: "decide-dispute",
  initialState: { charge: undefined, refunded: false } as CallState,
  evolve: (state, fact) =>
    Charge.is(fact) ? { ...state, charge: fact.data } : Refund.is(fact) ? { ...state, refunded: true } : state,
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

export const calls = Module.make("calls", { handlers: [recordOutcome, decideDispute] })
