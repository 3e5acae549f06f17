/**
 * Projections that catch up by themselves: a projection new to the deployment (no `projection_versions` row),
 * or whose mapping `version` differs from the one recorded, replays the ledger into itself in the background.
 *
 * `tick` (every scheduled run, and `POST /v1/projections/catch-up`) compares each registered projection with
 * its row and starts what is missing: a rebuild named by the system (`cu_…`, Rebuild.ts) — the same
 * machinery as the manual rebuild: a shadow table the live consumer writes too while the ledger is replayed
 * into it shard by shard, in (stream, sequence) order, then swapped in within one transaction per read
 * database — so a live fact arriving meanwhile is applied once (row guards, the shadow's applied set). A
 * rebuild already running for the projection (an operator's) is adopted instead of a second one. When the
 * rebuild has swapped, the next tick records the projection `current`.
 *
 * "Its tenants" are every tenant the ledger has seen (`ledger_tenants`): the ledger does not index facts by
 * type, so the replay reads every shard once and the mapping skips facts of other types. A deployment whose
 * ledger is empty has nothing to replay: a new projection is `current` at once.
 *
 * A projection whose table is missing from a read database is recorded `not_migrated` (logged, listed by
 * `factline projections`) and not rebuilt; once its migration is applied, the next tick catches it up.
 *
 * `readStatus` is what a read of a projection answers besides its rows: `catching_up` with the replay's
 * progress until the projection is current (one platform read per request, none once this isolate has
 * seen it current). It owns `projection_versions`.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Result from "effect/Result"
import * as BatchStart from "../batch/BatchStart.js"
import * as Projection from "../definitions/Projection.js"
import * as Failure from "../failures/Failure.js"
import * as LedgerTopology from "../ledger/LedgerTopology.js"
import * as Placement from "../placement/Placement.js"
import * as Sql from "../platform/Sql.js"
import * as SqliteMaster from "../tables/SqliteMaster.js"
import * as Time from "../platform/Time.js"
import * as Rebuild from "../projections/Rebuild.js"
import { Registry } from "../registry/Registry.js"
import { Joined, joined, Row, stateOf } from "./CatchUpState.js"

export { Row, type State, type Status } from "./CatchUpState.js"

const Id = Schema.Struct({ id: Schema.String })

/** What a tick did for one projection. */
export interface Step {
  readonly projection: string
  readonly action: "current" | "started" | "adopted" | "running" | "completed" | "not_migrated" | "failed_to_start"
  readonly batch_id?: string
  readonly detail?: string
}

const unavailable = Failure.unavailable("the projection versions")

const rowsOf = Effect.flatMap(Effect.service(Sql.PlatformDatabase), (sql) =>
  Effect.mapError(sql.all(Row, Sql.statement("SELECT * FROM projection_versions")), unavailable))

/**
 * Registered projections whose table is missing from a read database, with the indexes of those databases:
 * one `sqlite_master` read per database.
 */
export const missingTables = Effect.fn("CatchUp.missingTables")(function*() {
  const registry = yield* Registry
  const placement = yield* Placement.TenantPlacement
  const tables = registry.projections.map(Projection.tableName)
  const missing = new Map<string, { readonly table: string; readonly databases: Array<number> }>()
  if (tables.length === 0) return missing
  for (const [index, sql] of placement.databases.entries()) {
    const present = new Set((yield* Effect.mapError(sql.all(SqliteMaster.Name, Sql.statement(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN (SELECT value FROM json_each(?))", JSON.stringify(tables)
    )), unavailable)).map((r) => r.name))
    for (const p of registry.projections) {
      const table = Projection.tableName(p)
      if (present.has(table)) continue
      const entry = missing.get(p.name) ?? { table, databases: [] }
      entry.databases.push(index)
      missing.set(p.name, entry)
    }
  }
  return missing as ReadonlyMap<string, { readonly table: string; readonly databases: ReadonlyArray<number> }>
})

/** The message of a projection whose table is missing (what `not_migrated` rows and the log say). */
export const notMigratedDetail = (projection: string, table: string, databases: ReadonlyArray<number>) =>
  `table ${table} of projection ${projection} does not exist in read database ${databases.join(", ")}: generate its migration (npm run db:generate) and apply it (wrangler d1 migrations apply)`

