/**
 * Raising a tenant's ledger shard count under live traffic (16 → 64): a resumable operation of the batch queue
 * (`factline-batch`, operation `reshard`), run as a move is (Move.ts) — the record (`ledger_reshards`, platform
 * database, owned here) holds the old shard being worked on, its stage and the copy's cursor, so a retried or
 * redelivered step continues from what was recorded and redoes nothing visible.
 *
 * The new count is a multiple of the old (`to = from × k`): a stream of old shard i (`hash % from = i`) goes to
 * shard `hash % to`, one of i, i + from, i + 2·from… — so the new shards ≥ `from` receive streams and old shard
 * i keeps those with `hash % to = i`. The topology (`ledger_tenants`: `resharding_to`, `shards_switched`) routes a
 * stream by the new count once its old shard is switched. Old shards are done one at a time, in order:
 *
 * 1. **hold** — the old shard holds its moving streams: their appends are answered `held` (the ledger client
 *    answers `unavailable`: consumers retry, a decider's command is retried) and its timers wait. The shard decides
 *    it in its own single-threaded turn, so no append lands after the hold — nothing to wait for.
 * 2. **copy** — its facts are read through its read call (`readShard`, whatever tier serves them) a page at a
 *    time, and the moving streams' facts written to their new shards with their ids and sequences (`reshardImport`,
 *    idempotent: a fact already there is kept); a digest per new shard is kept as they go.
 * 3. **verify** — each new shard is read back whole, a page at a time over as many steps as it takes (its place
 *    recorded as the copy's is); its digest (count, and a sum of each fact's id, stream, sequence, type and body)
 *    must equal the copy's. A difference fails the reshard (the hold makes it a bug).
 * 4. **switch** — the moving streams' timers and deciders' snapshots are imported, the old shard switches (from
 *    then it answers a moving stream `moved`, with the new count: a caller with a stale topology asks the new shard
 *    at once) and hands back the outbox rows still waiting for those facts, which are imported too (the new shard's
 *    alarm relays them; a message relayed by both is one the consumers' inbox already drops); then
 *    `shards_switched` moves past it in D1.
 * 5. **drop** — the moved streams' facts, timers, snapshots and outbox rows are deleted from the old shard, and
 *    their cold history forgotten there (ShardReshard), which settles on the new count (its timers fire again). Then the next old shard; after the last, `shard_count` is
 *    the new count: **done**.
 *
 * **failed** — a step that fails on its last attempt ends the reshard `failed`, releasing a hold not yet switched.
 * The topology stays as far as it got (every stream routes correctly at every point); a new request for the same
 * count resumes from the shard and stage where it stopped. A reshard refuses to start while a rebuild runs or the
 * tenant is being deleted (a rebuild walking both an old and a new shard between a copy and its drop would read a
 * stream twice). What it does not do: shrink a tenant, or move cold history's R2 segments — a moved stream's cold
 * facts are copied hot into its new shard (they tier again by age).
 *
 * Here: starting, stepping (by the record's stage) and failing a reshard. Its record — row, progress, view, reads —
 * is ReshardRecord.ts's; the steps themselves are ReshardSteps.ts's.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { BatchPayload } from "@factline/schemas"
import * as Failure from "../failures/Failure.js"
import { LedgerNamespace } from "../ledger/LedgerNamespace.js"
import * as Shards from "../ledger/Shards.js"
import * as Sql from "../platform/Sql.js"
import * as Time from "../platform/Time.js"
import { active, emptyProgress, find, latest, type Progress, progressOf, type Stage, unavailable } from "./ReshardRecord.js"
import * as ReshardSteps from "./ReshardSteps.js"
import { rpc, type Step } from "./ReshardSteps.js"

export { active, find, latest, phases, Row, type Stage, stages, View, view } from "./ReshardRecord.js"
export { factsPerPage, factsPerStep, streamsPerDrop } from "./ReshardSteps.js"

/**
 * The shard size at which the health view flags a tenant for resharding: a Durable Object holds at most 10 GB,
 * and a reshard copies a shard's moving streams while they are held — well before the limit, not at it.
 */
export const reshardAtBytes = 5 * 1024 ** 3

/** A running reshard whose record has not moved for this long is taken for one whose step message was lost. */
export const stalledAfterMs = 2 * 60_000

