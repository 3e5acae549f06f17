import { describe, expect, it } from "vitest"
import * as DataSubject from "./DataSubject.js"

const lookup: DataSubject.Lookup = {
  personalMessage: (type) => (type === "call.completed" ? { subject: "buyer_id", fields: ["caller_phone"] } : undefined),
  personalFact: (type) => (type === "call_recorded" ? { subject: "buyer_id", fields: ["caller_phone"] } : undefined)
}
const fact = (type: string, data: Record<string, unknown>) => ({ fact_id: "f1", type, data })

describe("DataSubject.ofMessage", () => {
  it("reads an event's subject from its payload by its message type's declaration", () => {
    expect(DataSubject.ofMessage(lookup, { message_type: "call.completed", payload: { buyer_id: "b-1", caller_phone: "pd1.1.x" } })).toBe("b-1")
  })

  it("reads a fact message's subject from the fact's data, and a batch's from its first personal fact", () => {
    expect(DataSubject.ofMessage(lookup, { message_type: "fact.call_recorded", payload: { fact: fact("call_recorded", { buyer_id: "b-2" }) } })).toBe("b-2")
    expect(DataSubject.ofMessage(lookup, { message_type: "facts.batch", payload: { facts: [fact("call_charged", { buyer_id: "x" }), fact("call_recorded", { buyer_id: "b-3" })] } })).toBe("b-3")
  })

  it("reads a webhook delivery's subject from its delivered payload by the fact type", () => {
    const body = { message_type: "webhook.delivery", payload: { delivery_id: "d", fact_type: "call_recorded", payload: { buyer_id: "b-4" } } }
    expect(DataSubject.ofMessage(lookup, body)).toBe("b-4")
    const wrapped = { message_type: "webhook.delivery", payload: { delivery_id: "d", fact_type: "call_recorded", payload: { data: { buyer_id: "b-5" } } } }
    expect(DataSubject.ofMessage(lookup, wrapped)).toBe("b-5")
  })

  it("finds none where nothing is declared, the subject is missing or not a string, or the body is not a message", () => {
    expect(DataSubject.ofMessage(lookup, { message_type: "call.started", payload: { buyer_id: "b-1" } })).toBeNull()
    expect(DataSubject.ofMessage(lookup, { message_type: "call.completed", payload: { buyer_id: 7 } })).toBeNull()
    expect(DataSubject.ofMessage(lookup, { message_type: "call.completed", payload: { buyer_id: "x".repeat(DataSubject.maxLength + 1) } })).toBeNull()
    expect(DataSubject.ofMessage(lookup, "not json")).toBeNull()
    expect(DataSubject.ofMessage(lookup, { message_type: "fact.call_charged", payload: { fact: fact("call_charged", { buyer_id: "b" }) } })).toBeNull()
  })

  it("a registry without personal data reads nothing", () => {
    const read = DataSubject.reader({ ...lookup, hasPersonalData: false })
    expect(read({ message_type: "call.completed", payload: { buyer_id: "b-1" } })).toBeNull()
  })
})
