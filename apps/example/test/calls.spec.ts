/**
 * The calls module's logic, specified in plain Node with the test kit: the decider, the handler, the
 * processor and both projections. Each spec runs on the in-memory platform (the real dispatch, ledger and
 * projection SQL), and also checks that a redelivery appends nothing and that projections are order- and
 * duplicate-proof. The processor requires the module's `Pricing` service: each spec gives it a layer, the
 * live one or a test rate card.
 */
import { Effect, Layer } from "effect"
import { describe, it } from "vitest"
import { DeciderSpec, HandlerSpec, ProcessorSpec, ProjectionSpec, fact, message } from "@factline/core/testing"
import {
  buyerBudgetsProjection, CallCompleted, CallDispute, callsProjection, Charge, decideDispute, DisputeRejected, Outcome, qualifyCall,
  Qualification, recordOutcome, Refund
} from "../src/calls/Calls.js"
import { Pricing } from "../src/calls/Pricing.js"

const money = { call_id: "c1", buyer_id: "b1", amount_cents: 250, currency: "EUR" }
const dispute = (subject = "c1") => message(CallDispute, { call_id: "c1", reason: "never connected" }, { subject })

describe("decide-dispute", () => {
  it("refunds a charged call", () => DeciderSpec.for(decideDispute).given([Charge.make(money)]).when(dispute()).then([Refund.make(money)]))

  it("rejects a dispute on a call that was never charged", () =>
    DeciderSpec.for(decideDispute).given([Outcome.make({ ...money, duration_s: 5, price_cents: 250 } as never)]).when(dispute()).then([
      DisputeRejected.make({ call_id: "c1", why: "not_charged" })
    ]))

  it("refunds once: a second dispute is rejected as already refunded", () =>
    DeciderSpec.for(decideDispute).given([Charge.make(money), Refund.make(money)]).when(dispute()).then([
      DisputeRejected.make({ call_id: "c1", why: "already_refunded" })
    ]))

  it("refuses a dispute sent to another call's stream, permanently", () =>
    DeciderSpec.for(decideDispute).given([Charge.make(money)]).when(dispute("c2")).thenFails('subject "c2" must be the call_id "c1"', { permanent: true }))
})

describe("record-outcome", () => {
  const completed = { call_id: "c1", buyer_id: "b1", duration_s: 75, price_cents: 250, currency: "EUR" }

  it("records the outcome of a completed call", () =>
    HandlerSpec.for(recordOutcome).when(message(CallCompleted, completed, { subject: "c1" })).then([Outcome.make(completed)]))

  it("upcasts a v1 call.completed (no currency) to USD", () =>
    HandlerSpec.for(recordOutcome)
      .when(message(CallCompleted, { call_id: "c1", buyer_id: "b1", duration_s: 75, price_cents: 250 }, { subject: "c1", version: 1 }))
      .then([Outcome.make({ ...completed, currency: "USD" })]))
})

describe("qualify-call", () => {
  const outcome = (buyer_id: string, duration_s: number) => fact(Outcome, { call_id: "c1", buyer_id, duration_s, price_cents: 250, currency: "EUR" }, { stream: "c1" })

  it("qualifies and charges a call of at least a minute its listed price (the module's live pricing)", () =>
    ProcessorSpec.for(qualifyCall, { layer: Pricing.layer }).when(outcome("b1", 60)).then([
      Qualification.make({ call_id: "c1", qualified: true }),
      Charge.make(money)
    ]))

  it("does not charge a shorter call", () =>
    ProcessorSpec.for(qualifyCall, { layer: Pricing.layer }).when(outcome("b1", 59)).then([
      Qualification.make({ call_id: "c1", qualified: false })
    ]))

  /** A test rate card in place of the module's pricing: buyer b-half pays half, everyone else the listed price. */
  const HalfPriceForOneBuyer = Layer.succeed(Pricing, Pricing.of({
    chargeFor: (call) => Effect.succeed(call.buyer_id === "b-half" ? Math.round(call.price_cents / 2) : call.price_cents)
  }))

  it("charges what the pricing service says (a test layer in place of the module's)", async () => {
    await ProcessorSpec.for(qualifyCall, { layer: HalfPriceForOneBuyer }).when(outcome("b-half", 90)).then([
      Qualification.make({ call_id: "c1", qualified: true }),
      Charge.make({ ...money, buyer_id: "b-half", amount_cents: 125 })
    ])
    await ProcessorSpec.for(qualifyCall, { layer: HalfPriceForOneBuyer }).when(outcome("b1", 90)).then([
      Qualification.make({ call_id: "c1", qualified: true }),
      Charge.make(money)
    ])
  })
})

describe("projections", () => {
  it("calls: one row per call, whatever the order and duplicates; the caller's phone only as its last four digits", () =>
    ProjectionSpec.for(callsProjection)
      .given([
        fact(Outcome, { call_id: "c1", buyer_id: "b1", duration_s: 75, price_cents: 250, currency: "EUR", caller_phone: "+44 20 7946 0958" }, { stream: "c1" }),
        fact(Qualification, { call_id: "c1", qualified: true }, { stream: "c1" }),
        fact(Charge, money, { stream: "c1" }),
        fact(Refund, money, { stream: "c1" }),
        fact(Outcome, { call_id: "c2", buyer_id: "b2", duration_s: 10, price_cents: 100, currency: "USD" }, { stream: "c2" }),
        fact(Qualification, { call_id: "c2", qualified: false }, { stream: "c2" })
      ])
      .then([
        { call_id: "c1", buyer_id: "b1", duration_s: 75, currency: "EUR", caller_phone_masked: "•••• 0958", qualified: true, charged_cents: 250, refunded_cents: 250 },
        { call_id: "c2", buyer_id: "b2", duration_s: 10, currency: "USD", caller_phone_masked: null, qualified: false, charged_cents: 0, refunded_cents: 0 }
      ]))

  it("buyer_budgets: distinct charges minus distinct refunds per buyer", () =>
    ProjectionSpec.for(buyerBudgetsProjection)
      .given([
        fact(Charge, money, { stream: "c1" }),
        fact(Charge, { ...money, call_id: "c2", amount_cents: 100 }, { stream: "c2" }),
        fact(Refund, money, { stream: "c1" }),
        fact(Charge, { ...money, call_id: "c3", buyer_id: "b2", amount_cents: 40 }, { stream: "c3" })
      ])
      .then([
        { buyer_id: "b1", spent_cents: 100, charges: 2, refunds: 1 },
        { buyer_id: "b2", spent_cents: 40, charges: 1, refunds: 0 }
      ]))
})