/**
 * Writes the row only if it is still `before` (undefined: absent): of two ticks racing for one projection,
 * one moves it. Returns whether this one did.
 */
const move = (before: Row | undefined, after: Omit<Row, "updated_at">, now: string) =>
  Effect.flatMap(Effect.service(Sql.PlatformDatabase), (sql) =>
    Effect.mapError(
      before === undefined
        ? sql.run(Sql.statement(
          "INSERT INTO projection_versions (projection, version, status, rebuild_id, detail, updated_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (projection) DO NOTHING",
          after.projection, after.version, after.status, after.rebuild_id, after.detail, now
        ))
        : sql.run(Sql.statement(
          `UPDATE projection_versions SET version = ?, status = ?, rebuild_id = ?, detail = ?, updated_at = ?
           WHERE projection = ? AND version = ? AND status = ? AND rebuild_id IS ? AND updated_at = ?`,
          after.version, after.status, after.rebuild_id, after.detail, now,
          before.projection, before.version, before.status, before.rebuild_id, before.updated_at
        )),
      unavailable
    ).pipe(Effect.map((changes) => changes === 1)))

const findRebuild = (id: string) =>
  Effect.flatMap(Effect.service(Sql.PlatformDatabase), (sql) =>
    Effect.mapError(sql.first(Rebuild.RebuildRecord, Sql.statement("SELECT * FROM projection_rebuilds WHERE id = ?", id)), unavailable))

const runningRebuild = (projection: string) =>
  Effect.flatMap(Effect.service(Sql.PlatformDatabase), (sql) =>
    Effect.mapError(sql.first(Id, Sql.statement("SELECT id FROM projection_rebuilds WHERE projection = ? AND status = 'running' ORDER BY started_at LIMIT 1", projection)), unavailable))

/** Compares one projection with its row and moves it on. */
const tickOne = (p: Projection.Projection, row: Row | undefined, missing: { readonly table: string; readonly databases: ReadonlyArray<number> } | undefined, ledgerIsEmpty: boolean) =>
  Effect.gen(function*() {
    const version = Projection.versionOf(p)
    const now = yield* Time.now
    const base = { projection: p.name, version }
    // A missing table first: a projection recorded current whose table has gone (a database recreated) is reported too.
    if (missing !== undefined) {
      const detail = notMigratedDetail(p.name, missing.table, missing.databases)
      if (row?.status !== "not_migrated" || row.detail !== detail || row.version !== version) {
        yield* move(row, { ...base, status: "not_migrated", rebuild_id: null, detail }, now)
        yield* Effect.logError(`projection ${p.name} is not migrated: ${detail}`)
      }
      return { projection: p.name, action: "not_migrated", detail } satisfies Step
    }
    if (row !== undefined && row.version === version && row.status === "current") return { projection: p.name, action: "current" } satisfies Step
    if (row !== undefined && row.status === "catching_up" && row.version === version && row.rebuild_id !== null) {
      const rebuild = yield* findRebuild(row.rebuild_id)
      if (rebuild?.status === "running") return { projection: p.name, action: "running", batch_id: rebuild.id } satisfies Step
      if (rebuild?.status === "completed") {
        yield* move(row, { ...base, status: "current", rebuild_id: rebuild.id, detail: null }, now)
        yield* Effect.log(`projection ${p.name} v${version} has caught up (${rebuild.facts_replayed} facts replayed by ${rebuild.id})`)
        return { projection: p.name, action: "completed", batch_id: rebuild.id } satisfies Step
      }
      // Failed (or gone): started again below.
    }
    if (ledgerIsEmpty) {
      yield* move(row, { ...base, status: "current", rebuild_id: null, detail: "nothing to replay: the ledger was empty" }, now)
      return { projection: p.name, action: "current" } satisfies Step
    }
    // An operator's rebuild already running does the same replay: adopted, not doubled.
    const running = yield* runningRebuild(p.name)
    const claimed = yield* move(row, { ...base, status: "catching_up", rebuild_id: running?.id ?? null, detail: null }, now)
    if (!claimed) return { projection: p.name, action: "running" } satisfies Step
    if (running) return { projection: p.name, action: "adopted", batch_id: running.id } satisfies Step
    const claim: Row = { ...base, status: "catching_up", rebuild_id: null, detail: null, updated_at: now }
    const started = yield* Effect.result(BatchStart.rebuild(p.name, Rebuild.platformTenant, "system"))
    const later = yield* Time.now
    if (Result.isFailure(started)) {
      const detail = `the catch-up could not start, the next run retries: ${started.failure.message}`
      yield* move(claim, { ...claim, detail }, later)
      yield* Effect.logError(`projection ${p.name}: ${detail}`)
      return { projection: p.name, action: "failed_to_start", detail } satisfies Step
    }
    yield* move(claim, { ...claim, rebuild_id: started.success.id }, later)
    yield* Effect.log(`projection ${p.name} v${version} is catching up: ${started.success.id} replays ${started.success.shards_total} shard(s)`)
    return { projection: p.name, action: "started", batch_id: started.success.id } satisfies Step
  })

