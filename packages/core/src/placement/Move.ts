/**
 * Moving a tenant's read side from one read database to another, under live traffic: a resumable operation
 * of the batch queue (`factline-batch`, operation `move`), one step per message. The record (`tenant_moves`,
 * platform database, owned by this module) holds the phase and every cursor, so a retried or redelivered
 * step continues from what was recorded and redoes nothing visible.
 *
 * 1. **frozen** — `start` sets the tenant's `frozen_since`: every writer of the tenant refuses its writes
 *    retryably (consumers retry; the HTTP edge answers 503 with `retry-after`) from the moment its isolate
 *    reads the hold — at the latest when its cached placement expires (`cacheMs`). The move waits that long
 *    plus `settleMs` (a write that passed the check just before has landed) before copying anything.
 * 2. **copying** — the tenant's rows already in the target (an earlier failed move's) are deleted, then
 *    each table is copied in primary-key order, a page at a time, each page one transaction on the target
 *    (`INSERT OR REPLACE`: a page copied twice is the same rows), its cursor recorded after it.
 * 3. **verify** — per table, the tenant's rows in both databases: count, total length of every column, sum
 *    of every numeric column. Equal → switch. Different (a write that landed after the copy passed it) →
 *    copy again from the start, up to `rounds` times; then the move fails.
 * 4. **switched** — one platform transaction moves the placement to the target and lifts the hold. Readers
 *    whose isolate still trusts the old placement read the source: complete as of the hold, never a
 *    half-copied database — nothing reads the target before the switch.
 * 5. **dropped** — `cacheMs` after the switch, when no isolate trusts the old placement, the tenant's rows
 *    are deleted from the source, a page at a time; the move ends.
 *
 * **failed** — a step that fails on its last attempt (or permanently) ends the move `failed` with its error
 * and lifts the hold if the switch has not happened; the target's partial copy is deleted by the next move.
 * A move refuses to start while a rebuild runs, and a rebuild refuses to start while a move runs
 * (`active`): a rebuild replays each tenant into the database it is placed on.
 *
 * **One projection** (`projection`): the same phases over the tenant's rows of that projection's table and their
 * applied set only; the hold is the projection's (`projection_placements.frozen_since`): the tenant's events and its
 * other writes go on, the projection's facts wait (the consumer parks them). The switch records where the projection
 * lives (`projection_placements`; none when it comes back to the tenant's home). A move of the tenant's home moves
 * every table but its projections placed elsewhere, which stay where they are (a projection placed on the home's
 * target becomes part of the home at the switch).
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { type BatchPayload, TenantId } from "@factline/schemas"
import { MoveView, phases as movePhases } from "../api/Tenants.js"
import * as Failure from "../failures/Failure.js"
import * as Sql from "../platform/Sql.js"
import * as SqliteMaster from "../tables/SqliteMaster.js"
import * as Time from "../platform/Time.js"
import { Registry } from "../registry/Registry.js"
import * as Projection from "../definitions/Projection.js"
import { TenantPlacement } from "./Placement.js"
import * as Parts from "./Parts.js"

/** The framework's tables that hold a tenant's rows in its read database (each has a `tenant_id` column). */
export const tenantTables = [
  "facts",
  "projection_applied",
  "accepted_keys",
  "dead_messages",
  "webhook_endpoints",
  "webhook_deliveries",
  "webhook_attempts",
  "batch_jobs",
  "subject_erasures"
] as const

/**
 * Tables with a `tenant_id` column that are the platform database's, never moved (a tenant's deletion deletes its
 * rows of these too, `tenant_placements` last).
 */
export const platformTables = ["ledger_tenants", "ledger_shards", "ledger_reshards", "tenant_placements", "projection_placements", "tenant_moves", "projection_rebuilds", "runs", "workflow_instances"] as const

export const phases = movePhases
export type Phase = (typeof phases)[number]

/** Rows read or written per page (one statement read, one target transaction). */
export const rowsPerPage = 500
/** Rows a step copies or deletes before it hands over to the next message. */
export const rowsPerStep = 5_000
/** How many times a move copies before it gives up on a tenant whose rows keep changing. */
export const rounds = 3
/** After the hold is visible everywhere, how long a write that passed the check before may still take to land. */
export const settleMs = 2_000

export interface TableProgress {
  readonly rows: number
  /** The primary key of the last row copied (or deleted), or null before the first page. */
  readonly after: ReadonlyArray<unknown> | null
  readonly done: boolean
}

/** What `tenant_moves.copied` holds: the copy round and each table's cursor. */
export interface Progress {
  readonly round: number
  /** The target's leftover rows of the tenant are deleted. */
  readonly cleared: boolean
  readonly tables: Readonly<Record<string, TableProgress>>
  /** Dropping from the source: each table's cursor. */
  readonly dropped?: Readonly<Record<string, TableProgress>>
}

