/**
 * What a tenant's deletion (Deletion.ts) does in each store, a bounded slice at a time, and the re-count of what is
 * left: terminating its running workflow instances, emptying its ledger shard objects and key store, deleting its
 * R2 objects, deleting its rows from every D1 database. Each function deletes what is still there and answers what
 * it deleted; it keeps no record (Deletion.ts does), so a slice run twice deletes nothing twice.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { tenantKey } from "@factline/schemas"
import * as Failure from "../failures/Failure.js"
import { Ledger } from "../ledger/Ledger.js"
import * as Shards from "../ledger/Shards.js"
import { PayloadBucket } from "../platform/Bindings.js"
import * as ObjectLayout from "../platform/ObjectLayout.js"
import * as Sql from "../platform/Sql.js"
import { Workflows } from "../platform/Workflows.js"
import * as Move from "./Move.js"
import { TenantPlacement } from "./Placement.js"

/** Per store, a count per table, shard group, prefix or outcome. */
export type Counts = Readonly<Record<string, number>>
export type PerStore = Readonly<Record<string, Counts>>

/** The tenant's personal-data key store: one more object of the LedgerShard class. */
export const keyStoreKey = (tenantId: string) => `${tenantId}/#keys`

/** The tenant's prefixes in R2 that hold only its objects: its own, and its offloaded payloads. */
export const prefixesOf = (tenantId: string) => [ObjectLayout.tenantPrefix(tenantId), `${ObjectLayout.payloadsPrefix}${ObjectLayout.tenantPrefix(tenantId)}`]

/** The prefixes whose objects hold many tenants' data: walked object by object. */
export const sharedPrefixes = [ObjectLayout.keptPrefix, ObjectLayout.spilledPrefix] as const

/** Shard objects emptied per step (in parallel, `shardConcurrency` at a time). */
export const shardsPerStep = 64
const shardConcurrency = 8
/** R2 keys deleted per step (one listing page, one delete call). */
export const objectsPerStep = 1_000
/** Shared objects (kept events, spilled dead letters) read per step. */
export const sharedObjectsPerStep = 100
/** Running workflow instances terminated per step. */
export const instancesPerStep = 50

const Count = Schema.Struct({ n: Schema.Number })
const ShardCount = Schema.Struct({ shard_count: Schema.Number })
const ShardKey = Schema.Struct({ shard_key: Schema.String })
const InstanceId = Schema.Struct({ instance_id: Schema.String })
const QueueName = Schema.Struct({ queue: Schema.String })
const TableName = Schema.Struct({ name: Schema.String })

const unavailable = Failure.unavailable("the platform database")
const q = (name: string) => `"${name.replaceAll('"', '""')}"`
const service = "the tenant's objects (R2)"

/** `removed` with `counts` added to `store`'s. */
export const add = (removed: PerStore, store: string, counts: Counts): PerStore => {
  const sum: Record<string, number> = { ...removed[store] }
  for (const [k, n] of Object.entries(counts)) sum[k] = (sum[k] ?? 0) + n
  return { ...removed, [store]: sum }
}

/** Whether the platform still knows the tenant: a placement or a ledger. */
export const known = (platform: Sql.Sql, tenantId: string) =>
  Effect.map(
    Effect.mapError(platform.first(Count, Sql.statement(
      "SELECT (SELECT COUNT(*) FROM tenant_placements WHERE tenant_id = ?1) + (SELECT COUNT(*) FROM ledger_tenants WHERE tenant_id = ?1) AS n", tenantId
    )), unavailable),
    (row) => (row?.n ?? 0) > 0
  )

/** Terminates up to `instancesPerStep` of the tenant's running instances, marking each row; undefined when none runs. */
export const terminateRunning = Effect.fn("DeletionStores.terminateRunning")(function*(platform: Sql.Sql, tenantId: string) {
  const running = yield* Effect.mapError(platform.all(InstanceId, Sql.statement(
    `SELECT instance_id FROM workflow_instances WHERE tenant_id = ? AND status NOT IN ('complete', 'failed', 'terminated')
     ORDER BY instance_id LIMIT ${instancesPerStep}`,
    tenantId
  )), unavailable)
  if (running.length === 0) return undefined
  const workflows = yield* Workflows
  const counts = { terminated: 0, already_ended: 0 }
  for (const { instance_id: id } of running) {
    // An instance that has ended (the door's 409) or that Cloudflare no longer knows has nothing left to stop.
    const done = yield* workflows.terminate(id).pipe(Effect.catchTag("Conflict", () => Effect.succeed("missing" as const)))
    counts[done === "terminated" ? "terminated" : "already_ended"]++
    yield* Effect.mapError(platform.run(Sql.statement(
      "UPDATE workflow_instances SET status = 'terminated' WHERE tenant_id = ? AND instance_id = ?", tenantId, id
    )), unavailable)
  }
  return counts
})

