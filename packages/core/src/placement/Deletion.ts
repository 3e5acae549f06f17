/**
 * Deleting a departed tenant's whole data from every store: a resumable operation of the batch queue (operation
 * `delete_tenant`), run as a move is (Move.ts) — one step per message, the phase and every cursor recorded in
 * `tenant_deletions` (platform database, owned here), each step deleting what is still there (DeletionStores.ts).
 *
 * 1. **held** — `start` sets the tenant's `frozen_since` (a move's hold: its writers refuse retryably), then waits
 *    `cacheMs` + `Move.settleMs`, until every isolate sees the hold and a write that passed it has landed.
 * 2. **workflows** — its running workflow instances terminated through the Workflows door.
 * 3. **ledger** — every LedgerShard object of the tenant (`<tenant>/#0 … #N-1`, and any `ledger_shards` registered)
 *    and its personal-data key store (`<tenant>/#keys`) delete all their storage and their alarm.
 * 4. **objects** — R2: `<tenant>/` (archive, batch files, uploads), `_payloads/<tenant>/`; its lines of kept events
 *    and its spilled dead letters.
 * 5. **rows** — every D1 database: the tables a move copies (`Move.tablesToMove`, the move's `deletePage`), the
 *    platform's (`Move.platformTables`, the placement aside), its inbox keys.
 * 6. **verified** — a re-count over every store (every table with a `tenant_id` column, found in `sqlite_master`, not
 *    from a list), once the key cache's bound has passed since the key store was emptied. All 0 → the placement row
 *    goes (the hold with it): **deleted**. Something left → again from `workflows`, up to `Move.rounds` times.
 *
 * A failed deletion keeps the tenant's writes held (a half-deleted tenant takes none); a new `DELETE` picks up what
 * is left. The record is kept: the tenant id, counts and times, no data of the tenant's. Not reached: the tenant's
 * messages in flight on a queue (consumed after the hold lifts, into a new, empty tenant, or expired), what
 * Cloudflare Workflows keeps of a terminated instance, what webhook receivers hold, the tenant's tokens.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { BatchPayload } from "@factline/schemas"
import { DeletionView, deletionPhases } from "../api/Tenants.js"
import * as Failure from "../failures/Failure.js"
import * as LedgerTopology from "../ledger/LedgerTopology.js"
import * as Sql from "../platform/Sql.js"
import * as Time from "../platform/Time.js"
import * as Stores from "./DeletionStores.js"
import * as Move from "./Move.js"
import { TenantPlacement } from "./Placement.js"

export const phases = deletionPhases
export type Phase = (typeof phases)[number]

/** What `tenant_deletions.progress` holds. */
interface Progress {
  readonly round: number
  /** The shard objects to empty (fixed when the ledger phase starts) and how many are done. */
  readonly shards?: ReadonlyArray<string>
  readonly shardsDone?: number
  /** When the last shard object and the key store were emptied: the hold lasts the key cache's bound after it. */
  readonly keysEmptiedAt?: string
  /** The shared objects' walk: the last key read under each shared prefix, and whether it is walked. */
  readonly shared?: Readonly<Record<string, { readonly after: string | null; readonly done: boolean }>>
  /** Per store, what was removed (every round). */
  readonly removed: Stores.PerStore
  /** The last re-count. */
  readonly remaining?: Stores.PerStore
}

/** A deletion's row in `tenant_deletions`. */
export const Row = Schema.Struct({
  id: Schema.String,
  tenant_id: Schema.String,
  phase: Schema.Literals(phases),
  progress: Schema.String,
  report: Schema.NullOr(Schema.String),
  error: Schema.NullOr(Schema.String),
  started_by: Schema.String,
  started_at: Schema.String,
  updated_at: Schema.String,
  finished_at: Schema.NullOr(Schema.String)
})
export type Row = typeof Row.Type

/** What the API shows of a deletion: the description's (`@factline/core/api`) `TenantDeletion`. */
export const View = DeletionView
export type View = typeof View.Type

const Id = Schema.Struct({ id: Schema.String })

const unavailable = Failure.unavailable("the platform database")
const permanent = (message: string) => new Failure.PermanentError({ reason: "permanent_failure", message })