/** A move's row in `tenant_moves`. */
export const Row = Schema.Struct({
  id: Schema.String,
  tenant_id: Schema.String,
  from_database: Schema.Number,
  to_database: Schema.Number,
  phase: Schema.Literals(phases),
  copied: Schema.String,
  verified: Schema.NullOr(Schema.String),
  error: Schema.NullOr(Schema.String),
  started_by: Schema.String,
  started_at: Schema.String,
  updated_at: Schema.String,
  finished_at: Schema.NullOr(Schema.String),
  projection: Schema.NullOr(Schema.String),
  /** A split of `projection`: each part's read database (JSON, Split.ts); null: moved whole. */
  parts: Schema.optional(Schema.NullOr(Schema.String))
})
export type Row = typeof Row.Type

const Databases = Schema.Struct({ database: Schema.Number, projection_database: Schema.NullOr(Schema.Number), projection_parts: Schema.NullOr(Schema.String) })
const Name = Schema.Struct({ projection: Schema.String })
const Id = Schema.Struct({ id: Schema.String })
const Found = Schema.Struct({ found: Schema.Number })
const PlacementState = Schema.Struct({ database: Schema.Number, frozen_since: Schema.NullOr(Schema.String), removed_at: Schema.NullOr(Schema.String) })
/** A row of any tenant table, copied as it is (its columns are the table's: SQLite values). */
const TableRow = Schema.Record(Schema.String, Schema.Unknown)
/** A table's summary: its row count, every column's total length, every numeric column's sum. */
const Summary = Schema.Record(Schema.String, Schema.Number)

/** What the API shows of a move: the description's (`@factline/core/api`) `TenantMove`. */
export const View = MoveView
export type View = typeof View.Type

export const progressOf = (row: Row): Progress => {
  const parsed = JSON.parse(row.copied) as Partial<Progress>
  return { round: parsed.round ?? 1, cleared: parsed.cleared ?? false, tables: parsed.tables ?? {}, ...(parsed.dropped ? { dropped: parsed.dropped } : {}) }
}

export const view = (row: Row): View => {
  const progress = progressOf(row)
  const verified = row.verified === null ? null : (JSON.parse(row.verified) as Record<string, { rows: number; equal: boolean }>)
  return {
    move_id: row.id,
    tenant_id: row.tenant_id,
    from_database: row.from_database,
    to_database: row.to_database,
    projection: row.projection,
    parts: row.parts ? (JSON.parse(row.parts) as Array<number>) : null,
    phase: row.phase,
    copy_round: progress.round,
    copied: Object.fromEntries(Object.entries(progress.tables).map(([t, p]) => [t, p.rows])),
    verified,
    error: row.error,
    started_by: row.started_by,
    started_at: row.started_at,
    updated_at: row.updated_at,
    finished_at: row.finished_at
  }
}

const unavailable = Failure.unavailable("the platform database")

export const q = (name: string) => `"${name.replaceAll('"', '""')}"`

/** Every table a move copies: the framework's tenant tables, then each registered projection's. */
export const tablesToMove = Effect.map(Effect.service(Registry), (registry) => [
  ...tenantTables,
  ...registry.projections.map(Projection.tableName).filter((t) => !(tenantTables as ReadonlyArray<string>).includes(t))
])

/** A move's record, by id. */
export const find = Effect.fn("Move.find")(function*(id: string) {
  const platform = yield* Sql.PlatformDatabase
  return yield* Effect.mapError(platform.first(Row, Sql.statement("SELECT * FROM tenant_moves WHERE id = ?", id)), unavailable)
})

/** A tenant's moves, newest first (at most 100). */
export const list = Effect.fn("Move.list")(function*(tenantId: string) {
  const platform = yield* Sql.PlatformDatabase
  return yield* Effect.mapError(platform.all(Row, Sql.statement("SELECT * FROM tenant_moves WHERE tenant_id = ? ORDER BY started_at DESC, id DESC LIMIT 100", tenantId)), unavailable)
})

/** The move in progress (of any tenant, or of `tenantId`), if any. */
export const active = Effect.fn("Move.active")(function*(tenantId?: string) {
  const platform = yield* Sql.PlatformDatabase
  return yield* Effect.mapError(platform.first(Row, tenantId === undefined
    ? Sql.statement("SELECT * FROM tenant_moves WHERE phase IN ('frozen', 'copying', 'switched') ORDER BY started_at LIMIT 1")
    : Sql.statement("SELECT * FROM tenant_moves WHERE tenant_id = ? AND phase IN ('frozen', 'copying', 'switched') LIMIT 1", tenantId)), unavailable)
})

/**
 * Starts moving `tenantId` (its home, or only its `projection`) to read database `to`: records the move and holds
 * the tenant's writes, or the projection's (one platform transaction); returns the record and the first step to enqueue.
 */