/** The tenant's shard objects: every index of its recorded count, every registered shard, and its key store. */
export const shardKeysOf = Effect.fn("DeletionStores.shardKeysOf")(function*(platform: Sql.Sql, tenantId: string) {
  const [count, registered] = yield* Effect.mapError(Effect.all([
    platform.first(ShardCount, Sql.statement("SELECT shard_count FROM ledger_tenants WHERE tenant_id = ?", tenantId)),
    platform.all(ShardKey, Sql.statement("SELECT shard_key FROM ledger_shards WHERE tenant_id = ?", tenantId))
  ]), unavailable)
  const keys = new Set<string>()
  for (let i = 0; i < (count?.shard_count ?? 0); i++) keys.add(Shards.shardKey(tenantId, i))
  for (const r of registered) keys.add(r.shard_key)
  keys.add(keyStoreKey(tenantId))
  return [...keys]
})

/** Empties these shard objects (storage and alarm), `shardConcurrency` at a time. */
export const emptyShards = Effect.fn("DeletionStores.emptyShards")(function*(keys: ReadonlyArray<string>) {
  const ledger = yield* Ledger
  yield* Effect.forEach(keys, (key) => ledger.deleteShard(key), { concurrency: shardConcurrency, discard: true })
})

/** Deletes the first page of the tenant's own objects still there; the prefix and how many, undefined when none is left. */
export const deleteOwnObjects = Effect.fn("DeletionStores.deleteOwnObjects")(function*(tenantId: string) {
  const storage = (yield* PayloadBucket).named(service)
  for (const prefix of prefixesOf(tenantId)) {
    // Listed afresh each time: what was deleted is gone from the listing, so a retried step picks up where it is.
    const keys = yield* Stream.runCollect(Stream.take(storage.list(prefix), objectsPerStep))
    if (keys.length === 0) continue
    yield* storage.delete(keys)
    return { prefix, count: keys.length }
  }
  return undefined
})

/** A kept-events object without the tenant's lines (undefined: none was the tenant's). */
const withoutTenantLines = (text: string, tenantId: string) => {
  const lines = text.split("\n").filter((line) => line !== "")
  const kept = lines.filter((line) => {
    try {
      return (JSON.parse(line) as { tenant_id?: unknown }).tenant_id !== tenantId
    } catch {
      return true
    }
  })
  return kept.length === lines.length ? undefined : { kept, removed: lines.length - kept.length }
}

/** Whether a spilled dead letter (its `dead_messages` row) is the tenant's. */
const spilledOf = (text: string, tenantId: string) => {
  try {
    return (JSON.parse(text) as { row?: { tenant_id?: unknown } }).row?.tenant_id === tenantId
  } catch {
    return false
  }
}

/** How much of the tenant a shared object holds: kept events' lines, or 1 for its spilled dead letter. */
const heldIn = (prefix: string, text: string, tenantId: string) =>
  prefix === ObjectLayout.keptPrefix ? (withoutTenantLines(text, tenantId)?.removed ?? 0) : spilledOf(text, tenantId) ? 1 : 0

/**
 * Walks up to `sharedObjectsPerStep` objects of a shared prefix after `after`: the tenant's kept events are cut out
 * of each object (deleted when nothing else is left in it), its spilled dead letters deleted. What was removed and
 * where the walk is.
 */