const progressOf = (row: Row): Progress => {
  const parsed = JSON.parse(row.progress) as Partial<Progress>
  return { ...parsed, round: parsed.round ?? 1, removed: parsed.removed ?? {} }
}

export const view = (row: Row): View => {
  const progress = progressOf(row)
  return {
    deletion_id: row.id,
    tenant_id: row.tenant_id,
    phase: row.phase,
    round: progress.round,
    removed: progress.removed,
    remaining: progress.remaining ?? null,
    error: row.error,
    started_by: row.started_by,
    started_at: row.started_at,
    updated_at: row.updated_at,
    finished_at: row.finished_at
  }
}

/** A deletion's record, by id. */
export const find = Effect.fn("Deletion.find")(function*(id: string) {
  const platform = yield* Sql.PlatformDatabase
  return yield* Effect.mapError(platform.first(Row, Sql.statement("SELECT * FROM tenant_deletions WHERE id = ?", id)), unavailable)
})

/** The tenant's latest deletion, if any. */
export const latest = Effect.fn("Deletion.latest")(function*(tenantId: string) {
  const platform = yield* Sql.PlatformDatabase
  return yield* Effect.mapError(platform.first(Row, Sql.statement("SELECT * FROM tenant_deletions WHERE tenant_id = ? ORDER BY started_at DESC, id DESC LIMIT 1", tenantId)), unavailable)
})

/** The deletion in progress (of any tenant, or of `tenantId`), if any. */
export const active = Effect.fn("Deletion.active")(function*(tenantId?: string) {
  const platform = yield* Sql.PlatformDatabase
  return yield* Effect.mapError(platform.first(Row, tenantId === undefined
    ? Sql.statement("SELECT * FROM tenant_deletions WHERE phase NOT IN ('deleted', 'failed') ORDER BY started_at LIMIT 1")
    : Sql.statement("SELECT * FROM tenant_deletions WHERE tenant_id = ? AND phase NOT IN ('deleted', 'failed') LIMIT 1", tenantId)), unavailable)
})

/**
 * Starts deleting `tenantId`'s whole data: records the deletion and holds the tenant's writes (one platform
 * transaction); the record and the first step to enqueue. Answers the running deletion, or the finished one when
 * nothing of the tenant came back since, with no step (`first` undefined).
 */
export const start = Effect.fn("Deletion.start")(function*(tenantId: string, startedBy: string) {
  const shape = yield* TenantPlacement
  const platform = yield* Sql.PlatformDatabase
  const running = yield* active(tenantId)
  if (running) return { record: running, first: undefined }
  const last = yield* latest(tenantId)
  const holds = yield* Stores.known(platform, tenantId)
  if (last?.phase === "deleted" && !holds) return { record: last, first: undefined }
  if (!holds && last === undefined) return yield* new Failure.NotFound({ message: `nothing is known of tenant ${tenantId}: no placement, no ledger` })
  const moving = yield* Move.active(tenantId)
  if (moving) return yield* new Failure.Conflict({ message: `tenant ${tenantId} is being moved (${moving.id}); delete it when the move has ended` })
  const rebuilding = yield* Effect.mapError(platform.first(Id, Sql.statement("SELECT id FROM projection_rebuilds WHERE status = 'running' LIMIT 1")), unavailable)
  if (rebuilding) return yield* new Failure.Conflict({ message: `a rebuild is running (${rebuilding.id}); delete the tenant when it has finished` })
  const id = `del_${(yield* Time.millis).toString(36)}_${crypto.randomUUID().slice(0, 8)}`
  const now = yield* Time.now
  const progress: Progress = { round: 1, removed: {} }
  const [inserted] = yield* Effect.mapError(platform.batch([
    // One deletion per tenant at a time: the insert happens only when none is in progress.
    Sql.statement(
      `INSERT INTO tenant_deletions (id, tenant_id, phase, progress, started_by, started_at, updated_at)
       SELECT ?1, ?2, 'held', ?3, ?4, ?5, ?5
       WHERE NOT EXISTS (SELECT 1 FROM tenant_deletions WHERE tenant_id = ?2 AND phase NOT IN ('deleted', 'failed'))`,
      id, tenantId, JSON.stringify(progress), startedBy, now
    ),
    // The hold, on the tenant's placement (a held one is made when it has none: its next write must not place it).
    Sql.statement(
      `INSERT INTO tenant_placements (tenant_id, database, placed_at, frozen_since)
       SELECT ?1, 0, ?2, ?2 WHERE EXISTS (SELECT 1 FROM tenant_deletions WHERE id = ?3)
       ON CONFLICT (tenant_id) DO UPDATE SET frozen_since = excluded.frozen_since`,
      tenantId, now, id
    )
  ]), unavailable)
  if (inserted!.changes === 0) return { record: (yield* active(tenantId)) ?? (yield* latest(tenantId))!, first: undefined }
  shape.forget([tenantId])
  const first: BatchPayload = { batch_id: id, operation: "delete_tenant", offset: 0, total: 0 }
  return { record: (yield* find(id))!, first }
})

