/**
 * The facts archive's file format: rows of the D1 `facts` copy as one Parquet
 * file (SNAPPY, statistics on), sorted by (stream, sequence), with the
 * table's columns — `data` is the fact's JSON as text, as the copy stores it
 * in `body`; `created_at` stays the ISO text every `*_at` column holds, so an
 * archived row compares equal to the ledger's fact.
 *
 * Written with `hyparquet-writer` and read back with `hyparquet` (its own
 * dependency): both plain JavaScript — no wasm, no Node APIs — so they run in
 * workerd as they do in Node. Imported by their `src/*.js` subpaths: the
 * packages' default export condition is a Node entry that imports `fs`.
 * Encoding is deterministic: the same rows give the same bytes.
 *
 * It does not know where files are stored (the archive job does).
 */
import { parquetMetadataAsync, parquetReadObjects } from "hyparquet/src/index.js"
import { parquetWriteBuffer } from "hyparquet-writer/src/write.js"

/** A row of the `facts` copy, as D1 returns it. */
export interface FactRow {
  readonly tenant_id: string
  readonly fact_id: string
  readonly stream: string
  readonly sequence: number
  readonly type: string
  readonly body: string
  readonly causation_id: string
  readonly correlation_id: string
  readonly caused_by: string
  readonly created_at: string
  readonly traceparent: string | null
  /** The version of its type's schema `body` is at (absent on rows read before the copy had the column: 1). */
  readonly schema_version?: number | null
}

/** The columns of an archive file, in order. */
export const columns = ["tenant_id", "fact_id", "stream", "sequence", "type", "causation_id", "correlation_id", "caused_by", "created_at", "traceparent", "schema_version", "data"] as const

/** A byte range source: a whole buffer, or an object read by ranges. */
export interface Source {
  readonly byteLength: number
  slice(start: number, end?: number): ArrayBuffer | Promise<ArrayBuffer>
}

const bySubject = (a: FactRow, b: FactRow) =>
  a.stream < b.stream ? -1 : a.stream > b.stream ? 1 : a.sequence - b.sequence || (a.fact_id < b.fact_id ? -1 : a.fact_id > b.fact_id ? 1 : 0)

/** One Parquet file of `rows`, sorted by (stream, sequence). */
export const encode = (rows: ReadonlyArray<FactRow>): Uint8Array => {
  const sorted = [...rows].sort(bySubject)
  const text = (name: (typeof columns)[number], pick: (row: FactRow) => string) =>
    ({ name, data: sorted.map(pick), type: "STRING" as const, nullable: false })
  const buffer = parquetWriteBuffer({
    columnData: [
      text("tenant_id", (r) => r.tenant_id),
      text("fact_id", (r) => r.fact_id),
      text("stream", (r) => r.stream),
      { name: "sequence", data: sorted.map((r) => BigInt(r.sequence)), type: "INT64", nullable: false },
      text("type", (r) => r.type),
      text("causation_id", (r) => r.causation_id),
      text("correlation_id", (r) => r.correlation_id),
      text("caused_by", (r) => r.caused_by),
      text("created_at", (r) => r.created_at),
      { name: "traceparent", data: sorted.map((r) => r.traceparent), type: "STRING", nullable: true },
      { name: "schema_version", data: sorted.map((r) => r.schema_version ?? 1), type: "INT32", nullable: false },
      text("data", (r) => r.body)
    ],
    createdBy: "factline archive"
  })
  return new Uint8Array(buffer)
}

/** The fact ids a file holds; throws when the bytes are not a Parquet file of facts. */
export const factIds = async (source: Source): Promise<ReadonlyArray<string>> => {
  const metadata = await parquetMetadataAsync(source)
  const rows = await parquetReadObjects({ file: source, metadata, columns: ["fact_id"] })
  const ids = rows.map((row) => row.fact_id)
  if (ids.length !== Number(metadata.num_rows) || ids.some((id) => typeof id !== "string")) throw new Error("not an archive of facts")
  return ids as ReadonlyArray<string>
}

/**
 * Every row of a file, in file order, as written (`body` the fact's data text); throws when the bytes are not a
 * Parquet file of facts. The ledger's cold segments (ledger/ColdHistory.ts) are read back whole this way.
 */
export const rows = async (source: Source): Promise<ReadonlyArray<FactRow>> => {
  const metadata = await parquetMetadataAsync(source)
  const read = await parquetReadObjects({ file: source, metadata, columns: [...columns] })
  if (read.length !== Number(metadata.num_rows)) throw new Error("not an archive of facts")
  return read.map((row) => {
    const text = (name: string) => {
      const value = row[name]
      if (typeof value !== "string") throw new Error(`not an archive of facts: ${name} is not text`)
      return value
    }
    const traceparent = row.traceparent
    return {
      tenant_id: text("tenant_id"),
      fact_id: text("fact_id"),
      stream: text("stream"),
      sequence: Number(row.sequence),
      type: text("type"),
      body: text("data"),
      causation_id: text("causation_id"),
      correlation_id: text("correlation_id"),
      caused_by: text("caused_by"),
      created_at: text("created_at"),
      traceparent: typeof traceparent === "string" ? traceparent : null,
      schema_version: Number(row.schema_version ?? 1)
    }
  })
}
