/**
 * Tenant placement: which read database holds a tenant's read side.
 *
 * The platform database (`DB`) keeps what every tenant shares — the token
 * and shard registry, the placement map, queue metrics, the batch inbox,
 * rebuild records. Each tenant's read side — the `facts` copy, every
 * projection, `accepted_keys`, dead letters, webhook state, batch jobs —
 * lives in ONE of N read databases (`FACTLINE_READ_DB_0…`), chosen on the
 * tenant's first use among the open ones (`FACTLINE_READ_DBS_OPEN`, the one
 * holding the fewest tenants first) and recorded in `tenant_placements`: it
 * never changes silently, only a move (`Move.ts`) changes it. With no read
 * database bound, the platform database is read database 0. One projection of
 * a tenant may live in another read database (`projection_placements`, placed
 * there by a move of that projection): a tenant larger than one database.
 *
 * Every tenant-scoped store reaches D1 through `Sql.ReadDatabase`, which only
 * these scopes provide: `reading(tenant)` and `writing(tenant)` around one
 * tenant's work (with a projection: that projection's database), `byDatabase`
 * (Units.ts) around a consumer batch of many tenants (one transaction per
 * database and what it writes), `everywhere` for operator reads and
 * scheduled sweeps over every database. A store call outside a scope does not
 * compile. An isolate trusts a placement for `cacheMs`; writes of a tenant
 * whose move is taking its last copy (`frozen_since`) are refused with a
 * retryable failure until the move switches it.
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Layer from "effect/Layer"
import * as Sql from "../platform/Sql.js"
import * as Failure from "../failures/Failure.js"
import { ReadDatabases } from "../platform/Bindings.js"
import * as LedgerTopology from "../ledger/LedgerTopology.js"

export { perDatabase } from "./PerDatabase.js"

/** A projection of a tenant placed outside the tenant's home: its read database (in parts: each part's, Parts.ts), and since when a move holds its writes. */
export const ProjectionPlacement = Schema.Struct({ database: Schema.Number, frozenSince: Schema.NullOr(Schema.String), parts: Schema.optional(Schema.NullOr(Schema.Array(Schema.Number))) })
export type ProjectionPlacement = typeof ProjectionPlacement.Type

/**
 * A tenant's placement, as the map's reads alias its row: `database` is the index of the tenant's home read database
 * (`FACTLINE_READ_DB_<n>`); `frozenSince` since when a move holds the tenant's writes (its last copy), or null;
 * `projections` the tenant's projections placed elsewhere (`projection_placements`, read in the same statement), by name.
 */
export const Placement = Schema.Struct({
  tenantId: Schema.String,
  database: Schema.Number,
  placedAt: Schema.String,
  frozenSince: Schema.NullOr(Schema.String),
  projections: Schema.fromJsonString(Schema.Record(Schema.String, ProjectionPlacement))
})
export type Placement = typeof Placement.Type

/** The columns of `Placement`, selected from `tenant_placements` (the tenant's projections placed elsewhere as one JSON object). */
export const placementColumns =
  `tenant_id AS tenantId, database, placed_at AS placedAt, frozen_since AS frozenSince,
   (SELECT json_group_object(pp.projection, json_object('database', pp.database, 'frozenSince', pp.frozen_since, 'parts', json(pp.parts)))
    FROM projection_placements pp WHERE pp.tenant_id = tenant_placements.tenant_id) AS projections`

/** The read database of the tenant's `projection` (where it is placed, else the tenant's home); without one, the home. */
export const databaseOf = (placement: Placement, projection?: string): number =>
  projection === undefined ? placement.database : placement.projections[projection]?.database ?? placement.database

/** Whether the tenant's writes are held — all of them, or (with `projection`) that projection's, which its move holds alone. */
export const isHeld = (placement: Placement, projection?: string): boolean =>
  placement.frozenSince !== null || (projection !== undefined && (placement.projections[projection]?.frozenSince ?? null) !== null)

const DatabaseCount = Schema.Struct({ database: Schema.Number, n: Schema.Number })

