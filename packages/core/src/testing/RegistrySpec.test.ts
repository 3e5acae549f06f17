import { integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core"
import { Effect, Schema } from "effect"
import { describe, expect, it } from "vitest"
import * as FactDefinition from "../definitions/FactDefinition.js"
import * as Handler from "../definitions/Handler.js"
import * as MessageDefinition from "../definitions/MessageDefinition.js"
import * as Module from "../definitions/Module.js"
import * as Processor from "../definitions/Processor.js"
import * as Projection from "../definitions/Projection.js"
import { RegistryConfigError } from "../registry/Registry.js"
import * as RegistrySpec from "./RegistrySpec.js"

const Placed = MessageDefinition.event("order.placed").version(1, Schema.Struct({ id: Schema.String }))
const OrderPlaced = FactDefinition.make("order_placed", Schema.Struct({ id: Schema.String }))
const Shipped = FactDefinition.make("order_shipped", Schema.Struct({ id: Schema.String }))
const record = Handler.handler(Placed, { name: "record-order", emits: [OrderPlaced], handle: (m) => Effect.succeed([OrderPlaced.make(m.payload)]) })
const orders = Module.make("orders", { handlers: [record] })

describe("RegistrySpec.check", () => {
  it("passes a module list the Worker would start with", () => {
    expect(RegistrySpec.check([orders], { sources: { "../src/orders/Orders.ts": { orders, record } } }).projections).toEqual([])
  })

  it("refuses a listener of a fact nobody emits, with the registry's message (the specs' requireEmitters: false does not apply)", () => {
    const notify = Processor.make(Shipped, { name: "notify-shipped", emits: [], process: () => Effect.succeed([]) })
    expect(() => RegistrySpec.check([orders, Module.make("shipping", { processors: [notify] })])).toThrow(
      new RegistryConfigError('processor "notify-shipped" (module shipping) listens to fact type "order_shipped", which no handler or processor emits; add it to the emits of the handler or processor that appends it')
    )
  })

  it("refuses a fact type emitted by two modules", () => {
    const Again = MessageDefinition.event("order.copied").version(1, Schema.Struct({ id: Schema.String }))
    const again = Handler.handler(Again, { name: "again", emits: [OrderPlaced], handle: (m) => Effect.succeed([OrderPlaced.make(m.payload)]) })
    expect(() => RegistrySpec.check([orders, Module.make("copies", { handlers: [again] })])).toThrow(
      'fact type "order_placed" is emitted by handler "record-order" (module orders) and by handler "again" (module copies); a fact type belongs to one module'
    )
  })

  it("refuses a projection mapping that writes a column its table does not have, naming the projection, the column and the table's columns", () => {
    const Priced = FactDefinition.make("order_priced", Schema.Struct({ id: Schema.String, cents: Schema.Number }))
    const price = Handler.handler(MessageDefinition.event("order.priced").version(1, Schema.Struct({ id: Schema.String, cents: Schema.Number })), {
      name: "price-order",
      emits: [Priced],
      handle: (m) => Effect.succeed([Priced.make(m.payload)])
    })
    const table = sqliteTable("order_totals", {
      tenant_id: text("tenant_id").notNull(),
      id: text("id").notNull(),
      total_cents: integer("total_cents").notNull().default(0)
    }, (t) => [primaryKey({ columns: [t.tenant_id, t.id] })])
    // Typed as a wide Row (as JavaScript or `any` data would be): the compiler cannot see the column, the probe does.
    const rows = (mapping: (d: { readonly id: string; readonly cents: number }) => Projection.Row) =>
      Projection.additive({ name: "order_totals", table, key: ["id"], queryable: [], on: [Projection.on(Priced, (d) => ({ key: { id: d.id }, add: mapping(d) as Record<string, number> }))] })
    const module = (projection: Projection.Projection) => Module.make("pricing", { handlers: [price], projections: [projection] })
    expect(() => RegistrySpec.check([module(rows((d) => ({ total_cent: d.cents })))])).toThrow(
      new RegistryConfigError("projection order_totals mapped order_priced to unknown column(s) total_cent; table order_totals has id, total_cents (module pricing)")
    )
    expect(RegistrySpec.check([module(rows((d) => ({ total_cents: d.cents })))]).projections.map((p) => p.name)).toEqual(["order_totals"])
  })

  it("refuses a module defined under src/ but missing from the list, naming the file and the fix", () => {
    const leads = Module.make("leads", {})
    expect(() => RegistrySpec.check([orders], { sources: { "../src/orders/Orders.ts": { orders }, "../src/leads/Leads.ts": { leads, qualifyingScore: 50 } } })).toThrow(
      'module "leads" (export leads of src/leads/Leads.ts) is not registered: add it to the modules list in src/modules.ts (import { leads } from "./leads/Leads.js")'
    )
  })
})
