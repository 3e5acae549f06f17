/**
 * The steps of a reshard (Reshard.ts says what each does and why; it dispatches them by the record's stage): hold,
 * copy, verify, switch (with the carry of timers, snapshots and outbox rows) and drop, each over one old shard, each
 * recording its place in the reshard's record (ReshardRecord.ts) before it hands over to the next message, and each
 * safe to run again from what was recorded. It does not start or fail a reshard.
 */
import * as Effect from "effect/Effect"
import type { Fact } from "@factline/schemas"
import * as Failure from "../failures/Failure.js"
import type { LedgerShardRpc, ReshardExtras } from "../ledger/LedgerProtocol.js"
import * as Shards from "../ledger/Shards.js"
import * as Sql from "../platform/Sql.js"
import type { Next } from "./Move.js"
import { type Digest, type Progress, type Row, type Stage, unavailable } from "./ReshardRecord.js"

/** Facts read per page of an old shard (its read call's page). */
export const factsPerPage = 1_000
/** Facts a copy step reads before it records its cursor and hands over to the next message. */
export const factsPerStep = 5_000
/** Moved streams an old shard deletes per call. */
export const streamsPerDrop = 200

const permanent = (message: string) => new Failure.PermanentError({ reason: "permanent_failure", message })

/** What one step works with. */
export interface Step {
  readonly row: Row
  readonly platform: Sql.Sql
  readonly progress: Progress
  readonly stub: (index: number) => LedgerShardRpc
  readonly now: string
  readonly next: () => Next
}

/**
 * The record as this step read it: every step ends in one write guarded by it, so of two chains of steps (a step
 * message sent again for a reshard that looked stalled, Reshard.start) only one moves the record on; the other's
 * write changes nothing and it stops there (what it did before — imports, holds, drops — is idempotent).
 */
const asRead = (s: Step) => [s.row.stage, s.row.shard, s.row.updated_at] as const
const guard = "stage = ?7 AND shard = ?8 AND updated_at = ?9"

/** Moves the record on; false when another chain of steps moved it first (this chain stops). */
const record = (s: Step, fields: { readonly shard?: number; readonly stage?: Stage; readonly progress?: Progress; readonly done?: boolean }) =>
  Effect.map(Effect.mapError(s.platform.run(Sql.statement(
    `UPDATE ledger_reshards SET shard = COALESCE(?2, shard), stage = COALESCE(?3, stage), progress = COALESCE(?4, progress), updated_at = ?5,
       phase = CASE WHEN ?6 THEN 'done' ELSE phase END, finished_at = CASE WHEN ?6 THEN ?5 ELSE finished_at END
     WHERE id = ?1 AND phase = 'running' AND ${guard}`,
    s.row.id, fields.shard ?? null, fields.stage ?? null, fields.progress ? JSON.stringify(fields.progress) : null, s.now, fields.done ? 1 : 0, ...asRead(s)
  )), unavailable), (changes) => changes > 0)

/** The next step, if this chain's write moved the record on. */
const thenNext = (s: Step, moved: boolean) => (moved ? s.next() : undefined)

export const rpc = <A>(what: string, call: () => Promise<A>) =>
  Effect.tryPromise({ try: call, catch: (cause) => new Failure.Unavailable({ service: "the ledger", message: `${what}: ${cause instanceof Error ? cause.message : String(cause)}` }) })

/** A fact's contribution to a digest: everything that must survive the copy unchanged. */
const factHash = (fact: Fact) =>
  Shards.hash(JSON.stringify([fact.fact_id, fact.stream, fact.sequence, fact.type, fact.data, fact.causation_id, fact.created_at, fact.schema_version]))

const add = (digest: Digest | undefined, fact: Fact): Digest => ({ facts: (digest?.facts ?? 0) + 1, sum: ((digest?.sum ?? 0) + factHash(fact)) % 2 ** 32 })