export interface Shape {
  /** The platform database (it may also be read database 0). */
  readonly platform: Sql.Sql
  /** The read databases by index. */
  readonly databases: ReadonlyArray<Sql.Sql>
  /** Every distinct database that may hold tenant rows: the read databases, then the platform database if it is not one of them. */
  readonly everywhere: ReadonlyArray<Sql.Sql>
  /** The placement of each tenant, placing tenants seen for the first time (one platform round trip for all the unknown ones). */
  readonly placements: (tenantIds: ReadonlyArray<string>) => Effect.Effect<ReadonlyMap<string, Placement>, Sql.SqlFailure>
  /** Places an unplaced tenant on `database` (an operator's choice); a placed tenant keeps its database (Conflict). */
  readonly place: (tenantId: string, database: number) => Effect.Effect<Placement, Sql.SqlFailure | Failure.InvalidInput>
  /** How many tenants each read database holds, by index (removed placements not counted). */
  readonly counts: () => Effect.Effect<ReadonlyArray<number>, Sql.SqlFailure>
  /** The current placements (removed ones left out) by tenant id, at most `limit`. */
  readonly list: (limit: number) => Effect.Effect<ReadonlyArray<Placement>, Sql.SqlFailure>
  /** Drops this isolate's cached placements of these tenants: their next use reads the platform database. */
  readonly forget: (tenantIds: ReadonlyArray<string>) => void
  /** How long an isolate trusts a placement it read, in milliseconds (a held one: at most `heldCacheMs`). */
  readonly cacheMs: number
}

export class TenantPlacement extends Context.Service<TenantPlacement, Shape>()("@factline/core/TenantPlacement") {
  static readonly layer = (options: Options) =>
    Layer.effect(TenantPlacement, Effect.gen(function*() {
      const platform = yield* Sql.PlatformDatabase
      const { databases } = yield* ReadDatabases
      return make(platform, databases.length > 0 ? databases : [platform], options)
    }))
  /** Every tenant on one database, which is also the platform's: a single-database deployment, a test over one D1. */
  static readonly single = (binding: D1Database) => {
    const sql = Sql.make("platform", binding)
    return Layer.succeed(TenantPlacement, make(sql, [sql], { cacheMs: 30_000 }))
  }
}

export interface Options {
  /** Indexes new tenants may be placed on (default: all). */
  readonly open?: ReadonlyArray<number> | undefined
  /** How long an isolate trusts a placement, in milliseconds. */
  readonly cacheMs: number
}

const unavailable = Failure.unavailable("the placement map")

/**
 * How long an isolate trusts a placement whose writes are held (a move in progress), in milliseconds: short,
 * so that writers resume soon after the move switches the tenant.
 */
export const heldCacheMs = 1_000

/** Per platform database and cache duration, per isolate: tenant → placement and until when it is trusted. */
const caches = new WeakMap<object, Map<number, Map<string, { readonly placement: Placement; readonly until: number }>>>()