export const start = Effect.fn("Move.start")(function*(tenantId: string, toDatabase: number | undefined, startedBy: string, projection?: string, split?: ReadonlyArray<number>) {
  const shape = yield* TenantPlacement
  const platform = yield* Sql.PlatformDatabase
  const registry = yield* Registry
  const { to, parts } = yield* Parts.request(toDatabase, projection, split, shape.databases.length)
  if (!Number.isInteger(to) || to < 0 || to >= shape.databases.length) {
    return yield* new Failure.InvalidInput({ message: `to_database must be a read database index from 0 to ${shape.databases.length - 1}`, problems: [{ path: "to_database", message: `must be 0 to ${shape.databases.length - 1}` }] })
  }
  if (projection !== undefined && registry.projection(projection) === undefined) {
    const known = registry.projections.map((p) => p.name).join(", ")
    return yield* new Failure.InvalidInput({ message: `no projection ${JSON.stringify(projection.slice(0, 100))} (known: ${known})`, problems: [{ path: "projection", message: `must be a registered projection (${known})` }] })
  }
  const placement = yield* Effect.mapError(platform.first(Databases, Sql.statement(
    `SELECT database, (SELECT database FROM projection_placements WHERE tenant_id = ?1 AND projection = ?2) AS projection_database,
       (SELECT parts FROM projection_placements WHERE tenant_id = ?1 AND projection = ?2) AS projection_parts FROM tenant_placements WHERE tenant_id = ?1`,
    tenantId, projection ?? null
  )), unavailable)
  if (!placement) return yield* new Failure.NotFound({ message: `tenant ${tenantId} is not placed yet (nothing to move): place it with PUT /v1/tenants/${tenantId}/placement` })
  const what = projection === undefined ? `tenant ${tenantId}` : `projection ${projection} of tenant ${tenantId}`
  const from = projection === undefined ? placement.database : placement.projection_database ?? placement.database
  if (placement.projection_parts !== null) return yield* new Failure.Conflict({ message: `${what} is in parts (${placement.projection_parts}); a projection in parts is not moved again` })
  if (parts?.every((d) => shape.databases[d]!.identity === shape.databases[from]?.identity)) {
    return yield* new Failure.InvalidInput({ message: `parts must put at least one part on another read database than ${from}, where ${what} is`, problems: [{ path: "parts", message: `must name a read database other than ${from}` }] })
  }
  if (from === to && parts === undefined) return yield* new Failure.Conflict({ message: `${what} is already on read database ${to}` })
  if (parts === undefined && shape.databases[from] !== undefined && shape.databases[from]!.identity === shape.databases[to]!.identity) {
    return yield* new Failure.Conflict({ message: `read databases ${from} and ${to} are the same database` })
  }
  if (projection !== undefined) {
    // A reconcile's shadow lives beside the projection: it would be left behind in the source.
    const reconciling = yield* Effect.mapError(shape.databases[placement.database]!.first(Id, Sql.statement(
      "SELECT id FROM batch_jobs WHERE tenant_id = ? AND operation = 'reconcile' AND status IN ('queued', 'running') AND json_extract(params, '$.projection') = ? LIMIT 1",
      tenantId, projection
    )), unavailable)
    if (reconciling) return yield* new Failure.Conflict({ message: `a reconcile of ${projection} is running for tenant ${tenantId} (${reconciling.id}); move the projection when it has finished` })
  }
  const rebuilding = yield* Effect.mapError(platform.first(Id, Sql.statement("SELECT id FROM projection_rebuilds WHERE status = 'running' LIMIT 1")), unavailable)
  if (rebuilding) return yield* new Failure.Conflict({ message: `a rebuild is running (${rebuilding.id}); move the tenant when it has finished` })
  const deleting = yield* Effect.mapError(platform.first(Id, Sql.statement("SELECT id FROM tenant_deletions WHERE tenant_id = ? AND phase NOT IN ('deleted', 'failed') LIMIT 1", tenantId)), unavailable)
  if (deleting) return yield* new Failure.Conflict({ message: `tenant ${tenantId} is being deleted (${deleting.id})` })
  const id = `mv_${(yield* Time.millis).toString(36)}_${crypto.randomUUID().slice(0, 8)}`
  const now = yield* Time.now
  const progress: Progress = { round: 1, cleared: false, tables: {} }
  const [inserted] = yield* Effect.mapError(platform.batch([
    // One move per tenant at a time (its home or one projection): the insert happens only when none is in progress.
    Sql.statement(
      `INSERT INTO tenant_moves (id, tenant_id, from_database, to_database, phase, copied, started_by, started_at, updated_at, projection, parts)
       SELECT ?1, ?2, ?3, ?4, 'frozen', ?5, ?6, ?7, ?7, ?8, ?9
       WHERE NOT EXISTS (SELECT 1 FROM tenant_moves WHERE tenant_id = ?2 AND phase IN ('frozen', 'copying', 'switched'))`,
      id, tenantId, from, to, JSON.stringify(progress), startedBy, now, projection ?? null, parts === undefined ? null : JSON.stringify(parts)
    ),
    projection === undefined
      ? Sql.statement(
        "UPDATE tenant_placements SET frozen_since = ?3, removed_at = NULL WHERE tenant_id = ?1 AND database = ?2 AND EXISTS (SELECT 1 FROM tenant_moves WHERE id = ?4)",
        tenantId, from, now, id
      )
      // The projection's hold: its row (where it is now) holds its writes alone.
      : Sql.statement(
        `INSERT INTO projection_placements (tenant_id, projection, database, placed_at, frozen_since)
         SELECT ?1, ?2, ?3, ?4, ?4 WHERE EXISTS (SELECT 1 FROM tenant_moves WHERE id = ?5)
         ON CONFLICT (tenant_id, projection) DO UPDATE SET frozen_since = excluded.frozen_since`,
        tenantId, projection, from, now, id
      )
  ]), unavailable)
  if (inserted!.changes === 0) {
    const running = yield* active(tenantId)
    return yield* new Failure.Conflict({ message: `tenant ${tenantId} is already being moved${running ? ` (${running.id}${running.projection === null ? "" : `, projection ${running.projection}`})` : ""}` })
  }
  shape.forget([tenantId])
  const first: BatchPayload = { batch_id: id, operation: "move", offset: 0, total: 0 }
  return { record: (yield* find(id))!, first }
})

