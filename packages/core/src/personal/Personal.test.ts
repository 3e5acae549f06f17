import { Effect, Result, Schema } from "effect"
import { describe, expect, it } from "vitest"
import * as FactDefinition from "../definitions/FactDefinition.js"
import * as Handler from "../definitions/Handler.js"
import * as MessageDefinition from "../definitions/MessageDefinition.js"
import * as Module from "../definitions/Module.js"
import { Ledger } from "../ledger/Ledger.js"
import * as Trace from "../operations/Trace.js"
import { Producer } from "../producing/Producer.js"
import * as Registry from "../registry/Registry.js"
import * as EventsConsumer from "../routing/EventsConsumer.js"
import * as TestPlatform from "../testing/TestPlatform.js"
import * as FieldCipher from "./FieldCipher.js"
import { KeyRing } from "./KeyRing.js"
import * as Personal from "./Personal.js"
import * as Projection from "../definitions/Projection.js"
import { sqliteTable, text } from "drizzle-orm/sqlite-core"
import { fact, message } from "../testing/Builders.js"
import { HandlerSpec } from "../testing/Specs.js"

const V1 = Schema.Struct({ call_id: Schema.String, buyer_id: Schema.String, phone: Schema.optional(Schema.String) })
const Called = MessageDefinition.event("buyer.called").version(1, V1).personal({ subject: "buyer_id", fields: ["phone"] })
const Call = FactDefinition.make("call", V1).personal({ subject: "buyer_id", fields: ["phone"] })
const record = Handler.handler(Called, { name: "record-call", emits: [Call], handle: (m) => Effect.succeed([Call.make(m.payload)]) })
const modules = [Module.make("calls", { handlers: [record] })]

const tenant = "t1"
const send = (platform: TestPlatform.TestPlatform, buyer: string, phone: string, key: string) =>
  platform.run(Effect.flatMap(Effect.service(Producer), (p) => p.send([{ tenant_id: tenant, idempotency_key: key, message_type: "buyer.called", schema_version: 1, subject: `call-${key}`, source: "test", payload: { call_id: `call-${key}`, buyer_id: buyer, phone } }])))