interface Step {
  readonly deletion: Row
  readonly platform: Sql.Sql
  readonly progress: Progress
  readonly now: number
  /** The next message of the deletion, after `delayMs`. */
  readonly next: (delayMs?: number) => Move.Next
}

/** Records the phase and progress (each left as it is when not given); the next message. */
const record = (s: Step, fields: { phase?: Phase; progress?: Progress }) =>
  Effect.as(
    Effect.mapError(s.platform.run(Sql.statement(
      "UPDATE tenant_deletions SET phase = COALESCE(?2, phase), progress = COALESCE(?3, progress), updated_at = ?4 WHERE id = ?1 AND phase NOT IN ('deleted', 'failed')",
      s.deletion.id, fields.phase ?? null, fields.progress ? JSON.stringify(fields.progress) : null, new Date(s.now).toISOString()
    )), unavailable),
    s.next()
  )

const removing = (s: Step, store: string, counts: Stores.Counts, more: Partial<Progress> = {}): Progress => ({ ...s.progress, ...more, removed: Stores.add(s.progress.removed, store, counts) })

/** workflows: the running instances terminated, a page at a time. */
const workflows = (s: Step) =>
  Effect.flatMap(Stores.terminateRunning(s.platform, s.deletion.tenant_id), (counts) =>
    counts === undefined ? record(s, { phase: "ledger" }) : record(s, { progress: removing(s, "workflows", counts) }))

/** ledger: every shard object and the key store emptied, a slice per step (the list fixed at the first). */
const ledger = (s: Step) =>
  Effect.gen(function*() {
    const shards = s.progress.shards ?? (yield* Stores.shardKeysOf(s.platform, s.deletion.tenant_id))
    const done = s.progress.shardsDone ?? 0
    const slice = shards.slice(done, done + Stores.shardsPerStep)
    yield* Stores.emptyShards(slice)
    const keyStore = slice.includes(Stores.keyStoreKey(s.deletion.tenant_id)) ? 1 : 0
    const finished = done + slice.length >= shards.length
    const progress = removing(s, "ledger", { shard_objects: slice.length - keyStore, key_store: keyStore }, { shards, shardsDone: done + slice.length, ...(finished ? { keysEmptiedAt: new Date(s.now).toISOString() } : {}) })
    return yield* record(s, { ...(finished ? { phase: "objects" as const } : {}), progress })
  })

/** objects: the tenant's prefixes emptied a page at a time, then each shared prefix walked. */
const objects = (s: Step) =>
  Effect.gen(function*() {
    const tenantId = s.deletion.tenant_id
    const own = yield* Stores.deleteOwnObjects(tenantId)
    if (own) return yield* record(s, { progress: removing(s, "r2", { [own.prefix]: own.count }) })
    for (const prefix of Stores.sharedPrefixes) {
      const state = s.progress.shared?.[prefix] ?? { after: null, done: false }
      if (state.done) continue
      const walked = yield* Stores.cleanShared(prefix, state.after, tenantId)
      const shared = { ...s.progress.shared, [prefix]: { after: walked.after, done: walked.done } }
      return yield* record(s, { progress: removing(s, "r2", { [prefix]: walked.removed }, { shared }) })
    }
    return yield* record(s, { phase: "rows" })
  })

/** rows: every database's rows of the tenant, `Move.rowsPerStep` per step. */
const rows = (s: Step) =>
  Effect.flatMap(Stores.deleteRows(s.deletion.tenant_id), (deleted) =>
    deleted === undefined ? record(s, { phase: "verified" }) : record(s, { progress: removing(s, deleted.store, deleted.counts) }))