export const cleanShared = Effect.fn("DeletionStores.cleanShared")(function*(prefix: string, after: string | null, tenantId: string) {
  const storage = (yield* PayloadBucket).named(service)
  const keys = yield* Stream.runCollect(Stream.take(
    after === null ? storage.list(prefix) : Stream.filter(storage.list(prefix), (key) => key > after),
    sharedObjectsPerStep
  ))
  let removed = 0
  for (const key of keys) {
    const text = yield* storage.text(key)
    if (text === undefined || heldIn(prefix, text, tenantId) === 0) continue
    const left = prefix === ObjectLayout.keptPrefix ? withoutTenantLines(text, tenantId)!.kept : []
    if (left.length === 0) yield* storage.delete([key])
    else yield* storage.put(key, left.join("\n"), "application/x-ndjson")
    removed += heldIn(prefix, text, tenantId)
  }
  return { removed, after: keys.at(-1) ?? after, done: keys.length < sharedObjectsPerStep }
})

/** Every database that may hold the tenant's rows, each named by its binding, the platform's flagged. */
export const databasesOf = (shape: TenantPlacement["Service"]) =>
  shape.everywhere.map((sql) => {
    const platform = sql.identity === shape.platform.identity
    const index = shape.databases.findIndex((d) => d.identity === sql.identity)
    return { sql, store: `d1:${platform ? "DB" : `FACTLINE_READ_DB_${index}`}`, platform }
  })

/** The listed tables one database has, with their primary keys. */
const tablesIn = (sql: Sql.Sql, tables: ReadonlyArray<string>) =>
  Effect.map(Effect.mapError(Move.columnsIn(sql, tables), unavailable), (columns) =>
    tables.flatMap((table) => {
      const rows = columns.get(table)
      if (rows === undefined) return []
      const key = rows.filter((r) => r.pk > 0).sort((a, b) => a.pk - b.pk).map((r) => r.name)
      return [{ table, key: key.length > 0 ? key : ["rowid"] }]
    }))

/** The inbox keys of the tenant: `<tenant>/…` (`tenantKey`), a range of the primary key in each queue. */
const inboxRange = (tenantId: string) => [tenantKey(tenantId, ""), `${tenantId}0`] as const

/** The inbox's queues as `q(queue)`, one index seek each (a loose index scan of the primary key), never a scan of the inbox. */
const inboxQueues = `WITH RECURSIVE q(queue) AS (
  SELECT (SELECT MIN(queue) FROM inbox) UNION ALL SELECT (SELECT MIN(queue) FROM inbox WHERE queue > q.queue) FROM q WHERE q.queue IS NOT NULL)`

/** Deletes up to `budget` of the tenant's inbox keys (the platform database's); how many per queue, summed. */
const deleteInboxKeys = (sql: Sql.Sql, tenantId: string, budget: number) =>
  Effect.gen(function*() {
    const [from, to] = inboxRange(tenantId)
    const queues = yield* Effect.mapError(sql.all(QueueName, Sql.statement(`${inboxQueues} SELECT queue FROM q WHERE queue IS NOT NULL`)), unavailable)
    let total = 0
    for (const { queue } of queues) {
      for (let deleted = Move.rowsPerPage; deleted === Move.rowsPerPage && total < budget; total += deleted) {
        deleted = yield* Effect.mapError(sql.run(Sql.statement(
          `DELETE FROM inbox WHERE queue = ?1 AND idempotency_key IN
             (SELECT idempotency_key FROM inbox WHERE queue = ?1 AND idempotency_key >= ?2 AND idempotency_key < ?3 LIMIT ${Move.rowsPerPage})`,
          queue, from, to
        )), unavailable)
      }
    }
    return total
  })

/**
 * Deletes up to `Move.rowsPerStep` of the tenant's rows, in the first database that still holds some: the tables a
 * move copies (with the move's own `deletePage`), and in the platform database its platform tables but the placement
 * (which goes last) and its inbox keys. The database and the rows deleted per table; undefined when none holds any.
 */
export const deleteRows = Effect.fn("DeletionStores.deleteRows")(function*(tenantId: string) {
  const shape = yield* TenantPlacement
  const moved = yield* Move.tablesToMove
  const platformTables = Move.platformTables.filter((t) => t !== "tenant_placements")
  let budget = Move.rowsPerStep
  for (const db of databasesOf(shape)) {
    const counts: Record<string, number> = {}
    for (const { table, key } of yield* tablesIn(db.sql, db.platform ? [...moved, ...platformTables] : moved)) {
      for (let deleted = Move.rowsPerPage; deleted === Move.rowsPerPage && budget > 0; budget -= deleted) {
        deleted = yield* Effect.mapError(Move.deletePage(db.sql, table, { key }, tenantId, Move.rowsPerPage), unavailable)
        counts[table] = (counts[table] ?? 0) + deleted
      }
    }
    if (db.platform && budget > 0) counts.inbox = yield* deleteInboxKeys(db.sql, tenantId, budget)
    if (Object.values(counts).some((n) => n > 0)) return { store: db.store, counts }
  }
  return undefined
})