const isTenantId = Schema.is(TenantId)

/** What removing a placement did. */
export interface Removed {
  readonly tenant_id: string
  readonly read_database: number
  /**
   * `deleted`: the row is gone — its id is not a valid tenant id (placed before ids were checked), so nothing can
   * ever write under it; `removed`: kept as a tombstone (`removed_at`), neither listed nor counted, so a writer
   * that still trusted the placement keeps the tenant on the same database (its next use clears the tombstone).
   */
  readonly outcome: "deleted" | "removed"
}

/** The tables among `tables` that hold a row of `tenantId` in `sql` (a table the database lacks holds none). */
const tablesHolding = (sql: Sql.Sql, tables: ReadonlyArray<string>, tenantId: string) =>
  Effect.gen(function*() {
    const present = yield* Effect.mapError(sql.all(SqliteMaster.Name, Sql.statement(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN (SELECT value FROM json_each(?))", JSON.stringify(tables)
    )), unavailable)
    if (present.length === 0) return []
    // One statement per table, in one round trip (a compound SELECT over every table exceeds D1's term limit).
    const found = yield* Effect.mapError(sql.batch(present.map((t) => Sql.statement(`SELECT 1 AS found FROM ${q(t.name)} WHERE tenant_id = ? LIMIT 1`, tenantId)), Found), unavailable)
    return present.filter((_, i) => (found[i]?.rows.length ?? 0) > 0).map((t) => t.name)
  })

/**
 * Removes the placement of a tenant that holds no data — an operator's mistake, or an id placed before ids were
 * checked: 404 when it is not placed, 409 when a move holds it or it holds anything (a ledger, or a row in any
 * table a move would copy: the answer names them). See `Removed` for what happens to the row.
 */
export const removePlacement = Effect.fn("Move.removePlacement")(function*(tenantId: string) {
  const shape = yield* TenantPlacement
  const platform = yield* Sql.PlatformDatabase
  const placement = yield* Effect.mapError(platform.first(
    PlacementState,
    Sql.statement("SELECT database, frozen_since, removed_at FROM tenant_placements WHERE tenant_id = ?", tenantId)
  ), unavailable)
  const named = JSON.stringify(tenantId.slice(0, 100))
  if (!placement || placement.removed_at !== null) return yield* new Failure.NotFound({ message: `tenant ${named} is not placed` })
  const moving = yield* active(tenantId)
  if (placement.frozen_since !== null || moving) return yield* new Failure.Conflict({ message: `tenant ${named} is being moved${moving ? ` (${moving.id})` : ""}; remove its placement after the move` })
  const ledger = yield* tablesHolding(platform, ["ledger_tenants", "ledger_shards"], tenantId)
  const database = shape.databases[placement.database]
  const rows = database === undefined ? [] : yield* tablesHolding(database, yield* tablesToMove, tenantId)
  const holding = [...(ledger.length > 0 ? ["the ledger"] : []), ...rows]
  if (holding.length > 0) return yield* new Failure.Conflict({ message: `tenant ${named} holds data (${holding.join(", ")}); only a placement that holds none can be removed` })
  const now = yield* Time.now
  const outcome = isTenantId(tenantId) ? "removed" : "deleted"
  yield* Effect.mapError(platform.run(outcome === "deleted"
    ? Sql.statement("DELETE FROM tenant_placements WHERE tenant_id = ? AND frozen_since IS NULL", tenantId)
    : Sql.statement("UPDATE tenant_placements SET removed_at = ? WHERE tenant_id = ? AND frozen_since IS NULL AND removed_at IS NULL", now, tenantId)), unavailable)
  shape.forget([tenantId])
  return { tenant_id: tenantId, read_database: placement.database, outcome } satisfies Removed
})

