/**
 * A processor that declares `reads` gets its stream's state as of its fact: the facts before it (by
 * sequence), folded in their latest shape — not what was appended since, so a redelivery derives the same.
 * On the in-memory platform: the real ledger SQL, the real processing consumer.
 */
import { Effect, Schema } from "effect"
import { describe, expect, it } from "vitest"
import * as FactDefinition from "../definitions/FactDefinition.js"
import * as Module from "../definitions/Module.js"
import * as Processor from "../definitions/Processor.js"
import { Ledger } from "../ledger/Ledger.js"
import { appendGiven, readStream } from "../testing/Specs.js"
import * as TestPlatform from "../testing/TestPlatform.js"
import * as ProcessingConsumer from "./ProcessingConsumer.js"

const Priced = Schema.Struct({ subscription_id: Schema.String, price_cents: Schema.Int })
const Started = FactDefinition.make("subscription_started", Schema.Struct({ subscription_id: Schema.String, plan: Schema.String }))
  .version(2, Schema.Struct({ subscription_id: Schema.String, plan: Schema.String, price_cents: Schema.Int }), (v1) => ({ ...v1, price_cents: 1000 }))
const PlanChanged = FactDefinition.make("plan_changed", Priced)
const Cancelled = FactDefinition.make("subscription_cancelled", Schema.Struct({ subscription_id: Schema.String }))
const MrrChanged = FactDefinition.make("mrr_changed", Schema.Struct({ subscription_id: Schema.String, delta_cents: Schema.Int }))

const lostMrr = Processor.make(Cancelled, {
  name: "lost-mrr",
  emits: [MrrChanged],
  reads: [Started, PlanChanged],
  initialState: 0,
  evolve: (_price, fact) => fact.data.price_cents,
  process: (fact, price) => Effect.succeed(price === 0 ? [] : [MrrChanged.make({ subscription_id: fact.data.subscription_id, delta_cents: -price })])
})

const stream = "sub-1"
const tenant = "tenant-test"
const deliver = (platform: TestPlatform.TestPlatform, factId: string) =>
  platform.run(Effect.gen(function*() {
    const state = yield* (yield* Ledger).read({ tenant_id: tenant, stream })
    const fact = state.facts.find((f) => f.fact_id === factId)!
    return yield* ProcessingConsumer.process([{ key: "k", value: { fact } }])
  }))

describe("a processor reading its stream", () => {
  it("folds the facts before its fact (upcast), not those appended after it, however late it runs", async () => {
    const platform = TestPlatform.make([Module.make("subscriptions", { processors: [lostMrr] })], { requireEmitters: false })
    const at = (day: number) => new Date(Date.UTC(2026, 0, day)).toISOString()
    const stored = (type: string, data: Record<string, unknown>, n: number, schema_version?: number) =>
      ({ fact_id: `f${n}`, tenant_id: tenant, stream, sequence: n, type, data, causation_id: `c${n}`, correlation_id: "c", caused_by: "test", created_at: at(n), ...(schema_version ? { schema_version } : {}) })
    await appendGiven(platform, tenant, stream, [
      stored("subscription_started", { subscription_id: stream, plan: "basic" }, 1, 1),
      stored("plan_changed", { subscription_id: stream, price_cents: 4900 }, 2),
      stored("subscription_cancelled", { subscription_id: stream }, 3),
      // Appended after the cancellation (a restart): the cancellation's processor must not see it.
      stored("plan_changed", { subscription_id: stream, price_cents: 9900 }, 4)
    ])
    await deliver(platform, "f3")
    await deliver(platform, "f3")
    const derived = (await readStream(platform, tenant, stream)).facts.filter((f) => f.caused_by === "lost-mrr")
    expect(derived.map((f) => [f.type, f.data, f.causation_id])).toEqual([["mrr_changed", { subscription_id: stream, delta_cents: -4900 }, "f3"]])
  })

  it("only a processor declaring reads has a fold (the consumer reads the stream for those alone)", () => {
    const plain = Processor.make(Cancelled, { name: "plain", emits: [], process: () => Effect.succeed([]) })
    expect(plain.stream).toBeUndefined()
    expect(lostMrr.stream?.folds).toEqual(new Set(["subscription_started", "plan_changed"]))
  })
})