const stepOf = (id: string): BatchPayload => ({ batch_id: id, operation: "reshard", offset: 0, total: 0 })

const invalid = (message: string) => new Failure.InvalidInput({ message, problems: [{ path: "shards", message }] })

const Topology = Schema.Struct({ shard_count: Schema.Number, resharding_to: Schema.NullOr(Schema.Number) })
const Id = Schema.Struct({ id: Schema.String })

/**
 * Starts raising `tenantId`'s shard count to `to`: 400 for a count not larger than the current one, not a multiple
 * of it or above `Shards.maxShardsPerTenant`; 404 for a tenant with no ledger; 409 while a rebuild runs, the
 * tenant is being deleted, or another count is in progress. Answers the running reshard to the same count (no new
 * step, unless it looks stalled: see `stalledAfterMs`); resumes a failed one (a new record taking over its shard and
 * stage). Returns the record and the first step.
 */
export const start = Effect.fn("Reshard.start")(function*(tenantId: string, to: number, startedBy: string) {
  const platform = yield* Sql.PlatformDatabase
  if (!Number.isInteger(to) || to < 2 || to > Shards.maxShardsPerTenant) return yield* invalid(`shards must be a whole number from 2 to ${Shards.maxShardsPerTenant}, got ${to}`)
  const topology = yield* Effect.mapError(platform.first(Topology, Sql.statement("SELECT shard_count, resharding_to FROM ledger_tenants WHERE tenant_id = ?", tenantId)), unavailable)
  if (!topology) return yield* new Failure.NotFound({ message: `tenant ${tenantId} has no ledger yet (nothing to reshard): its first fact records the configured shard count` })
  const running = yield* active(tenantId)
  if (running) {
    if (running.to_shards === to) {
      // Asked again while it runs: the running reshard — and, when it has not moved for `stalledAfterMs` (its step
      // message lost), its current step sent again. Two chains of steps cannot both move the record on
      // (ReshardSteps' guarded writes): if the first was only slow, the later one stops at its first write.
      const stalled = Date.parse(running.updated_at) <= (yield* Time.millis) - stalledAfterMs
      return { record: running, first: stalled ? stepOf(running.id) : undefined }
    }
    return yield* new Failure.Conflict({ message: `tenant ${tenantId} is being resharded to ${running.to_shards} shards (${running.id}); ask again when it has finished` })
  }
  const from = topology.shard_count
  const previous = topology.resharding_to === null ? undefined : yield* latest(tenantId)
  if (topology.resharding_to !== null && topology.resharding_to !== to) {
    return yield* new Failure.Conflict({ message: `tenant ${tenantId}'s reshard to ${topology.resharding_to} shards stopped part-way${previous ? ` (${previous.id}: ${previous.error ?? "failed"})` : ""}; resume it by asking for ${topology.resharding_to} shards` })
  }
  if (to <= from) return yield* invalid(`shards must be larger than the tenant's ${from}: a tenant's shard count only grows`)
  if (to % from !== 0) return yield* invalid(`shards must be a multiple of the tenant's ${from} (e.g. ${from * 2} or ${from * 4}): each old shard's streams then go to shards of their own`)
  const rebuilding = yield* Effect.mapError(platform.first(Id, Sql.statement("SELECT id FROM projection_rebuilds WHERE status = 'running' LIMIT 1")), unavailable)
  if (rebuilding) return yield* new Failure.Conflict({ message: `a rebuild is running (${rebuilding.id}); reshard the tenant when it has finished` })
  const deleting = yield* Effect.mapError(platform.first(Id, Sql.statement("SELECT id FROM tenant_deletions WHERE tenant_id = ? AND phase NOT IN ('deleted', 'failed') LIMIT 1", tenantId)), unavailable)
  if (deleting) return yield* new Failure.Conflict({ message: `tenant ${tenantId} is being deleted (${deleting.id})` })
  // A failed reshard's successor starts where it stopped: a copy or verification again from the hold (idempotent),
  // a switch or a drop where it was.
  const resumed = previous?.phase === "failed" && previous.to_shards === to ? previous : undefined
  const shard = resumed?.shard ?? 0
  const stage: Stage = resumed === undefined ? "hold" : resumed.stage === "switch" || resumed.stage === "drop" ? resumed.stage : "hold"
  const progress: Progress = resumed === undefined ? emptyProgress : { ...progressOf(resumed), cursor: null, digests: {}, checking: undefined }
  const id = `rs_${(yield* Time.millis).toString(36)}_${crypto.randomUUID().slice(0, 8)}`
  const now = yield* Time.now
  const [inserted] = yield* Effect.mapError(platform.batch([
    // One reshard per tenant at a time: the insert happens only when none is running.
    Sql.statement(
      `INSERT INTO ledger_reshards (id, tenant_id, from_shards, to_shards, phase, shard, stage, progress, started_by, started_at, updated_at)
       SELECT ?1, ?2, ?3, ?4, 'running', ?5, ?6, ?7, ?8, ?9, ?9
       WHERE NOT EXISTS (SELECT 1 FROM ledger_reshards WHERE tenant_id = ?2 AND phase = 'running')`,
      id, tenantId, from, to, shard, stage, JSON.stringify(progress), startedBy, now
    ),
    Sql.statement(
      "UPDATE ledger_tenants SET resharding_to = ?2 WHERE tenant_id = ?1 AND shard_count = ?3 AND EXISTS (SELECT 1 FROM ledger_reshards WHERE id = ?4)",
      tenantId, to, from, id
    ),
    // The new shards are registered now: rebuilds, recovery and a tenant's deletion walk them from here.
    Sql.statement(
      `WITH RECURSIVE shard(i) AS (SELECT ?3 UNION ALL SELECT i + 1 FROM shard WHERE i + 1 < ?4)
       INSERT INTO ledger_shards (shard_key, tenant_id, registered_at)
       SELECT ?1 || '/#' || i, ?1, ?2 FROM shard WHERE EXISTS (SELECT 1 FROM ledger_reshards WHERE id = ?5) ON CONFLICT (shard_key) DO NOTHING`,
      tenantId, now, from, to, id
    )
  ]), unavailable)
  if (inserted!.changes === 0) {
    const other = yield* active(tenantId)
    if (other?.to_shards === to) return { record: other, first: undefined }
    return yield* new Failure.Conflict({ message: `tenant ${tenantId} is already being resharded${other ? ` (${other.id})` : ""}` })
  }
  return { record: (yield* find(id))!, first: stepOf(id) }
})