/** What a step asks of the batch consumer: the next step (after a delay), or nothing when the move has ended. */
export interface Next {
  readonly payload: BatchPayload
  readonly delaySeconds: number
}

export interface Meta {
  readonly columns: ReadonlyArray<string>
  /** Primary-key columns, in key order. */
  readonly key: ReadonlyArray<string>
  readonly numeric: ReadonlyArray<string>
  /** Which of the tenant's rows the move takes, besides `tenant_id` (` AND …`): the applied set of one projection, or all but some. */
  readonly filter?: Sql.Statement | undefined
}

/** The `WHERE` of the tenant's rows a move takes from a table, and its parameters. */
export const whereOf = (meta: Pick<Meta, "filter">, tenantId: string) => ({ sql: `tenant_id = ?${meta.filter?.sql ?? ""}`, params: [tenantId, ...(meta.filter?.params ?? [])] })

export const permanent = (message: string) => new Failure.PermanentError({ reason: "permanent_failure", message })

const Column = Schema.Struct({ tbl: Schema.String, name: Schema.String, type: Schema.String, pk: Schema.Number })
export type Column = typeof Column.Type

/** Every column of the listed tables in one database, in one query: by table (a table it lacks is absent). */
export const columnsIn = (sql: Sql.Sql, tables: ReadonlyArray<string>) =>
  Effect.map(
    sql.all(Column, Sql.statement(
      `SELECT m.name AS tbl, p.name AS name, p.type AS type, p.pk AS pk
       FROM sqlite_master m JOIN pragma_table_info(m.name) p
       WHERE m.type = 'table' AND m.name IN (SELECT value FROM json_each(?)) ORDER BY m.name, p.cid`,
      JSON.stringify(tables)
    )),
    (rows) => {
      const byTable = new Map<string, Array<Column>>()
      for (const row of rows) byTable.set(row.tbl, [...(byTable.get(row.tbl) ?? []), row])
      return byTable
    }
  )

/**
 * How to copy each table: its columns and primary key in the source, which the target must have too (one query
 * per database). A table the source lacks (a registered projection never migrated) has nothing to move and is
 * left out; the tables keep `tables`' order.
 */
export const metasOf = (source: Sql.Sql, target: Sql.Sql, tables: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const [here, there] = yield* Effect.all([columnsIn(source, tables), columnsIn(target, tables)], { concurrency: 2 })
    const metas = new Map<string, Meta>()
    for (const table of tables) {
      const rows = here.get(table)
      if (rows === undefined) continue
      const key = rows.filter((r) => r.pk > 0).sort((a, b) => a.pk - b.pk).map((r) => r.name)
      if (key.length === 0) return yield* permanent(`table ${table} has no primary key: a move cannot copy it idempotently`)
      if (!rows.some((r) => r.name === "tenant_id")) return yield* permanent(`table ${table} has no tenant_id column`)
      const targetColumns = new Set((there.get(table) ?? []).map((r) => r.name))
      const missing = rows.filter((r) => !targetColumns.has(r.name)).map((r) => r.name)
      if (missing.length > 0) {
        return yield* permanent(`the target database lacks ${targetColumns.size === 0 ? `table ${table}` : `column(s) ${missing.join(", ")} of ${table}`}: apply the migrations to every read database, then move again`)
      }
      const numeric = rows.filter((r) => /INT|REAL|NUM|FLOA|DOUB/i.test(r.type)).map((r) => r.name)
      metas.set(table, { columns: rows.map((r) => r.name), key, numeric })
    }
    return metas
  })

/** One page of the tenant's rows of `table` after `after` (primary-key order). */
export const page = (sql: Sql.Sql, table: string, meta: Meta, tenantId: string, after: ReadonlyArray<unknown> | null, limit: number) => {
  const key = meta.key.map(q).join(", ")
  const cursor = after === null ? "" : ` AND (${key}) > (${meta.key.map(() => "?").join(", ")})`
  const where = whereOf(meta, tenantId)
  return sql.all(TableRow, Sql.statement(
    `SELECT ${meta.columns.map(q).join(", ")} FROM ${q(table)} WHERE ${where.sql}${cursor} ORDER BY ${key} LIMIT ${limit}`,
    ...where.params, ...(after ?? [])
  ))
}

