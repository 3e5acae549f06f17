/**
 * The one door to D1: every statement the framework sends to a D1 database
 * goes through a `Sql` service, one per database role. Today there is one
 * role, the platform's database (`PlatformDatabase`, the `DB` binding); a
 * second role (a tenant's read database) is a second service key of the same
 * shape with its own layer — `Sql.layer(ReadDatabase, "read", binding)` — not
 * new code.
 *
 * Why Drizzle's D1 driver and not `@effect/sql-d1`: the tables are already
 * declared in Drizzle (`tables/PlatformTables.ts`, from which drizzle-kit
 * generates the migrations), so a query written with the Drizzle builder
 * fails to typecheck when a column is renamed; Drizzle is already a
 * dependency (no new package in the Worker bundle); and `@effect/sql-d1`
 * would describe the same tables a second time, untyped. What `@effect/sql`
 * gives beyond that the door adds itself, as `@effect/sql` does:
 *
 * - spans: each call is a span named after the method and the role;
 * - rows decoded by schema (`SqlSchema.findAll`/`findOne`): `all` and `first`
 *   take the row's `effect/Schema` and decode every row with a decoder compiled
 *   once per schema; a row that does not decode is a `Failure.Bug` naming the
 *   statement, the row and the field — not a cast that lies to the caller;
 * - errors classified by reason (`SqlError`'s reasons), once, here
 *   (`classify`): D1's documented transient errors (network lost, overloaded,
 *   timeouts, a reset) are `Failure.Unavailable` (503, retried); a constraint
 *   violation is `Failure.Conflict` (409, not retried); any other error D1 or
 *   SQLite raised — bad SQL, a missing table or column, too many bound
 *   parameters, a type D1 cannot bind — is `Failure.Bug` (500, not retried: the
 *   same statement fails the same way). A store names itself with
 *   `Failure.unavailable(service)`, which renames an `Unavailable` and keeps a
 *   `Bug` or a `Conflict` as it is.
 *
 * Statements are values (`{ sql, params }`): written by hand (`statement`)
 * where Drizzle cannot say it (`json_each`, recursive CTEs, numbered
 * parameters shared by many rows) or built with Drizzle (`typed`). Either kind
 * runs alone or in one `batch` — one round trip and one transaction, as D1
 * has no interactive transactions. Rows come back under their column names.
 * It does not chunk at D1's 100 bound parameters: callers shape statements (`chunks`, and `JsonArrays` for a JSON
 * parameter).
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as SchemaIssue from "effect/SchemaIssue"
import * as SchemaParser from "effect/SchemaParser"
import { BaseSQLiteDatabase } from "drizzle-orm/sqlite-core/db"
import { SQLiteAsyncDialect } from "drizzle-orm/sqlite-core/dialect"
import { Issues } from "@factline/schemas"
import * as Failure from "../failures/Failure.js"

export interface Statement {
  readonly sql: string
  readonly params: ReadonlyArray<unknown>
}

/** A statement written by hand. */
export const statement = (sql: string, ...params: ReadonlyArray<unknown>): Statement => ({ sql, params })

/** A query built with Drizzle against the declared tables, as a statement (run alone or batched with others). */
export const typed = (query: { toSQL(): { sql: string; params: Array<unknown> } }): Statement => {
  const { sql, params } = query.toSQL()
  return { sql, params }
}

/**
 * `items` in runs of at most `size`: how a caller shapes statements under D1's 100 bound parameters (or bounds a
 * JSON parameter), one statement per run.
 */
export const chunks = <T>(items: ReadonlyArray<T>, size: number): Array<Array<T>> => {
  const out: Array<Array<T>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}

/** A row's schema: decodes what D1 returns (column names to SQLite values) with no services. */
export type Row = Schema.ConstraintDecoder<unknown>

/** The one row of `SELECT COUNT(*) AS n …`. */
export const Count = Schema.Struct({ n: Schema.Number })

