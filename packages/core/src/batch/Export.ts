/**
 * `export`: a tenant's facts, or a projection's rows, as NDJSON (or CSV for a
 * projection) to R2, one page per chunk.
 *
 * Each chunk reads one page with the analysts' own queries (ProjectionQuery:
 * tenant-scoped, keyset-paginated, integers never rounded), so an export holds
 * the same rows `GET /v1/facts` and `GET /v1/projections/:name` return, and
 * writes it as one part object (`<tenant>/batches/<id>/output/part-000000`…);
 * the download streams the parts in order. The page's cursor travels in the
 * next chunk's message. A redelivered chunk writes the same part again (same
 * key, same rows) and records its progress only once (BatchJobs.recordChunk).
 *
 * It does not: export another tenant's data (the query is scoped to the job's
 * tenant), or filter (the whole projection or all facts).
 */
import { Effect, Result } from "effect"
import type { BatchPayload } from "@factline/schemas"
import * as Projection from "../definitions/Projection.js"
import * as ProjectionQuery from "../projections/ProjectionQuery.js"
import { ProjectionStore } from "../projections/ProjectionStore.js"
import { Registry } from "../registry/Registry.js"
import * as BatchFiles from "./BatchFiles.js"
import * as BatchJobs from "./BatchJobs.js"
import * as Failure from "../failures/Failure.js"
import * as Time from "../platform/Time.js"

/** Rows per chunk: the analysts' API's largest page. */
export const rowsPerChunk = ProjectionQuery.maxLimit

export const formats = ["ndjson", "csv"] as const
export type Format = (typeof formats)[number]

/** What an export job was asked for (`batch_jobs.params`). */
export interface Params {
  /** A projection's name, or absent for the tenant's facts. */
  readonly projection?: string
  readonly format: Format
}

/** The prefix of a job's output parts; the download lists it in key order. */
export const outputPrefix = (tenantId: string, id: string) => `${tenantId}/batches/${id}/output/`
export const partKey = (tenantId: string, id: string, chunk: number) => `${outputPrefix(tenantId, id)}part-${String(chunk).padStart(6, "0")}`

const csvValue = (value: unknown) => {
  if (value === null || value === undefined) return ""
  const text = typeof value === "object" ? JSON.stringify(value) : String(value)
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text
}

/** NDJSON lines, or CSV lines (with the header row on the first chunk only). */
export const render = (rows: ReadonlyArray<Record<string, unknown>>, format: Format, header: boolean) => {
  if (format === "ndjson") return rows.map((row) => `${JSON.stringify(row)}\n`).join("")
  if (rows.length === 0) return ""
  const columns = Object.keys(rows[0]!)
  const lines = rows.map((row) => columns.map((c) => csvValue(row[c])).join(","))
  return `${[...(header ? [columns.join(",")] : []), ...lines].join("\n")}\n`
}

/** Runs one chunk; returns the next chunk's message payload, or undefined when the export is done (or stopped). */
export const step = Effect.fn("Export.step")(function*(payload: BatchPayload) {
  const files = yield* BatchFiles.BatchFiles
  const store = yield* ProjectionStore
  const registry = yield* Registry
  const job = yield* BatchJobs.find(payload.batch_id)
  if (!job || BatchJobs.isFinished(job.status)) return undefined
  const chunk = payload.offset
  if (job.chunks_done < chunk) return yield* new Failure.TransientError({ message: `chunk ${chunk} arrived before chunk ${job.chunks_done} was recorded` })
  const now = yield* Time.now
  if (job.status === "queued") yield* BatchJobs.markRunning(job.id, now)
  const params = JSON.parse(job.params) as Params
  const cursor = typeof payload.items?.[0] === "string" ? (payload.items[0] as string) : undefined
  const query = { limit: String(rowsPerChunk), ...(cursor === undefined ? {} : { cursor }) }
  const projection = params.projection === undefined ? undefined : registry.projection(params.projection)
  if (params.projection !== undefined && projection === undefined) {
    return yield* new Failure.PermanentError({ message: `projection "${params.projection}" is no longer registered` })
  }
  const page = projection === undefined ? ProjectionQuery.facts(job.tenant_id, query) : ProjectionQuery.rows(projection, job.tenant_id, query)
  if (Result.isFailure(page)) return yield* new Failure.PermanentError({ message: `the export query was refused: ${JSON.stringify(page.failure)}` })
  const fetched = yield* store.query<Record<string, unknown>>(page.success.sql)
  const booleans = projection === undefined ? [] : Projection.booleanColumns(projection)
  const rows = fetched.slice(0, page.success.limit).map((row): Record<string, unknown> => {
    if (projection === undefined) {
      const { body, ...fact } = row
      return { ...fact, data: JSON.parse(String(body)) }
    }
    const out: Record<string, unknown> = { ...row }
    for (const b of booleans) if (out[b] !== null && out[b] !== undefined) out[b] = out[b] === 1
    return out
  })
  const text = render(rows, params.format, chunk === 0)
  yield* files.put(partKey(job.tenant_id, job.id, chunk), text)
  const nextCursor = page.success.nextCursor(fetched)
  const next: BatchPayload | undefined = nextCursor === null ? undefined : { ...payload, offset: chunk + 1, items: [nextCursor] }
  if (job.chunks_done > chunk) return next
  const status = yield* BatchJobs.recordChunk(job, {
    chunk,
    lines: rows.length,
    bytes: new TextEncoder().encode(text).length,
    succeeded: rows.length,
    errors: [],
    last: next === undefined,
    outputKey: outputPrefix(job.tenant_id, job.id)
  }, now)
  return status === "running" ? next : undefined
})