/** Statements writing `rows` to `table` (each within D1's 100 bound parameters); a row already there is replaced. */
export const inserts = (table: string, meta: Meta, rows: ReadonlyArray<Record<string, unknown>>): Array<Sql.Statement> => {
  const tuple = `(${meta.columns.map(() => "?").join(", ")})`
  return Sql.chunks(rows, Math.max(1, Math.floor(100 / meta.columns.length))).map((chunk) => ({
    sql: `INSERT OR REPLACE INTO ${q(table)} (${meta.columns.map(q).join(", ")}) VALUES ${chunk.map(() => tuple).join(", ")}`,
    params: chunk.flatMap((row) => meta.columns.map((c) => row[c] ?? null))
  }))
}

/** Deletes up to `limit` of the tenant's rows of `table` (`meta.key`: its primary key); how many. A tenant's deletion drops its rows with it too. */
export const deletePage = (sql: Sql.Sql, table: string, meta: Pick<Meta, "key" | "filter">, tenantId: string, limit: number) => {
  const key = meta.key.map(q).join(", ")
  const where = whereOf(meta, tenantId)
  return sql.run(Sql.statement(
    `DELETE FROM ${q(table)} WHERE (${key}) IN (SELECT ${key} FROM ${q(table)} WHERE ${where.sql} LIMIT ${limit})`,
    ...where.params
  ))
}

/** The tenant's rows of `table` summarised: count, total length of every column, sum of every numeric column. */
export const summary = (sql: Sql.Sql, table: string, meta: Meta, tenantId: string) => {
  const where = whereOf(meta, tenantId)
  return Effect.map(
    sql.first(Summary, Sql.statement(
      `SELECT COUNT(*) AS "rows", ${meta.columns.map((c, i) => `TOTAL(LENGTH(${q(c)})) AS "l${i}"`).join(", ")}${
        meta.numeric.map((c, i) => `, TOTAL(${q(c)}) AS "s${i}"`).join("")
      } FROM ${q(table)} WHERE ${where.sql}`,
      ...where.params
    )),
    (row) => row ?? { rows: 0 }
  )
}

const samePayload = (payload: BatchPayload): BatchPayload => ({ ...payload, offset: payload.offset + 1 })

/** What one step of a move works with: the move, its two databases, its progress, and how it goes on. */
export interface Step {
  readonly move: Row
  readonly shape: TenantPlacement["Service"]
  readonly platform: Sql.Sql
  readonly source: Sql.Sql
  readonly target: Sql.Sql
  readonly progress: Progress
  readonly now: number
  /** The next message of the move, after `delayMs`. */
  readonly next: (delayMs?: number) => Next
}

/** Records the move's phase, progress or verification (each left as it is when not given). */
export const record = (s: Step, fields: { phase?: Phase; progress?: Progress; verified?: string; finished?: boolean }) =>
  Effect.mapError(s.platform.run(Sql.statement(
    `UPDATE tenant_moves SET phase = COALESCE(?2, phase), copied = COALESCE(?3, copied), verified = COALESCE(?4, verified),
       updated_at = ?5, finished_at = CASE WHEN ?6 THEN ?5 ELSE finished_at END WHERE id = ?1`,
    s.move.id, fields.phase ?? null, fields.progress ? JSON.stringify(fields.progress) : null, fields.verified ?? null,
    new Date(s.now).toISOString(), fields.finished ? 1 : 0
  )), unavailable)

/** The tables to copy or drop and how each is shaped. */
export interface Tables {
  readonly tables: ReadonlyArray<string>
  readonly meta: (table: string) => Effect.Effect<Meta>
}

/** copying, before the copy: the tenant's rows left in the target by an earlier move that failed — none may survive into this copy. */
const clearTarget = (s: Step, { tables, meta }: Tables) =>
  Effect.gen(function*() {
    let budget = rowsPerStep
    for (const table of tables) {
      const m = yield* meta(table)
      for (let deleted = rowsPerPage; deleted === rowsPerPage && budget > 0; budget -= deleted) deleted = yield* deletePage(s.target, table, m, s.move.tenant_id, rowsPerPage)
      if (budget <= 0) return s.next()
    }
    yield* record(s, { progress: { ...s.progress, cleared: true } })
    return s.next()
  })

/**
 * copying: up to `rowsPerStep` rows, a page (one target transaction) at a time; the cursors recorded once, after them: a
 * step that fails midway copies its pages again (`INSERT OR REPLACE`: the same rows). The tables' cursors after it.
 */
const copyPages = (s: Step, { tables, meta }: Tables) =>
  Effect.gen(function*() {
    let budget = rowsPerStep
    const copied: Record<string, TableProgress> = { ...s.progress.tables }
    for (const table of tables) {
      const m = yield* meta(table)
      let state = copied[table] ?? { rows: 0, after: null, done: false }
      while (!state.done && budget > 0) {
        const rows = yield* page(s.source, table, m, s.move.tenant_id, state.after, rowsPerPage)
        if (rows.length > 0) yield* s.target.batch(inserts(table, m, rows))
        const last = rows.at(-1)
        state = { rows: state.rows + rows.length, after: last ? m.key.map((k) => last[k]) : state.after, done: rows.length < rowsPerPage }
        copied[table] = state
        budget -= rows.length
      }
      if (!state.done) break
    }
    yield* record(s, { progress: { ...s.progress, tables: copied } })
    return copied
  })

