/**
 * The AsyncAPI document the generator writes (`AsyncApi.generate`, what `GET /asyncapi.json` serves and
 * `npm run asyncapi` writes) parses with the official parser (`@asyncapi/parser`) without an error
 * diagnostic: for the example's registry, and for a module whose schemas carry named sub-schemas (an
 * `identifier` annotation makes effect/Schema emit `$defs` and `$ref`s into them, which must resolve inside
 * the AsyncAPI document). The served document is parsed the same way by scripts/interop.mjs against
 * `wrangler dev`. (Runs in Node: the parser does not run in workerd.)
 */
import { Parser } from "@asyncapi/parser"
import { Effect, Schema } from "effect"
import { FactDefinition, Handler, MessageDefinition, Module, Registry, Webhook } from "@factline/core"
import { AsyncApi } from "@factline/core/runtime"
import { describe, expect, it } from "vitest"
import { modules } from "../src/modules.ts"

const severity = ["error", "warning", "info", "hint"]
const parse = async (document) => {
  const { document: parsed, diagnostics } = await new Parser().parse(JSON.stringify(document))
  const listed = diagnostics.map((d) => `${severity[d.severity]} ${d.code} ${d.path.join("/")}: ${d.message}`)
  return { parsed, errors: listed.filter((d) => d.startsWith("error")), listed }
}

/** A module whose payload, fact and webhook schemas reference named sub-schemas (`$defs`). */
const Amount = Schema.Struct({ cents: Schema.Int, currency: Schema.String }).annotate({ identifier: "Amount" })
const Line = Schema.Struct({ sku: Schema.String, amount: Amount }).annotate({ identifier: "Line" })
const Ordered = MessageDefinition.event("order.placed").version(1, Schema.Struct({ order_id: Schema.String, lines: Schema.Array(Line), total: Amount }))
const OrderTotal = FactDefinition.make("order_total", Amount)
const OrderLines = FactDefinition.make("order_lines", Schema.Struct({ order_id: Schema.String, lines: Schema.Array(Line) }))
const orders = Module.make("orders", {
  handlers: [Handler.handler(Ordered, {
    name: "record-order",
    emits: [OrderTotal, OrderLines],
    handle: (m) => Effect.succeed([OrderTotal.make(m.payload.total), OrderLines.make({ order_id: m.payload.order_id, lines: m.payload.lines })])
  })],
  webhooks: [Webhook.event(OrderLines, { type: "order.lines" })]
})

describe("AsyncAPI document × @asyncapi/parser", () => {
  it("the example's document parses without an error; every message and its payload resolve", async () => {
    const document = AsyncApi.generate(Registry.make(modules))
    const { parsed, errors, listed } = await parse(document)
    expect(errors, listed.join("\n")).toEqual([])
    expect(parsed).toBeDefined()
    expect(parsed.version()).toBe(document.asyncapi)
    expect(parsed.channels().all().map((c) => c.id()).sort()).toEqual(Object.keys(document.channels).sort())
    expect(parsed.operations().all().map((o) => o.id()).sort()).toEqual(Object.keys(document.operations).sort())
    expect(parsed.allMessages().all().map((m) => m.id()).sort()).toEqual(Object.keys(document.components.messages).sort())
    // A message's payload resolved through Envelope and the payload schema: the v2 event requires currency.
    const v2 = parsed.components().messages().get("call.completed.v2").payload().json()
    expect(JSON.stringify(v2)).not.toContain("$ref")
    expect(v2.allOf[1].properties.payload.required).toContain("currency")
  })

  it("named sub-schemas ($defs) resolve inside the AsyncAPI document, for payloads, facts and webhook events", async () => {
    const document = AsyncApi.generate(Registry.make([...modules, orders]))
    const { parsed, errors, listed } = await parse(document)
    expect(errors, listed.join("\n")).toEqual([])
    // No reference is left relative to a standalone schema (`#/$defs/…` would point at the document's root).
    const text = JSON.stringify(document)
    expect(text).not.toMatch(/"\$ref":"#\/\$defs\//)
    expect(text).toContain(`"$ref":"#/components/schemas/payload.order.placed.v1/$defs/Amount"`)
    const payload = parsed.components().messages().get("order.placed.v1").payload().json()
    const order = payload.allOf[1].properties.payload
    expect(order.properties.total.required).toEqual(["cents", "currency"])
    expect(order.properties.lines.items.properties.amount.required).toEqual(["cents", "currency"])
    expect(parsed.components().schemas().get("fact.order_total").json().$ref).toBeUndefined()
    expect(JSON.stringify(parsed.components().schemas().get("webhook.order.lines").json())).not.toContain("$ref")
  })
})