/** What a call through the door fails with: D1 down (retried), a constraint violated, or a bug (neither retried). */
export type SqlFailure = Failure.Unavailable | Failure.Conflict | Failure.Bug

export interface Sql {
  /** The database role this door opens (`platform`, …): in span names. */
  readonly role: string
  /** The binding behind the door, unwrapped from test instrumentation: what a per-database cache is keyed by. */
  readonly identity: object
  /**
   * Drizzle's SQLite query builder, for building typed statements (`typed(sql.orm.delete(table).where(…))`) that
   * this door then runs. It has no session: awaiting a query on it fails, so nothing reaches D1 around the door
   * (and the Worker bundles no Drizzle D1 driver — docs/performance.md, bundle size).
   */
  readonly orm: Builder
  /** Rows of one statement, by column name, each decoded by `row`. */
  readonly all: <S extends Row>(row: S, statement: Statement) => Effect.Effect<ReadonlyArray<S["Type"]>, SqlFailure>
  /** The first row of one statement decoded by `row`, or undefined. */
  readonly first: <S extends Row>(row: S, statement: Statement) => Effect.Effect<S["Type"] | undefined, SqlFailure>
  /** Runs one statement; the number of rows it changed. */
  readonly run: (statement: Statement) => Effect.Effect<number, SqlFailure>
  /**
   * Runs statements as one transaction in one round trip; each statement's changes, in order, and its rows
   * decoded by `row` (given when a statement of the batch reads: every statement's rows are decoded by it; a
   * write returns none). Without `row` the rows are `unknown`: a batch whose reads differ in shape decodes each
   * with `decodeRows`.
   */
  readonly batch: {
    (statements: ReadonlyArray<Statement>): Effect.Effect<ReadonlyArray<Result<unknown>>, SqlFailure>
    <S extends Row>(statements: ReadonlyArray<Statement>, row: S): Effect.Effect<ReadonlyArray<Result<S["Type"]>>, SqlFailure>
  }
}

export interface Result<T> {
  readonly rows: ReadonlyArray<T>
  readonly changes: number
}

/** The platform's own database (the `DB` binding): what every tenant shares — the shard registry, the placement map, metrics, the batch inbox. */
export class PlatformDatabase extends Context.Service<PlatformDatabase, Sql>()("@factline/core/Sql/PlatformDatabase") {
  static readonly layer = (binding: D1Database) => layer(PlatformDatabase, "platform", binding)
}

/**
 * The read database of the tenant(s) in scope: what every tenant-scoped store (projections, the facts copy,
 * accepted keys, dead letters, webhook state, batch jobs) reads and writes. Never a layer of the runtime:
 * only the placement scopes (`placement/Placement`: `reading`, `writing`, `byDatabase`, `everywhere`)
 * provide it, so a store call outside a tenant's scope does not compile.
 */
export class ReadDatabase extends Context.Service<ReadDatabase, Sql>()("@factline/core/Sql/ReadDatabase") {}

/** A layer of a database role's door over its binding. */
export const layer = <I>(key: Context.Key<I, Sql>, role: string, binding: D1Database): Layer.Layer<I> => Layer.succeed(key, make(role, binding))

/** A wrapped binding (test and benchmark instrumentation) answers this with the binding it wraps. */
const unwrap = Symbol.for("@factline/core/testing/unwrap")

/** The binding a wrapper answers for `unwrap`, or the binding itself when it is not wrapped (a get, not `in`: the wrappers are proxies that answer reads). */
const unwrapped = (binding: D1Database): object => {
  const inner: unknown = Reflect.get(binding, unwrap)
  return typeof inner === "object" && inner !== null ? inner : binding
}

// ---------------------------------------------------------------------------------------------------------------
// Errors by reason. D1 reports no structured code across the binding, only text: `D1_ERROR: <reason>` (with
// SQLite's message and result code, `…: SQLITE_CONSTRAINT`), `D1_TYPE_ERROR`, `D1_COLUMN_NOTFOUND`,
// `D1_EXEC_ERROR` — Cloudflare's documented list (developers.cloudflare.com/d1/observability/debug-d1/). Node's
// `node:sqlite` (the test kit's D1) throws SQLite's message alone.

