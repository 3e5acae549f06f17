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
 * gives beyond that — spans and one error type — the door adds itself: each
 * call is a span named after the method and the role, and fails with the
 * failure family's `Unavailable` ("the platform database"), carrying D1's
 * message for the log — a store may name itself instead (`mapError`).
 *
 * Statements are values (`{ sql, params }`): written by hand (`statement`)
 * where Drizzle cannot say it (`json_each`, recursive CTEs, numbered
 * parameters shared by many rows) or built with Drizzle (`typed`). Either kind
 * runs alone or in one `batch` — one round trip and one transaction, as D1
 * has no interactive transactions. Rows come back under their column names.
 * It does not chunk at D1's 100 bound parameters: callers shape statements (`chunks`, and `JsonArrays` for a JSON
 * parameter).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { drizzle, type DrizzleD1Database } from "drizzle-orm/d1"
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

export interface Sql {
  /** The database role this door opens (`platform`, …): in span names. */
  readonly role: string
  /** The binding behind the door, unwrapped from test instrumentation: what a per-database cache is keyed by. */
  readonly identity: object
  /** Drizzle over this database, for building typed statements (`typed(sql.orm.delete(table).where(…))`). */
  readonly orm: DrizzleD1Database
  /** Rows of one statement, by column name. */
  readonly all: <T = Record<string, unknown>>(statement: Statement) => Effect.Effect<ReadonlyArray<T>, Failure.Unavailable>
  /** The first row of one statement, or undefined. */
  readonly first: <T = Record<string, unknown>>(statement: Statement) => Effect.Effect<T | undefined, Failure.Unavailable>
  /** Runs one statement; the number of rows it changed. */
  readonly run: (statement: Statement) => Effect.Effect<number, Failure.Unavailable>
  /** Runs statements as one transaction in one round trip; each statement's rows and changes, in order. */
  readonly batch: <T = Record<string, unknown>>(statements: ReadonlyArray<Statement>) => Effect.Effect<ReadonlyArray<Result<T>>, Failure.Unavailable>
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

export const make = (role: string, binding: D1Database): Sql => {
  const prepare = (s: Statement) => binding.prepare(s.sql).bind(...s.params)
  const call = <A>(name: string, run: () => Promise<A>) =>
    Effect.tryPromise({ try: run, catch: Failure.unavailable(`the ${role} database`) }).pipe(Effect.withSpan(`Sql.${name}`, { attributes: { "db.system": "d1", "db.role": role } }))
  return {
    role,
    identity: unwrapped(binding),
    orm: drizzle(binding),
    all: <T>(s: Statement) => call("all", async () => (await prepare(s).all<T>()).results as ReadonlyArray<T>),
    first: <T>(s: Statement) => call("first", async () => (await prepare(s).first<T>()) ?? undefined),
    run: (s) => call("run", async () => (await prepare(s).run()).meta.changes ?? 0),
    batch: <T>(statements: ReadonlyArray<Statement>) =>
      statements.length === 0
        ? Effect.succeed([])
        : call("batch", async () =>
          (await binding.batch<T>(statements.map(prepare))).map((r) => ({ rows: r.results ?? [], changes: r.meta?.changes ?? 0 })))
  }
}