/** The new shards old shard `i` sends streams to (all but itself). */
const targetsOf = (row: Row, i: number) => Array.from({ length: row.to_shards / row.from_shards - 1 }, (_, m) => i + (m + 1) * row.from_shards)

const targetOf = (row: Row, stream: string) => Shards.hash(stream) % row.to_shards

/** hold → copy: the old shard holds its moving streams. */
export const hold = (s: Step) =>
  Effect.gen(function*() {
    yield* rpc(`holding shard ${s.row.shard}`, () => s.stub(s.row.shard).reshardHold(s.row.shard, s.row.from_shards, s.row.to_shards))
    return thenNext(s, yield* record(s, { stage: "copy", progress: { ...s.progress, cursor: null, digests: {}, checking: undefined } }))
  })

/** copy: up to `factsPerStep` of the old shard's facts, the moving streams' written to their new shards; the cursor recorded after. */
export const copy = (s: Step) =>
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
        return thenNext(s, yield* record(s, { stage: "verify", progress: { ...s.progress, cursor, digests, copied } }))
      }
    }
    return thenNext(s, yield* record(s, { progress: { ...s.progress, cursor, digests, copied } }))
  })

/**
 * verify: each new shard read back whole must match the copy's digest — up to `factsPerStep` facts a step, its
 * place (`checking`) recorded after, as the copy does.
 */
export const verify = (s: Step) =>
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
        return thenNext(s, yield* record(s, { stage: "switch", progress: { ...s.progress, checking: undefined } }))
      }
      checking = { target: next, cursor: null, digest: { facts: 0, sum: 0 } }
    }
    return thenNext(s, yield* record(s, { progress: { ...s.progress, checking } }))
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
export const switchShard = (s: Step) =>
  Effect.gen(function*() {
    const { row } = s
    const i = row.shard
    const extras = yield* rpc(`reading shard ${i}'s timers and snapshots`, () => s.stub(i).reshardExtras())
    const carried = yield* carry(s, { timers: extras.timers, snapshots: extras.snapshots })
    const outbox = yield* rpc(`switching shard ${i}`, () => s.stub(i).reshardSwitch())
    const relayed = yield* carry(s, { outbox })
    const [, moved] = yield* Effect.mapError(s.platform.batch([
      Sql.statement(
        "UPDATE ledger_tenants SET shards_switched = MAX(shards_switched, ?3) WHERE tenant_id = ?1 AND resharding_to = ?2",
        row.tenant_id, row.to_shards, i + 1
      ),
      Sql.statement(
        `UPDATE ledger_reshards SET stage = 'drop', progress = ?2, updated_at = ?3 WHERE id = ?1 AND phase = 'running' AND stage = ?4 AND shard = ?5 AND updated_at = ?6`,
        row.id, JSON.stringify({ ...s.progress, carried: s.progress.carried + carried + relayed }), s.now, ...asRead(s)
      )
    ]), unavailable)
    return thenNext(s, (moved?.changes ?? 0) > 0)
  })

/** drop: the moved streams leave the old shard; then the next old shard, or the end. */
export const drop = (s: Step) =>
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
          return thenNext(s, yield* record(s, { shard: i + 1, stage: "hold", progress }))
        }
        // The last old shard: the new count is the tenant's, and the reshard is done.
        yield* Effect.mapError(s.platform.batch([
          Sql.statement(
            "UPDATE ledger_tenants SET shard_count = ?2, resharding_to = NULL, shards_switched = 0 WHERE tenant_id = ?1 AND resharding_to = ?2",
            row.tenant_id, row.to_shards
          ),
          Sql.statement(
            "UPDATE ledger_reshards SET phase = 'done', progress = ?2, updated_at = ?3, finished_at = ?3 WHERE id = ?1 AND phase = 'running' AND stage = ?4 AND shard = ?5 AND updated_at = ?6",
            row.id, JSON.stringify(progress), s.now, ...asRead(s)
          )
        ]), unavailable)
        return undefined
      }
    }
    return thenNext(s, yield* record(s, { progress: { ...s.progress, moved } }))
  })
