/**
 * How many shards each tenant's ledger has: recorded in D1 (`ledger_tenants`)
 * the first time a tenant appends, changed afterwards only by a reshard
 * (Reshard.ts), whose progress is part of the topology (`Shards.Topology`).
 *
 * `register` is for writers: tenants seen for the first time get the
 * configured count (and their N shards are registered in `ledger_shards`),
 * known tenants keep theirs — one D1 round trip, and none at all once the
 * isolate has the tenant cached. A cached topology goes stale only when a
 * reshard switches a shard, and then the old shard says so: it answers a
 * moved stream with the new count, and the ledger calls `refresh` — no
 * broadcast needed. `lookup` is for readers: an unknown tenant has no
 * shards, and looking creates nothing.
 *
 * It owns `ledger_tenants` and `ledger_shards`: the shards' relay marks
 * (`markRelay`, written by the LedgerShard Durable Object) and the sweep's and
 * health page's reads of them are here too.
 */
import { and, eq, gt, isNotNull, lte, sql as drizzle } from "drizzle-orm"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Sql from "../platform/Sql.js"
import { ledgerShards, ledgerTenants } from "../tables/PlatformTables.js"
import * as Shards from "./Shards.js"
import * as Failure from "../failures/Failure.js"

export interface LedgerTopology {
  /** The topology of each tenant, recording `shardsPerTenant` for tenants seen for the first time. */
  readonly register: (tenantIds: ReadonlyArray<string>) => Effect.Effect<ReadonlyMap<string, Shards.Topology>, Sql.SqlFailure>
  /** The topology of a tenant, or undefined if it never appended anything. */
  readonly lookup: (tenantId: string) => Effect.Effect<Shards.Topology | undefined, Sql.SqlFailure>
  /** Drops this isolate's cached topology of a tenant (a shard answered that a stream moved): the next call reads D1. */
  readonly refresh: (tenantId: string) => void
}

/** Per database, per isolate: tenant → recorded topology. */
const caches = new WeakMap<object, Map<string, Shards.Topology>>()
/** The same caches, to forget a tenant in each. */
const every = new Set<Map<string, Shards.Topology>>()
const cacheFor = (sql: Sql.Sql) => {
  let cache = caches.get(sql.identity)
  if (!cache) caches.set(sql.identity, (cache = new Map()))
  every.add(cache)
  return cache
}

/**
 * Drops this isolate's recorded shard counts of these tenants: their next append registers them again. A recorded
 * count never changes, but a deleted tenant's registration is gone (placement/Deletion.ts): an isolate that kept
 * it would append to the tenant's shards again without registering them. Placement calls it whenever it reads a
 * tenant held or placed anew, which every writer of a tenant being deleted does before it writes again.
 */
export const forget = (tenantIds: ReadonlyArray<string>) => {
  for (const cache of every) for (const t of tenantIds) cache.delete(t)
}

/** D1 down is the shard registry unavailable; a bug or a constraint stays what the door classified it as. */
const unavailable = (cause: Sql.SqlFailure): Sql.SqlFailure =>
  cause instanceof Failure.Unavailable ? new Failure.Unavailable({ service: "the shard registry", message: `ledger topology unavailable: ${cause.message}` }) : cause

const TenantShards = Schema.Struct({ tenant_id: Schema.String, shard_count: Schema.Number, resharding_to: Schema.NullOr(Schema.Number), shards_switched: Schema.Number })
const TopologyRow = Schema.Struct({ shard_count: Schema.Number, resharding_to: Schema.NullOr(Schema.Number), shards_switched: Schema.Number })

/** A `ledger_tenants` row as a topology. */
export const topologyOf = (row: typeof TopologyRow.Type): Shards.Topology =>
  row.resharding_to === null ? { shards: row.shard_count } : { shards: row.shard_count, next: row.resharding_to, switched: row.shards_switched }
const ShardKey = Schema.Struct({ shard_key: Schema.String })

