/**
 * A cold segment as an R2 object (ColdHistory.ts reads and writes them): its rows in the archive's Parquet layout
 * (archive/Parquet.ts) and back as the shard's fact rows, the row-by-row comparison a written segment must pass, the
 * object key under the tenant's prefix (named by the content's digest), and a small per-object cache of decoded
 * segments. It neither decides what to tier nor touches SQLite (ColdSegments.ts holds the manifest).
 */
import * as Effect from "effect/Effect"
import * as Parquet from "../archive/Parquet.js"
import * as ObjectLayout from "../platform/ObjectLayout.js"
import type { Storage } from "../platform/Storage.js"
import type { FactRow } from "./LedgerRows.js"

/** Decoded segments kept per shard object. */
export const cachedSegments = 8
export const contentType = "application/vnd.apache.parquet"

export const toParquet = (row: FactRow): Parquet.FactRow => ({
  tenant_id: row.tenant_id,
  fact_id: row.fact_id,
  stream: row.stream,
  sequence: row.sequence,
  type: row.type,
  body: row.data,
  causation_id: row.causation_id,
  correlation_id: row.correlation_id,
  caused_by: row.caused_by,
  created_at: row.created_at,
  traceparent: row.traceparent ?? null,
  schema_version: row.schema_version ?? 1
})

export const fromParquet = (row: Parquet.FactRow): FactRow => ({
  fact_id: row.fact_id,
  tenant_id: row.tenant_id,
  stream: row.stream,
  sequence: row.sequence,
  type: row.type,
  data: row.body,
  causation_id: row.causation_id,
  correlation_id: row.correlation_id,
  caused_by: row.caused_by,
  created_at: row.created_at,
  traceparent: row.traceparent,
  schema_version: row.schema_version ?? 1
})

export const sameRow = (a: FactRow, b: FactRow) =>
  a.fact_id === b.fact_id && a.tenant_id === b.tenant_id && a.stream === b.stream && a.sequence === b.sequence && a.type === b.type &&
  a.data === b.data && a.causation_id === b.causation_id && a.correlation_id === b.correlation_id && a.caused_by === b.caused_by &&
  a.created_at === b.created_at && (a.traceparent ?? null) === (b.traceparent ?? null) && (a.schema_version ?? 1) === (b.schema_version ?? 1)

export const decode = (bytes: Uint8Array): Promise<ReadonlyArray<Parquet.FactRow>> =>
  Parquet.rows({ byteLength: bytes.byteLength, slice: (start, end) => bytes.slice(start, end).buffer })

export const digest = async (bytes: Uint8Array): Promise<string> => {
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes))
  let hex = ""
  for (let i = 0; i < 16; i++) hex += hash[i]!.toString(16).padStart(2, "0")
  return hex
}

/** Where a shard's segments live: under its tenant's prefix (removed with the tenant), per shard. */
export const segmentPrefix = (shardKey: string, tenantId: string): string => {
  const shard = `${tenantId}/#`
  if (!shardKey.startsWith(shard)) throw new Error(`shard ${shardKey} does not hold tenant ${tenantId}'s facts`)
  return `${ObjectLayout.tenantPrefix(tenantId)}ledger/${shardKey.slice(shard.length)}/`
}

/** A small per-object cache of decoded segments, the most recently used kept. */
export class Segments {
  private readonly decoded = new Map<string, Promise<ReadonlyArray<FactRow>>>()
  constructor(private readonly storage: Storage) {}

  load(objectKey: string): Promise<ReadonlyArray<FactRow>> {
    const cached = this.decoded.get(objectKey)
    if (cached !== undefined) {
      this.decoded.delete(objectKey)
      this.decoded.set(objectKey, cached)
      return cached
    }
    const loading = Effect.runPromise(this.storage.bytes(objectKey)).then(async (bytes) => {
      if (bytes === undefined) throw new Error(`cold segment ${objectKey} is missing from the bucket`)
      return (await decode(bytes)).map(fromParquet)
    })
    loading.catch(() => this.decoded.delete(objectKey))
    this.keep(objectKey, loading)
    return loading
  }

  keep(objectKey: string, rows: Promise<ReadonlyArray<FactRow>>) {
    this.decoded.set(objectKey, rows)
    while (this.decoded.size > cachedSegments) this.decoded.delete(this.decoded.keys().next().value!)
  }
}
