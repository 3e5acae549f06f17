/**
 * Run by the release test inside the app `factline init` made (copied there: it imports the app's installed
 * packages): a service outside Workers declares its event from @factline/core/definitions (no runtime) with the
 * template's schema, and the packed @factline/client refuses an invalid payload by its path, emits, and reads the
 * projection back. `node client-check.mjs BASE TOKEN`.
 */
import * as Schema from "effect/Schema"
import { Client, InvalidPayload } from "@factline/client"
import { MessageDefinition } from "@factline/core/definitions"
const Id = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(128))
const OrderPlaced = MessageDefinition.event("order.placed").version(1, Schema.Struct({ order_id: Id, customer_id: Id, total_cents: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)) }))
const [base, token] = process.argv.slice(2)
const client = Client.make({ baseUrl: base, token, source: "release-check" })
const wrong = await client.emit(OrderPlaced, { order_id: "c2", customer_id: "cc", total_cents: -1 }, { subject: "c2", idempotency_key: "order.placed:c2" }).catch((e) => e)
if (!(wrong instanceof InvalidPayload) || wrong.problems[0]?.path !== "payload.total_cents") throw new Error("expected InvalidPayload on payload.total_cents, got " + wrong)
const emitted = await client.emit(OrderPlaced, { order_id: "c1", customer_id: "client-check", total_cents: 42 }, { subject: "c1", idempotency_key: "order.placed:c1" })
if (emitted.idempotency_key !== "order.placed:c1") throw new Error("unexpected item " + JSON.stringify(emitted))
for (let i = 0; i < 300; i++) {
  const { data } = await client.readProjection("orders", { where: { customer_id: "client-check" } })
  if (data.length === 1 && data[0].total_cents === 42) process.exit(0)
  await new Promise((r) => setTimeout(r, 100))
}
throw new Error("the order never reached the orders projection")
