/**
 * Type tests of what a product team writes beside its handlers, checked by `npm run typecheck` (tsc over
 * src): each `@ts-expect-error` line must fail to compile, and each typed assignment must compile. The
 * runtime assertions check that the typed builders build what they say.
 */
import { Effect, Schema } from "effect"
import { describe, expect, it } from "vitest"
import * as FactDefinition from "./FactDefinition.js"
import * as Handler from "./Handler.js"
import * as MessageDefinition from "./MessageDefinition.js"
import * as Core from "../index.js"
import { fact, message } from "../testing/Builders.js"

const Started = FactDefinition.make("subscription_started", Schema.Struct({ subscription_id: Schema.String, plan: Schema.String, price_cents: Schema.Int }))
const PlanChanged = FactDefinition.make("plan_changed", Schema.Struct({ subscription_id: Schema.String, plan: Schema.String, price_cents: Schema.Int }))
const Cancelled = FactDefinition.make("subscription_cancelled", Schema.Struct({ subscription_id: Schema.String }))

// 1. A definition's schema keeps its type: `typeof Started.schema.Type` is the data's type, not unknown.
type StartedData = typeof Started.schema.Type
export const startedData: StartedData = { subscription_id: "s1", plan: "pro", price_cents: 4900 }
// @ts-expect-error — `price_cents` is an integer field, so a string does not compile
export const wrongStartedData: StartedData = { subscription_id: "s1", plan: "pro", price_cents: "4900" }
const Versioned = FactDefinition.make("invoice_sent", Schema.Struct({ id: Schema.String }))
  .version(2, Schema.Struct({ id: Schema.String, currency: Schema.String }), (v1) => ({ ...v1, currency: "USD" }))
// @ts-expect-error — the schema is the latest version's: `currency` is required
export const missingCurrency: typeof Versioned.schema.Type = { id: "i" }

// 2. A shared `evolve` over several fact types: FactDefinition.FactOf<[…]> is the union, discriminated by `type`,
// reachable from the entry a product team imports (`@factline/core`).
type SubscriptionFact = Core.FactDefinition.FactOf<[typeof Started, typeof PlanChanged, typeof Cancelled]>
interface Mrr { readonly price_cents: number; readonly active: boolean }
export const evolveMrr = (state: Mrr, fact: SubscriptionFact): Mrr => {
  switch (fact.type) {
    case "subscription_started":
    case "plan_changed":
      return { price_cents: fact.data.price_cents, active: true }
    case "subscription_cancelled":
      // @ts-expect-error — a cancellation carries no price
      return { price_cents: fact.data.price_cents, active: false }
  }
}
const Cancel = MessageDefinition.command("subscription.cancel").version(1, Schema.Struct({ subscription_id: Schema.String }))
export const cancel = Handler.decider(Cancel, {
  name: "cancel-subscription",
  emits: [Cancelled],
  reads: [Started, PlanChanged],
  initialState: { price_cents: 0, active: false } as Mrr,
  evolve: evolveMrr, // the shared evolve is accepted where the decider's union is expected
  decide: (m, state) => Effect.succeed(state.active ? [Cancelled.make({ subscription_id: m.payload.subscription_id })] : [])
})

// 3. A spec's message at an older schema version is typed by that version: no cast.
const ChangePlanV1 = Schema.Struct({ subscription_id: Schema.String, plan: Schema.String })
const ChangePlan = MessageDefinition.command("subscription.change_plan")
  .version(1, ChangePlanV1)
  .version(2, Schema.Struct({ ...ChangePlanV1.fields, price_cents: Schema.Int }), (v1) => ({ ...v1, price_cents: 0 }))

describe("typed versioned payloads in the test kit", () => {
  it("message(Definition, payload, { version: 1 }) takes the version-1 payload and builds it at that version", () => {
    const v1 = message(ChangePlan, { subscription_id: "s1", plan: "pro" }, { subject: "s1", version: 1 })
    const v2 = message(ChangePlan, { subscription_id: "s1", plan: "pro", price_cents: 4900 }, { subject: "s1" })
    expect([v1.schema_version, v1.payload]).toEqual([1, { subscription_id: "s1", plan: "pro" }])
    expect([v2.schema_version, v2.payload]).toEqual([2, { subscription_id: "s1", plan: "pro", price_cents: 4900 }])
  })

  it("a payload of the wrong version does not compile, and the builder refuses it at run time too", () => {
    // @ts-expect-error — version 2 requires `price_cents`
    expect(() => message(ChangePlan, { subscription_id: "s1", plan: "pro" }, { subject: "s1", version: 2 })).toThrow(/payload\.price_cents/)
    // @ts-expect-error — the latest (default) version requires `price_cents`
    expect(() => message(ChangePlan, { subscription_id: "s1", plan: "pro" }, { subject: "s1" })).toThrow(/payload\.price_cents/)
    // @ts-expect-error — there is no version 3
    expect(() => message(ChangePlan, { subscription_id: "s1", plan: "pro" }, { subject: "s1", version: 3 })).toThrow(/schema_version 3 is not supported/)
  })

  it("fact(Definition, data, { version }) takes that version's data, as message does", () => {
    const v1 = fact(Versioned, { id: "i" }, { version: 1, stream: "i" })
    expect([v1.schema_version, v1.data]).toEqual([1, { id: "i" }])
    // @ts-expect-error — version 2 requires `currency`
    expect(() => fact(Versioned, { id: "i" }, { version: 2 })).toThrow(/data\.currency/)
  })

  it("a definition's schema is the latest version's", () => {
    expect(Schema.decodeUnknownSync(Started.schema)(startedData)).toEqual(startedData)
    expect(evolveMrr({ price_cents: 0, active: false }, { ...({} as SubscriptionFact), type: "plan_changed", data: { subscription_id: "s1", plan: "pro", price_cents: 4900 } })).toEqual({ price_cents: 4900, active: true })
  })
})
