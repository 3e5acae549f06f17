/**
 * `export`: a tenant's facts, or a projection's rows, as NDJSON (or CSV for a
 * projection) to R2, one page per chunk.
 *
 * A facts export reads the ledger, not the D1 copy (which keeps only a recent
 * window; older days are archived, see `Archive`): each chunk is one page of
 * one of the tenant's shards, in (stream, sequence) order, shard after shard —
 * the same facts with the same fields as `GET /v1/facts` (`subject`, `data`),
 * complete whatever has been archived, each in its type's latest shape (older
 * `schema_version`s upcast; a fact newer than the code fails the export,
 * naming it, rather than writing data of an unknown shape). A projection export reads one page with
 * the analysts' own query (ProjectionQuery: tenant-scoped, keyset-paginated,
 * integers never rounded), the rows `GET /v1/projections/:name` returns. Each
 * chunk writes its page as one part object (`<tenant>/batches/<id>/output/part-000000`…);
 * the download streams the parts in order. The page's cursor travels in the
 * next chunk's message. A redelivered chunk writes the same part again (same
 * key, same rows) and records its progress only once (BatchJobs.recordChunk).
 *
 * It does not: export another tenant's data (the query is scoped to the job's
 * tenant), or filter (the whole projection or all facts).
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type { BatchPayload } from "@factline/schemas"
import * as Projection from "../definitions/Projection.js"
import * as ProjectionQuery from "../projections/ProjectionQuery.js"
import * as FanOut from "../projections/FanOut.js"
import { Registry } from "../registry/Registry.js"
import * as Placement from "../placement/Placement.js"
import { KeyRing } from "../personal/KeyRing.js"
import * as Sealing from "../personal/Sealing.js"
import * as BatchFiles from "./BatchFiles.js"
import * as BatchJobs from "./BatchJobs.js"
import * as Failure from "../failures/Failure.js"
import * as Time from "../platform/Time.js"
import { Ledger } from "../ledger/Ledger.js"
import * as LedgerTopology from "../ledger/LedgerTopology.js"
import type { Fact } from "@factline/schemas"

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

/** Where a facts export is in the ledger: a shard of the tenant and the last (stream, sequence) exported from it. */
interface LedgerPosition {
  readonly shard: string
  readonly after?: { readonly stream: string; readonly sequence: number }
}

/** A fact as `GET /v1/facts` lists it (and a facts export writes it): its stream as `subject`, no tenant (the caller's). */
export const listedFact = (fact: Fact) => ({
  fact_id: fact.fact_id,
  subject: fact.stream,
  sequence: fact.sequence,
  type: fact.type,
  causation_id: fact.causation_id,
  correlation_id: fact.correlation_id,
  caused_by: fact.caused_by,
  created_at: fact.created_at,
  traceparent: fact.traceparent ?? null,
  schema_version: fact.schema_version ?? 1,
  data: fact.data
})

const parsePosition = (cursor: string): LedgerPosition | undefined => {
  try {
    const value: unknown = JSON.parse(cursor)
    return typeof value === "object" && value !== null && typeof (value as LedgerPosition).shard === "string" ? (value as LedgerPosition) : undefined
  } catch {
    return undefined
  }
}

/** One page of the tenant's facts from the ledger, and the position after it (undefined after the last shard). */
const ledgerPage = Effect.fn("Export.ledgerPage")(function*(tenantId: string, cursor: string | undefined) {
  const ledger = yield* Ledger
  const registry = yield* Registry
  const position = cursor === undefined ? undefined : parsePosition(cursor)
  if (cursor !== undefined && position === undefined) {
    return yield* new Failure.PermanentError({ message: "the export's position is not a ledger position (the job started before exports read the ledger); start the export again" })
  }
  const shard = position?.shard ?? (yield* LedgerTopology.shardsAfter("", 1, tenantId))[0]
  if (shard === undefined) return { rows: [], next: undefined }
  const stored = yield* ledger.readShardPage(shard, position?.after, rowsPerChunk)
  // Personal fields opened for the export (the marker once erased): an export file is the tenant's own copy (docs/personal-data.md).
  const opened = registry.hasPersonalData ? yield* Sealing.openFacts(yield* KeyRing, registry.personalFact, stored) : stored
  const facts = yield* Effect.forEach(opened, (fact) => Result.match(registry.latest(fact), { onFailure: Effect.fail, onSuccess: Effect.succeed }))
  const last = facts.at(-1)
  if (facts.length === rowsPerChunk && last !== undefined) {
    return { rows: facts.map(listedFact), next: JSON.stringify({ shard, after: { stream: last.stream, sequence: last.sequence } } satisfies LedgerPosition) }
  }
  const [following] = yield* LedgerTopology.shardsAfter(shard, 1, tenantId)
  return { rows: facts.map(listedFact), next: following === undefined ? undefined : JSON.stringify({ shard: following } satisfies LedgerPosition) }
})

/** Runs one chunk; returns the next chunk's message payload, or undefined when the export is done (or stopped). */
export const step = Effect.fn("Export.step")(function*(payload: BatchPayload) {
  const files = yield* BatchFiles.BatchFiles
  const registry = yield* Registry
  const job = yield* BatchJobs.find(payload.batch_id)
  if (!job || BatchJobs.isFinished(job.status)) return undefined
  const chunk = payload.offset
  if (job.chunks_done < chunk) return yield* new Failure.TransientError({ message: `chunk ${chunk} arrived before chunk ${job.chunks_done} was recorded` })
  const now = yield* Time.now
  if (job.status === "queued") yield* BatchJobs.markRunning(job.id, now)
  const params = JSON.parse(job.params) as Params
  const cursor = typeof payload.items?.[0] === "string" ? (payload.items[0] as string) : undefined
  const projection = params.projection === undefined ? undefined : registry.projection(params.projection)
  if (params.projection !== undefined && projection === undefined) {
    return yield* new Failure.PermanentError({ message: `projection "${params.projection}" is no longer registered` })
  }
  let rows: ReadonlyArray<Record<string, unknown>>
  let nextCursor: string | null | undefined
  if (projection === undefined) {
    const page = yield* ledgerPage(job.tenant_id, cursor)
    rows = page.rows
    nextCursor = page.next
  } else {
    const query = { limit: String(rowsPerChunk), ...(cursor === undefined ? {} : { cursor }) }
    const page = ProjectionQuery.rows(projection, job.tenant_id, query)
    if (Result.isFailure(page)) return yield* new Failure.PermanentError({ message: `the export query was refused: ${JSON.stringify(page.failure)}` })
    // The projection's rows where the tenant's projection lives (its home, the database it was moved to, or its parts merged).
    const fetched = yield* FanOut.read(projection, job.tenant_id, query, page.success)
    const booleans = Projection.booleanColumns(projection)
    rows = fetched.slice(0, page.success.limit).map((row): Record<string, unknown> => {
      const out: Record<string, unknown> = { ...row }
      for (const b of booleans) if (out[b] !== null && out[b] !== undefined) out[b] = out[b] === 1
      return out
    })
    nextCursor = page.success.nextCursor(fetched)
  }
  const text = render(rows, params.format, chunk === 0)
  yield* files.put(partKey(job.tenant_id, job.id, chunk), text)
  const next: BatchPayload | undefined = nextCursor === null || nextCursor === undefined ? undefined : { ...payload, offset: chunk + 1, items: [nextCursor] }
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
