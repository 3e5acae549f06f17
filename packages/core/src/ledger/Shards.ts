/**
 * Where a stream lives: shard keys, separate from stream identity.
 *
 * A stream is `tenant_id/subject`; a shard (one LedgerShard Durable Object)
 * holds many streams: `tenant_id/#(hash(subject) mod N)`, with N fixed per
 * tenant when the tenant is first seen (see LedgerTopology) and raised only by a
 * reshard (`Topology`, `route`). The hash is
 * 32-bit FNV-1a over the subject's UTF-8 bytes: stable across runtimes and
 * releases — changing it would move every stream, so it never changes.
 * This module is pure; it does not know how N is recorded.
 */
import type { StreamKey } from "./LedgerProtocol.js"
import { tenantKey } from "@factline/schemas"

/** The shard count recorded for a tenant first seen when none is configured. */
export const defaultShardsPerTenant = 16
/** Upper bound on a configured shard count (one tenant's Durable Objects). */
export const maxShardsPerTenant = 1024

const encoder = new TextEncoder()

/** 32-bit FNV-1a of the UTF-8 bytes of `value`, as an unsigned integer. */
export const hash = (value: string): number => {
  let h = 0x811c9dc5
  for (const byte of encoder.encode(value)) {
    h ^= byte
    h = Math.imul(h, 0x01000193)
  }
  return h >>> 0
}

/** The identity of a stream: `tenant_id/subject`. Never used to address a shard. */
export const streamKey = (key: StreamKey): string => tenantKey(key.tenant_id, key.stream)

/** The key of shard number `index` of a tenant: `tenant_id/#index`. */
export const shardKey = (tenantId: string, index: number): string => `${tenantId}/#${index}`

/** The shard a stream lives in, for a tenant with `shards` shards. */
export const shardOf = (key: StreamKey, shards: number): string => shardKey(key.tenant_id, hash(key.stream) % shards)

/**
 * A tenant's shards: `shards` of them, or — while a reshard raises the count to `next` — the first `switched` old
 * shards have handed their moving streams over to the new count's shards (placement/Reshard.ts).
 */
export interface Topology {
  readonly shards: number
  readonly next?: number
  readonly switched?: number
}

/**
 * The shard a stream lives in under a topology: its old shard, unless that shard is switched (then the new
 * count's). With `next` a multiple of `shards`, a stream of old shard i goes to one of i, i + shards, i + 2·shards…
 */
export const route = (key: StreamKey, topology: Topology): string => {
  const h = hash(key.stream)
  const old = h % topology.shards
  return shardKey(key.tenant_id, topology.next !== undefined && old < (topology.switched ?? 0) ? h % topology.next : old)
}

/** Every shard a tenant may hold facts in under a topology: both counts' while a reshard runs. */
export const shardsOf = (topology: Topology): number => Math.max(topology.shards, topology.next ?? 0)

/** Checks a configured shard count; throws with a clear message when it is not usable. */
export const checkShardCount = (value: number): number => {
  if (!Number.isInteger(value) || value < 1 || value > maxShardsPerTenant) {
    throw new RangeError(`ledger shards per tenant must be a whole number from 1 to ${maxShardsPerTenant}, got ${value}`)
  }
  return value
}