/** D1's documented transient errors ("retry the operation"), SQLite's busy/locked, and the platform's storage timeouts. */
const transient = new RegExp([
  "network connection lost",
  "overloaded", // "D1 DB is overloaded. Requests queued for too long." / "Too many requests queued."
  "exceeded (its )?(memory|cpu)", // "D1 DB's isolate exceeded its memory limit and was reset."
  "exceeded timeout", // "D1 DB storage operation exceeded timeout which caused object to be reset."
  "timed? ?out",
  "object to be reset",
  "reset because its code was updated",
  "transient issue", // "Cannot resolve D1 DB due to transient issue on remote node."
  "client disconnected",
  "internal error",
  "SQLITE_BUSY",
  "SQLITE_LOCKED",
  "database is locked",
  "SQLITE_IOERR",
  "SQLITE_FULL",
  "exceeded maximum db size"
].join("|"), "i")

/** SQLite's constraint violations: `UNIQUE constraint failed: t.c`, `NOT NULL…`, `CHECK…`, `FOREIGN KEY…`. */
const constraint = /((?:UNIQUE|NOT NULL|CHECK|FOREIGN KEY|PRIMARY KEY)\s+constraint failed(?::\s*[\w.]+(?:,\s*[\w.]+)*)?)|SQLITE_CONSTRAINT/i

/** An error D1 or SQLite raised about the statement itself (what is not transient nor a constraint is a bug). */
const fromDatabase = /D1_|SQLITE_|no such (table|column|function)|syntax error|too many SQL variables|has no column named|datatype mismatch|values for \d+ columns|ambiguous column|wrong number of arguments|bind|column index out of range/i