/**
 * Every table of a database with a `tenant_id` column (found in `sqlite_master`), the deletion's own record aside,
 * and D1's and SQLite's internal tables (`_cf_*`, `sqlite_*`: D1 refuses to read their columns).
 */
const tenantScopedTables = (sql: Sql.Sql) =>
  Effect.map(Effect.mapError(sql.all(TableName, Sql.statement(
    `SELECT DISTINCT m.name AS name FROM sqlite_master m JOIN pragma_table_info(m.name) p
     WHERE m.type = 'table' AND substr(m.name, 1, 4) <> '_cf_' AND substr(m.name, 1, 7) <> 'sqlite_'
       AND p.name = 'tenant_id' AND m.name <> 'tenant_deletions' ORDER BY m.name`
  )), unavailable), (rows) => rows.map((r) => r.name))

/** Only the counts that are not 0. */
const nonZero = (counts: Record<string, number>): Counts => Object.fromEntries(Object.entries(counts).filter(([, n]) => n > 0))

/** The tenant's rows left in one database: every tenant-scoped table (the placement aside), and the inbox. */
const rowsLeftIn = (db: ReturnType<typeof databasesOf>[number], tenantId: string) =>
  Effect.gen(function*() {
    const tables = (yield* tenantScopedTables(db.sql)).filter((t) => !(db.platform && t === "tenant_placements"))
    const [from, to] = inboxRange(tenantId)
    const statements = [
      ...tables.map((t) => Sql.statement(`SELECT COUNT(*) AS n FROM ${q(t)} WHERE tenant_id = ?`, tenantId)),
      ...(db.platform ? [Sql.statement(`${inboxQueues} SELECT COUNT(*) AS n FROM q JOIN inbox i ON i.queue = q.queue AND i.idempotency_key >= ? AND i.idempotency_key < ?`, from, to)] : [])
    ]
    const results = statements.length === 0 ? [] : yield* Effect.mapError(db.sql.batch(statements, Count), unavailable)
    const names = [...tables, ...(db.platform ? ["inbox"] : [])]
    return nonZero(Object.fromEntries(names.map((t, i) => [t, results[i]?.rows[0]?.n ?? 0])))
  })

/**
 * The re-count of what is left of the tenant, per store — only counts above 0 are listed, so a store with nothing
 * left is `{}`: every D1 database's tenant-scoped tables and inbox, every shard object (facts it still reads), every
 * R2 prefix of the tenant's and what the shared objects still hold of it.
 */
export const remaining = Effect.fn("DeletionStores.remaining")(function*(tenantId: string, shards: ReadonlyArray<string>) {
  const shape = yield* TenantPlacement
  const out: Record<string, Counts> = {}
  for (const db of databasesOf(shape)) out[db.store] = yield* rowsLeftIn(db, tenantId)
  const ledger = yield* Ledger
  const holding = yield* Effect.forEach(shards, (key) => Effect.map(ledger.readShardPage(key, undefined, 1), (facts) => facts.length), { concurrency: shardConcurrency })
  out.ledger = nonZero({ shards_holding_facts: holding.filter((n) => n > 0).length })
  const storage = (yield* PayloadBucket).named(service)
  const r2: Record<string, number> = {}
  for (const prefix of prefixesOf(tenantId)) r2[prefix] = (yield* Stream.runCollect(Stream.take(storage.list(prefix), objectsPerStep))).length
  for (const prefix of sharedPrefixes) {
    for (const key of yield* Stream.runCollect(storage.list(prefix))) {
      const text = yield* storage.text(key)
      if (text !== undefined) r2[prefix] = (r2[prefix] ?? 0) + heldIn(prefix, text, tenantId)
    }
  }
  out.r2 = nonZero(r2)
  return out
})