/**
 * verified: the re-count, not before `keyCacheMs` after the key store was emptied (an isolate may seal with a key it
 * cached until then); nothing left → the placement goes (lifting the hold) and the deletion ends; else another round.
 */
const verify = (s: Step, keyCacheMs: number) =>
  Effect.gen(function*() {
    const { deletion, progress } = s
    const wait = Date.parse(progress.keysEmptiedAt ?? deletion.started_at) + keyCacheMs - s.now
    if (wait > 0) return s.next(wait)
    const left = yield* Stores.remaining(deletion.tenant_id, progress.shards ?? (yield* Stores.shardKeysOf(s.platform, deletion.tenant_id)))
    const stores = Object.entries(left).filter(([, counts]) => Object.keys(counts).length > 0).map(([store, counts]) => `${store} (${Object.keys(counts).join(", ")})`)
    if (stores.length > 0) {
      if (progress.round >= Move.rounds) return yield* permanent(`after ${Move.rounds} rounds the tenant's data is still in ${stores.join("; ")}: a writer ignores the hold`)
      yield* Effect.logWarning(`deletion ${deletion.id} of ${deletion.tenant_id}: ${stores.join("; ")} not empty; deleting again`)
      return yield* record(s, { phase: "workflows", progress: { round: progress.round + 1, removed: progress.removed, remaining: left } })
    }
    const finishedAt = new Date(s.now).toISOString()
    const report = JSON.stringify({ ...progress, remaining: left })
    // The placement last, with the deletion's end: one platform transaction.
    yield* Effect.mapError(s.platform.batch([
      Sql.statement("DELETE FROM tenant_placements WHERE tenant_id = ? AND EXISTS (SELECT 1 FROM tenant_deletions WHERE id = ? AND phase = 'verified')", deletion.tenant_id, deletion.id),
      Sql.statement("UPDATE tenant_deletions SET phase = 'deleted', progress = ?2, report = ?2, updated_at = ?3, finished_at = ?3 WHERE id = ?1 AND phase = 'verified'", deletion.id, report, finishedAt)
    ]), unavailable)
    ;(yield* TenantPlacement).forget([deletion.tenant_id])
    LedgerTopology.forget([deletion.tenant_id])
    return undefined
  })

/** Runs one step of a deletion (`keyCacheMs`: the personal-data key cache's bound); the next message (after a delay), or undefined at its end. */
export const step = Effect.fn("Deletion.step")(function*(payload: BatchPayload, keyCacheMs = 0) {
  const shape = yield* TenantPlacement
  const platform = yield* Sql.PlatformDatabase
  const deletion = yield* find(payload.batch_id)
  if (!deletion || deletion.phase === "deleted" || deletion.phase === "failed") return undefined
  const now = yield* Time.millis
  const next = (delayMs = 0): Move.Next => ({ payload: { ...payload, offset: payload.offset + 1 }, delaySeconds: Math.max(0, Math.ceil(delayMs / 1000)) })
  const s: Step = { deletion, platform, progress: progressOf(deletion), now, next }
  switch (deletion.phase) {
    case "held": {
      // Every isolate reads the hold within `cacheMs` of it; then a write that passed the check just before lands.
      const wait = Date.parse(deletion.started_at) + shape.cacheMs + Move.settleMs - now
      if (wait > 0) return next(wait)
      return yield* record(s, { phase: "workflows" })
    }
    case "workflows":
      return yield* workflows(s)
    case "ledger":
      return yield* ledger(s)
    case "objects":
      return yield* objects(s)
    case "rows":
      return yield* rows(s)
    case "verified":
      return yield* verify(s, keyCacheMs)
  }
})

/** Ends a deletion `failed` with `error`; the tenant's writes stay held (a new deletion picks up what is left). */
export const fail = Effect.fn("Deletion.fail")(function*(id: string, error: string, now: string) {
  const platform = yield* Sql.PlatformDatabase
  yield* Effect.mapError(platform.run(Sql.statement(
    "UPDATE tenant_deletions SET phase = 'failed', error = ?2, updated_at = ?3, finished_at = ?3 WHERE id = ?1 AND phase NOT IN ('deleted', 'failed')",
    id, error.slice(0, 2_000), now
  )), unavailable)
})