export const make = (platform: Sql.Sql, databases: ReadonlyArray<Sql.Sql>, options: Options): Shape => {
  let byDuration = caches.get(platform.identity)
  if (!byDuration) caches.set(platform.identity, (byDuration = new Map()))
  let cache = byDuration.get(options.cacheMs)
  if (!cache) byDuration.set(options.cacheMs, (cache = new Map()))
  const entries = cache
  const open = (options.open ?? databases.map((_, i) => i)).filter((i) => i < databases.length)
  const everywhere = databases.some((d) => d.identity === platform.identity) ? databases : [...databases, platform]
  const remember = (placements: ReadonlyArray<Placement>, now: number) => {
    // A tenant held (a move, or the deletion of its data) or placed anew (deleted, then used again): its ledger
    // registration may be gone, so this isolate's shard count of it is dropped (read again on its next append).
    const renewed = placements.filter((p) => p.frozenSince !== null || (entries.get(p.tenantId)?.placement.placedAt ?? p.placedAt) !== p.placedAt)
    if (renewed.length > 0) LedgerTopology.forget(renewed.map((p) => p.tenantId))
    // A placement with any hold (the tenant's, or a projection's being moved) is trusted briefly: its writers resume soon after the switch.
    const holding = (p: Placement) => p.frozenSince !== null || Object.values(p.projections).some((pp) => pp.frozenSince !== null)
    for (const p of placements) entries.set(p.tenantId, { placement: p, until: now + (holding(p) ? Math.min(options.cacheMs, heldCacheMs) : options.cacheMs) })
  }
  const rows = (tenants: string) =>
    Sql.statement(`SELECT ${placementColumns} FROM tenant_placements WHERE tenant_id IN (SELECT value FROM json_each(?))`, tenants)
  return {
    platform,
    databases,
    everywhere,
    cacheMs: options.cacheMs,
    forget: (tenantIds) => {
      for (const t of tenantIds) entries.delete(t)
    },
    placements: Effect.fn("Placement.placements")(function*(tenantIds) {
      const now = yield* Clock.currentTimeMillis
      const unknown = [...new Set(tenantIds)].filter((t) => (entries.get(t)?.until ?? 0) <= now)
      if (unknown.length > 0) {
        if (open.length === 0) return yield* new Failure.Unavailable({ service: "the placement map", message: "no read database is open to new tenants (FACTLINE_READ_DBS_OPEN)" })
        const tenants = JSON.stringify(unknown)
        const [, recorded] = yield* Effect.mapError(platform.batch([
          Sql.statement(
            `INSERT INTO tenant_placements (tenant_id, database, placed_at)
             SELECT t.value, (SELECT o.value FROM json_each(?2) o
                              ORDER BY (SELECT COUNT(*) FROM tenant_placements p WHERE p.database = o.value AND p.removed_at IS NULL), o.key LIMIT 1), ?3
             FROM json_each(?1) t WHERE true
             ON CONFLICT (tenant_id) DO UPDATE SET removed_at = NULL WHERE tenant_placements.removed_at IS NOT NULL`,
            tenants, JSON.stringify(open), new Date(now).toISOString()
          ),
          rows(tenants)
        ], Placement), unavailable)
        remember(recorded!.rows, now)
      }
      const out = new Map<string, Placement>()
      for (const t of tenantIds) {
        const placement = entries.get(t)?.placement
        if (placement === undefined) return yield* new Failure.Unavailable({ service: "the placement map", message: `tenant ${t} could not be placed` })
        const unbound = [placement.database, ...Object.values(placement.projections).flatMap((p) => [p.database, ...(p.parts ?? [])])].find((d) => d >= databases.length)
        if (unbound !== undefined) {
          return yield* new Failure.Unavailable({ service: "the placement map", message: `tenant ${t} is placed on read database ${unbound}, which is not bound (FACTLINE_READ_DB_${unbound})` })
        }
        out.set(t, placement)
      }
      return out
    }),
    place: Effect.fn("Placement.place")(function*(tenantId, database) {
      if (!Number.isInteger(database) || database < 0 || database >= databases.length) {
        return yield* new Failure.InvalidInput({ message: `database must be a read database index from 0 to ${databases.length - 1}`, problems: [{ path: "database", message: `must be 0 to ${databases.length - 1}` }] })
      }
      const now = yield* Clock.currentTimeMillis
      const [, recorded] = yield* Effect.mapError(platform.batch([
        // A removed placement comes back where it was: placing it elsewhere is a move, as for any placed tenant.
        Sql.statement(
          `INSERT INTO tenant_placements (tenant_id, database, placed_at) VALUES (?, ?, ?)
           ON CONFLICT (tenant_id) DO UPDATE SET removed_at = NULL WHERE tenant_placements.removed_at IS NOT NULL`,
          tenantId, database, new Date(now).toISOString()
        ),
        rows(JSON.stringify([tenantId]))
      ], Placement), unavailable)
      const placement = recorded!.rows[0]!
      remember([placement], now)
      if (placement.database !== database) {
        return yield* new Failure.Conflict({ message: `tenant ${tenantId} is already placed on read database ${placement.database}; move it instead` })
      }
      return placement
    }),
    list: Effect.fn("Placement.list")(function*(limit) {
      return yield* Effect.mapError(platform.all(Placement, Sql.statement(
        `SELECT ${placementColumns} FROM tenant_placements WHERE removed_at IS NULL ORDER BY tenant_id LIMIT ?`,
        limit
      )), unavailable)
    }),
    counts: Effect.fn("Placement.counts")(function*() {
      const rows = yield* Effect.mapError(platform.all(DatabaseCount, Sql.statement("SELECT database, COUNT(*) AS n FROM tenant_placements WHERE removed_at IS NULL GROUP BY database")), unavailable)
      const counts = databases.map(() => 0)
      for (const r of rows) if (r.database < counts.length) counts[r.database] = r.n
      return counts
    })
  }
}

/** A tenant's writes (or one projection's) are held while its move takes its last copy: retryable, as any unavailable database. */
export const held = (tenantId: string, projection?: string) =>
  new Failure.Unavailable({
    service: "the tenant's read database",
    message: projection === undefined
      ? `tenant ${tenantId}'s writes are held (a move to another read database, or the deletion of its data); they resume when the move switches it`
      : `the writes of projection ${projection} of tenant ${tenantId} are held (a move of the projection to another read database); they resume when the move switches it`,
    retryAfterSeconds: heldRetrySeconds,
    parkSeconds: heldRetrySeconds
  })

