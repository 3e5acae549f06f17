/**
 * Batch job records (`batch_jobs`): the one owner of that table.
 *
 * A job is tenant-scoped: every read and the cancel take the caller's tenant,
 * and another tenant's job reads as missing. Status goes `queued → running →
 * succeeded | failed`, or `cancelled` from queued or running; a finished job
 * never changes again. Progress is recorded per chunk by the operation's step
 * (Import.ts), conditioned on `chunks_done`, so a redelivered chunk records
 * nothing twice. `fail` is what the batch consumer calls when a chunk has
 * exhausted its retries: the job ends `failed` with its error, never `running`
 * forever.
 *
 * Rebuilds keep their own record (`projection_rebuilds`, Rebuild.ts): they are
 * platform-wide, owned by the platform's tenant.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { ProjectionStore } from "../projections/ProjectionStore.js"
import * as Failure from "../failures/Failure.js"
import * as Time from "../platform/Time.js"
import { jobStatuses } from "../api/Batches.js"

export const operations = ["import", "export", "reconcile"] as const
export type Operation = (typeof operations)[number]
/** A job's statuses, as the API describes them (`@factline/core/api`'s Batches). */
export const statuses = jobStatuses
export type Status = (typeof statuses)[number]
/** A job keeps this many item errors (the first ones); `failed` counts them all. */
export const maxErrors = 100

export interface ItemError {
  /** 1-based line of the input (NDJSON line, or position in an inline list). */
  readonly line: number
  readonly error: string
}

/** The stored row. */
/** A job's row in `batch_jobs`. */
export const Row = Schema.Struct({
  id: Schema.String,
  tenant_id: Schema.String,
  operation: Schema.Literals(operations),
  status: Schema.Literals(statuses),
  params: Schema.String,
  input_key: Schema.NullOr(Schema.String),
  output_key: Schema.NullOr(Schema.String),
  total: Schema.NullOr(Schema.Number),
  offset: Schema.Number,
  cursor: Schema.Number,
  chunks_done: Schema.Number,
  succeeded: Schema.Number,
  failed: Schema.Number,
  errors: Schema.String,
  error: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  started_at: Schema.NullOr(Schema.String),
  finished_at: Schema.NullOr(Schema.String),
  updated_at: Schema.String
})
export type Row = typeof Row.Type

const StatusRow = Schema.Struct({ status: Schema.Literals(statuses) })
const IdRow = Schema.Struct({ id: Schema.String })

/** What the API shows of a job. */
export interface View {
  readonly batch_id: string
  readonly operation: Operation
  readonly status: Status
  readonly tenant_id: string
  readonly params: Readonly<Record<string, unknown>>
  readonly offset: number
  readonly total: number | null
  readonly succeeded: number
  readonly failed: number
  readonly errors: ReadonlyArray<ItemError>
  readonly error: string | null
  readonly output: string | null
  readonly created_at: string
  readonly started_at: string | null
  readonly finished_at: string | null
  readonly updated_at: string
}

export const view = (row: Row): View => ({
  batch_id: row.id,
  operation: row.operation,
  status: row.status,
  tenant_id: row.tenant_id,
  params: JSON.parse(row.params) as Record<string, unknown>,
  offset: row.offset,
  total: row.total,
  succeeded: row.succeeded,
  failed: row.failed,
  errors: JSON.parse(row.errors),
  error: row.error,
  output: row.output_key === null ? null : `/v1/batches/${row.id}/output`,
  created_at: row.created_at,
  started_at: row.started_at,
  finished_at: row.finished_at,
  updated_at: row.updated_at
})

export const isFinished = (status: Status) => status === "succeeded" || status === "failed" || status === "cancelled"

/** A new batch id: time-ordered (the clock's milliseconds in base 36), then random. */
export const newId: Effect.Effect<string> = Effect.map(Time.millis, (ms) => `bt_${ms.toString(36)}_${crypto.randomUUID().replace(/-/g, "").slice(0, 12)}`)

