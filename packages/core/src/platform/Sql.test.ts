/**
 * The D1 door's two checks: errors classified by reason (Cloudflare's documented D1 messages, and what SQLite
 * raises through the test kit's D1 on node:sqlite), and rows decoded by their schema.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { describe, expect, it } from "vitest"
import * as Failure from "../failures/Failure.js"
import * as TestPlatform from "../testing/TestPlatform.js"
import * as Sql from "./Sql.js"

const classify = Sql.classify("the platform database", "SELECT 1")

describe("Sql.classify", () => {
  it.each([
    "D1_ERROR: Network connection lost.",
    "D1_ERROR: D1 DB is overloaded. Requests queued for too long.",
    "D1_ERROR: D1 DB is overloaded. Too many requests queued.",
    "D1_ERROR: D1 DB storage operation exceeded timeout which caused object to be reset.",
    "D1_ERROR: Internal error while starting up D1 DB storage caused object to be reset.",
    "D1_ERROR: D1 DB reset because its code was updated.",
    "D1_ERROR: Cannot resolve D1 DB due to transient issue on remote node.",
    "D1_ERROR: Can't read from request stream because client disconnected.",
    "D1_ERROR: D1 DB's isolate exceeded its memory limit and was reset.",
    "D1_ERROR: database is locked: SQLITE_BUSY"
  ])("a transient D1 error is Unavailable, retried: %s", (message) => {
    const failure = classify(new Error(message))
    expect(failure).toBeInstanceOf(Failure.Unavailable)
    expect(failure.retryable).toBe(true)
    expect(failure.status).toBe(503)
  })

  it.each([
    ["D1_ERROR: UNIQUE constraint failed: tenant_moves.id: SQLITE_CONSTRAINT", "UNIQUE constraint failed: tenant_moves.id"],
    ["NOT NULL constraint failed: runs.queue", "NOT NULL constraint failed: runs.queue"],
    ["D1_ERROR: CHECK constraint failed: amount > 0: SQLITE_CONSTRAINT", "CHECK constraint failed"]
  ])("a constraint violation is a Conflict, not retried: %s", (message, named) => {
    const failure = classify(new Error(message))
    expect(failure).toBeInstanceOf(Failure.Conflict)
    expect(failure.retryable).toBe(false)
    expect(failure.status).toBe(409)
    expect(failure.message).toContain(named)
  })

  it.each([
    "D1_ERROR: near \"SELEC\": syntax error at offset 0: SQLITE_ERROR",
    "D1_ERROR: no such column: nope: SQLITE_ERROR",
    "D1_ERROR: too many SQL variables at offset 0: SQLITE_ERROR",
    "D1_TYPE_ERROR: Type 'undefined' not supported for value 'undefined'",
    "D1_COLUMN_NOTFOUND",
    "table runs has no column named nope"
  ])("any other D1 or SQLite error is a Bug, not retried, naming the statement: %s", (message) => {
    const failure = classify(new Error(message))
    expect(failure).toBeInstanceOf(Failure.Bug)
    expect(failure.retryable).toBe(false)
    expect(failure.status).toBe(500)
    expect(failure.publicMessage).toBe("internal error")
    expect(failure.message).toContain("SELECT 1")
  })

  it("a missing table is a Bug naming the table (what tells a projection never migrated)", () => {
    const failure = classify(new Error("D1_ERROR: no such table: proj_orders: SQLITE_ERROR"))
    expect(failure).toBeInstanceOf(Failure.Bug)
    expect((failure as Failure.Bug).missingTable).toBe("proj_orders")
  })

  it("an error with no mark of D1 or SQLite (a proxy, a broken RPC) is taken as the database unreachable", () => {
    expect(classify(new Error("injected fault: the database is down"))).toBeInstanceOf(Failure.Unavailable)
  })

  it("a store naming itself keeps a Bug and a Conflict as they are, and renames an Unavailable", () => {
    const name = Failure.unavailable("the runs store")
    const bug = new Failure.Bug({ service: "the platform database", message: "bad" })
    expect(name(bug)).toBe(bug)
    const renamed = name(new Failure.Unavailable({ service: "the platform database", message: "D1_ERROR: Network connection lost." }))
    expect(renamed).toBeInstanceOf(Failure.Unavailable)
    expect((renamed as Failure.Unavailable).service).toBe("the runs store")
  })

  it("a Bug is dead-lettered at once by the consumer's reading: not retryable, reason defect", () => {
    const failure = Failure.classify(Effect.runSync(Effect.exit(Effect.fail(new Failure.Bug({ service: "the platform database", message: "x" })))).pipe((exit) => (exit._tag === "Failure" ? exit.cause : undefined))!)
    expect(failure.retryable).toBe(false)
    expect(failure.reason).toBe("defect")
    expect(failure.budget).toBeUndefined()
  })
})

describe("the door over a real database (the test kit's D1)", () => {
  const Count = Sql.Count
  const Named = Schema.Struct({ name: Schema.String })
  const platform = TestPlatform.make([])
  const run = <A, E>(f: (sql: Sql.Sql) => Effect.Effect<A, E>) => platform.run(Effect.flatMap(Effect.service(Sql.PlatformDatabase), f))
  const failureOf = <A>(f: (sql: Sql.Sql) => Effect.Effect<A, Sql.SqlFailure>) => platform.run(Effect.flip(Effect.flatMap(Effect.service(Sql.PlatformDatabase), f)))

  it("rows come back decoded by their schema", async () => {
    const row = await run((sql) => sql.first(Count, Sql.statement("SELECT COUNT(*) AS n FROM ledger_shards")))
    expect(row).toEqual({ n: 0 })
  })

  it("a row that does not match its schema is a Bug naming the statement and the field", async () => {
    const failure = await failureOf((sql) => sql.all(Named, Sql.statement("SELECT 42 AS name")))
    expect(failure).toBeInstanceOf(Failure.Bug)
    expect(failure.message).toContain("SELECT 42 AS name")
    expect(failure.message).toContain("name")
  })

  it("a real constraint violation is a Conflict", async () => {
    const insert = Sql.statement("INSERT INTO ledger_tenants (tenant_id, shard_count, first_seen_at) VALUES ('t_dup', 1, '2024-01-01T00:00:00.000Z')")
    await run((sql) => sql.run(insert))
    const failure = await failureOf((sql) => sql.run(insert))
    expect(failure).toBeInstanceOf(Failure.Conflict)
    expect(failure.message).toContain("UNIQUE constraint failed")
  })

  it("a real bad statement is a Bug, and a missing table names it", async () => {
    expect(await failureOf((sql) => sql.run(Sql.statement("SELEC 1")))).toBeInstanceOf(Failure.Bug)
    const missing = await failureOf((sql) => sql.all(Count, Sql.statement("SELECT COUNT(*) AS n FROM no_such_thing")))
    expect(missing).toBeInstanceOf(Failure.Bug)
    expect((missing as Failure.Bug).missingTable).toBe("no_such_thing")
  })
})