/**
 * One pass over the registered projections (the scheduled run's, and `POST /v1/projections/catch-up`'s):
 * starts the catch-up of new or re-versioned projections, records those caught up `current`, and those
 * whose table is missing `not_migrated`. One projection's trouble never stops the others'.
 */
export const tick = Effect.fn("CatchUp.tick")(function*() {
  const registry = yield* Registry
  const rows = new Map((yield* rowsOf).map((r) => [r.projection, r]))
  const missing = yield* missingTables()
  const ledgerIsEmpty = (yield* LedgerTopology.shardCount) === 0
  return yield* Effect.forEach(registry.projections, (p) =>
    tickOne(p, rows.get(p.name), missing.get(p.name), ledgerIsEmpty).pipe(
      Effect.catch((error: Failure.Failure) =>
        Effect.as(Effect.logError(`projection ${p.name} catch-up check failed, the next run retries: ${error.message}`), { projection: p.name, action: "failed_to_start", detail: error.message } satisfies Step))
    ))
})

/** Every registered projection's state, in registration order (`factline projections`, the dashboard). */
export const list = Effect.fn("CatchUp.list")(function*() {
  const registry = yield* Registry
  const sql = yield* Sql.PlatformDatabase
  const rows = new Map((yield* Effect.mapError(sql.all(Joined, Sql.statement(joined)), unavailable)).map((r) => [r.projection, r]))
  return registry.projections.map((p) => stateOf(p, rows.get(p.name)))
})

/** What a read of a catching-up projection answers besides its rows. */
export interface Catching {
  readonly status: "catching_up"
  /** Shards replayed out of all, 0 to 1 (0 until the replay has started). */
  readonly progress: number
  /** When the replay started (null until it has). */
  readonly since: string | null
}

/** Per platform database, per isolate: the projections seen current, with their version. A version only changes with a deploy (a new isolate). */
const currentSeen = new WeakMap<object, Map<string, number>>()

/**
 * Undefined when `p` is current (or not checked yet: no row), its catch-up otherwise. One platform read,
 * none once this isolate has seen it current at its version.
 */
export const readStatus = Effect.fn("CatchUp.readStatus")(function*(p: Projection.Projection) {
  const sql = yield* Sql.PlatformDatabase
  const version = Projection.versionOf(p)
  const seen = currentSeen.get(sql.identity) ?? new Map<string, number>()
  currentSeen.set(sql.identity, seen)
  if (seen.get(p.name) === version) return undefined
  const row = yield* Effect.mapError(sql.first(Joined, Sql.statement(`${joined} WHERE v.projection = ?`, p.name)), unavailable)
  const state = stateOf(p, row)
  if (state.status === "current") seen.set(p.name, version)
  if (state.status !== "catching_up") return undefined
  // A row of another version: its replay is yet to start (the next check), whatever an older one did.
  const r = row?.version === version ? state.rebuild : null
  return {
    status: "catching_up",
    progress: r === null || r.shards_total === 0 ? 0 : Math.floor((r.shards_done / r.shards_total) * 100) / 100,
    since: r?.started_at ?? null
  } satisfies Catching
})
