/**
 * Rebuilding a projection from the ledger, without readers ever seeing a
 * half-built table.
 *
 * `start` creates a shadow copy of the projection's table (same DDL), records
 * the rebuild as running — from then on the live projections consumer writes
 * every fact to the shadow too — and enqueues the first slice on
 * `factline-batch`. Each `step` replays the facts of a slice of shards (in
 * (stream, sequence) order, straight from the LedgerShards) into the shadow
 * and enqueues the next slice. When no shard is left, `swap` replaces the live
 * table with the shadow in one D1 transaction (indexes recreated, the applied
 * set of additive projections swapped with it). Replayed facts only ever reach
 * the projection being rebuilt: processors and webhooks never see them.
 *
 * Every write is idempotent (row guards, applied sets), so a step that runs
 * twice, or overlaps with live writes, changes nothing.
 *
 * A fact the projection's mapping throws for is left out of the shadow, as
 * live traffic leaves it out of the live table (ProjectionConsumer), and the
 * replay goes on: the record counts such facts (`facts_failed`) and keeps the
 * first one's error (`first_failure`), so one bad fact neither stops the
 * rebuild nor leaves it running forever. Facts are replayed in their type's
 * latest shape (older `schema_version`s upcast); one newer than the code is
 * counted and described the same way, never applied as if it were known.
 *
 * A rebuild replays every tenant's facts, so only a platform operator may start
 * one (the HTTP edge checks the `platform` scope). Its record carries the
 * tenant of the token that started it and is read only by that tenant (`get`);
 * a refusal never names a batch its caller could not read.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Result from "effect/Result"
import type { BatchPayload } from "@factline/schemas"
import { Ledger } from "../ledger/Ledger.js"
import * as LedgerTopology from "../ledger/LedgerTopology.js"
import type { Fact } from "@factline/schemas"
import * as Projection from "../definitions/Projection.js"
import { KeyRing } from "../personal/KeyRing.js"
import * as Sealing from "../personal/Sealing.js"
import { Registry } from "../registry/Registry.js"
import { partitionMappable } from "./ProjectionConsumer.js"
import { ProjectionStore } from "./ProjectionStore.js"
import * as Failure from "../failures/Failure.js"
import * as Time from "../platform/Time.js"
import * as Sql from "../platform/Sql.js"
import * as SqliteMaster from "../tables/SqliteMaster.js"
import * as Placement from "../placement/Placement.js"
import * as Parts from "../placement/Parts.js"
import * as Move from "../placement/Move.js"
import * as Deletion from "../placement/Deletion.js"
import * as Reshard from "../placement/Reshard.js"

export const shardsPerSlice = 25
/** Facts per transaction when replaying: each write applies its facts completely (increments with their applied set). */
export const factsPerWrite = Projection.factsPerStatement
/** Platform operations run under this tenant id on the batch queue. */
export const platformTenant = "factline"

/**
 * A rebuild's row in `projection_rebuilds`. `tenant_id`: the tenant of the token that started it, the only one
 * that reads it; `facts_failed`: replayed facts the mapping threw for, left out of the rebuilt table;
 * `first_failure`: the first of them (fact id, type, stream) and the mapping's error.
 */
export const RebuildRecord = Schema.Struct({
  id: Schema.String,
  tenant_id: Schema.String,
  projection: Schema.String,
  shadow_table: Schema.String,
  status: Schema.Literals(["running", "completed", "failed"]),
  shards_total: Schema.Number,
  shards_done: Schema.Number,
  facts_replayed: Schema.Number,
  facts_failed: Schema.Number,
  first_failure: Schema.NullOr(Schema.String),
  error: Schema.NullOr(Schema.String),
  started_at: Schema.String,
  finished_at: Schema.NullOr(Schema.String)
})
export type RebuildRecord = typeof RebuildRecord.Type

export interface SliceItem {
  readonly projection: string
  /** Replay shards whose key sorts after this one. */
  readonly after: string
}

const q = (identifier: string) => `"${identifier.replace(/"/g, '""')}"`

const ddl = (table: string) =>
  Effect.gen(function*() {
    const store = yield* ProjectionStore
    const rows = yield* store.query(SqliteMaster.Definition, {
      sql: "SELECT type, sql FROM sqlite_master WHERE tbl_name = ? AND sql IS NOT NULL ORDER BY type DESC",
      params: [table]
    })
    return { table: rows.find((r) => r.type === "table")?.sql, indexes: rows.filter((r) => r.type === "index").map((r) => r.sql) }
  })

