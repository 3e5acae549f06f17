/**
 * The ledger as the router sees it: append groups and read streams, across shards.
 *
 * Groups are partitioned by shard key and each shard gets exactly one RPC per
 * call, all shards in parallel. Results come back in the order of the input.
 * The live layer wraps a `DurableObjectNamespace` of LedgerShard.
 */
import { Context, Effect, Layer, Schema } from "effect"
import type { AppendGroup, AppendResult, LedgerShardRpc, ReadOptions, StreamKey, StreamState } from "./LedgerProtocol.js"
import { shardKey } from "./LedgerProtocol.js"
import type { Fact } from "@factline/schemas"

export const shardPageSize = 1_000

/** A shard could not be reached or threw: transient, the message is retried. */
export class LedgerUnavailable extends Schema.TaggedError<LedgerUnavailable>()("LedgerUnavailable", {
  message: Schema.String
}) {}

export class Ledger extends Context.Service<Ledger, {
  readonly append: (groups: ReadonlyArray<AppendGroup>) => Effect.Effect<ReadonlyArray<AppendResult>, LedgerUnavailable>
  readonly readStreams: (keys: ReadonlyArray<StreamKey>) => Effect.Effect<ReadonlyArray<StreamState>, LedgerUnavailable>
  readonly read: (key: StreamKey, options?: ReadOptions) => Effect.Effect<StreamState, LedgerUnavailable>
  /** Every fact of one shard (by shard key), all pages, in (stream, sequence) order. */
  readonly readShard: (shardKey: string) => Effect.Effect<ReadonlyArray<Fact>, LedgerUnavailable>
}>()("@factline/core/Ledger") {
  static readonly layer = (namespace: DurableObjectNamespace) => Layer.succeed(Ledger, make(namespace))
}

const byShard = <T extends StreamKey>(items: ReadonlyArray<T>): Map<string, Array<{ item: T; index: number }>> => {
  const shards = new Map<string, Array<{ item: T; index: number }>>()
  items.forEach((item, index) => {
    const key = shardKey(item)
    const list = shards.get(key)
    if (list) list.push({ item, index })
    else shards.set(key, [{ item, index }])
  })
  return shards
}

export const make = (namespace: DurableObjectNamespace): Ledger["Service"] => {
  const stub = (key: string) => namespace.get(namespace.idFromName(key)) as unknown as LedgerShardRpc

  /** One RPC per shard, in parallel; results scattered back to input positions. */
  const perShard = <T extends StreamKey, R>(
    items: ReadonlyArray<T>,
    call: (shard: LedgerShardRpc, items: Array<T>) => Promise<ReadonlyArray<R>>
  ): Effect.Effect<ReadonlyArray<R>, LedgerUnavailable> =>
    Effect.tryPromise({
      try: async () => {
        const out = new Array<R>(items.length)
        await Promise.all(
          [...byShard(items)].map(async ([key, entries]) => {
            const results = await call(stub(key), entries.map((e) => e.item))
            entries.forEach((e, i) => (out[e.index] = results[i]!))
          })
        )
        return out
      },
      catch: (cause) => new LedgerUnavailable({ message: cause instanceof Error ? cause.message : String(cause) })
    })

  return {
    append: (groups) => perShard(groups, (shard, items) => shard.append(items)),
    readStreams: (keys) => perShard(keys, (shard, items) => shard.readStreams(items)),
    read: (key, options) => Effect.map(perShard([key], async (shard) => [await shard.read(key, options)]), (r) => r[0]!),
    readShard: (key) =>
      Effect.tryPromise({
        try: async () => {
          const shard = stub(key)
          const all: Array<Fact> = []
          for (;;) {
            const last = all.at(-1)
            const page = await shard.readShard(last ? { stream: last.stream, sequence: last.sequence } : undefined, shardPageSize)
            all.push(...page)
            if (page.length < shardPageSize) return all
          }
        },
        catch: (cause) => new LedgerUnavailable({ message: cause instanceof Error ? cause.message : String(cause) })
      })
  }
}
