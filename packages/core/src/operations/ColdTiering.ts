/**
 * The scheduled run's tiering of the ledger (ColdHistory.ts does the moving): each run walks the next
 * `shardsPerRun` ledger shards (`ledger_shards`, in key order, from where the last run stopped: its place is the
 * `ledger_tiering` row of `sweep_cursors` in the platform database), and asks each to move up to `chunksPerShard`
 * chunks of its facts older than its tenant's hot window (`FACTLINE_LEDGER_HOT_DAYS`, handed in by the caller) to R2. A pass over S shards
 * takes S / `shardsPerRun` runs; a shard with a backlog is worked off over the passes.
 *
 * A shard that fails (R2 refusing, the object evicted) is logged and left for the next pass: each chunk is
 * resumable by itself. It does not read or move facts (the shard does) and touches no other table.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Failure from "../failures/Failure.js"
import * as Sql from "../platform/Sql.js"
import { factsPerSegment } from "../ledger/ColdHistory.js"
import { LedgerNamespace } from "../ledger/LedgerNamespace.js"
import * as LedgerTopology from "../ledger/LedgerTopology.js"

/** Shards asked per run. */
export const shardsPerRun = 64
/** Chunks (segments) one shard moves per run at most. */
export const chunksPerShard = 2
/** Shards asked at once. */
const concurrency = 8
const sweep = "ledger_tiering"
const dayMs = 24 * 3600 * 1000

const Cursor = Schema.Struct({ after: Schema.NullOr(Schema.String) })

/** The tenant of a shard key (`<tenant>/#<n>`). */
export const tenantOf = (shardKey: string) => shardKey.slice(0, shardKey.lastIndexOf("/#"))

/** Each tenant's hot window in days (undefined: never tiered): `FACTLINE_LEDGER_HOT_DAYS`, read by the composition. */
export type HotDays = (tenant: string) => number | undefined

/** One scheduled pass over the next shards; returns how many facts moved to R2. */
export const run = Effect.fn("ColdTiering.run")(function*(hotDays: HotDays) {
  const { namespace } = yield* LedgerNamespace
  const sql = yield* Sql.PlatformDatabase
  const now = yield* Clock.currentTimeMillis
  const cursor = (yield* sql.first(Cursor, Sql.statement("SELECT after FROM sweep_cursors WHERE sweep = ?", sweep)))?.after ?? ""
  const shards = yield* LedgerTopology.shardsAfter(cursor, shardsPerRun)
  const moved = yield* Effect.forEach(shards, (shardKey) => {
    const days = hotDays(tenantOf(shardKey))
    if (days === undefined) return Effect.succeed(0)
    const cutoff = new Date(now - days * dayMs).toISOString()
    return Effect.tryPromise({
      try: async () => {
        const shard = namespace.get(namespace.idFromName(shardKey))
        let tiered = 0
        for (let chunk = 0; chunk < chunksPerShard; chunk++) {
          const result = await shard.tier(shardKey, cutoff, factsPerSegment)
          tiered += result.tiered
          if (result.tiered === 0) break
        }
        return tiered
      },
      catch: Failure.unavailable("the ledger's cold history")
    }).pipe(Effect.catch((error) => Effect.as(Effect.logError(`shard ${shardKey} could not tier its facts, the next pass retries: ${error.message}`), 0)))
  }, { concurrency })
  const at = new Date(now).toISOString()
  yield* sql.run(Sql.statement(
    `INSERT INTO sweep_cursors (sweep, after, pass_started_at, updated_at) VALUES (?, ?, ?, ?)
     ON CONFLICT (sweep) DO UPDATE SET after = excluded.after, pass_started_at = CASE WHEN excluded.after IS NULL THEN excluded.pass_started_at ELSE sweep_cursors.pass_started_at END, updated_at = excluded.updated_at`,
    sweep, shards.length < shardsPerRun ? null : shards.at(-1)!, at, at
  ))
  return moved.reduce((a, b) => a + b, 0)
})
