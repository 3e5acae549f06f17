/**
 * `reconcile`: a projection's rows of one tenant against what the ledger
 * implies, with `repair` fixing exactly the rows that drifted.
 *
 * The chunks replay the tenant's shards (in stream order, straight from the
 * LedgerShards, as a rebuild does) into a private shadow copy of the table
 * (`<table>__<job id>`, its own applied set), `shardsPerChunk` shards each; the
 * last chunk compares the tenant's live rows with the shadow's, column by
 * column (`EXCEPT` both ways), and reports each drifted row — one that differs,
 * is missing, or should not exist — as an item error (`line` is the drift's
 * ordinal; `error` names the row's key and both versions; `failed` counts
 * them, `succeeded` the rows repaired; `offset`/`total` count shards). With `repair`, those
 * rows, and only those, are replaced by the ledger's version (deleted and
 * copied from the shadow) in one transaction. The shadow is then dropped.
 *
 * Every replay write is idempotent, so a redelivered chunk changes nothing.
 * It does not: see live facts that arrive while it runs (the shadow is not fed
 * by the live consumer, unlike a rebuild's), so run a repair while the tenant's
 * traffic is quiet — a row written meanwhile could be reported, and repaired,
 * to the ledger's state at the replay; or compare another tenant's rows.
 */
import * as Effect from "effect/Effect"
import type { BatchPayload } from "@factline/schemas"
import * as Projection from "../definitions/Projection.js"
import { Ledger } from "../ledger/Ledger.js"
import { KeyRing } from "../personal/KeyRing.js"
import * as Sealing from "../personal/Sealing.js"
import * as LedgerTopology from "../ledger/LedgerTopology.js"
import { ProjectionStore, Values } from "../projections/ProjectionStore.js"
import * as Rebuild from "../projections/Rebuild.js"
import * as Placement from "../placement/Placement.js"
import { Registry } from "../registry/Registry.js"
import * as BatchJobs from "./BatchJobs.js"
import * as Failure from "../failures/Failure.js"
import * as Time from "../platform/Time.js"

export const shardsPerChunk = 25
/** Drifted rows a job repairs at most; more fail the job (a rebuild is the tool then). */
export const maxRepairs = 10_000

export interface Params {
  readonly projection: string
  readonly repair: boolean
}

const q = (identifier: string) => `"${identifier.replace(/"/g, '""')}"`

/** Drops a reconcile job's shadow and its applied set (idempotent): when it ends, fails or is cancelled. */
export const dropShadow = Effect.fn("Reconcile.dropShadow")(function*(job: BatchJobs.Row) {
  const store = yield* ProjectionStore
  const registry = yield* Registry
  const p = registry.projection((JSON.parse(job.params) as Params).projection)
  if (!p) return
  // The shadow lives beside the tenant's projection (its home, or the database the projection was moved to).
  yield* Placement.writing(job.tenant_id, p.name)(store.execute([
    { sql: `DROP TABLE IF EXISTS ${q(`${Projection.tableName(p)}__${job.id}`)}`, params: [] },
    { sql: "DELETE FROM projection_applied WHERE projection = ?", params: [`${p.name}__${job.id}`] }
  ]))
})

