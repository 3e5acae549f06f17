/**
 * The orders module: `order.placed` (v1) recorded as an `order_placed` fact by a handler and projected
 * into the `orders` table. Subject = the order id. Make it yours: add versions with upcasters, deciders
 * over the stream, processors deriving facts, more projections, webhooks.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { FactDefinition, Handler, MessageDefinition, Module, PermanentError, Projection } from "@factline/core"
import * as Tables from "./Tables.js"

const Id = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(128))

/** The event services send: `POST /v1/events` with `message_type: "order.placed"`. */
export const OrderPlaced = MessageDefinition.event("order.placed").version(
  1,
  Schema.Struct({ order_id: Id, customer_id: Id, total_cents: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)) })
)

/** The fact this module owns: what happened, immutable, in the order's stream. */
export const Placed = FactDefinition.make("order_placed", Schema.Struct({ order_id: Id, customer_id: Id, total_cents: Schema.Int }))

export const recordOrder = Handler.handler(OrderPlaced, {
  name: "record-order",
  emits: [Placed],
  handle: (m) =>
    m.subject === m.payload.order_id
      ? Effect.succeed([Placed.make(m.payload)])
      : Effect.fail(new PermanentError({ message: `subject "${m.subject}" must be the order_id "${m.payload.order_id}"` }))
})

/** One row per order, queryable at `GET /v1/projections/orders?customer_id=…`. */
export const ordersProjection = Projection.rows({
  name: "orders",
  table: Tables.orders,
  key: ["order_id"],
  queryable: ["order_id", "customer_id"],
  on: [Projection.on(Placed, ({ order_id, customer_id, total_cents }) => ({ order_id, customer_id, total_cents }))]
})

export const orders = Module.make("orders", {
  tables: Tables,
  handlers: [recordOrder],
  projections: [ordersProjection]
})
