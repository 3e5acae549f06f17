import { Effect, Result, Schema } from "effect"
import { integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core"
import { describe, expect, it } from "vitest"
import * as FactDefinition from "./FactDefinition.js"
import * as Handler from "./Handler.js"
import * as MessageDefinition from "./MessageDefinition.js"
import * as Module from "./Module.js"
import * as Processor from "./Processor.js"
import * as Projection from "./Projection.js"
import * as Registry from "../registry/Registry.js"
import { PermanentError } from "../failures/Failure.js"
import { fact, message } from "../testing/Builders.js"
import { DeciderSpec, ProcessorSpec, ProjectionSpec } from "../testing/Specs.js"

const IssuedV1 = Schema.Struct({ invoice_id: Schema.String, amount_cents: Schema.Int })
const IssuedV2 = Schema.Struct({ ...IssuedV1.fields, currency: Schema.String })
const IssuedV3 = Schema.Struct({ ...IssuedV2.fields, due_days: Schema.Int })
const Issued = FactDefinition.make("invoice_issued", IssuedV1)
  .version(2, IssuedV2, (v1) => ({ ...v1, currency: "USD" }))
  .version(3, IssuedV3, (v2) => ({ ...v2, due_days: 30 }))

describe("versioned fact definitions", () => {
  it("make() is version 1; .version() adds the next with its upcaster, in order", () => {
    const v1 = FactDefinition.make("invoice_issued", IssuedV1)
    expect(v1.latestVersion).toBe(1)
    expect(Issued.latestVersion).toBe(3)
    expect(Issued.versions.map((v) => v.version)).toEqual([1, 2, 3])
    expect(Issued.schema).toBe(IssuedV3)
    expect(() => v1.version(3, IssuedV3, () => ({ invoice_id: "", amount_cents: 0, currency: "", due_days: 0 }))).toThrow(/in order 1, 2, 3…; got 3 after 1/)
    // Drafts are written at the latest version: make() types and validates the latest shape.
    expect(Result.isSuccess(Issued.validate({ invoice_id: "i", amount_cents: 1, currency: "EUR", due_days: 10 }))).toBe(true)
    expect(Result.isFailure(Issued.validate({ invoice_id: "i", amount_cents: 1 }))).toBe(true)
  })

  it("upcast brings every older version to the latest, and refuses a newer one", () => {
    expect(Issued.upcast(1, { invoice_id: "i", amount_cents: 5 })).toEqual(Result.succeed({ invoice_id: "i", amount_cents: 5, currency: "USD", due_days: 30 }))
    expect(Issued.upcast(2, { invoice_id: "i", amount_cents: 5, currency: "EUR" })).toEqual(Result.succeed({ invoice_id: "i", amount_cents: 5, currency: "EUR", due_days: 30 }))
    const latest = { invoice_id: "i", amount_cents: 5, currency: "EUR", due_days: 7 }
    expect(Result.getOrThrow(Issued.upcast(3, latest))).toBe(latest)
    const newer = Issued.upcast(4, latest)
    expect(Result.isFailure(newer) && newer.failure).toEqual({ _tag: "UnsupportedVersion", message: "fact type invoice_issued schema_version 4 is not supported by this code (known: 1..3)" })
  })

  it("an upcaster that produces invalid data is refused, naming the field", () => {
    const Broken = FactDefinition.make("broken", IssuedV1).version(2, IssuedV2, (v1) => v1 as never)
    const result = Broken.upcast(1, { invoice_id: "i", amount_cents: 5 })
    expect(Result.isFailure(result) && result.failure._tag).toBe("UpcastFailed")
    expect(Result.isFailure(result) && result.failure.message).toMatch(/upcast to version 2 is invalid: .*data\.currency/)
  })
})

const Issue = MessageDefinition.command("invoice.issue").version(1, IssuedV3)
const issue = Handler.decider(Issue, {
  name: "issue-invoice",
  emits: [Issued],
  initialState: [] as Array<string>,
  evolve: (seen, f) => [...seen, `${f.data.currency}/${f.data.due_days}`],
  decide: (m, seen) => (seen.length > 0 ? Effect.fail(new PermanentError({ message: `already issued as ${seen.join(", ")}` })) : Effect.succeed([Issued.make(m.payload)]))
})
const Seen = FactDefinition.make("invoice_seen", Schema.Struct({ invoice_id: Schema.String, currency: Schema.String, due_days: Schema.Int }))
const see = Processor.make(Issued, {
  name: "see-invoice",
  emits: [Seen],
  process: ({ data }) => Effect.succeed([Seen.make({ invoice_id: data.invoice_id, currency: data.currency, due_days: data.due_days })])
})
const invoices = sqliteTable("invoices", { tenant_id: text("tenant_id").notNull(), invoice_id: text("invoice_id").notNull(), currency: text("currency"), due_days: integer("due_days"), ...Projection.sequenceColumns(["invoice_issued"]) }, (t) => [
  primaryKey({ columns: [t.tenant_id, t.invoice_id] })
])
const invoicesProjection = Projection.rows({
  name: "invoices",
  table: invoices,
  key: ["invoice_id"],
  queryable: ["invoice_id"],
  on: [Projection.on(Issued, ({ invoice_id, currency, due_days }) => ({ invoice_id, currency, due_days }))]
})

describe("stored older versions, as product code sees them", () => {
  const v1 = fact(Issued, { invoice_id: "inv-1", amount_cents: 100 }, { version: 1, stream: "inv-1" })

  it("the builder stores a fact at an older version, its data checked against that version", () => {
    expect(v1.schema_version).toBe(1)
    // @ts-expect-error — typed by the version given: version 1 requires `amount_cents` (and the builder checks it too)
    expect(() => fact(Issued, { invoice_id: "inv-1" }, { version: 1 })).toThrow(/version 1: .*amount_cents/)
  })

  it("Registry.latest upcasts (no copy for the latest) and refuses a version newer than the code", () => {
    const registry = Registry.make([Module.make("invoices", { handlers: [issue], processors: [see] })])
    expect(Result.getOrThrow(registry.latest(v1))).toMatchObject({ schema_version: 3, data: { invoice_id: "inv-1", amount_cents: 100, currency: "USD", due_days: 30 } })
    const current = fact(Issued, { invoice_id: "inv-2", amount_cents: 1, currency: "EUR", due_days: 5 })
    expect(Result.getOrThrow(registry.latest(current))).toBe(current)
    const newer = registry.latest({ ...current, schema_version: 4 })
    expect(Result.isFailure(newer) && newer.failure).toMatchObject({ reason: "unsupported_version", message: expect.stringMatching(/\(invoice_issued\) has schema_version 4, which this code does not know.*known: 1\.\.3.*replay this dead letter/) })
  })

  it("a decider folds a v1 fact as v3, and writes v3", async () => {
    const { facts } = await DeciderSpec.for(issue).when(message(Issue, { invoice_id: "inv-9", amount_cents: 1, currency: "EUR", due_days: 3 }, { subject: "inv-9" })).result()
    expect(facts.map((f) => f.schema_version)).toEqual([3])
    // Given a stored v1 fact, the decider folds it upcast to v3; given a newer one, the message fails permanently.
    const again = message(Issue, { invoice_id: "inv-1", amount_cents: 1, currency: "EUR", due_days: 3 }, { subject: "inv-1" })
    await DeciderSpec.for(issue).given([v1]).when(again).thenFails("already issued as USD/30")
    await DeciderSpec.for(issue).given([{ ...v1, schema_version: 4 }]).when(again).thenFails(/invoice_issued\) has schema_version 4, which this code does not know/, { permanent: true })
  })

  it("a processor and a projection see a v1 fact as v3; a newer one fails permanently", async () => {
    await ProcessorSpec.for(see).when(v1).then([Seen.make({ invoice_id: "inv-1", currency: "USD", due_days: 30 })])
    await ProcessorSpec.for(see).when({ ...v1, schema_version: 7 }).thenFails(/schema_version 7, which this code does not know/, { permanent: true })
    await ProjectionSpec.for(invoicesProjection).given([v1]).then([{ invoice_id: "inv-1", currency: "USD", due_days: 30 }])
    await ProjectionSpec.for(invoicesProjection).given([{ ...v1, schema_version: 7 }]).thenFails(/invoice_issued\) has schema_version 7/)
  })
})
