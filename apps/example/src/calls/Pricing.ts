/**
 * The calls module's pricing service: what a qualified call is charged. `qualify-call` asks it for every
 * charge; the module's layer (`Pricing.layer`) provides it, built once per isolate, and a spec replaces it
 * with a rate card of its own (`ProcessorSpec.for(qualifyCall, { layer })`, test/calls.spec.ts).
 *
 * The live price is the one the call was completed with, in its currency: a marketplace with negotiated
 * rates would read them here (a table, a client), not in the processor.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/** The call being charged: who pays, how long it lasted, its listed price. */
export interface PricedCall {
  readonly buyer_id: string
  readonly duration_s: number
  readonly price_cents: number
  readonly currency: string
}

export class Pricing extends Context.Service<Pricing, {
  /** The amount, in cents of the call's currency, a qualified call is charged. */
  readonly chargeFor: (call: PricedCall) => Effect.Effect<number>
}>()("@factline/example/calls/Pricing") {
  /** The listed price, as the call was completed with it. */
  static readonly layer = Layer.succeed(Pricing, Pricing.of({ chargeFor: (call) => Effect.succeed(call.price_cents) }))
}
