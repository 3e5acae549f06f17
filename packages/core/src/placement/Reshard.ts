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
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { BatchPayload, Fact } from "@factline/schemas"
import { ReshardView, reshardPhases, reshardStages } from "../api/Tenants.js"
import * as Failure from "../failures/Failure.js"
import { LedgerNamespace } from "../ledger/LedgerNamespace.js"
import type { LedgerShardRpc, ReshardExtras, ShardCursor } from "../ledger/LedgerProtocol.js"
import * as Shards from "../ledger/Shards.js"
import * as Sql from "../platform/Sql.js"
import * as Time from "../platform/Time.js"
import type { Next } from "./Move.js"

export const phases = reshardPhases
export const stages = reshardStages
export type Stage = (typeof stages)[number]

/** Facts read per page of an old shard (its read call's page). */
export const factsPerPage = 1_000
/** Facts a copy step reads before it records its cursor and hands over to the next message. */
export const factsPerStep = 5_000
/** Moved streams an old shard deletes per call. */
export const streamsPerDrop = 200
/**
 * The shard size at which the health view flags a tenant for resharding: a Durable Object holds at most 10 GB,
 * and a reshard copies a shard's moving streams while they are held — well before the limit, not at it.
 */
export const reshardAtBytes = 5 * 1024 ** 3

/** A new shard's copy, summed: facts, and the sum (mod 2³²) of each fact's hash. */
interface Digest {
  readonly facts: number
  readonly sum: number
}

