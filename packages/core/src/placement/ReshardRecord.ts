/**
 * A reshard's record (`ledger_reshards`, platform database, owned by the reshard: Reshard.ts): its row, the progress
 * it carries from step to step (the copy's and the verification's place, the digests per new shard, the counts), how
 * it reads in the API, and its reads. It does not run a step (ReshardSteps.ts) nor start one (Reshard.ts).
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { ReshardView, reshardPhases, reshardStages } from "../api/Tenants.js"
import * as Failure from "../failures/Failure.js"
import type { ShardCursor } from "../ledger/LedgerProtocol.js"
import * as Sql from "../platform/Sql.js"

export const phases = reshardPhases
export const stages = reshardStages
export type Stage = (typeof stages)[number]

/** A new shard's copy, summed: facts, and the sum (mod 2³²) of each fact's hash. */
export interface Digest {
  readonly facts: number
  readonly sum: number
}

/** What `ledger_reshards.progress` holds. */
export interface Progress {
  /** The copy's position in the current old shard. */
  readonly cursor: ShardCursor | null
  /** Per new shard (its index), the digest of what the copy wrote there. */
  readonly digests: Readonly<Record<string, Digest>>
  /** Facts copied, every old shard so far. */
  readonly copied: number
  /** Streams moved (dropped from their old shard), every old shard so far. */
  readonly moved: number
  /** Timers, snapshots and outbox rows carried, every old shard so far. */
  readonly carried: number
  /** The verification's place: the new shard being read back, where its read stands, and its digest so far. */
  readonly checking?: { readonly target: number; readonly cursor: ShardCursor | null; readonly digest: Digest }
}

export const Row = Schema.Struct({
  id: Schema.String,
  tenant_id: Schema.String,
  from_shards: Schema.Number,
  to_shards: Schema.Number,
  phase: Schema.Literals(phases),
  shard: Schema.Number,
  stage: Schema.Literals(stages),
  progress: Schema.String,
  error: Schema.NullOr(Schema.String),
  started_by: Schema.String,
  started_at: Schema.String,
  updated_at: Schema.String,
  finished_at: Schema.NullOr(Schema.String)
})
export type Row = typeof Row.Type

export const View = ReshardView
export type View = typeof View.Type

export const emptyProgress: Progress = { cursor: null, digests: {}, copied: 0, moved: 0, carried: 0 }
export const progressOf = (row: Row): Progress => ({ ...emptyProgress, ...(JSON.parse(row.progress) as Partial<Progress>) })

export const view = (row: Row): View => {
  const progress = progressOf(row)
  return {
    reshard_id: row.id,
    tenant_id: row.tenant_id,
    from_shards: row.from_shards,
    to_shards: row.to_shards,
    phase: row.phase,
    shard: row.shard,
    stage: row.stage,
    shards_done: row.phase === "done" ? row.from_shards : row.shard,
    facts_copied: progress.copied,
    streams_moved: progress.moved,
    rows_carried: progress.carried,
    error: row.error,
    started_by: row.started_by,
    started_at: row.started_at,
    updated_at: row.updated_at,
    finished_at: row.finished_at
  }
}

export const unavailable = Failure.unavailable("the platform database")

/** A reshard's record, by id. */
export const find = Effect.fn("Reshard.find")(function*(id: string) {
  const platform = yield* Sql.PlatformDatabase
  return yield* Effect.mapError(platform.first(Row, Sql.statement("SELECT * FROM ledger_reshards WHERE id = ?", id)), unavailable)
})

/** A tenant's latest reshard. */
export const latest = Effect.fn("Reshard.latest")(function*(tenantId: string) {
  const platform = yield* Sql.PlatformDatabase
  return yield* Effect.mapError(platform.first(Row, Sql.statement("SELECT * FROM ledger_reshards WHERE tenant_id = ? ORDER BY started_at DESC, id DESC LIMIT 1", tenantId)), unavailable)
})

/** The reshard running (of any tenant, or of `tenantId`), if any. */
export const active = Effect.fn("Reshard.active")(function*(tenantId?: string) {
  const platform = yield* Sql.PlatformDatabase
  return yield* Effect.mapError(platform.first(Row, tenantId === undefined
    ? Sql.statement("SELECT * FROM ledger_reshards WHERE phase = 'running' ORDER BY started_at LIMIT 1")
    : Sql.statement("SELECT * FROM ledger_reshards WHERE tenant_id = ? AND phase = 'running' LIMIT 1", tenantId)), unavailable)
})
