/**
 * Test-only message types, registered beside the example's calls module in the
 * test Worker: a decider whose decision depends on its stream, a handler that
 * fails transiently a given number of times, one that always fails, and one
 * that fails permanently; a projection whose mapping throws for marked
 * buyers (it writes nothing otherwise, so it changes no other test's rows);
 * an invoice whose fact gained a version 2 (`currency`), with a decider,
 * a processor and a projection reading it (fact-versions.workers.test.ts);
 * and a contact note carrying personal data (personal-data.workers.test.ts).
 */
import { Effect, Schema } from "effect"
import { FactDefinition, Handler, MessageDefinition, Module, PermanentError, Personal, Processor, Projection, Timer, TransientError, Webhook } from "@factline/core"
import { integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core"
import { Charge } from "../src/calls/Calls.js"

export const Bump = MessageDefinition.command("test.counter.bump").version(1, Schema.Struct({ by: Schema.String }))
export const Bumped = FactDefinition.make("bumped", Schema.Struct({ n: Schema.Int, by: Schema.String }))

export const bumpCounter = Handler.decider(Bump, {
  name: "bump-counter",
  emits: [Bumped],
  initialState: 0,
  evolve: (_n: number, fact) => fact.data.n,
  decide: (m, n) => Effect.succeed([Bumped.make({ n: n + 1, by: m.payload.by })])
})

/** Failures so far, per idempotency key: the isolate outlives a test's deliveries. */
export const flakyFailures = new Map<string, number>()

export const Flaky = MessageDefinition.event("test.flaky.happened").version(1, Schema.Struct({ fail_times: Schema.Int }))
export const FlakyDone = FactDefinition.make("flaky_done", Schema.Struct({ after_failures: Schema.Int }))
export const flaky = Handler.handler(Flaky, {
  name: "flaky",
  emits: [FlakyDone],
  handle: (m) => {
    const seen = flakyFailures.get(m.idempotencyKey) ?? 0
    if (seen < m.payload.fail_times) {
      flakyFailures.set(m.idempotencyKey, seen + 1)
      return Effect.fail(new TransientError({ message: `downstream timeout #${seen + 1}` }))
    }
    return Effect.succeed([FlakyDone.make({ after_failures: seen })])
  }
})

export const Broken = MessageDefinition.event("test.broken.happened").version(1, Schema.Struct({}))
export const broken = Handler.handler(Broken, {
  name: "broken",
  emits: [],
  handle: () => Effect.fail(new TransientError({ message: "dependency is down" }))
})

export const Refused = MessageDefinition.event("test.refused.happened").version(1, Schema.Struct({}))
export const refused = Handler.handler(Refused, {
  name: "refused",
  emits: [],
  handle: () => Effect.fail(new PermanentError({ message: "this can never succeed" }))
})


export const Blob = MessageDefinition.event("test.blob.stored").version(1, Schema.Struct({ blob: Schema.String }))
export const BlobStored = FactDefinition.make("blob_stored", Schema.Struct({ blob: Schema.String }))
export const blobStored = Handler.handler(Blob, {
  name: "blob-stored",
  emits: [BlobStored],
  handle: (m) => Effect.succeed([BlobStored.make({ blob: m.payload.blob })])
})

export const Thrower = MessageDefinition.event("test.thrower.happened").version(1, Schema.Struct({}))
/** Product code that throws instead of failing with a typed error. */
export const thrower = Handler.handler(Thrower, {
  name: "thrower",
  emits: [],
  handle: () => {
    throw new TypeError("cannot read properties of undefined")
  }
})

/** A fact whose processor refuses it permanently when `refuse` is set: for per-fact dead-lettering. */
export const Probe = FactDefinition.make("probe", Schema.Struct({ refuse: Schema.Boolean }))
export const Probed = FactDefinition.make("probed", Schema.Struct({ of: Schema.String }))
export const probeProcessor = Processor.make(Probe, {
  name: "probe",
  emits: [Probed],
  process: (fact) =>
    fact.data.refuse ? Effect.fail(new PermanentError({ message: `probe ${fact.fact_id} refused` })) : Effect.succeed([Probed.make({ of: fact.fact_id })])
})
/** The emitter of `probe` facts (tests mostly feed them to fact-processing directly). */
export const ProbeRequested = MessageDefinition.event("test.probe.requested").version(1, Schema.Struct({ refuse: Schema.Boolean }))
export const requestProbe = Handler.handler(ProbeRequested, {
  name: "request-probe",
  emits: [Probe],
  handle: (m) => Effect.succeed([Probe.make({ refuse: m.payload.refuse })])
})

/** A handler with a bug: it returns a `bumped` fact whose data does not match the schema (validated before the ledger). */
export const Sloppy = MessageDefinition.event("test.sloppy.happened").version(1, Schema.Struct({}))
export const SloppyDone = FactDefinition.make("sloppy_done", Schema.Struct({ count: Schema.Int }))
export const sloppy = Handler.handler(Sloppy, {
  name: "sloppy",
  emits: [SloppyDone],
  handle: () => Effect.succeed([{ type: "sloppy_done", data: { count: "three" } } as never])
})

/** Buyers whose charges the `fragile` projection's mapping throws for, until a test "fixes" it by removing them. */
export const fragileBuyers = new Set<string>()

/** The `fragile` projection's table: declared, never created in D1 — the projection never writes to it. */
const fragileTable = sqliteTable(
  "test_fragile",
  { tenant_id: text("tenant_id").notNull(), buyer_id: text("buyer_id").notNull(), charges: integer("charges").notNull().default(0) },
  (t) => [primaryKey({ columns: [t.tenant_id, t.buyer_id] })]
)

/**
 * A projection with a bug: its mapping of `charge` throws for the buyers in `fragileBuyers`, and maps nothing
 * otherwise, so it never writes (its table exists only in Drizzle; never rebuild it).
 */
export const fragileProjection = Projection.additive({
  name: "fragile",
  table: fragileTable,
  key: ["buyer_id"],
  queryable: [],
  on: [
    Projection.on(Charge, (data) => {
      if (fragileBuyers.has(data.buyer_id)) throw new TypeError("cannot read properties of undefined (reading 'plan')")
      return undefined
    })
  ]
})

/** Keys the `fixable` handler refuses (permanently) until a test "deploys the fix" by removing them. */
export const brokenKeys = new Set<string>()
export const Fixable = MessageDefinition.event("test.fixable.happened").version(1, Schema.Struct({ n: Schema.Int }))
export const FixableDone = FactDefinition.make("fixable_done", Schema.Struct({ n: Schema.Int }))
export const fixable = Handler.handler(Fixable, {
  name: "fixable",
  emits: [FixableDone],
  handle: (m) =>
    brokenKeys.has(m.idempotencyKey)
      ? Effect.fail(new PermanentError({ message: `bug #42: cannot handle ${m.idempotencyKey}` }))
      : Effect.succeed([FixableDone.make({ n: m.payload.n })])
})

/**
 * Timers: `test.reminder.requested` records `reminder_requested`, whose processor schedules timer `reminder`
 * to append `reminder_due` `after_s` seconds later; `test.reminder.cancelled` cancels it; a processor of
 * `reminder_due` acknowledges it (the fired fact travels downstream like any other).
 */
export const ReminderRequest = MessageDefinition.event("test.reminder.requested").version(1, Schema.Struct({ after_s: Schema.Int, note: Schema.String }))
export const ReminderCancel = MessageDefinition.event("test.reminder.cancelled").version(1, Schema.Struct({}))
export const ReminderRequested = FactDefinition.make("reminder_requested", Schema.Struct({ after_s: Schema.Int, note: Schema.String }))
export const ReminderDue = FactDefinition.make("reminder_due", Schema.Struct({ note: Schema.String }))
export const ReminderAcknowledged = FactDefinition.make("reminder_acknowledged", Schema.Struct({ note: Schema.String }))
export const requestReminder = Handler.handler(ReminderRequest, {
  name: "request-reminder",
  emits: [ReminderRequested],
  handle: (m) => Effect.succeed([ReminderRequested.make(m.payload)])
})
export const cancelReminder = Handler.handler(ReminderCancel, { name: "cancel-reminder", emits: [], handle: () => Effect.succeed([Timer.cancel("reminder")]) })
export const remind = Processor.make(ReminderRequested, {
  name: "remind",
  emits: [ReminderDue],
  process: (fact) =>
    Effect.succeed([Timer.schedule({ name: "reminder", after: { seconds: fact.data.after_s }, fact: ReminderDue.make({ note: fact.data.note }) })])
})
export const acknowledgeReminder = Processor.make(ReminderDue, {
  name: "acknowledge-reminder",
  emits: [ReminderAcknowledged],
  process: (fact) => Effect.succeed([ReminderAcknowledged.make({ note: fact.data.note })])
})

/** `test_invoice_issued` version 1 (stored by the code before), and version 2, which adds `currency`. */
export const InvoiceIssuedV1 = Schema.Struct({ invoice_id: Schema.String, amount_cents: Schema.Int })
export const InvoiceIssuedV2 = Schema.Struct({ ...InvoiceIssuedV1.fields, currency: Schema.String })
export const InvoiceIssued = FactDefinition.make("test_invoice_issued", InvoiceIssuedV1)
  .version(2, InvoiceIssuedV2, (v1) => ({ ...v1, currency: "USD" }))
/** A second issue of one invoice, naming the currency the decider folded from the first. */
export const InvoiceReissueRefused = FactDefinition.make("test_invoice_reissue_refused", Schema.Struct({ invoice_id: Schema.String, issued_in: Schema.String }))
export const IssueInvoice = MessageDefinition.command("test.invoice.issue").version(1, InvoiceIssuedV2)
export const issueInvoice = Handler.decider(IssueInvoice, {
  name: "issue-test-invoice",
  emits: [InvoiceIssued, InvoiceReissueRefused],
  initialState: undefined as string | undefined,
  evolve: (issuedIn, fact) => (fact.type === "test_invoice_issued" ? fact.data.currency : issuedIn),
  decide: (m, issuedIn) =>
    Effect.succeed(issuedIn === undefined
      ? [InvoiceIssued.make(m.payload)]
      : [InvoiceReissueRefused.make({ invoice_id: m.payload.invoice_id, issued_in: issuedIn })])
})
export const InvoiceBilled = FactDefinition.make("test_invoice_billed", Schema.Struct({ invoice_id: Schema.String, billed: Schema.String }))
export const billInvoice = Processor.make(InvoiceIssued, {
  name: "bill-test-invoice",
  emits: [InvoiceBilled],
  process: ({ data }) => Effect.succeed([InvoiceBilled.make({ invoice_id: data.invoice_id, billed: `${data.amount_cents} ${data.currency}` })])
})
/** The `test_invoices` projection's table: not migrated (test-only); fact-versions.workers.test.ts creates it. */
export const testInvoicesTable = sqliteTable(
  "test_invoices",
  { tenant_id: text("tenant_id").notNull(), invoice_id: text("invoice_id").notNull(), currency: text("currency"), ...Projection.sequenceColumns(["test_invoice_issued"]) },
  (t) => [primaryKey({ columns: [t.tenant_id, t.invoice_id] })]
)
export const testInvoicesProjection = Projection.rows({
  name: "test_invoices",
  table: testInvoicesTable,
  key: ["invoice_id"],
  queryable: ["invoice_id"],
  on: [Projection.on(InvoiceIssued, ({ invoice_id, currency }) => ({ invoice_id, currency }))]
})

/** Tallies per group, for catch-up.workers.test.ts: facts appended straight to the ledger never reach a projection. */
export const Tally = MessageDefinition.event("test.tally.recorded").version(1, Schema.Struct({ group: Schema.String, amount: Schema.Int }))
export const Tallied = FactDefinition.make("tallied", Schema.Struct({ group: Schema.String, amount: Schema.Int }))
export const tally = Handler.handler(Tally, { name: "tally", emits: [Tallied], handle: (m) => Effect.succeed([Tallied.make(m.payload)]) })

/** Notes, for projection-isolation.workers.test.ts: mapped by `tallies` (migrated there) and by `unmigrated` (never). */
export const Note = MessageDefinition.event("test.note.recorded").version(1, Schema.Struct({ group: Schema.String }))
export const Noted = FactDefinition.make("noted", Schema.Struct({ group: Schema.String }))
export const note = Handler.handler(Note, { name: "note", emits: [Noted], handle: (m) => Effect.succeed([Noted.make(m.payload)]) })

/**
 * The `tallies` projection's table: created only by the tests that use it (the example's migrations do not
 * hold it), so elsewhere `tallies` is "not migrated" — only those tests emit its facts.
 */
export const talliesTable = sqliteTable(
  "test_tallies",
  {
    tenant_id: text("tenant_id").notNull(),
    group_id: text("group_id").notNull(),
    total: integer("total").notNull().default(0),
    facts: integer("facts").notNull().default(0),
    notes: integer("notes").notNull().default(0)
  },
  (t) => [primaryKey({ columns: [t.tenant_id, t.group_id] })]
)

/** Its migration, as the tests that use `tallies` apply it to each read database. */
export const talliesMigration =
  "CREATE TABLE IF NOT EXISTS test_tallies (tenant_id TEXT NOT NULL, group_id TEXT NOT NULL, total INTEGER NOT NULL DEFAULT 0, facts INTEGER NOT NULL DEFAULT 0, notes INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (tenant_id, group_id))"

/** Sums and counts per group: additive, so a fact applied twice would show. */
export const talliesProjection = Projection.additive({
  name: "tallies",
  table: talliesTable,
  key: ["group_id"],
  queryable: ["group_id"],
  on: [
    Projection.on(Tallied, (data) => ({ key: { group_id: data.group }, add: { total: data.amount, facts: 1 } })),
    Projection.on(Noted, (data) => ({ key: { group_id: data.group }, add: { notes: 1 } }))
  ]
})

/** A projection whose table no migration creates (never created in D1): its writes fail "no such table". */
const unmigratedTable = sqliteTable(
  "test_unmigrated",
  { tenant_id: text("tenant_id").notNull(), group_id: text("group_id").notNull(), notes: integer("notes").notNull().default(0) },
  (t) => [primaryKey({ columns: [t.tenant_id, t.group_id] })]
)
export const unmigratedProjection = Projection.additive({
  name: "unmigrated",
  table: unmigratedTable,
  key: ["group_id"],
  queryable: ["group_id"],
  on: [Projection.on(Noted, (data) => ({ key: { group_id: data.group }, add: { notes: 1 } }))]
})

/**
 * Personal data through every consumer, for personal-data.workers.test.ts: `test.contact.noted` carries a buyer's
 * phone number (personal data, subject `buyer_id`). Its handler refuses the keys in `refusedContacts` permanently
 * with an error naming the number (product code whose error text holds personal data: a run and a dead letter),
 * and otherwise records `contact_noted`, which a processor reads and the `contact.noted` webhook publishes; the
 * `test.contact.check` decider folds a contact's stream. Each records what it saw in `contactsSeen`.
 */
/** `note`: free text, long enough in a test to have the payload offloaded to R2. */
const Contact = Schema.Struct({ buyer_id: Schema.String, caller_phone: Schema.String, note: Schema.optionalKey(Schema.String) })
const contactPhone = { subject: "buyer_id", fields: ["caller_phone"] } as const
export const ContactNote = MessageDefinition.event("test.contact.noted").version(1, Contact).personal(contactPhone)
export const ContactNoted = FactDefinition.make("contact_noted", Contact).personal(contactPhone)
export const ContactChecked = FactDefinition.make("contact_checked", Schema.Struct({ buyer_id: Schema.String, notes: Schema.Int, phone_erased: Schema.Boolean }))
export const ContactCheck = MessageDefinition.command("test.contact.check").version(1, Schema.Struct({ buyer_id: Schema.String }))
export const refusedContacts = new Set<string>()
export const contactsSeen: Array<{ readonly by: string; readonly buyer_id: string; readonly caller_phone: string }> = []
export const noteContact = Handler.handler(ContactNote, {
  name: "note-contact",
  emits: [ContactNoted],
  handle: (m) =>
    Effect.suspend(() => {
      contactsSeen.push({ by: "handler", buyer_id: m.payload.buyer_id, caller_phone: m.payload.caller_phone })
      return refusedContacts.has(m.idempotencyKey)
        ? Effect.fail(new PermanentError({ message: `cannot reach the caller at ${m.payload.caller_phone}` }))
        : Effect.succeed([ContactNoted.make(m.payload)])
    })
})
export const seeContact = Processor.make(ContactNoted, {
  name: "see-contact",
  emits: [],
  process: ({ data }) => Effect.sync(() => (contactsSeen.push({ by: "processor", buyer_id: data.buyer_id, caller_phone: data.caller_phone }), []))
})
export const checkContact = Handler.decider(ContactCheck, {
  name: "check-contact",
  emits: [ContactChecked],
  reads: [ContactNoted],
  initialState: { notes: 0, last: undefined as string | undefined },
  evolve: (state, fact) => (fact.type === "contact_noted" ? { notes: state.notes + 1, last: fact.data.caller_phone } : state),
  decide: (m, state) =>
    Effect.sync(() => {
      if (state.last !== undefined) contactsSeen.push({ by: "decider", buyer_id: m.payload.buyer_id, caller_phone: state.last })
      return [ContactChecked.make({ buyer_id: m.payload.buyer_id, notes: state.notes, phone_erased: state.last === Personal.erased })]
    })
})
export const contactNotedWebhook = Webhook.event(ContactNoted, { type: "contact.noted", description: "A buyer's contact was noted (test only)." })

/** A processor reading its stream (issue 40): a cancellation carries no price; `lose-mrr` folds the prices before it. */
export const PlanEvent = MessageDefinition.event("test.plan.happened").version(1, Schema.Struct({ price_cents: Schema.optional(Schema.Int) }))
export const PlanPriced = FactDefinition.make("plan_priced", Schema.Struct({ price_cents: Schema.Int }))
export const PlanCancelled = FactDefinition.make("plan_cancelled", Schema.Struct({}))
export const MrrLost = FactDefinition.make("mrr_lost", Schema.Struct({ delta_cents: Schema.Int }))
export const recordPlan = Handler.handler(PlanEvent, {
  name: "record-plan",
  emits: [PlanPriced, PlanCancelled],
  handle: (m) => Effect.succeed(m.payload.price_cents === undefined ? [PlanCancelled.make({})] : [PlanPriced.make({ price_cents: m.payload.price_cents })])
})
export const loseMrr = Processor.make(PlanCancelled, {
  name: "lose-mrr",
  emits: [MrrLost],
  reads: [PlanPriced],
  initialState: 0,
  evolve: (_price, fact) => fact.data.price_cents,
  process: (_fact, price) => Effect.succeed([MrrLost.make({ delta_cents: -price })])
})

export const testModule = Module.make("test", {
  handlers: [bumpCounter, flaky, broken, refused, blobStored, thrower, requestProbe, sloppy, fixable, requestReminder, cancelReminder, issueInvoice, tally, note, noteContact, checkContact, recordPlan],
  processors: [probeProcessor, remind, acknowledgeReminder, billInvoice, seeContact, loseMrr],
  projections: [fragileProjection, testInvoicesProjection, talliesProjection, unmigratedProjection],
  webhooks: [contactNotedWebhook]
})
