/**
 * The ledger as the consumers and the API see it: append groups, read
 * streams, hand facts back for relaying — across shards.
 *
 * Streams are placed on shards by LedgerTopology + Shards (`tenant/#(hash(subject)
 * mod N)`); every call groups its items by shard and makes exactly one RPC per
 * shard, all shards in parallel, results in input order. Appends and handovers
 * are settled per shard: a shard that cannot be reached fails only its own
 * groups (`unavailable`), so one sick Durable Object never holds back the
 * streams of the other shards — their messages are not retried with it. Appending registers
 * a tenant the first time it is seen; reading never does, and reading a
 * stream of an unknown tenant answers an empty stream without touching a
 * Durable Object. Stream reads are complete: a stream longer than one page is
 * read page by page. The live layer wraps a `DurableObjectNamespace` of
 * LedgerShard and the D1 database holding the topology.
 *
 * While a reshard runs (Reshard.ts), a shard may refuse a stream: `held` (being
 * copied: the group's outcome is `unavailable`, retried like an unreachable
 * shard) or `moved` with the tenant's new shard count — then this isolate's
 * cached topology is stale: it is dropped, and the stream is asked of its new
 * shard at once, within the same call (`maxHops` times at most). How a call reaches its shards (grouping,
 * one RPC per shard, settling, following `moved`) is LedgerReach.ts's.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { Fact } from "@factline/schemas"
import { type AppendGroup, type AppendResult, type Handover, type ReadOptions, type ShardCursor, type StreamKey, type StreamRead, type StreamState, toResult } from "./LedgerProtocol.js"
import { LedgerNamespace, type LedgerShardNamespace } from "./LedgerNamespace.js"
import * as Sql from "../platform/Sql.js"
import * as LedgerTopology from "./LedgerTopology.js"
import * as Shards from "./Shards.js"
import * as Failure from "../failures/Failure.js"
import { empty, followMoved, known, maxHops, movedTo, perShard, perShardSettled, type Reach, register, type Routing, unavailable } from "./LedgerReach.js"

export { maxHops } from "./LedgerReach.js"

export const shardPageSize = 1_000

/** The groups of a shard that could not be reached (or threw): transient, those messages are retried. */
export interface ShardUnavailable {
  readonly status: "unavailable"
  readonly message: string
}

/** An append's result per group: the shard's answer, or `unavailable` when its shard could not be reached. */
export type AppendOutcome = AppendResult | ShardUnavailable

/** Facts a caller could not relay, for one stream: handed to the stream's shard. */
export interface StreamHandover extends StreamKey {
  readonly entries: ReadonlyArray<Handover>
}

export class Ledger extends Context.Service<Ledger, {
  /** One result per group, in order; fails as a whole only when the topology cannot be read. */
  readonly append: (groups: ReadonlyArray<AppendGroup>) => Effect.Effect<ReadonlyArray<AppendOutcome>, Sql.SqlFailure>
  /** The complete state of each stream: every fact, or (a `StreamRead` asking for snapshots) the snapshots found and every fact after them. */
  readonly readStreams: (keys: ReadonlyArray<StreamRead>) => Effect.Effect<ReadonlyArray<StreamState>, Sql.SqlFailure>
  readonly read: (key: StreamKey, options?: ReadOptions) => Effect.Effect<StreamState, Sql.SqlFailure>
  /**
   * Gives stored facts to their shards' outbox relay (one RPC per shard). Returns the streams
   * (`Shards.streamKey`) whose shard could not take them; the others were handed over.
   */
  readonly handover: (items: ReadonlyArray<StreamHandover>) => Effect.Effect<ReadonlySet<string>, Sql.SqlFailure>
  /** Every fact of one shard (by shard key), all pages, in (stream, sequence) order. */
  readonly readShard: (shardKey: string) => Effect.Effect<ReadonlyArray<Fact>, Sql.SqlFailure>
  /** One page of a shard's facts after a (stream, sequence) position, in that order: at most `limit` (≤ `shardPageSize`). */
  readonly readShardPage: (shardKey: string, after: ShardCursor | undefined, limit: number) => Effect.Effect<ReadonlyArray<Fact>, Sql.SqlFailure>
  /**
   * One window of a shard's walk for recovery: the facts appended since `since` (ISO-8601) among the next `scan`
   * after `after`, and the position to go on from (undefined: the shard is walked).
   */
  readonly readShardSince: (shardKey: string, after: ShardCursor | undefined, since: string, scan: number) => Effect.Effect<{ readonly facts: ReadonlyArray<Fact>; readonly next: ShardCursor | undefined }, Sql.SqlFailure>
  /**
   * The tenant's fact with this id, wherever its stream lives: every shard of the tenant is asked in parallel
   * (each finds it by its unique index: N indexed lookups, no scan, no D1 copy). Null for an unknown tenant or id.
   */
  readonly findFact: (tenantId: string, factId: string) => Effect.Effect<Fact | null, Sql.SqlFailure>
  /** Asks one shard (by shard key) to re-arm its relay if rows are waiting; how many rows wait. */
  readonly relayNow: (shardKey: string) => Effect.Effect<number, Sql.SqlFailure>
  /** Deletes all of one object's storage and its alarm, by shard key (a tenant's deletion): it answers as a new, empty object afterwards. */
  readonly deleteShard: (shardKey: string) => Effect.Effect<void, Sql.SqlFailure>
}>()("@factline/core/Ledger") {
  /** Over the LedgerShard namespace and the platform database (the topology), recording `shardsPerTenant` for new tenants. */
  static readonly layer = (shardsPerTenant?: number) =>
    Layer.effect(Ledger, Effect.gen(function*() {
      const { namespace } = yield* LedgerNamespace
      const sql = yield* Sql.PlatformDatabase
      return make(namespace, LedgerTopology.make(sql, shardsPerTenant))
    }))
}

