/**
 * How a ledger call (Ledger.ts) reaches its shards: items grouped by the shard their stream routes to (by the
 * tenant's topology, or by the count a shard answered `moved` with), one RPC per shard in parallel with results
 * scattered back to input order — failing as a whole, or settled per shard (a shard's failure is its own items'
 * outcome) — the topology registered on writes and looked up on reads, and reads that follow `moved` answers to
 * the new shard. It knows no operation's meaning (Ledger.ts composes them).
 */
import * as Effect from "effect/Effect"
import type { LedgerShardRpc, StreamKey, StreamState } from "./LedgerProtocol.js"
import * as Sql from "../platform/Sql.js"
import type * as LedgerTopology from "./LedgerTopology.js"
import * as Shards from "./Shards.js"
import * as Failure from "../failures/Failure.js"

export const unavailable = Failure.unavailable("the ledger")

/** How many times one call follows a shard's `moved` answer (each a reshard newer than the last): more is a bug. */
export const maxHops = 4

/** Where each item's stream lives: by its tenant's topology, or by the count a shard answered `moved` with. */
export type Routing = ReadonlyMap<string, Shards.Topology>

/** The topology of a stream a shard said moved to `shards` (every stream of the tenant routes by that count). */
export const movedTo = (shards: number): Shards.Topology => ({ shards })

/** The items grouped by the shard holding their stream, each with its input position. */
export const byShard = <T extends StreamKey>(items: ReadonlyArray<T>, shards: Routing | ((item: T) => Shards.Topology)) => {
  const groups = new Map<string, Array<{ readonly item: T; readonly index: number }>>()
  items.forEach((item, index) => {
    const key = Shards.route(item, typeof shards === "function" ? shards(item) : shards.get(item.tenant_id)!)
    const list = groups.get(key)
    if (list) list.push({ item, index })
    else groups.set(key, [{ item, index }])
  })
  return groups
}

/** What every operation reaches: a shard's stub by shard key, and the topology. */
export interface Reach {
  readonly stub: (key: string) => LedgerShardRpc
  readonly topology: LedgerTopology.LedgerTopology
}

/** One RPC per shard, in parallel; results scattered back to input positions. */
export const perShard = <T extends StreamKey, R>(
  reach: Reach,
  items: ReadonlyArray<T>,
  shards: Routing | ((item: T) => Shards.Topology),
  call: (shard: LedgerShardRpc, items: Array<T>, shardKey: string) => Promise<ReadonlyArray<R>>
): Effect.Effect<Array<R>, Sql.SqlFailure> =>
  Effect.tryPromise({
    try: async () => {
      const groups = byShard(items, shards)
      const out = new Array<R>(items.length)
      await Promise.all([...groups].map(async ([key, entries]) => {
        const results = await call(reach.stub(key), entries.map((e) => e.item), key)
        entries.forEach((e, i) => (out[e.index] = results[i]!))
      }))
      return out
    },
    catch: unavailable
  })

/** Like `perShard`, but settled per shard: a shard's failure becomes `failed(message)` for its own items only. */
export const perShardSettled = <T extends StreamKey, R, F>(
  reach: Reach,
  items: ReadonlyArray<T>,
  shards: Routing | ((item: T) => Shards.Topology),
  call: (shard: LedgerShardRpc, items: Array<T>, shardKey: string) => Promise<ReadonlyArray<R>>,
  failed: (message: string) => F
): Effect.Effect<Array<R | F>> =>
  Effect.promise(async () => {
    const groups = byShard(items, shards)
    const out = new Array<R | F>(items.length)
    await Promise.all([...groups].map(async ([key, entries]) => {
      try {
        const results = await call(reach.stub(key), entries.map((e) => e.item), key)
        entries.forEach((e, i) => (out[e.index] = results[i]!))
      } catch (cause) {
        const outcome = failed(`ledger shard ${key}: ${unavailable(cause).message}`)
        for (const e of entries) out[e.index] = outcome
      }
    }))
    return out
  })

export const register = (reach: Reach, items: ReadonlyArray<StreamKey>) =>
  Effect.mapError(reach.topology.register(items.map((i) => i.tenant_id)), unavailable)

/** Topologies of the tenants that exist; streams of unknown tenants are empty. */
export const known = (reach: Reach, items: ReadonlyArray<StreamKey>) =>
  Effect.gen(function*() {
    const shards = new Map<string, Shards.Topology>()
    for (const tenant of new Set(items.map((i) => i.tenant_id))) {
      const n = yield* Effect.mapError(reach.topology.lookup(tenant), unavailable)
      if (n !== undefined) shards.set(tenant, n)
    }
    return shards
  })

export const empty = (key: StreamKey): StreamState => ({ tenant_id: key.tenant_id, stream: key.stream, version: 0, facts: [] })

/**
 * Reads each stream of `states` a shard answered `moved` again, from its new shard (the tenant's cached topology
 * dropped), until none is: a reshard's old shard is the authority on where its streams went.
 */
export const followMoved = <K extends StreamKey>(
  reach: Reach,
  keys: ReadonlyArray<K>,
  states: Array<StreamState>,
  readAt: (items: Array<K>, topology: (item: K) => Shards.Topology) => Effect.Effect<Array<StreamState>, Sql.SqlFailure>
) =>
  Effect.gen(function*() {
    for (let hop = 0; hop < maxHops; hop++) {
      const moved = keys.flatMap((key, i) => (states[i]?.moved === undefined ? [] : [i]))
      if (moved.length === 0) return states
      for (const i of moved) reach.topology.refresh(keys[i]!.tenant_id)
      const again = yield* readAt(moved.map((i) => keys[i]!), (item) => movedTo(states[keys.indexOf(item)]!.moved!))
      moved.forEach((i, j) => (states[i] = again[j]!))
    }
    if (states.some((state) => state.moved !== undefined)) return yield* new Failure.Unavailable({ service: "the ledger", message: `a stream moved more than ${maxHops} times in one read` })
    return states
  })
