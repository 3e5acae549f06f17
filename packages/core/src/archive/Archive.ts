/**
 * The bounded D1: the `facts` copy keeps the last `FACTLINE_FACTS_WINDOW_DAYS`
 * whole days (default 30); older facts are moved to R2, per tenant and day, as
 * Parquet (`{tenant}/archive/facts/{YYYY-MM-DD}/part-NNNN.parquet` in the
 * payload bucket), then deleted from D1. The ledger stays the source of truth:
 * exports and rebuilds read it, never the copy.
 *
 * One chunk (a tenant's day, oldest rows first, at most `rowsPerPart`) is
 * moved in three steps that a crash or a refusing binding may split anywhere:
 *
 * 1. the day's existing parts are read (their `fact_id` column only, by byte
 *    range): rows already in a part are not written again;
 * 2. the other rows are written as one new part (the next number; a part that
 *    cannot be read as Parquet was never verified, so nothing was deleted for
 *    it and its number is reused), then read back: its fact ids must be the
 *    rows' ids;
 * 3. exactly the chunk's rows are deleted from D1, by fact id.
 *
 * R2 refusing (1, 2) leaves every row in D1; D1 refusing the delete (3) leaves
 * rows that step 1 of the next run finds in a part, so they are deleted
 * without being written twice. A fact copied to D1 again after its day was
 * archived (a replayed dead letter) is recognised the same way.
 *
 * It does not: archive today's facts or any day inside the window; delete an
 * object; or coordinate two overlapping runs (the cron's runs are short and
 * bounded; see docs/archive.md).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Layer from "effect/Layer"
import * as Failure from "../failures/Failure.js"
import * as Stream from "effect/Stream"
import { PayloadBucket, type Storage } from "../platform/Storage.js"
import * as Sql from "../platform/Sql.js"
import * as Time from "../platform/Time.js"
import * as Parquet from "./Parquet.js"

/** Rows per part at most: one part is written, read back and deleted as one chunk. */
export const rowsPerPart = 5_000
/** Rows moved per scheduled run at most (as the other retention jobs); a backlog is worked off over the next runs. */
export const rowsPerRun = 5_000
/** Tenants looked at per run, those with the oldest facts first. */
export const tenantsPerRun = 100

/** How many whole days the D1 `facts` copy keeps (`FACTLINE_FACTS_WINDOW_DAYS`, read by the composition). */
export class FactsWindow extends Context.Service<FactsWindow, { readonly days: number }>()("@factline/core/FactsWindow") {
  static readonly layer = (days: number) => Layer.succeed(FactsWindow, { days })
}

const dayMs = 24 * 3600 * 1000
const service = "the facts archive"

/** The objects of a tenant's archived day. */
export const dayPrefix = (tenantId: string, day: string) => `${tenantId}/archive/facts/${day}/`
export const partKey = (tenantId: string, day: string, part: number) => `${dayPrefix(tenantId, day)}part-${String(part).padStart(4, "0")}.parquet`
const partNumber = (key: string) => Number(/part-(\d+)\.parquet$/.exec(key)?.[1] ?? NaN)

/** The first instant the copy keeps: midnight (UTC) of the day `windowDays` before now; rows before it are archived. */
export const cutoff = (windowDays: number) => Effect.map(Time.ago(windowDays * dayMs), (at) => `${at.slice(0, 10)}T00:00:00.000Z`)

const nextDay = (day: string) => new Date(Date.parse(`${day}T00:00:00.000Z`) + dayMs).toISOString()

// The copy's key is (tenant_id, created_at, fact_id): each query below walks it.
/** Tenants with facts before the cutoff, oldest first: one key lookup per tenant (a loose index scan), not a table scan. */
const tenantsBefore = (before: string, limit: number) =>
  Sql.statement(
    `WITH RECURSIVE tenants(tenant_id) AS (
       SELECT MIN(tenant_id) FROM facts
       UNION ALL SELECT (SELECT MIN(tenant_id) FROM facts WHERE tenant_id > tenants.tenant_id) FROM tenants WHERE tenants.tenant_id IS NOT NULL
     )
     SELECT tenant_id, oldest FROM (
       SELECT tenant_id, (SELECT MIN(created_at) FROM facts WHERE facts.tenant_id = tenants.tenant_id) AS oldest FROM tenants WHERE tenant_id IS NOT NULL
     ) WHERE oldest < ? ORDER BY oldest LIMIT ?`,
    before,
    limit
  )

const oldestBefore = (tenantId: string, before: string) =>
  Sql.statement("SELECT MIN(created_at) AS oldest FROM facts WHERE tenant_id = ? AND created_at < ?", tenantId, before)

const chunkOf = (tenantId: string, day: string, limit: number) =>
  Sql.statement(
    `SELECT tenant_id, fact_id, stream, sequence, type, body, causation_id, correlation_id, caused_by, created_at, traceparent, schema_version
     FROM facts WHERE tenant_id = ? AND created_at >= ? AND created_at < ? ORDER BY created_at, fact_id LIMIT ?`,
    tenantId,
    `${day}T00:00:00.000Z`,
    nextDay(day),
    limit
  )