const readOf = (reach: Reach): Ledger["Service"]["read"] =>
  Effect.fn("Ledger.read")(function*(key, options) {
    const shards = yield* known(reach, [key])
    if (!shards.has(key.tenant_id)) return empty(key)
    const readAt = (items: Array<StreamKey>, topology: Routing | ((item: StreamKey) => Shards.Topology)) =>
      perShard(reach, items, topology, async (shard, list) => [await shard.read(list[0]!, options)])
    const states = yield* readAt([key], shards)
    const [state] = yield* followMoved(reach, [key], states, readAt)
    return state!
  })

/** Completes states whose first page did not hold the whole stream. */
const complete = (read: Ledger["Service"]["read"], state: StreamState): Effect.Effect<StreamState, Sql.SqlFailure> =>
  Effect.gen(function*() {
    const facts = [...state.facts]
    // Facts after a snapshot start after `state.after`; the next pages are plain reads of the stream.
    while ((facts.at(-1)?.sequence ?? state.after ?? 0) < state.version) {
      const page = yield* read({ tenant_id: state.tenant_id, stream: state.stream }, { after: facts.at(-1)?.sequence ?? state.after ?? 0 })
      if (page.facts.length === 0) return yield* new Failure.Unavailable({ service: "the ledger", message: `stream ${Shards.streamKey(state)} ended before its version ${state.version}` })
      facts.push(...page.facts)
    }
    return facts.length === state.facts.length ? state : { ...state, facts }
  })

/** A shard's answer as the append's outcome: a `held` stream is `unavailable` (retried); `moved` is followed by the caller. */
type Answered = AppendOutcome | { readonly status: "moved"; readonly shard_count: number }

const appendOf = (reach: Reach): Ledger["Service"]["append"] =>
  Effect.fn("Ledger.append")(function*(groups) {
    if (groups.length === 0) return []
    const shards = yield* register(reach, groups)
    const send = (items: ReadonlyArray<AppendGroup>, topology: Routing | ((item: AppendGroup) => Shards.Topology)) =>
      perShardSettled(reach, items, topology, async (shard, list) =>
        (await shard.append(list)).map((answer, i): Answered =>
          answer.status === "moved" ? answer
          : answer.status === "held" ? { status: "unavailable", message: answer.message }
          : toResult(list[i]!, answer)),
        (message): Answered => ({ status: "unavailable", message }))
    const outcomes = yield* send(groups, shards)
    // A stream that moved in a reshard is appended in its new shard, with the same expected version: the old shard
    // refused it whole, so nothing of it was written there.
    for (let hop = 0; hop < maxHops; hop++) {
      const moved = groups.flatMap((_, i) => (outcomes[i]!.status === "moved" ? [i] : []))
      if (moved.length === 0) break
      for (const i of moved) reach.topology.refresh(groups[i]!.tenant_id)
      const counts = new Map(moved.map((i) => [groups[i]!, (outcomes[i] as { readonly shard_count: number }).shard_count] as const))
      const again = yield* send(moved.map((i) => groups[i]!), (group) => movedTo(counts.get(group)!))
      moved.forEach((i, j) => (outcomes[i] = again[j]!))
    }
    return outcomes.map((outcome): AppendOutcome =>
      outcome.status === "moved" ? { status: "unavailable", message: `stream moved more than ${maxHops} times in one append` } : outcome)
  })

const readStreamsOf = (reach: Reach, read: Ledger["Service"]["read"]): Ledger["Service"]["readStreams"] =>
  Effect.fn("Ledger.readStreams")(function*(keys) {
    const shards = yield* known(reach, keys)
    const present = keys.filter((k) => shards.has(k.tenant_id))
    const readAt = (items: Array<StreamRead>, topology: Routing | ((item: StreamRead) => Shards.Topology)) =>
      perShard(reach, items, topology, (shard, list) => shard.readStreams(list))
    const states = yield* followMoved(reach, present, yield* readAt(present, shards), readAt)
    const byStream = new Map(states.map((s) => [Shards.streamKey(s), s]))
    return yield* Effect.forEach(keys, (k) => {
      const s = byStream.get(Shards.streamKey(k))
      return s ? complete(read, s) : Effect.succeed(empty(k))
    })
  })

