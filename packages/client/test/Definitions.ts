/**
 * A small module of definitions for the client's tests, shaped like the example's calls module
 * (apps/example/src/calls): `call.completed` v1 → v2, two facts, a rows projection on a Drizzle table.
 */
import { Schema } from "effect"
import { integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core"
import { FactDefinition, MessageDefinition, Projection } from "@factline/core/definitions"

const Id = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(128))
const CallCompletedV1 = Schema.Struct({ call_id: Id, buyer_id: Id, duration_s: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)), price_cents: Schema.Int })
const CallCompletedV2 = Schema.Struct({ ...CallCompletedV1.fields, currency: Schema.String.check(Schema.isPattern(/^[A-Z]{3}$/)) })

export const CallCompleted = MessageDefinition.event("call.completed")
  .version(1, CallCompletedV1)
  .version(2, CallCompletedV2, (v1) => ({ ...v1, currency: "USD" }))

/** An event that can be made as large as a test needs. */
export const NoteAdded = MessageDefinition.event("note.added").version(1, Schema.Struct({ text: Schema.String }))

export const Outcome = FactDefinition.make("outcome", CallCompletedV2)
export const Charge = FactDefinition.make("charge", Schema.Struct({ call_id: Id, buyer_id: Id, amount_cents: Schema.Int, currency: Schema.String }))

export const calls = sqliteTable(
  "calls",
  {
    tenant_id: text("tenant_id").notNull(),
    call_id: text("call_id").notNull(),
    buyer_id: text("buyer_id"),
    qualified: integer("qualified", { mode: "boolean" }),
    charged_cents: integer("charged_cents").notNull().default(0),
    ...Projection.sequenceColumns([Outcome, Charge])
  },
  (t) => [primaryKey({ columns: [t.tenant_id, t.call_id] })]
)

export const callsProjection = Projection.rows({
  name: "calls",
  table: calls,
  key: ["call_id"],
  queryable: ["buyer_id", "qualified"],
  on: [
    Projection.on(Outcome, ({ call_id, buyer_id }) => ({ call_id, buyer_id })),
    Projection.on(Charge, ({ call_id, amount_cents }) => ({ call_id, charged_cents: amount_cents }))
  ]
})

export const payload = (call_id: string) => ({ call_id, buyer_id: "buyer_1", duration_s: 90, price_cents: 300, currency: "USD" })