/** The CREATE TABLE of `shadow`, a copy of the live table's DDL (undefined when the table does not exist). */
export const shadowStatement = (live: string, shadow: string) =>
  Effect.map(ddl(live), ({ table }) =>
    table === undefined ? undefined : { sql: table.replace(/^CREATE TABLE\s+(["`]?)[^"`\s(]+\1/i, `CREATE TABLE ${q(shadow)}`), params: [] })

const unavailable = Failure.unavailable("the rebuild records")

const Running = Schema.Struct({ id: Schema.String, tenant_id: Schema.String })

/** The record by id, whoever started it: for the batch consumer only, never for a caller. */
const find = (id: string) =>
  Effect.flatMap(Effect.service(Sql.PlatformDatabase), (sql) => Effect.mapError(sql.first(RebuildRecord, Sql.statement("SELECT * FROM projection_rebuilds WHERE id = ?", id)), unavailable))

/** The record, if it exists and `tenantId` started it: another tenant's batch reads as missing. */
export const get = Effect.fn("Rebuild.get")(function*(tenantId: string, id: string) {
  const sql = yield* Sql.PlatformDatabase
  return yield* Effect.mapError(sql.first(RebuildRecord, Sql.statement("SELECT * FROM projection_rebuilds WHERE id = ? AND tenant_id = ?", id, tenantId)), unavailable)
})

/**
 * `tenantId`'s records newest first (by `started_at`, then id), after a keyset `cursor` of both, with `status`
 * when given: at most `limit`.
 */
export const page = Effect.fn("Rebuild.page")(function*(tenantId: string, options: { readonly status?: string | undefined; readonly cursor?: readonly [string, string] | undefined; readonly limit: number }) {
  const sql = yield* Sql.PlatformDatabase
  const { status, cursor, limit } = options
  const clauses = ["tenant_id = ?", ...(status !== undefined ? ["status = ?"] : []), ...(cursor ? ["(started_at, id) < (?, ?)"] : [])]
  return yield* Effect.mapError(sql.all(RebuildRecord, Sql.statement(
    `SELECT * FROM projection_rebuilds WHERE ${clauses.join(" AND ")} ORDER BY started_at DESC, id DESC LIMIT ?`,
    tenantId, ...(status !== undefined ? [status] : []), ...(cursor ?? []), limit
  )), unavailable)
})

/** Runs `effect` on each read database in turn (the read database in scope), in index order. */
const onEachDatabase = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.flatMap(Effect.service(Placement.TenantPlacement), (placement) =>
  Effect.forEach(placement.databases, (sql) => Effect.provideService(effect, Sql.ReadDatabase, sql)))

/**
 * Creates the shadow table and the rebuild record, owned by `tenantId` (the
 * caller's tenant); returns the record and the first slice to enqueue. A
 * rebuild the system starts (a projection catching up, operations/CatchUp.ts)
 * is named `cu_…` instead of `rb_…`.
 */
export const start = Effect.fn("Rebuild.start")(function*(projectionName: string, tenantId: string, startedBy: "operator" | "system" = "operator") {
  const registry = yield* Registry
  const store = yield* ProjectionStore
  const platform = yield* Sql.PlatformDatabase
  const p = registry.projection(projectionName)
  if (!p) return yield* new Failure.NotFound({ message: `no projection "${projectionName}"` })
  const running = yield* Effect.mapError(platform.first(Running, Sql.statement(
    "SELECT id, tenant_id FROM projection_rebuilds WHERE projection = ? AND status = 'running'", p.name
  )), unavailable)
  const moving = yield* Move.active()
  if (moving) return yield* new Failure.Conflict({ message: "a tenant is being moved between read databases; rebuild when the move has ended" })
  const deleting = yield* Deletion.active()
  if (deleting) return yield* new Failure.Conflict({ message: "a tenant's data is being deleted; rebuild when the deletion has ended" })
  // Between a stream's copy and its drop, both its old and its new shard hold it: a rebuild would read it twice.
  const resharding = yield* Reshard.active()
  if (resharding) return yield* new Failure.Conflict({ message: "a tenant's ledger is being resharded; rebuild when the reshard has ended" })
  if (running) {
    // The id only to the tenant that may read the record.
    const which = running.tenant_id === tenantId ? ` (${running.id})` : ""
    return yield* new Failure.Conflict({ message: `a rebuild of ${p.name} is already running${which}` })
  }
  const live = Projection.tableName(p)
  // Every read database has the same migrations: the first one's DDL is every one's.
  const { table } = yield* Effect.provideService(ddl(live), Sql.ReadDatabase, (yield* Placement.TenantPlacement).databases[0]!)
  if (!table) return yield* new Failure.NotFound({ message: `table ${live} does not exist; apply the migrations` })
  const id = `${startedBy === "system" ? "cu" : "rb"}_${(yield* Time.millis).toString(36)}_${crypto.randomUUID().slice(0, 8)}`
  const shadow = `${live}__${id}`
  const createShadow = table.replace(/^CREATE TABLE\s+(["`]?)[^"`\s(]+\1/i, `CREATE TABLE ${q(shadow)}`)
  const total = yield* LedgerTopology.shardCount
  const now = yield* Time.now
  const record = {
    sql: `INSERT INTO projection_rebuilds (id, tenant_id, projection, shadow_table, status, shards_total, shards_done, facts_replayed, started_at)
          VALUES (?, ?, ?, ?, 'running', ?, 0, 0, ?) ON CONFLICT (id) DO NOTHING`,
    params: [id, tenantId, p.name, shadow, total, now]
  }
  // Each read database gets the shadow and a copy of the record (what its live writers read to write the shadow
  // too); the platform database keeps the record whose progress the steps count (the same row when it is read
  // database 0).
  yield* onEachDatabase(store.execute([
    { sql: createShadow, params: [] },
    { sql: "DELETE FROM projection_applied WHERE projection = ?", params: [Projection.shadowTarget(p, shadow).appliedAs] },
    record
  ]))
  yield* Effect.mapError(platform.run(Sql.statement(record.sql, ...record.params)), unavailable)
  const first: BatchPayload = { batch_id: id, operation: "rebuild", items: [{ projection: p.name, after: "" } satisfies SliceItem], offset: 0, total }
  return { record: (yield* find(id))!, first }
})

/** Replays one slice of shards into the shadow; returns the next slice, or undefined once swapped. */
export const step = Effect.fn("Rebuild.step")(function*(payload: BatchPayload) {
  const registry = yield* Registry
  const store = yield* ProjectionStore
  const ledger = yield* Ledger
  const record = yield* find(payload.batch_id)
  if (!record || record.status !== "running") return undefined
  const p = registry.projection(record.projection)
  if (!p) return yield* Effect.die(new Error(`projection ${record.projection} is no longer registered`))
  const item = (payload.items?.[0] ?? { after: "" }) as SliceItem
  const shards = yield* LedgerTopology.shardsAfter(item.after, shardsPerSlice)
  const target = Projection.shadowTarget(p, record.shadow_table)
  const stored = (yield* Effect.forEach(shards, (s) => ledger.readShard(s), { concurrency: 8 })).flat()
  const failures: Array<string> = []
  // The projection's facts in their latest shape; one the code cannot read (newer than it, a failing upcaster) is left out and counted.
  const types = new Set(Projection.factTypes(p))
  const mapped = stored.filter((f) => types.has(f.type))
  // Personal fields opened for the mappings (the marker once erased: a rebuild after an erasure writes no plaintext of it).
  const opened = registry.hasPersonalData ? yield* Sealing.openFacts(yield* KeyRing, registry.personalFact, mapped) : mapped
  const facts: Array<Fact> = []
  for (const fact of opened) {
    const current = registry.latest(fact)
    if (Result.isSuccess(current)) facts.push(current.success)
    else failures.push(`fact ${fact.fact_id} (${fact.type} in ${fact.tenant_id}/${fact.stream}): ${current.failure.message}`)
  }
  // Each tenant's facts into the shadow in the read database holding the tenant's projection (its home, elsewhere, or its row's part).
  const placement = yield* Placement.TenantPlacement
  for (const group of yield* Parts.grouped(placement, p, facts)) {
    for (let i = 0; i < group.items.length; i += factsPerWrite) {
      yield* Effect.provideService(store.execute(replayStatements(p, group.items.slice(i, i + factsPerWrite), target, failures)), Sql.ReadDatabase, group.sql)
    }
  }
  if (failures.length > 0) yield* Effect.logWarning(`rebuild ${record.id} of ${p.name}: ${failures.length} fact(s) could not be mapped; first: ${failures[0]}`)
  const last = shards.at(-1) ?? item.after
  const platform = yield* Sql.PlatformDatabase
  yield* Effect.mapError(platform.run(Sql.statement(
    `UPDATE projection_rebuilds SET
       shards_done = (SELECT COUNT(*) FROM ledger_shards WHERE shard_key <= ?),
       facts_replayed = facts_replayed + ?,
       facts_failed = facts_failed + ?,
       first_failure = COALESCE(first_failure, ?)
     WHERE id = ?`,
    last, stored.length, failures.length, failures[0] ?? null, record.id
  )), unavailable)
  if (shards.length === shardsPerSlice) {
    return { ...payload, items: [{ projection: p.name, after: last } satisfies SliceItem], offset: payload.offset + shards.length } satisfies BatchPayload
  }
  yield* swap(p, record)
  return undefined
})

/**
 * The statements that replay `facts` into `target`; facts the mapping throws for are left out and
 * described in `failures` (the whole chunk is only split when its mapping threw).
 */
export const replayStatements = (p: Projection.Projection, facts: ReadonlyArray<Fact>, target: Projection.Target, failures: Array<string>) => {
  try {
    return Projection.batchStatements(p, facts, target)
  } catch {
    const { mappable, failed } = partitionMappable(p, facts)
    for (const { fact, error } of failed) failures.push(`fact ${fact.fact_id} (${fact.type} in ${fact.tenant_id}/${fact.stream}): ${error}`)
    return Projection.batchStatements(p, mappable, target)
  }
}

/**
 * Replaces the live table with the shadow on each read database, each in one transaction that also ends the
 * database's copy of the record (its live writers stop writing the shadow with it); a database already swapped
 * (a step run again) is skipped. Then the platform's record is completed.
 */
export const swap = Effect.fn("Rebuild.swap")(function*(p: Projection.Projection, record: RebuildRecord) {
  const store = yield* ProjectionStore
  const live = Projection.tableName(p)
  const applied = Projection.shadowTarget(p, record.shadow_table).appliedAs
  const now = yield* Time.now
  const complete = { sql: "UPDATE projection_rebuilds SET status = 'completed', finished_at = ?, shards_done = shards_total WHERE id = ?", params: [now, record.id] }
  yield* onEachDatabase(Effect.gen(function*() {
    const { table } = yield* ddl(record.shadow_table)
    if (table === undefined) return
    const { indexes } = yield* ddl(live)
    yield* store.execute([
      { sql: `DROP TABLE ${q(live)}`, params: [] },
      { sql: `ALTER TABLE ${q(record.shadow_table)} RENAME TO ${q(live)}`, params: [] },
      ...indexes.map((sql) => ({ sql, params: [] })),
      { sql: "DELETE FROM projection_applied WHERE projection = ?", params: [p.name] },
      { sql: "UPDATE projection_applied SET projection = ? WHERE projection = ?", params: [p.name, applied] },
      complete
    ])
  }))
  const platform = yield* Sql.PlatformDatabase
  yield* Effect.mapError(platform.run(Sql.statement(complete.sql, ...complete.params)), unavailable)
})

/**
 * The rebuild cannot finish (a step exhausted its retries): it ends `failed`
 * with the error and its shadow table is dropped, so a new rebuild of the
 * projection can start. Live writes stop going to the shadow with the status.
 */
export const fail = Effect.fn("Rebuild.fail")(function*(id: string, error: string, now: string) {
  const store = yield* ProjectionStore
  const record = yield* find(id)
  if (!record || record.status !== "running") return
  const failed = {
    sql: "UPDATE projection_rebuilds SET status = 'failed', error = ?, finished_at = ? WHERE id = ? AND status = 'running'",
    params: [error.slice(0, 2_000), now, id]
  }
  yield* onEachDatabase(store.execute([failed, { sql: `DROP TABLE IF EXISTS ${q(record.shadow_table)}`, params: [] }]))
  const platform = yield* Sql.PlatformDatabase
  yield* Effect.mapError(platform.run(Sql.statement(failed.sql, ...failed.params)), unavailable)
})