describe("personal data", () => {
  it("is declared with its subject, checked at start-up", () => {
    const Loose = FactDefinition.make("loose", V1)
    const leaky = Handler.handler(Called, { name: "leaky", emits: [Loose], handle: (m) => Effect.succeed([Loose.make(m.payload)]) })
    expect(() => Registry.make([Module.make("m", { handlers: [leaky] })])).toThrow(/field\(s\) "phone" are personal data.*"loose".*not declared personal/)
    const Strict = MessageDefinition.event("strict.called").version(1, Schema.Struct({ buyer_id: Schema.String, phone: Schema.String.check(Schema.isPattern(/^\+\d+$/)) }))
      .personal({ subject: "buyer_id", fields: ["phone"] })
    const strict = Handler.handler(Strict, { name: "strict", emits: [], handle: () => Effect.succeed([]) })
    expect(() => Registry.make([Module.make("m", { handlers: [strict] })])).toThrow(/refuses the erased marker "\[erased\]"/)
    expect(Personal.pseudonymityProblem("ann@example.com")).toMatch(/email/)
    expect(Personal.pseudonymityProblem("+44 20 7946 0958")).toMatch(/phone/)
    expect(Personal.pseudonymityProblem("buyer-42")).toBeUndefined()
    expect(Personal.pseudonymityProblem("10023456")).toBeUndefined()
  })

  it("is sealed before the queue and in the ledger, opened for the handler and readers, and reads as erased after erasure", async () => {
    const platform = TestPlatform.make(modules)
    await send(platform, "buyer-1", "+15550001111", "k1")
    const queued = [...platform.queues.values()].flatMap((q) => q.sent) as Array<{ payload: { phone: string; buyer_id: string } }>
    expect(queued).toHaveLength(1)
    expect(queued[0]!.payload.phone).toMatch(/^pd1\.1\./)
    expect(JSON.stringify(queued)).not.toContain("5550001111")
    expect(queued[0]!.payload.buyer_id).toBe("buyer-1")

    // The events consumer opens it for the handler; the ledger stores it sealed.
    const decoded = await platform.run(EventsConsumer.decode(queued[0]))
    expect((decoded[0]!.value.routed.message.payload as { phone: string }).phone).toBe("+15550001111")
    const outcomes = await platform.run(EventsConsumer.process(decoded))
    expect([...outcomes.values()].every(Result.isSuccess)).toBe(true)
    const stream = await platform.run(Effect.flatMap(Effect.service(Ledger), (l) => l.read({ tenant_id: tenant, stream: "call-k1" })))
    expect(stream.facts[0]!.data.phone).toMatch(/^pd1\.1\./)
    expect(JSON.stringify(stream.facts)).not.toContain("5550001111")
    expect((await platform.run(Trace.readable(stream.facts)))[0]!.data.phone).toBe("+15550001111")

    // The same value seals to the same text (idempotency compares sealed payloads); another key's does not.
    await send(platform, "buyer-1", "+15550001111", "k1")
    const again = [...platform.queues.values()].flatMap((q) => q.sent) as Array<{ payload: { phone: string } }>
    expect(again[1]!.payload.phone).toBe(again[0]!.payload.phone)

    // Erased: every reader gets the marker, every time; a later event of the subject gets a new key.
    const erased = await platform.run(Effect.flatMap(Effect.service(KeyRing), (k) => k.erase(tenant, "buyer-1", "2026-11-28T00:00:00.000Z")))
    expect(erased.erased).toEqual([1])
    expect((await platform.run(Trace.readable(stream.facts)))[0]!.data.phone).toBe(Personal.erased)
    expect((await platform.run(Trace.readable(stream.facts)))[0]!.data.phone).toBe(Personal.erased)
    const repeat = await platform.run(Effect.flatMap(Effect.service(KeyRing), (k) => k.erase(tenant, "buyer-1", "2026-11-28T00:01:00.000Z")))
    expect(repeat.erased).toEqual([])
    await send(platform, "buyer-1", "+15550002222", "k2")
    const later = ([...platform.queues.values()].flatMap((q) => q.sent) as Array<{ message_type?: string; payload: { phone: string } }>).filter((m) => m.message_type === "buyer.called")
    expect(later.map((m) => FieldCipher.generationOf(m.payload.phone))).toEqual([1, 1, 2])
  })

  it("refuses new personal data of an erased subject where the tenant says so, and refuses a subject id that is personal data", async () => {
    const platform = TestPlatform.make(modules, { settings: { FACTLINE_REFUSE_ERASED_SUBJECTS: tenant } })
    await platform.run(Effect.flatMap(Effect.service(KeyRing), (k) => k.erase(tenant, "buyer-9", "2026-11-28T00:00:00.000Z")))
    const refused = await platform.run(Effect.result(Effect.flatMap(Effect.service(Producer), (p) => p.send([{ tenant_id: tenant, idempotency_key: "k9", message_type: "buyer.called", schema_version: 1, subject: "c9", source: "test", payload: { call_id: "c9", buyer_id: "buyer-9", phone: "+15550009999" } }]))))
    expect(Result.isFailure(refused) && JSON.stringify(refused.failure)).toMatch(/"path":"payload\.buyer_id","message":"data subject \\"buyer-9\\" was erased/)
    const email = await platform.run(Effect.result(Effect.flatMap(Effect.service(Producer), (p) => p.send([{ tenant_id: tenant, idempotency_key: "k8", message_type: "buyer.called", schema_version: 1, subject: "c8", source: "test", payload: { call_id: "c8", buyer_id: "ann@example.com", phone: "+1555" } }]))))
    expect(Result.isFailure(email) && JSON.stringify(email.failure)).toMatch(/payload\.buyer_id.*email address/)
  })

  it("a projection whose erasure deletes maps nothing for a fact of an erased subject (late facts and rebuilds never bring rows back)", () => {
    const table = sqliteTable("phones", { tenant_id: text("tenant_id").notNull(), call_id: text("call_id").notNull(), buyer_id: text("buyer_id"), phone: text("phone"), ...Projection.sequenceColumns(["call"]) })
    const phones = Projection.rows({
      name: "phones", table, key: ["call_id"], queryable: [], erasure: { subject: "buyer_id", action: "delete" },
      on: [Projection.on(Call, ({ call_id, buyer_id, phone }) => ({ call_id, buyer_id, phone: phone ?? null }))]
    })
    const map = phones.byType.get("call")!
    expect(map(fact(Call, { call_id: "c1", buyer_id: "b1", phone: "+15550001111" }))).toEqual({ call_id: "c1", buyer_id: "b1", phone: "+15550001111" })
    expect(map(fact(Call, { call_id: "c1", buyer_id: "b1", phone: Personal.erased }))).toBeUndefined()
  })

  it("a spec compares what product code sees: the facts' personal fields opened, though they are stored sealed", async () => {
    await HandlerSpec.for(record)
      .when(message(Called, { call_id: "c1", buyer_id: "buyer-1", phone: "+15550001111" }, { subject: "c1" }))
      .then([Call.make({ call_id: "c1", buyer_id: "buyer-1", phone: "+15550001111" })])
  })
})