export const step = Effect.fn("Reshard.step")(function*(payload: BatchPayload) {
  const platform = yield* Sql.PlatformDatabase
  const { namespace } = yield* LedgerNamespace
  const row = yield* find(payload.batch_id)
  if (!row || row.phase !== "running") return undefined
  const s: Step = {
    row,
    platform,
    progress: progressOf(row),
    stub: (index) => namespace.get(namespace.idFromName(Shards.shardKey(row.tenant_id, index))),
    now: yield* Time.now,
    next: () => ({ payload: { ...payload, offset: payload.offset + 1 }, delaySeconds: 0 })
  }
  switch (row.stage) {
    case "hold":
      return yield* ReshardSteps.hold(s)
    case "copy":
      return yield* ReshardSteps.copy(s)
    case "verify":
      return yield* ReshardSteps.verify(s)
    case "switch":
      return yield* ReshardSteps.switchShard(s)
    case "drop":
      return yield* ReshardSteps.drop(s)
  }
})

/** Ends a reshard `failed` with `error`; a hold not yet switched is released (the old shard answers its streams again). */
export const fail = Effect.fn("Reshard.fail")(function*(id: string, error: string, now: string) {
  const platform = yield* Sql.PlatformDatabase
  const { namespace } = yield* LedgerNamespace
  const row = yield* find(id)
  if (!row || row.phase !== "running") return
  yield* Effect.mapError(platform.run(Sql.statement(
    "UPDATE ledger_reshards SET phase = 'failed', error = ?2, updated_at = ?3, finished_at = ?3 WHERE id = ?1 AND phase = 'running'",
    id, error.slice(0, 2_000), now
  )), unavailable)
  if (row.stage === "hold" || row.stage === "copy" || row.stage === "verify") {
    const stub = namespace.get(namespace.idFromName(Shards.shardKey(row.tenant_id, row.shard)))
    // Best effort: a shard that cannot be reached keeps its hold until the reshard is resumed.
    yield* Effect.ignore(rpc(`releasing shard ${row.shard}`, () => stub.reshardRelease()))
  }
})
