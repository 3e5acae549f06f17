import { Context, Effect, Layer, Result, Schema } from "effect"
import { integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core"
import { describe, expect, it } from "vitest"
import * as FactDefinition from "../definitions/FactDefinition.js"
import * as Handler from "../definitions/Handler.js"
import { PermanentError, TransientError } from "../failures/Failure.js"
import * as MessageDefinition from "../definitions/MessageDefinition.js"
import * as Module from "../definitions/Module.js"
import * as Processor from "../definitions/Processor.js"
import * as Projection from "../definitions/Projection.js"
import * as Timer from "../definitions/Timer.js"
import { fact, message } from "./Builders.js"
import { teamLocation } from "./DefectLocation.js"
import { DeciderSpec, HandlerSpec, ProcessorSpec, ProjectionSpec, SpecError } from "./Specs.js"

const Deposit = MessageDefinition.command("account.deposit").version(1, Schema.Struct({ cents: Schema.Int }))
const Deposited = FactDefinition.make("deposited", Schema.Struct({ cents: Schema.Int, balance: Schema.Int }))
const deposit = Handler.decider(Deposit, {
  name: "deposit",
  emits: [Deposited],
  initialState: 0,
  evolve: (_balance, f) => f.data.balance,
  decide: (m, balance) => Effect.succeed([Deposited.make({ cents: m.payload.cents, balance: balance + m.payload.cents })])
})
const when = (cents: number) => message(Deposit, { cents }, { subject: "acct-1" })

const balances = sqliteTable("balances", { tenant_id: text("tenant_id").notNull(), account: text("account").notNull(), total: integer("total").notNull().default(0) }, (t) => [
  primaryKey({ columns: [t.tenant_id, t.account] })
])

describe("test kit specs", () => {
  it("a decider spec folds the given facts and compares what was decided", async () => {
    await DeciderSpec.for(deposit).given([Deposited.make({ cents: 5, balance: 5 })]).when(when(3)).then([Deposited.make({ cents: 3, balance: 8 })])
    const wrong = DeciderSpec.for(deposit).given([]).when(when(3)).then([Deposited.make({ cents: 3, balance: 99 })])
    await expect(wrong).rejects.toBeInstanceOf(SpecError)
    await expect(wrong).rejects.toMatchObject({ actual: [{ type: "deposited", data: { balance: 3, cents: 3 } }], expected: [{ type: "deposited", data: { balance: 99, cents: 3 } }] })
  })

  it("result() gives the outcome and the stored facts", async () => {
    const { outcome, facts } = await DeciderSpec.for(deposit).when(when(4)).result()
    expect(Result.isSuccess(outcome)).toBe(true)
    expect(facts.map((f) => [f.type, f.sequence, f.data])).toEqual([["deposited", 1, { cents: 4, balance: 4 }]])
  })

  it("thenFails passes on the expected failure, and fails when the handler succeeds", async () => {
    const Refuse = MessageDefinition.event("x.refused").version(1, Schema.Struct({}))
    const refuse = Handler.handler(Refuse, { name: "refuse", emits: [], handle: () => Effect.fail(new PermanentError({ message: "no way" })) })
    await HandlerSpec.for(refuse).when(message(Refuse, {}, { subject: "s" })).thenFails("no way", { permanent: true })
    await expect(DeciderSpec.for(deposit).when(when(1)).thenFails()).rejects.toThrow("expected decider deposit to fail, but it succeeded")
  })

  it("an invalid returned fact is a permanent failure naming the field", async () => {
    const sloppy = Handler.handler(Deposit, { name: "sloppy", emits: [Deposited], handle: () => Effect.succeed([{ type: "deposited", data: { cents: "1" } } as never]) })
    await HandlerSpec.for(sloppy).when(when(1)).thenFails(/sloppy returned an invalid deposited fact \(position 0\): data\.cents/, { permanent: true })
  })

  it("flags a handler that is not idempotent (a second delivery decides something else)", async () => {
    let n = 0
    const drifting = Handler.handler(Deposit, { name: "drifting", emits: [Deposited], handle: (m) => Effect.sync(() => [Deposited.make({ cents: m.payload.cents, balance: ++n })]) })
    await expect(HandlerSpec.for(drifting).when(when(1)).then([Deposited.make({ cents: 1, balance: 1 })])).rejects.toThrow(/drifting is not idempotent/)
  })

  it("a projection spec applies in order, twice and in reverse; a throwing mapping fails it", async () => {
    const totals = Projection.additive({
      name: "balances",
      table: balances,
      key: ["account"],
      queryable: [],
      on: [Projection.on(Deposited, (d, f) => ({ key: { account: f.stream }, add: { total: d.cents } }))]
    })
    const facts = [fact(Deposited, { cents: 5, balance: 5 }, { stream: "a" }), fact(Deposited, { cents: 7, balance: 12 }, { stream: "a" }), fact(Deposited, { cents: 1, balance: 1 }, { stream: "b" })]
    await ProjectionSpec.for(totals).given(facts).then([{ account: "a", total: 12 }, { account: "b", total: 1 }])
    await expect(ProjectionSpec.for(totals).given(facts).then([{ account: "a", total: 5 }, { account: "b", total: 1 }])).rejects.toThrow(/gave other rows than expected \(in order, in one batch\)/)
    const broken = Projection.additive({ ...totals, on: [Projection.on(Deposited, () => { throw new TypeError("boom") })] })
    await ProjectionSpec.for(broken).given(facts).thenFails("boom")
    await expect(ProjectionSpec.for(broken).given(facts).then([])).rejects.toThrow(/projection balances failed/)
  })

  it("builders validate what they build, naming the field", () => {
    expect(() => message(Deposit, { cents: "1" } as never, { subject: "s" })).toThrow(/message\(account.deposit\): payload\.cents/)
    expect(() => fact(Deposited, { cents: 1 } as never)).toThrow(/fact\(deposited\): data\.balance/)
  })

  describe("timers, on a TestClock", () => {
    const Issued = FactDefinition.make("invoice_issued", Schema.Struct({ invoice_id: Schema.String }))
    const Overdue = FactDefinition.make("invoice_overdue", Schema.Struct({ invoice_id: Schema.String }))
    const markOverdue = Processor.make(Issued, {
      name: "mark-overdue",
      emits: [Overdue],
      process: ({ data }) => Effect.succeed([Timer.schedule({ name: "overdue", after: "30 days", fact: Overdue.make({ invoice_id: data.invoice_id }) })])
    })
    const issued = fact(Issued, { invoice_id: "inv-1" }, { stream: "inv-1" })

    it("the timer fires unless cancelled: given facts, a decision, and after(duration) in one spec each", async () => {
      const Paid = FactDefinition.make("invoice_paid", Schema.Struct({ invoice_id: Schema.String }))
      const Pay = MessageDefinition.command("invoice.pay").version(1, Schema.Struct({ invoice_id: Schema.String }))
      const pay = Handler.decider(Pay, {
        name: "pay-invoice",
        emits: [Paid],
        reads: [Issued],
        initialState: false,
        evolve: (_issued, f) => f.type === "invoice_issued",
        // Paying cancels the overdue timer; a payment of an unknown invoice leaves it (and pays nothing).
        decide: (m, issuedBefore) => Effect.succeed(issuedBefore ? [Paid.make(m.payload), Timer.cancel("overdue")] : [])
      })
      const overdue = Timer.schedule({ name: "overdue", after: "30 days", fact: Overdue.make({ invoice_id: "inv-1" }) })
      const paying = message(Pay, { invoice_id: "inv-1" }, { subject: "inv-1" })
      // Cancelled: paid within the 30 days, nothing fires.
      await DeciderSpec.for(pay).given([Issued.make({ invoice_id: "inv-1" }), overdue]).when(paying).after("30 days").then([])
      // Not cancelled (no issued invoice in the stream, so no payment): the given timer fires.
      await DeciderSpec.for(pay).given([overdue]).when(paying).after("30 days").then([Overdue.make({ invoice_id: "inv-1" })])
      await expect(DeciderSpec.for(pay).given([overdue]).when(paying).after("30 days").then([])).rejects.toThrow(
        /the timers after decider pay-invoice and "30 days" appended other facts than expected/
      )
      // Without after, the spec is the decision as before.
      await DeciderSpec.for(pay).given([Issued.make({ invoice_id: "inv-1" }), overdue]).when(paying).then([Paid.make({ invoice_id: "inv-1" }), Timer.cancel("overdue")])
    })

    it("a processor spec takes given facts and timers: the processor's stream state, and timers after(duration) fires", async () => {
      const Reminded = FactDefinition.make("invoice_reminded", Schema.Struct({ invoice_id: Schema.String, reminders: Schema.Int }))
      const remind = Processor.make(Overdue, {
        name: "remind",
        emits: [Reminded],
        reads: [Reminded],
        initialState: 0,
        evolve: (n, f) => Math.max(n, f.data.reminders),
        process: (f, reminders) => Effect.succeed([Reminded.make({ invoice_id: f.data.invoice_id, reminders: reminders + 1 })])
      })
      const overdueFact = fact(Overdue, { invoice_id: "inv-1" }, { stream: "inv-1" })
      await ProcessorSpec.for(remind).given([Reminded.make({ invoice_id: "inv-1", reminders: 2 })]).when(overdueFact).then([Reminded.make({ invoice_id: "inv-1", reminders: 3 })])
      await ProcessorSpec.for(remind).when(overdueFact).then([Reminded.make({ invoice_id: "inv-1", reminders: 1 })])
      // A given timer fires after the duration, counted from the given facts' time (2026-01-01).
      const later = Timer.schedule({ name: "later", after: "1 day", fact: Reminded.make({ invoice_id: "inv-1", reminders: 9 }) })
      await ProcessorSpec.for(remind).given([later]).when(overdueFact).after("2 days").then([Reminded.make({ invoice_id: "inv-1", reminders: 9 })])
    })

    it("a processor's timer is recorded in the stream, 30 days after its fact", async () => {
      await ProcessorSpec.for(markOverdue).when(issued).then([Timer.schedule({ name: "overdue", after: "30 days", fact: Overdue.make({ invoice_id: "inv-1" }) })])
      const { facts } = await ProcessorSpec.for(markOverdue).when(issued).result()
      expect(facts.map((f) => [f.type, f.data])).toEqual([
        ["timer_scheduled", { name: "overdue", fire_at: new Date(Date.parse(issued.created_at) + 30 * 86_400_000).toISOString(), fact: { type: "invoice_overdue", data: { invoice_id: "inv-1" } } }]
      ])
    })

    it("after(duration) moves the clock on and shows what the timers appended, once", async () => {
      await ProcessorSpec.for(markOverdue).when(issued).after("29 days").then([])
      await ProcessorSpec.for(markOverdue).when(issued).after("30 days").then([Overdue.make({ invoice_id: "inv-1" })])
      const { facts } = await ProcessorSpec.for(markOverdue).when(issued).after("31 days").result()
      expect(facts.map((f) => [f.type, f.caused_by, f.created_at])).toEqual([
        ["invoice_overdue", "timer:overdue", new Date(Date.parse(issued.created_at) + 31 * 86_400_000).toISOString()]
      ])
      await expect(ProcessorSpec.for(markOverdue).when(issued).after("30 days").then([])).rejects.toThrow(/mark-overdue's timers after "30 days" appended other facts than expected/)
    })

    it("a timer's fact fires at the version it was drafted at, and reads in the latest shape", async () => {
      const Due = FactDefinition.make("invoice_due", Schema.Struct({ invoice_id: Schema.String }))
        .version(2, Schema.Struct({ invoice_id: Schema.String, currency: Schema.String }), (v1) => ({ ...v1, currency: "USD" }))
      const markDue = Processor.make(Issued, {
        name: "mark-due",
        emits: [Due],
        process: ({ data }) => Effect.succeed([Timer.schedule({ name: "due", after: "1 day", fact: Due.make({ invoice_id: data.invoice_id, currency: "EUR" }) })])
      })
      const { facts } = await ProcessorSpec.for(markDue).when(issued).after("1 day").result()
      // Stored as version 1, the EUR draft would be upcast to USD on every read.
      expect(facts.map((f) => [f.type, f.schema_version, f.data])).toEqual([["invoice_due", 2, { invoice_id: "inv-1", currency: "EUR" }]])
    })

    it("a handler's timer counts from its message's time, or is set at a given time", async () => {
      const Issue = MessageDefinition.command("invoice.issue").version(1, Schema.Struct({ invoice_id: Schema.String }))
      const issue = Handler.handler(Issue, {
        name: "issue-invoice",
        emits: [Issued, Overdue],
        handle: (m) => Effect.succeed([
          Issued.make(m.payload),
          Timer.schedule({ name: "overdue", after: { days: 30 }, fact: Overdue.make(m.payload) }),
          Timer.schedule({ name: "reminder", at: "2026-03-01T00:00:00Z", fact: Overdue.make(m.payload) })
        ])
      })
      const sent = message(Issue, { invoice_id: "inv-2" }, { subject: "inv-2", createdAt: "2026-01-10T00:00:00.000Z" })
      const { facts } = await HandlerSpec.for(issue).when(sent).result()
      expect(facts.map((f) => [f.type, (f.data as { fire_at?: string }).fire_at])).toEqual([
        ["invoice_issued", undefined],
        ["timer_scheduled", "2026-02-09T00:00:00.000Z"],
        ["timer_scheduled", "2026-03-01T00:00:00.000Z"]
      ])
      await HandlerSpec.for(issue).when(sent).then([
        Issued.make({ invoice_id: "inv-2" }),
        Timer.schedule({ name: "overdue", after: "30 days", fact: Overdue.make({ invoice_id: "inv-2" }) }),
        Timer.schedule({ name: "reminder", at: new Date("2026-03-01T00:00:00Z"), fact: Overdue.make({ invoice_id: "inv-2" }) })
      ])
    })

    it("a cancel drops the pending timer; a timer's fact must be declared", async () => {
      const Paid = FactDefinition.make("invoice_paid", Schema.Struct({ invoice_id: Schema.String }))
      const issueAndPay = Processor.make(Issued, {
        name: "issue-and-pay",
        emits: [Overdue, Paid],
        process: ({ data }) => Effect.succeed([
          Timer.schedule({ name: "overdue", after: "30 days", fact: Overdue.make(data) }),
          Paid.make(data),
          Timer.cancel("overdue")
        ])
      })
      await ProcessorSpec.for(issueAndPay).when(issued).after("60 days").then([])
      const sloppy = Processor.make(Issued, {
        name: "sloppy-timer",
        emits: [],
        process: ({ data }) => Effect.succeed([Timer.schedule({ name: "overdue", after: "1 day", fact: Overdue.make(data) }) as never])
      })
      await ProcessorSpec.for(sloppy).when(issued).thenFails(/sloppy-timer returned a fact of type "invoice_overdue"/, { permanent: true })
      expect(() => Timer.schedule({ name: "overdue", after: "soon" as never, fact: Overdue.make({ invoice_id: "x" }) })).toThrow(/not a finite, non-negative duration/)
      expect(() => Timer.cancel("Over Due")).toThrow(/timer name "Over Due" is not valid/)
    })
  })

  describe("handlers with services", () => {
    /** A service product code requires: its module's layer provides it, a spec a test one. */
    class Rates extends Context.Service<Rates, { readonly bonusPercent: (cents: number) => Effect.Effect<number> }>()("spec/Rates") {}
    const RatesLive = Layer.succeed(Rates, Rates.of({ bonusPercent: () => Effect.succeed(0) }))
    const RatesTest = Layer.succeed(Rates, Rates.of({ bonusPercent: (cents) => Effect.succeed(cents >= 100 ? 10 : 0) }))
    const Bonus = FactDefinition.make("bonus", Schema.Struct({ cents: Schema.Int }))
    const bonus = Processor.make(Deposited, {
      name: "bonus",
      emits: [Bonus],
      process: (f) =>
        Effect.gen(function*() {
          const percent = yield* (yield* Rates).bonusPercent(f.data.cents)
          return percent === 0 ? [] : [Bonus.make({ cents: (f.data.cents * percent) / 100 })]
        })
    })

    it("a processor requiring a service is specced with a test layer in place of its module's", async () => {
      await ProcessorSpec.for(bonus, { layer: RatesTest }).when(fact(Deposited, { cents: 200, balance: 200 })).then([Bonus.make({ cents: 20 })])
      await ProcessorSpec.for(bonus, { layer: RatesLive }).when(fact(Deposited, { cents: 200, balance: 200 })).then([])
      // @ts-expect-error — `bonus` requires Rates: a spec without a layer does not compile
      ProcessorSpec.for(bonus)
      // @ts-expect-error — a layer that does not provide Rates does not compile either
      ProcessorSpec.for(bonus, { layer: Layer.empty })
    })

    it("a module's layer must provide what its code requires: a missing service is a compile error", () => {
      expect(Module.make("rated", { handlers: [deposit], processors: [bonus], layer: RatesLive }).layer).toBe(RatesLive)
      // @ts-expect-error — no layer, and `bonus` requires Rates
      Module.make("unrated", { processors: [bonus] })
      // @ts-expect-error — this layer provides nothing
      Module.make("unrated", { processors: [bonus], layer: Layer.empty })
    })

    it("a module whose layer fails to build fails its code permanently, naming the module", async () => {
      const broken = Layer.effect(Rates, Effect.fail(new Error("RATES_URL is not set")))
      await ProcessorSpec.for(bonus, { layer: broken }).when(fact(Deposited, { cents: 200, balance: 200 })).thenFails(/module spec: its layer failed to build \(Error: RATES_URL is not set\)/, { permanent: true })
    })

    it("a spec failed by a defect names where it happened in the team's code (file:line from the stack)", async () => {
      const Oops = MessageDefinition.event("x.crashed").version(1, Schema.Struct({}))
      let thrownAt = ""
      const crash = (): never => {
        const error = new TypeError("cannot read properties of undefined (reading 'plan')")
        thrownAt = /src\/testing\/Specs\.test\.ts:\d+/.exec(error.stack ?? "")?.[0] ?? "?"
        throw error
      }
      const oops = Handler.handler(Oops, { name: "oops", emits: [], handle: () => crash() })
      const spec = HandlerSpec.for(oops).when(message(Oops, {}, { subject: "s" }))
      // The throw is in this file, in `crash`: the first frame outside the framework.
      await expect(spec.then([])).rejects.toThrow(
        /expected handler oops to append facts, but it failed \(defect\): TypeError: cannot read properties of undefined \(reading 'plan'\) \(at src\/testing\/Specs\.test\.ts:\d+:\d+\)/
      )
      const { outcome } = await spec.result()
      expect(Result.isFailure(outcome) && teamLocation(outcome.failure.defectStack)).toMatch(new RegExp(`^${thrownAt}:\\d+$`))
      // Frames of dependencies and of the framework's own sources are skipped; none left, nothing is added.
      expect(teamLocation("Error: x\n    at run (/app/node_modules/effect/dist/Effect.js:1:2)\n    at node:internal/process:3:4", "/app")).toBeUndefined()
      expect(teamLocation("Error: x\n    at f (/app/node_modules/@factline/core/dist/x.js:1:2)\n    at decide (/app/src/subscriptions/Subscriptions.ts:42:11)", "/app")).toBe("src/subscriptions/Subscriptions.ts:42:11")
    })

    it("a handler that throws fails with a defect: retried on the short budget, its stack kept", async () => {
      const Oops = MessageDefinition.event("x.crashed").version(1, Schema.Struct({}))
      const oops = Handler.handler(Oops, { name: "oops", emits: [], handle: () => { throw new TypeError("cannot read properties of undefined (reading 'cents')") } })
      const { outcome } = await HandlerSpec.for(oops).when(message(Oops, {}, { subject: "s" })).result()
      if (Result.isSuccess(outcome)) throw new Error("expected a failure")
      expect(outcome.failure).toMatchObject({ reason: "defect", retryable: true, budget: { maxAttempts: 3 }, message: "TypeError: cannot read properties of undefined (reading 'cents')" })
      expect(outcome.failure.defectStack).toMatch(/^TypeError: cannot read properties of undefined[\s\S]*Specs\.test\.ts/)
      // An Effect.die is a defect too; a typed TransientError is not (it keeps the queue's own budget, no stack).
      const dies = Handler.handler(Oops, { name: "dies", emits: [], handle: () => Effect.die(new RangeError("no rate for EUR")) })
      await HandlerSpec.for(dies).when(message(Oops, {}, { subject: "s" })).thenFails("RangeError: no rate for EUR", { permanent: false })
      const died = (await HandlerSpec.for(dies).when(message(Oops, {}, { subject: "s" })).result()).outcome
      expect(Result.isFailure(died) && [died.failure.reason, died.failure.defectStack?.split("\n")[0]]).toEqual(["defect", "RangeError: no rate for EUR"])
      const transient = Handler.handler(Oops, { name: "transient", emits: [], handle: () => Effect.fail(new TransientError({ message: "busy" })) })
      const retried = (await HandlerSpec.for(transient).when(message(Oops, {}, { subject: "s" })).result()).outcome
      expect(Result.isFailure(retried) && [retried.failure.reason, retried.failure.budget, retried.failure.defectStack]).toEqual(["retries_exhausted", undefined, undefined])
    })
  })
})
