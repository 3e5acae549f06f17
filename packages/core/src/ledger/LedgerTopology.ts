/**
 * How many shards each tenant's ledger has: recorded in D1 (`ledger_tenants`)
 * the first time a tenant appends, never changed afterwards.
 *
 * `register` is for writers: tenants seen for the first time get the
 * configured count (and their N shards are registered in `ledger_shards`),
 * known tenants keep theirs — one D1 round trip, and none at all once the
 * isolate has the tenant cached (a recorded count never changes, so the cache
 * never goes stale). `lookup` is for readers: an unknown tenant has no
 * shards, and looking creates nothing.
 */
import { Effect } from "effect"
import * as Shards from "./Shards.js"
import * as Failure from "../failures/Failure.js"

export interface LedgerTopology {
  /** The shard count of each tenant, recording `shardsPerTenant` for tenants seen for the first time. */
  readonly register: (tenantIds: ReadonlyArray<string>) => Effect.Effect<ReadonlyMap<string, number>, Failure.Unavailable>
  /** The shard count of a tenant, or undefined if it never appended anything. */
  readonly lookup: (tenantId: string) => Effect.Effect<number | undefined, Failure.Unavailable>
}

/** Per database binding, per isolate: tenant → recorded shard count. */
const caches = new WeakMap<object, Map<string, number>>()
/** A wrapped binding (test and benchmark instrumentation) answers this with the binding it wraps. */
const unwrap = Symbol.for("@factline/core/testing/unwrap")
const cacheFor = (db: D1Database) => {
  const binding = ((db as unknown as Record<symbol, object | undefined>)[unwrap]) ?? db
  let cache = caches.get(binding)
  if (!cache) caches.set(binding, (cache = new Map()))
  return cache
}

const message = (cause: unknown) => (cause instanceof Error ? cause.message : String(cause))

export const make = (db: D1Database, shardsPerTenant: number = Shards.defaultShardsPerTenant): LedgerTopology => {
  const configured = Shards.checkShardCount(shardsPerTenant)
  const cache = cacheFor(db)
  return {
    register: (tenantIds) => {
      const unknown = [...new Set(tenantIds)].filter((t) => !cache.has(t))
      const known = () => new Map(tenantIds.map((t) => [t, cache.get(t)!] as const))
      if (unknown.length === 0) return Effect.succeed(known())
      return Effect.tryPromise({
        try: async () => {
          const now = new Date().toISOString()
          const tenants = JSON.stringify(unknown)
          const [, , recorded] = await db.batch<{ tenant_id: string; shard_count: number }>([
            db.prepare(
              `INSERT INTO ledger_tenants (tenant_id, shard_count, first_seen_at)
               SELECT value, ?1, ?2 FROM json_each(?3) WHERE true ON CONFLICT (tenant_id) DO NOTHING`
            ).bind(configured, now, tenants),
            db.prepare(
              `WITH RECURSIVE shard(tenant_id, i, n) AS (
                 SELECT tenant_id, 0, shard_count FROM ledger_tenants WHERE tenant_id IN (SELECT value FROM json_each(?2))
                 UNION ALL SELECT tenant_id, i + 1, n FROM shard WHERE i + 1 < n)
               INSERT INTO ledger_shards (shard_key, tenant_id, registered_at)
               SELECT tenant_id || '/#' || i, tenant_id, ?1 FROM shard WHERE true ON CONFLICT (shard_key) DO NOTHING`
            ).bind(now, tenants),
            db.prepare("SELECT tenant_id, shard_count FROM ledger_tenants WHERE tenant_id IN (SELECT value FROM json_each(?))").bind(tenants)
          ])
          for (const row of recorded!.results) cache.set(row.tenant_id, row.shard_count)
          const missing = unknown.filter((t) => !cache.has(t))
          if (missing.length > 0) throw new Error(`tenant(s) ${missing.join(", ")} could not be registered`)
          return known()
        },
        catch: (cause) => new Failure.Unavailable({ service: "the shard registry", message: `ledger topology unavailable: ${message(cause)}` })
      })
    },
    lookup: (tenantId) => {
      const cached = cache.get(tenantId)
      if (cached !== undefined) return Effect.succeed(cached)
      return Effect.tryPromise({
        try: async () => {
          const row = await db.prepare("SELECT shard_count FROM ledger_tenants WHERE tenant_id = ?").bind(tenantId).first<{ shard_count: number }>()
          if (row) cache.set(tenantId, row.shard_count)
          return row?.shard_count
        },
        catch: (cause) => new Failure.Unavailable({ service: "the shard registry", message: `ledger topology unavailable: ${message(cause)}` })
      })
    }
  }
}