/** The R2 key of a job's input (an inline import's items, written as NDJSON) under its tenant's prefix. */
export const inputKey = (tenantId: string, id: string) => `${tenantId}/batches/${id}/input.ndjson`

/** Records a queued job, created now; `id` when the caller named it already (an inline import's input is written under it first). */
export const create = Effect.fn("BatchJobs.create")(function*(job: {
  readonly id?: string
  readonly tenantId: string
  readonly operation: Operation
  readonly params: unknown
  readonly inputKey: string | null
  readonly total: number | null
}) {
  const id = job.id ?? (yield* newId)
  const now = yield* Time.now
  const store = yield* ProjectionStore
  yield* store.execute([{
    sql: `INSERT INTO batch_jobs (id, tenant_id, operation, status, params, input_key, total, created_at, updated_at)
          VALUES (?, ?, ?, 'queued', ?, ?, ?, ?, ?)`,
    params: [id, job.tenantId, job.operation, JSON.stringify(job.params), job.inputKey, job.total, now, now]
  }])
  return (yield* find(id))!
})

/** The record by id, whoever owns it: for the batch consumer only, never for a caller. */
export const find = Effect.fn("BatchJobs.find")(function*(id: string) {
  return yield* Effect.map(
    Effect.flatMap(Effect.service(ProjectionStore), (store) => store.query(Row, { sql: "SELECT * FROM batch_jobs WHERE id = ?", params: [id] })),
    (rows) => rows[0]
  )
})

/** The record, if `tenantId` owns it: another tenant's job reads as missing. */
export const get = Effect.fn("BatchJobs.get")(function*(tenantId: string, id: string) {
  return yield* Effect.map(
    Effect.flatMap(Effect.service(ProjectionStore), (store) =>
      store.query(Row, { sql: "SELECT * FROM batch_jobs WHERE id = ? AND tenant_id = ?", params: [id, tenantId] })),
    (rows) => rows[0]
  )
})

/** `tenantId`'s jobs newest first (by `created_at`, then id), after a keyset `cursor` of both, with `status` when given: at most `limit`. */
export const page = Effect.fn("BatchJobs.page")(function*(tenantId: string, options: { readonly status?: string | undefined; readonly cursor?: readonly [string, string] | undefined; readonly limit: number }) {
  const store = yield* ProjectionStore
  const { status, cursor, limit } = options
  const clauses = ["tenant_id = ?", ...(status !== undefined ? ["status = ?"] : []), ...(cursor ? ["(created_at, id) < (?, ?)"] : [])]
  return yield* store.query(Row, {
    sql: `SELECT * FROM batch_jobs WHERE ${clauses.join(" AND ")} ORDER BY created_at DESC, id DESC LIMIT ?`,
    params: [tenantId, ...(status !== undefined ? [status] : []), ...(cursor ?? []), limit]
  })
})

/**
 * Stops further chunks: a queued or running job becomes `cancelled` (a chunk
 * already running finishes and records its progress; the next one does nothing).
 * Returns the record; a finished job is a conflict, another tenant's is not found.
 */
export const cancel = Effect.fn("BatchJobs.cancel")(function*(tenantId: string, id: string, now: string) {
  const store = yield* ProjectionStore
  const [row] = yield* store.query(Row, {
    sql: `UPDATE batch_jobs SET status = 'cancelled', finished_at = ?, updated_at = ?
          WHERE id = ? AND tenant_id = ? AND status IN ('queued', 'running') RETURNING *`,
    params: [now, now, id, tenantId]
  })
  if (row) return row
  const existing = yield* get(tenantId, id)
  if (!existing) return yield* new Failure.NotFound({ message: `no batch "${id}"` })
  return yield* new Failure.Conflict({ message: `batch ${id} is ${existing.status}; only a queued or running batch can be cancelled` })
})

