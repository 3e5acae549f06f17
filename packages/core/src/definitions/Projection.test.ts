import { integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core"
import { Schema } from "effect"
import type { Fact } from "@factline/schemas"
import { describe, expect, it } from "vitest"
import * as FactDefinition from "./FactDefinition.js"
import * as Projection from "./Projection.js"
import * as ProjectionQuery from "../projections/ProjectionQuery.js"

const Outcome = FactDefinition.make("outcome", Schema.Struct({ call_id: Schema.optional(Schema.String), buyer_id: Schema.optional(Schema.String) }))
const Qualification = FactDefinition.make("qualification", Schema.Struct({ call_id: Schema.String, qualified: Schema.Boolean }))
const Money = Schema.Struct({ call_id: Schema.optional(Schema.String), buyer_id: Schema.optional(Schema.String), amount_cents: Schema.optional(Schema.Number) })
const Charge = FactDefinition.make("charge", Money)
const Refund = FactDefinition.make("refund", Money)

const callsTable = sqliteTable(
  "calls",
  {
    tenant_id: text("tenant_id").notNull(),
    call_id: text("call_id").notNull(),
    buyer_id: text("buyer_id"),
    qualified: integer("qualified", { mode: "boolean" }),
    charged_cents: integer("charged_cents").notNull().default(0),
    ...Projection.sequenceColumns([Outcome, Qualification, "charge"])
  },
  (t) => [primaryKey({ columns: [t.tenant_id, t.call_id] })]
)

const budgetsTable = sqliteTable(
  "budgets",
  {
    tenant_id: text("tenant_id").notNull(),
    buyer_id: text("buyer_id").notNull(),
    spent_cents: integer("spent_cents").notNull().default(0),
    charges: integer("charges").notNull().default(0),
    refunds: integer("refunds").notNull().default(0)
  },
  (t) => [primaryKey({ columns: [t.tenant_id, t.buyer_id] })]
)

const calls = Projection.rows({
  name: "calls",
  table: callsTable,
  key: ["call_id"],
  queryable: ["call_id"],
  on: [
    Projection.on(Outcome, (d) => ({ call_id: d.call_id as string, buyer_id: d.buyer_id as string })),
    Projection.on(Qualification, (d) => ({ call_id: d.call_id, qualified: d.qualified })),
    Projection.on(Charge, (d) => ({ call_id: d.call_id as string, charged_cents: d.amount_cents as number }))
  ]
})

const budgets = Projection.additive({
  name: "budgets",
  table: budgetsTable,
  key: ["buyer_id"],
  queryable: ["buyer_id"],
  on: [
    Projection.on(Charge, (d) => ({ key: { buyer_id: d.buyer_id as string }, add: { spent_cents: d.amount_cents as number, charges: 1 } })),
    Projection.on(Refund, (d) => ({ key: { buyer_id: d.buyer_id as string }, add: { spent_cents: -(d.amount_cents as number), refunds: 1 } }))
  ]
})

// Type tests, checked by `npm run typecheck` (tsc over src): each `@ts-expect-error` line must fail to compile.
// A mapping's output is typed against its table's SQL column names: a misspelled column is a compile error.
// Never called (the last one throws on its unknown key column): the compiler is what is being tested.
export const typeTests = () => {
  const misspelledRowsColumn = Projection.rows({
    name: "typing_calls",
    table: callsTable,
    key: ["call_id"],
    queryable: [],
    on: [
      Projection.on(Qualification, (d) => ({ call_id: d.call_id, qualified: d.qualified })),
      // @ts-expect-error — the table has `charged_cents`, not `charged_cent`
      Projection.on(Charge, (d) => ({ call_id: d.call_id as string, charged_cent: d.amount_cents as number }))
    ]
  })
  const misspelledAdditiveColumn = Projection.additive({
    name: "typing_budgets",
    table: budgetsTable,
    key: ["buyer_id"],
    queryable: [],
    on: [
      // @ts-expect-error — `add` writes `spent_cent`: the table has `spent_cents`
      Projection.on(Charge, (d) => ({ key: { buyer_id: d.buyer_id as string }, add: { spent_cent: d.amount_cents as number } }))
    ]
  })
  const misspelledAdditiveKey = Projection.additive({
    name: "typing_budgets",
    table: budgetsTable,
    key: ["buyer_id"],
    queryable: [],
    // @ts-expect-error — `key` writes `buyer`: the table has `buyer_id`
    on: [Projection.on(Charge, (d) => ({ key: { buyer: d.buyer_id as string }, add: { charges: 1 } }))]
  })
  const tenantWritten = Projection.rows({
    name: "typing_calls",
    table: callsTable,
    key: ["call_id"],
    queryable: [],
    // @ts-expect-error — `tenant_id` is the runtime's to set, never a mapping's
    on: [Projection.on(Qualification, (d) => ({ call_id: d.call_id, tenant_id: "other" }))]
  })
  const unknownKeyColumn = Projection.rows({
    name: "typing_calls",
    table: callsTable,
    // @ts-expect-error — key and queryable columns are the table's too
    key: ["call"],
    queryable: [],
    on: [Projection.on(Qualification, (d) => ({ call_id: d.call_id, qualified: d.qualified }))]
  })
  return [misspelledRowsColumn, misspelledAdditiveColumn, misspelledAdditiveKey, tenantWritten, unknownKeyColumn]
}

let counter = 0
const fact = (type: string, data: Record<string, unknown>, sequence = 1): Fact => ({
  fact_id: `f_${counter++}`,
  tenant_id: "t",
  stream: String(data.call_id ?? "s"),
  sequence,
  type,
  data,
  causation_id: "c",
  correlation_id: "c",
  caused_by: "test",
  created_at: "2026-11-22T00:00:00.000Z"
})

const charges = (n: number) => Array.from({ length: n }, (_, i) => fact("charge", { call_id: `call_${i}`, buyer_id: `b_${i % 3}`, amount_cents: 10 }, 3))
const rowsOf = (statement: Projection.Sql) => JSON.parse(statement.params[0] as string) as Array<Array<unknown>>

describe("Projection.batchStatements", () => {
  it("a rows projection writes one statement per combination of fact types a row gets, however many facts", () => {
    // Every call gets a charge; half of them a qualification too: two shapes of row, two statements.
    const mixed = (n: number) => [
      ...charges(n),
      ...Array.from({ length: n / 2 }, (_, i) => fact("qualification", { call_id: `call_${i}`, qualified: i % 2 === 0 }, 2))
    ]
    expect(Projection.batchStatements(calls, mixed(10))).toHaveLength(2)
    expect(Projection.batchStatements(calls, mixed(250))).toHaveLength(2)
    for (const s of Projection.batchStatements(calls, mixed(250))) {
      expect(s.params).toHaveLength(1)
      expect(s.sql).toContain("json_each(?)")
    }
  })

  it("a rows statement guards every column with its fact type's sequence", () => {
    const [statement] = Projection.batchStatements(calls, charges(1))
    expect(statement!.sql).toContain(`"charged_cents" = CASE WHEN excluded."charge_seq" > COALESCE("calls"."charge_seq", 0) THEN excluded."charged_cents" ELSE "calls"."charged_cents" END`)
    expect(statement!.sql).toContain(`"charge_seq" = MAX(COALESCE("calls"."charge_seq", 0), excluded."charge_seq")`)
    expect(rowsOf(statement!)).toEqual([["t", "call_0", 10, 3]])
  })

  it("facts of one type that set different columns get a statement each", () => {
    const p = Projection.rows({
      ...calls,
      on: [Projection.on(Outcome, (d): Projection.Row => (d.buyer_id === undefined ? { call_id: "c" } : { call_id: "c", buyer_id: d.buyer_id }))]
    })
    const statements = Projection.batchStatements(p, [fact("outcome", {}), fact("outcome", { buyer_id: "b" }), fact("outcome", { buyer_id: "b2" })])
    // Three facts of one type for one row: not merged, each its own upsert (in arrival order).
    expect(statements.map(rowsOf)).toEqual([[["t", "c", 1]], [["t", "c", "b", 1], ["t", "c", "b2", 1]]])
  })

  it("a row's facts of different types in one batch are one upsert, each column guarded by its own type's sequence", () => {
    const statements = Projection.batchStatements(calls, [
      fact("charge", { call_id: "c", buyer_id: "b", amount_cents: 10 }, 3),
      fact("qualification", { call_id: "c", qualified: true }, 2)
    ])
    expect(statements).toHaveLength(1)
    // [tenant, key, charge's columns, charge_seq, qualification's columns, qualification_seq]: types in name order.
    expect(rowsOf(statements[0]!)).toEqual([["t", "c", 10, 3, 1, 2]])
    expect(statements[0]!.sql).toContain(`"qualified" = CASE WHEN excluded."qualification_seq" > COALESCE("calls"."qualification_seq", 0) THEN excluded."qualified" ELSE "calls"."qualified" END`)
    expect(statements[0]!.sql).toContain(`"charged_cents" = CASE WHEN excluded."charge_seq" > COALESCE("calls"."charge_seq", 0) THEN excluded."charged_cents" ELSE "calls"."charged_cents" END`)
  })

  it("booleans bind as 0/1", () => {
    const statements = Projection.batchStatements(calls, [fact("qualification", { call_id: "a", qualified: true }), fact("qualification", { call_id: "b", qualified: false })])
    expect(rowsOf(statements[0]!)).toEqual([["t", "a", 1, 1], ["t", "b", 0, 1]])
  })

  it("an additive projection sums over unapplied facts in one statement, then records the applied set", () => {
    for (const n of [10, 300]) {
      const statements = Projection.batchStatements(budgets, charges(n))
      expect(statements).toHaveLength(2)
      expect(statements[0]!.sql).toMatch(/SUM\(json_extract\(value, '\$\[\d\]'\)\)/)
      expect(statements[0]!.sql).toContain("WHERE NOT EXISTS (SELECT 1 FROM projection_applied WHERE projection = ? AND fact_id = json_extract(value, '$[0]'))")
      expect(statements[0]!.sql).toContain("GROUP BY")
      expect(statements[1]!.sql).toContain("INSERT INTO projection_applied")
      expect(rowsOf({ sql: "", params: [statements[1]!.params[1]!] })).toHaveLength(n)
    }
  })

  it("the same fact twice in one batch counts once", () => {
    const [charge] = charges(1)
    const statements = Projection.batchStatements(budgets, [charge!, charge!, charge!])
    // [fact_id, tenant_id, buyer_id, charges, spent_cents]: increment columns in name order
    expect(rowsOf(statements[0]!)).toEqual([[charge!.fact_id, "t", "b_0", 1, 10]])
    expect(JSON.parse(statements[1]!.params[1] as string)).toEqual([[charge!.fact_id, "t"]]) // [fact_id, tenant_id]: the applied set records each fact once, with its tenant
  })

  it("writes to a rebuild's shadow table and applied set when given its target", () => {
    const target = Projection.shadowTarget(budgets, "budgets__rb_1")
    const statements = Projection.batchStatements(budgets, charges(2), target)
    expect(statements[0]!.sql).toContain(`INSERT INTO "budgets__rb_1"`)
    expect(statements.map((s) => s.params.filter((v) => v === "budgets__rebuild"))).toEqual([["budgets__rebuild"], ["budgets__rebuild"]])
  })

  it("splits at factsPerStatement facts per statement", () => {
    expect(Projection.batchStatements(calls, charges(Projection.factsPerStatement)).length).toBe(1)
    expect(Projection.batchStatements(calls, charges(Projection.factsPerStatement + 1)).map((s) => rowsOf(s).length)).toEqual([Projection.factsPerStatement, 1])
    expect(Projection.factsStatements(charges(Projection.factsPerStatement + 1))).toHaveLength(2)
  })

  it("facts it ignores produce no statements", () => {
    expect(Projection.batchStatements(budgets, [fact("outcome", { call_id: "c" })])).toEqual([])
    expect(Projection.factsStatements([])).toEqual([])
  })

  it("a mapping to unknown columns or without its key columns is a ProjectionConfigError", () => {
    // The mapping cast as JavaScript (or `any` data) would give it: the compiler refuses `nope` otherwise (below).
    const unknown = Projection.rows({ name: "calls", table: callsTable, key: ["call_id"], queryable: [], on: [Projection.on(Outcome, () => ({ call_id: "c", nope: 1 }) as Projection.Row)] })
    expect(() => Projection.batchStatements(unknown, [fact("outcome", {})])).toThrow(Projection.ProjectionConfigError)
    expect(() => Projection.batchStatements(unknown, [fact("outcome", {})])).toThrow("projection calls mapped outcome to unknown column(s) nope")
    const keyless = Projection.additive({ name: "budgets", table: budgetsTable, key: ["buyer_id"], queryable: [], on: [Projection.on(Charge, () => ({ key: {}, add: { charges: 1 } }))] })
    expect(() => Projection.batchStatements(keyless, [fact("charge", {})])).toThrow("projection budgets mapped charge without key column(s) buyer_id")
  })

  it("maps each fact type once, and names follow the registry's naming rule", () => {
    expect(() => Projection.rows({ ...calls, on: [Projection.on(Outcome, () => undefined), Projection.on(Outcome, () => undefined)] })).toThrow(
      'projection calls maps fact type "outcome" twice'
    )
    expect(() => Projection.rows({ ...calls, name: "Calls" })).toThrow(/projection name "Calls" is not valid: use lower-case letters and digits/)
    expect(Projection.factTypes(calls)).toEqual(["outcome", "qualification", "charge"])
  })

  it("an increment or integer value that is not a safe integer is an UnsafeInteger error, never a rounded write", () => {
    const at = (amount_cents: number) => [fact("charge", { call_id: "c", buyer_id: "b", amount_cents }, 3)]
    expect(() => Projection.batchStatements(budgets, at(Number.MAX_SAFE_INTEGER))).not.toThrow()
    expect(() => Projection.batchStatements(budgets, at(-Number.MAX_SAFE_INTEGER))).not.toThrow()
    for (const amount of [2 ** 53, 2 ** 53 + 2, 1e20, 0.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => Projection.batchStatements(budgets, at(amount))).toThrow(Projection.UnsafeInteger)
      expect(() => Projection.batchStatements(calls, at(amount))).toThrow(Projection.UnsafeInteger)
    }
    expect(() => Projection.batchStatements(budgets, at(2 ** 53 + 2))).toThrow(
      /projection budgets mapped charge fact f_\d+ to the increment 9007199254740994 for spent_cents, which is not a safe integer/
    )
    expect(() => Projection.batchStatements(calls, at(1e20))).toThrow(/to the value 100000000000000000000 for charged_cents/)
  })
})

describe("ProjectionQuery (integers beyond 2^53)", () => {
  it("selects integer columns as text beyond ±(2^53 − 1) and binds integer filters as the caller's digits", () => {
    const page = ProjectionQuery.rows(budgets, "t", { buyer_id: "b" })
    if (page._tag !== "Success") throw new Error("expected a page")
    expect(page.success.sql.sql).toContain(
      `CASE WHEN "spent_cents" BETWEEN -9007199254740991 AND 9007199254740991 THEN "spent_cents" ELSE CAST("spent_cents" AS TEXT) END AS "spent_cents"`
    )
    expect(page.success.sql.sql).toContain(`"buyer_id",`)
    const byCharges = ProjectionQuery.rows({ ...budgets, queryable: ["charges"] }, "t", { charges: "9007199254740993" })
    if (byCharges._tag !== "Success") throw new Error("expected a page")
    expect(byCharges.success.sql.params).toContain("9007199254740993")
    expect(byCharges.success.sql.sql).toContain(`"charges" = ?`)
  })
})
