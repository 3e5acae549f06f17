/**
 * Where a stream lives: shard keys, separate from stream identity.
 *
 * A stream is `tenant_id/subject`; a shard (one LedgerShard Durable Object)
 * holds many streams: `tenant_id/#(hash(subject) mod N)`, with N fixed per
 * tenant when the tenant is first seen (see LedgerTopology). The hash is
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

/** Checks a configured shard count; throws with a clear message when it is not usable. */
export const checkShardCount = (value: number): number => {
  if (!Number.isInteger(value) || value < 1 || value > maxShardsPerTenant) {
    throw new RangeError(`ledger shards per tenant must be a whole number from 1 to ${maxShardsPerTenant}, got ${value}`)
  }
  return value
}