/** Everything copied: source and target must agree on every table before the switch; else copy again (up to `rounds`). */
const verifyAndSwitch = (s: Step, { tables, meta }: Tables) =>
  Effect.gen(function*() {
    const { move, progress } = s
    const verified: Record<string, { rows: number; equal: boolean }> = {}
    for (const table of tables) {
      const m = yield* meta(table)
      const [a, b] = yield* Effect.all([summary(s.source, table, m, move.tenant_id), summary(s.target, table, m, move.tenant_id)], { concurrency: 2 })
      verified[table] = { rows: a.rows ?? 0, equal: JSON.stringify(a) === JSON.stringify(b) }
    }
    const equal = Object.values(verified).every((v) => v.equal)
    if (!equal) {
      const differing = Object.entries(verified).filter(([, v]) => !v.equal).map(([t]) => t)
      if (progress.round >= rounds) return yield* permanent(`after ${rounds} copies the source and target still differ (${differing.join(", ")}): a writer ignores the hold`)
      yield* Effect.logWarning(`move ${move.id} of ${move.tenant_id}: ${differing.join(", ")} changed during the copy; copying again`)
      yield* record(s, { progress: { round: progress.round + 1, cleared: false, tables: {} }, verified: JSON.stringify(verified) })
      return s.next()
    }
    // The switch: the placement moves and the hold ends in one platform transaction.
    const switchedAt = new Date(s.now).toISOString()
    yield* Effect.mapError(s.platform.batch([
      ...(move.projection === null
        ? [
          Sql.statement("UPDATE tenant_placements SET database = ?2, frozen_since = NULL WHERE tenant_id = ?1 AND database = ?3", move.tenant_id, move.to_database, move.from_database),
          // A projection placed on the home's new database is part of the home from now on (one in parts stays in its parts).
          Sql.statement("DELETE FROM projection_placements WHERE tenant_id = ?1 AND database = ?2 AND parts IS NULL", move.tenant_id, move.to_database)
        ]
        : [
          // Back to the tenant's home: no row; elsewhere: the row says where, and the projection's hold ends.
          Sql.statement(
            "DELETE FROM projection_placements WHERE tenant_id = ?1 AND projection = ?2 AND ?3 = (SELECT database FROM tenant_placements WHERE tenant_id = ?1)",
            move.tenant_id, move.projection, move.to_database
          ),
          Sql.statement(
            "UPDATE projection_placements SET database = ?3, frozen_since = NULL, placed_at = ?4 WHERE tenant_id = ?1 AND projection = ?2",
            move.tenant_id, move.projection, move.to_database, switchedAt
          )
        ]),
      Sql.statement("UPDATE tenant_moves SET phase = 'switched', verified = ?2, updated_at = ?3 WHERE id = ?1 AND phase = 'copying'", move.id, JSON.stringify(verified), switchedAt)
    ]), unavailable)
    s.shape.forget([move.tenant_id])
    return s.next(s.shape.cacheMs + settleMs)
  })

/** switched: once no isolate trusts the old placement, the source's rows go. */
export const dropSource = (s: Step, { tables, meta }: Tables) =>
  Effect.gen(function*() {
    const { move, progress } = s
    const wait = Date.parse(move.updated_at) + s.shape.cacheMs + settleMs - s.now
    const dropped: Record<string, TableProgress> = { ...progress.dropped }
    if (wait > 0 && Object.keys(dropped).length === 0) return s.next(wait)
    let budget = rowsPerStep
    for (const table of tables) {
      const m = yield* meta(table)
      let state = dropped[table] ?? { rows: 0, after: null, done: false }
      while (!state.done && budget > 0) {
        const deleted = yield* deletePage(s.source, table, m, move.tenant_id, rowsPerPage)
        state = { rows: state.rows + deleted, after: null, done: deleted < rowsPerPage }
        dropped[table] = state
        budget -= deleted
      }
      if (!state.done) {
        yield* record(s, { progress: { ...progress, dropped } })
        return s.next()
      }
    }
    yield* record(s, { phase: "dropped", progress: { ...progress, dropped }, finished: true })
    return undefined
  })

/**
 * The tables a move takes and, per table, which of the tenant's rows besides `tenant_id`: for one projection, its
 * table and its applied set; for the tenant's home, every table a move copies but those of its projections placed in
 * another database (and their applied sets), which stay there.
 */