/** Deletes exactly these facts of the day (the fact ids as one JSON array: D1 binds at most 100 parameters). */
export const deleteArchived = (tenantId: string, day: string, factIds: ReadonlyArray<string>) =>
  Sql.statement(
    "DELETE FROM facts WHERE tenant_id = ? AND created_at >= ? AND created_at < ? AND fact_id IN (SELECT value FROM json_each(?))",
    tenantId,
    `${day}T00:00:00.000Z`,
    nextDay(day),
    JSON.stringify(factIds)
  )

/** A failure of the bucket itself, told apart from bytes that are not Parquet. */
class BucketRefused {
  constructor(readonly failure: Failure.Unavailable) {}
}

/** The part's fact ids, read by byte range (footer, then the `fact_id` column); undefined when the object is not a readable archive. */
const partFactIds = Effect.fn("Archive.partFactIds")(function*(storage: Storage, key: string) {
  const head = yield* storage.head(key)
  if (head === undefined) return undefined
  const run = Effect.runPromiseWith(yield* Effect.context<never>())
  const source: Parquet.Source = {
    byteLength: head.size,
    slice: (start, end = head.size) =>
      run(storage.bytes(key, { offset: start, length: end - start }).pipe(
        Effect.flatMap((bytes) => bytes === undefined ? Effect.fail(new Failure.Unavailable({ service, message: `${key} disappeared while read` })) : Effect.succeed(bytes.buffer)),
        Effect.mapError((failure) => new BucketRefused(failure))
      ))
  }
  return yield* Effect.tryPromise({ try: () => Parquet.factIds(source), catch: (error) => error }).pipe(
    Effect.map((ids): ReadonlyArray<string> | undefined => ids),
    Effect.catch((error) => error instanceof BucketRefused ? Effect.fail(error.failure) : Effect.succeed(undefined))
  )
})

/** Every part's key under the prefix, all pages, sorted. */
const partsUnder = (storage: Storage, prefix: string) =>
  Stream.runCollect(storage.list(prefix).pipe(Stream.filter((key) => Number.isInteger(partNumber(key))))).pipe(Effect.map((keys) => keys.sort()))

/** A row of the `facts` copy as the archive reads it (`Parquet.FactRow`). */
export const CopiedFact = Schema.Struct({
  tenant_id: Schema.String,
  fact_id: Schema.String,
  stream: Schema.String,
  sequence: Schema.Number,
  type: Schema.String,
  body: Schema.String,
  causation_id: Schema.String,
  correlation_id: Schema.String,
  caused_by: Schema.String,
  created_at: Schema.String,
  traceparent: Schema.NullOr(Schema.String),
  schema_version: Schema.optional(Schema.NullOr(Schema.Number))
})
const Tenant = Schema.Struct({ tenant_id: Schema.String })
const Oldest = Schema.Struct({ oldest: Schema.NullOr(Schema.String) })

/**
 * Moves one chunk of a tenant's day (at most `limit` rows) to the archive; returns how many rows left D1.
 * Fails with `Unavailable` when R2 or D1 refuses (nothing is lost: rows leave D1 only once they are in a verified part).
 */
export const archiveChunk = Effect.fn("Archive.archiveChunk")(function*(tenantId: string, day: string, limit: number) {
  const sql = yield* Sql.ReadDatabase
  const storage = (yield* PayloadBucket).named(service)
  const rows = yield* sql.all(CopiedFact, chunkOf(tenantId, day, limit))
  if (rows.length === 0) return 0
  const parts = yield* partsUnder(storage, dayPrefix(tenantId, day))
  const archived = new Set<string>()
  const unreadable: Array<number> = []
  for (const key of parts) {
    const ids = yield* partFactIds(storage, key)
    if (ids === undefined) unreadable.push(partNumber(key))
    else for (const id of ids) archived.add(id)
  }
  const fresh = rows.filter((row) => !archived.has(row.fact_id))
  if (fresh.length > 0) {
    const part = unreadable[0] ?? (parts.length === 0 ? 0 : Math.max(...parts.map(partNumber)) + 1)
    const key = partKey(tenantId, day, part)
    const bytes = Parquet.encode(fresh)
    yield* storage.put(key, bytes, "application/vnd.apache.parquet")
    const written = yield* partFactIds(storage, key)
    const expected = new Set(fresh.map((row) => row.fact_id))
    if (written === undefined || written.length !== expected.size || written.some((id) => !expected.has(id))) {
      return yield* new Failure.Unavailable({ service, message: `${key} does not read back as the ${fresh.length} facts written; the rows stay in D1` })
    }
  }
  yield* sql.run(deleteArchived(tenantId, day, rows.map((row) => row.fact_id)))
  return rows.length
})

/**
 * One scheduled pass: moves the facts of days before the window to the archive, oldest tenant-day first,
 * at most `limit` rows; returns how many rows left D1.
 */
export const run = Effect.fn("Archive.run")(function*(limit: number = rowsPerRun) {
  const window = yield* FactsWindow
  const sql = yield* Sql.ReadDatabase
  const before = yield* cutoff(window.days)
  let moved = 0
  const tenants = yield* sql.all(Tenant, tenantsBefore(before, tenantsPerRun))
  for (const { tenant_id } of tenants) {
    while (moved < limit) {
      const oldest = (yield* sql.first(Oldest, oldestBefore(tenant_id, before)))?.oldest
      if (oldest === null || oldest === undefined) break
      moved += yield* archiveChunk(tenant_id, oldest.slice(0, 10), Math.min(rowsPerPart, limit - moved))
    }
    if (moved >= limit) break
  }
  return moved
})