/** What `ledger_reshards.progress` holds. */
interface Progress {
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

const emptyProgress: Progress = { cursor: null, digests: {}, copied: 0, moved: 0, carried: 0 }
const progressOf = (row: Row): Progress => ({ ...emptyProgress, ...(JSON.parse(row.progress) as Partial<Progress>) })

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

const unavailable = Failure.unavailable("the platform database")
const permanent = (message: string) => new Failure.PermanentError({ reason: "permanent_failure", message })
const invalid = (message: string) => new Failure.InvalidInput({ message, problems: [{ path: "shards", message }] })

const Topology = Schema.Struct({ shard_count: Schema.Number, resharding_to: Schema.NullOr(Schema.Number) })
const Id = Schema.Struct({ id: Schema.String })

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

/**
 * Starts raising `tenantId`'s shard count to `to`: 400 for a count not larger than the current one, not a multiple
 * of it or above `Shards.maxShardsPerTenant`; 404 for a tenant with no ledger; 409 while a rebuild runs, the
 * tenant is being deleted, or another count is in progress. Answers the running reshard to the same count (no new
 * step); resumes a failed one (a new record taking over its shard and stage). Returns the record and the first step.
 */
export const start = Effect.fn("Reshard.start")(function*(tenantId: string, to: number, startedBy: string) {
  const platform = yield* Sql.PlatformDatabase
  if (!Number.isInteger(to) || to < 2 || to > Shards.maxShardsPerTenant) return yield* invalid(`shards must be a whole number from 2 to ${Shards.maxShardsPerTenant}, got ${to}`)
  const topology = yield* Effect.mapError(platform.first(Topology, Sql.statement("SELECT shard_count, resharding_to FROM ledger_tenants WHERE tenant_id = ?", tenantId)), unavailable)
  if (!topology) return yield* new Failure.NotFound({ message: `tenant ${tenantId} has no ledger yet (nothing to reshard): its first fact records the configured shard count` })
  const running = yield* active(tenantId)
  if (running) {
    if (running.to_shards === to) return { record: running, first: undefined }
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
  const first: BatchPayload = { batch_id: id, operation: "reshard", offset: 0, total: 0 }
  return { record: (yield* find(id))!, first }
})

/** What one step works with. */
interface Step {
  readonly row: Row
  readonly platform: Sql.Sql
  readonly progress: Progress
  readonly stub: (index: number) => LedgerShardRpc
  readonly now: string
  readonly next: () => Next
}

const record = (s: Step, fields: { readonly shard?: number; readonly stage?: Stage; readonly progress?: Progress; readonly done?: boolean }) =>
  Effect.mapError(s.platform.run(Sql.statement(
    `UPDATE ledger_reshards SET shard = COALESCE(?2, shard), stage = COALESCE(?3, stage), progress = COALESCE(?4, progress), updated_at = ?5,
       phase = CASE WHEN ?6 THEN 'done' ELSE phase END, finished_at = CASE WHEN ?6 THEN ?5 ELSE finished_at END
     WHERE id = ?1 AND phase = 'running'`,
    s.row.id, fields.shard ?? null, fields.stage ?? null, fields.progress ? JSON.stringify(fields.progress) : null, s.now, fields.done ? 1 : 0
  )), unavailable)

const rpc = <A>(what: string, call: () => Promise<A>) =>
  Effect.tryPromise({ try: call, catch: (cause) => new Failure.Unavailable({ service: "the ledger", message: `${what}: ${cause instanceof Error ? cause.message : String(cause)}` }) })

/** A fact's contribution to a digest: everything that must survive the copy unchanged. */
const factHash = (fact: Fact) =>
  Shards.hash(JSON.stringify([fact.fact_id, fact.stream, fact.sequence, fact.type, fact.data, fact.causation_id, fact.created_at, fact.schema_version]))

const add = (digest: Digest | undefined, fact: Fact): Digest => ({ facts: (digest?.facts ?? 0) + 1, sum: ((digest?.sum ?? 0) + factHash(fact)) % 2 ** 32 })

/** The new shards old shard `i` sends streams to (all but itself). */
const targetsOf = (row: Row, i: number) => Array.from({ length: row.to_shards / row.from_shards - 1 }, (_, m) => i + (m + 1) * row.from_shards)

const targetOf = (row: Row, stream: string) => Shards.hash(stream) % row.to_shards

/** hold → copy: the old shard holds its moving streams. */
const hold = (s: Step) =>
  Effect.gen(function*() {
    yield* rpc(`holding shard ${s.row.shard}`, () => s.stub(s.row.shard).reshardHold(s.row.shard, s.row.from_shards, s.row.to_shards))
    yield* record(s, { stage: "copy", progress: { ...s.progress, cursor: null, digests: {}, checking: undefined } })
    return s.next()
  })

/** copy: up to `factsPerStep` of the old shard's facts, the moving streams' written to their new shards; the cursor recorded after. */
const copy = (s: Step) =>
  Effect.gen(function*() {
    const { row } = s
    const i = row.shard
    let cursor = s.progress.cursor
    const digests: Record<string, Digest> = { ...s.progress.digests }
    let copied = s.progress.copied
    for (let read = 0; read < factsPerStep;) {
      const after = cursor ?? undefined
      const page = yield* rpc(`reading shard ${i}`, () => s.stub(i).readShard(after, factsPerPage))
      const byTarget = new Map<number, Array<Fact>>()
      for (const fact of page) {
        const j = targetOf(row, fact.stream)
        if (j === i) continue
        byTarget.set(j, [...(byTarget.get(j) ?? []), fact])
      }
      yield* Effect.forEach([...byTarget], ([j, facts]) =>
        rpc(`writing shard ${j}`, () => s.stub(j).reshardImport({ tenant_id: row.tenant_id, shard_key: Shards.shardKey(row.tenant_id, j), index: j, shards: row.to_shards, facts })),
        { concurrency: 4, discard: true })
      for (const [j, facts] of byTarget) {
        for (const fact of facts) digests[j] = add(digests[j], fact)
        copied += facts.length
      }
      read += page.length
      const last = page.at(-1)
      if (last) cursor = { stream: last.stream, sequence: last.sequence }
      if (page.length < factsPerPage) {
        yield* record(s, { stage: "verify", progress: { ...s.progress, cursor, digests, copied } })
        return s.next()
      }
    }
    yield* record(s, { progress: { ...s.progress, cursor, digests, copied } })
    return s.next()
  })

/**
 * verify: each new shard read back whole must match the copy's digest — up to `factsPerStep` facts a step, its
 * place (`checking`) recorded after, as the copy does.
 */
const verify = (s: Step) =>
  Effect.gen(function*() {
    const { row } = s
    const targets = targetsOf(row, row.shard)
    let checking = s.progress.checking ?? { target: targets[0]!, cursor: null, digest: { facts: 0, sum: 0 } }
    for (let read = 0; read < factsPerStep;) {
      const { target: j, cursor } = checking
      const page = yield* rpc(`reading shard ${j}`, () => s.stub(j).readShard(cursor ?? undefined, factsPerPage))
      let digest = checking.digest
      for (const fact of page) digest = add(digest, fact)
      read += page.length
      const last = page.at(-1)
      if (page.length === factsPerPage && last) {
        checking = { target: j, cursor: { stream: last.stream, sequence: last.sequence }, digest }
        continue
      }
      const expected = s.progress.digests[j] ?? { facts: 0, sum: 0 }
      if (expected.facts !== digest.facts || expected.sum !== digest.sum) {
        return yield* permanent(`shard ${j} holds ${digest.facts} facts (digest ${digest.sum}) where the copy from shard ${row.shard} wrote ${expected.facts} (digest ${expected.sum}): a writer ignored the hold, or the shard held facts before the reshard`)
      }
      const next = targets[targets.indexOf(j) + 1]
      if (next === undefined) {
        yield* record(s, { stage: "switch", progress: { ...s.progress, checking: undefined } })
        return s.next()
      }
      checking = { target: next, cursor: null, digest: { facts: 0, sum: 0 } }
    }
    yield* record(s, { progress: { ...s.progress, checking } })
    return s.next()
  })

/** Rows grouped by the new shard of their stream. */
const byTarget = <T>(row: Row, rows: ReadonlyArray<T>, stream: (r: T) => string) => {
  const out = new Map<number, Array<T>>()
  for (const r of rows) {
    const j = targetOf(row, stream(r))
    out.set(j, [...(out.get(j) ?? []), r])
  }
  return out
}

const carry = (s: Step, extras: Partial<ReshardExtras>) =>
  Effect.gen(function*() {
    const { row } = s
    const timers = byTarget(row, extras.timers ?? [], (r) => String(r["stream"]))
    const snapshots = byTarget(row, extras.snapshots ?? [], (r) => String(r["stream"]))
    const outbox = byTarget(row, extras.outbox ?? [], (r) => r.stream)
    const targets = new Set([...timers.keys(), ...snapshots.keys(), ...outbox.keys()])
    yield* Effect.forEach(targets, (j) =>
      rpc(`writing shard ${j}`, () => s.stub(j).reshardImport({
        tenant_id: row.tenant_id, shard_key: Shards.shardKey(row.tenant_id, j), index: j, shards: row.to_shards, facts: [],
        timers: timers.get(j) ?? [], snapshots: snapshots.get(j) ?? [], outbox: outbox.get(j) ?? []
      })), { concurrency: 4, discard: true })
    return (extras.timers?.length ?? 0) + (extras.snapshots?.length ?? 0) + (extras.outbox?.length ?? 0)
  })

/** switch: timers and snapshots carried, the old shard switched, its waiting outbox rows carried; then the topology moves past it. */
const switchShard = (s: Step) =>
  Effect.gen(function*() {
    const { row } = s
    const i = row.shard
    const extras = yield* rpc(`reading shard ${i}'s timers and snapshots`, () => s.stub(i).reshardExtras())
    const carried = yield* carry(s, { timers: extras.timers, snapshots: extras.snapshots })
    const outbox = yield* rpc(`switching shard ${i}`, () => s.stub(i).reshardSwitch())
    const relayed = yield* carry(s, { outbox })
    yield* Effect.mapError(s.platform.batch([
      Sql.statement(
        "UPDATE ledger_tenants SET shards_switched = MAX(shards_switched, ?3) WHERE tenant_id = ?1 AND resharding_to = ?2",
        row.tenant_id, row.to_shards, i + 1
      ),
      Sql.statement(
        "UPDATE ledger_reshards SET stage = 'drop', progress = ?2, updated_at = ?3 WHERE id = ?1 AND phase = 'running'",
        row.id, JSON.stringify({ ...s.progress, carried: s.progress.carried + carried + relayed }), s.now
      )
    ]), unavailable)
    return s.next()
  })

/** drop: the moved streams leave the old shard; then the next old shard, or the end. */
const drop = (s: Step) =>
  Effect.gen(function*() {
    const { row } = s
    const i = row.shard
    let moved = s.progress.moved
    for (let calls = 0; calls < 10; calls++) {
      const { dropped, remaining } = yield* rpc(`dropping from shard ${i}`, () => s.stub(i).reshardDrop(streamsPerDrop))
      moved += dropped
      if (remaining === 0) {
        const progress: Progress = { ...s.progress, cursor: null, digests: {}, checking: undefined, moved }
        if (i + 1 < row.from_shards) {
          yield* record(s, { shard: i + 1, stage: "hold", progress })
          return s.next()
        }
        // The last old shard: the new count is the tenant's, and the reshard is done.
        yield* Effect.mapError(s.platform.batch([
          Sql.statement(
            "UPDATE ledger_tenants SET shard_count = ?2, resharding_to = NULL, shards_switched = 0 WHERE tenant_id = ?1 AND resharding_to = ?2",
            row.tenant_id, row.to_shards
          ),
          Sql.statement(
            "UPDATE ledger_reshards SET phase = 'done', progress = ?2, updated_at = ?3, finished_at = ?3 WHERE id = ?1 AND phase = 'running'",
            row.id, JSON.stringify(progress), s.now
          )
        ]), unavailable)
        return undefined
      }
    }
    yield* record(s, { progress: { ...s.progress, moved } })
    return s.next()
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
      return yield* hold(s)
    case "copy":
      return yield* copy(s)
    case "verify":
      return yield* verify(s)
    case "switch":
      return yield* switchShard(s)
    case "drop":
      return yield* drop(s)
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