/** Runs one chunk; returns the next chunk's message payload, or undefined when done (or stopped). */
export const step = Effect.fn("Reconcile.step")(function*(payload: BatchPayload) {
  const store = yield* ProjectionStore
  const registry = yield* Registry
  const ledger = yield* Ledger
  const job = yield* BatchJobs.find(payload.batch_id)
  if (!job) return undefined
  if (BatchJobs.isFinished(job.status)) {
    // Cancelled (or failed) between chunks: nothing else will drop the shadow.
    yield* dropShadow(job)
    return undefined
  }
  const chunk = payload.offset
  if (job.chunks_done < chunk) return yield* new Failure.TransientError({ message: `chunk ${chunk} arrived before chunk ${job.chunks_done} was recorded` })
  const next: BatchPayload = { ...payload, offset: chunk + 1 }
  if (job.chunks_done > chunk) return next
  const now = yield* Time.now
  if (job.status === "queued") yield* BatchJobs.markRunning(job.id, now)
  const params = JSON.parse(job.params) as Params
  const p = registry.projection(params.projection)
  if (!p) return yield* new Failure.PermanentError({ message: `projection "${params.projection}" is no longer registered` })
  const live = Projection.tableName(p)
  const shadow = `${live}__${job.id}`
  const target: Projection.Target = { table: shadow, appliedAs: `${p.name}__${job.id}` }
  // The projection's table and its shadow are in the database holding the tenant's projection (the job's record at home).
  const onProjection = Placement.writing(job.tenant_id, p.name)
  if (chunk === 0) {
    const created = yield* onProjection(Rebuild.shadowStatement(live, shadow))
    if (!created) return yield* new Failure.PermanentError({ message: `table ${live} does not exist` })
    yield* onProjection(store.execute([{ sql: created.sql.replace(/^CREATE TABLE /i, "CREATE TABLE IF NOT EXISTS "), params: [] }]))
  }

  // Replay this chunk's shards of the tenant into the shadow.
  const after = typeof payload.items?.[0] === "string" ? (payload.items[0] as string) : ""
  const shards = yield* LedgerTopology.shardsAfter(after, shardsPerChunk, job.tenant_id)
  const stored = (yield* Effect.forEach(shards, (s) => ledger.readShard(s), { concurrency: 8 })).flat()
  // Personal fields opened for the mappings, as the projection consumer does (the marker once erased).
  const facts = registry.hasPersonalData ? yield* Sealing.openFacts(yield* KeyRing, registry.personalFact, stored) : stored
  const failures: Array<string> = []
  for (let i = 0; i < facts.length; i += Rebuild.factsPerWrite) {
    yield* onProjection(store.execute(Rebuild.replayStatements(p, facts.slice(i, i + Rebuild.factsPerWrite), target, failures)))
  }
  if (shards.length === shardsPerChunk) {
    const status = yield* BatchJobs.recordChunk(job, { chunk, lines: shards.length, bytes: 0, succeeded: 0, errors: [], last: false }, now)
    if (status === "running") return { ...next, items: [shards.at(-1)!] }
    if (status !== undefined) yield* dropShadow(job)
    return undefined
  }

  // Every shard replayed: compare, repair if asked, drop the shadow.
  const columns = Projection.columnNames(p).map(q).join(", ")
  const [drifted, expected] = yield* onProjection(Effect.all([
    store.query(Values, { sql: `SELECT ${columns} FROM ${q(live)} WHERE tenant_id = ? EXCEPT SELECT ${columns} FROM ${q(shadow)} WHERE tenant_id = ?`, params: [job.tenant_id, job.tenant_id] }),
    store.query(Values, { sql: `SELECT ${columns} FROM ${q(shadow)} WHERE tenant_id = ? EXCEPT SELECT ${columns} FROM ${q(live)} WHERE tenant_id = ?`, params: [job.tenant_id, job.tenant_id] })
  ]))
  const keyOf = (row: Record<string, unknown>) => JSON.stringify(p.key.map((k) => row[k]))
  const byKey = new Map<string, { key: Record<string, unknown>; live?: Record<string, unknown>; ledger?: Record<string, unknown> }>()
  const entry = (row: Record<string, unknown>) => {
    const k = keyOf(row)
    let e = byKey.get(k)
    if (!e) byKey.set(k, e = { key: Object.fromEntries(p.key.map((c) => [c, row[c]])) })
    return e
  }
  for (const row of drifted) entry(row).live = row
  for (const row of expected) entry(row).ledger = row
  if (params.repair && byKey.size > maxRepairs) {
    return yield* new Failure.PermanentError({ message: `${byKey.size} rows drifted (more than ${maxRepairs}): rebuild the projection instead` })
  }
  const drifts = [...byKey.values()].sort((a, b) => (JSON.stringify(a.key) < JSON.stringify(b.key) ? -1 : 1))
  const errors: Array<BatchJobs.ItemError> = drifts.map((d, i) => ({
    line: i + 1,
    error: `${JSON.stringify(d.key)}: ${d.live === undefined ? "missing" : d.ledger === undefined ? "not implied by the ledger" : "differs"}; ` +
      `stored ${JSON.stringify(d.live ?? null)}, ledger ${JSON.stringify(d.ledger ?? null)}`
  }))
  const where = ["tenant_id = ?", ...p.key.map((k) => `${q(k)} = ?`)].join(" AND ")
  const repairs = params.repair
    ? drifts.flatMap((d) => {
      const keyParams = [job.tenant_id, ...p.key.map((k) => d.key[k] as Projection.Value)]
      return [
        { sql: `DELETE FROM ${q(live)} WHERE ${where}`, params: keyParams },
        { sql: `INSERT INTO ${q(live)} (${columns}) SELECT ${columns} FROM ${q(shadow)} WHERE ${where}`, params: keyParams }
      ]
    })
    : []
  yield* onProjection(store.execute([
    ...repairs,
    { sql: `DROP TABLE IF EXISTS ${q(shadow)}`, params: [] },
    { sql: "DELETE FROM projection_applied WHERE projection = ?", params: [target.appliedAs] }
  ]))
  if (failures.length > 0) yield* Effect.logWarning(`reconcile ${job.id} of ${p.name}: ${failures.length} fact(s) could not be mapped; first: ${failures[0]}`)
  yield* BatchJobs.recordChunk(job, {
    chunk,
    lines: shards.length,
    bytes: 0,
    // Rows repaired (with `repair`), else none: `failed` counts the drifted rows.
    succeeded: params.repair ? drifts.length : 0,
    errors,
    last: true
  }, now)
  return undefined
})
