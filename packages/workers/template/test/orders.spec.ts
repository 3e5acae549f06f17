/** The orders module's specs, in plain Node on the test kit's in-memory platform (milliseconds, no workerd). */
import { describe, it } from "vitest"
import { HandlerSpec, ProjectionSpec, fact, message } from "@factline/core/testing"
import { OrderPlaced, Placed, ordersProjection, recordOrder } from "../src/orders/Orders.js"

describe("orders", () => {
  it("records a placed order as an order_placed fact (and a redelivery appends nothing)", () =>
    HandlerSpec.for(recordOrder)
      .when(message(OrderPlaced, { order_id: "o1", customer_id: "c1", total_cents: 1200 }, { subject: "o1" }))
      .then([Placed.make({ order_id: "o1", customer_id: "c1", total_cents: 1200 })]))

  it("refuses an order sent to another order's stream, permanently", () =>
    HandlerSpec.for(recordOrder)
      .when(message(OrderPlaced, { order_id: "o1", customer_id: "c1", total_cents: 1200 }, { subject: "o2" }))
      .thenFails("must be the order_id", { permanent: true }))

  it("projects one row per order, whatever the order and duplicates", () =>
    ProjectionSpec.for(ordersProjection)
      .given([
        fact(Placed, { order_id: "o1", customer_id: "c1", total_cents: 1200 }, { stream: "o1" }),
        fact(Placed, { order_id: "o2", customer_id: "c1", total_cents: 300 }, { stream: "o2" })
      ])
      .then([
        { order_id: "o1", customer_id: "c1", total_cents: 1200 },
        { order_id: "o2", customer_id: "c1", total_cents: 300 }
      ]))
})