const missingTable = /no such table:\s*([\w."]+)/i

/**
 * A failed call's failure, by reason: transient (D1's documented "retry the operation" errors) -> `Unavailable`;
 * a constraint violation -> `Conflict` naming the constraint; any other error D1 or SQLite raised (bad SQL, a
 * missing table or column, too many bound parameters, a type D1 cannot bind) -> `Bug`. An error that carries no
 * mark of D1 or SQLite (a proxy, an RPC that broke before reaching the database) is taken as the database
 * being unreachable: `Unavailable`.
 */
export const classify = (service: string, statement?: string) => (error: unknown): SqlFailure => {
  const message = error instanceof Error ? error.message : Failure.describe(error)
  if (transient.test(message)) return new Failure.Unavailable({ service, message })
  const violated = constraint.exec(message)
  if (violated !== null) {
    return new Failure.Conflict({ code: "constraint_violation", message: `${service} refused a write: ${violated[1] ?? "a constraint failed"}` })
  }
  if (fromDatabase.test(message) || isSqliteError(error)) {
    const table = missingTable.exec(message)?.[1]?.replaceAll("\"", "")
    return new Failure.Bug({
      service,
      message: statement === undefined ? `${service}: ${message}` : `${service}: ${message} (in: ${excerpt(statement)})`,
      ...(table === undefined ? {} : { missingTable: table })
    })
  }
  return new Failure.Unavailable({ service, message })
}

/** node:sqlite's errors carry `code: "ERR_SQLITE_ERROR"`. */
const isSqliteError = (error: unknown) => typeof error === "object" && error !== null && (error as { code?: unknown }).code === "ERR_SQLITE_ERROR"

const excerpt = (sql: string) => {
  const flat = sql.replace(/\s+/g, " ").trim()
  return flat.length > 160 ? `${flat.slice(0, 160)}…` : flat
}

// ---------------------------------------------------------------------------------------------------------------
// Rows by schema.

type Decode = (input: unknown) => Exit.Exit<unknown, SchemaIssue.Issue>

/** One compiled decoder per row schema, made on first use and kept (row schemas are module constants). */
const decoders = new WeakMap<Row, Decode>()

const decoderOf = (row: Row): Decode => {
  let decode = decoders.get(row)
  if (decode === undefined) {
    decode = SchemaParser.decodeUnknownExit(row) as Decode
    decoders.set(row, decode)
  }
  return decode
}

/**
 * `rows` decoded by `row`, or a `Bug` naming the statement, the row and the fields. Rows are plain objects of
 * SQLite values: a struct of strings, numbers and nulls decodes in a few hundred nanoseconds a row.
 */
export const decodeRows = <S extends Row>(service: string, row: S, statement: Statement, rows: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<S["Type"]>, Failure.Bug> => {
  const decode = decoderOf(row)
  const out: Array<S["Type"]> = new Array(rows.length)
  for (let i = 0; i < rows.length; i++) {
    const exit = decode(rows[i])
    if (Exit.isFailure(exit)) return Effect.fail(mismatch(service, statement, i, exit.cause))
    out[i] = exit.value
  }
  return Effect.succeed(out)
}

/** A row that does not match its schema: the statement, the row's position and the fields at fault. */
const mismatch = (service: string, statement: Statement, at: number, cause: Cause.Cause<SchemaIssue.Issue>) => {
  const issue = Cause.squash(cause)
  const fields = SchemaIssue.isIssue(issue) ? Issues.render(Issues.fromIssue(issue)) : Failure.describe(issue)
  return new Failure.Bug({ service, message: `${service}: row ${at} of "${excerpt(statement.sql)}" does not match its schema: ${fields}` })
}

/** Drizzle's query builder without a session (`Sql.orm`): statements are built with it, never run by it. */
export type Builder = BaseSQLiteDatabase<"async", unknown>
const builder: Builder = new BaseSQLiteDatabase("async", new SQLiteAsyncDialect(), undefined as never, undefined)

export const make = (role: string, binding: D1Database): Sql => {
  const service = `the ${role} database`
  const prepare = (s: Statement) => binding.prepare(s.sql).bind(...s.params)
  const call = <A>(name: string, sql: string, run: () => Promise<A>) =>
    Effect.tryPromise({ try: run, catch: classify(service, sql) }).pipe(Effect.withSpan(`Sql.${name}`, { attributes: { "db.system": "d1", "db.role": role } }))
  const decodeAll = <S extends Row>(row: S, s: Statement) => (rows: ReadonlyArray<unknown>) => decodeRows(service, row, s, rows)
  const batch = (statements: ReadonlyArray<Statement>, row?: Row): Effect.Effect<ReadonlyArray<Result<unknown>>, SqlFailure> =>
    statements.length === 0
      ? Effect.succeed([])
      : call("batch", statements.map((s) => s.sql).join("; "), async () =>
        (await binding.batch(statements.map(prepare))).map((r) => ({ rows: r.results ?? [], changes: r.meta?.changes ?? 0 }))).pipe(
          Effect.flatMap((results) =>
            row === undefined
              ? Effect.succeed(results)
              : Effect.forEach(results, (r, i) => Effect.map(decodeRows(service, row, statements[i]!, r.rows), (rows) => ({ rows, changes: r.changes }))))
        )
  return {
    role,
    identity: unwrapped(binding),
    orm: builder,
    all: (row, s) => call("all", s.sql, async () => (await prepare(s).all()).results).pipe(Effect.flatMap(decodeAll(row, s))),
    first: (row, s) =>
      call("first", s.sql, async () => (await prepare(s).first()) ?? undefined).pipe(
        Effect.flatMap((found) => (found === undefined ? Effect.succeed(undefined) : Effect.map(decodeRows(service, row, s, [found]), (rows) => rows[0])))
      ),
    run: (s) => call("run", s.sql, async () => (await prepare(s).run()).meta.changes ?? 0),
    batch: batch as Sql["batch"]
  }
}