/** When a held write is worth trying again: what the HTTP edge's `retry-after` says, and how long a consumer parks a held message. */
export const heldRetrySeconds = 5

/** The read database of a placement (of its `projection`, when given), refusing writes while a move holds them. */
const doorOf = (shape: Shape, placement: Placement, write: boolean, projection?: string) =>
  write && isHeld(placement, projection) ? Effect.fail(held(placement.tenantId, placement.frozenSince === null ? projection : undefined)) : Effect.succeed(shape.databases[databaseOf(placement, projection)]!)

/** The tenant's read database (placing it on first use) — of its `projection`, when given; for a write, refused while held. */
export const door = (shape: Shape, tenantId: string, write: boolean, projection?: string): Effect.Effect<Sql.Sql, Sql.SqlFailure> =>
  Effect.flatMap(shape.placements([tenantId]), (placements) => doorOf(shape, placements.get(tenantId)!, write, projection))

/** The items by their tenant's read database (of `projection`, when given; input order within each), and the held ones. */
const partition = <T>(shape: Shape, placements: ReadonlyMap<string, Placement>, items: ReadonlyArray<T>, tenantOf: (item: T) => string, write: boolean, projection?: string) => {
  const groups = new Map<number, { readonly sql: Sql.Sql; readonly items: Array<T> }>()
  const heldItems: Array<{ readonly item: T; readonly tenantId: string }> = []
  for (const item of items) {
    const placement = placements.get(tenantOf(item))!
    if (write && isHeld(placement, projection)) {
      heldItems.push({ item, tenantId: placement.tenantId })
      continue
    }
    const database = databaseOf(placement, projection)
    let group = groups.get(database)
    if (!group) groups.set(database, (group = { sql: shape.databases[database]!, items: [] }))
    group.items.push(item)
  }
  return { groups: [...groups.values()], held: heldItems }
}

/** The items grouped by their tenant's read database (of `projection`, when given), in input order; for writes, refused if any is held. */
export const grouped = <T>(shape: Shape, items: ReadonlyArray<T>, tenantOf: (item: T) => string, write: boolean, projection?: string) =>
  Effect.gen(function*() {
    if (items.length === 0) return []
    const { groups, held: heldItems } = partition(shape, yield* shape.placements(items.map(tenantOf)), items, tenantOf, write, projection)
    if (heldItems.length > 0) return yield* held(heldItems[0]!.tenantId)
    return groups
  })

/**
 * The items grouped by their tenant's read database for writes, and the items of tenants whose writes are held
 * (with the failure to report for each), for a caller that settles items one by one: a held tenant holds back
 * its own items only.
 */
export const groupedForWrites = <T>(shape: Shape, items: ReadonlyArray<T>, tenantOf: (item: T) => string) =>
  Effect.gen(function*() {
    if (items.length === 0) return { groups: [], held: [] }
    const { groups, held: heldItems } = partition(shape, yield* shape.placements(items.map(tenantOf)), items, tenantOf, true)
    return { groups, held: heldItems.map(({ item, tenantId }) => ({ item, failure: held(tenantId) })) }
  })

const scope = (tenantId: string, write: boolean, projection?: string) =>
<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | Sql.SqlFailure, Exclude<R, Sql.ReadDatabase> | TenantPlacement> =>
  Effect.flatMap(Effect.service(TenantPlacement), (shape) => Effect.provideServiceEffect(effect, Sql.ReadDatabase, door(shape, tenantId, write, projection)))

/** Runs `effect` over the tenant's home read database (or its `projection`'s) for reads: a moving one is read where it is. */
export const reading = (tenantId: string, projection?: string) => scope(tenantId, false, projection)

/** Runs `effect` over the tenant's home read database (or its `projection`'s) for writes: refused, retryably, while a move holds them. */
export const writing = (tenantId: string, projection?: string) => scope(tenantId, true, projection)

/** The tenant's placement (placing it on first use). */
export const of = (tenantId: string) =>
  Effect.flatMap(Effect.service(TenantPlacement), (shape) => Effect.map(shape.placements([tenantId]), (p) => p.get(tenantId)!))

/** Runs `effect` once over every database that may hold tenant rows (operator reads, scheduled sweeps); the results in order. */
export const everywhere = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<ReadonlyArray<A>, E, Exclude<R, Sql.ReadDatabase> | TenantPlacement> =>
  Effect.flatMap(Effect.service(TenantPlacement), (shape) =>
    Effect.forEach(shape.everywhere, (sql) => Effect.provideService(effect, Sql.ReadDatabase, sql)))