export const takenBy = (move: Row) =>
  Effect.gen(function*() {
    const registry = yield* Registry
    if (move.projection !== null) {
      const p = registry.projection(move.projection)
      if (!p) return yield* permanent(`projection ${move.projection} is no longer registered`)
      const filters: Record<string, Sql.Statement> = { projection_applied: Sql.statement(" AND projection = ?", p.name) }
      return { tables: [Projection.tableName(p), "projection_applied"], filters }
    }
    const platform = yield* Sql.PlatformDatabase
    const elsewhere = (yield* Effect.mapError(platform.all(Name, Sql.statement(
      "SELECT projection FROM projection_placements WHERE tenant_id = ?1 AND (database <> ?2 OR parts IS NOT NULL)", move.tenant_id, move.from_database
    )), unavailable)).map((r) => r.projection)
    const away = new Set(elsewhere.flatMap((name) => {
      const p = registry.projection(name)
      return p ? [Projection.tableName(p)] : []
    }))
    const filters: Record<string, Sql.Statement> = elsewhere.length === 0 ? {} : {
      // Their applied sets stay with them (a reconcile's shadow set, `<name>__<job>`, too).
      projection_applied: Sql.statement(
        " AND NOT EXISTS (SELECT 1 FROM json_each(?) a WHERE projection = a.value OR substr(projection, 1, length(a.value) + 2) = a.value || '__')",
        JSON.stringify(elsewhere)
      )
    }
    return { tables: (yield* tablesToMove).filter((t) => !away.has(t)), filters }
  })

export const step = Effect.fn("Move.step")(function*(payload: BatchPayload) {
  const shape = yield* TenantPlacement
  const platform = yield* Sql.PlatformDatabase
  const move = yield* find(payload.batch_id)
  if (!move || move.phase === "dropped" || move.phase === "failed") return undefined
  const source = shape.databases[move.from_database]
  const target = shape.databases[move.to_database]
  if (!source || !target) return yield* permanent(`read database ${!source ? move.from_database : move.to_database} is not bound`)
  const progress = progressOf(move)
  const now = yield* Time.millis
  const next = (delayMs = 0): Next => ({ payload: samePayload(payload), delaySeconds: Math.max(0, Math.ceil(delayMs / 1000)) })
  const s: Step = { move, shape, platform, source, target, progress, now, next }

  if (move.phase === "frozen") {
    // Every isolate reads the hold within `cacheMs` of it; then a write that passed the check just before lands.
    const wait = Date.parse(move.started_at) + shape.cacheMs + settleMs - now
    if (wait > 0) return next(wait)
    yield* record(s, { phase: "copying" })
    return next()
  }

  // What to copy or drop, and how: read once per step, and not while waiting.
  const taken = yield* takenBy(move)
  const metas = yield* metasOf(source, target, taken.tables)
  const tables: Tables = { tables: [...metas.keys()], meta: (table) => Effect.succeed({ ...metas.get(table)!, filter: taken.filters[table] }) }

  if (move.phase === "copying") {
    if (!progress.cleared) return yield* clearTarget(s, tables)
    const copied = yield* copyPages(s, tables)
    if (tables.tables.some((table) => !copied[table]?.done)) return next()
    return yield* verifyAndSwitch(s, tables)
  }
  return yield* dropSource(s, tables)
})

/**
 * Ends a move `failed` with `error`; lifts the tenant's hold unless the move has switched (then the
 * placement is already the target's and the hold is gone; the source's leftover rows are only unused).
 */
export const fail = Effect.fn("Move.fail")(function*(id: string, error: string, now: string) {
  const platform = yield* Sql.PlatformDatabase
  const shape = yield* TenantPlacement
  const move = yield* find(id)
  if (!move || move.phase === "dropped" || move.phase === "failed") return
  yield* Effect.mapError(platform.batch([
    Sql.statement("UPDATE tenant_moves SET phase = 'failed', error = ?2, updated_at = ?3, finished_at = ?3 WHERE id = ?1 AND phase IN ('frozen', 'copying', 'switched')", id, error.slice(0, 2_000), now),
    ...(move.projection === null
      ? [Sql.statement("UPDATE tenant_placements SET frozen_since = NULL WHERE tenant_id = ?1 AND database = ?2", move.tenant_id, move.from_database)]
      : [
        // The projection stays where it was: at home, no row; elsewhere, its row without the hold.
        Sql.statement(
          "DELETE FROM projection_placements WHERE tenant_id = ?1 AND projection = ?2 AND database = ?3 AND database = (SELECT database FROM tenant_placements WHERE tenant_id = ?1)",
          move.tenant_id, move.projection, move.from_database
        ),
        Sql.statement("UPDATE projection_placements SET frozen_since = NULL WHERE tenant_id = ?1 AND projection = ?2 AND database = ?3", move.tenant_id, move.projection, move.from_database)
      ])
  ]), unavailable)
  shape.forget([move.tenant_id])
})
