import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core"
import { describe, expect, it } from "vitest"
import * as FactDefinition from "../definitions/FactDefinition.js"
import * as Handler from "../definitions/Handler.js"
import * as MessageDefinition from "../definitions/MessageDefinition.js"
import * as Module from "../definitions/Module.js"
import * as Processor from "../definitions/Processor.js"
import * as Projection from "../definitions/Projection.js"
import { PermanentError } from "../failures/Failure.js"
import * as PropertySpec from "./PropertySpec.js"
import { SpecError } from "./SpecError.js"

const Id = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(20))
const Split = MessageDefinition.command("bill.split").version(1, Schema.Struct({ bill_id: Id, total_cents: Schema.Int, people: Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 10 })) }))
const Shared = FactDefinition.make("bill_shared", Schema.Struct({ bill_id: Id, share_cents: Schema.Int }))
const Settled = FactDefinition.make("bill_settled", Schema.Struct({ bill_id: Id }))

const shares = sqliteTable("shares", { tenant_id: text("tenant_id").notNull(), bill_id: text("bill_id").notNull(), share_cents: integer("share_cents"), ...Projection.sequenceColumns(["bill_shared"]) }, (t) => [
  primaryKey({ columns: [t.tenant_id, t.bill_id] })
])
const sharesProjection = Projection.rows({ name: "shares", table: shares, key: ["bill_id"], queryable: ["bill_id"], on: [Projection.on(Shared, ({ bill_id, share_cents }) => ({ bill_id, share_cents }))] })

/** A decider dividing by a field that can be 0 (an Int division that throws, as BigInt's does). */
const divide = (total: number, people: number) => {
  if (people === 0) throw new RangeError("Division by zero")
  return Math.floor(total / people)
}
const splitBill = (guarded: boolean) =>
  Handler.decider(Split, {
    name: guarded ? "split-bill-guarded" : "split-bill",
    emits: [Shared],
    initialState: 0,
    evolve: (n) => n + 1,
    decide: (m) =>
      guarded && m.payload.people === 0
        ? Effect.fail(new PermanentError({ message: "a bill is split between at least one person" }))
        : Effect.sync(() => [Shared.make({ bill_id: m.payload.bill_id, share_cents: divide(m.payload.total_cents, m.payload.people) })])
  })
const bills = (guarded: boolean) => Module.make("bills", { tables: { shares }, handlers: [splitBill(guarded)], projections: [sharesProjection] })

describe("PropertySpec", () => {
  it("fails on a decider that throws on some drawn input, naming the decider, the input and the line that threw", async () => {
    const failed = PropertySpec.check(bills(false), { runs: 30 })
    await expect(failed).rejects.toBeInstanceOf(SpecError)
    await expect(failed).rejects.toThrow(/decider split-bill \(module bills\), on the input .*"people":0.*threw \(a defect, not a typed failure\): RangeError: Division by zero \(at .*PropertySpec\.test\.ts:\d+:\d+\)/)
  })

  it("passes the same decider once it answers the bad input with a typed failure", async () => {
    await PropertySpec.check(bills(true), { runs: 30 })
  })

  it("fails on a handler answering with a fact it does not declare", async () => {
    const sloppy = Handler.handler(Split, { name: "sloppy-split", emits: [Shared], handle: (m) => Effect.succeed([Settled.make({ bill_id: m.payload.bill_id }) as never]) })
    await expect(PropertySpec.check(Module.make("bills", { handlers: [sloppy] }), { runs: 5 })).rejects.toThrow(/handler sloppy-split .*which it does not declare/)
  })

  it("fails on a processor that throws, and on a projection mapping that throws on an emitted fact", async () => {
    const settle = Processor.make(Shared, {
      name: "settle-bill",
      emits: [Settled],
      process: ({ data }) => Effect.sync(() => (data.share_cents < 0 ? JSON.parse("{") : [Settled.make({ bill_id: data.bill_id })]))
    })
    await expect(PropertySpec.check(Module.make("bills", { processors: [settle] }), { runs: 30 })).rejects.toThrow(/processor settle-bill \(module bills\), on the input .*"share_cents":-.*threw/)
    const picky = Projection.rows({
      name: "picky",
      table: shares,
      key: ["bill_id"],
      queryable: ["bill_id"],
      on: [Projection.on(Shared, ({ bill_id, share_cents }) => {
        if (share_cents < 0) throw new Error("a negative share")
        return { bill_id, share_cents }
      })]
    })
    await expect(PropertySpec.check(Module.make("bills", { tables: { shares }, handlers: [splitBill(true)], projections: [picky] }), { runs: 50 }))
      .rejects.toThrow(/projection picky threw mapping its bill_shared fact .*a negative share/)
  })
})