const handoverOf = (reach: Reach): Ledger["Service"]["handover"] =>
  Effect.fn("Ledger.handover")(function*(items) {
    if (items.length === 0) return new Set<string>() as ReadonlySet<string>
    const shards = yield* register(reach, items)
    // Per stream: handed over, not (its shard unreachable), or moved to the tenant's shard under this count.
    const send = (list: ReadonlyArray<StreamHandover>, topology: Routing | ((item: StreamHandover) => Shards.Topology)) =>
      perShardSettled(reach, list, topology, async (shard, group, shardKey) => {
        const answer = await shard.handover(group.flatMap((i) => i.entries.map((entry) => ({ ...entry, stream: i.stream }))), shardKey)
        if (typeof answer === "number") return group.map((): boolean | number => true)
        // The shard wrote the entries of the streams it still holds; the others moved.
        const [, index] = shardKey.split("/#")
        return group.map((i): boolean | number => (Shards.hash(i.stream) % answer.shard_count === Number(index) ? true : answer.shard_count))
      }, (): boolean | number => false)
    const handed = yield* send(items, shards)
    for (let hop = 0; hop < maxHops; hop++) {
      const moved = items.flatMap((_, i) => (typeof handed[i] === "number" ? [i] : []))
      if (moved.length === 0) break
      for (const i of moved) reach.topology.refresh(items[i]!.tenant_id)
      const counts = new Map(moved.map((i) => [items[i]!, handed[i] as number] as const))
      const again = yield* send(moved.map((i) => items[i]!), (item) => movedTo(counts.get(item)!))
      moved.forEach((i, j) => (handed[i] = again[j]!))
    }
    return new Set(items.filter((_, i) => handed[i] !== true).map(Shards.streamKey)) as ReadonlySet<string>
  })

const findFactOf = (reach: Reach): Ledger["Service"]["findFact"] =>
  Effect.fn("Ledger.findFact")(function*(tenantId, factId) {
    const shards = yield* known(reach, [{ tenant_id: tenantId, stream: "" }])
    const topology = shards.get(tenantId)
    if (topology === undefined) return null
    // While a reshard runs, the new count's shards too (a fact is in one of them, or in both until its old shard drops it).
    const count = Shards.shardsOf(topology)
    const found = yield* Effect.tryPromise({
      try: () => Promise.all(Array.from({ length: count }, (_, i) => reach.stub(Shards.shardKey(tenantId, i)).findFact(factId))),
      catch: unavailable
    })
    // A shard holds one tenant's streams; checked all the same, so another tenant's fact is never answered.
    return found.find((fact) => fact !== null && fact.tenant_id === tenantId) ?? null
  })

const readShardOf = (reach: Reach): Ledger["Service"]["readShard"] =>
  Effect.fn("Ledger.readShard")(function*(key) {
    return yield* Effect.tryPromise({
      try: async () => {
        const shard = reach.stub(key)
        const all: Array<Fact> = []
        for (;;) {
          const last = all.at(-1)
          const page = await shard.readShard(last ? { stream: last.stream, sequence: last.sequence } : undefined, shardPageSize)
          all.push(...page)
          if (page.length < shardPageSize) return all
        }
      },
      catch: unavailable
    })
  })

export const make = (namespace: LedgerShardNamespace, topology: LedgerTopology.LedgerTopology): Ledger["Service"] => {
  const reach: Reach = { stub: (key) => namespace.get(namespace.idFromName(key)), topology }
  const { stub } = reach
  const read = readOf(reach)
  return {
    append: appendOf(reach),
    readStreams: readStreamsOf(reach, read),
    read,
    handover: handoverOf(reach),
    findFact: findFactOf(reach),
    relayNow: Effect.fn("Ledger.relayNow")(function*(key) {
      return yield* Effect.tryPromise({ try: () => stub(key).relayNow(key), catch: unavailable })
    }),
    deleteShard: Effect.fn("Ledger.deleteShard")(function*(key) {
      return yield* Effect.tryPromise({ try: () => stub(key).deleteAll(), catch: unavailable })
    }),
    readShard: readShardOf(reach),
    readShardSince: Effect.fn("Ledger.readShardSince")(function*(key, after, since, scan) {
      return yield* Effect.tryPromise({ try: () => stub(key).readShardSince(after, since, scan), catch: unavailable })
    }),
    readShardPage: Effect.fn("Ledger.readShardPage")(function*(key, after, limit) {
      return yield* Effect.tryPromise({ try: () => stub(key).readShard(after, Math.min(limit, shardPageSize)), catch: unavailable })
    })
  }
}