export const make = (sql: Sql.Sql, shardsPerTenant: number = Shards.defaultShardsPerTenant): LedgerTopology => {
  const configured = Shards.checkShardCount(shardsPerTenant)
  const cache = cacheFor(sql)
  return {
    register: Effect.fn("LedgerTopology.register")(function*(tenantIds) {
      const unknown = [...new Set(tenantIds)].filter((t) => !cache.has(t))
      const known = () => new Map(tenantIds.map((t) => [t, cache.get(t)!] as const))
      if (unknown.length === 0) return known()
      const now = new Date(yield* Clock.currentTimeMillis).toISOString()
      const tenants = JSON.stringify(unknown)
      const [, , recorded] = yield* Effect.mapError(sql.batch([
        Sql.statement(
          `INSERT INTO ledger_tenants (tenant_id, shard_count, first_seen_at)
           SELECT value, ?1, ?2 FROM json_each(?3) WHERE true ON CONFLICT (tenant_id) DO NOTHING`,
          configured, now, tenants
        ),
        Sql.statement(
          `WITH RECURSIVE shard(tenant_id, i, n) AS (
             SELECT tenant_id, 0, shard_count FROM ledger_tenants WHERE tenant_id IN (SELECT value FROM json_each(?2))
             UNION ALL SELECT tenant_id, i + 1, n FROM shard WHERE i + 1 < n)
           INSERT INTO ledger_shards (shard_key, tenant_id, registered_at)
           SELECT tenant_id || '/#' || i, tenant_id, ?1 FROM shard WHERE true ON CONFLICT (shard_key) DO NOTHING`,
          now, tenants
        ),
        Sql.statement("SELECT tenant_id, shard_count, resharding_to, shards_switched FROM ledger_tenants WHERE tenant_id IN (SELECT value FROM json_each(?))", tenants)
      ], TenantShards), unavailable)
      for (const row of recorded!.rows) cache.set(row.tenant_id, topologyOf(row))
      const missing = unknown.filter((t) => !cache.has(t))
      if (missing.length > 0) return yield* new Failure.Unavailable({ service: "the shard registry", message: `ledger topology unavailable: tenant(s) ${missing.join(", ")} could not be registered` })
      return known()
    }),
    lookup: Effect.fn("LedgerTopology.lookup")(function*(tenantId) {
      const cached = cache.get(tenantId)
      if (cached !== undefined) return cached
      return yield* sql.first(TopologyRow, Sql.typed(
        sql.orm.select({ shard_count: ledgerTenants.shardCount, resharding_to: ledgerTenants.reshardingTo, shards_switched: ledgerTenants.shardsSwitched })
          .from(ledgerTenants).where(eq(ledgerTenants.tenantId, tenantId))
      )).pipe(
        Effect.map((row) => {
          if (!row) return undefined
          const topology = topologyOf(row)
          cache.set(tenantId, topology)
          return topology
        }),
        Effect.mapError(unavailable)
      )
    }),
    refresh: (tenantId) => {
      cache.delete(tenantId)
    }
  }
}

/**
 * Marks a shard's relay pending since `pendingSince` (the first failure is kept), or no longer pending
 * (`null`, recording when it last relayed): where the scheduled sweep finds shards whose alarm may be lost.
 */
export const markRelay = (shardKey: string, tenantId: string, pendingSince: string | null) =>
  Effect.gen(function*() {
    const sql = yield* Sql.PlatformDatabase
    const now = new Date(yield* Clock.currentTimeMillis).toISOString()
    yield* sql.run(Sql.typed(
      sql.orm.insert(ledgerShards)
        .values({ shardKey, tenantId, registeredAt: now, relayPendingSince: pendingSince, lastRelayedAt: pendingSince === null ? now : null })
        .onConflictDoUpdate({
          target: ledgerShards.shardKey,
          set: {
            relayPendingSince: drizzle`CASE WHEN excluded.relay_pending_since IS NULL THEN NULL ELSE COALESCE(${ledgerShards.relayPendingSince}, excluded.relay_pending_since) END`,
            lastRelayedAt: drizzle`COALESCE(excluded.last_relayed_at, ${ledgerShards.lastRelayedAt})`
          }
        })
    ))
  })

/** Shards whose relay has been pending since `cutoff` or earlier, oldest first, at most `limit`. */
export const pendingSince = (cutoff: string, limit: number) =>
  Effect.gen(function*() {
    const sql = yield* Sql.PlatformDatabase
    const rows = yield* sql.all(ShardKey, Sql.typed(
      sql.orm.select({ shard_key: ledgerShards.shardKey }).from(ledgerShards)
        .where(and(isNotNull(ledgerShards.relayPendingSince), lte(ledgerShards.relayPendingSince, cutoff)))
        .orderBy(ledgerShards.relayPendingSince)
        .limit(limit)
    ))
    return rows.map((r) => r.shard_key)
  })

/** How many shards have a relay pending (statement `n`), for batching with other health reads. */
export const pendingCount = Sql.statement("SELECT COUNT(*) AS n FROM ledger_shards WHERE relay_pending_since IS NOT NULL")

/** Shard keys after `after` in key order, at most `limit`, of one tenant or of all: how rebuilds and reconciles walk the ledger. */
export const shardsAfter = (after: string, limit: number, tenantId?: string) =>
  Effect.gen(function*() {
    const sql = yield* Sql.PlatformDatabase
    const rows = yield* sql.all(ShardKey, Sql.typed(
      sql.orm.select({ shard_key: ledgerShards.shardKey }).from(ledgerShards)
        .where(tenantId === undefined ? gt(ledgerShards.shardKey, after) : and(eq(ledgerShards.tenantId, tenantId), gt(ledgerShards.shardKey, after)))
        .orderBy(ledgerShards.shardKey)
        .limit(limit)
    ))
    return rows.map((r) => r.shard_key)
  }).pipe(Effect.mapError(unavailable))

/** How many shards the ledger has (every tenant's). */
export const shardCount = Effect.gen(function*() {
  const sql = yield* Sql.PlatformDatabase
  const row = yield* sql.first(Sql.Count, Sql.statement("SELECT COUNT(*) AS n FROM ledger_shards"))
  return row?.n ?? 0
}).pipe(Effect.mapError(unavailable))