/** The job cannot finish (a chunk exhausted its retries): it ends `failed` with the error, unless already finished. */
export const fail = Effect.fn("BatchJobs.fail")(function*(id: string, error: string, now: string) {
  return yield* Effect.flatMap(Effect.service(ProjectionStore), (store) =>
    store.execute([{
      sql: `UPDATE batch_jobs SET status = 'failed', error = ?, finished_at = ?, updated_at = ? WHERE id = ? AND status IN ('queued', 'running')`,
      params: [error.slice(0, 2_000), now, now, id]
    }]))
})

/** A queued job starts with its first chunk. */
export const markRunning = Effect.fn("BatchJobs.markRunning")(function*(id: string, now: string) {
  return yield* Effect.flatMap(Effect.service(ProjectionStore), (store) =>
    store.execute([{
      sql: "UPDATE batch_jobs SET status = 'running', started_at = COALESCE(started_at, ?), updated_at = ? WHERE id = ? AND status = 'queued'",
      params: [now, now, id]
    }]))
})

/** What one chunk did. */
export interface ChunkProgress {
  readonly chunk: number
  readonly lines: number
  readonly bytes: number
  readonly succeeded: number
  readonly errors: ReadonlyArray<ItemError>
  /** The input is exhausted: the job succeeds (unless cancelled meanwhile). */
  readonly last: boolean
  /** Where the job's output is (R2 key or prefix), recorded with the last chunk. */
  readonly outputKey?: string
}

/**
 * Records a chunk's progress in one statement, only if no delivery of this
 * chunk has recorded it yet (`chunks_done` = the chunk's number). Returns the
 * status after it, or undefined if it was recorded before (or the job is gone).
 */
export const recordChunk = Effect.fn("BatchJobs.recordChunk")(function*(row: Row, progress: ChunkProgress, now: string) {
  const store = yield* ProjectionStore
  const kept = [...JSON.parse(row.errors) as Array<ItemError>, ...progress.errors].slice(0, maxErrors)
  const [after] = yield* store.query(StatusRow, {
    sql: `UPDATE batch_jobs SET
            "offset" = "offset" + ?, cursor = cursor + ?, chunks_done = chunks_done + 1,
            succeeded = succeeded + ?, failed = failed + ?, errors = ?,
            total = CASE WHEN ? THEN "offset" + ? ELSE total END,
            status = CASE WHEN status = 'cancelled' THEN 'cancelled' WHEN ? THEN 'succeeded' ELSE 'running' END,
            finished_at = CASE WHEN status = 'cancelled' THEN finished_at WHEN ? THEN ? ELSE NULL END,
            output_key = CASE WHEN status = 'cancelled' THEN output_key ELSE COALESCE(?, output_key) END,
            updated_at = ?
          WHERE id = ? AND chunks_done = ? AND status IN ('running', 'cancelled')
          RETURNING status`,
    params: [
      progress.lines, progress.bytes, progress.succeeded, progress.errors.length, JSON.stringify(kept),
      progress.last ? 1 : 0, progress.lines,
      progress.last ? 1 : 0, progress.last ? 1 : 0, now, progress.last ? progress.outputKey ?? null : null, now,
      row.id, progress.chunk
    ]
  })
  return after?.status
})

/** A queued or running job without progress for this long has lost its chunk message (retries take < 30 min): it fails. */
export const staleAfterMs = 60 * 60 * 1000

/**
 * Ends `failed` every queued or running job whose record has not changed since `cutoff`: its chunk
 * message is gone (a local queue restarted, a message dropped), so nothing would ever finish it.
 * Returns how many. Run by the scheduled maintenance.
 */
export const failStale = Effect.fn("BatchJobs.failStale")(function*(cutoff: string, now: string) {
  return yield* Effect.map(
    Effect.flatMap(Effect.service(ProjectionStore), (store) =>
      store.query(IdRow, {
        sql: `UPDATE batch_jobs SET status = 'failed', error = 'no progress since ' || updated_at || '; its chunk message was lost', finished_at = ?, updated_at = ?
              WHERE status IN ('queued', 'running') AND updated_at < ? RETURNING id`,
        params: [now, now, cutoff]
      })),
    (rows) => rows.length
  )
})
